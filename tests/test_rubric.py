"""The twenty-point rubric: mapping, scoring, automatic failure, verdicts and the docs."""
from __future__ import annotations

from pathlib import Path

from crashlab.rules import ruleset
from crashlab.checks.docs import invariants_markdown, rubric_markdown
from crashlab.checks.invariants import BY_ID, INVARIANTS
from crashlab.checks.rubric import AUTO_FAIL_REASONS, BY_POINT, CATEGORY_MAX, RUBRIC, point_for, render, score
from crashlab.vocab.results import ScenarioResult, Violation

DOCS = Path(__file__).resolve().parent.parent / "docs"


EVERY_CHECK = tuple(BY_ID)


def result(id_, *violations, verdict=None, tags=(), exercised=EVERY_CHECK):
    """A scenario result; by default its trace exercised every check (a suite that covers the rubric)."""
    vs = tuple(violations)
    return ScenarioResult(id=id_, title=id_, verdict=verdict or ("fail" if vs else "pass"),
                          dispositions={"run-82": "SUCCEEDED"}, violations=vs, tags=tuple(tags), exercised=exercised)


def violation(inv, events=(3, 7), auto=False):
    return Violation(invariant=inv, message=f"{inv} broke", events=events, run="run-82",
                     category=BY_ID[inv].category, auto_fail=BY_ID[inv].auto_fail if auto else None)


def test_twenty_points_in_four_categories():
    assert CATEGORY_MAX == {"classification": 5, "ownership": 4, "effect_correctness": 6, "disposition": 5}
    assert len(RUBRIC) == 20
    for name, maximum in CATEGORY_MAX.items():
        assert sum(1 for p in RUBRIC if p.category == name) == maximum


def test_every_invariant_takes_exactly_one_point_of_its_own_category():
    mapped = [inv for p in RUBRIC for inv in p.invariants]
    assert sorted(mapped) == sorted(BY_ID)
    for p in RUBRIC:
        for inv in p.invariants:
            assert BY_ID[inv].category == p.category


def test_a_clean_suite_scores_twenty():
    card = score([result("a"), result("b")], adapter="x:Y", seed=None)
    assert (card.total, card.max, card.verdict, card.auto_fail, card.lost) == (20, 20, "pass", (), ())
    assert card.categories["effect_correctness"] == {"score": 6, "max": 6}
    assert card.to_json()["rubric"][0]["id"] == "C1"


def test_a_lost_point_names_scenario_invariant_and_evidence():
    card = score([result("t2", violation("EFF-01", (45, 58))), result("t3", violation("EFF-02"))],
                 adapter="x:Y", seed=7)
    assert card.total == 19 and card.verdict == "fail" and card.seed == 7
    assert card.categories["effect_correctness"]["score"] == 5
    assert [(lp.point, lp.scenario, lp.invariant, lp.events) for lp in card.lost] == [
        ("E2 same-intent deduplication", "t2", "EFF-01", (45, 58)),
        ("E2 same-intent deduplication", "t3", "EFF-02", (3, 7))]


def test_a_point_is_lost_once_however_often_it_fails():
    card = score([result(f"s{i}", violation("OWN-01"), violation("OWN-01", (9,))) for i in range(3)],
                 adapter="x:Y", seed=None)
    assert card.total == 19 and card.categories["ownership"]["score"] == 3
    assert len(card.lost) == 3                       # one line per scenario, the first evidence each


def test_automatic_failure_zeroes_the_total():
    for inv in INVARIANTS:
        if not inv.auto_fail:
            continue
        card = score([result("s", violation(inv.id, auto=True))], adapter="x:Y", seed=None)
        assert card.total == 0 and card.auto_fail == (inv.auto_fail,) and card.verdict == "fail"
        assert sum(c["score"] for c in card.categories.values()) == 19


def test_auto_fail_reasons_are_listed_in_rubric_order():
    card = score([result("s", violation("RETRY-03", auto=True), violation("RETRY-01", auto=True))],
                 adapter="x:Y", seed=None)
    assert card.auto_fail == ("blind ambiguous retry", "two retry owners")
    assert set(card.auto_fail) <= set(AUTO_FAIL_REASONS)


def test_unknown_when_nothing_failed_but_something_was_inconclusive():
    card = score([result("a"), result("b", verdict="unknown")], adapter="x:Y", seed=None)
    assert card.total == 20 and card.verdict == "unknown"


