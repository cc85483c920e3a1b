"""The reference AR-08 v0.1.0 adapter (AR-08 "Construct AR-08 v0.1.0").

One worker's life: the recovery bootstrap (bootstrap.py), then, until the worker
finishes, observe the inbox and the clock, choose one declared transition from the
decision table (transitions.py) and perform it. Each action below does one step and
leaves durable evidence (a ledger entry, a checkpoint, a finish) from which the table
picks the next one, so a crash between any two port calls resumes at the same point.
"""
from __future__ import annotations

from typing import Awaitable, Callable

from crashlab.vocab.model import RUN_TRANSITIONS, Knowledge, RunState

from . import canonical, effects, matrix
from .behaviour import REFERENCE, Behaviour
from .bootstrap import bootstrap
from .effects import Role, entry_of, fact_of
from .inbox import absorb, answered_requests, retry_intents
from .matrix import ROW
from .packet import build
from .session import FencedOut, Session, StaleView, StoreDown
from .transitions import Facts, Transition, choose

_K, _S = Knowledge, RunState


class ReferenceAdapter:
    #: Every decision at the reference's default (see behaviour.py for the seams).
    behaviour: Behaviour = REFERENCE

    async def run(self, ports) -> None:
        b = self.behaviour
        row = ROW["stale_checkpoint"]
        rereads: tuple[str, ...] = ()
        for _ in range(row.attempt_ceiling):
            s = (b.session or Session)(ports, rereads, b)   # a reread starts from durable state only
            try:
                if await bootstrap(s):
                    while not s.finished:
                        facts = await observe(s)
                        transition = choose(facts) if b.table is None else choose(facts, b.table)
                        await (b.actions.get(transition.action) or ACTIONS[transition.action])(
                            s, facts, transition)
                return
            except StaleView as stale:             # no other owner: reread and reclassify
                rereads += (stale.row.name,)
            except FencedOut as fenced:
                # another owner exists. Write nothing, dispatch nothing; the finish is
                # recorded by the platform as stale (not accepted).
                await s.finish(_S.WAITING_OPERATOR, next_owner="the current lease owner",
                               reason=f"{fenced.row.name}: {fenced.error.message}")
                return
            except StoreDown as down:
                await _stop(s, down.row, f"{down.row.name}: {down.call.port}.{down.call.op} "
                                         f"{down.error.code}")
                return
        await _stop(s, row, f"{row.name}: the checkpoint kept moving under this lease holder")


async def _stop(s: Session, row: matrix.Row, reason: str) -> None:
    """The platform cannot support the run: escalate what is known and wait for an operator."""
    try:
        packet = build(s, row=row, disposition=_S.WAITING_OPERATOR, next_owner="platform",
                       reason=reason, now=await s.now()) if s.record else None
        if packet is not None:
            await s.escalate(packet)
    except StoreDown:
        packet = None
    await s.finish(_S.WAITING_OPERATOR, next_owner="platform", reason=reason, packet=packet)


# --------------------------------------------------------------------------- observe
async def observe(s: Session) -> Facts:
    """Read the inbox (cancellation at every position), re-ask authority when an
    approval, revocation or capability event arrived, and gather the facts."""
    polled = await s.call("platform", s.ports.inbox.poll(s.record.event_sequence))
    absorbed = (s.behaviour.absorb or absorb)(s.record, polled["events"])
    s.record = absorbed.record
    rec = s.record
    if rec.proposal is not None and (s.authority is None or absorbed.authority_changed):
        s.authority = await s.check_authority(rec.proposal["hash"], rec.intake["operation"])
    now = await s.now()
    intake = rec.intake
    problems = ("no intake event",) if intake is None else canonical.validate(
        intake["operation"], intake["intent"])
    facts = {role: (fact_of(entry) if (entry := entry_of(s, role)) else None)
             for role in Role} if intake is not None else dict.fromkeys(Role)
    primary = facts[Role.PRIMARY]
    claimed = primary.claimed_retries if primary else ()
    return Facts(
        state=rec.state, intake_problems=problems, cancelled=rec.cancellation["requested"],
        proposal_frozen=rec.proposal is not None,
        authority_row=None if s.authority is None or s.authority["live"]
        else s.classify("authority", s.authority["reason"]).name,
        approval_requests=rec.approval.get("requests", 0),
        approval_pending=bool(rec.approval.get("request_ids"))
        and rec.approval["request_ids"][-1] not in answered_requests(rec),
        primary=primary, notification=facts[Role.NOTIFICATION], compensation=facts[Role.COMPENSATION],
        notify=bool(intake and intake["notify"] and "notification" in s.services
                    and intake["service"] != "notification"),
        pending_retry=next((r for r in retry_intents(rec) if r not in claimed), None),
        deadline_passed=rec.deadline is not None and now >= rec.deadline,
        retry_past_deadline=(primary is not None and primary.retry_at is not None
                             and rec.deadline is not None and primary.retry_at >= rec.deadline))


