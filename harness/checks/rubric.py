"""The twenty-point rubric of AR-08 "Assess the eight traces", as an explicit mapping.

Classification 5, ownership 4, effect correctness 6, disposition 5. Each point names the
invariants that can take it away; a point is lost when any of them fails in any scenario,
and the scorecard names the scenario, the invariant and the evidence events for every
loss. A scenario expectation miss (EXP-*) takes the point whose ``tags`` meet the
scenario's tags (the concept the scenario teaches), else its default point below.

Automatic failure (total 0): an exactly-once claim, a blind ambiguous retry, compensation
as rollback, a checkpoint without version or owner, two retry owners.

docs/rubric.md is generated from this module (``python -m harness.checks.docs``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..results import LostPoint, ScenarioResult, Scorecard, Violation
from .invariants import BY_ID

CATEGORY_MAX: dict[str, int] = {"classification": 5, "ownership": 4, "effect_correctness": 6,
                                "disposition": 5}
AUTO_FAIL_REASONS: tuple[str, ...] = ("exactly-once claim", "blind ambiguous retry",
                                      "compensation as rollback", "checkpoint without version or owner",
                                      "two retry owners")


@dataclass(frozen=True, slots=True, kw_only=True)
class RubricPoint:
    id: str                          # C1 ... D5
    category: str
    name: str                        # the chapter's wording
    invariants: tuple[str, ...]      # the invariants that take this point away
    tags: tuple[str, ...] = ()       # scenario tags routing expectation misses here

    def to_json(self) -> dict:
        return {"id": self.id, "category": self.category, "name": self.name,
                "invariants": list(self.invariants), "tags": list(self.tags)}


def _p(id, category, name, invariants, tags=()) -> RubricPoint:
    return RubricPoint(id=id, category=category, name=name, invariants=tuple(invariants), tags=tuple(tags))


RUBRIC: tuple[RubricPoint, ...] = (
    _p("C1", "classification", "caller observation is distinguished from effect truth", ["TRUTH-01"]),
    _p("C2", "classification", "the evidence needed is named", ["EVID-01", "EXP-EVIDENCE", "EXP-ABSENT"], ["evidence"]),
    _p("C3", "classification", "timeouts are distinguished: pre-send versus ambiguous", ["RETRY-01"], ["ambiguous"]),
    _p("C4", "classification", "throttling, validation, permission and incompatibility are classified",
       ["CLS-01", "CLS-02", "AUTH-02", "MIG-01", "PIN-01"], ["backoff", "deployment", "permission", "validation"]),
    _p("C5", "classification", "no knowledge upgrade without evidence", ["KNOW-01", "KNOW-02", "LATE-01"],
       ["late-callback"]),
    _p("O1", "ownership", "one current lease holder", ["OWN-02", "OWN-03", "CKPT-01"], ["lease"]),
    _p("O2", "ownership", "stale workers are fenced", ["OWN-01", "FENCE-01"], ["zombie", "fencing"]),
    _p("O3", "ownership", "a single retry owner with a bounded budget", ["RETRY-03", "RETRY-02", "JIT-01"],
       ["retry", "amplification", "deadline"]),
    _p("O4", "ownership", "an accountable operator for unresolved states", ["OWN-04", "PKT-01"], ["escalation"]),
    _p("E1", "effect_correctness", "stable semantic identity", ["PREP-01", "KEY-01", "PREP-02"], ["identity"]),
    _p("E2", "effect_correctness", "same-intent deduplication", ["EFF-01", "EFF-02", "EVT-01", "EVT-02", "EXP-EFFECTS"],
       ["duplicate"]),
    _p("E3", "effect_correctness", "changed-intent rejection (and live authority for the intent)",
       ["KEY-02", "AUTH-01"], ["authority", "approval"]),
    _p("E4", "effect_correctness", "authoritative reconciliation", ["REC-01"],
       ["consistency", "retention", "registry"]),
    _p("E5", "effect_correctness", "compensation is a separate effect", ["COMP-01"], ["compensation"]),
    _p("E6", "effect_correctness", "effect history is preserved", ["HIST-01"], ["history"]),
    _p("D1", "disposition", "a truthful terminal or durable waiting state", ["DISP-01", "ADAPTER-FAULT",
                                                                             "EXP-DISPOSITION", "EXP-DISPOSITION-AT"]),
    _p("D2", "disposition", "cancellation is visible", ["CANCEL-01", "CANCEL-02"], ["cancellation"]),
    _p("D3", "disposition", "residual effects are visible", ["DISP-02"], ["residual"]),
    _p("D4", "disposition", "unknown stays unknown, with a next owner", ["TRUTH-02"], ["weak-service"]),
    _p("D5", "disposition", "terminal is terminal", ["TERM-01"], ["terminal"]),
)

_BY_INVARIANT: dict[str, RubricPoint] = {}
for _point in RUBRIC:
    for _inv in _point.invariants:
        _BY_INVARIANT.setdefault(_inv, _point)


def point_for(violation: Violation, tags: tuple[str, ...] = ()) -> RubricPoint | None:
    """The rubric point a violation takes away in a scenario with these tags."""
    if violation.invariant.startswith("EXP-"):
        wanted = set(tags)
        for point in RUBRIC:
            if wanted.intersection(point.tags):
                return point
    return _BY_INVARIANT.get(violation.invariant)


def score(results: list[ScenarioResult], *, adapter: str, seed: int | None) -> Scorecard:
    """Score scenario verdicts on the rubric."""
    lost: dict[str, list[LostPoint]] = {}
    seen: set = set()
    auto: set = set()
    for res in results:
        for v in res.violations:
            if v.auto_fail:
                auto.add(v.auto_fail)
            point = point_for(v, tuple(res.tags))
            if point is None or (point.id, res.id, v.invariant) in seen:
                continue
            seen.add((point.id, res.id, v.invariant))
            lost.setdefault(point.id, []).append(LostPoint(
                category=point.category, point=f"{point.id} {point.name}", scenario=res.id,
                invariant=v.invariant, events=v.events, message=v.message))
    categories = {}
    for name, maximum in CATEGORY_MAX.items():
        gone = sum(1 for p in RUBRIC if p.category == name and p.id in lost)
        categories[name] = {"score": maximum - gone, "max": maximum}
    auto_fail = tuple(r for r in AUTO_FAIL_REASONS if r in auto) + tuple(sorted(auto - set(AUTO_FAIL_REASONS)))
    total = 0 if auto_fail else sum(c["score"] for c in categories.values())
    maximum = sum(CATEGORY_MAX.values())
    verdicts = {r.verdict for r in results}
    if "fail" in verdicts or auto_fail or total < maximum:
        verdict = "fail"
    elif "unknown" in verdicts:
        verdict = "unknown"
    else:
        verdict = "pass"
    ordered = [lp for p in RUBRIC for lp in lost.get(p.id, ())]
    return Scorecard(adapter=adapter, seed=seed, total=total, max=maximum, categories=categories,
                     auto_fail=auto_fail, lost=tuple(ordered), scenarios=tuple(results), verdict=verdict,
                     extra={"rubric": [p.to_json() for p in RUBRIC]})


def render(card: Scorecard) -> str:
    """The rubric as printed with a score: every point, kept or lost, and why."""
    lost: dict[str, list[LostPoint]] = {}
    for lp in card.lost:
        lost.setdefault(lp.point.split(" ", 1)[0], []).append(lp)
    lines = []
    for name, maximum in CATEGORY_MAX.items():
        cat = card.categories.get(name, {"score": 0, "max": maximum})
        lines.append(f"{name} {cat['score']}/{cat['max']}")
        for p in RUBRIC:
            if p.category != name:
                continue
            mark = "lost" if p.id in lost else "kept"
            lines.append(f"  [{mark}] {p.id} {p.name}  ({', '.join(p.invariants)})")
            for lp in lost.get(p.id, ())[:3]:
                ev = ", ".join(f"#{e}" for e in lp.events[:6]) or "-"
                lines.append(f"         {lp.scenario}: {lp.invariant} [{ev}] {lp.message}")
            if len(lost.get(p.id, ())) > 3:
                lines.append(f"         ... {len(lost[p.id]) - 3} more")
    lines.append(f"total {card.total}/{card.max}"
                 + (f"  automatic failure: {'; '.join(card.auto_fail)}" if card.auto_fail else ""))
    return "\n".join(lines)


def _consistent() -> None:
    """Every invariant is mapped to exactly one point of its own category."""
    counted: dict[str, int] = {}
    for p in RUBRIC:
        for inv in p.invariants:
            counted[inv] = counted.get(inv, 0) + 1
            if inv not in BY_ID:
                raise AssertionError(f"rubric point {p.id} names unknown invariant {inv}")
            if BY_ID[inv].category != p.category:
                raise AssertionError(f"{inv} is {BY_ID[inv].category} but mapped to {p.id} ({p.category})")
    missing = sorted(set(BY_ID) - set(counted))
    twice = sorted(k for k, n in counted.items() if n > 1)
    if missing or twice:
        raise AssertionError(f"unmapped invariants {missing}, mapped twice {twice}")
    for name, maximum in CATEGORY_MAX.items():
        if sum(1 for p in RUBRIC if p.category == name) != maximum:
            raise AssertionError(f"{name} must have {maximum} points")


_consistent()