def test_an_expectation_miss_costs_the_point_its_rule_names_and_no_tag_routes_it():
    rule = {"source": "AR-08, Runbook: ambiguous reservation", "quote": "Use the adapter's authoritative read"}
    miss = Violation(invariant="EXP-DISPOSITION", message="m", run="run-82", point="E4", rule=rule,
                     expected=["SUCCEEDED"], observed="FAILED_EFFECT_UNKNOWN")
    assert point_for(miss).id == "E4"
    card = score([result("c", miss, tags=("cancellation", "zombie"))], adapter="x:Y", seed=None)
    [lp] = card.lost
    assert lp.point.startswith("E4 ") and lp.rule == rule
    assert (lp.expected, lp.observed) == (["SUCCEEDED"], "FAILED_EFFECT_UNKNOWN")
    text = render(card)
    assert "Use the adapter's authoritative read" in text
    assert "expected SUCCEEDED, observed FAILED_EFFECT_UNKNOWN" in text


def test_a_miss_without_a_rule_costs_the_point_of_its_kind_whatever_the_tags():
    for inv, point in (("EXP-DISPOSITION", "D1"), ("EXP-EVIDENCE", "C2"), ("EXP-EFFECTS", "E2")):
        card = score([result("c", violation(inv), tags=("cancellation", "zombie", "compensation"))],
                     adapter="x:Y", seed=None)
        assert [lp.point.split()[0] for lp in card.lost] == [point]
    assert point_for(violation("EFF-01"), ("cancellation",)).id == "E2"   # invariants keep their point


def test_a_lost_invariant_point_quotes_the_broken_invariant_and_what_to_change():
    card = score([result("t2", violation("OWN-04"))], adapter="x:Y", seed=None)
    [lp] = card.lost
    assert lp.rule == {"source": "crashlab OWN-04 (docs/invariants.md)", "quote": BY_ID["OWN-04"].statement}
    assert lp.fix == {"text": ruleset.fix("OWN-04").text, "see": 'docs/adapters.md, "Unresolved"'}
    text = render(card)
    # the point's chapter passage once, then the finding with its own rule and the change to make
    assert f'point (AR-08, Assess the eight traces): "{BY_POINT["O4"].quote}"' in text
    assert f'rule (crashlab OWN-04 (docs/invariants.md)): "{BY_ID["OWN-04"].statement}"' in text
    assert f'what to change: {ruleset.fix("OWN-04").text} (docs/adapters.md, "Unresolved")' in text
    # the generic sentence is no finding's rule: two invariants of one point quote two rules
    card = score([result("t2", violation("EVT-02"), violation("EFF-01"))], adapter="x:Y", seed=None)
    assert [lp.rule["quote"] for lp in card.lost] == [BY_ID["EVT-02"].statement, BY_ID["EFF-01"].statement]
    assert render(card).count(BY_POINT["E2"].quote) == 1


def test_every_check_has_what_to_change_in_a_section_that_exists():
    from pathlib import Path

    headings = {line.lstrip("#").strip() for line in
                (Path(__file__).resolve().parent.parent / "docs" / "adapters.md").read_text().splitlines()
                if line.startswith("#")}
    assert set(ruleset.FIXES) == set(BY_ID)
    missing = {k: f.section for k, f in ruleset.FIXES.items() if f.section not in headings}
    assert not missing


def test_render_prints_the_mapping_with_the_score():
    card = score([result("t2", violation("EFF-01", (45, 58)))], adapter="x:Y", seed=None)
    text = render(card)
    assert "[lost] E2 same-intent deduplication" in text
    assert "t2: EFF-01 [#45, #58] EFF-01 broke" in text
    assert "[kept] C1" in text and text.rstrip().endswith("total 19/20")


def test_docs_are_generated_from_the_code():
    assert (DOCS / "invariants.md").read_text(encoding="utf-8") == invariants_markdown(), \
        "docs/invariants.md is stale: run python tools/docgen.py"
    assert (DOCS / "rubric.md").read_text(encoding="utf-8") == rubric_markdown(), \
        "docs/rubric.md is stale: run python tools/docgen.py"


def test_docs_name_every_invariant_and_point():
    inv_doc, rub_doc = invariants_markdown(), rubric_markdown()
    for inv_id, inv in BY_ID.items():
        assert f"### {inv_id}: {inv.statement}" in inv_doc
        assert inv_id in rub_doc
    for p in RUBRIC:
        assert f"| {p.id} | {p.name} |" in rub_doc


