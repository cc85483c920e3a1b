"""No pass without the work: each code rung is graded on several scenarios, so a decision that
ignores its inputs or the forbidden "reconcile, then send again" fallback fails; a kit's code
that imports the reference design or the gallery is refused; ``--adapter`` is recorded."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import solutions
from crashlab.workshop.ladder import rung, rungs

CODE_RUNGS = [r.id for r in rungs() if r.starter]


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _start(rung_id: str, capsys) -> Path:
    assert main(["workshop", "start", rung_id]) == 0
    capsys.readouterr()
    return Path("workshop") / rung_id


def _decide(kit: Path, name: str, model: str, file: str = "adapter.py") -> None:
    """Replace the starter's decision with ``model`` (the way a learner edits it)."""
    text = (kit / file).read_text(encoding="utf-8")
    start = re.search(rf"^(async )?def {name}\b", text, re.M).start()
    end = text.index(solutions.PLUMBING)
    (kit / file).write_text(text[:start] + model + "\n\n" + text[end:], encoding="utf-8")


FALLBACK = '''async def resolve_unknown(s, key):
    await effects.reconcile(s, key)
    if s.ledger[key]["knowledge"] == "SENT_UNKNOWN":
        await effects.dispatch(s, key)
'''
SHORTCUTS = [  # (rung, function, a decision that skips the work)
    ("t3", "replay_disposition", 'def replay_disposition(recorded_state, recorded_effects):\n    return "SUCCEEDED"\n'),
    ("t4", "approval_is_live", "def approval_is_live(answer, resumed_wait):\n    return False\n"),
    ("t5", "compatibility", 'def compatibility(old, new, migration_tested):\n    return "migrate"\n'),
    ("t5", "compatibility", 'def compatibility(old, new, migration_tested):\n    return "stop"\n'),
    ("t8", "final_disposition", 'def final_disposition(knowledge, cancelled, nothing_landed):\n    return "SUCCEEDED"\n'),
    ("t8", "final_disposition",
     'def final_disposition(knowledge, cancelled, nothing_landed):\n    return "CANCELLED_EFFECT_UNKNOWN"\n'),
    ("t6", "dedup_key", 'def dedup_key(delivery):\n    return "one"\n'),
    ("t6", "dedup_key", 'def dedup_key(delivery):\n    return delivery["type"]\n'),
    ("t2", "resolve_unknown", FALLBACK),
    ("t7", "resolve_unknown", FALLBACK),
]


@pytest.mark.parametrize("rung_id,name,model", SHORTCUTS, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(SHORTCUTS)])
def test_a_shortcut_decision_fails_its_rung(room, capsys, rung_id, name, model):
    kit = _start(rung_id, capsys)
    _decide(kit, name, model)
    assert main(["workshop", "check", rung_id]) == 1
    out = capsys.readouterr().out
    assert "code: FAIL" in out and "FAIL  " in out
    # and the honest decision passes every scenario
    _decide(kit, name, solutions.SOLUTIONS[rung(rung_id).starter])
    assert main(["workshop", "check", rung_id]) in (0, 1)
    assert re.search(r"code: PASS \((\d+) of \1 scenarios\)", capsys.readouterr().out)


def test_the_fallback_fails_because_the_read_stays_down(room, capsys):
    kit = _start("t2", capsys)
    _decide(kit, "resolve_unknown", FALLBACK)
    main(["workshop", "check", "t2"])
    out = capsys.readouterr().out
    assert "pass  t2-commit-before-record" in out       # the rung's own trace alone cannot tell
    assert "FAIL  matrix-reconciliation-down" in out


@pytest.mark.parametrize("rung_id", CODE_RUNGS)
def test_every_code_rung_is_graded_on_more_than_its_own_trace_where_a_shortcut_exists(rung_id):
    from crashlab.workshop.codecheck import scenarios
    r = rung(rung_id)
    assert scenarios(r)[0] == (r.code_scenario or r.scenario)
    if r.starter in ("replay_disposition", "approval_is_live", "compatibility", "final_disposition",
                     "resolve_unknown_resend", "resolve_unknown_confirm"):
        assert len(scenarios(r)) >= 2


ONE_IMPORT = "from crashlab.reference_impl import ReferenceAdapter as Adapter\n"


