"""Knowledge mistakes: upgrading what the ledger asserts without the evidence the
transition needs (AR-08 "Evidence interpretation drill", "Effect ledger and semantic
identity", "Reconciliation is a first-class capability")."""
from __future__ import annotations

from crashlab.vocab.model import RUN_TRANSITIONS, Knowledge, RunState
from crashlab.reference_impl import ReferenceAdapter, effects
from crashlab.reference_impl.adapter import finish_run, truthful_disposition
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.effects import evolve
from crashlab.reference_impl.matrix import Action, Row

_K, _S = Knowledge, RunState

_DEADLINE_IS_FAILURE = Row(
    name="deadline_is_failure", trigger="the effect is still unresolved when the deadline passes",
    evidence="the deadline", retry_owner="none", attempt_ceiling=None, deadline="reached",
    reconciliation_read="none", action=Action.STOP, escalation=None, terminal="FAILED_NO_EFFECT",
    knowledge=_K.REJECTED)


class DeadlineAsFailure(ReferenceAdapter):
    """When reconciliation has not resolved a SENT_UNKNOWN reservation by the deadline (or
    the read stays down), it records the effect as REJECTED and reports no effect."""

    behaviour = Behaviour(matrix={("read", "unresolved"): _DEADLINE_IS_FAILURE,
                                  ("read", "down"): _DEADLINE_IS_FAILURE})


def _claims_success(s) -> RunState:
    disposition = truthful_disposition(s)
    return {_S.FAILED_EFFECT_UNKNOWN: _S.SUCCEEDED,
            _S.CANCELLED_EFFECT_UNKNOWN: _S.CANCELLED_EFFECT_REMAINS}.get(disposition, disposition)


async def _finish_as_done(s, f, t) -> None:
    """Checkpoint the effect as confirmed before reporting the claimed success."""
    claim, state = _claims_success(s), s.record.state or _S.INTAKE
    if claim not in RUN_TRANSITIONS[state] and _S.EFFECT_CONFIRMED in RUN_TRANSITIONS[state]:
        await effects.commit(s, _S.EFFECT_CONFIRMED)
    await finish_run(s, s.row(t.row(f)))


class ExactlyOnceClaim(ReferenceAdapter):
    """Reports the reservation as done whenever its outcome cannot be known (the request
    was sent, so exactly-once delivery is assumed), while the ledger still says SENT_UNKNOWN."""

    behaviour = Behaviour(disposition=_claims_success, actions={"finish": _finish_as_done})


async def _confirm_from_send_record(s, f, t) -> None:
    """An entry with a recorded send is taken as done: CONFIRMED without a read."""
    entry = s.ledger[f.primary.key]
    await s.commit(_S.RECONCILING)
    await s.append(evolve(s, entry, _K.CONFIRMED, "the ledger says SENT",
                          evidence=[*entry["evidence"], f"ledger: attempt {len(entry['attempts'])} sent"]))
    await effects.commit(s, _S.EFFECT_CONFIRMED)


class ConfirmedFromSendRecord(ReferenceAdapter):
    """Records a reservation whose attempt is SENT_UNKNOWN in the ledger as CONFIRMED on
    the strength of the local send record alone, without any read of the service."""

    behaviour = Behaviour(actions={"reconcile_primary": _confirm_from_send_record})


async def _apply_callback_first(s, f, t) -> None:
    """A completion callback in the inbox is applied as the confirmation."""
    callbacks = [ev["detail"] for ev in s.record.events.values() if ev["type"] == "callback"]
    if not callbacks:
        await effects.reconcile(s, f.primary.key)
        return
    entry = s.ledger[f.primary.key]
    await effects.commit(s, _S.RECONCILING)
    await s.append(evolve(s, entry, _K.CONFIRMED, "completion callback",
                          remote_ref=callbacks[-1]["ref"] or "callback",
                          evidence=[*entry["evidence"], "inbox: completion callback"]))
    await effects.commit(s, _S.EFFECT_CONFIRMED)


class LateCallbackApplied(ReferenceAdapter):
    """Applies a completion callback found in the inbox as the confirmation of an
    unresolved reservation, instead of reconciling it with an authoritative read."""

    behaviour = Behaviour(actions={"reconcile_primary": _apply_callback_first})


def _negative_is_absence(entry, profile, as_of, now, started_at):
    if now - entry["attempts"][0]["at"] >= profile["retention_ms"]:
        return "beyond_retention", 0
    return "absent", 0


class EventualNegativeAsAbsence(ReferenceAdapter):
    """Takes the first negative lookup as proof that the reservation never happened and
    redispatches, although the service is eventually consistent and a late arrival may
    still land."""

    behaviour = Behaviour(judge_negative=_negative_is_absence)


def _ignore_retention(entry, profile, as_of, now, started_at):
    code, wait = effects.judge_negative(entry, profile, as_of, now, started_at)
    if code != "beyond_retention":
        return code, wait
    horizon = effects.send_horizon(entry, started_at) + profile["max_delivery_delay_ms"]
    return ("absent", 0) if as_of >= horizon else ("negative_too_early", horizon - as_of + 1)


class RetentionBlindRedispatch(ReferenceAdapter):
    """Treats a negative lookup as authoritative absence even after the provider's key
    retention has expired, and redispatches under the same key."""

    behaviour = Behaviour(judge_negative=_ignore_retention)
