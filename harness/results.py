"""Result value types shared by the checks, the CLI, the pytest plugin and the reports."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("pass", "fail", "unknown")


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One invariant that failed, with the trace events (sequence numbers) it cites."""

    invariant: str                 # stable id, e.g. "EFF-01"
    message: str                   # one line, plain language
    events: tuple[int, ...] = ()   # evidence: event seq numbers in the trace
    run: str | None = None
    category: str | None = None    # rubric category the invariant belongs to
    auto_fail: str | None = None   # set when this violation is an automatic rubric failure

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "message": self.message, "events": list(self.events),
                "run": self.run, "category": self.category, "auto_fail": self.auto_fail}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioResult:
    id: str
    title: str
    verdict: str                                  # pass | fail | unknown
    dispositions: dict[str, str | None]           # run id -> final disposition (None: none reached)
    violations: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()                   # why a verdict is unknown, expectation misses
    seed: int = 0
    repro: str = ""
    trace: str | None = None                      # path of the saved JSONL, when saved
    tags: tuple[str, ...] = ()

    @property
    def disposition(self) -> str | None:
        vals = [v for v in self.dispositions.values()]
        return vals[0] if len(vals) == 1 else (",".join(str(v) for v in vals) if vals else None)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "verdict": self.verdict,
                "disposition": self.disposition, "dispositions": dict(self.dispositions),
                "violations": [v.to_json() for v in self.violations], "notes": list(self.notes),
                "seed": self.seed, "repro": self.repro, "trace": self.trace, "tags": list(self.tags)}


@dataclass(frozen=True, slots=True, kw_only=True)
class LostPoint:
    category: str
    point: str                     # the rubric point's id/name
    scenario: str
    invariant: str
    events: tuple[int, ...] = ()
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["events"] = list(self.events)
        return d


@dataclass(frozen=True, slots=True, kw_only=True)
class Scorecard:
    adapter: str
    seed: int | None
    total: int
    max: int
    categories: dict[str, dict[str, int]]         # name -> {"score": n, "max": m}
    auto_fail: tuple[str, ...] = ()
    lost: tuple[LostPoint, ...] = ()
    scenarios: tuple[ScenarioResult, ...] = ()
    verdict: str = "pass"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"adapter": self.adapter, "seed": self.seed, "verdict": self.verdict,
                "score": {"total": self.total, "max": self.max, "categories": self.categories},
                "auto_fail": list(self.auto_fail), "lost": [p.to_json() for p in self.lost],
                "scenarios": [s.to_json() for s in self.scenarios], **self.extra}
