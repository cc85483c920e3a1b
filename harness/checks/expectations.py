"""The scenario expectations: assertions a scenario's header adds (``expect``) on top of the
generic invariants: the dispositions it allows (at the end, or at a named time), the number
of remote effects, and evidence the trace must or must not contain.
"""
from __future__ import annotations

from typing import Iterator

from .common import Finding, Invariant, inv
from .index import TraceIndex

def allowed_dispositions(want, run_id) -> list:
    """The dispositions ``expect.dispositions`` allows ``run_id``: one list for every run, or a
    list per run (a mapping keyed by run id)."""
    if isinstance(want, dict):
        return list(want.get(run_id) or ())
    return list(want or ())


def dispositions_words(want) -> str:
    """``expect.dispositions`` in words: 'A or B', or 'run-a: A; run-b: B or C' per run."""
    if isinstance(want, dict):
        return "; ".join(f"{rid}: {' or '.join(map(str, ds))}" for rid, ds in want.items())
    return " or ".join(str(d) for d in want or ())


def _exp_disposition(ix: TraceIndex) -> Iterator[Finding]:
    want = (ix.header.get("expect") or {}).get("dispositions")
    if not want:
        return
    for run in ix.runs.values():
        allowed = allowed_dispositions(want, run.id)
        if not allowed:
            continue
        disp = run.disposition()
        if disp is not None and disp not in allowed:
            last = [f["seq"] for f in run.finishes if f.get("accepted")]
            yield run.id, f"disposition {disp} is not one the scenario allows ({', '.join(allowed)})", \
                tuple(last[-1:]), False


def _exp_effects(ix: TraceIndex) -> Iterator[Finding]:
    want = (ix.header.get("expect") or {}).get("remote_effects")
    if want is None:
        return
    forward = {(run.service, run.operation) for run in ix.runs.values()}
    per_run: dict = {rid: [] for rid in ix.runs}
    total = []
    for ev in ix.effects:
        if ix.origin(ev) in forward:
            total.append(ev["seq"])
            per_run.setdefault(ev.get("run"), []).append(ev["seq"])
    if isinstance(want, bool):
        return
    if isinstance(want, int):
        if len(total) != want:
            yield None, f"{len(total)} remote effect(s) committed; the scenario expects {want}", tuple(total), False
    elif isinstance(want, dict):
        lo, hi = want.get("min"), want.get("max")
        if lo is not None or hi is not None:
            if (lo is not None and len(total) < lo) or (hi is not None and len(total) > hi):
                yield None, f"{len(total)} remote effect(s) committed; the scenario expects between " \
                            f"{lo if lo is not None else 0} and {hi if hi is not None else 'any'}", tuple(total), False
        for rid, n in want.items():
            if rid in per_run and isinstance(n, int) and len(per_run[rid]) != n:
                yield rid, f"{len(per_run[rid])} remote effect(s) committed by {rid}; the scenario expects {n}", \
                    tuple(per_run[rid]), False


def _evidence_items(ix: TraceIndex, ev: dict) -> tuple[str, ...]:
    """The expect.evidence items one trace event is an instance of."""
    kind = ev["kind"]
    if kind == "result" and ev.get("delivered"):
        call = ix.calls.get(ev.get("call"))
        if call is not None:
            return kind, f"{call['port']}.{call['op']}"
    elif kind == "ledger":
        return kind, f"ledger:{ev['knowledge']}"
    elif kind == "checkpoint":
        return kind, f"checkpoint:{ev['state']}"
    elif kind == "finish" and ev.get("accepted"):
        return kind, f"finish:{ev['disposition']}"
    return (kind,)


def _exp_absent(ix: TraceIndex) -> Iterator[Finding]:
    # an item 'a&b' forbids its parts together: it is met at the event that completes the set
    banned = {item for item in (ix.header.get("expect") or {}).get("absent") or () if isinstance(item, str)}
    if not banned:
        return
    seen: dict[str, int] = {}
    for ev in ix.events:
        items = _evidence_items(ix, ev)
        for item in items:
            seen.setdefault(item, ev["seq"])
        for item in sorted(banned):
            parts = item.split("&")
            if not any(p in items for p in parts) or not all(p in seen for p in parts):
                continue
            banned.discard(item)
            if len(parts) == 1:
                yield ev.get("run"), f"the scenario forbids evidence {item!r}, which appears at #{ev['seq']}", \
                    (ev["seq"],), False
            else:
                where = " and ".join(f"{p!r} at #{seen[p]}" for p in parts)
                yield ev.get("run"), f"the scenario forbids {evidence_words(item)} together, and the trace " \
                                     f"holds {'both' if len(parts) == 2 else 'them all'}: {where}", tuple(sorted({seen[p] for p in parts})), False


