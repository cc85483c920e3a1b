"""The recovery bootstrap, literally, in the chapter's order (AR-08 "Recovery bootstrap procedure").

Every worker runs it, the first one included: a worker knows nothing but durable state.
Steps 1-9 are here; step 10 is the decision table (transitions.py) the adapter runs
after every step. "The order prevents recovery from becoming a privilege escalation":
the versions are verified before any authority is used, cancellation is read before
ownership is taken, and the ledger is inspected before anything is planned.
"""
from __future__ import annotations

from crashlab.vocab.model import TERMINAL_STATES, RunState

from . import matrix, migrations
from .inbox import absorb
from .packet import build
from .record import RunRecord, decode
from .session import Session, StaleView

def resumed_state(record: RunRecord) -> RunState:
    """The state a new owner records first: the loaded one, except that WAITING_RETRY
    resumes the prepared effect (a retry intent, or the deadline, woke the worker) and a
    MIGRATING record whose writer died is completed by restoring the pre-migration state."""
    state = record.state
    if state is RunState.MIGRATING:
        state = RunState(record.migration["previous_state"])
    return RunState.EFFECT_PREPARED if state is RunState.WAITING_RETRY else state


def provisional(s: Session, raw: dict | None) -> RunRecord:
    """The record of a run with nothing durable yet (or one this code cannot read)."""
    identity = (raw or {}).get("identity", {})
    return RunRecord(run_id=s.run_id, task_id=identity.get("task_id", s.run_id),
                     tenant=identity.get("tenant", ""), principal=identity.get("principal", ""),
                     state=None, contract={k: s.env.get(k) for k in (
                         "schema_version", "code_version", "canonicalization_version",
                         "policy_version", "capability_version")})


async def bootstrap(s: Session) -> bool:
    """Steps 1-9. -> True when the worker owns the run and may choose a transition;
    False when it already finished (pinned, stopped, or the lease stayed held)."""
    # 1. Load the run by stable identifier from authoritative storage.
    info = await s.call("platform", s.ports.run.info())
    s.run_id, s.worker, s.env, s.services = info["run_id"], info["worker"], info["env"], info["services"]
    s.started_at = await s.now()
    loaded = await s.call("platform", s.ports.checkpoints.load())
    s.version, raw = loaded["version"], loaded["checkpoint"]

    # 2. Verify schema and contract versions before acquiring effect authority.
    terminal = raw is not None and RunState(raw["control"]["state"]) in TERMINAL_STATES
    compat = (s.behaviour.compatibility or migrations.decide)(raw, s.env)

    # 3. Read terminal and cancellation state. A terminal run does not restart.
    after = raw["control"]["event_sequence"] if raw else 0
    events = (await s.call("platform", s.ports.inbox.poll(after)))["events"]

    # 4. Acquire a new lease epoch with a conditional write.
    if not await s.acquire_lease():
        s.record = provisional(s, raw)
        await s.finish(RunState.WAITING_OPERATOR, next_owner="platform",
                       reason=f"{matrix.ROW['lease_held'].name}: another owner kept the lease "
                              f"through {matrix.LEASE_WAIT_CEILING} waits")
        return False

    # 5. Recheck that the loaded version remains current (the compare-and-set write that
    #    records this owner; or the migration record; or pin/stop without writing).
    if terminal:
        s.record = decode(raw)            # replayed by the table, never rewritten
    elif compat.disposition in ("pin", "stop"):
        return await _pin_or_stop(s, raw, compat)
    elif raw is None:
        # nothing to write yet: recheck by reading that no version appeared meanwhile
        if (await s.call("platform", s.ports.checkpoints.load()))["version"] != s.version:
            raise StaleView(matrix.ROW["stale_checkpoint"], "a checkpoint appeared after the load")
        s.record = _arrived(s, _absorb(s, provisional(s, None), events))
    elif compat.disposition == "migrate":
        migrated = (s.behaviour.migrate or migrations.migrate)(
            raw, previous_version=s.version, compat=compat, owner=s.worker, epoch=s.epoch)
        record = decode(migrated)
        await s.write_raw(migrated, record)
        # migration issues no effect and keeps the pre-migration state's meaning
        s.record = _arrived(s, _absorb(s, record, events))
        await s.commit(resumed_state(s.record))
    else:
        s.record = _arrived(s, _absorb(s, decode(raw), events))
        await s.commit(resumed_state(s.record))

    # 6. Restore budgets, deadline, and retry counters (declared ceilings are this code's).
    s.record = s.record.evolve(budgets={**s.record.budgets,
                                        "reconcile_read_ceiling": matrix.RECONCILE_READ_CEILING,
                                        "approval_request_ceiling": matrix.APPROVAL_REQUEST_CEILING})

    # 7. Validate identity, delegation, capability, and approval references: the approval
    #    must be live and bound to the frozen proposal hash (a loaded approval is not authority).
    if s.record.proposal is not None and not terminal:
        s.authority = await s.check_authority(s.record.proposal["hash"], s.record.intake["operation"])

    # 8. Revalidate volatile evidence required for the next transition: the capability
    #    profiles (lookup, key retention, consistency, delivery delay, fencing) of the services.
    for service in s.services:
        await s.describe(service)

    # 9. Inspect unresolved effect entries before planning or dispatch.
    entries = (await s.call("platform", s.ports.ledger.by_run()))["entries"]
    if s.behaviour.recover_effects is not None:
        s.ledger = s.behaviour.recover_effects(s, entries)
    else:
        for entry in entries:
            s.ledger[entry["semantic_key"]] = entry
    return True


def _absorb(s: Session, record: RunRecord, events: list) -> RunRecord:
    return (s.behaviour.absorb or absorb)(record, events).record


def _arrived(s: Session, record: RunRecord) -> RunRecord:
    """Record why this worker reread before owning the run (a retry counter of its own)."""
    if not s.rereads:
        return record
    return record.evolve(budgets={**record.budgets,
                                  "rereads": [*record.budgets.get("rereads", []), *s.rereads]})


async def _pin_or_stop(s: Session, raw: dict | None, compat: migrations.Compatibility) -> bool:
    s.record = provisional(s, raw)
    await s.release_lease()               # the pinned (or repaired) worker takes over at once
    if compat.disposition == "pin":
        await s.finish(RunState.PINNED, next_owner="platform", reason=compat.reason,
                       packet={"pinned_env": dict(compat.old), "from": dict(compat.new)})
        return False
    row = s.classify("contract", "incompatible")
    now = await s.now()
    packet = build(s, row=row, disposition=RunState.WAITING_OPERATOR, next_owner="operator",
                   reason=compat.reason, now=now)
    await s.escalate(packet)
    await s.finish(RunState.WAITING_OPERATOR, next_owner="operator", reason=compat.reason,
                   packet=packet)
    return False
