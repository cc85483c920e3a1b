"""Answer keys derived from the rung's own trace (data/answers.yaml).

``expected(rung)`` returns, per question (and per table cell), an :class:`Expected`: the
set of acceptable answers computed from the trace with the selectors of
crashlab.workshop.evidence, never a hard-coded number.
"""
from __future__ import annotations

import functools
from typing import Any

import yaml

from . import evidence as E
from .evidence import DATA
from .questions import Expected
from .exhibits import expected as exhibit_keys
from .ladder import TRACE_LABELS, Rung
from .rubric import measured
from .weak import safe_designs, unambiguous_options

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"


@functools.cache
def _answers() -> dict:
    return yaml.safe_load((DATA / "answers.yaml").read_text(encoding="utf-8"))


def traces(rung: Rung) -> dict[str, list[dict]]:
    """The rung's traces by label (A, B, ...), run by the reference adapter."""
    return {TRACE_LABELS[i]: E.trace(name, REFERENCE) for i, name in enumerate(rung.scenarios)}


# --------------------------------------------------------------------------- selectors
def select(events: list[dict], spec: dict) -> list[dict]:
    spec = dict(spec)
    spec.pop("trace", None)
    pick = spec.pop("pick", "all")
    after = spec.pop("after", None)
    op_of_call = spec.pop("op_of_call", None)
    worker_last = spec.pop("worker_last", False)
    delivers = spec.pop("delivers", None)
    pool = events
    if after is not None:
        first = select(events, {**after, "pick": "first"})
        pool = [e for e in events if first and e["seq"] > first[0]["seq"]]
    if worker_last:
        starts = [e for e in events if e["lane"] == "worker" and e["kind"] == "start"]
        if starts:
            pool = [e for e in pool if e.get("worker") == starts[-1]["worker"]]
    out = E.select(pool, spec)
    if op_of_call is not None:
        calls = {e["seq"]: e for e in events if e["lane"] == "port" and e["kind"] == "call"}
        out = [e for e in out if e.get("call") in calls and calls[e["call"]]["op"] == op_of_call]
    if delivers is not None:        # a result that handed the worker an inbox event of that type
        out = [e for e in out if any(isinstance(x, dict) and x.get("type") == delivers
                                     for x in ((e.get("value") or {}).get("events") or ()))]
    if pick == "first":
        return out[:1]
    if pick == "last":
        return out[-1:]
    return out


def anchors(rung: Rung, events: list[dict]) -> list[tuple[str, int, str]]:
    """The table rows: (row id, anchor event seq, label)."""
    if rung.rows_from is not None:
        spec = dict(rung.rows_from)
        distinct = spec.pop("distinct", False)
        calls = {e["seq"]: e for e in events if e["lane"] == "port" and e["kind"] == "call"}
        rows, seen = [], set()
        for e in select(events, spec):
            kind = (calls.get(e.get("call"), {}).get("op"), (e.get("error") or {}).get("code"))
            if distinct and kind in seen:
                continue
            seen.add(kind)
            rows.append((f"e{e['seq']}", e["seq"], f"result #{e['seq']}"))
        return rows
    out = []
    for row in rung.rows:
        hit = select(events, {**row.at, "pick": row.at.get("pick", "first")})
        if not hit:
            raise LookupError(f"rung {rung.id}: row {row.id} has no anchor event in the trace")
        out.append((row.id, hit[0]["seq"], row.label))
    return out


# --------------------------------------------------------------------------- columns
def _primary_keys(events: list[dict]) -> set[str]:
    return {e["key"] for e in events if e["lane"] == "knowledge" and (e.get("entry") or {}).get("kind") == "effect"}


def run_state_at(events, seq):
    states = [e["state"] for e in events if e["lane"] == "run" and e["kind"] == "checkpoint" and e["seq"] <= seq]
    return states[-1] if states else "NONE"


def knowledge_at(events, seq):
    keys = _primary_keys(events)
    known = [e["knowledge"] for e in events if e["lane"] == "knowledge" and e["key"] in keys and e["seq"] <= seq]
    return known[-1] if known else "NONE"


