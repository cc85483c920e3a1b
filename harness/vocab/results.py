"""Result value types shared by the checks, the CLI, the pytest plugin and the reports."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("pass", "fail", "unknown")


def _field(data: Any, name: str, types: type | tuple, default: Any = ..., where: str = "") -> Any:
    """Read one field of a results-JSON object; ValueError names the field when it is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'value'}: expected an object, got {type(data).__name__}")
    if name not in data:
        if default is ...:
            raise ValueError(f"{where}{'.' if where else ''}{name}: missing")
        return default
    value = data[name]
    if not isinstance(value, types) or (isinstance(value, bool) and types is int):
        raise ValueError(f"{where}{'.' if where else ''}{name}: unexpected {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One invariant that failed, with the trace events (sequence numbers) it cites."""

    invariant: str                 # stable id, e.g. "EFF-01"
    message: str                   # one line, plain language
    events: tuple[int, ...] = ()   # evidence: event seq numbers in the trace
    run: str | None = None
    category: str | None = None    # rubric category the invariant belongs to
    auto_fail: str | None = None   # set when this violation is an automatic rubric failure
    point: str | None = None       # the rubric point it costs (C1...D5); None: no point
    rule: dict[str, str] | None = None   # an expectation's rule: {"source", "quote"}
    expected: Any = None           # an expectation miss: what the scenario expects ...
    observed: Any = None           # ... and what the trace shows
    cap: str | None = None         # a chapter scoring rule it triggers (crashlab.checks.rubric.CAPS)

    def to_json(self) -> dict[str, Any]:
        out = {"invariant": self.invariant, "message": self.message, "events": list(self.events),
               "run": self.run, "category": self.category, "auto_fail": self.auto_fail, "point": self.point}
        out.update({k: getattr(self, k) for k in _OPTIONAL if getattr(self, k) is not None})
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "violation") -> "Violation":
        opt = (str, type(None))
        return cls(invariant=_field(data, "invariant", str, where=where),
                   message=_field(data, "message", str, "", where),
                   events=tuple(int(e) for e in _field(data, "events", list, [], where)),
                   run=_field(data, "run", opt, None, where),
                   category=_field(data, "category", opt, None, where),
                   auto_fail=_field(data, "auto_fail", opt, None, where),
                   point=_field(data, "point", opt, None, where),
                   rule=_field(data, "rule", (dict, type(None)), None, where),
                   expected=data.get("expected"), observed=data.get("observed"),
                   cap=_field(data, "cap", opt, None, where))