@pytest.mark.parametrize("text", [
    ONE_IMPORT,
    "from crashlab.gallery import BY_ID\n",
    "import importlib\nAdapter = importlib.import_module('crashlab.reference_impl').ReferenceAdapter\n",
], ids=["reference", "gallery", "importlib"])
def test_a_kit_adapter_that_is_the_reference_is_refused(room, capsys, text):
    kit = _start("t3", capsys)
    starter = (kit / "adapter.py").read_text(encoding="utf-8")
    (kit / "adapter.py").write_text(text, encoding="utf-8")
    assert main(["workshop", "check", "t3"]) == 3
    err = capsys.readouterr().err
    assert "adapter.py" in err and ("not yours to submit" in err or "plumbing" in err)
    # the same import above an intact plumbing section is refused too
    (kit / "adapter.py").write_text(text + starter, encoding="utf-8")
    assert main(["workshop", "check", "t3"]) == 3
    assert "not yours to submit" in capsys.readouterr().err


def test_a_changed_plumbing_section_is_refused(room, capsys):
    kit = _start("t8", capsys)
    text = (kit / "adapter.py").read_text(encoding="utf-8")
    (kit / "adapter.py").write_text(text.replace("behaviour = Behaviour(disposition=_disposition)",
                                                 "pass"), encoding="utf-8")
    assert main(["workshop", "check", "t8"]) == 3
    assert "plumbing section was changed" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["crashlab.reference_impl:ReferenceAdapter",
                                  "wire:crashlab.reference_impl:ReferenceAdapter"])
def test_adapter_naming_the_reference_is_refused_on_a_code_rung(room, capsys, spec):
    _start("t3", capsys)
    assert main(["workshop", "check", "t3", "--adapter", spec]) == 3
    assert "not yours to submit" in capsys.readouterr().err


def test_adapter_on_a_code_rung_is_recorded_and_shown_by_class(room, capsys):
    kit = _start("t1", capsys)
    mine = Path("mine.py")
    starter = (kit / "adapter.py").read_text(encoding="utf-8")
    mine.write_text(solutions.solved(starter, "request_key"), encoding="utf-8")
    main(["workshop", "check", "t1", "--adapter", "mine:Adapter"])
    capsys.readouterr()
    data = json.loads(Path(".crashlab-workshop.json").read_text())
    assert data["rungs"]["t1"]["code"]["graded"] == "--adapter mine:Adapter"
    main(["workshop", "class", "."])
    assert "t1 by --adapter mine:Adapter" in capsys.readouterr().out


# --------------------------------------------------------------------------- the roster re-grades
def _learner(root: Path, name: str, monkeypatch) -> Path:
    folder = root / name
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(name + " "))


