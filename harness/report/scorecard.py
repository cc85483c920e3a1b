"""The scorecard as text: what `crashlab conformance` prints and the workshop's rubric rung shows.

Both faces (cli, workshop) read it from here, one floor below them.
"""
from __future__ import annotations

from ..checks.rubric import render as render_rubric
from ..checks.exercised import severity
from .findings import auto_fail_text
from ..run.isolate import from_json


def format_scorecard(card, *, no_answers: bool = False) -> str:
    """The per-scenario verdicts, then every rubric point kept or lost (with the scenario,
    invariant and evidence that lost it), then the verdict. ``no_answers`` leaves the adapter
    unnamed (a workshop's screen)."""
    shown = "$CRASHLAB_ADAPTER" if no_answers else card.adapter
    lines = [f"crashlab conformance  adapter: {shown}  seed: "
             f"{card.seed if card.seed is not None else 'per scenario'}  rule set: "
             f"{card.extra.get('rules', '(none named)')}"]
    isolation = from_json(card.extra.get("isolation"))
    if isolation is not None:
        lines.append(isolation.line())
    lines.append("")
    width = max((len(s.id) for s in card.scenarios), default=10)
    for s in card.scenarios:
        mark = {"pass": "PASS", "fail": "FAIL", "differs": "DIFF", "unknown": "UNKN"}[severity(s)]
        bad = f"  {', '.join(sorted({v.invariant for v in s.violations}))}" if s.violations else ""
        lines.append(f"  {mark}  {s.id:<{width}}  {s.disposition}{bad}")
    lines.append("")
    lines.append(render_rubric(card))
    if card.auto_fail:
        lines += [f"  automatic failure from {line}" for line in auto_fail_text(card.scenarios)]
    lines.append("")
    lines.append(f"verdict: {card.verdict.upper()}")
    lines += [f"  {line}" for line in unexercised_lines(card)]
    differs = sum(1 for s in card.scenarios if severity(s) == "differs")
    if differs:
        lines.append(f"  {differs} scenario(s) DIFF: no invariant violated, the outcome differs from the "
                     "scenario's expectation (as a correct alternative design can)")
    return "\n".join(lines)


#: how to exercise more rubric points, as ``crashlab conformance`` says it
MORE_SCENARIOS = ("run the whole library (no --tag or --scenario filter; with --scenarios DIR, add --with-library) "
                  "or scenarios whose traces exercise them")


def unexercised_lines(card, how: str = MORE_SCENARIOS) -> list[str]:
    """What the score does not cover and how to cover it (``how``): the points no selected
    scenario exercised, and those no result records (empty when every point was exercised)."""
    lines = []
    if card.not_exercised:
        lines.append(f"{len(card.not_exercised)} rubric point(s) not exercised: {', '.join(card.not_exercised)}: "
                     "no selected scenario had events for their rules, so this run cannot show them kept; "
                     f"{how} (docs/rubric.md)")
    if card.not_recorded:
        lines.append(f"{len(card.not_recorded)} rubric point(s) not recorded: {', '.join(card.not_recorded)}: "
                     "some results carry no record of what their traces exercised (written before crashlab "
                     "recorded it, and the trace is not there to compute it from), so they cannot be shown kept; "
                     "run again, or give `crashlab report` the folder of traces")
    return lines
