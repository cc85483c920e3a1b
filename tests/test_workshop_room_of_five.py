"""Issue 39, done when: a room of five read from the roster alone tells the facilitator
truthfully who learned, who is stuck, who copied and who revealed.

One issued room, driven through the CLI only (``workshop room --add``, then each learner in their
own folder: ``start``, ``check``, ``reveal``), read back by the facilitator with ``workshop class``:

- ana learns: passes timelines, combined and drill with the model answers of her own kit, then
  reveals combined after passing it;
- ben is stuck: three different wrong dispositions on combined.c_disposition, so it is held;
- cai copies: ana's combined answers into her own kit (wrong there: kits differ), then ana's
  whole folder over hers (it passes under ana's identity, not hers);
- dee reveals to pass: one wrong try, reveal, the revealed answer written, check passes;
- eve only starts combined and never checks it.

Every assertion reads the roster's own text (table rows, legend, notes), and each learner's
line is also checked for the marks that belong to someone else's story.
"""
from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import progress
from crashlab.workshop.ladder import rung, rungs

NAMES = ("ana", "ben", "cai", "dee", "eve")
LEARNED = ("timelines", "combined", "drill")      # worksheet rungs: graded without code
RUNG = "combined"
IDS = [r.id for r in rungs()]


def _model(folder: Path, rung_id: str = RUNG) -> dict:
    data = progress.load(folder)
    return G.model_answers(rung(rung_id), progress.offset(data), data.get("variant"))


