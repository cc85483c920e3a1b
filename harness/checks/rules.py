"""Which rule each finding breaks: the rubric point it costs, and the chapter's scoring rules.

* A scenario expectation miss (EXP-*) costs the point its ``expect.rules`` entry names, and
  carries that rule's source and quote, the expected outcomes and the observed one. A miss
  without a rule costs the point of its kind (:data:`KIND_POINT`).
* A blind retry (RETRY-01) is an automatic failure only when the resend could duplicate
  the effect, decided from the service profile the adapter could read (``describe()``):
  no idempotency, the key's retention lapsed, a different key, or a changed intent.
  Otherwise it costs the classification point (C3) and nothing more.
* A dispatch by a worker that was not the live owner (OWN-01, OWN-02) means two recovery
  workers could cause effects at once: the ownership category scores zero.
* A key that does not define the intent caps effect correctness at one point: KEY-01 (several
  keys for one intent: from an attempt number, a timestamp, a fresh id) or KEY-02 across runs
  (one key computed for two runs' different intents: a field such as the tenant left out). A
  key reused within one run after its intent changed is changed-intent reuse (E3), not a key
  without defined intent.
"""
from __future__ import annotations

import re
from typing import Any

from ..vocab.model import is_dispatch
from .index import TraceIndex

#: The point an expectation miss costs when the scenario names no rule for it.
KIND_POINT: dict[str, str] = {"dispositions": "D1", "evidence": "C2", "remote_effects": "E2", "absent": "C2",
                              "disposition_at": "D1", "violations": "D1", "verdict": "D1"}
#: The expectation field each EXP-* check reads.
EXPECTATION_FIELD: dict[str, str] = {"EXP-DISPOSITION": "dispositions", "EXP-EFFECTS": "remote_effects",
                                     "EXP-EVIDENCE": "evidence", "EXP-ABSENT": "absent",
                                     "EXP-DISPOSITION-AT": "disposition_at"}

TWO_LIVE_WORKERS = "two live recovery workers"
KEY_WITHOUT_INTENT = "key without defined intent"


def judge(ix: TraceIndex, inv_id: str, run: str | None, message: str, cites: tuple[int, ...],
          auto_fail: str | None) -> dict[str, Any]:
    """The Violation fields a finding gets beyond its invariant: point, rule, expected,
    observed, cap, and an auto_fail the chapter's rule may lift (with the message saying why)."""
    out: dict[str, Any] = {"message": message, "auto_fail": auto_fail}
    field = EXPECTATION_FIELD.get(inv_id)
    if field is not None:
        expect = ix.header.get("expect") or {}
        rule = (expect.get("rules") or {}).get(field)
        out["point"] = rule["point"] if rule else KIND_POINT[field]
        if rule:
            out["rule"] = {"source": rule["source"], "quote": rule["quote"]}
        out["expected"], out["observed"] = _expected_observed(ix, field, expect.get(field), run, message, cites)
    elif inv_id == "RETRY-01" and auto_fail and len(cites) >= 2:
        why = resend_could_duplicate(ix, run, cites[0], cites[1])
        if why is None:
            out["auto_fail"] = None
            out["message"] = message + "; the service deduplicates this key for this unchanged intent " \
                                       "within its key retention, so the resend cannot duplicate: it " \
                                       "costs the classification point, not an automatic failure"
        else:
            out["message"] = message + f"; the resend could duplicate ({why})"
    elif inv_id in ("OWN-01", "OWN-02") and any(_is_dispatch(ix, seq) for seq in cites):
        out["cap"] = TWO_LIVE_WORKERS
    elif inv_id == "KEY-01" or (inv_id == "KEY-02" and len({_run_of(ix, seq) for seq in cites}) > 1):
        out["cap"] = KEY_WITHOUT_INTENT
    return out


def _run_of(ix: TraceIndex, seq: int) -> str | None:
    ev = ix.calls.get(seq)
    if ev is None and 0 <= seq < len(ix.events) and ix.events[seq].get("seq") == seq:
        ev = ix.events[seq]
    return (ev or {}).get("run")


def _is_dispatch(ix: TraceIndex, seq: int) -> bool:
    call = ix.calls.get(seq)
    return call is not None and is_dispatch(call["port"], call["op"])


def _expected_observed(ix: TraceIndex, field: str, want: Any, run: str | None, message: str,
                       cites: tuple[int, ...]) -> tuple[Any, Any]:
    if field == "dispositions":
        r = ix.runs.get(run)
        allowed = want.get(run) if isinstance(want, dict) else want
        return list(allowed or ()), (r.disposition() if r is not None else None)
    if field == "remote_effects":
        if isinstance(want, dict) and run in want:
            return {run: want[run]}, {run: len(cites)}
        return want, len(cites)
    if field == "disposition_at":
        want = want or {}
        held = [ix.events[s]["disposition"] for s in cites if 0 <= s < len(ix.events)
                and ix.events[s].get("kind") == "finish"]
        return list(want.get("dispositions") or ()), (held[-1] if held else "none recorded by then")
    found = re.search(r"evidence (['\"])(.*)\1", message)
    if field == "absent":
        return f"no {found.group(2) if found else ', '.join(want or ())}", "present in the trace"
    alternatives = re.search(r"requires evidence (.*), which the trace", message)
    if alternatives:            # one item, or alternatives ('a' or 'b' with 'c')
        return alternatives.group(1).replace("'", "").replace('"', ""), "absent from the trace"
    return (found.group(2) if found else list(want or ())), "absent from the trace"


def resend_could_duplicate(ix: TraceIndex, run_id: str | None, first_seq: int, again_seq: int) -> str | None:
    """Why resending ``again_seq`` after the ambiguous ``first_seq`` could create a second effect,
    or None when the service profile rules it out: it deduplicates requests under their key,
    the resend carries the same key and the same intent, and the key is still retained."""
    run = ix.runs.get(run_id)
    if run is None:
        return "the dispatches are not in the trace"
    by_seq = {d.seq: d for d in run.dispatches}
    first, again = by_seq.get(first_seq), by_seq.get(again_seq)
    if first is None or again is None:
        return "the dispatches are not in the trace"
    profile = ix.profile(again.service)
    idem = profile.get("idempotency", "none")
    if idem in (None, "none"):
        return f"{again.service} declares no idempotency"
    if idem != "natural_key" and again.key != first.key:
        return f"a different key: {first.key} then {again.key}"
    if (again.intent or {}) != (first.intent or {}):
        return "a changed intent under the same key"
    retention = profile.get("retention_ms")
    sent = min((d.t for d in run.dispatches if d.key == again.key and d.service == again.service), default=again.t)
    if retention is not None and again.t - sent >= retention:
        return f"key retention lapsed: {again.t - sent} ms after the first send, retention {retention} ms"
    return None
