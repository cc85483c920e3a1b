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
from crashlab.reference_impl import ReferenceAdapter, inbox  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402


def _absorb(record, events):
    return inbox.absorb(record, [{**e, "event_id": dedup_key(dict(e))} for e in events])


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(absorb=_absorb)
