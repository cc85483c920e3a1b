"""What the report knows about one scenario: its result, its trace and where its figures go."""
from __future__ import annotations

from dataclasses import dataclass

from ..model import DISPOSITION_EFFECT_CLAIM, RunState
from ..results import ScenarioResult
from .lanes import Lanes

#: Dispositions that leave nothing for anyone to do.
RESOLVED = frozenset(s.value for s, claim in DISPOSITION_EFFECT_CLAIM.items()
                     if s is RunState.SUCCEEDED or claim == "absent")


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    result: ScenarioResult
    events: list[dict] | None       # None: no trace was saved
    name: str                       # output file stem, safe (harness.conformance.safe_name)
    lanes: Lanes | None = None
    png: bytes | None = None        # the rendered figure, for embedding


def run_steps(item: Item) -> dict[str, list[tuple[str | None, str]]]:
    """Per run, the run-state transitions taken (checkpoint to checkpoint, from INTAKE)."""
    out: dict[str, list[tuple[str | None, str]]] = {}
    for run in item.lanes.runs if item.lanes else ():
        prev = "INTAKE"
        steps = []
        for seg in run.states:
            steps.append((prev, seg.label))
            prev = seg.label
        out[run.id] = steps
    return out


def knowledge_steps(item: Item) -> list[tuple[str | None, str]]:
    """Every knowledge move of every key (``None``: the key's first entry)."""
    steps: list[tuple[str | None, str]] = []
    for key in item.lanes.knowledge if item.lanes else ():
        prev = None
        for seg in key.states:
            steps.append((prev, seg.label))
            prev = seg.label
    return steps


def packets(item: Item) -> dict[str, list[dict]]:
    """Per run, its escalation events (each carries a decision packet), oldest first; a finish
    that carried a packet counts too when the run never escalated."""
    out: dict[str, list[dict]] = {}
    finishes: dict[str, dict] = {}
    for ev in item.events or ():
        if ev.get("lane") != "run" or not ev.get("run"):
            continue
        if ev.get("kind") == "escalation":
            out.setdefault(ev["run"], []).append(ev)
        elif ev.get("kind") == "finish" and isinstance(ev.get("packet"), dict):
            finishes[ev["run"]] = ev
    for run, ev in finishes.items():
        out.setdefault(run, [ev])
    return out


def unresolved(item: Item) -> list[str]:
    """Runs whose final disposition leaves an effect present-after-failure, unknown, or open."""
    return [run for run, disp in item.result.dispositions.items() if disp not in RESOLVED]