# --------------------------------------------------------------------------- end to end
def _scenario(expect):
    from support import scenario
    return scenario(expect=expect)


def test_a_scenario_rule_reaches_the_violation_the_failure_message_and_the_results_json():
    import json

    from crashlab.run.conformance import failure_message, run_one
    from crashlab.vocab.results import Scorecard

    rule = {"point": "D2", "source": "AR-08, Cancellation races", "quote": "Before dispatch, stop cleanly"}
    _, res = run_one(_scenario({"dispositions": ["CANCELLED_NO_EFFECT"], "rules": {"dispositions": rule}}),
                     "support:Script")
    [miss] = [v for v in res.violations if v.invariant == "EXP-DISPOSITION"]
    assert (miss.point, miss.expected, miss.observed) == ("D2", ["CANCELLED_NO_EFFECT"], "SUCCEEDED")
    text = failure_message(res)
    assert 'rule D2 (AR-08, Cancellation races): "Before dispatch, stop cleanly"' in text
    assert "expected CANCELLED_NO_EFFECT; observed SUCCEEDED" in text
    card = score([res], adapter="support:Script", seed=None)
    back = Scorecard.from_json(json.loads(json.dumps(card.to_json())))
    [lost] = [lp for lp in back.lost if lp.invariant == "EXP-DISPOSITION"]
    assert lost.point.startswith("D2 ") and lost.rule == {"source": rule["source"], "quote": rule["quote"]}
    assert lost.expected == ["CANCELLED_NO_EFFECT"] and lost.observed == "SUCCEEDED"
    assert [v.point for v in back.scenarios[0].violations if v.invariant == "EXP-DISPOSITION"] == ["D2"]


def test_a_miss_in_a_file_without_rules_costs_the_point_of_its_kind():
    from crashlab.run.conformance import run_one

    _, res = run_one(_scenario({"remote_effects": 3}), "support:Script")
    [miss] = [v for v in res.violations if v.invariant == "EXP-EFFECTS"]
    assert miss.point == "E2" and miss.rule is None and (miss.expected, miss.observed) == (3, 1)


def test_results_written_before_rules_existed_still_load():
    from crashlab.vocab.results import Scorecard

    old = {"adapter": "x:Y", "seed": None, "verdict": "fail",
           "score": {"total": 19, "max": 20, "categories": {"disposition": {"score": 4, "max": 5}}},
           "auto_fail": [], "lost": [{"category": "disposition", "point": "D1 x", "scenario": "s",
                                      "invariant": "EXP-DISPOSITION", "events": [3], "message": "m"}],
           "rubric": [{"id": "C1", "tags": []}],
           "scenarios": [{"id": "s", "verdict": "fail", "violations": [{"invariant": "EXP-DISPOSITION"}]}]}
    card = Scorecard.from_json(old)
    assert card.lost[0].rule is None and card.scenarios[0].violations[0].point is None
    assert "rule" not in card.lost[0].to_json() and card.extra["rubric"] == [{"id": "C1", "tags": []}]


def test_the_reports_show_the_rule_and_the_expected_and_observed_outcomes():
    from crashlab.report.index import score_html
    from crashlab.report.markdown import summary

    miss = Violation(invariant="EXP-DISPOSITION", message="m", run="run-82", point="E4",
                     rule={"source": "AR-08, Runbook: ambiguous reservation", "quote": "Use the authoritative read"},
                     expected=["SUCCEEDED"], observed="FAILED_EFFECT_UNKNOWN")
    card = score([result("c", miss)], adapter="x:Y", seed=None)
    text = summary([], card, "x:Y")
    assert "rule (AR-08, Runbook: ambiguous reservation)" in text and "Use the authoritative read" in text
    assert "observed FAILED_EFFECT_UNKNOWN" in text
    html = score_html(card, {})
    assert "Use the authoritative read" in html and "observed FAILED_EFFECT_UNKNOWN" in html


def faulted(id_, disposition=None):
    fault = violation("ADAPTER-FAULT", events=(3,))
    return ScenarioResult(id=id_, title=id_, verdict="fail", dispositions={"run-82": disposition},
                          violations=(fault,), exercised=("ADAPTER-FAULT", "DISP-01") if disposition is None
                          else EVERY_CHECK)


