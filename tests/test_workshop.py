"""The workshop ladder: every rung walked with a wrong and a correct submission, kits that
never contain their answers, hints one at a time, reveal only after an attempt, worksheet
errors with file and line, and the facilitator's class table."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import keys as K
from crashlab.workshop import solutions
from crashlab.workshop.ladder import rung, rungs

RUNG_IDS = [r.id for r in rungs()]


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _fill(kit: Path, rung_id: str, answers: dict, table: dict) -> None:
    doc = {"rung": rung_id, "answers": answers}
    if table:
        doc["table"] = table
    (kit / "worksheet.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


def _wrong(value, q):
    """A well-typed answer that differs from the model's."""
    if q is not None and q.type == "count" and q.max is not None:   # any other score is wrong
        return value + 2 if value + 2 <= q.max else value - 2
    if q is None or q.type in ("event", "count"):
        return (value or 0) + 1 if not isinstance(value, list) else value
    if q.type == "events":
        return [*value, 0]
    if q.type == "set":
        return [v for v in q.vocab if v not in (value or [])][:1]
    return next(v for v in q.vocab if v != value)


@pytest.mark.parametrize("rung_id", RUNG_IDS)
def test_every_rung_fails_a_wrong_submission_and_passes_the_model_answer(room, rung_id, capsys):
    r = rung(rung_id)
    assert main(["workshop", "start", rung_id]) == 0
    kit = room / "workshop" / rung_id
    model = G.model_answers(r)
    questions = {q.id: q for q in r.questions}

    # the blank kit as written fails (the starter makes the classic mistake; the worksheet is empty)
    assert main(["workshop", "check", rung_id]) == 1
    out = capsys.readouterr().out
    if r.starter:
        assert "code: FAIL" in out
    if r.questions or r.kind == "table":
        assert "blank" in out

    # a wrong worksheet answer to each question is named, without the right value
    if model["answers"]:
        first = next(iter(model["answers"]))
        wrong = {**model["answers"], first: _wrong(model["answers"][first], questions[first])}
        _fill(kit, rung_id, wrong, model["table"])
        assert main(["workshop", "check", rung_id]) == 1
        out = capsys.readouterr().out
        assert f"wrong  {first}:" in out
        if questions[first].type == "event":
            assert f"#{model['answers'][first]}" not in out.split(f"wrong  {first}:")[1].splitlines()[0]
    if model["table"]:
        row = next(iter(model["table"]))
        col = next(iter(model["table"][row]))
        cells = {r_: dict(c) for r_, c in model["table"].items()}
        cells[row][col] = _wrong(cells[row][col], type("Q", (), {"type": "choice", "vocab": G.columns(r)[col]}))
        _fill(kit, rung_id, model["answers"], cells)
        assert main(["workshop", "check", rung_id]) == 1
        assert f"row {row}, column {col}" in capsys.readouterr().out

    if r.kind == "handoff":
        from crashlab.workshop import handoff
        plan = handoff.model_plan(1)
        wrong = {**plan, "runs": {**plan["runs"], "B": {**plan["runs"]["B"], "actions": ["dispatch_again"]}}}
        (kit / "plan.yaml").write_text(yaml.safe_dump(wrong), encoding="utf-8")
        assert main(["workshop", "check", rung_id]) == 1
        out = capsys.readouterr().out
        assert "run B: the actions miss a required step" in out and "prohibited" in out
        (kit / "plan.yaml").write_text(yaml.safe_dump(plan), encoding="utf-8")

    # the model answer (and, for a code rung, the corrected decision; for the design rung, the
    # chapter's three options) passes
    _fill(kit, rung_id, model["answers"], model["table"])
    if r.kind == "designs":
        from crashlab.workshop import weak
        (kit / weak.OPTIONS).write_text(yaml.safe_dump({"options": [dict(o) for o in weak.MODEL_OPTIONS]}))
    if r.starter:
        starter = (kit / "adapter.py").read_text(encoding="utf-8")
        (kit / "adapter.py").write_text(solutions.solved(starter, r.starter), encoding="utf-8")
    assert main(["workshop", "check", rung_id]) == 0, capsys.readouterr().out
    data = json.loads((room / ".crashlab-workshop.json").read_text())
    assert data["rungs"][rung_id]["status"] == "passed"


