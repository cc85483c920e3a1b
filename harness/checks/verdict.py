"""The verdict of one trace: every invariant and expectation, then pass / fail / unknown.

* **fail**: at least one violation;
* **unknown** (inconclusive): no violation, but some run could not be judged: it was still
  active at the horizon, a wall-clock guard decided an adapter fault, the adapter command
  could not start, the trace has no end event, or a check could not be evaluated;
* **pass**: otherwise.

An integration trace (its header's adapter is ``integrate:`` and the worker command) is a real
worker's run: its verdict is its integration card's (crashlab.checks.card.judged), the same
for ``crashlab integrate``, ``check``, ``report`` and this function.
"""
from __future__ import annotations

from dataclasses import replace

from ..vocab.errors import UsageError
from ..vocab.results import ScenarioResult, Violation
from .index import WALL_CLOCK_FAULTS, build
from .disposition import blocking_faults
from .guard import REPORT, Budget, evaluate
from .invariants import EXPECTATIONS, INVARIANTS
from .rubric import BY_POINT, POINT_OF, exercised_checks
from .rules import judge

#: At most this many violations of one invariant are listed per run; the rest are counted.
MAX_PER_INVARIANT = 10


def check_trace(events: list[dict], *, trace_path: str | None = None,
                checks: frozenset[str] | None = None) -> ScenarioResult:
    """Check one trace (a list of event dicts, header first) and return its verdict; ``checks``
    (default: every one) are the ids of the checks to judge it by (an older rule set's,
    crashlab.rules.ruleset.checks_of). An integration trace is judged by its integration card."""
    raw = check_raw(events, trace_path=trace_path, checks=checks)
    from .card import is_integration

    result = raw
    if is_integration(events[0]):
        from .card import as_result, judged

        result = as_result(raw, judged(events, raw))
    ids = [inv.id for inv in INVARIANTS + EXPECTATIONS if checks is None or inv.id in checks]
    return replace(result, exercised=exercised_checks(result, events, ids))


def check_raw(events: list[dict], *, trace_path: str | None = None,
              checks: frozenset[str] | None = None) -> ScenarioResult:
    """Every check's own verdict of a trace, before an integration card says which of them an
    integration run can support."""
    try:
        ix = build(events)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UsageError(f"not a well-formed crashlab trace ({type(exc).__name__}: {exc})",
                         hint="check a trace exactly as crashlab wrote it") from None
    header = ix.header
    violations: list[Violation] = []
    notes: list[str] = []
    counts: dict = {}
    budget = Budget()
    for inv in INVARIANTS + EXPECTATIONS:
        if checks is not None and inv.id not in checks:
            continue
        # a check that cannot read some run's input fails closed on that run alone (guard.py)
        found = evaluate(ix, inv.check, inv.id, budget)
        notes.extend(found.notes)
        for run, message, cites, auto in found.findings:
            n = counts[(inv.id, run)] = counts.get((inv.id, run), 0) + 1
            if n > MAX_PER_INVARIANT:
                continue
            cited = tuple(sorted(set(c for c in cites if isinstance(c, int))))
            ruled = judge(ix, inv.id, run, message, tuple(c for c in cites if isinstance(c, int)),
                          inv.auto_fail if auto else None)
            # the point it costs names its category (a check outside the rubric costs none: its own category)
            point = BY_POINT.get(ruled.get("point")) or POINT_OF.get(inv.id)
            ruled["point"] = point.id if point else None
            violations.append(Violation(invariant=inv.id, events=cited, run=run,
                                        category=point.category if point else inv.category, **ruled))
    for (inv_id, run), n in counts.items():
        if n > MAX_PER_INVARIANT:
            notes.append(f"{inv_id}: {n - MAX_PER_INVARIANT} more violation(s) in {run or 'the scenario'} "
                         "not listed")
    notes.extend(ix.memo.get("notes", ()))
    unknown = any(n.endswith(REPORT) for n in notes)
    if ix.end is None:
        notes.append("the trace has no end event (truncated?): runs cannot be judged to the horizon")
        unknown = True
    for run in ix.runs.values():
        for f in run.faults:
            if f.get("fault") in WALL_CLOCK_FAULTS or \
                    str(f.get("message", "")).startswith("cannot start adapter command"):
                notes.append(f"{run.id}: {f.get('fault')} at #{f['seq']} depends on the host, not the seed; "
                             "re-run with a larger guard")
                unknown = True
        if run.disposition() is None and ix.end is not None and run.budget_exhausted is None \
                and not blocking_faults(run):
            notes.append(f"{run.id} was still active at the horizon with no disposition")
            unknown = True
    verdict = "fail" if violations else ("unknown" if unknown else "pass")
    source = header.get("source") or header.get("scenario")
    result = ScenarioResult(
        id=str(header.get("scenario", "?")), title=str(header.get("title", "")), verdict=verdict,
        dispositions={rid: run.disposition() for rid, run in ix.runs.items()},
        violations=tuple(violations), notes=tuple(notes), seed=header.get("seed") or 0,
        repro=f"crashlab run {source} --adapter {header.get('adapter')} --seed {header.get('seed')}",
        trace=trace_path, tags=tuple(header.get("tags") or ()))
    return result
