"""A pass is "exercised and held" only when the trace had events to judge, else "not
exercised"; a scenario that only differs from its expectation is not a red FAIL."""
from __future__ import annotations

import re
from pathlib import Path

from crashlab.checks import EXPECTATIONS, INVARIANTS
from crashlab.checks.rubric import score
from crashlab.run.conformance import recheck_saved
from crashlab.checks.exercised import EXERCISED_BY, FACTS, counts, coverage, severity
from crashlab.report.html import catalogue, scenario_page
from crashlab.report.index import index_page, overall
from crashlab.report.view import Item, ordered
from crashlab.vocab.results import ScenarioResult, Violation
from crashlab.world.trace import read_jsonl

TRACES = Path(__file__).resolve().parent.parent / "traces"


def trace(name: str):
    path = TRACES / f"{name}.jsonl"
    events = read_jsonl(path)
    return events, recheck_saved(events, path)


def test_every_invariant_names_the_facts_that_exercise_it():
    ids = {i.id for i in (*INVARIANTS, *EXPECTATIONS)}
    assert ids <= set(EXERCISED_BY), sorted(ids - set(EXERCISED_BY))
    assert {f for fs in EXERCISED_BY.values() for f in fs} <= set(FACTS)


def test_t2_exercises_the_retry_rule_but_not_throttling_or_permissions():
    events, result = trace("t2-commit-before-record")
    n = counts(events)
    assert n["ambiguous"] >= 1 and n["takeovers"] >= 1 and n["throttled"] == 0 and n["cancellations"] == 0
    cov = coverage(result, events, [i for i, _ in catalogue()])
    assert "RETRY-01" in cov.held and "REC-01" in cov.held
    assert {"CLS-02", "AUTH-02", "CANCEL-01", "EVT-01", "MIG-01"} <= set(cov.not_exercised)
    assert not set(cov.held) & set(cov.not_exercised)
    page = scenario_page(Item(result=result, events=events, name="t2"))
    idle = page.split("invariants not exercised", 1)[1].split("</details>", 1)[0]
    held = page.split("invariants exercised and held", 1)[1].split("</details>", 1)[0]
    assert "CLS-02" in idle and "CLS-02" not in held and "RETRY-01" in held
    assert re.search(r"ambiguous sends 1 · takeovers \d+ · fenced writes \d+", page)
    assert "invariants not violated" not in page


def test_the_facts_are_counted_where_they_happen():
    assert counts(trace("matrix-throttling")[0])["throttled"] >= 1
    assert counts(trace("t6-duplicate-input-event")[0])["duplicates"] >= 1
    assert counts(trace("t8-compensation-failure")[0])["compensations"] >= 1
    assert counts(trace("t5-incompatible-deployment")[0])["deployments"] >= 1
    events, result = trace("matrix-throttling")
    assert "CLS-02" in coverage(result, events, ["CLS-02"]).held


def r(id_: str, *invariants: str, auto: str | None = None) -> ScenarioResult:
    vs = tuple(Violation(invariant=i, message=f"{i} broken", run="run-82", auto_fail=auto) for i in invariants)
    return ScenarioResult(id=id_, title=id_, verdict="fail" if vs else "pass", dispositions={"run-82": "SUCCEEDED"},
                          violations=vs, seed=1, repro=f"crashlab run {id_} --adapter a:B --seed 1")


def test_an_expectation_difference_is_not_a_safety_failure():
    assert severity(r("a", "EXP-DISPOSITION", "EXP-EVIDENCE")) == "differs"
    assert severity(r("b", "EXP-DISPOSITION", "EFF-01")) == "fail"
    assert severity(r("c", "EXP-EFFECTS", auto="duplicate")) == "fail"
    assert severity(r("d")) == "pass"
    alternative = [Item(result=x, events=None, name=x.id) for x in (r("t2", "EXP-DISPOSITION"), r("t3"))]
    card = score([i.result for i in alternative], adapter="a:B", seed=None)
    assert card.verdict == "fail" and overall(alternative, card) == "differs"
    page = index_page(alternative, card, adapter="a:B", notes=[])
    assert '<span class="badge differs"' in page and '<span class="badge fail"' not in page
    assert "0 fail, 1 differ from their expectation" in page and "No invariant was violated" in page
    unsafe = [Item(result=x, events=None, name=x.id) for x in (r("t2", "EXP-DISPOSITION"), r("t1", "EFF-01"))]
    assert overall(unsafe, score([i.result for i in unsafe], adapter="a:B", seed=None)) == "fail"
    assert [i.result.id for i in ordered(unsafe)] == ["t1", "t2"]        # the red failure first