def _forbidden(r) -> list[str]:
    """Strings that would give a rung's answer away."""
    from crashlab.gallery import ENTRIES
    from crashlab.workshop import evidence as E

    out = []
    for entry in ENTRIES:
        module, _, cls = entry.adapter.partition(":")
        out += [entry.adapter, cls]
        if r.kind == "exhibits":
            out += [entry.statement[:60], entry.quote[:60]]
    for name in r.scenarios:
        for value in E.scenario_of(name).card.values():
            out.append(" ".join(str(value).split())[:60])
    out += [h for h in r.hints]
    out += [q.hint for q in r.questions if q.hint] + list(r.column_hints.values())
    if r.kind == "handoff":
        from crashlab.workshop import handoff
        for name in handoff.pool():
            out.append(name)
            out += [" ".join(str(v).split())[:60] for v in E.scenario_of(name).card.values()]
    if r.starter:
        code = [line.strip() for line in solutions.SOLUTIONS[r.starter].splitlines()
                if line.strip() and not line.strip().startswith(('"""', "def ", "async def "))
                and not line.strip().endswith('"""') and '"""' not in line]
        out.append(" ".join(code))   # the corrected decision's body
    if r.wire_starter:
        code = [line.strip() for line in solutions.SOLUTIONS[r.wire_starter].splitlines()[2:] if line.strip()]
        out.append(" ".join(code))
    for qid, value in G.model_answers(r)["answers"].items():
        out.append(f"{qid}: {value}")
    return out


@pytest.mark.parametrize("rung_id", RUNG_IDS)
def test_no_kit_contains_its_answer(room, rung_id):
    r = rung(rung_id)
    assert main(["workshop", "start", rung_id]) == 0
    kit = room / "workshop" / rung_id
    text = "\n".join(" ".join(p.read_text(encoding="utf-8").split()) for p in sorted(kit.rglob("*")) if p.is_file())
    leaks = [s for s in _forbidden(r) if s and " ".join(s.split()) in text]
    assert leaks == []
    # the evidence is sanitized: no card, no expectations, no adapter name in the headers
    for trace in kit.rglob("*.jsonl"):
        head = json.loads(trace.read_text().splitlines()[0])
        assert "card" not in head and head["adapter"] in ("anonymous",) + tuple(f"exhibit-{x}" for x in [*"ABCDR", "F1", "F2", "F3", "F4", "F5"])
    for scenario in kit.glob("scenario*.yaml"):
        doc = yaml.safe_load(scenario.read_text())
        assert not {"card", "expect", "description"} & set(doc)
    # every worksheet answer starts blank
    blank = yaml.safe_load((kit / "worksheet.yaml").read_text()) if (kit / "worksheet.yaml").exists() else None
    if (kit / "plan.yaml").exists():
        plan = yaml.safe_load((kit / "plan.yaml").read_text())
        assert all(v is None for run in plan["runs"].values() for v in run.values())
    if blank:
        assert all(v is None for v in blank["answers"].values())
        assert all(v is None for row in (blank.get("table") or {}).values() for v in row.values())


def test_the_leak_check_catches_a_leak(room):
    """The forbidden list really finds an answer written into a kit."""
    r = rung("t2")
    main(["workshop", "start", "t2"])
    kit = room / "workshop" / "t2"
    (kit / "notes.md").write_text(f"sent_unknown: {G.model_answers(r)['answers']['sent_unknown']}\n")
    text = "\n".join(p.read_text() for p in kit.iterdir())
    assert any(s in text for s in _forbidden(r))


def test_hints_come_one_at_a_time(room, capsys):
    main(["workshop", "start", "t1"])
    capsys.readouterr()
    main(["workshop", "check", "t1"])
    assert "hint 1/" not in capsys.readouterr().out
    main(["workshop", "check", "t1", "--hint"])
    out = capsys.readouterr().out
    assert "hint 1/3" in out and "hint 2/3" not in out
    main(["workshop", "check", "t1", "--hint"])
    assert "hint 2/3" in capsys.readouterr().out


def test_reveal_needs_an_attempt_then_shows_the_model_and_the_card(room, capsys):
    main(["workshop", "start", "t2"])
    assert main(["workshop", "reveal", "t2"]) == 3
    assert "after an attempt" in capsys.readouterr().err
    main(["workshop", "check", "t2"])
    capsys.readouterr()
    assert main(["workshop", "reveal", "t2"]) == 0
    out = capsys.readouterr().out
    assert "effects.reconcile(s, key)" in out and "teaching card" in out


