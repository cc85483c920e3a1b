"""Mistakes that once passed every check: each is caught by one rule stated in AR-08 or
docs/adapters.md, enforced as its own invariant (docs/invariants.md)."""
from __future__ import annotations

from crashlab.model import RunState
from crashlab.reference_impl import ReferenceAdapter, effects, inbox, matrix, migrations
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
