"""Mistakes that once passed every check because nothing judged the rule they break: what a
packet or a message says, the lease and the business deadline, a definite refusal treated as
ambiguous, and an absence claimed on a read that was right by luck. Each is caught by its own
invariant (docs/invariants.md)."""
from __future__ import annotations

from crashlab.vocab.model import DISPOSITION_EFFECT_CLAIM, RunState
from crashlab.reference_impl import ReferenceAdapter, adapter, effects, matrix
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.session import Session

_AMBIGUOUS = next(row for row in matrix.ROWS if row.name == "ambiguous_effect")


# --------------------------------------------------------------------------- PKT-02, MSG-01
class _NarrativeSession(Session):
    async def call(self, phase: str, request):
        value = await super().call(phase, request)
        if request.port == "inbox" and request.op == "poll" and isinstance(value, dict):
            self.raw_inbox = [*getattr(self, "raw_inbox", []), *(value.get("events") or [])]
        return value

    async def escalate(self, packet: dict) -> str:
        return await super().escalate({**packet, "assessment": "the reservation probably went through; "
                                                               "the operator can likely close it",
                                       "requester_context": [e.get("payload") for e in
                                                             getattr(self, "raw_inbox", [])]})


class SpeculativePacket(ReferenceAdapter):
    """Escalates a decision packet that adds the model's guess about the outcome and the raw
    payloads of the inbox events it read, beside the typed panels."""

    behaviour = Behaviour(session=_NarrativeSession)


class _RetryAdviceSession(Session):
    async def escalate(self, packet: dict) -> str:
        rec = packet.get("recommended") or {}
        if rec.get("action") == "STOP" and rec.get("effect") == "unknown":
            packet = {**packet, "recommended": {"action": "RETRY", "semantic_key": rec.get("semantic_key"),
                                                "reason": "send it again under the same key"}}
        return await super().escalate(packet)


class RetryUnknownEffect(ReferenceAdapter):
    """Recommends that the operator send again an effect whose outcome is unknown on a service
    that offers no read to settle it."""

    behaviour = Behaviour(session=_RetryAdviceSession)


class _NewKeySession(Session):
    async def escalate(self, packet: dict) -> str:
        rec = packet.get("recommended") or {}
        if rec.get("action") == "STOP" and rec.get("effect") == "unknown":
            packet = {**packet, "alternatives": [*(packet.get("alternatives") or ()),
                                                 {"action": "NEW_KEY", "semantic_key": rec.get("semantic_key"),
                                                  "requires": "a fresh key so that the send can proceed"}]}
        return await super().escalate(packet)


class OfferNewKey(ReferenceAdapter):
    """Where it stops with an effect's outcome unknown, offers the operator, beside the
    reference's packet, to send that effect again under a new key."""

    behaviour = Behaviour(session=_NewKeySession)


class _ReassuringSession(Session):
    async def finish(self, disposition: RunState, *, reason: str, **rest) -> None:
        if DISPOSITION_EFFECT_CLAIM.get(disposition) == "unknown":
            reason = "your reservation is confirmed; we will follow up"
        await super().finish(disposition, reason=reason, **rest)


class ReassuringMessage(ReferenceAdapter):
    """Reports an unknown outcome honestly in its disposition but tells the requester that the
    reservation is confirmed."""

    behaviour = Behaviour(session=_ReassuringSession)


# --------------------------------------------------------------------------- LEASE-01, DEAD-02, DEAD-01
class _DayLongLeaseSession(Session):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lease_ttl = 24 * 3_600_000

    async def describe(self, service: str) -> dict:
        profile = await super().describe(service)
        self.lease_ttl = 24 * 3_600_000
        return profile


class DayLongLease(ReferenceAdapter):
    """Holds its lease for 24 hours so that it never has to renew it."""

    behaviour = Behaviour(session=_DayLongLeaseSession)


async def _own_deadline(s, f, t) -> None:
    intake = s.record.intake
    await effects.commit(s, RunState.VALIDATED, deadline=intake["at"] + matrix.DEFAULT_DEADLINE_MS,
                         task_id=f"{s.run_id}/{intake['operation']}")


class DeadlineDropped(ReferenceAdapter):
    """Drops the business deadline the intake names and works to its own default deadline
    (30 minutes) instead."""

    behaviour = Behaviour(actions={"validate_intake": _own_deadline})


def _wait_for_operator(s) -> RunState:
    disposition = adapter.truthful_disposition(s)
    return RunState.WAITING_OPERATOR if DISPOSITION_EFFECT_CLAIM.get(disposition) == "unknown" else disposition


class WaitsPastDeadline(ReferenceAdapter):
    """Hands a run whose effect stays unknown to an operator as WAITING_OPERATOR and never
    closes it, even once the business deadline has passed."""

    behaviour = Behaviour(disposition=_wait_for_operator)


# --------------------------------------------------------------------------- CLS-03, REC-02
class PreSendAsAmbiguous(ReferenceAdapter):
    """Treats a connection refused before the request left (a definite pre-send failure) like
    a timeout after it may have left, and reconciles it before sending again."""

    behaviour = Behaviour(matrix={("dispatch", code): _AMBIGUOUS
                                  for code in ("refused", "timeout_before_send", "unavailable")})


def _answer_only(entry, profile, as_of, now, started_at):
    if profile.get("idempotency") not in ("semantic", "key_only") or profile.get("lookup") != "by_key":
        return effects.judge_negative(entry, profile, as_of, now, started_at)
    if now - entry["attempts"][0]["at"] >= profile["retention_ms"]:
        return "beyond_retention", 0
    horizon = effects.send_horizon(entry, started_at)
    return ("negative_too_early", horizon - as_of + 1) if as_of < horizon else ("absent", 0)


class EarlyAbsenceClaim(ReferenceAdapter):
    """Takes a negative lookup by key on a deduplicating service as absence as soon as it covers
    the lost answer, which is enough to resend under that key, and also to claim there is no effect."""

    behaviour = Behaviour(judge_negative=_answer_only)
