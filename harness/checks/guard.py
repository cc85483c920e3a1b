"""A check that cannot read its input fails closed, and costs no other finding.

Every invariant reads what adapters wrote (arguments, checkpoints, ledger entries, packets), so
a value of a shape no check foresaw may make one raise. :func:`evaluate` runs one invariant and,
when it raises, narrows the damage to the runs it cannot read:

* the findings it made before it raised are kept;
* each run is tried on its own (a view of the index holding that run alone): the runs on which
  the invariant still raises are the unreadable ones;
* the invariant is run again over every other run (the index without the unreadable ones), so
  their findings, and the scenario-wide ones, are those of a normal pass;
* for each unreadable run, the trace is cut short (a bisection over its prefixes) to the first
  event whose addition makes the invariant raise, and an earlier call of that run whose
  arguments break their shape (crashlab.world.ports.ARGUMENTS) is named when removing it alone makes
  the run readable: the note names the invariant, the run and the event(s), and the scenario is
  inconclusive unless some other finding fails it.

Nothing here runs unless an invariant raised: a normal trace is judged exactly as before.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from ..world.boundary import argument_problems
from ..vocab.errors import clip
from .index import TraceIndex, build

#: A note ending with this makes the verdict inconclusive (crashlab.checks.verdict).
REPORT = "please report it with the trace"
#: At most this many bisections (each rebuilds the index about log2(events) times) per trace.
MAX_BISECTIONS = 4


@dataclass(slots=True)
class Evaluation:
    """What one invariant found on one trace, and what it could not read."""

    findings: list = field(default_factory=list)
    notes: list = field(default_factory=list)


@dataclass(slots=True)
class Budget:
    """The bisections left for one trace."""

    left: int = MAX_BISECTIONS


def evaluate(ix: TraceIndex, check: Callable[[TraceIndex], Iterable], inv_id: str,
             budget: Budget | None = None) -> Evaluation:
    """The findings of ``check`` on ``ix``; if it raises, the findings of every run it can read,
    what it found before it raised, and one note per run it cannot read."""
    found: list = []
    try:
        for finding in check(ix):
            found.append(finding)
        return Evaluation(found)
    except Exception as exc:  # noqa: BLE001 - a check must never crash the harness
        first = exc
    budget = budget if budget is not None else Budget()
    unreadable: dict = {}
    for rid in ix.runs:
        error = _raises(check, _view(ix, [rid]))
        if error is not None:
            unreadable[rid] = error
    if not unreadable:   # it raises only with every run present: nothing to narrow down to
        return Evaluation(found, [f"{inv_id} could not be evaluated on this trace ({_text(first)}); "
                                  f"the findings it made before are kept; {REPORT}"])
    rest: list = []
    error = _collect(check, _view(ix, [r for r in ix.runs if r not in unreadable]), rest)
    out = Evaluation(rest if error is None else _merge(found, rest))
    if error is not None:
        out.notes.append(f"{inv_id} could not be evaluated on this trace ({_text(error)}); "
                         f"the findings it made before are kept; {REPORT}")
    # the unreadable runs keep what was found on them before the check raised
    out.findings = _merge(out.findings, [f for f in found if f[0] in unreadable])
    for rid, exc in unreadable.items():
        where = _culprit(ix, check, rid, budget)
        out.notes.append(f"{inv_id} could not be evaluated on {rid} ({_text(exc)}){where}; its other findings "
                         f"and every other invariant's are kept; {REPORT}")
    return out


def _view(ix: TraceIndex, runs: Iterable[str]) -> TraceIndex:
    """The index with only ``runs`` (and a memo of its own: what is shared is for the whole trace)."""
    return replace(ix, runs={rid: ix.runs[rid] for rid in runs}, memo={})


def _collect(check, ix: TraceIndex, into: list) -> Exception | None:
    try:
        for finding in check(ix):
            into.append(finding)
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def _raises(check, ix: TraceIndex) -> Exception | None:
    return _collect(check, ix, [])


def _merge(a: list, b: list) -> list:
    out = list(a)
    for f in b:
        if f not in out:
            out.append(f)
    return out


def _culprit(ix: TraceIndex, check, rid: str, budget: Budget) -> str:
    """", once the trace reaches #67 (result); reading #3 (call authority.request, ...)": the first
    event whose addition to the trace makes the check raise on run ``rid`` (a bisection over the
    trace's prefixes) and, when removing one of the run's earlier calls with malformed arguments
    makes it read again, that call; "" when it cannot be told (the bisection budget is spent, or
    the check raises on the header alone)."""
    events = ix.events
    if budget.left <= 0 or len(events) < 2:
        return ""
    budget.left -= 1

    def fails(part: list) -> bool:   # the check on run ``rid`` of these events
        try:
            index = build(part)
        except Exception:  # noqa: BLE001 - a part of a trace that builds files like the trace
            return True
        return rid in index.runs and _raises(check, _view(index, [rid])) is not None

    lo, hi = 1, len(events)      # the header alone reads; the whole trace does not
    if fails(events[:lo]):
        return ""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(events[:mid]):
            hi = mid
        else:
            lo = mid
    text = f", once the trace reaches #{events[hi - 1].get('seq')} ({_what(events[hi - 1])})"
    tries = 0
    for i in range(hi - 1, 0, -1):    # the latest malformed call whose removal makes the run readable
        ev = events[i]
        if ev.get("kind") != "call" or ev.get("run") != rid:
            continue
        problems = argument_problems(str(ev.get("port")), str(ev.get("op")), ev.get("args"))
        if not problems:
            continue
        if not fails(events[:i] + events[i + 1:hi]):
            field, problem = problems[0]
            return text + f"; reading #{ev.get('seq')} ({_what(ev)}: {field}: {problem})"
        tries += 1
        if tries >= 3:
            break
    return text


def _what(ev: dict) -> str:
    what = clip(ev.get("kind"), 40)
    if ev.get("port") is not None:
        what = f"{what} {clip(ev.get('port'), 40)}.{clip(ev.get('op'), 40)}"
    return what


def _text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {clip(exc, 160)}"
