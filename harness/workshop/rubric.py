"""Rubric self-assessment: the learner scores an anonymous exhibit on the twenty points,
then compares with crashlab's score (the conformance suite run on the same adapter)."""
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


def adapter() -> str:
    from crashlab.gallery import BY_ID

    return BY_ID[EXHIBIT].adapter


@functools.cache
def card(spec: str | None = None):
    from ..conformance import run_suite

    return run_suite(spec or adapter())


def measured(category: str, spec: str | None = None) -> Expected:
    c = card(spec)
    if category == "automatic_failure":
        value = "yes" if c.auto_fail else "no"
        return Expected(mode="one_of", accepted=frozenset({value}), shown=value)
    value = c.categories[category]["score"]
    return Expected(mode="near", accepted=frozenset({value}), shown=value)


def traces() -> list[tuple[str, list[dict]]]:
    return [(name, E.sanitize(E.trace(name, adapter()), "exhibit-R")) for name in SHOWN]


def comparison(answers: dict, spec: str | None = None) -> str:
    c = card(spec)
    lines = [f"{'category':<20} {'you':>4} {'max':>4}"]
    for name, maximum in CATEGORY_MAX.items():
        lines.append(f"{name:<20} {answers.get(name, '-')!s:>4} {maximum:>4}")
    lines.append(f"{'automatic_failure':<20} {answers.get('automatic_failure', '-')!s:>4}")
    return "\n".join(lines) + f"\n(crashlab's total is shown by reveal; it ran {len(c.scenarios)} scenarios)"
