"""Feedback that follows the learner: a hint for the field that is wrong, a named prohibited
step in a handoff plan, and, after MAX_TRIES different wrong answers to one field, a pointer
to the trace instead of another try (recorded, shown on the roster, released by the
facilitator)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop.ladder import rung, rungs


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _fill(answers: dict, rung_id: str = "combined", table: dict | None = None) -> None:
    doc = {"rung": rung_id, "answers": answers, **({"table": table} if table else {})}
    Path(f"workshop/{rung_id}/worksheet.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


def _progress() -> dict:
    return json.loads(Path(".crashlab-workshop.json").read_text())


def _other(value, q):
    return next(v for v in q.vocab if v != value)


def test_every_worksheet_field_has_a_hint_of_its_own():
    for r in rungs():
        r = rung(r.id)
        for q in r.questions:
            assert q.hint, (r.id, q.id)
        for column in r.columns:
            assert r.column_hints.get(column), (r.id, column)
        assert not set(r.column_hints) - set(r.columns), r.id


def test_the_hint_follows_the_wrong_field(room, capsys):
    main(["workshop", "start", "combined"])
    model = G.model_answers(rung("combined"))["answers"]
    q = next(x for x in rung("combined").questions if x.id == "c_disposition")
    _fill({**model, "c_disposition": _other(model["c_disposition"], q)})
    capsys.readouterr()
    assert main(["workshop", "check", "combined", "--hint"]) == 1
    out = capsys.readouterr().out
    assert f"hint for c_disposition: {q.hint}" in out
    assert "hint 1/" not in out                 # not the rung's first general hint
    # once that field is right the hint is no longer shown; the next --hint follows the next wrong field
    b = next(x for x in rung("combined").questions if x.id == "b_remote_effects")
    _fill({**model, "b_remote_effects": model["b_remote_effects"] + 1})
    main(["workshop", "check", "combined", "--hint"])
    out = capsys.readouterr().out
    assert f"hint for b_remote_effects: {b.hint}" in out and "hint for c_disposition" not in out
    assert _progress()["rungs"]["combined"]["field_hints"] == ["c_disposition", "b_remote_effects"]


def test_a_table_hint_follows_the_wrong_column(room, capsys):
    main(["workshop", "start", "timelines"])
    model = G.model_answers(rung("timelines"))
    table = {r: dict(c) for r, c in model["table"].items()}
    table["r3"]["remote"] = next(v for v in ("none", "committed", "released") if v != table["r3"]["remote"])
    _fill(model["answers"], "timelines", table)
    capsys.readouterr()
    main(["workshop", "check", "timelines", "--hint"])
    out = capsys.readouterr().out
    assert f"hint for r3.remote: {rung('timelines').column_hints['remote']}" in out


def test_after_three_wrong_tries_a_field_is_held_and_points_at_the_trace(room, capsys):
    main(["workshop", "start", "combined"])
    r = rung("combined")
    model = G.model_answers(r)["answers"]
    q = next(x for x in r.questions if x.id == "a_disposition")
    wrong = [v for v in q.vocab if v != model["a_disposition"]]
    _fill({**model, "a_disposition": wrong[0]})
    for _ in range(3):                          # the same wrong answer checked again is one try
        main(["workshop", "check", "combined"])
    assert len(_progress()["rungs"]["combined"]["tries"]["a_disposition"]) == 1
    for value in wrong[1:3]:
        _fill({**model, "a_disposition": value})
        main(["workshop", "check", "combined"])
    out = capsys.readouterr().out
    assert "held   a_disposition: 3 wrong tries; the next check will not grade it" in out
    # the right answer now: the held field is not graded, the rung does not pass, the trace is named
    _fill(model)
    assert main(["workshop", "check", "combined"]) == 1
    out = capsys.readouterr().out
    assert "held   a_disposition" in out and q.hint in out and "release combined a_disposition" in out
    assert "wrong  a_disposition" not in out
    main(["workshop", "class", str(room)])
    roster = capsys.readouterr().out
    assert "held after 3 wrong tries: combined.a_disposition" in roster and " P " not in roster
    # the facilitator releases it; the roster shows the release; the field is graded again
    assert main(["workshop", "release", "combined", "a_disposition"]) == 0
    assert main(["workshop", "check", "combined"]) == 0
    capsys.readouterr()
    main(["workshop", "class", str(room)])
    assert "released: combined.a_disposition" in capsys.readouterr().out


def test_releasing_a_field_that_is_not_held_is_a_usage_error(room, capsys):
    main(["workshop", "start", "combined"])
    assert main(["workshop", "release", "combined", "a_cancel"]) == 3
    assert "not held" in capsys.readouterr().err


def test_the_roster_names_the_stuck_field_with_its_tries(room, capsys):
    main(["workshop", "start", "combined"])
    model = G.model_answers(rung("combined"))["answers"]
    _fill({**model, "b_deploy": model["b_deploy"] + 1})
    main(["workshop", "check", "combined"])
    _fill({**model, "b_deploy": model["b_deploy"] + 2})
    main(["workshop", "check", "combined"])
    capsys.readouterr()
    main(["workshop", "class", str(room)])
    assert "stuck on combined (b_deploy, 2 wrong tries) after 2 attempts" in capsys.readouterr().out


def test_handoff_names_the_prohibited_step_and_the_chapter_against_it(room, capsys):
    from crashlab.workshop import handoff
    plan = handoff.model_plan(1)
    key = handoff.pool()[handoff.pick(1)[0]]
    step = key["prohibited"][0]
    plan["runs"]["A"]["actions"] = [*plan["runs"]["A"]["actions"], step]
    ok, wrong = handoff.grade(plan)
    assert any(f"run A: the actions include the prohibited step {step}" in w
               and handoff.WHY_PROHIBITED[step] in w for w in wrong), wrong
    assert all(step in handoff.WHY_PROHIBITED for k in handoff.pool().values() for step in k["prohibited"])
