"""Model answers for the code rungs: the decision function each starter should become.
Shown by ``reveal`` only; never written into a kit."""
from __future__ import annotations

import re

SOLUTIONS = {
    "request_key": '''def request_key(prepared_key: str, attempt: int) -> str:
    """Every attempt of one semantic intent carries the key prepared before the first send."""
    return prepared_key
''',
    "resolve_unknown_resend": '''async def resolve_unknown(s, key: str) -> None:
    """Read the service by key, compare the record with the intent, record what it shows
    (or keep SENT_UNKNOWN and escalate when the read cannot answer): never send blindly."""
    await effects.reconcile(s, key)
''',
    "approval_is_live": '''def approval_is_live(answer: dict, resumed_wait: bool) -> bool:
    """Only the authority's live answer is authority; a resumed wait is not an approval."""
    return bool(answer["live"])
''',
    "compatibility": '''def compatibility(old: dict, new: dict, migration_tested: bool) -> str:
    """Replay only under the same versions; otherwise migrate with a tested migration, or stop."""
    if old == new:
        return "replay"
    return "migrate" if migration_tested else "stop"
''',
    "final_disposition": '''def final_disposition(knowledge, cancelled: bool, nothing_landed: bool) -> str:
    """What the evidence supports; cancellation never erases an effect that may remain."""
    if knowledge is None or nothing_landed or knowledge == "COMPENSATED":
        return "CANCELLED_NO_EFFECT" if cancelled else "FAILED_NO_EFFECT"
    if knowledge == "CONFIRMED":
        return "CANCELLED_EFFECT_REMAINS" if cancelled else "SUCCEEDED"
    return "CANCELLED_EFFECT_UNKNOWN" if cancelled else "FAILED_EFFECT_UNKNOWN"
''',
    "replay_disposition": '''def replay_disposition(recorded_state: str, recorded_effects: list) -> str:
    """The terminal record and the CONFIRMED ledger entry are the result: replay them."""
    return recorded_state
''',
    "dedup_key": '''def dedup_key(delivery: dict) -> str:
    """The producer's event identity: every redelivery of one event carries the same id."""
    return delivery["event_id"]
''',
    "wire_resend": '''def resolve_unknown(run, entry):
    """Read the service by key; confirm only a matching record; otherwise escalate: never resend."""
    try:
        record = lookup(run, entry)
    except PortError as error:
        return escalate(run, entry, f"lookup: {error.code}")
    if record is None:
        return escalate(run, entry, "lookup: absent")
    confirm(run, entry, record, "reservation.lookup(key)")
''',
}
SOLUTIONS["wire_confirm"] = SOLUTIONS["wire_resend"]
SOLUTIONS["resolve_unknown_confirm"] = SOLUTIONS["resolve_unknown_resend"]

PLUMBING = "# ----------------------------------------------------------------- plumbing"


def solved(starter_text: str, starter: str) -> str:
    """The starter with its editable decision replaced by the model answer."""
    model = SOLUTIONS[starter]
    name = re.search(r"def (\w+)", model).group(1)
    start = re.search(rf"^(async )?def {name}\b", starter_text, re.M).start()
    end = starter_text.index(PLUMBING)
    return starter_text[:start] + model + "\n\n" + starter_text[end:]