def remote_at(events, seq):
    keys = _primary_keys(events)
    upto = [e for e in events if e["lane"] == "remote" and e["seq"] <= seq]
    if any(e["kind"] == "released" for e in upto):
        return "released"
    if any(e["kind"] == "effect" and e.get("key") in keys for e in upto):
        return "committed"
    return "none"


def owner_epoch_at(events, seq):
    epochs = [e["epoch"] for e in events if e["lane"] == "run" and e["kind"] == "lease" and e["seq"] <= seq]
    return epochs[-1] if epochs else None


def new_work_at(events, seq):
    cancelled = any(e["lane"] == "world" and e["kind"] == "deliver" and e["event"].get("type") == "cancel"
                    and e["seq"] <= seq for e in events)
    return "blocked" if cancelled else "allowed"


def observation_of(events, seq):
    ev = next(e for e in events if e["seq"] == seq)
    return "definite" if (ev.get("error") or {}).get("definite") else "indefinite"


COLUMNS = {f.__name__: f for f in (run_state_at, knowledge_at, remote_at, owner_epoch_at, new_work_at,
                                   observation_of)}
_AGREE = {"committed": {"CONFIRMED", "COMPENSATION_PROPOSED"}, "none": {"NONE", "PROPOSED", "REJECTED"},
          "released": {"COMPENSATED"}}


# --------------------------------------------------------------------------- derivations
def _revalidated(events, spec, keys):
    mapping = {("lease", "acquire"): "lease", ("authority", "check"): "authority",
               ("reservation", "describe"): "service_profile", ("checkpoints", "load"): "checkpoint_version"}
    sends = [e for e in events if e["lane"] == "port" and e["kind"] == "call" and e["op"] == "reserve"]
    last = sends[-1]
    window = [e for e in events if e["lane"] == "port" and e["kind"] == "call"
              and e.get("worker") == last["worker"] and e["seq"] < last["seq"]]
    seen = {mapping[(e["port"], e["op"])] for e in window if (e["port"], e["op"]) in mapping}
    return Expected(mode="subset", accepted=frozenset(seen), must=frozenset(spec["must"]),
                    shown=sorted(seen))


def _same_key(events, spec, keys):
    sent = {e["args"].get("key") for e in events if e["lane"] == "port" and e["kind"] == "call"
            and e["op"] == "reserve"}
    value = "yes" if len(sent) == 1 else "no"
    return Expected(mode="one_of", accepted=frozenset({value}), shown=value)


def _read_of(events, spec, keys):
    seqs = keys[spec["question"]].accepted
    calls = {e["seq"]: e for e in events if e["lane"] == "port" and e["kind"] == "call"}
    names = {"lookup": "lookup_by_key", "search": "search_by_fields", "aggregate": "aggregate_quantity"}
    ops = {names.get(calls[e["call"]]["op"], "none") for e in events if e["seq"] in seqs and e.get("call") in calls}
    return Expected(mode="one_of", accepted=frozenset(ops), shown=sorted(ops)[0] if ops else None)


def _compatibility(events, spec, keys):
    deploy = select(events, {"lane": "world", "kind": "deploy", "pick": "first"})[0]["seq"]
    later = [e for e in events if e["seq"] > deploy]
    value = "replay"
    for e in later:
        if e["lane"] == "run" and e["kind"] == "checkpoint":
            value = "migrate" if e["state"] == "MIGRATING" else "replay"
            break
        if e["lane"] == "run" and e["kind"] == "finish":
            value = {"PINNED": "pin", "WAITING_OPERATOR": "stop"}.get(e["disposition"], "replay")
            break
    return Expected(mode="one_of", accepted=frozenset({value}), shown=value)


def _later_duplicates(events, spec, keys):
    seqs = [e["seq"] for e in select(events, {"lane": "world", "kind": "deliver", "event.type": "intake"})]
    return Expected(mode="exact", accepted=frozenset(seqs[1:]), shown=seqs[1:])


