"""Facilitator mode: a room whose answers are locked until the facilitator unlocks a rung, an
opening figure that answers no rung, and session plans that add up and keep what the
chapter requires."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import facilitator as F
from crashlab.workshop import handoff, progress, rubric
from crashlab.workshop.codecheck import scenarios as code_scenarios
from crashlab.workshop.exhibits import EXHIBITS
from crashlab.workshop.ladder import rungs

DOCS = Path(__file__).resolve().parents[1] / "docs" / "workshop.md"


@pytest.fixture
def learner(tmp_path, monkeypatch):
    folder = tmp_path / "ana"
    folder.mkdir()
    monkeypatch.chdir(folder)
    main(["workshop", "start", "t3"])
    main(["workshop", "check", "t3"])
    return tmp_path


def test_a_locked_room_refuses_reveal_until_the_rung_is_unlocked(learner, capsys):
    assert main(["workshop", "room", str(learner), "--no-answers"]) == 0
    capsys.readouterr()
    assert main(["workshop", "reveal", "t3"]) == 3
    err = capsys.readouterr().err
    assert "locked the answers" in err and f"--unlock t3" in err
    assert json.loads(Path(progress.PROGRESS).read_text())["rungs"]["t3"]["revealed"] is False
    assert main(["workshop", "room", str(learner), "--unlock", "t2"]) == 0
    assert main(["workshop", "reveal", "t3"]) == 3                 # another rung's unlock is not this one's
    assert main(["workshop", "room", str(learner), "--unlock", "t3"]) == 0
    assert main(["workshop", "reveal", "t3"]) == 0
    assert main(["workshop", "room", str(learner), "--lock", "t3"]) == 0
    assert main(["workshop", "reveal", "t3"]) == 3
    assert main(["workshop", "room", str(learner), "--unlock", "all"]) == 0
    assert main(["workshop", "reveal", "t3"]) == 0
    capsys.readouterr()
    main(["workshop", "class", str(learner)])
    assert "answers: locked" in capsys.readouterr().out


def test_a_locked_room_hides_the_teaching_card_of_a_report(learner, capsys):
    from crashlab.workshop.ladder import rung
    main(["workshop", "room", str(learner), "--no-answers"])
    capsys.readouterr()
    assert main(["run", rung("t3").scenario, "--report", "out/"]) == 0
    assert "locked in this room" in capsys.readouterr().err
    assert json.loads(Path(progress.PROGRESS).read_text())["rungs"]["t3"]["revealed"] is False
    pages = "".join(p.read_text(errors="replace") for p in Path("out").rglob("*.html"))
    assert pages and "Teaching card" not in pages
    main(["workshop", "room", str(learner), "--unlock", "t3"])
    assert main(["run", rung("t3").scenario, "--report", "out2/"]) == 0
    assert "Teaching card" in "".join(p.read_text(errors="replace") for p in Path("out2").rglob("*.html"))


def test_an_unknown_rung_to_unlock_is_a_usage_error(tmp_path, capsys):
    assert main(["workshop", "room", str(tmp_path), "--unlock", "t9"]) == 3
    assert "no rung 't9'" in capsys.readouterr().err


def _spoilers() -> set[str]:
    out = set(handoff.pool()) | set(rubric.SHOWN) | {s for _, s in EXHIBITS.values()}
    for r in rungs():
        out |= set(r.scenarios)
        if r.starter:
            out |= set(code_scenarios(r))
    return out


def test_the_opening_figure_answers_no_rung(tmp_path):
    assert F.OPENING not in _spoilers()
    assert progress.rungs_answered_by(F.OPENING) == []
    assert F.opening_command() in DOCS.read_text() and "--no-answers" in F.opening_command()
    # the check catches the old opening, which answers t2 and timelines
    assert "t2-commit-before-record" in _spoilers()
    assert set(progress.rungs_answered_by("t2-commit-before-record")) == {"t2", "timelines"}


@pytest.mark.parametrize("minutes", [120, 180])
def test_each_plan_adds_up_and_keeps_what_the_chapter_requires(minutes):
    plan = F.plans()[str(minutes)]
    assert F.problems(plan, minutes) == []
    session = {r for row in plan["slots"] for r in row.get("rungs") or ()}
    assert {"pressure", "weak-service", "handoff"} <= session
    pairs = next(row for row in plan["slots"] if "handoff" in (row.get("rungs") or ()))
    assert "pairs" in pairs["what"] and "compare" in pairs["what"]
    assert F.plan_markdown(minutes) in DOCS.read_text()       # the docs show the plan as the data holds it


def test_the_plan_check_catches_a_dropped_extension_a_gap_and_a_lost_rung():
    plan = copy.deepcopy(F.plans()["120"])
    weak = next(row for row in plan["slots"] if "weak-service" in (row.get("rungs") or ()))
    weak["rungs"] = []
    plan["homework"] = [*plan["homework"], "weak-service"]
    assert "weak-service is not in the session" in F.problems(plan, 120)
    plan = copy.deepcopy(F.plans()["120"])
    plan["homework"].remove("rubric")
    assert "rung rubric is left out" in F.problems(plan, 120)
    plan = copy.deepcopy(F.plans()["120"])
    plan["slots"][1]["time"] = "0:06-0:20"
    assert any("expected to start at 0:05" in p for p in F.problems(plan, 120))
    assert any("not 180" in p for p in F.problems(F.plans()["120"], 180))


def test_the_plan_check_catches_a_rung_given_fewer_minutes_than_it_takes():
    """t1 and t8 take about 15 minutes: a slot that shares 15 minutes between t1 and t2 is refused."""
    assert F.rung_minutes()["t1"] >= 15 and F.rung_minutes()["t8"] >= 15
    plan = copy.deepcopy(F.plans()["120"])
    plan["slots"][1:3] = [{"time": "0:05-0:20", "rungs": ["t1", "t2"]}, {"time": "0:20-0:34", "rungs": ["t3"]}]
    assert "slot 0:05-0:20: t1 gets 7 minutes and takes about 15" in F.problems(plan, 120)


def test_plan_prints_the_minutes_per_rung_and_the_opening(capsys):
    assert main(["workshop", "plan", "--minutes", "120"]) == 0
    out = capsys.readouterr().out
    assert F.opening_command() in out and "| 0:05-0:20 | `t1` | 15 |" in out and "| 1:08-1:23 | `pressure` | 15 |" in out
    assert main(["workshop", "plan", "--minutes", "90"]) == 3


def test_a_room_seed_issues_every_learner_folder_an_identity_and_the_roster_reads_records(tmp_path, monkeypatch, capsys):
    """``room --seed`` alone: every learner folder gets an identity, its kits are its own and its
    state is its record in the room (no progress file); a progress file written by hand is not
    graded, and a folder made later is told to ask for ``--add``."""
    import yaml
    from crashlab.workshop import grade as G
    from crashlab.workshop.ladder import rung
    for name in ("ana", "ben"):
        (tmp_path / name).mkdir()
    assert main(["workshop", "room", str(tmp_path), "--seed", "7"]) == 0
    assert "ana, ben" in capsys.readouterr().out
    listings = {}
    for name in ("ana", "ben"):
        monkeypatch.chdir(tmp_path / name)
        assert main(["workshop", "start", "combined"]) == 0
        listings[name] = Path("workshop/combined/listing-A.txt").read_text()
        assert not Path(progress.PROGRESS).exists()                 # the state is the record in the room
    assert listings["ana"] != listings["ben"]
    data = progress.load(Path.cwd())                                 # ben's, from his record
    assert data.get("issued") == "ben"
    model = G.model_answers(rung("combined"), progress.offset(data), data["variant"])
    Path("workshop/combined/worksheet.yaml").write_text(yaml.safe_dump({"rung": "combined", "answers": model["answers"]}))
    assert main(["workshop", "check", "combined"]) == 0               # honest answers in ben's own numbering
    monkeypatch.chdir(tmp_path / "ana")
    Path("workshop/combined/worksheet.yaml").write_text(
        (tmp_path / "ben/workshop/combined/worksheet.yaml").read_text())
    assert main(["workshop", "check", "combined"]) == 1               # ben's worksheet is not ana's
    Path(progress.PROGRESS).write_text(json.dumps({"rungs": {"combined": {"kit": "workshop/combined",
                                                   "status": "passed", "attempts": 1, "hints": 0}}}))
    capsys.readouterr()
    assert main(["workshop", "class", str(tmp_path), "--isolation", "process"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in ("ana", "ben")}
    assert "P" in rows["ben"].split() and "P" not in rows["ana"].split()
    assert f"ana/{progress.PROGRESS}: a progress file, not a record the facilitator issued: not graded" in out
    (tmp_path / "carl").mkdir()                                      # a folder made after the seed
    monkeypatch.chdir(tmp_path / "carl")
    assert main(["workshop", "start", "t2"]) == 3
    err = capsys.readouterr().err
    assert f"crashlab workshop room {tmp_path} --add NAME" in err and "Traceback" not in err
    assert not Path(progress.PROGRESS).exists()


def test_a_room_seeded_before_seeds_issued_identities_is_told_what_to_run(tmp_path, monkeypatch, capsys):
    (tmp_path / F.ROOM).write_text(json.dumps({"answers": "open", "unlocked": [], "seed": 7}))
    (tmp_path / "ana").mkdir()
    monkeypatch.chdir(tmp_path / "ana")
    assert main(["workshop", "start", "t2"]) == 3
    assert f"`crashlab workshop room {tmp_path} --seed 7` again" in capsys.readouterr().err
    (tmp_path / "ana" / progress.PROGRESS).write_text(json.dumps({"variant": "room 7/ana", "rungs": {}}))
    assert main(["workshop", "class", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "--seed 7` again" in err and "Traceback" not in err
    assert main(["workshop", "room", str(tmp_path), "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "issued ana" in out and f"ana: a {progress.PROGRESS} from before holds their kits; it is not graded" in out
    assert main(["workshop", "start", "t2"]) == 0
    assert "is from before the facilitator issued your identity" in capsys.readouterr().err