# --------------------------------------------------------------------------- actions
async def validate_intake(s: Session, f: Facts, t: Transition) -> None:
    intake = s.record.intake
    # the business deadline is the intake's, or none: a run without one is bounded by its
    # attempt and read ceilings, and its decision packet says it has no deadline
    await effects.commit(s, _S.VALIDATED, deadline=intake["deadline"],
                         task_id=f"{s.run_id}/{intake['operation']}")


async def propose(s: Session, f: Facts, t: Transition) -> None:
    """Freeze the proposal: its hash binds the approval to this exact intent."""
    intake, version = s.record.intake, s.record.contract["canonicalization_version"]
    proposal = {"hash": canonical.proposal_hash(intake["operation"], intake["intent"], version),
                "operation": intake["operation"], "service": intake["service"],
                "canonicalization_version": version}
    await effects.commit(s, _S.PROPOSED, proposal=proposal)
    s.authority = None                     # ask authority.check about the new hash


async def record_approval(s: Session, f: Facts, t: Transition) -> None:
    a = s.authority
    await effects.commit(s, _S.APPROVED, approval={
        **s.record.approval, "approval_id": a["approval_id"], "expires_at": a["expires_at"],
        "capability_version": a["capability_version"], "proposal_hash": s.record.proposal["hash"]})


async def _enter_wait(s: Session, state: RunState, **changes) -> None:
    """Checkpoint a durable wait (through EFFECT_PREPARED when the current state cannot
    go there directly: nothing is in flight when the run waits)."""
    if state is s.record.state and not changes:
        return                                 # already recorded (the owner's bootstrap write)
    if state is not s.record.state and state not in RUN_TRANSITIONS[s.record.state]:
        await effects.commit(s, _S.EFFECT_PREPARED)
    await effects.commit(s, state, **changes)


async def _wait(s: Session, state: RunState, next_owner: str, reason: str) -> None:
    await s.release_lease()
    await s.finish(state, next_owner=next_owner, reason=reason, wake_at=s.record.deadline)


async def request_approval(s: Session, f: Facts, t: Transition) -> None:
    """Ask for approval of the frozen proposal; a re-request after expiry is a new human
    decision, never a refresh. Then wait durably (checkpoint before the human wait)."""
    rec = s.record
    answer = await s.call("platform", s.ports.authority.request(
        rec.proposal["hash"], rec.intake["operation"],
        {"goal": rec.intake["intent"], "reason": f.authority_row}))
    approval = {**rec.approval, "requests": f.approval_requests + 1,
                "request_ids": [*rec.approval.get("request_ids", []), answer["request_id"]]}
    await _enter_wait(s, _S.WAITING_HUMAN, approval=approval)
    await _wait(s, _S.WAITING_HUMAN, "approver", f"{f.authority_row}: approval requested "
                f"({answer['request_id']}) for {rec.proposal['hash']}")


async def await_approval(s: Session, f: Facts, t: Transition) -> None:
    await _enter_wait(s, _S.WAITING_HUMAN)
    await _wait(s, _S.WAITING_HUMAN, "approver",
                f"approval_pending: still no approval bound to {s.record.proposal['hash']}")


async def wait_retry(s: Session, f: Facts, t: Transition) -> None:
    row = s.classify("budget", "attempts")
    await _enter_wait(s, _S.WAITING_RETRY)
    await _wait(s, _S.WAITING_RETRY, "operator",
                f"{row.name}: {f.primary.attempts} attempts failed before send; "
                "a deliberate retry intent admits one more")


async def prepare_primary(s: Session, f: Facts, t: Transition) -> None:
    await effects.prepare_primary(s)


async def dispatch_primary(s: Session, f: Facts, t: Transition) -> None:
    owed = s.owed_backoff.pop(f.primary.key, None)
    if owed is not None:
        # this worker's last attempt reached the ceiling and a deliberate retry admits another:
        # back off first, then observe again (a cancellation may arrive meanwhile)
        n, what, floor = owed
        await s.backoff(n, what, floor, s.record.deadline)
        return
    retry_at = f.primary.retry_at
    if retry_at is not None and s.backed_off.get(f.primary.key) != f.primary.attempts:
        now = await s.now()
        if now < retry_at:
            # a retry-after (or backoff) recorded in the ledger binds every worker of the run,
            # not only the one that saw it: a restarted worker waits it out, then observes again
            await s.backoff(f.primary.attempts, f"recorded retry-after {s.ledger[f.primary.key]['service']}",
                            retry_at - now, s.record.deadline)
            return
    claim = f.pending_retry if f.primary.attempts >= f.primary.ceiling else None
    await effects.dispatch(s, f.primary.key, retry_id=claim)


async def reconcile_primary(s: Session, f: Facts, t: Transition) -> None:
    await effects.reconcile(s, f.primary.key)


