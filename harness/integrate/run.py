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

#: The integration suite is the library scenarios with this tag: those a real worker process can
#: meet as written (their faults are on service calls, the worker's store or its process group).
SUITE_TAG = "integration"
#: Each suite scenario's description says what it exercises with real processes, after this.
EXERCISES = "With real processes:"


def suite() -> list[Scenario]:
    """The integration suite: every library scenario tagged ``integration``, in library order."""
    from ..scenario_loader import library

    return [sc for sc in library() if SUITE_TAG in sc.tags]


def exercises(sc: Scenario) -> str:
    """What a scenario exercises with real processes (the end of its description)."""
    _, found, text = str(sc.raw.get("description") or "").partition(EXERCISES)
    return " ".join(text.split()).rstrip(".") if found else ""


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
    timed = [f"{ev.type} at {scenario.fmt(ev.at_ms)}" for ev in scenario.events
             if ev.anchor is None and ev.run is not None and ev.type != "other_actor"]
    views = set.intersection(*(rs.store.views_found for rs in sup.runs.values())) if sup.runs else set()
    return Outcome(scenario=scenario.id, trace=path, result=result, card=card(result, views=views, notes=sup.notes,
                                                                          cut=sup.cut, timed=timed))