def test_the_cli_scorecard_marks_a_difference_apart():
    from crashlab.report.scorecard import format_scorecard

    text = format_scorecard(score([r("t2", "EXP-DISPOSITION"), r("t1", "EFF-01")], adapter="a:B", seed=None))
    assert re.search(r"DIFF  t2 ", text) and re.search(r"FAIL  t1 ", text) and "1 scenario(s) DIFF" in text


def test_the_index_says_which_scenarios_exercised_each_rubric_point():
    from crashlab.report.index import coverage_section

    items = []
    for name in ("t2-commit-before-record", "matrix-throttling"):
        events, result = trace(name)
        items.append(Item(result=result, events=events, name=name))
    html = coverage_section(items)
    c4 = next(row for row in html.split("<tr>") if row.startswith("<td>C4 "))
    assert "matrix-throttling" in c4 and "t2-commit-before-record" not in c4     # throttling: only there
    c3 = next(row for row in html.split("<tr>") if row.startswith("<td>C3 "))
    assert "t2-commit-before-record" in c3                                        # its ambiguous send


def test_the_deadline_rules_are_not_exercised_where_the_intake_names_no_deadline():
    events, result = trace("fieldops-no-key-lookup")
    assert [r.get("deadline") for r in events[0]["runs"]] == [None]      # docs/invariants.md, "No deadline"
    n = counts(events)
    assert n["finishes"] >= 1 and n["checkpoints"] >= 1
    cov = coverage(result, events, [i for i, _ in catalogue()])
    assert {"DEAD-01", "DEAD-02"} <= set(cov.not_exercised) and not {"DEAD-01", "DEAD-02"} & set(cov.held)
    page = scenario_page(Item(result=result, events=events, name="fieldops"))
    held = page.split("invariants exercised and held", 1)[1].split("</details>", 1)[0]
    assert "DEAD-01" not in held and "DEAD-02" not in held
    # with a business deadline they are judged
    events, result = trace("matrix-reconciliation-down")
    assert events[0]["runs"][0]["deadline"] is not None
    cov = coverage(result, events, ["DEAD-01", "DEAD-02"])
    assert set(cov.held) | set(cov.violated) == {"DEAD-01", "DEAD-02"}


def test_t7_the_late_callback_delivered_through_the_inbox_exercises_late01():
    events, result = trace("t7-late-callback")
    assert any(e.get("kind") == "deliver" and e["event"].get("type") == "callback" for e in events)
    assert counts(events)["late"] >= 1
    assert "LATE-01" in coverage(result, events, ["LATE-01"]).held


def test_a_run_whose_worker_died_without_finishing_holds_no_end_rule():
    from crashlab.run.runner import fault_trace
    from crashlab.scenario.loader import resolve

    run = fault_trace(resolve("t2-commit-before-record"), "crashlab.reference_impl:ReferenceAdapter", None, "died",
                      "the worker process exited with code 1")
    events = run.events
    result = recheck_saved(events, "died.jsonl")
    cov = coverage(result, events, [i for i, _ in catalogue()])
    assert "ADAPTER-FAULT" in cov.violated
    assert "DISP-01" in cov.not_exercised
    assert counts(events)["unfinished"] == 1 and counts(events)["finishes"] == 0
    assert not [i for i in cov.held if i == "DISP-01" or i.startswith("EXP-")], cov.held
    page = scenario_page(Item(result=result, events=events, name="died"))
    held = page.split("invariants exercised and held", 1)[1].split("</details>", 1)[0]
    assert "DISP-01" not in held and "EXP-" not in held
