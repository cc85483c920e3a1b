"""Recovery mistakes: where a restarted worker takes its view of the run from (AR-08
"Checkpoint identity and ownership", "Late, duplicate, and reordered events")."""
from __future__ import annotations

from crashlab.vocab.model import RunState
from crashlab.reference_impl import ReferenceAdapter, inbox
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.effects import new_entry

_S = RunState
_MID_EFFECT = (_S.EFFECT_PREPARED, _S.EFFECT_IN_FLIGHT, _S.RECONCILING, _S.WAITING_RETRY)


def _from_transcript(s, entries: list[dict]) -> dict[str, dict]:
    """The run's effect as the replayed input describes it: the intake asked for it and no
    reply was seen, so it is still to be done. The ledger's entries are not consulted."""
    rec = s.record
    if rec.intake is None or rec.proposal is None or rec.state not in _MID_EFFECT:
        return {e["semantic_key"]: e for e in entries}
    intent = {**rec.intake["intent"], "proposal_hash": rec.proposal["hash"]}
    derived = new_entry(s, kind="effect", service=rec.intake["service"], operation=rec.intake["operation"],
                        intent=intent, version=rec.proposal["canonicalization_version"])
    return {derived["semantic_key"]: derived}


class TranscriptRecovery(ReferenceAdapter):
    """A restarted worker re-derives the pending reservation from the replayed intake
    (the request is there, no reply is) instead of reading the effect ledger, and sends it."""

    behaviour = Behaviour(recover_effects=_from_transcript)


def _absorb_each_delivery(record, events):
    """Deduplicate on the delivery sequence number instead of the event id: a redelivered
    event is a new event."""
    renamed = [{**e, "event_id": f"{e['event_id']}@{e['seq']}"} for e in events]
    return inbox.absorb(record, renamed)


class DuplicateEventTwice(ReferenceAdapter):
    """Deduplicates inbox events by delivery sequence number instead of event id, so a
    redelivered event is processed again as a new one."""

    behaviour = Behaviour(absorb=_absorb_each_delivery)