def test_a_hand_edited_passed_status_does_not_count(tmp_path, monkeypatch, capsys):
    folder = _learner(tmp_path, "eve", monkeypatch)
    main(["workshop", "start", "t3"])
    main(["workshop", "check", "t3"])
    data = json.loads((folder / ".crashlab-workshop.json").read_text())
    data["rungs"]["t3"]["status"] = "passed"
    data["rungs"]["t4"] = {"status": "passed", "attempts": 1, "hints": 0, "kit": None, "revealed": False}
    (folder / ".crashlab-workshop.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["workshop", "class", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0/" in _row(out, "eve") and " P " not in _row(out, "eve")
    assert "t3: the progress file says passed, the work does not" in out
    assert "stuck on t3 (code)" in out


def test_the_roster_shows_attempts_hints_reveals_and_the_stuck_field(tmp_path, monkeypatch, capsys):
    import yaml
    from crashlab.workshop import grade as G
    _learner(tmp_path, "ana", monkeypatch)
    main(["workshop", "start", "timelines"])
    model = G.model_answers(rung("timelines"))
    doc = {"rung": "timelines", "answers": model["answers"], "table": model["table"]}
    Path("workshop/timelines/worksheet.yaml").write_text(yaml.safe_dump(doc))
    main(["workshop", "check", "timelines"])
    _learner(tmp_path, "ben", monkeypatch)
    main(["workshop", "start", "t1"])
    main(["workshop", "check", "t1", "--hint"])
    main(["workshop", "check", "t1"])
    capsys.readouterr()
    main(["workshop", "class", str(tmp_path)])
    out = capsys.readouterr().out
    assert "1/" in _row(out, "ana") and "P" in _row(out, "ana")
    ben = next(line for line in out.splitlines() if line.startswith("ben:"))
    assert "2 attempts" in ben and "1 hints" in ben and "stuck on t1 (code) after 2 attempts" in ben


def test_a_revealed_rung_shows_as_revealed_not_passed(tmp_path, monkeypatch, capsys):
    import yaml
    from crashlab.workshop import grade as G
    _learner(tmp_path, "cat", monkeypatch)
    main(["workshop", "start", "timelines"])
    main(["workshop", "check", "timelines"])
    main(["workshop", "reveal", "timelines"])
    model = G.model_answers(rung("timelines"))      # copied from the reveal
    doc = {"rung": "timelines", "answers": model["answers"], "table": model["table"]}
    Path("workshop/timelines/worksheet.yaml").write_text(yaml.safe_dump(doc))
    assert main(["workshop", "check", "timelines"]) == 0
    capsys.readouterr()
    main(["workshop", "class", str(tmp_path)])
    out = capsys.readouterr().out
    assert "R" in _row(out, "cat") and "0/" in _row(out, "cat") and "revealed timelines" in out


def test_reveal_into_a_closed_pipe_is_recorded(room, capsys, monkeypatch):
    """`reveal tN | head`: the reader goes away after a few lines; the reveal still counts."""
    import builtins
    main(["workshop", "start", "t2"])
    main(["workshop", "check", "t2"])
    real = builtins.print
    shown = []

    def closed_after_one_line(*a, **k):
        if shown:
            raise BrokenPipeError
        shown.append(a)
        real(*a, **k)

    monkeypatch.setattr(builtins, "print", closed_after_one_line)
    with pytest.raises(BrokenPipeError):
        from crashlab.workshop import cli
        import argparse
        cli._reveal(argparse.Namespace(rung="t2"), Path.cwd())
    monkeypatch.setattr(builtins, "print", real)
    assert json.loads(Path(".crashlab-workshop.json").read_text())["rungs"]["t2"]["revealed"] is True


def test_a_report_of_a_kit_scenario_counts_as_a_reveal(tmp_path, monkeypatch, capsys):
    """`crashlab run <id from the kit> --report out/` shows the teaching card: never without a record."""
    _learner(tmp_path, "dan", monkeypatch)
    main(["workshop", "start", "t3"])
    main(["workshop", "check", "t3"])
    scenario = rung("t3").scenario
    capsys.readouterr()
    assert main(["run", scenario, "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--no-answers",
                 "--report", "hidden/"]) == 0
    assert json.loads(Path(".crashlab-workshop.json").read_text())["rungs"]["t3"]["revealed"] is False
    assert main(["run", scenario, "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--report", "out/"]) == 0
    err = capsys.readouterr().err
    assert "answer to workshop rung(s) t3" in err
    assert json.loads(Path(".crashlab-workshop.json").read_text())["rungs"]["t3"]["revealed"] is True
    main(["workshop", "class", str(tmp_path)])
    out = capsys.readouterr().out
    assert "R" in _row(out, "dan") and f"t3: answer shown by `crashlab run {scenario} --report`" in out


def test_a_report_shown_after_the_pass_keeps_the_pass(tmp_path, monkeypatch, capsys):
    import yaml
    from crashlab.workshop import grade as G
    _learner(tmp_path, "eli", monkeypatch)
    main(["workshop", "start", "combined"])
    model = G.model_answers(rung("combined"))
    Path("workshop/combined/worksheet.yaml").write_text(yaml.safe_dump({"rung": "combined", "answers": model["answers"]}))
    assert main(["workshop", "check", "combined"]) == 0
    assert main(["run", rung("combined").scenario, "--adapter", "crashlab.reference_impl:ReferenceAdapter",
                 "--report", "out/"]) == 0
    capsys.readouterr()
    main(["workshop", "class", str(tmp_path)])
    out = capsys.readouterr().out
    assert "P" in _row(out, "eli") and "after its pass" in out


def test_an_oracle_script_that_reads_nothing_does_not_pass(room, capsys):
    """Trying every value of a closed question in turn: the field is held after three, so the
    script never reaches a pass without the trace."""
    import yaml
    from crashlab.workshop import grade as G
    main(["workshop", "start", "combined"])
    r = rung("combined")
    model = G.model_answers(r)["answers"]
    q = next(x for x in r.questions if x.id == "c_disposition")
    order = [v for v in q.vocab if v != model["c_disposition"]] + [model["c_disposition"]]
    codes = []
    for value in order:
        Path("workshop/combined/worksheet.yaml").write_text(
            yaml.safe_dump({"rung": "combined", "answers": {**model, "c_disposition": value}}))
        codes.append(main(["workshop", "check", "combined"]))
    assert 0 not in codes
    capsys.readouterr()
    main(["workshop", "class", str(room)])
    assert "held after 3 wrong tries: combined.c_disposition" in capsys.readouterr().out


def test_a_sound_producer_and_sequence_identity_passes_t6(room, capsys):
    """Another sound identity than the event id: the producer and its own sequence number."""
    kit = _start("t6", capsys)
    _decide(kit, "dedup_key", 'def dedup_key(delivery):\n    return f"{delivery[\'producer\']}#{delivery[\'producer_seq\']}"\n')
    main(["workshop", "check", "t6"])
    assert "code: PASS" in capsys.readouterr().out