def test_spot_the_bug_reveal_names_the_gallery_entries(room, capsys):
    main(["workshop", "start", "spot"])
    main(["workshop", "check", "spot"])
    capsys.readouterr()
    main(["workshop", "reveal", "spot"])
    out = capsys.readouterr().out
    assert "crashlab.gallery.retries:BlindRetry" in out
    pytest.importorskip("matplotlib")
    assert (room / "workshop/spot/reveal-figure-A.png").exists() and "reveal-figure-D.png" in out


def test_a_bad_worksheet_is_a_usage_error_naming_file_line_and_field(room, capsys):
    main(["workshop", "start", "t2"])
    (room / "workshop/t2/worksheet.yaml").write_text("rung: t2\nanswers:\n  read: lookup\n  dispatches: one\n")
    assert main(["workshop", "check", "t2"]) == 3
    err = capsys.readouterr().err
    assert "worksheet.yaml:3: field 'read'" in err and "vocabulary" in err
    (room / "workshop/t2/worksheet.yaml").write_text("rung: t2\nanswers:\n  nonsense: 1\n")
    assert main(["workshop", "check", "t2"]) == 3
    assert "no such question" in capsys.readouterr().err


def test_unknown_rung_and_missing_kit_are_usage_errors(room, capsys):
    assert main(["workshop", "start", "t99"]) == 3
    assert main(["workshop", "check", "t3"]) == 3
    assert "workshop start t3" in capsys.readouterr().err


def test_the_schema_accepts_the_model_answer_and_rejects_an_out_of_vocabulary_value(room):
    jsonschema = pytest.importorskip("jsonschema")
    for r_id in ("t2", "pressure", "spot"):
        r = rung(r_id)
        main(["workshop", "start", r_id])
        schema = json.loads((room / "workshop" / r_id / "worksheet.schema.json").read_text())
        model = G.model_answers(r)
        doc = {"rung": r_id, "answers": model["answers"], **({"table": model["table"]} if model["table"] else {})}
        jsonschema.validate(doc, schema)
        choice = next(q.id for q in r.questions if q.type == "choice")
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "answers": {**model["answers"], choice: "MAYBE"}}, schema)


def test_keys_are_derived_from_the_trace_not_fixed(monkeypatch):
    """Changing the trace changes the key: the grader reads evidence, not stored numbers."""
    r = rung("t2")
    before = K.expected(r)["sent_unknown"].accepted
    real = K.traces

    def shifted(rung_):
        return {label: [{**e, "seq": e["seq"] + 1000} for e in evs] for label, evs in real(rung_).items()}

    monkeypatch.setattr(K, "traces", shifted)
    after = K.expected(r)["sent_unknown"].accepted
    assert after == {s + 1000 for s in before}


def test_class_table_aggregates_a_room(tmp_path, monkeypatch, capsys):
    for name, passed in (("ana", True), ("ben", False)):
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        main(["workshop", "start", "timelines"])
        r = rung("timelines")
        if passed:
            model = G.model_answers(r)
            _fill(folder / "workshop/timelines", "timelines", model["answers"], model["table"])
        main(["workshop", "check", "timelines"])
    capsys.readouterr()
    assert main(["workshop", "class", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    ana = next(line for line in out.splitlines() if line.startswith("ana"))
    ben = next(line for line in out.splitlines() if line.startswith("ben"))
    assert "P" in ana and "1/" in ana and "x" in ben and "0/" in ben


def test_list_shows_status(room, capsys):
    main(["workshop", "start", "t3"])
    capsys.readouterr()
    main(["workshop", "list"])
    out = capsys.readouterr().out
    assert "t3         started" in out and "t1         not started" in out


def test_the_wheel_ships_the_workshop_data(tmp_path):
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(root)], check=True, capture_output=True)
    [whl] = tmp_path.glob("crashlab-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    for name in ("crashlab/workshop/data/rungs.yaml", "crashlab/workshop/data/answers.yaml",
                 "crashlab/workshop/data/starters/request_key.py", "crashlab/workshop/data/starters/wire_resend.py",
                 "crashlab/workshop/data/scenarios/weak-outbox-ack.yaml", "crashlab/workshop/cli.py"):
        assert name in names