def test_an_adapter_that_faulted_everywhere_demonstrated_nothing_and_loses_every_point():
    card = score([faulted("t1"), faulted("t2")], adapter="x", seed=None)
    assert card.total == 0 and card.verdict == "fail"
    by_point = {lp.point.split()[0]: lp for lp in card.lost}
    assert sorted(by_point) == sorted(p.id for p in RUBRIC)
    c1 = by_point["C1"]
    assert c1.invariant == "ADAPTER-FAULT" and c1.events == (3,) and c1.scenario == "t1"
    assert "every run of every selected scenario (2)" in c1.message and "ADAPTER-FAULT broke" in c1.message
    assert c1.rule["quote"] == BY_POINT["C1"].quote            # the point's own definition


def test_one_run_that_reached_a_disposition_keeps_the_usual_scoring():
    for other in (result("t2"), faulted("t2", disposition="FAILED_EFFECT_UNKNOWN")):
        card = score([faulted("t1"), other], adapter="x", seed=None)
        lost = {lp.point.split()[0] for lp in card.lost}
        assert lost == {"D1"} and card.total == 19        # only the adapter fault's own point


# --------------------------------------------------------------------------- exercised points
def test_a_point_no_scenario_exercised_is_not_exercised_never_kept():
    # the scenario passed and exercised everything but the cancellation rules: D2 is not kept
    card = score([result("t2", exercised=tuple(i for i in BY_ID if not i.startswith("CANCEL-")))],
                 adapter="x:Y", seed=None)
    assert card.not_exercised == ("D2",) and card.not_recorded == () and card.lost == ()
    assert (card.total, card.exercised_points, card.verdict) == (19, 19, "unknown")
    assert card.categories["disposition"] == {"score": 4, "max": 5}
    text = render(card)
    assert "[not exercised] D2 cancellation is visible" in text and "[kept] D2" not in text
    assert "disposition 4/5 (D2 not exercised)" in text
    assert text.rstrip().endswith("total 19/20 (19/19 exercised points kept; 1 not exercised: D2)")
    assert "20/20" not in text


def test_one_invariant_of_a_point_exercised_in_one_scenario_exercises_the_point():
    card = score([result("a", exercised=("CLS-02",)), result("b", exercised=tuple(i for i in BY_ID if i not in
                                                                                  BY_POINT["C4"].invariants))],
                 adapter="x:Y", seed=None)
    assert "C4" not in card.not_exercised and card.verdict == "pass" and card.score_text() == "20/20"


def test_a_lost_point_is_lost_whatever_else_was_not_exercised():
    card = score([result("t2", violation("EFF-01", (45, 58)), exercised=("EFF-01", "TRUTH-01"))],
                 adapter="x:Y", seed=None)
    assert card.verdict == "fail" and [lp.point.split()[0] for lp in card.lost] == ["E2"]
    assert card.total == 1 and card.exercised_points == 2 and len(card.not_exercised) == 18
    text = render(card)
    assert "[lost] E2" in text and "[kept] C1" in text and "[not exercised] C2" in text
    assert "total 1/20 (1/2 exercised points kept; 18 not exercised: C2, C3," in text


def test_results_without_a_record_of_what_they_exercised_cannot_show_a_point_kept():
    card = score([result("old", exercised=None)], adapter="x:Y", seed=None)
    assert card.not_recorded == tuple(p.id for p in RUBRIC) and card.not_exercised == ()
    assert (card.total, card.verdict) == (0, "unknown")
    assert "[not recorded] C1" in render(card)
    # one recorded scenario exercises what it exercised; the rest is not recorded, not "not exercised"
    card = score([result("old", exercised=None), result("new", exercised=("TRUTH-01",))], adapter="x:Y", seed=None)
    assert "C1" not in card.not_recorded and "C2" in card.not_recorded and card.not_exercised == ()


def test_no_scenario_is_no_score():
    card = score([], adapter="x:Y", seed=None)
    assert (card.total, card.verdict, len(card.not_exercised)) == (0, "unknown", 20)