def outcome_text(value: Any) -> str:
    """An expectation's expected or observed outcome as plain text: ``A or B``, ``run-1: 1``."""
    if isinstance(value, list):
        return " or ".join(str(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


#: Violation and LostPoint fields written only when set (older results JSON has none of them).
_OPTIONAL = ("rule", "expected", "observed", "cap")
_LOST_OPTIONAL = _OPTIONAL + ("fix",)


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
    #: the checks this scenario's trace exercised (held or violated, crashlab.checks.exercised);
    #: None: not recorded (no trace was judged, or results written before this field)
    exercised: tuple[str, ...] | None = None

    @property
    def disposition(self) -> str | None:
        vals = [v for v in self.dispositions.values()]
        return vals[0] if len(vals) == 1 else (",".join(str(v) for v in vals) if vals else None)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "verdict": self.verdict,
                "disposition": self.disposition, "dispositions": dict(self.dispositions),
                "violations": [v.to_json() for v in self.violations], "notes": list(self.notes),
                "seed": self.seed, "repro": self.repro, "trace": self.trace, "tags": list(self.tags),
                "exercised": None if self.exercised is None else list(self.exercised)}

    @classmethod
    def from_json(cls, data: Any, where: str = "scenario") -> "ScenarioResult":
        verdict = _field(data, "verdict", str, where=where)
        if verdict not in VERDICTS:
            raise ValueError(f"{where}.verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
        dispositions = _field(data, "dispositions", dict, {}, where)
        return cls(id=_field(data, "id", str, where=where), title=_field(data, "title", str, "", where),
                   verdict=verdict,
                   dispositions={str(k): (None if v is None else str(v)) for k, v in dispositions.items()},
                   violations=tuple(Violation.from_json(v, f"{where}.violations[{i}]")
                                    for i, v in enumerate(_field(data, "violations", list, [], where))),
                   notes=tuple(str(n) for n in _field(data, "notes", list, [], where)),
                   seed=_field(data, "seed", int, 0, where), repro=_field(data, "repro", str, "", where),
                   trace=_field(data, "trace", (str, type(None)), None, where),
                   tags=tuple(str(t) for t in _field(data, "tags", list, [], where)),
                   exercised=_exercised(data, where))


def _exercised(data: dict, where: str) -> tuple[str, ...] | None:
    """``exercised``: absent or null (results written before it existed) is not recorded."""
    found = _field(data, "exercised", (list, type(None)), None, where)
    if found is None:
        return None
    if not all(isinstance(i, str) for i in found):
        raise ValueError(f"{where}.exercised: expected a list of check ids (strings)")
    return tuple(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class LostPoint:
    category: str
    point: str                     # the rubric point's id/name
    scenario: str
    invariant: str
    events: tuple[int, ...] = ()
    message: str = ""
    run: str | None = None
    rule: dict[str, str] | None = None   # the rule that cost it: {"source", "quote"}
    expected: Any = None           # an expectation miss: what the scenario expects ...
    observed: Any = None           # ... and what the trace shows
    cap: str | None = None         # a chapter scoring rule this finding triggered
    fix: dict[str, str] | None = None    # what to change: {"text", "see"} (crashlab.rules.ruleset)

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in _LOST_OPTIONAL or v is not None}
        d["events"] = list(self.events)
        return d

    @classmethod
    def from_json(cls, data: Any, where: str = "lost") -> "LostPoint":
        return cls(category=_field(data, "category", str, where=where),
                   point=_field(data, "point", str, where=where),
                   scenario=_field(data, "scenario", str, where=where),
                   invariant=_field(data, "invariant", str, "", where),
                   events=tuple(int(e) for e in _field(data, "events", list, [], where)),
                   message=_field(data, "message", str, "", where),
                   run=_field(data, "run", (str, type(None)), None, where),
                   rule=_field(data, "rule", (dict, type(None)), None, where),
                   expected=data.get("expected"), observed=data.get("observed"),
                   cap=_field(data, "cap", (str, type(None)), None, where),
                   fix=_field(data, "fix", (dict, type(None)), None, where))


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
    #: rubric points (ids) no finding cost and no selected scenario exercised: never kept
    not_exercised: tuple[str, ...] = ()
    #: ... and those no scenario is shown to exercise because some carry no record of it
    not_recorded: tuple[str, ...] = ()

    @property
    def exercised_points(self) -> int:
        """How many rubric points some selected scenario exercised (kept or lost)."""
        return self.max - len(self.not_exercised) - len(self.not_recorded)

    @property
    def kept_points(self) -> int:
        """How many rubric points were kept (exercised, nothing charged to them violated), counted
        before a category cap or an automatic failure bounds the total."""
        return self.exercised_points - len({lp.point.split(" ", 1)[0] for lp in self.lost})

    def score_text(self) -> str:
        """``20/20`` when every point was exercised and no automatic failure zeroed the total; else
        the total with what it covers: ``12/20 (12/12 exercised points kept; 8 not exercised: C4,
        D2, …)``, ``0/20 (automatic failure: blind ambiguous retry; 11/20 points kept otherwise)``.
        Points kept over a category cap are counted apart (docs/rubric.md)."""
        whole = self.exercised_points >= self.max
        if whole and not self.auto_fail:
            return f"{self.total}/{self.max}"
        parts = [f"automatic failure: {', '.join(self.auto_fail)}"] if self.auto_fail else []
        kept = (f"{self.kept_points}/{self.max} points kept" if whole
                else f"{self.kept_points}/{self.exercised_points} exercised points kept")
        kept += " otherwise" if self.auto_fail else ""
        counted = sum(c.get("score", 0) for c in self.categories.values())
        rules = sorted(c["rule"] for c in self.extra.get("caps") or () if isinstance(c, dict) and c.get("rule"))
        if rules and counted < self.kept_points:
            kept += f", {counted} counted under the category cap ({', '.join(rules)})"
        parts.append(kept)
        parts += [f"{len(ids)} {what}: {', '.join(ids)}" for what, ids in
                  (("not exercised", self.not_exercised), ("not recorded", self.not_recorded)) if ids]
        return f"{self.total}/{self.max} (" + "; ".join(parts) + ")"

    def to_json(self) -> dict[str, Any]:
        return {"adapter": self.adapter, "seed": self.seed, "verdict": self.verdict,
                "score": {"total": self.total, "max": self.max, "categories": self.categories,
                          "exercised": self.exercised_points, "not_exercised": list(self.not_exercised),
                          "not_recorded": list(self.not_recorded)},
                "auto_fail": list(self.auto_fail), "lost": [p.to_json() for p in self.lost],
                "scenarios": [s.to_json() for s in self.scenarios], **self.extra}

    @classmethod
    def from_json(cls, data: Any, base: Any = None) -> "Scorecard":
        """The inverse of to_json (docs/results.md); ValueError names the first bad field. A file
        written before points were marked exercised (no ``score.exercised``) is read as written:
        crashlab.checks.rubric.scorecard_from_json rescores it (the checks are a floor above)."""
        score = _field(data, "score", dict)
        categories = _field(score, "categories", dict, {}, "score")
        for name, cat in categories.items():
            _field(cat, "score", int, where=f"score.categories.{name}")
            _field(cat, "max", int, where=f"score.categories.{name}")
        verdict = _field(data, "verdict", str, "pass")
        if verdict not in VERDICTS:
            raise ValueError(f"verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
        known = {"adapter", "seed", "verdict", "score", "auto_fail", "lost", "scenarios"}
        card = cls(adapter=_field(data, "adapter", str, ""), seed=_field(data, "seed", (int, type(None)), None),
                   total=_field(score, "total", int, where="score"), max=_field(score, "max", int, where="score"),
                   categories={str(k): {"score": v["score"], "max": v["max"]} for k, v in categories.items()},
                   auto_fail=tuple(str(a) for a in _field(data, "auto_fail", list, [])),
                   lost=tuple(LostPoint.from_json(p, f"lost[{i}]")
                              for i, p in enumerate(_field(data, "lost", list, []))),
                   scenarios=tuple(ScenarioResult.from_json(s, f"scenarios[{i}]")
                                   for i, s in enumerate(_field(data, "scenarios", list))),
                   verdict=verdict, extra={k: v for k, v in data.items() if k not in known},
                   not_exercised=_ids(score, "not_exercised"), not_recorded=_ids(score, "not_recorded"))
        if "exercised" in score:
            _field(score, "exercised", int, where="score")
        return card


def _ids(score: dict, name: str) -> tuple[str, ...]:
    ids = _field(score, name, list, [], "score")
    if not all(isinstance(i, str) for i in ids):
        raise ValueError(f"score.{name}: expected a list of rubric point ids (strings)")
    return tuple(ids)


def failure_message(result: ScenarioResult) -> str:
    """Plain text naming each violated invariant, its evidence and the repro command."""
    runs = ", ".join(f"{run} {d or 'no terminal disposition'}" for run, d in result.dispositions.items())
    lines = [f"scenario {result.id}: {result.verdict}" + (f" (dispositions: {runs})" if runs else "")]
    for v in result.violations:
        ev = ", ".join(f"#{s}" for s in v.events) or "no events"
        lines.append(f"  {v.invariant}: {v.message} [evidence {ev}]"
                     + (f" (automatic failure: {v.auto_fail})" if v.auto_fail else ""))
        if v.expected is not None or v.observed is not None:
            lines.append(f"    expected {outcome_text(v.expected)}; observed {outcome_text(v.observed)}")
        if v.rule:
            lines.append(f"    rule {v.point or ''} ({v.rule.get('source')}): \"{v.rule.get('quote')}\"")
        elif v.point:
            lines.append(f"    costs rubric point {v.point} (the rule is {v.invariant}'s own statement: docs/invariants.md)")
        if v.cap:
            lines.append(f"    scoring rule: {v.cap} (docs/rubric.md)")
    lines.extend(f"  note: {n}" for n in result.notes)
    if result.trace:
        lines.append(f"  trace: {result.trace}")
    lines.append(f"  repro: {result.repro}")
    return "\n".join(lines)
