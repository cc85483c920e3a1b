"""Starting adapter: how inbox deliveries are deduplicated.

Edit ONLY the function `dedup_key` (the decision this rung is about). Everything below the
plumbing line wires it into a complete adapter (the reference design with this one decision
replaced). Check it with `crashlab workshop check RUNG` from this folder.
"""


def dedup_key(delivery: dict) -> str:
    """The identity under which a delivered event is recorded (in the checkpoint) as
    processed; a later delivery with the same identity is a duplicate and causes no
    transition. delivery: {"event_id", "seq" (the inbox's delivery number), "type",
    "producer", "producer_seq", "payload", "at"}."""
    return f"{delivery['event_id']}@{delivery['seq']}"


# ----------------------------------------------------------------- plumbing (no need to edit)
from dataclasses import replace  # noqa: E402

from crashlab.reference_impl import ReferenceAdapter, inbox  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402


def _absorb(record, events):
    """Deduplicate under dedup_key; record each event under its own id (the first delivery's),
    with its key kept in the checkpoint so that a new worker deduplicates the same way."""
    first = {v["detail"]["dedup_key"]: k for k, v in record.events.items()
             if isinstance(v.get("detail"), dict) and v["detail"].get("dedup_key")}
    taken = set(record.events)
    renamed, keys = [], {}
    for e in inbox.ordered(events):
        key = str(dedup_key(dict(e)))
        if key not in first:
            recorded = e["event_id"] if e["event_id"] not in taken else f"{e['event_id']}~{e['seq']}"
            first[key] = recorded
            taken.add(recorded)
            keys[recorded] = key
        renamed.append({**e, "event_id": first[key]})
    absorbed = inbox.absorb(record, renamed)
    known = {k: ({**v, "detail": {**(v.get("detail") or {}), "dedup_key": keys[k]}} if k in keys else v)
             for k, v in absorbed.record.events.items()}
    return replace(absorbed, record=absorbed.record.evolve(events=known))


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(absorb=_absorb)
