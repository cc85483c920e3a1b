"""Rubric self-assessment: the learner scores an anonymous exhibit on the twenty points from
the traces the kit shows, then compares with crashlab's score: the conformance suite run on
the same adapter over the same scenarios (SHOWN), so every category's score is exact and
checkable from the kit. A category's answer must be that score: no tolerance (a tolerance of
one point lets three tries bracket a 0-6 range), and a wrong one names the category, never
the score nor on which side it is."""
from __future__ import annotations

import functools

from ..checks.docs import CATEGORY_MAX
from . import evidence as E
from .questions import Expected

#: The adapter scored in the rubric rung (a gallery entry, never named in the kit).
EXHIBIT = "deadline-as-failure"
#: The traces the kit shows (a fixed, neutral selection: the eight traces and two combined).
SHOWN = ("t1-crash-before-dispatch", "t2-commit-before-record", "t3-record-before-response",
         "t4-approval-wait-crash", "t5-incompatible-deployment", "t6-duplicate-input-event", "t7-late-callback",
         "t8-compensation-failure", "combined-cancellation-under-pressure", "matrix-reconciliation-down")


#: One exhibit per automatic failure (label -> gallery entry, the scenario whose trace shows it);
#: the labels are not in the rubric's order. The mapping is the answer: it never enters a kit.
FAILURES = {"F1": ("compensation-as-rollback", "combined-cancel-ambiguous-commit"),
            "F2": ("checkpoint-without-owner", "t1-crash-before-dispatch"),
            "F3": ("blind-retry", "fieldops-no-key-lookup"),
            "F4": ("inner-client-retry", "t1-crash-before-dispatch"),
            "F5": ("exactly-once-claim", "combined-cancellation-under-pressure")}


def failure_name(reason: str) -> str:
    """A rubric reason as a vocabulary value: 'exactly-once claim' -> exactly_once_claim."""
    return reason.replace("-", "_").replace(" ", "_")


def _failure_adapter(label: str) -> str:
    from crashlab.gallery import BY_ID

    return BY_ID[FAILURES[label][0]].adapter


def failure_expected(label: str, part: str) -> Expected:
    """The automatic failure an exhibit's trace shows, and the events that show it."""
    _, scenario = FAILURES[label]
    found = [v for v in E.verdict(scenario, _failure_adapter(label)).violations if v.auto_fail]
    if part == "failure":
        names = sorted({failure_name(v.auto_fail) for v in found})
        return Expected(mode="one_of", accepted=frozenset(names), shown=names[0] if names else None)
    seqs = sorted({s for v in found for s in v.events})
    return Expected(mode="one_of", accepted=frozenset(seqs), shown=seqs[0] if seqs else None)


def adapter() -> str:
    from crashlab.gallery import BY_ID

    return BY_ID[EXHIBIT].adapter


@functools.cache
def card(spec: str | None = None):
    """crashlab's scorecard of the exhibit (or of ``spec``) on the scenarios whose traces the kit shows."""
    from ..run.conformance import run_suite

    return run_suite(spec or adapter(), [E.scenario_of(name) for name in SHOWN])


def measured(category: str, spec: str | None = None) -> Expected:
    c = card(spec)
    if category == "automatic_failure":
        value = "yes" if c.auto_fail else "no"
        return Expected(mode="one_of", accepted=frozenset({value}), shown=value,
                    wrong="is not crashlab's score for this category on the kit's traces; recount its "
                          "points in rubric.md, trace by trace")
    value = c.categories[category]["score"]
    return Expected(mode="one_of", accepted=frozenset({value}), shown=value,
                    wrong="is not crashlab's score for this category on the kit's traces; recount its "
                          "points in rubric.md, trace by trace")


def traces() -> list[tuple[str, list[dict]]]:
    return [(name, E.sanitize(E.trace(name, adapter()), "exhibit-R")) for name in SHOWN]


def failure_traces() -> list[tuple[str, list[dict]]]:
    return [(label, E.sanitize(E.trace(scenario, _failure_adapter(label)), f"exhibit-{label}"))
            for label, (_, scenario) in FAILURES.items()]


def comparison(answers: dict, spec: str | None = None) -> str:
    c = card(spec)
    lines = [f"{'category':<20} {'you':>4} {'max':>4}"]
    for name, maximum in CATEGORY_MAX.items():
        lines.append(f"{name:<20} {answers.get(name, '-')!s:>4} {maximum:>4}")
    lines.append(f"{'automatic_failure':<20} {answers.get('automatic_failure', '-')!s:>4}")
    return "\n".join(lines) + f"\n(crashlab's total is shown by reveal; it ran {len(c.scenarios)} scenarios)"