@pytest.mark.parametrize("rung_id", [r.id for r in rungs() if r.wire_starter])
def test_the_standalone_wire_starter_fails_as_given_and_passes_once_fixed(room, rung_id, capsys):
    r = rung(rung_id)
    main(["workshop", "start", rung_id])
    kit = room / "workshop" / rung_id
    capsys.readouterr()
    assert main(["workshop", "check", rung_id, "--wire"]) == 1
    out = capsys.readouterr().out
    assert "code: FAIL" in out and "wire_adapter.py" not in out   # the adapter is named "your adapter"
    starter = (kit / "wire_adapter.py").read_text(encoding="utf-8")
    (kit / "wire_adapter.py").write_text(solutions.solved(starter, r.wire_starter), encoding="utf-8")
    main(["workshop", "check", rung_id, "--wire"])
    assert "code: PASS" in capsys.readouterr().out


def test_check_wire_runs_a_python_kit_adapter_through_the_wire_shim(room, capsys):
    main(["workshop", "start", "t1"])
    kit = room / "workshop" / "t1"
    assert main(["workshop", "check", "t1", "--wire"]) == 1
    assert "code: FAIL" in capsys.readouterr().out
    starter = (kit / "adapter.py").read_text(encoding="utf-8")
    (kit / "adapter.py").write_text(solutions.solved(starter, "request_key"), encoding="utf-8")
    main(["workshop", "check", "t1", "--wire"])
    assert "code: PASS" in capsys.readouterr().out


def test_a_rubric_score_must_be_exact_and_its_feedback_names_the_category_not_the_value():
    from crashlab.checks.docs import CATEGORY_MAX
    r = rung("rubric")
    keys = K.expected(r)
    for category in CATEGORY_MAX:
        (value,) = keys[category].accepted
        assert keys[category].judge(value) is None
        for off in (value - 1, value + 1):      # one point off is wrong: no tolerance to bracket with
            problem = keys[category].judge(off)
            assert problem is not None and not any(ch.isdigit() for ch in problem)
            assert "one point" not in problem and "higher" not in problem and "lower" not in problem


def _bracket(maximum: int) -> list[int]:
    """The guesses whose one-point windows cover 0..maximum (1, 4, ...): a bracketing guesser's tries."""
    out = list(range(1, maximum + 1, 3))
    return out + ([maximum] if out[-1] + 1 < maximum else [])


def test_a_bracketing_guesser_fails_within_its_tries_and_the_honest_score_passes(tmp_path, monkeypatch, capsys):
    """A guesser tries scores whose one-point windows cover each category's range (1, 4, 6),
    keeping a category's guess once it is not reported wrong: under a one-point tolerance it
    passes within three tries whatever the scores; with exact scores it does not, and the
    feedback never says how far off or on which side. The honest reading of the kit's traces passes."""
    from crashlab.checks.docs import CATEGORY_MAX
    r = rung("rubric")
    model = G.model_answers(r)["answers"]
    assert all(G.MAX_TRIES < m + 1 for m in CATEGORY_MAX.values())   # the tries cannot cover a range
    assert max(len(_bracket(m)) for m in CATEGORY_MAX.values()) <= G.MAX_TRIES
    guesser = tmp_path / "guesser"
    guesser.mkdir()
    monkeypatch.chdir(guesser)
    assert main(["workshop", "start", "rubric"]) == 0
    kit = guesser / "workshop" / "rubric"
    step = dict.fromkeys(CATEGORY_MAX, 0)
    for _ in range(G.MAX_TRIES + 1):
        guess = {c: _bracket(m)[step[c]] for c, m in CATEGORY_MAX.items()}
        _fill(kit, "rubric", {**model, **guess}, {})
        capsys.readouterr()
        code = main(["workshop", "check", "rubric"])
        out = capsys.readouterr().out
        assert code == 1, (guess, out)
        for c, m in CATEGORY_MAX.items():
            line = next((x for x in out.splitlines() if x.strip().startswith(f"wrong  {c}:")), None)
            if line is None:
                continue
            assert "one point" not in line and not any(ch.isdigit() for ch in line), line
            step[c] = min(step[c] + 1, len(_bracket(m)) - 1)
    assert any(model[c] not in _bracket(m) for c, m in CATEGORY_MAX.items())
    honest = tmp_path / "honest"
    honest.mkdir()
    monkeypatch.chdir(honest)
    assert main(["workshop", "start", "rubric"]) == 0
    _fill(honest / "workshop" / "rubric", "rubric", model, {})
    assert main(["workshop", "check", "rubric"]) == 0


