"""`crashlab report RESULTS.json` and `crashlab merge` check the results they are given against the
traces those results name: every scenario whose trace is at hand is checked again, and a results
file that its traces contradict (another run's trace in the same folder, an edited verdict, another
adapter, an edited score) is refused with one line per scenario, writing nothing. A verdict whose
trace was not kept is shown as taken from the results file, not re-checked."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.report import render_inputs
from crashlab.vocab.errors import UsageError

BLIND = "crashlab.gallery.retries:BlindRetry"
REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
PAIR = ["matrix-weak-service", "t2-commit-before-record"]
PASSING = "crash-1-before-prepare"          # BlindRetry passes it
WEAK_TRACE = "matrix-weak-service.seed168.jsonl"


def _conformance(out: Path, *extra: str, adapter: str = BLIND, scenarios=(*PAIR, PASSING)) -> int:
    args = ["conformance", "-q", "--adapter", adapter, "--out", str(out), *extra]
    for s in scenarios:
        args += ["--scenario", s]
    return main(args)


@pytest.fixture(scope="module")
def blind(tmp_path_factory) -> Path:
    """BlindRetry over two failing scenarios and a passing one: every trace kept, results JSON."""
    out = tmp_path_factory.mktemp("blind") / "run"
    assert _conformance(out, "--json", str(out / "results.json")) == 1
    return out / "results.json"


def _copy(results: Path, where: Path) -> Path:
    """The results JSON and its traces, copied into ``where`` (trace paths still name the originals)."""
    shutil.copytree(results.parent, where)
    return where / results.name


def _edit(results: Path, edit) -> Path:
    data = json.loads(results.read_text(encoding="utf-8"))
    edit(data)
    results.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return results


def _report(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["report", *args, "--jobs", "1"])
    return code, capsys.readouterr().err


def _line(err: str, scenario: str) -> str:
    found = [ln for ln in err.splitlines() if ln.strip().startswith(f"{scenario}:")]
    assert len(found) == 1, err
    return found[0]


def test_two_runs_written_into_one_folder_are_refused_naming_the_scenario(tmp_path, capsys):
    mix = tmp_path / "mix"
    assert _conformance(mix, "--json", str(mix / "results.json"), scenarios=PAIR) == 1
    _conformance(mix, adapter=REFERENCE, scenarios=PAIR)     # overwrites the same trace names
    code, err = _report(capsys, str(mix / "results.json"), "--out", str(tmp_path / "rep"))
    assert code == 3, err
    line = _line(err, "matrix-weak-service")
    assert WEAK_TRACE in line and BLIND in line and REFERENCE in line
    assert "fresh folder" in err
    _line(err, "t2-commit-before-record")
    assert not (tmp_path / "rep" / "index.html").exists()
    assert not list((tmp_path / "rep").rglob("*.html"))


def test_a_forged_pass_over_failing_traces_is_refused(blind, tmp_path, capsys):
    def forge(data):
        data["verdict"] = "pass"
        data["lost"], data["auto_fail"], data["caps"] = [], [], []
        data["score"]["total"] = 20
        for c in data["score"]["categories"].values():
            c["score"] = c["max"]
        for s in data["scenarios"]:
            s["verdict"], s["violations"] = "pass", []

    forged = _edit(_copy(blind, tmp_path / "forge"), forge)
    code, err = _report(capsys, str(forged), "--out", str(tmp_path / "rep"))
    assert code == 3, err
    line = _line(err, "matrix-weak-service")
    assert WEAK_TRACE in line and "PASS" in line and "FAIL" in line and "RETRY-01" in line
    assert PASSING + ":" not in err          # it agrees with its trace
    assert not (tmp_path / "rep").exists() or not list((tmp_path / "rep").rglob("*.html"))
    with pytest.raises(UsageError, match="matrix-weak-service"):
        render_inputs([forged], tmp_path / "api")
    assert not (tmp_path / "api" / "index.html").exists()


def test_another_adapters_name_is_refused(blind, tmp_path, capsys):
    renamed = _edit(_copy(blind, tmp_path / "renamed"), lambda d: d.update(adapter=REFERENCE))
    code, err = _report(capsys, str(renamed), "--out", str(tmp_path / "rep"))
    assert code == 3, err
    for scenario in (*PAIR, PASSING):
        line = _line(err, scenario)
        assert f"adapter {REFERENCE}" in line and f"adapter {BLIND}" in line
    assert not (tmp_path / "rep" / "index.html").exists()


def test_an_edited_score_over_honest_scenarios_is_refused(blind, tmp_path, capsys):
    def forge(data):
        data["verdict"], data["score"]["total"] = "pass", 20

    forged = _edit(_copy(blind, tmp_path / "score"), forge)
    code, err = _report(capsys, str(forged), "--out", str(tmp_path / "rep"))
    assert code == 3, err
    assert re.search(r"the score: .*20/20.*0/20", err), err
    assert not (tmp_path / "rep" / "index.html").exists()


def test_a_trace_given_on_the_command_line_is_checked_too(blind, tmp_path, capsys):
    other = tmp_path / "other"
    _conformance(other, adapter=REFERENCE, scenarios=["matrix-weak-service"])
    code, err = _report(capsys, str(blind), str(other / WEAK_TRACE), "--out", str(tmp_path / "rep"))
    assert code == 3, err
    assert str(other / WEAK_TRACE) in _line(err, "matrix-weak-service")


def test_merge_refuses_a_forged_shard(tmp_path, capsys):
    shards = tmp_path / "shards"
    for i in (1, 2):
        _conformance(shards, "--json", str(shards / f"s{i}.json"), "--shard", f"{i}/2")

    def forge(data):
        for s in data["scenarios"]:
            s["verdict"], s["violations"] = "pass", []

    _edit(shards / "s2.json", forge)
    forged = [s["id"] for s in json.loads((shards / "s2.json").read_text())["scenarios"] if s["id"] != PASSING]
    assert forged
    capsys.readouterr()
    code = main(["merge", str(shards / "s1.json"), str(shards / "s2.json"), "--json", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 3, err
    for scenario in forged:
        assert "s2.json" in err and "FAIL" in _line(err, scenario)
    assert not (tmp_path / "m.json").exists()


def test_an_honest_results_file_renders_and_says_it_was_checked_again(blind, tmp_path, capsys):
    code, err = _report(capsys, str(blind), "--out", str(tmp_path / "rep"))
    assert code == 0, err
    index = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert "Score 0/20" in index
    assert "checked again against its trace" in index and "not re-checked" not in index
    page = (tmp_path / "rep" / "scenarios" / "matrix-weak-service.html").read_text(encoding="utf-8")
    assert "RETRY-01" in page and "not re-checked" not in page


def test_a_verdict_whose_trace_was_not_kept_is_shown_as_not_rechecked(blind, tmp_path, capsys):
    def drop(data):
        for s in data["scenarios"]:
            if s["id"] == PASSING:
                s["trace"] = None

    kept = _edit(_copy(blind, tmp_path / "kept"), drop)
    code, err = _report(capsys, str(kept), "--out", str(tmp_path / "rep"))
    assert code == 0, err
    rep = tmp_path / "rep"
    page = (rep / "scenarios" / f"{PASSING}.html").read_text(encoding="utf-8")
    assert "taken from the results file, not re-checked" in page
    index = (rep / "index.html").read_text(encoding="utf-8")
    assert "2 of 3 scenarios" in index and "not re-checked" in index and PASSING in index
    summary = (rep / "summary.md").read_text(encoding="utf-8")
    assert "not re-checked" in summary and PASSING in summary


def test_missing_traces_report_refuses_and_merge_says_what_it_did_not_check(tmp_path, capsys):
    shards = tmp_path / "shards"
    for i in (1, 2):
        _conformance(shards, "--json", str(shards / f"s{i}.json"), "--shard", f"{i}/2")
    gone = json.loads((shards / "s2.json").read_text())["scenarios"][0]
    Path(gone["trace"]).unlink()
    code, err = _report(capsys, str(shards / "s2.json"), "--out", str(tmp_path / "rep"))
    assert code == 3 and Path(gone["trace"]).name in err, err
    capsys.readouterr()
    code = main(["merge", str(shards / "s1.json"), str(shards / "s2.json"), "-q"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert gone["id"] in err and "not re-checked" in err and Path(gone["trace"]).name in err