async def record_confirmed(s: Session, f: Facts, t: Transition) -> None:
    """The ledger holds the confirmed effect (every intent field was verified before it
    was appended); advance the checkpoint and replay the result, never the effect. A
    confirmation an earlier owner recorded is verified first: when the service now
    disagrees, the conflict is escalated under a named owner, never resolved by choosing
    the convenient source (AR-08 "Recovery when dependencies disagree")."""
    if s.ledger[f.primary.key]["lease_epoch"] != s.epoch:
        s.contradiction = await effects.verify_recorded(s, f.primary.key)
        if s.contradiction is not None:
            await finish_run(s, s.classify("read", "mismatch"))
            return
    await effects.commit(s, _S.EFFECT_CONFIRMED)


async def prepare_notification(s: Session, f: Facts, t: Transition) -> None:
    await effects.prepare_notification(s)


async def dispatch_notification(s: Session, f: Facts, t: Transition) -> None:
    await effects.dispatch(s, f.notification.key)


async def reconcile_notification(s: Session, f: Facts, t: Transition) -> None:
    await effects.reconcile(s, f.notification.key)


async def compensate(s: Session, f: Facts, t: Transition) -> None:
    refused = await effects.compensate(s)
    if refused is not None:
        await finish_run(s, refused)


async def dispatch_compensation(s: Session, f: Facts, t: Transition) -> None:
    await effects.dispatch(s, f.compensation.key)


async def reconcile_compensation(s: Session, f: Facts, t: Transition) -> None:
    await effects.reconcile(s, f.compensation.key)


async def replay_terminal(s: Session, f: Facts, t: Transition) -> None:
    """A terminal run does not restart: report the recorded disposition again."""
    outcome = s.record.outcome
    await s.finish(s.record.state, next_owner=outcome["next_owner"],
                   reason=f"replayed terminal record: {outcome['reason']}")


async def finish(s: Session, f: Facts, t: Transition) -> None:
    await finish_run(s, s.row(t.row(f)))


# --------------------------------------------------------------------------- the terminal
def truthful_disposition(s: Session) -> RunState:
    """What the evidence supports ("Classify before retrying": the terminal column)."""
    cancelled = s.record.cancellation["requested"]
    entry = entry_of(s, Role.PRIMARY) if s.record.intake else None
    primary = fact_of(entry) if entry else None
    if primary is None or primary.nothing_landed or primary.knowledge is _K.COMPENSATED:
        return _S.CANCELLED_NO_EFFECT if cancelled else _S.FAILED_NO_EFFECT
    if primary.knowledge is _K.CONFIRMED and s.contradiction is None:
        return _S.CANCELLED_EFFECT_REMAINS if cancelled else _S.SUCCEEDED
    return _S.CANCELLED_EFFECT_UNKNOWN if cancelled else _S.FAILED_EFFECT_UNKNOWN


async def finish_run(s: Session, row: matrix.Row) -> None:
    """Close what was never sent, then checkpoint and report the truthful terminal;
    escalate with the decision packet whenever something is unresolved or remains."""
    for entry in list(s.ledger.values()):
        if fact_of(entry).sendable:
            await effects.close_unsent(s, entry, row)
    disposition = (s.behaviour.disposition or truthful_disposition)(s)
    unresolved = [e["semantic_key"] for e in s.ledger.values()
                  if e["knowledge"] in (_K.SENT_UNKNOWN.value, _K.COMPENSATION_PROPOSED.value)]
    # from the evidence, not from the disposition reported: a disposition that understates what
    # remains is its own fault, and the effect still gets an owner and a packet
    remains = _S.CANCELLED_EFFECT_REMAINS in (disposition, truthful_disposition(s))
    next_owner = row.escalation or ("operator" if unresolved or remains else None)
    reason = f"{row.name}: {row.trigger}" + (f"; unresolved: {', '.join(unresolved)}" if unresolved else "")
    packet = ticket = None
    if next_owner is not None:
        packet = build(s, row=row, disposition=disposition, next_owner=next_owner, reason=reason,
                       now=await s.now())
        ticket = await s.escalate(packet)
    await effects.commit(s, disposition, outcome={"disposition": disposition.value, "row": row.name,
                                                  "reason": reason, "next_owner": next_owner,
                                                  "ticket": ticket})
    await s.finish(disposition, next_owner=next_owner, reason=reason, packet=packet)


ACTIONS: dict[str, Callable[[Session, Facts, Transition], Awaitable[None]]] = {
    fn.__name__: fn for fn in (
        validate_intake, propose, record_approval, request_approval, await_approval, wait_retry,
        prepare_primary, dispatch_primary, reconcile_primary, record_confirmed, prepare_notification,
        dispatch_notification, reconcile_notification, compensate, dispatch_compensation,
        reconcile_compensation, replay_terminal, finish)}
