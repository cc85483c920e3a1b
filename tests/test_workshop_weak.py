"""The weak-service redesign as a design exercise: the learner proposes three bounded options
(what the service offers, who executes, the agent's design) and sees each measured on the
five criteria; an option that changes nothing, repeats another or is unsafe does not pass."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import weak
from crashlab.workshop.ladder import rung

MODEL = [dict(o) for o in weak.MODEL_OPTIONS]


@pytest.fixture
def kit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["workshop", "start", "weak-service"])
    folder = Path("workshop/weak-service")
    model = G.model_answers(rung("weak-service"))["answers"]
    (folder / "worksheet.yaml").write_text(yaml.safe_dump({"rung": "weak-service", "answers": model}))
    return folder


def _options(kit: Path, options: list[dict]) -> None:
    (kit / weak.OPTIONS).write_text(yaml.safe_dump({"options": options}))


def test_the_chapters_three_options_pass_and_are_told_apart(kit, capsys):
    _options(kit, MODEL)
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 0
    rows = {m["profile"]: m for _, m in weak.grade_options(weak.read_options(kit / weak.OPTIONS))[0]}
    as_is = weak.measure("as_is", weak.DESIGNS["reconcile_or_escalate"])
    outbox = rows["durable-outbox-with-acks"]
    # the outbox's row is not the weak service's: the acknowledgement is measured evidence
    assert outbox["evidence"] != as_is["evidence"] and outbox["evidence"].startswith("1 acknowledgement")
    human = rows["human-executed-proposal"]
    assert human["authority"] == "human" and "1 by hand" in human["effects"]
    assert rows["service-owned-command"]["ambiguity"] == "none"


def test_the_blank_template_fails_until_three_options_are_proposed(kit, capsys):
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 1
    assert "propose three bounded options (0 filled in)" in capsys.readouterr().out
    _options(kit, MODEL[:2])
    assert main(["workshop", "check", "weak-service"]) == 1
    assert "(2 filled in)" in capsys.readouterr().out


def test_store_and_retry_on_the_weak_service_is_not_an_option(kit, capsys):
    retry = {"name": "retry", "service": {"idempotency": "none", "lookup": "none"}, "acknowledgements": "no",
             "executes": "agent", "design": "store_and_retry"}
    _options(kit, [*MODEL[:2], retry])
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 1
    out = capsys.readouterr().out
    assert "option retry: the service is as weak as before" in out and "is not sufficient" in out
    assert "option retry: store_and_retry breaks" in out


def test_an_unsafe_design_on_a_changed_service_is_named(kit, capsys):
    acks_retry = {**MODEL[2], "name": "acks and retry", "design": "store_and_retry"}
    _options(kit, [*MODEL[:2], acks_retry])
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 1
    assert "option acks and retry: store_and_retry breaks" in capsys.readouterr().out


def test_the_same_option_twice_does_not_count(kit, capsys):
    _options(kit, [MODEL[0], MODEL[1], {**MODEL[1], "name": "again"}])
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 1
    assert "option again: the same capabilities as service-owned-command" in capsys.readouterr().out


def test_a_bad_option_field_is_a_usage_error_with_its_line(kit, capsys):
    (kit / weak.OPTIONS).write_text("options:\n  - name: x\n    service: {idempotency: maybe}\n    design: store_and_retry\n")
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 3
    err = capsys.readouterr().err
    assert "options.yaml:3" in err and "'maybe' is not one of none, semantic" in err


def test_the_model_answer_agrees_with_its_table():
    shown = G.model_answers(rung("weak-service"))["answers"]["as_is"]
    assert weak.measure("as_is", weak.DESIGNS[shown])["correct"] == "yes"
    assert shown == "reconcile_or_escalate"