def _exp_disposition_at(ix: TraceIndex) -> Iterator[Finding]:
    want = (ix.header.get("expect") or {}).get("disposition_at")
    if not isinstance(want, dict) or not want.get("dispositions"):
        return
    at, allowed = want.get("at_ms"), want["dispositions"]
    for run in ix.runs.values():
        held = [f for f in run.finishes if f.get("accepted") and f["t"] <= at]
        if not held:
            yield run.id, f"no disposition was recorded by {ix.fmt(at)}; the scenario expects one of " \
                          f"{', '.join(allowed)}", (), False
        elif held[-1]["disposition"] not in allowed:
            yield run.id, f"the disposition recorded at {ix.fmt(at)} was {held[-1]['disposition']}, not one of " \
                          f"{', '.join(allowed)}", (held[-1]["seq"],), False


def _exp_evidence(ix: TraceIndex) -> Iterator[Finding]:
    wanted = (ix.header.get("expect") or {}).get("evidence")
    if not wanted:
        return
    # 'a|b' is met by any one of its alternatives, 'a&b' by both of its parts, '!a' when a never occurs
    atoms = {atom.lstrip("!") for item in wanted if isinstance(item, str) for alt in item.split("|")
             for atom in alt.split("&")}
    present: set = set()
    for ev in ix.events:
        if atoms <= present:
            break
        present.update(atoms.intersection(_evidence_items(ix, ev)))

    def met(atom: str) -> bool:
        return atom[1:] not in present if atom.startswith("!") else atom in present

    reported = set()
    for item in wanted:
        if not isinstance(item, str) or item in reported:
            continue
        alts = [alt.split("&") for alt in item.split("|")]
        if any(all(met(atom) for atom in alt) for alt in alts):
            continue
        reported.add(item)
        what = evidence_words(item)
        yield None, f"the scenario requires evidence {what}, which the trace does not contain", (), False


def evidence_words(item: str, quote=repr) -> str:
    """An evidence item in words: alternatives ``a|b`` as "a or b", ``a&b`` as "a with b",
    ``!a`` as "no a" (each atom passed through ``quote``)."""
    return " or ".join(" with ".join(f"no {quote(a[1:])}" if a.startswith("!") else quote(a) for a in alt.split("&"))
                       for alt in str(item).split("|"))


def _expect(id, statement, category, check, computed, evidence) -> Invariant:
    """An expectation: never a safety property, never an automatic failure."""
    return inv(id, statement, category, False, None, check, computed, evidence)


# --------------------------------------------------------------------------- the registrations
#: Scenario expectations (the header's ``expect``): extra assertions on top of the invariants.
EXPECTATIONS: tuple[Invariant, ...] = (
    _expect("EXP-DISPOSITION", "The run ends in a disposition the scenario allows.", "disposition",
            _exp_disposition,
            "expect.dispositions lists the allowed final dispositions (terminal or waiting), one list for every "
            "run or a list per run ({run id: [...]}); a run that has one outside its list is a violation (a run "
            "with none is inconclusive).",
            "the last accepted finish"),
    _expect("EXP-EFFECTS", "The services hold the number of effects the scenario expects.", "effect_correctness",
            _exp_effects,
            "expect.remote_effects counts commits of each run's own operation caused by the runs (other actors "
            "excluded, releases excluded): an integer for the total, {min, max}, or {run id: n}.",
            "the commits"),
    _expect("EXP-EVIDENCE", "The trace contains the evidence the scenario requires.", "classification",
            _exp_evidence,
            "expect.evidence lists items that must occur: 'port.op' (a delivered call, e.g. "
            "'reservation.lookup'), 'ledger:KNOWLEDGE', 'checkpoint:STATE', 'finish:DISPOSITION', or an "
            "event kind (e.g. 'escalation', 'late_arrival'); 'a|b' is met by any one of its alternatives, "
            "'a&b' by both of its parts ('&' binds tighter than '|'), '!a' when a never occurs (a premise: "
            "'reservation.lookup|!takeover' asks for the read only where a lease lapsed).",
            "none (the evidence is what is missing)"),
    _expect("EXP-ABSENT", "The trace holds none of the evidence the scenario forbids.", "classification",
            _exp_absent,
            "expect.absent lists items (the expect.evidence grammar) that must not occur, e.g. "
            "'reservation.release' or 'released'; the first occurrence of each is a violation. 'a&b' forbids "
            "its parts together (either alone is allowed): a violation where the second of them occurs.",
            "the forbidden event"),
    _expect("EXP-DISPOSITION-AT", "The disposition recorded at a named time is one the scenario allows.",
            "disposition", _exp_disposition_at,
            "expect.disposition_at {at, dispositions}: each run's latest accepted finish at or before that "
            "time (a terminal record stays historically accurate for what was known then) must be one of the "
            "dispositions; none by then is a violation.",
            "the finish in force at that time"),
)
