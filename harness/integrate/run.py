"""One integration run of one scenario, and the integration suite.

``integrate(scenario, worker=..., out=...)`` starts the sandbox and the supervisor, drives the
worker to the end, writes the trace (``OUT/{scenario}.jsonl``, checkable by ``crashlab check``,
``show`` and ``report`` like any trace) and judges it on the integration card.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..checks.verdict import check_trace
from ..results import ScenarioResult
from ..scenario_compiled import Scenario
from ..trace import write_jsonl
from .card import Card, card
from .supervisor import DEFAULT_TIME_SCALE, WALL_LIMIT_S, Supervisor

#: The integration suite: library scenarios that a real worker process can meet as written
#: (their faults are on service calls or on the worker's store), with what each exercises.
SUITE: dict[str, str] = {
    "fieldops-worked-recovery": "lost response after the commit, then a kill: recover by lookup (T2)",
    "t2-commit-before-record": "SIGKILL after the commit, before the answer: recover by lookup",
    "crash-2-after-prepare-before-send": "failpoint before the second ledger append: PROPOSED proves nothing left",
    "matrix-ambiguous-effect": "502 after the commit: ambiguous, resolved by lookup",
    "matrix-conflict-in-flight": "409: the key is in flight; wait and read",
    "matrix-throttling": "429 with Retry-After, twice",
    "matrix-weak-service": "lost response on a service with no keys and no lookup: the effect stays unknown",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    scenario: str
    trace: Path
    result: ScenarioResult
    card: Card


def integrate(scenario: Scenario, *, worker: str, out: Path, store: str = "sqlite:{db}",
              time_scale: float = DEFAULT_TIME_SCALE, wall_limit_s: float = WALL_LIMIT_S) -> Outcome:
    out = Path(out)
    work = out / scenario.id
    sup = Supervisor(scenario, worker, store=store, out=work, time_scale=time_scale, wall_limit_s=wall_limit_s)
    events = sup.run()
    path = out / f"{scenario.id}.jsonl"
    write_jsonl(events, path)
    result = check_trace(events, trace_path=str(path))
    views = set.intersection(*(rs.store.views_found for rs in sup.runs.values())) if sup.runs else set()
    return Outcome(scenario=scenario.id, trace=path, result=result, card=card(result, views=views, notes=sup.notes,
                                                                          cut=sup.cut))