def _write(folder: Path, model: dict, rung_id: str = RUNG) -> None:
    doc = {"rung": rung_id, "answers": model["answers"], **({"table": model["table"]} if model["table"] else {})}
    (folder / "workshop" / rung_id / "worksheet.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


def _wrong_dispositions(model: dict) -> list[str]:
    q = next(x for x in rung(RUNG).questions if x.id == "c_disposition")
    return [v for v in q.vocab if v != model["answers"]["c_disposition"]]


class Roster:
    """What ``workshop class`` printed: the text, the rows of the table and the notes by learner."""

    def __init__(self, text: str):
        self.text = text
        lines = text.splitlines()
        self.rows = {line.split()[0]: line for line in lines if line.split() and ":" not in line.split()[0]}
        self.notes = {line.split(":")[0]: line for line in lines if line.split() and line.split()[0].endswith(":")}

    def cell(self, name: str, rung_id: str) -> str:
        return self.rows[name].split()[1 + IDS.index(rung_id)]

    def cells(self, name: str) -> dict:
        return dict(zip(IDS, self.rows[name].split()[1:1 + len(IDS)]))

    def passed(self, name: str) -> str:
        return self.rows[name].split()[-1]


class _Run:
    """``main`` with its standard output kept (a module-scoped room cannot use capsys)."""

    def __init__(self, mp: pytest.MonkeyPatch):
        self.mp = mp

    def __call__(self, *argv: str, where: Path | None = None) -> tuple[int, str]:
        if where is not None:
            self.mp.chdir(where)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(list(argv))
        return rc, out.getvalue()

    def roster(self, room: Path) -> Roster:
        rc, out = self(*("workshop", "class", str(room)))
        assert rc == 0, out
        return Roster(out)


@pytest.fixture(scope="module")
def room_of_five(tmp_path_factory):
    base = tmp_path_factory.mktemp("five")
    room = base / "room"
    seen: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        run = _Run(mp)
        rc, out = run("workshop", "room", str(room), *[a for n in NAMES for a in ("--add", n)])
        assert rc == 0, out
        ana, ben, cai, dee, eve = (room / n for n in NAMES)

        # ana learns: her own kit's answers, three rungs passed, then a reveal after the pass
        for rung_id in LEARNED:
            assert run("workshop", "start", rung_id, where=ana)[0] == 0
            _write(ana, _model(ana, rung_id), rung_id)
            rc, out = run("workshop", "check", rung_id)
            assert rc == 0, out
        assert run("workshop", "reveal", RUNG)[0] == 0

        # ben is stuck: three different wrong dispositions, the field is held
        run("workshop", "start", RUNG, where=ben)
        model = _model(ben)
        for value in _wrong_dispositions(model)[:3]:
            _write(ben, {**model, "answers": {**model["answers"], "c_disposition": value}})
            assert run("workshop", "check", RUNG)[0] == 1
        seen["ben_last_check"] = run("workshop", "check", RUNG)[1]

        # eve only starts
        run("workshop", "start", RUNG, where=eve)

        # cai copies ana's answers into her own kit: wrong there
        run("workshop", "start", RUNG, where=cai)
        shutil.copy(ana / "workshop" / RUNG / "worksheet.yaml", cai / "workshop" / RUNG / "worksheet.yaml")
        seen["cai_copied_answers"] = run("workshop", "check", RUNG)
        seen["after_answers"] = run.roster(room)
        # ... then ana's whole folder over hers: it passes, under ana's identity
        mp.chdir(base)
        shutil.rmtree(cai)
        shutil.copytree(ana, cai)
        seen["cai_copied_folder"] = run("workshop", "check", RUNG, where=cai)

        # dee reveals to pass: one wrong try, the reveal, the revealed answer, a check that passes
        run("workshop", "start", RUNG, where=dee)
        model = _model(dee)
        _write(dee, {**model, "answers": {**model["answers"], "c_disposition": _wrong_dispositions(model)[0]}})
        assert run("workshop", "check", RUNG)[0] == 1
        rc, out = run("workshop", "reveal", RUNG)
        assert rc == 0, out
        _write(dee, _model(dee))
        seen["dee_after_reveal"] = run("workshop", "check", RUNG)

        seen["roster"] = run.roster(room)
        seen["room"] = room
    return seen


def _note(roster: Roster, name: str) -> str:
    assert name in roster.notes, roster.text
    return roster.notes[name]


def test_the_table_counts_only_honest_passes(room_of_five):
    r = room_of_five["roster"]
    assert set(NAMES) <= set(r.rows), r.text
    assert [r.passed(n) for n in NAMES] == ["3/16", "0/16", "0/16", "0/16", "0/16"], r.text
    totals = dict(zip(IDS, r.rows["passed"].split()[1:]))
    assert totals == {i: ("1" if i in LEARNED else "0") for i in IDS}, r.text
    assert ("P passed (graded again now; also when revealed after the pass), R answer revealed before a pass, "
            "x attempted, s started, . not started") in r.text, r.text


def test_ana_learned(room_of_five):
    r = room_of_five["roster"]
    assert r.cells("ana") == {i: ("P" if i in LEARNED else ".") for i in IDS}, r.text
    note = _note(r, "ana")
    assert f"revealed after passing {RUNG}" in note, r.text
    assert "revealed none (before a pass)" in note, r.text          # no reveal held against her
    assert f"revealed {RUNG} (before a pass)" not in note, r.text
    assert "stuck on" not in note and "held after" not in note and "not checked yet" not in note, r.text
    assert "holds" not in note and "a copied folder" not in note, r.text
    # the one command run with her identity outside her folder is named, with where it ran: cai's folder
    assert f"commands run outside ana's folder, in {room_of_five['room'] / 'cai'}: check {RUNG}" in note, r.text


def test_ben_is_stuck_on_the_held_field(room_of_five):
    r = room_of_five["roster"]
    assert "held   c_disposition" in room_of_five["ben_last_check"]
    assert r.cell("ben", RUNG) == "x" and set(r.cells("ben").values()) == {".", "x"}, r.text
    note = _note(r, "ben")
    assert f"stuck on {RUNG} (c_disposition, 3 wrong tries) after 4 attempts" in note, r.text
    assert f"held after 3 wrong tries: {RUNG}.c_disposition" in note, r.text
    assert "revealed none" in note and "revealed after" not in note and "(before a pass)" not in note, r.text
    assert "a copied folder" not in note and "outside ben's folder" not in note, r.text


def test_cai_copied_answers_from_another_kit_do_not_pass(room_of_five):
    rc, out = room_of_five["cai_copied_answers"]
    assert rc == 1 and f"rung {RUNG}: not yet" in out, out
    r = room_of_five["after_answers"]
    assert r.cell("cai", RUNG) == "x" and r.passed("cai") == "0/16", r.text
    assert f"stuck on {RUNG} (" in _note(r, "cai") and "after 1 attempts" in _note(r, "cai"), r.text
    assert r.cell("ana", RUNG) == "P", r.text


def test_cai_copied_the_folder_and_is_named(room_of_five):
    rc, out = room_of_five["cai_copied_folder"]
    assert rc == 0, out                 # the copy passes on the learner's screen ...
    r = room_of_five["roster"]
    room = room_of_five["room"]
    assert r.cell("cai", RUNG) == "x" and r.passed("cai") == "0/16", r.text       # ... not on the roster
    note = _note(r, "cai")
    assert f"{room / 'cai'} holds ana's identity, not cai's (a copied folder)" in note, r.text
    assert "after 1 attempts" in note and "revealed none" in note, r.text
    for other in ("ana", "ben", "dee", "eve"):
        assert "a copied folder" not in _note(r, other), r.text


def test_dee_revealed_before_passing(room_of_five):
    rc, out = room_of_five["dee_after_reveal"]
    assert rc == 0 and f"rung {RUNG}: PASSED" in out, out       # the revealed answer passes check ...
    r = room_of_five["roster"]
    assert r.cell("dee", RUNG) == "R" and r.passed("dee") == "0/16", r.text     # ... and is R, not P
    assert "P" not in r.cells("dee").values(), r.text
    note = _note(r, "dee")
    assert f"revealed {RUNG} (before a pass)" in note and "2 attempts" in note, r.text
    assert "revealed after passing" not in note and "stuck on" not in note, r.text
    assert "a copied folder" not in note and "outside dee's folder" not in note, r.text
    assert all("R" not in r.cells(n).values() for n in ("ana", "ben", "cai", "eve")), r.text


def test_eve_started_and_is_not_called_stuck(room_of_five):
    r = room_of_five["roster"]
    assert r.cell("eve", RUNG) == "s" and set(r.cells("eve").values()) == {".", "s"}, r.text
    note = _note(r, "eve")
    assert note == f"eve: 0 attempts; 0 hints; revealed none; started, not checked yet: {RUNG}", r.text


def test_the_docs_show_this_roster(room_of_five):
    """docs/workshop.md's "Reading a roster" pastes this room's roster (its path shortened to ROOM):
    the table and every line but cai's first stuck field (her copied numbers are wrong somewhere
    in her own kit; where depends on the two kits' numbering)."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "workshop.md").read_text(encoding="utf-8")
    r = room_of_five["roster"]
    text = r.text.replace(str(room_of_five["room"]), "ROOM")
    shown = [line for line in text.splitlines() if line.strip() and not line.startswith("cai:")]
    missing = [line for line in shown if line not in docs.splitlines()]
    assert not missing, "\n".join(["docs/workshop.md does not show:", *missing, "", text])
    cai = next(line for line in text.splitlines() if line.startswith("cai:"))
    assert cai.endswith("; ROOM/cai holds ana's identity, not cai's (a copied folder)"), text
    assert re.sub(rf"stuck on {RUNG} \(\w+,", f"stuck on {RUNG} (a_cancel,", cai) in docs.splitlines(), text
