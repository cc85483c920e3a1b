"""Worksheet and plan YAML take what the template shows: a bare ``yes``/``no`` (YAML reads a
boolean), one bare value where a list is asked (``missing_information: none``); an answer at
the top level instead of under its section is reported, never silently blank."""
from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import handoff
from crashlab.workshop.ladder import rung


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _t1_worksheet(body: str) -> Path:
    main(["workshop", "start", "t1"])
    path = Path("workshop/t1/worksheet.yaml")
    path.write_text("rung: t1\n" + body, encoding="utf-8")
    return path


def test_same_key_yes_as_the_template_shows_is_the_word_yes(room, capsys):
    path = _t1_worksheet("answers:\n  same_key: yes\n")
    answers, _ = G.read(path, rung("t1"))
    assert answers["same_key"] == "yes"
    assert main(["workshop", "check", "t1"]) == 1       # graded (the rest is blank), not a usage error
    out = capsys.readouterr().out
    assert "same_key" not in "".join(line for line in out.splitlines() if "blank" in line)


def test_a_bare_no_is_the_word_no(room):
    path = _t1_worksheet("answers:\n  same_key: no\n")
    assert G.read(path, rung("t1"))[0]["same_key"] == "no"


def test_one_bare_value_for_a_set_question_is_a_list_of_one(room):
    path = _t1_worksheet("answers:\n  revalidated: lease\n")
    assert G.read(path, rung("t1"))[0]["revalidated"] == ["lease"]


def test_an_answer_at_the_top_level_is_reported_with_its_line(room, capsys):
    _t1_worksheet("answers:\n  disposition: SUCCEEDED\nsame_key: yes\n")
    assert main(["workshop", "check", "t1"]) == 3
    err = capsys.readouterr().err
    assert "worksheet.yaml:4" in err and "same_key" in err and "indent it under 'answers:'" in err


def test_a_table_row_at_the_top_level_is_reported(room, capsys):
    main(["workshop", "start", "timelines"])
    Path("workshop/timelines/worksheet.yaml").write_text(
        "rung: timelines\nanswers: {}\nr1: {knowledge: PROPOSED}\n", encoding="utf-8")
    assert main(["workshop", "check", "timelines"]) == 3
    assert "indent it under 'table:'" in capsys.readouterr().err


def test_plan_missing_information_none_and_a_bare_action(room, capsys):
    main(["workshop", "handoff"])
    path = Path("workshop/handoff") / handoff.PLAN
    text = path.read_text(encoding="utf-8").replace("missing_information: ~", "missing_information: none", 1)
    text = text.replace("actions: ~", "actions: escalate_to_operator", 1)
    path.write_text(text, encoding="utf-8")
    plan = handoff.read_plan(path)
    run = plan["runs"]["A"]
    assert run["missing_information"] == ["none"] and run["actions"] == ["escalate_to_operator"]
    assert main(["workshop", "check", "handoff"]) == 1      # graded, not exit 3
    assert "not in the vocabulary" not in capsys.readouterr().err


def test_a_plan_run_at_the_top_level_is_reported(room, capsys):
    main(["workshop", "handoff"])
    path = Path("workshop/handoff") / handoff.PLAN
    path.write_text(path.read_text(encoding="utf-8") + "A:\n  actions: [escalate_to_operator]\n", encoding="utf-8")
    assert main(["workshop", "check", "handoff"]) == 3
    assert "indent it under 'runs:'" in capsys.readouterr().err
