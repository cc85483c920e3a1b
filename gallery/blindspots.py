"""Mistakes that once passed every check: each is caught by one rule stated in AR-08 or
docs/adapters.md, enforced as its own invariant (docs/invariants.md)."""
from __future__ import annotations

from crashlab.vocab.model import RunState
from crashlab.reference_impl import ReferenceAdapter, adapter, effects, inbox, matrix, migrations
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.inbox import Absorbed
from crashlab.reference_impl.session import Session


class _OwnerlessPacketSession(Session):
    async def escalate(self, packet: dict) -> str:
        return await super().escalate({k: v for k, v in packet.items() if k != "next_owner"})


class PacketWithoutOwner(ReferenceAdapter):
    """Escalates a decision packet that names no accountable owner, relying on the finish
    record to say who owns the run next."""

    behaviour = Behaviour(session=_OwnerlessPacketSession)


class _ConstantFenceSession(Session):
    async def send(self, service: str, op: str, args: dict):
        if "fence" in args:
            args = {**args, "fence": 1}
        return await super().send(service, op, args)


class ConstantFence(ReferenceAdapter):
    """Sends the fencing token of the run's first lease (epoch 1) with every effect call
    instead of the sender's current lease epoch."""

    behaviour = Behaviour(session=_ConstantFenceSession)


class _FirstAttemptOnlySession(Session):
    async def append(self, entry: dict) -> None:
        known = self.ledger.get(entry["semantic_key"])
        if entry["knowledge"] == "SENT_UNKNOWN" and known is not None and known["attempts"] \
                and len(entry["attempts"]) > len(known["attempts"]):
            self.ledger[entry["semantic_key"]] = entry      # a later attempt: kept in memory only
            return
        await super().append(entry)


class SentUnknownOnce(ReferenceAdapter):
    """Records SENT_UNKNOWN before the first attempt of a key only, treating every later
    attempt as covered by that entry."""

    behaviour = Behaviour(session=_FirstAttemptOnlySession)


class _FixedBackoffSession(Session):
    async def backoff(self, n: int, what: str, floor_ms: int = 0, deadline: int | None = None) -> None:
        delay = max(floor_ms, min(matrix.BACKOFF_CAP_MS, matrix.BACKOFF_BASE_MS * 2 ** (n - 1)))
        await self.sleep(delay + matrix.JITTER_MAX_MS // 2, f"backoff {what} #{n}", deadline)


class FixedJitter(ReferenceAdapter):
    """Backs off by the exponential delay plus a fixed jitter constant instead of a seeded
    draw from random.draw."""

    behaviour = Behaviour(session=_FixedBackoffSession)


def _silent_duplicates(record, events) -> Absorbed:
    """Deduplicate by event id, but keep no record of the redeliveries."""
    absorbed = inbox.absorb(record, events)
    kept = {k: {**v, "duplicates": []} for k, v in absorbed.record.events.items()}
    return Absorbed(record=absorbed.record.evolve(events=kept), authority_changed=absorbed.authority_changed)


class SilentDuplicates(ReferenceAdapter):
    """Drops a redelivered event by its event id without recording that the duplicate
    arrived or what was done with it."""

    behaviour = Behaviour(absorb=_silent_duplicates)


def _forget_retry_after(s, entries: list[dict]) -> dict[str, dict]:
    """The latest entry per key, without the retry-after its observations recorded."""
    latest: dict[str, dict] = {}
    for entry in entries:
        latest[entry["semantic_key"]] = entry
    return {k: {**e, "observations": [{**o, "retry_after_ms": None} for o in e["observations"]]}
            for k, e in latest.items()}


class RetryAfterForgottenOnRestart(ReferenceAdapter):
    """A restarted worker rebuilds its effect entries from the ledger without the
    retry-after the throttled attempt recorded, so it waits only its own backoff."""

    behaviour = Behaviour(recover_effects=_forget_retry_after)


def _pin_new_versions(checkpoint, env):
    compat = migrations.decide(checkpoint, env)
    if compat.disposition in ("migrate", "pin"):
        return migrations.Compatibility(disposition="pin", old=compat.new, new=compat.new,
                                        reason=compat.reason + "; pinned")
    return compat


class PinNamesNewVersions(ReferenceAdapter):
    """Pins a run whose checkpoint predates a deployment, but names the new code's versions
    as the ones to pin."""

    behaviour = Behaviour(compatibility=_pin_new_versions)


async def _replay_recorded_confirmation(s, f, t) -> None:
    """Advance the checkpoint on the ledger's CONFIRMED alone, whoever recorded it."""
    await effects.commit(s, RunState.EFFECT_CONFIRMED)


class LedgerOverService(ReferenceAdapter):
    """A restarted worker that finds the reservation CONFIRMED in the ledger reports success
    from that record alone, without verifying the hold at the service."""

    behaviour = Behaviour(actions={"record_confirmed": _replay_recorded_confirmation})


class SameKeyRecordAdopted(ReferenceAdapter):
    """A lookup that finds a record under the run's key is taken as the run's own effect,
    without comparing the record's parameters with the intent."""

    behaviour = Behaviour(matrix={("read", "mismatch"): matrix.ROW["known_completion"]})


async def _cancel_terminal_run(s, f, t) -> None:
    """On a terminal record, a cancellation found in the inbox becomes the run's outcome."""
    events = (await s.call("platform", s.ports.inbox.poll(0)))["events"]
    if not any(e["type"] == "cancel" for e in events):
        await adapter.replay_terminal(s, f, t)
        return
    await s.finish(RunState.CANCELLED_EFFECT_REMAINS, next_owner="operator",
                   reason="cancelled after success: the hold remains")


class CancellationRewritesTerminal(ReferenceAdapter):
    """A worker woken by a cancellation that arrives after the run already succeeded reports
    the run cancelled (the hold remaining) instead of replaying its terminal record."""

    behaviour = Behaviour(actions={"replay_terminal": _cancel_terminal_run})


def _schema_only(checkpoint, env):
    """Compatibility judged on the storage schema and canonicalization alone."""
    if checkpoint is not None:
        contract = {**checkpoint["contract"], "policy_version": env.get("policy_version"),
                    "capability_version": env.get("capability_version")}
        checkpoint = {**checkpoint, "contract": contract}
    return migrations.decide(checkpoint, env)


class PolicyBlindResume(ReferenceAdapter):
    """Treats a deployment as compatible whenever the checkpoint still parses and hashes the
    same, ignoring a changed policy or capability version: the old proposal is dispatched
    under the new code's authority checks."""

    behaviour = Behaviour(compatibility=_schema_only)


class ConflictReadAsAbsence(ReferenceAdapter):
    """A read that returns a record under the run's key with other parameters is taken as
    proof that the run's own request never landed, and the key is sent again."""

    behaviour = Behaviour(matrix={("read", "mismatch"): matrix.ROW["authoritative_absence"]})
