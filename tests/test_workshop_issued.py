"""Room state held by the facilitator: identities the facilitator issues (``room DIR --add NAME``),
each learner's kits, tries, hints and reveals appended to a signed record in the room, and a
roster that reads only those records. Each shortcut a learner has with their own files is seen."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import progress
from crashlab.workshop import room as R
from crashlab.workshop.ladder import rung

RUNG = "combined"        # a worksheet rung whose answers are event numbers


def _room(tmp_path: Path, monkeypatch, capsys, *names: str) -> Path:
    room = tmp_path / "room"
    assert main(["workshop", "room", str(room), *[a for n in names for a in ("--add", n)]]) == 0
    out = capsys.readouterr().out
    for n in names:
        assert f"cd {room / n} && crashlab workshop start" in out
    return room


def _as(folder: Path, monkeypatch) -> Path:
    monkeypatch.chdir(folder)
    return folder


def _model(folder: Path, rung_id: str = RUNG) -> dict:
    data = progress.load(folder)
    return G.model_answers(rung(rung_id), progress.offset(data), data.get("variant"))


def _write(folder: Path, model: dict, rung_id: str = RUNG) -> None:
    doc = {"rung": rung_id, "answers": model["answers"], **({"table": model["table"]} if model["table"] else {})}
    (folder / "workshop" / rung_id / "worksheet.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


def _roster(room: Path, capsys) -> tuple[dict, dict]:
    capsys.readouterr()
    assert main(["workshop", "class", str(room)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and ":" not in line.split()[0]}
    notes = {line.split(":")[0]: line for line in out.splitlines() if line.split() and line.split()[0].endswith(":")}
    return rows, notes


def _cell(row: str, rung_id: str = RUNG) -> str:
    header = [r.id for r in __import__("crashlab.workshop.ladder", fromlist=["rungs"]).rungs()]
    return row.split()[1 + header.index(rung_id)]


def test_an_issued_learner_keeps_no_state_in_files_of_their_own(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    assert main(["workshop", "start", RUNG]) == 0
    _write(ana, _model(ana))
    assert main(["workshop", "check", RUNG]) == 0
    assert not (ana / progress.PROGRESS).exists()
    lines = R.read_entries(R.record_path(room, "ana"))
    assert [e["by"] for e in lines] == ["facilitator", "ana", "ana"] and lines[2]["change"]["status"] == "passed"
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"]) == "P" and "1/16" in rows["ana"]
    assert main(["workshop", "reveal", RUNG]) == 0          # a reveal after an honest pass keeps the pass
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"]) == "P" and f"revealed after passing {RUNG}" in notes["ana"]


def test_a_reveal_in_a_copy_of_the_folder_is_on_the_roster(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    main(["workshop", "check", RUNG])
    copy = tmp_path / "elsewhere" / "ana-copy"
    shutil.copytree(ana, copy)
    _as(copy, monkeypatch)
    assert main(["workshop", "reveal", RUNG]) == 0
    _as(ana, monkeypatch)
    _write(ana, _model(ana))                                  # the revealed answer, copied back
    assert main(["workshop", "check", RUNG]) == 0
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"]) == "R" and "0/16" in rows["ana"]
    assert f"revealed {RUNG} (before a pass)" in notes["ana"]
    assert f"commands run outside ana's folder, in {copy}: reveal {RUNG}" in notes["ana"]


def test_deleting_tries_does_not_give_them_back(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    model = _model(ana)
    q = next(x for x in rung(RUNG).questions if x.id == "c_disposition")
    wrong = [v for v in q.vocab if v != model["answers"]["c_disposition"]][:3]
    for value in wrong:
        _write(ana, {**model, "answers": {**model["answers"], "c_disposition": value}})
        main(["workshop", "check", RUNG])
    # the learner's own progress file (were there one) carries no tries: written by hand, it counts for nothing
    (ana / progress.PROGRESS).write_text(json.dumps({"rungs": {RUNG: {"kit": f"workshop/{RUNG}", "attempts": 0,
                                                                      "tries": {}, "status": "passed"}}}))
    _write(ana, model)
    capsys.readouterr()
    assert main(["workshop", "check", RUNG]) == 1
    assert "held   c_disposition" in capsys.readouterr().out
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"]) == "x" and f"held after 3 wrong tries: {RUNG}.c_disposition" in notes["ana"]
    assert "not a record the facilitator issued: not graded" in notes[f"ana/{progress.PROGRESS}"]


def test_a_release_needs_the_rooms_key(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    model = _model(ana)
    q = next(x for x in rung(RUNG).questions if x.id == "c_disposition")
    for value in [v for v in q.vocab if v != model["answers"]["c_disposition"]][:3]:
        _write(ana, {**model, "answers": {**model["answers"], "c_disposition": value}})
        main(["workshop", "check", RUNG])
    key = R.state_dir(room) / R.KEY
    away = tmp_path / "facilitator-only"
    key.rename(away)                                          # the learner's account cannot read it
    capsys.readouterr()
    assert main(["workshop", "release", RUNG, "c_disposition"]) == 3
    assert "no room key" in capsys.readouterr().err
    # a release line the learner signs with their own secret does not count
    secret = json.loads((ana / R.IDENTITY).read_text())["secret"].encode()
    R._append(R.record_path(room, "ana"), secret, {"by": "ana", "folder": str(ana), "rung": RUNG,
                                                   "change": {"released": ["c_disposition"]}})
    away.rename(key)
    rows, notes = _roster(room, capsys)
    assert f"held after 3 wrong tries: {RUNG}.c_disposition" in notes["ana"] and "released" not in notes["ana"]
    _as(ana, monkeypatch)
    assert main(["workshop", "release", RUNG, "c_disposition"]) == 0        # the facilitator's
    rows, notes = _roster(room, capsys)
    assert f"released: {RUNG}.c_disposition" in notes["ana"] and "held after" not in notes["ana"]


def test_the_same_name_started_elsewhere_is_another_kit(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    main(["workshop", "check", RUNG])
    assert main(["workshop", "start", "t2", "--learner", "ana"]) == 3     # no self-declared name in an issued folder
    assert "issued by the facilitator" in capsys.readouterr().err
    for name in ("ana", "room/ana", str(ana)):
        other = tmp_path / "scratch" / name.replace("/", "_")
        other.mkdir(parents=True)
        _as(other, monkeypatch)
        main(["workshop", "start", RUNG, "--learner", name])
        main(["workshop", "check", RUNG])
        assert main(["workshop", "reveal", RUNG]) == 0
        assert (other / f"workshop/{RUNG}/listing-A.txt").read_text() != (ana / f"workshop/{RUNG}/listing-A.txt").read_text()
        _write(ana, _model(other))                           # the answer revealed there
        _as(ana, monkeypatch)
        assert main(["workshop", "check", RUNG]) == 1
    rows, _ = _roster(room, capsys)
    assert _cell(rows["ana"]) == "x"


def test_a_copied_folder_is_seen(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana", "ben")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    _write(ana, _model(ana))
    assert main(["workshop", "check", RUNG]) == 0
    ben = room / "ben"
    _as(ben, monkeypatch)
    main(["workshop", "start", RUNG])
    shutil.rmtree(ben)
    shutil.copytree(ana, ben)                                 # ben's folder is now ana's, identity and all
    _as(ben, monkeypatch)
    main(["workshop", "check", RUNG])
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ben"]) != "P" and "0/16" in rows["ben"]
    assert f"{ben} holds ana's identity, not ben's (a copied folder)" in notes["ben"]
    assert f"commands run outside ana's folder, in {ben}" in notes["ana"]


def test_a_record_changed_by_hand_or_rewound_is_not_graded(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana", "ben")
    for name in ("ana", "ben"):
        folder = _as(room / name, monkeypatch)
        main(["workshop", "start", RUNG])
        main(["workshop", "check", RUNG])
        main(["workshop", "reveal", RUNG])
        _write(folder, _model(folder))
        main(["workshop", "check", RUNG])
    rows, _ = _roster(room, capsys)
    assert _cell(rows["ana"]) == "R" and _cell(rows["ben"]) == "R"
    # ana removes her reveal from the middle of her record; ben cuts his record back to before it
    rec = R.record_path(room, "ana")
    lines = rec.read_text().splitlines()
    rec.write_text("\n".join(line for line in lines if '"revealed"' not in line) + "\n")
    rec = R.record_path(room, "ben")
    lines = rec.read_text().splitlines()
    rec.write_text("\n".join(lines[:next(i for i, line in enumerate(lines) if '"revealed"' in line)]) + "\n")
    _as(room / "ben", monkeypatch)
    main(["workshop", "check", RUNG])                         # passes again, with no reveal in the record
    rows, notes = _roster(room, capsys)
    assert "?/16" in rows["ana"] and "P" not in rows["ana"]
    assert "record changed by hand" in notes["ana"] and "not chained" in notes["ana"]
    assert "?/16" in rows["ben"] and "record rewound" in notes["ben"]


def test_a_deleted_record_is_still_on_the_roster(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana", "cai")
    _as(room / "cai", monkeypatch)
    main(["workshop", "start", RUNG])
    main(["workshop", "check", RUNG])
    main(["workshop", "reveal", RUNG])
    R.record_path(room, "cai").unlink()                       # and her reveal with it
    capsys.readouterr()
    assert main(["workshop", "check", RUNG]) == 3              # no record, no command
    assert "not reachable" in capsys.readouterr().err
    rows, notes = _roster(room, capsys)
    assert "?/16" in rows["cai"] and "cai's record is gone" in notes["cai"] and "ana" in rows


def test_checks_at_once_from_scratch_folders_count_as_tries_in_turn(tmp_path, monkeypatch, capsys):
    """Five copies of the folder, each with another wrong disposition, checked at the same moment:
    one command at a time per learner, so the field is graded three times and then held."""
    import subprocess
    import sys
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", RUNG])
    model = _model(ana)
    q = next(x for x in rung(RUNG).questions if x.id == "c_disposition")
    wrong = [v for v in q.vocab if v != model["answers"]["c_disposition"]][:5]
    assert len(wrong) == 5
    copies = []
    for i, value in enumerate(wrong):
        copy = tmp_path / f"scratch{i}"
        shutil.copytree(ana, copy)
        _write(copy, {**model, "answers": {**model["answers"], "c_disposition": value}})
        copies.append(copy)
    procs = [subprocess.Popen([sys.executable, "-m", "crashlab", "workshop", "check", RUNG], cwd=copy,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for copy in copies]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert sum("wrong  c_disposition" in out for out in outs) == 3
    assert sum("held   c_disposition" in out and "wrong  c_disposition" not in out for out in outs) == 2
    rows, notes = _roster(room, capsys)
    assert f"held after 3 wrong tries: {RUNG}.c_disposition" in notes["ana"]


def test_an_honest_issued_learner_passes_all_sixteen_rungs_and_keeps_them_after_reveals(tmp_path, monkeypatch,
                                                                                          capsys):
    from crashlab.workshop import handoff, solutions, weak
    from crashlab.workshop.ladder import rungs
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    ana = _as(room / "ana", monkeypatch)
    for r in rungs():
        assert main(["workshop", "start", r.id]) == 0
        kit = ana / "workshop" / r.id
        model = _model(ana, r.id)
        if model["answers"] or model["table"]:
            _write(ana, model, r.id)
        if r.kind == "designs":
            (kit / weak.OPTIONS).write_text(yaml.safe_dump({"options": [dict(o) for o in weak.MODEL_OPTIONS]}))
        if r.kind == "handoff":
            (kit / handoff.PLAN).write_text(yaml.safe_dump(handoff.model_plan(1)), encoding="utf-8")
        if r.starter:
            (kit / "adapter.py").write_text(solutions.solved((kit / "adapter.py").read_text(encoding="utf-8"),
                                                             r.starter), encoding="utf-8")
        capsys.readouterr()
        assert main(["workshop", "check", r.id]) == 0, capsys.readouterr().out
    for rung_id in ("t2", "timelines", "handoff"):
        assert main(["workshop", "reveal", rung_id]) == 0
    rows, notes = _roster(room, capsys)
    assert "16/16" in rows["ana"] and "R" not in rows["ana"][len("ana"):]
    assert "revealed none" in notes["ana"] and "revealed after passing t2, timelines, handoff" in notes["ana"]


def test_a_report_in_an_issued_folder_is_recorded_in_the_room(tmp_path, monkeypatch, capsys):
    room = _room(tmp_path, monkeypatch, capsys, "ana")
    (room / "ana" / "sub").mkdir()
    _as(room / "ana" / "sub", monkeypatch)
    assert main(["workshop", "start", "t3"]) == 0                 # from a folder below hers: still hers
    assert (room / "ana" / "workshop" / "t3").is_dir()
    assert main(["run", rung("t3").scenario, "--adapter", "crashlab.reference_impl:ReferenceAdapter",
                 "--report", "out/"]) == 0
    assert "answer to workshop rung(s) t3" in capsys.readouterr().err
    assert not (room / "ana" / progress.PROGRESS).exists() and not (room / "ana" / "sub" / progress.PROGRESS).exists()
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"], "t3") == "R"
    assert f"t3: answer shown by `crashlab run {rung('t3').scenario} --report`" in notes["ana"]


def test_a_kit_in_a_neighbours_folder_is_not_graded_as_ones_own(tmp_path, monkeypatch, capsys):
    """The handoff plan is the same for every learner: ana's passing plan in ana's folder is not
    ben's, even when ben's kit is started there (--dir)."""
    import yaml as _yaml
    from crashlab.workshop import handoff
    room = _room(tmp_path, monkeypatch, capsys, "ana", "ben")
    ana = _as(room / "ana", monkeypatch)
    main(["workshop", "start", "handoff"])
    (ana / "workshop/handoff" / handoff.PLAN).write_text(_yaml.safe_dump(handoff.model_plan(1)), encoding="utf-8")
    assert main(["workshop", "check", "handoff"]) == 0
    _as(room / "ben", monkeypatch)
    main(["workshop", "start", "handoff", "--dir", "../ana/workshop/handoff"])
    main(["workshop", "check", "handoff"])
    rows, notes = _roster(room, capsys)
    assert _cell(rows["ana"], "handoff") == "P" and _cell(rows["ben"], "handoff") != "P"
    assert "a kit outside ben's folder is not graded as theirs" in notes["ben"]
