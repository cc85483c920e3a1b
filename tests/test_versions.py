"""Versions that mean something: crashlab --version, the rule set in every trace header and
results JSON, pinning it with --rules, and results that name the point each violation costs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crashlab.rules import ruleset
from crashlab.checks import check_trace
from crashlab.checks.fingerprint import fingerprint
from crashlab.checks.invariants import BY_ID
from crashlab.checks.rubric import BY_POINT, POINT_OF, render, score
from crashlab.cli import main
from crashlab.run.conformance import run_one
from crashlab.vocab.errors import UsageError
from crashlab.vocab.results import ScenarioResult, Scorecard, Violation
from crashlab.scenario.loader import library, resolve
from crashlab.world.trace import read_jsonl

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"


def test_version_names_the_package_and_the_rule_set(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"crashlab {ruleset.package_version()} (rule set {ruleset.RULES}:")
    assert ruleset.package_version() != "0.1.0"


def test_the_rule_set_data_matches_the_library_and_the_checks():
    current = ruleset.CURRENT
    assert current.version == ruleset.RULES and current.package == ruleset.package_version()
    assert current.checks == len(BY_ID) and current.scenarios == len(library())
    ids = {s.id for s in library()}
    for s in ruleset.SETS[1:]:
        assert set(s.added_checks) <= set(BY_ID) and set(s.added_scenarios) <= ids
        before = ruleset.SETS[s.version - 2]
        assert before.checks + len(s.added_checks) == s.checks     # nothing removed without saying so
        assert before.scenarios + len(s.added_scenarios) == s.scenarios


def test_every_trace_header_and_results_json_name_the_rule_set(tmp_path):
    run, res = run_one(resolve("t2-commit-before-record"), REFERENCE, out_dir=tmp_path)
    head = read_jsonl(res.trace)[0]
    assert head["rules"] == ruleset.RULES and head["harness"] == ruleset.package_version()
    card = score([res], adapter=REFERENCE, seed=None)
    data = card.to_json()
    assert data["rules"] == ruleset.RULES and data["crashlab"] == ruleset.package_version()
    assert Scorecard.from_json(json.loads(json.dumps(data))).extra["rules"] == ruleset.RULES
    from crashlab.report.scorecard import format_scorecard

    assert format_scorecard(card).splitlines()[0].endswith(f"rule set: {ruleset.RULES}")


def test_a_trace_from_before_rule_sets_still_reads_and_checks(tmp_path):
    run, res = run_one(resolve("t2-commit-before-record"), REFERENCE, out_dir=tmp_path)
    lines = open(res.trace).read().splitlines()
    head = json.loads(lines[0])
    del head["rules"]
    head["harness"] = "0.1.0"
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join([json.dumps(head, sort_keys=True, separators=(",", ":"))] + lines[1:]) + "\n")
    assert check_trace(read_jsonl(old)).verdict == "pass"
    assert "names no rule set" in ruleset.note_for(head.get("rules"), "old.jsonl")
    head["rules"] = "two"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    with pytest.raises(UsageError, match=r"bad.jsonl:1: the header's 'rules' must be a rule-set number"):
        read_jsonl(bad)


def test_rules_pins_the_current_set_and_refuses_another_saying_what_changed(capsys):
    assert ruleset.check_pinned(str(ruleset.RULES)) == ruleset.RULES
    assert ruleset.check_pinned(f"rules-{ruleset.RULES}") == ruleset.RULES
    code = main(["conformance", "--rules", "1", "--scenario", "t2-commit-before-record", "-q"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"--rules 1: this crashlab ({ruleset.package_version()}) judges by rule set {ruleset.RULES}" in err
    assert "new checks: PKT-01, FENCE-01, PREP-02, JIT-01, EVT-02" in err and "matrix-throttling-restart" in err
    assert "CHANGELOG.md" in err and "Traceback" not in err
    for given, says in (("9", "newer than this crashlab"), ("0", "there is no rule set 0"),
                        ("latest", "is not a rule-set number")):
        assert main(["sweep", "--rules", given, "--scenario", "t2-commit-before-record", "-q"]) == 3
        assert says in capsys.readouterr().err


def test_rules_of_the_current_set_runs(tmp_path, capsys):
    code = main(["conformance", "--rules", str(ruleset.RULES), "--scenario", "t2-commit-before-record",
                 "--out", str(tmp_path / "out"), "-q", "-j", "1", "--json", str(tmp_path / "r.json")])
    assert code == 2   # it ran and passed; one scenario leaves rubric points not exercised: inconclusive
    assert json.loads((tmp_path / "r.json").read_text())["rules"] == ruleset.RULES


def test_an_older_results_json_gets_a_whats_new_line():
    assert ruleset.note_for(ruleset.RULES, "r.json") is None
    line = ruleset.note_for(1, "old.json")
    assert line.startswith(f"old.json names rule set 1; this crashlab judges by rule set {ruleset.RULES}")
    two = ruleset.SETS[1]
    assert f"{len(two.added_checks)} new checks, {len(two.added_scenarios)} new scenarios" in line


def test_every_violation_names_the_point_it_costs_and_that_points_category():
    _, res = run_one(resolve("matrix-duplicate-callback"), "crashlab.gallery.alternatives:EscalateEveryAmbiguity")
    _, dup = run_one(resolve("seed002-duplicate-retry-request"), "crashlab.gallery.blindspots:SilentDuplicates")
    found = res.violations + dup.violations
    assert {v.invariant for v in found} >= {"EXP-EVIDENCE", "EVT-02"}
    for v in found:
        assert v.point is not None and v.category == BY_POINT[v.point].category
        if not v.invariant.startswith("EXP-"):
            assert v.point == POINT_OF[v.invariant].id
    evidence = next(v for v in found if v.invariant == "EXP-EVIDENCE")
    assert (evidence.point, evidence.category) == ("E4", "effect_correctness")   # not classification
    assert next(v for v in found if v.invariant == "EVT-02").to_json()["point"] == "E2"


def test_two_misses_of_one_expectation_in_one_scenario_are_both_listed():
    misses = [Violation(invariant="EXP-EVIDENCE", message=f"no evidence '{what}'", run=None, point="C2",
                        category="classification", expected=what, observed="absent from the trace")
              for what in ("reservation.lookup", "operator.escalate")]
    res = ScenarioResult(id="s", title="s", verdict="fail", dispositions={"run-1": "SUCCEEDED"},
                         violations=tuple(misses))
    card = score([res], adapter="x", seed=None)
    assert [lp.expected for lp in card.lost] == ["reservation.lookup", "operator.escalate"]
    text = render(card)
    assert "no evidence 'reservation.lookup'" in text and "no evidence 'operator.escalate'" in text
    from crashlab.report.markdown import summary
    from crashlab.report.view import Item

    md = summary([Item(result=res, events=None, name="s")], card, "x")
    points, failures = md.split("### Failures")
    assert "no evidence 'reservation.lookup'" in points and "no evidence 'operator.escalate'" in points
    assert "EXP-EVIDENCE ×2: no evidence 'reservation.lookup'" in failures
    assert "and: no evidence 'operator.escalate'" in failures
    assert f"what to change: {ruleset.fix('EXP-EVIDENCE').text}" in points


def test_tag_and_scenario_unite(tmp_path, capsys):
    code = main(["conformance", "--tag", "T1", "--scenario", "t2-commit-before-record", "-j", "1",
                 "--out", str(tmp_path), "--json", str(tmp_path / "r.json"), "-q"])
    assert code in (1, 2)   # never a pass: three scenarios do not exercise every rubric point
    ids = [s["id"] for s in json.loads((tmp_path / "r.json").read_text())["scenarios"]]
    tagged = [s.id for s in library() if "T1" in s.tags]
    assert tagged and "t2-commit-before-record" not in tagged
    assert sorted(ids) == sorted(tagged + ["t2-commit-before-record"])


def test_run_and_conformance_write_the_same_trace_bytes(tmp_path):
    assert main(["run", "t2-commit-before-record", "--out", str(tmp_path / "run")]) == 0
    assert main(["conformance", "--scenario", "t2-commit-before-record", "-j", "1", "-q",
                 "--out", str(tmp_path / "suite")]) == 2   # one scenario: rubric points not exercised
    [a] = (tmp_path / "run").glob("*.jsonl")
    [b] = (tmp_path / "suite").glob("*.jsonl")
    assert a.read_bytes() == b.read_bytes()


def test_the_rule_set_is_the_same_in_another_process_with_another_hash_seed():
    code = ("from crashlab.scenario.loader import resolve; from crashlab.run.runner import run_scenario; "
            "import sys; sys.stdout.write(run_scenario(resolve('t2-commit-before-record'), None).to_jsonl())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("0", "12345")}
    assert len(outs) == 1 and f'"rules":{ruleset.RULES}' in outs.pop().splitlines()[0]


def test_merge_refuses_shards_judged_by_two_rule_sets(tmp_path):
    from crashlab.run.sweep import merge

    for i in (1, 2):
        main(["conformance", "-q", "-j", "1", "--scenario", "t2-commit-before-record", "--scenario",
              "t1-crash-before-dispatch", "--out", str(tmp_path), "--json", str(tmp_path / f"s{i}.json"),
              "--shard", f"{i}/2"])
    assert merge([tmp_path / "s1.json", tmp_path / "s2.json"]).extra["rules"] == ruleset.RULES
    old = json.loads((tmp_path / "s2.json").read_text())
    del old["rules"]
    (tmp_path / "s2.json").write_text(json.dumps(old))
    with pytest.raises(UsageError, match="judged by rule set None.*merge shards judged by one rule set"):
        merge([tmp_path / "s1.json", tmp_path / "s2.json"])


def test_compare_results_lists_what_moved_and_why(tmp_path, capsys):
    scen = ["--scenario", "t2-commit-before-record", "--scenario", "seed002-duplicate-retry-request"]
    main(["conformance", "-q", "-j", "1", *scen, "--out", str(tmp_path / "a"), "--json", str(tmp_path / "old.json")])
    main(["conformance", "-q", "-j", "1", *scen, "--adapter", "crashlab.gallery.blindspots:SilentDuplicates",
          "--out", str(tmp_path / "b"), "--json", str(tmp_path / "new.json")])
    capsys.readouterr()
    old = json.loads((tmp_path / "old.json").read_text())
    del old["rules"]                                  # as written before rule sets were numbered
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["compare", "--results", str(tmp_path / "old.json"), "--results", str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert "what's new since your last run:" in out and "names no rule set" in out
    assert "E2 same-intent deduplication: lost (EVT-02 in seed002-duplicate-retry-request" in out
    assert "why: EVT-02 is a check new since rule set 1" in out
    assert "seed002-duplicate-retry-request: pass -> fail; checks +EVT-02" in out
    # one rule set: what moved is the adapter's doing
    assert main(["compare", "--results", str(tmp_path / "new.json"), "--results", str(tmp_path / "new.json")]) == 0
    assert "nothing moved" in capsys.readouterr().out
    assert main(["compare", "--results", str(tmp_path / "new.json")]) == 3
    assert "exactly two results JSON" in capsys.readouterr().err
    assert main(["compare", "--results", str(tmp_path / "nope.json"), "--results", str(tmp_path / "new.json")]) == 3
    assert "nope.json: cannot read" in capsys.readouterr().err


def test_check_and_report_say_whats_new_for_an_older_rule_set(tmp_path, capsys):
    _, res = run_one(resolve("t2-commit-before-record"), REFERENCE, out_dir=tmp_path)
    lines = open(res.trace).read().splitlines()
    head = json.loads(lines[0])
    head["rules"] = 1
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join([json.dumps(head, sort_keys=True, separators=(",", ":"))] + lines[1:]) + "\n")
    assert main(["check", str(old)]) == 0
    assert f"note: the trace {old} names rule set 1; this crashlab judges by rule set {ruleset.RULES}" \
        in capsys.readouterr().err
    assert main(["check", res.trace]) == 0
    assert "note:" not in capsys.readouterr().err            # a current trace: nothing to say
    card = score([res], adapter=REFERENCE, seed=None).to_json()
    card["rules"] = 1
    (tmp_path / "old.json").write_text(json.dumps(card))
    assert main(["report", str(tmp_path / "old.json"), "--out", str(tmp_path / "rep")]) == 0
    assert f"what's new since your last run: {tmp_path / 'old.json'} names rule set 1" in capsys.readouterr().err


def test_nothing_that_can_move_a_verdict_changes_without_a_rule_set_entry(monkeypatch):
    now = fingerprint()
    assert now == ruleset.CURRENT.fingerprint, (
        f"the checks, the rubric or the library changed (fingerprint {now}, rule set {ruleset.RULES} records "
        f"{ruleset.CURRENT.fingerprint}): record the change in crashlab/data/rules.json (a new rule set, or the "
        f"entry of the unreleased one: added checks and scenarios, changed rules) with fingerprint {now}, and "
        "run python tools/docgen.py for CHANGELOG.md")
    # it notices a scenario dropped, an expectation widened, a check's rule or point moved
    import crashlab.scenario.loader as loader
    from crashlab.checks import rules

    real = loader.library()
    monkeypatch.setattr(loader, "library", lambda: real[1:])
    assert fingerprint() != now
    widened = real[0].raw | {"expect": {**real[0].raw["expect"], "dispositions": ["SUCCEEDED", "FAILED_NO_EFFECT"]}}
    monkeypatch.setattr(loader, "library", lambda: [type(real[0])(**{**_fields(real[0]), "raw": widened})] + real[1:])
    assert fingerprint() != now
    monkeypatch.setattr(loader, "library", lambda: real)
    assert fingerprint() == now
    monkeypatch.setitem(rules.KIND_POINT, "evidence", "E4")
    assert fingerprint() != now


def _fields(obj) -> dict:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.fixture
def a_later_set_that_only_adds(monkeypatch):
    """A history where rule set 3 only added EVT-02 and one scenario to rule set 2: then this
    crashlab can still judge exactly as rule set 2 did (the real later sets are set aside)."""
    import dataclasses

    one, two = ruleset.SETS[:2]
    two = dataclasses.replace(two, checks=two.checks - 1, scenarios=two.scenarios - 1,
                              added_checks=tuple(c for c in two.added_checks if c != "EVT-02"))
    three = ruleset.RuleSet(version=3, package="0.3.0", date="2026-12-02", checks=46, scenarios=74,
                            summary="EVT-02 and one scenario.", added_checks=("EVT-02",),
                            added_scenarios=("matrix-duplicate-callback",))
    monkeypatch.setattr(ruleset, "SETS", (one, two, three))
    monkeypatch.setattr(ruleset, "RULES", 3)
    monkeypatch.setattr(ruleset, "CURRENT", three)


def test_an_older_rule_set_still_gives_the_old_verdict_on_a_trace_the_new_one_fails(a_later_set_that_only_adds,
                                                                                   tmp_path, capsys):
    assert ruleset.runnable(2) and not ruleset.runnable(1)   # rule set 2 changed rules of 1: never emulated
    adapter = "crashlab.gallery.blindspots:SilentDuplicates"
    common = ["conformance", "--adapter", adapter, "--scenario", "seed002-duplicate-retry-request", "-j", "1", "-q"]
    assert main(common + ["--rules", "3", "--out", str(tmp_path / "new"), "--json", str(tmp_path / "new.json")]) == 1
    # rule set 2: nothing fails; one scenario leaves points not exercised, so inconclusive, not a pass
    assert main(common + ["--rules", "2", "--out", str(tmp_path / "old"), "--json", str(tmp_path / "old.json")]) == 2
    new, old = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("new", "old"))
    assert (new["rules"], old["rules"], old["verdict"]) == (3, 2, "unknown")
    assert old["score"]["not_exercised"] == new["score"]["not_exercised"] != []
    assert old["score"]["total"] == 20 - len(old["score"]["not_exercised"]) == new["score"]["total"] + 1
    assert [v["invariant"] for v in new["scenarios"][0]["violations"]] == ["EVT-02"]
    # one trace, two verdicts: the rule set it is judged by decides
    [trace] = (tmp_path / "old").glob("*.jsonl")
    events = read_jsonl(trace)
    assert check_trace(events).verdict == "fail"
    assert check_trace(events, checks=ruleset.selection(2)[0]).verdict == "pass"
    # rule set 2 has no scenario that rule set 3 added; and rule set 1 still refuses, saying what changed
    capsys.readouterr()
    assert main(["conformance", "--rules", "2", "--scenario", "matrix-duplicate-callback", "-q",
                 "--out", str(tmp_path / "x")]) == 3
    assert "matrix-duplicate-callback is not in rule set 2" in capsys.readouterr().err
    assert main(["conformance", "--rules", "1", "-q", "--out", str(tmp_path / "x")]) == 3
    err = capsys.readouterr().err
    assert "cannot judge as it did: rules changed since" in err and "rule set 3 (crashlab 0.3.0" in err
    assert main(["sweep", "--rules", "2", "-q", "--out", str(tmp_path / "x")]) == 3
    assert "sweep judges by this crashlab's rule set (3) only" in capsys.readouterr().err