def _mismatch_rows(events, spec, keys, rung=None):
    rows = [r for r, seq, _ in anchors(rung, events) if knowledge_at(events, seq) not in _AGREE[remote_at(events, seq)]]
    return Expected(mode="exact", accepted=frozenset(rows), shown=rows)


def _safe_designs(events, spec, keys):
    return safe_designs(spec["profile"])


def _unambiguous_options(events, spec, keys):
    return unambiguous_options()


def _rubric(events, spec, keys):
    return measured(spec["category"])


def _failure_exhibit(events, spec, keys):
    from .rubric import failure_expected
    return failure_expected(spec["label"], spec["part"])


DERIVE = {"safe_designs": _safe_designs, "unambiguous_options": _unambiguous_options, "rubric": _rubric,
          "failure_exhibit": _failure_exhibit,
          "revalidated": _revalidated, "same_key": _same_key, "read_of": _read_of,
          "compatibility": _compatibility, "later_duplicates": _later_duplicates,
          "mismatch_rows": _mismatch_rows}


# --------------------------------------------------------------------------- the key
def _one(events_by: dict, spec: dict, keys: dict, rung: Rung) -> Expected:
    def events_for(sel):
        return events_by[sel.get("trace", "A")] if isinstance(sel, dict) else events_by["A"]

    if "event" in spec:
        sels = spec["event"] if isinstance(spec["event"], list) else [spec["event"]]
        seqs = sorted({e["seq"] for s in sels for e in select(events_for(s), s)})
        return Expected(mode="one_of", accepted=frozenset(seqs), shown=seqs[0] if seqs else None)
    if "events" in spec:
        seqs = sorted(e["seq"] for e in select(events_for(spec["events"]), spec["events"]))
        return Expected(mode="exact", accepted=frozenset(seqs), shown=seqs)
    if "field" in spec:
        hit = select(events_for(spec["of"]), spec["of"])
        value = E._get(hit[-1], spec["field"]) if hit else None
        value = "none" if value is None and spec["field"] == "next_owner" else value
        return Expected(mode="one_of", accepted=frozenset({value}), shown=value)
    if "count" in spec:
        n = len(select(events_for(spec["count"]), spec["count"]))
        return Expected(mode="one_of", accepted=frozenset({n}), shown=n)
    if "value" in spec:
        return Expected(mode="one_of", accepted=frozenset({spec["value"]}), shown=spec["value"])
    if "set" in spec and "must" in spec:     # every value of must, and others only from set
        return Expected(mode="subset", accepted=frozenset(spec["set"]), must=frozenset(spec["must"]),
                        shown=list(spec["must"]))
    if "set" in spec:
        return Expected(mode="exact", accepted=frozenset(spec["set"]), shown=list(spec["set"]))
    if "derive" in spec:
        fn = DERIVE[spec["derive"]]
        if spec["derive"] == "mismatch_rows":
            return fn(events_by["A"], spec, keys, rung=rung)
        return fn(events_by["A"], spec, keys)
    raise ValueError(f"answer key of rung {rung.id}: unknown form {sorted(spec)}")


def expected(rung: Rung) -> dict[str, Any]:
    """Question id -> Expected; ``table`` -> {row id: {column: Expected}}."""
    if rung.kind == "exhibits":
        return exhibit_keys()
    spec = _answers()[rung.id]
    events_by = traces(rung) if rung.scenarios else {"A": []}
    keys: dict[str, Any] = {}
    for qid, qspec in spec.items():
        if qid == "table":
            continue
        keys[qid] = _one(events_by, qspec, keys, rung)
    if "table" in spec:
        events = events_by["A"]
        table = {}
        for row_id, seq, _ in anchors(rung, events):
            table[row_id] = {}
            for column, fn_name in spec["table"].items():
                value = COLUMNS[fn_name](events, seq)
                table[row_id][column] = Expected(mode="one_of", accepted=frozenset({value}), shown=value)
        keys["table"] = table
    return keys
