"""Cancellation and compensation mistakes (AR-08 "Cancellation races", "Compensation as
forward recovery", "Common durability traps")."""
from __future__ import annotations

from crashlab.vocab.model import TERMINAL_STATES, Knowledge, RunState
from crashlab.reference_impl import ReferenceAdapter
from crashlab.reference_impl.adapter import truthful_disposition
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.inbox import absorb
from crashlab.reference_impl.session import Session
from crashlab.reference_impl.transitions import TABLE, Transition

_K, _S = Knowledge, RunState


def _stop_on_cancel(f) -> bool:
    return (f.cancelled and f.state not in TERMINAL_STATES and f.primary is not None
            and f.primary.knowledge is _K.SENT_UNKNOWN)


def _cancelled_is_no_effect(s) -> RunState:
    disposition = truthful_disposition(s)
    return _S.CANCELLED_NO_EFFECT if disposition is _S.CANCELLED_EFFECT_UNKNOWN else disposition


class CancellationTheater(ReferenceAdapter):
    """On cancellation it stops local work and reports the run cancelled with no effect,
    without reconciling the reservation that is still in flight."""

    behaviour = Behaviour(
        table=(Transition(name="cancel_stops_local_work", section="(the mistake)", when=_stop_on_cancel,
                          action="finish", row=lambda f: "cancellation"),) + TABLE,
        disposition=_cancelled_is_no_effect)


class _RollbackSession(Session):
    """A confirmed release marks the original reservation as never having happened."""

    async def append(self, entry):
        if entry["kind"] == "effect" and entry["knowledge"] == _K.COMPENSATED.value:
            entry = {**entry, "knowledge": _K.REJECTED.value, "note": f"rolled back: {entry['note']}"}
        await super().append(entry)


class CompensationAsRollback(ReferenceAdapter):
    """After a successful release it rewrites the original reservation's ledger entry to
    REJECTED ("rolled back") and reports the run as cancelled with no effect."""

    behaviour = Behaviour(session=_RollbackSession)


def _absorb_without_cancel(record, events):
    """Every delivery is read and recorded; a cancellation is recorded as read and then ignored."""
    kept = [e for e in events if e["type"] != "cancel"]
    absorbed = absorb(record, kept)
    known = dict(absorbed.record.events)
    for event in events:
        if event["type"] == "cancel" and event["event_id"] not in known:
            known[event["event_id"]] = {"seq": event["seq"], "type": "cancel", "duplicates": [], "detail": {},
                                        "disposition": "read: the run goes on (cancellation not applied)"}
    return type(absorbed)(record=absorbed.record.evolve(events=known), authority_changed=absorbed.authority_changed)


class IgnoresCancellation(ReferenceAdapter):
    """It reads the cancellation from its inbox and goes on: the reservation is sent after the
    user cancelled, and the run ends as if no one had."""

    behaviour = Behaviour(absorb=_absorb_without_cancel)
