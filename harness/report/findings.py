"""Findings: the violations of a whole report grouped by rule, so a mistake that fails 53
scenarios reads as one finding with a count and its first example."""
from __future__ import annotations

from dataclasses import dataclass

from ..vocab.results import LostPoint, Scorecard, Violation
from .view import Item


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    rule: str                         # invariant or expectation id
    statement: str                    # the rule as docs/invariants.md states it
    category: str | None
    auto_fail: str | None
    count: int                        # violations of this rule, all scenarios
    scenarios: tuple[str, ...]        # scenario ids, report order, each once
    first: Item                       # the first scenario that broke it
    example: Violation                # its first violation of the rule
    points: tuple[str, ...] = ()      # rubric points it cost ("E2 same-intent deduplication")
    auto_scenarios: tuple[str, ...] = ()   # the scenarios where it raised the automatic failure


def statements() -> dict[str, str]:
    from ..checks import EXPECTATIONS, INVARIANTS

    return {inv.id: inv.statement for inv in (*INVARIANTS, *EXPECTATIONS)}


def group(items: list[Item], card: Scorecard | None = None) -> list[Finding]:
    """One finding per violated rule, in the order: automatic failures, then most scenarios,
    then rule id. ``items`` are in report order, so the first example is the first shown."""
    known = statements()
    by_rule: dict[str, list[tuple[Item, Violation]]] = {}
    for item in items:
        for v in item.result.violations:
            by_rule.setdefault(v.invariant, []).append((item, v))
    points: dict[str, list[str]] = {}
    for p in card.lost if card is not None else ():
        points.setdefault(p.invariant, [])
        if p.point not in points[p.invariant]:
            points[p.invariant].append(p.point)
    out = []
    for rule, hits in by_rule.items():
        auto_hits = [(i, v) for i, v in hits if v.auto_fail]
        # an automatic failure's first example is one that raised it (the same rule may cost
        # only a point where the resend could not duplicate)
        first_item, example = (auto_hits or hits)[0]
        out.append(Finding(rule=rule, statement=known.get(rule, ""), category=example.category,
                           auto_fail=example.auto_fail if auto_hits else None,
                           count=len(hits), scenarios=tuple(dict.fromkeys(i.result.id for i, _ in hits)),
                           first=first_item, example=example, points=tuple(points.get(rule, ())),
                           auto_scenarios=tuple(dict.fromkeys(i.result.id for i, _ in auto_hits))))
    out.sort(key=lambda f: (f.auto_fail is None, -len(f.scenarios), -f.count, f.rule))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LostGroup:
    point: str
    category: str
    invariants: tuple[str, ...]
    scenarios: tuple[str, ...]
    first: LostPoint


def lost_groups(card: Scorecard) -> list[LostGroup]:
    """Lost points grouped by rubric point: which invariants took it, in how many scenarios."""
    groups: dict[str, list[LostPoint]] = {}
    for p in card.lost:
        groups.setdefault(p.point, []).append(p)
    return [LostGroup(point=point, category=ps[0].category,
                      invariants=tuple(dict.fromkeys(p.invariant for p in ps)),
                      scenarios=tuple(dict.fromkeys(p.scenario for p in ps)), first=ps[0])
            for point, ps in groups.items()]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoFailSource:
    """Where one automatic-failure reason comes from: the rule that raised it and in which
    scenarios (report order)."""

    reason: str
    invariant: str
    scenarios: tuple[str, ...]


def auto_fail_sources(results) -> list[AutoFailSource]:
    """Every (automatic-failure reason, rule) with the scenarios that raised it, in the order
    of the results (``ScenarioResult`` s): what makes a 0/20 traceable."""
    found: dict[tuple[str, str], list[str]] = {}
    for r in results:
        for v in r.violations:
            if v.auto_fail:
                ids = found.setdefault((v.auto_fail, v.invariant), [])
                if r.id not in ids:
                    ids.append(r.id)
    return [AutoFailSource(reason=reason, invariant=inv, scenarios=tuple(ids)) for (reason, inv), ids in found.items()]


def auto_fail_text(results, limit: int = 8) -> list[str]:
    """One plain line per source: ``RETRY-01 in 6 scenarios: t2-commit-before-record, …``."""
    out = []
    for src in auto_fail_sources(results):
        shown = ", ".join(src.scenarios[:limit]) + (f" … and {len(src.scenarios) - limit} more"
                                                    if len(src.scenarios) > limit else "")
        out.append(f"{src.reason}: {src.invariant} in {len(src.scenarios)} scenario"
                   f"{'s' if len(src.scenarios) != 1 else ''}: {shown}")
    return out
