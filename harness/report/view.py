"""What the report knows about one scenario: its result, its trace and where its figures go."""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..vocab.model import DISPOSITION_EFFECT_CLAIM, RunState
from ..vocab.results import ScenarioResult
from .lanes import Lanes

#: Dispositions that leave nothing for anyone to do.
RESOLVED = frozenset(s.value for s, claim in DISPOSITION_EFFECT_CLAIM.items()
                     if s is RunState.SUCCEEDED or claim == "absent")


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    result: ScenarioResult
    events: list[dict] | None       # None: no trace was saved
    name: str                       # output file stem, safe (crashlab.run.conformance.safe_name)
    lanes: Lanes | None = None
    png: bytes | None = None        # the rendered figure, for embedding
    coverage: object = None         # what its trace exercised (crashlab.checks.exercised.Coverage), once a report


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


# --------------------------------------------------------------------------- order and repro
#: The eight traces of AR-08 ("Eight traces, not one happy path"), in chapter order.
CHAPTER_TRACES = tuple(f"t{n}-" for n in range(1, 9))
#: Stands in for the adapter in a repro line when the report hides adapter names.
ADAPTER_PLACEHOLDER = '"$CRASHLAB_ADAPTER"'


def chapter_rank(scenario_id: str) -> int:
    """T1..T8 first, in chapter order; every other scenario after them."""
    return next((n for n, prefix in enumerate(CHAPTER_TRACES) if scenario_id.startswith(prefix)),
                len(CHAPTER_TRACES))


def ordered(items: list[Item]) -> list[Item]:
    """Failures (fail, then expectation differences, then unknown) first, then passes; inside each group the eight traces in
    chapter order, then the rest in the order given."""
    from ..checks.exercised import severity

    weight = {"fail": 0, "differs": 1, "unknown": 2}
    return [item for _, item in sorted(enumerate(items), key=lambda p: (
        weight.get(severity(p[1].result), 3), chapter_rank(p[1].result.id), p[0]))]


#: The adapter name an integration trace carries: "integrate:" and the worker command.
INTEGRATE = "integrate:"


def repro_parts(item: Item) -> tuple[str, str | None, int]:
    """(scenario source or id, adapter, seed) of a scenario's run: from its trace header, else
    parsed from the result's repro line."""
    head = item.events[0] if item.events else None
    r = item.result
    if head is not None:
        return str(head.get("source") or head.get("scenario") or r.id), head.get("adapter"), \
            int(head.get("seed") if head.get("seed") is not None else r.seed)
    try:                   # a shell-quoted line (as crashlab writes them)
        words = shlex.split(r.repro)
    except ValueError:
        words = []
    if words[:2] == ["crashlab", "integrate"] and "--worker" in words[3:-1]:   # crashlab.run.repro's line
        return words[2], INTEGRATE + words[words.index("--worker", 3) + 1], r.seed
    at = words.index("--adapter") if "--adapter" in words else -1
    if words[:2] == ["crashlab", "run"] and at == 3 and words[at + 2:at + 3] in (["--seed"], []) \
            and len(words) > at + 1:
        return words[2], words[at + 1], r.seed
    rest = r.repro.removeprefix("crashlab run ")     # an older, unquoted line
    source, adapter = r.id, None
    if " --adapter " in rest:
        source, rest = rest.split(" --adapter ", 1)
        adapter = rest.rsplit(" --seed ", 1)[0] if " --seed " in rest else rest
    elif rest and " --seed " in rest:
        source = rest.rsplit(" --seed ", 1)[0]
    return source.strip() or r.id, adapter, r.seed


def repro(item: Item, *, no_answers: bool = False) -> str:
    """A shell-quoted command that re-runs the scenario; it works when pasted into a POSIX shell,
    whatever the adapter spec holds (``exec:node my adapter.js``). Hiding answers replaces the
    adapter by ``"$CRASHLAB_ADAPTER"``."""
    from ..run.repro import repro_line

    head = item.events[0] if item.events else None
    said = item.result.repro or ""
    if head is None and said.startswith("crashlab integrate ") and " --worker " in said:
        # an integration result's own line (crashlab.run.repro), with its options
        return said.split(" --worker ", 1)[0] + f" --worker {ADAPTER_PLACEHOLDER}" if no_answers else said
    source, adapter, seed = repro_parts(item)
    if adapter and str(adapter).startswith(INTEGRATE):
        # an integration run: a real worker in real time, which no seed replays (crashlab integrate)
        return repro_line({**(head or {}), "source": source, "adapter": adapter},
                          worker=ADAPTER_PLACEHOLDER if no_answers else None)
    line = shlex.join(["crashlab", "run", source])
    if no_answers:
        line += f" --adapter {ADAPTER_PLACEHOLDER}"
    elif adapter:
        line += " --adapter " + shlex.quote(str(adapter))
    return f"{line} --seed {int(seed)}"