def test_handoff_keys_hold_against_the_reference_evidence():
    """Every pool run's recorded outcome is a permitted disposition, and after the handoff
    point the reference never dispatches where dispatching is prohibited."""
    from crashlab.workshop import evidence as E
    from crashlab.workshop import handoff

    for name, key in handoff.pool().items():
        events = E.trace(name)
        finish = [e for e in events if e["kind"] == "finish" and e.get("accepted")][-1]
        assert finish["disposition"] in key["dispositions"], name
        assert (finish["next_owner"] or "none") in key["next_owner"], name
        point = handoff.cut(events)
        sends = [e for e in events if e["seq"] >= point and e["lane"] == "port" and e["kind"] == "call"
                 and e["op"] == "reserve"]
        assert not sends or "dispatch_again" not in key["prohibited"], name


def test_handoff_artifacts_hold_no_ground_truth(room):
    from crashlab.workshop import handoff

    assert main(["workshop", "handoff", "--seed", "4"]) == 0
    kit = room / "workshop" / "handoff"
    for label in "ABC":
        events = [json.loads(line) for line in (kit / f"run-{label}/trace-until-handoff.jsonl").read_text().splitlines()]
        assert not [e for e in events if e["lane"] == "remote" or e.get("delivered") is False]
        assert events[0]["scenario"] == f"handoff-run-{label}" and "expect" not in events[0]
        assert json.loads((kit / f"run-{label}/checkpoint.json").read_text())["control"]["state"]
    assert handoff.pick(4) == handoff.pick(4) and len(set(handoff.pick(4))) == 3


def test_compare_names_where_two_reviewers_disagree(room, capsys):
    from crashlab.workshop import handoff

    a = handoff.model_plan(2, "ana")
    b = handoff.model_plan(2, "ben")
    b["runs"]["A"]["disposition"] = "WAITING_OPERATOR"
    b["runs"]["C"]["actions"] = [*b["runs"]["C"]["actions"], "escalate_to_operator"]
    (room / "a.yaml").write_text(yaml.safe_dump(a))
    (room / "b.yaml").write_text(yaml.safe_dump(b))
    assert main(["workshop", "compare", "a.yaml", "b.yaml"]) == 1
    out = capsys.readouterr().out
    assert "2 disagreement(s)" in out and "only ben: escalate_to_operator" in out
    assert main(["workshop", "compare", "a.yaml", "a.yaml"]) == 0
    c = handoff.model_plan(3)
    (room / "c.yaml").write_text(yaml.safe_dump(c))
    assert main(["workshop", "compare", "a.yaml", "c.yaml"]) == 3


def test_weak_service_table_is_measured_and_names_the_unsafe_design(room, capsys):
    main(["workshop", "start", "weak-service"])
    _fill(room / "workshop/weak-service", "weak-service",
          {"as_is": "store_and_retry", "not_sufficient": "store_and_retry"}, {})
    capsys.readouterr()
    assert main(["workshop", "check", "weak-service"]) == 1
    out = capsys.readouterr().out
    assert "wrong  as_is" in out
    row = next(line for line in out.splitlines() if line.startswith("as_is | store_and_retry"))
    assert "no: EFF-01" in row and "| 2 by the agent |" in row


def test_start_again_keeps_the_learners_work(room, capsys):
    main(["workshop", "start", "t2"])
    kit = room / "workshop" / "t2"
    (kit / "adapter.py").write_text("# mine\n")
    (kit / "worksheet.yaml").write_text("rung: t2\nanswers: {dispatches: 1}\n")
    assert main(["workshop", "start", "t2"]) == 0
    assert (kit / "adapter.py").read_text() == "# mine\n"
    assert "dispatches: 1" in (kit / "worksheet.yaml").read_text()


def test_a_handoff_folder_keeps_one_seed(room, capsys):
    assert main(["workshop", "handoff", "--seed", "5"]) == 0
    assert main(["workshop", "handoff", "--seed", "5"]) == 0
    assert main(["workshop", "handoff", "--seed", "6"]) == 3
    assert "seed 5" in capsys.readouterr().err
    assert main(["workshop", "handoff", "--seed", "6", "--dir", "other"]) == 0
