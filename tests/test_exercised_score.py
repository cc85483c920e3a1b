"""The scorecard keeps only what was exercised: a rubric point no selected scenario had events
for is "not exercised", never kept, on every face (text, results JSON, HTML, compare, merge),
and a run that leaves one is inconclusive (exit 2); the whole library still exercises all twenty."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crashlab.cli import main

ROOT = Path(__file__).resolve().parent.parent
T2 = ROOT / "scenarios" / "t2-commit-before-record.yaml"


@pytest.fixture(scope="module")
def t2_only(tmp_path_factory):
    """``crashlab conformance --scenarios DIR`` where DIR holds only T2: (exit, stdout, results, out)."""
    base = tmp_path_factory.mktemp("t2")
    (base / "mine").mkdir()
    shutil.copy(T2, base / "mine" / T2.name)
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["conformance", "--scenarios", str(base / "mine"), "--out", str(base / "out"),
                     "--json", str(base / "r.json"), "-j", "1"])
    return code, buf.getvalue(), base / "r.json", base


def test_a_subset_that_passes_is_inconclusive_and_keeps_no_point_it_did_not_exercise(t2_only):
    code, out, results, _ = t2_only
    assert code == 2
    assert "  PASS  t2-commit-before-record" in out
    for point in ("C4", "D2", "E5"):
        assert f"[not exercised] {point} " in out and f"[kept] {point} " not in out
    assert "20/20" not in out and "verdict: UNKNOWN" in out
    assert "total 17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2)" in out
    assert "3 rubric point(s) not exercised: C4, E5, D2: no selected scenario had events for their rules" in out
    assert "--with-library" in out
    data = json.loads(results.read_text())
    assert data["verdict"] == "unknown" and data["score"]["total"] == 17 and data["score"]["exercised"] == 17
    assert data["score"]["not_exercised"] == ["C4", "E5", "D2"]
    assert "CANCEL-01" not in data["scenarios"][0]["exercised"] and "TRUTH-01" in data["scenarios"][0]["exercised"]


def test_the_quiet_line_and_merge_say_the_same(tmp_path, capsys):
    shutil.copy(T2, tmp_path / T2.name)
    assert main(["conformance", "--scenarios", str(tmp_path / T2.name), "--shard", "1/1", "--out", str(tmp_path / "o"),
                 "--json", str(tmp_path / "s.json"), "-q"]) == 2
    said = "17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2) unknown"
    assert said in capsys.readouterr().out
    assert main(["merge", str(tmp_path / "s.json"), "-q"]) == 2
    assert capsys.readouterr().out.strip().endswith(said)


def test_the_whole_library_exercises_every_point_and_scores_twenty(tmp_path, capsys):
    code = main(["conformance", "--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0 and "\ntotal 20/20\n" in out and "verdict: PASS" in out
    assert "not exercised" not in out and "[kept] D2 cancellation is visible" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["score"]["exercised"] == 20 and data["score"]["not_exercised"] == [] and data["verdict"] == "pass"
    # compare: the subset cannot show what the library showed
    shutil.copy(T2, tmp_path / T2.name)
    assert main(["conformance", "--scenarios", str(tmp_path / T2.name), "--out", str(tmp_path / "sub"),
                 "--json", str(tmp_path / "sub.json"), "-q"]) == 2
    capsys.readouterr()
    assert main(["compare", "--results", str(tmp_path / "r.json"), "--results", str(tmp_path / "sub.json")]) == 1
    out = capsys.readouterr().out
    assert "D2: not exercised (was kept); no selected scenario exercised its rules" in out
    assert "17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2)" in out


def test_a_lost_point_still_fails_the_subset(tmp_path, capsys):
    code = main(["conformance", "--adapter", "crashlab.gallery.blindspots:SilentDuplicates", "--scenario",
                 "t2-commit-before-record", "--scenario", "seed002-duplicate-retry-request",
                 "--out", str(tmp_path / "out"), "-j", "1"])
    out = capsys.readouterr().out
    assert code == 1 and "verdict: FAIL" in out and "[lost] E2 " in out and "[not exercised] D2 " in out


def _older(path: Path) -> Path:
    """The results file as crashlab wrote it before it recorded what was exercised (claiming 20/20)."""
    data = json.loads(path.read_text())
    for key in ("exercised", "not_exercised", "not_recorded"):
        del data["score"][key]
    data["score"]["total"], data["verdict"] = 20, "pass"
    for s in data["scenarios"]:
        del s["exercised"]
    old = path.with_name("older.json")
    old.write_text(json.dumps(data))
    return old


def test_the_report_from_results_json_shows_the_points_not_exercised(t2_only, tmp_path, capsys):
    _, _, results, base = t2_only
    for given in (results, _older(results)):    # an older file: computed from its saved trace
        index = tmp_path / given.stem
        assert main(["report", str(given), str(base / "out"), "--out", str(index)]) == 0
        html = (index / "index.html").read_text()
        assert "Score 17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2)" in html
        assert "3 rubric points not exercised: C4, E5, D2" in html and "Score 20/20" not in html
        assert "(D2 not exercised)" in html