def test_more_findings_than_shown_count_findings_and_name_scenarios():
    # 16 findings of E2: s0's three are shown; 13 more in 12 scenarios (s1 has two)
    vs = [result("s0", violation("EFF-01"), violation("EFF-02"), violation("EVT-01")),
          result("s1", violation("EFF-01"), violation("EFF-02"))]
    vs += [result(f"s{i}", violation("EFF-01")) for i in range(2, 13)]
    text = render(score(vs, adapter="x:Y", seed=None))
    assert "... 13 more findings in 12 scenarios: s1, s10, s11, s12, s2, s3, s4, s5, s6, s7, s8, s9\n" in text


def test_the_exercised_record_round_trips_through_results_json():
    import json

    from crashlab.vocab.results import Scorecard

    card = score([result("a", exercised=("CLS-02", "TRUTH-01")), result("b", exercised=EVERY_CHECK)],
                 adapter="x:Y", seed=None)
    data = json.loads(json.dumps(card.to_json()))
    assert data["scenarios"][0]["exercised"] == ["CLS-02", "TRUTH-01"]
    assert data["score"]["exercised"] == 20 and data["score"]["not_exercised"] == []
    back = Scorecard.from_json(data)
    assert back.scenarios[0].exercised == ("CLS-02", "TRUTH-01") and back == card
    subset = score([result("a", exercised=("TRUTH-01",))], adapter="x:Y", seed=None)
    back = Scorecard.from_json(json.loads(json.dumps(subset.to_json())))
    assert back.not_exercised == subset.not_exercised and back.total == 1 and back.verdict == "unknown"


def test_an_exercised_record_that_is_not_a_list_of_ids_names_the_field():
    import pytest

    from crashlab.vocab.results import Scorecard

    data = score([result("a")], adapter="x:Y", seed=None).to_json()
    data["scenarios"][0]["exercised"] = "TRUTH-01"
    with pytest.raises(ValueError, match=r"scenarios\[0\]\.exercised: unexpected str"):
        Scorecard.from_json(data)
    data["scenarios"][0]["exercised"] = [1]
    with pytest.raises(ValueError, match=r"scenarios\[0\]\.exercised: expected a list of check ids"):
        Scorecard.from_json(data)


def _older(card) -> dict:
    """``card`` as written before crashlab recorded what was exercised (and when it still claimed 20/20)."""
    data = card.to_json()
    for key in ("exercised", "not_exercised", "not_recorded"):
        del data["score"][key]
    data["score"]["total"], data["verdict"] = 20, "pass"
    for s in data["scenarios"]:
        del s["exercised"]
    return data


def test_an_older_results_file_computes_the_record_from_its_saved_traces(tmp_path):
    from crashlab.run.conformance import run_one
    from crashlab.checks.rubric import scorecard_from_json
    from crashlab.scenario import library

    [t2] = [s for s in library() if s.id == "t2-commit-before-record"]
    _, res = run_one(t2, "crashlab.reference_impl:ReferenceAdapter", out_dir=tmp_path)
    card = score([res], adapter="crashlab.reference_impl:ReferenceAdapter", seed=None)
    assert card.verdict == "unknown" and "D2" in card.not_exercised
    back = scorecard_from_json(_older(card))
    assert back.scenarios[0].exercised == res.exercised
    assert (back.total, back.not_exercised, back.verdict) == (card.total, card.not_exercised, "unknown")
    # a relative trace path is found beside the results file
    data = _older(card)
    data["scenarios"][0]["trace"] = Path(res.trace).name
    assert scorecard_from_json(data, base=tmp_path).not_exercised == card.not_exercised


def test_an_older_results_file_without_its_traces_is_not_recorded(tmp_path):
    from crashlab.checks.rubric import scorecard_from_json

    data = _older(score([result("a"), result("b", violation("EFF-01"))], adapter="x:Y", seed=None))
    data["scenarios"][0]["trace"] = str(tmp_path / "gone.jsonl")
    back = scorecard_from_json(data)
    assert [lp.point.split()[0] for lp in back.lost] == ["E2"]           # the file's own findings
    assert back.not_recorded == tuple(p.id for p in RUBRIC if p.id != "E2")
    assert (back.total, back.verdict) == (0, "fail")                     # a lost point still fails
    assert "[not recorded] C1" in render(back) and "20/20" not in render(back)
    # an older file that claimed 20/20 and kept no traces: nothing can be shown kept, so no pass
    data = _older(score([result("a")], adapter="x:Y", seed=None))
    back = scorecard_from_json(data)
    assert (back.total, back.verdict, len(back.not_recorded)) == (0, "unknown", 20)
