"""Per-learner kits: ``workshop start --learner NAME`` moves every event number by an amount
that depends on the name only, so a neighbour's worksheet does not pass as is, while the
learner's own (honest) answers in their own numbering do."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop import progress
from crashlab.workshop.ladder import rung


def _kit(root: Path, name: str, monkeypatch, rung_id: str = "t2") -> Path:
    folder = root / name
    folder.mkdir()
    monkeypatch.chdir(folder)
    assert main(["workshop", "start", rung_id, "--learner", name]) == 0
    return folder


def _offset(folder: Path) -> int:
    return progress.offset(json.loads((folder / progress.PROGRESS).read_text()))


def _honest(folder: Path, rung_id: str) -> None:
    """The answers a learner reads off their own listing (the model answer in their numbering)."""
    data = json.loads((folder / progress.PROGRESS).read_text())
    model = G.model_answers(rung(rung_id), progress.offset(data), data.get("variant"))
    doc = {"rung": rung_id, "answers": model["answers"]}
    if model["table"]:
        doc["table"] = model["table"]
    (folder / f"workshop/{rung_id}/worksheet.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


@pytest.mark.parametrize("rung_id", ["t2", "combined", "spot", "t8"])
def test_a_neighbours_worksheet_does_not_pass_as_is(tmp_path, monkeypatch, capsys, rung_id):
    ana = _kit(tmp_path, "ana", monkeypatch, rung_id)
    ben = _kit(tmp_path, "ben", monkeypatch, rung_id)
    assert _offset(ana) != _offset(ben)
    _honest(ana, rung_id)
    monkeypatch.chdir(ana)
    capsys.readouterr()
    main(["workshop", "check", rung_id])
    assert "worksheet: " in (out := capsys.readouterr().out) and " 0 wrong, 0 blank" in out
    (ben / f"workshop/{rung_id}/worksheet.yaml").write_text(
        (ana / f"workshop/{rung_id}/worksheet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(ben)
    main(["workshop", "check", rung_id])
    out = capsys.readouterr().out
    assert "is not the evidence asked for" in out


def test_the_kit_depends_on_the_name_only(tmp_path, monkeypatch):
    one = _kit(tmp_path, "ana", monkeypatch)
    other = tmp_path / "again"
    other.mkdir()
    monkeypatch.chdir(other)
    main(["workshop", "start", "t2", "--learner", "ana"])
    listing = "workshop/t2/listing.txt"
    assert (one / listing).read_text() == (other / listing).read_text()
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    main(["workshop", "start", "t2"])
    assert (plain / listing).read_text() != (one / listing).read_text()


def test_the_roster_grades_each_learner_in_their_own_numbering(tmp_path, monkeypatch, capsys):
    ana = _kit(tmp_path, "ana", monkeypatch, "timelines")
    _honest(ana, "timelines")
    main(["workshop", "check", "timelines"])
    capsys.readouterr()
    main(["workshop", "class", str(tmp_path)])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ana "))
    assert "1/" in row


def test_another_name_in_a_folder_with_kits_is_refused(tmp_path, monkeypatch, capsys):
    _kit(tmp_path, "ana", monkeypatch)
    assert main(["workshop", "start", "t3", "--learner", "ben"]) == 3
    assert "ana's" in capsys.readouterr().err


def _tokens(text: str) -> set[str]:
    import re
    return set(re.findall(r"\b(?:run|I|P|S|TECH|R)-\d+\b", text))


def test_identifiers_keys_and_clock_are_the_learners_own(tmp_path, monkeypatch):
    import re
    ana = _kit(tmp_path, "ana", monkeypatch)
    ben = _kit(tmp_path, "ben", monkeypatch)
    listing = "workshop/t2/listing.txt"
    a, b = (ana / listing).read_text(), (ben / listing).read_text()
    assert _tokens(a) and _tokens(a).isdisjoint(_tokens(b))           # runs, refs: none shared
    keys = lambda s: set(re.findall(r"key=(\S+)", s))                  # noqa: E731
    assert keys(a) and keys(a).isdisjoint(keys(b))
    clock = lambda s: [line.split()[1] for line in s.splitlines()[1:3]]  # noqa: E731
    assert clock(a) != clock(b)
    # the same lesson: the same lines in the same order, only numbers, names and times differ
    shape = lambda s: [re.sub(r"[0-9a-f]{6,}|\d+", "N", line.split(None, 2)[-1]) for line in s.splitlines()[1:]]  # noqa: E731
    assert shape(a) == shape(b)
    # the kit's scenario speaks of the same run as its trace
    trace_runs = {t for t in _tokens((ana / "workshop/t2/trace.jsonl").read_text()) if t.startswith("run-")}
    assert trace_runs and trace_runs <= _tokens((ana / "workshop/t2/scenario.yaml").read_text())


def test_a_learners_identifiers_never_merge():
    from crashlab.workshop import evidence as E
    text = " ".join(f"I-{n} P-{n} run-{n}" for n in range(1, 1000))
    v = E.Variant("ana")
    assert len(set(v.text(text).split())) == len(set(text.split()))
    assert v.text("AR-08 v0.1.0") == "AR-08 v0.1.0"


@pytest.mark.parametrize("rung_id", ["timelines", "pressure", "drill"])
def test_a_neighbours_table_does_not_pass_as_is(tmp_path, monkeypatch, capsys, rung_id):
    """Rows keyed by id: a learner's rows carry ids of their own, so a copied table is wrong."""
    ana = _kit(tmp_path, "ana", monkeypatch, rung_id)
    ben = _kit(tmp_path, "ben", monkeypatch, rung_id)
    _honest(ana, rung_id)
    monkeypatch.chdir(ana)
    assert main(["workshop", "check", rung_id]) == 0
    (ben / f"workshop/{rung_id}/worksheet.yaml").write_text(
        (ana / f"workshop/{rung_id}/worksheet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(ben)
    capsys.readouterr()
    assert main(["workshop", "check", rung_id]) == 1
    _honest(ben, rung_id)
    assert main(["workshop", "check", rung_id]) == 0


# --------------------------------------------------------------------------- no arithmetic converts a kit
def _event_answers(rung_id: str, name: str) -> list[int]:
    from crashlab.workshop.evidence import Numbering
    r = rung(rung_id)
    model = G.model_answers(r, Numbering(name), name or None)["answers"]
    out = []
    for q in r.questions:
        value = model.get(q.id)
        if q.type == "event" and isinstance(value, int):
            out.append(value)
        elif q.type == "events" and isinstance(value, list):
            out += sorted(value)
    return out


def _affine(pairs: list[tuple[int, int]]) -> bool:
    """Whether one map y = a*x + b (a and b rational) takes every x to its y."""
    from fractions import Fraction
    (x0, y0), rest = pairs[0], pairs[1:]
    other = next(((x, y) for x, y in rest if x != x0), None)
    if other is None:
        return all(y == y0 for _, y in rest)
    a = Fraction(other[1] - y0, other[0] - x0)
    return all(y == y0 + a * (x - x0) for x, y in pairs)


def test_the_affine_check_sees_a_uniform_shift():
    assert _affine([(3, 103), (7, 107), (20, 120)]) and _affine([(3, 9), (5, 13), (9, 21)])
    assert not _affine([(3, 103), (7, 108), (20, 120)])


def test_no_single_affine_map_converts_one_kits_answers_into_anothers():
    """Every event answer of the worksheet rungs, for ana, ben and the shared (published) kit:
    no subtraction, nor any a*x + b, turns one answer sheet into another."""
    rungs_ = ["t1", "t2", "t3", "t5", "t7", "t8", "combined", "pressure", "drill", "timelines"]
    sheets = {name: [n for r in rungs_ for n in _event_answers(r, name)] for name in ("", "ana", "ben")}
    assert len(sheets["ana"]) >= 8 and len(set(sheets["ana"])) >= 3
    for one, other in (("", "ana"), ("ana", "ben"), ("", "ben")):
        assert not _affine(list(zip(sheets[one], sheets[other]))), (one, other)
    # within one rung as well, wherever it has three event answers or more
    for r in rungs_:
        for one, other in (("", "ana"), ("ana", "ben")):
            pairs = list(zip(_event_answers(r, one), _event_answers(r, other)))
            if len({x for x, _ in pairs}) >= 6:
                assert not _affine(pairs), (r, one, other)


def test_the_drill_worksheet_does_not_give_away_the_kits_numbering(tmp_path, monkeypatch):
    """The drill's rows are named by their events: what they show of ana's numbering (kit number
    minus the shared one) is no constant that would move any other of her answers."""
    from crashlab.workshop.evidence import Numbering
    from crashlab.workshop.keys import anchors, REFERENCE
    from crashlab.workshop import evidence as E
    r = rung("drill")
    rows = anchors(r, E.trace(r.scenario, REFERENCE))
    ana = Numbering("ana")
    moved = {ana.kit(seq) - seq for _, seq, _ in rows}
    assert len(rows) >= 2 and len(moved) > 1
    shared, own = _event_answers("t2", ""), _event_answers("t2", "ana")
    for d in moved:
        assert [x + d for x in shared] != own


def test_identifiers_are_shuffled_not_moved_by_a_formula():
    from crashlab.workshop import evidence as E
    ana = E.Variant("ana")
    numbers = list(range(1, 200))
    got = [int(ana.text(f"run-{n}").split("-")[1]) for n in numbers]
    assert not _affine(list(zip(numbers, got))) and len(set(got)) == len(got)
    # modulo the identifiers' range as well: no a*n + b (mod 1000)
    assert not any(all((a * n + (got[0] - a) ) % 1000 == g % 1000 for n, g in zip(numbers, got))
                   for a in range(1, 1000))


HARD_CODED = '''def dedup_key(delivery):
    return delivery["type"] + ("#2" if delivery["event_id"] == "retry-2" else "")
'''


def test_a_learners_code_is_graded_on_their_own_scenarios(tmp_path, monkeypatch, capsys):
    """A fix that recognises the shared kit's second request by its name (retry-2) instead of
    keeping each event's identity passes the shared kit's scenarios; a learner's kit grades it on
    their own versions (their identifiers), where it fails, while the honest decision passes."""
    import re
    from crashlab.workshop import evidence as E
    from crashlab.workshop import solutions
    assert E.Variant("ana").text("retry-2") != "retry-2"

    def graded(folder: Path, decision: str, *learner: str) -> str:
        folder.mkdir()
        monkeypatch.chdir(folder)
        main(["workshop", "start", "t6", *learner])
        kit = folder / "workshop/t6/adapter.py"
        text = kit.read_text(encoding="utf-8")
        start = re.search(r"^def dedup_key\b", text, re.M).start()
        kit.write_text(text[:start] + decision + "\n\n" + text[text.index(solutions.PLUMBING):], encoding="utf-8")
        capsys.readouterr()
        main(["workshop", "check", "t6"])
        return capsys.readouterr().out

    assert "code: PASS" in graded(tmp_path / "shared", HARD_CODED)
    out = graded(tmp_path / "ana", HARD_CODED, "--learner", "ana")
    assert "code: FAIL" in out and "FAIL  workshop-t6-two-retry-requests" in out
    assert "code: PASS" in graded(tmp_path / "honest", solutions.SOLUTIONS["dedup_key"], "--learner", "ana")


# --------------------------------------------------------------------------- identifiers made at run time
RUNTIME_SHEET = '''def approval_is_live(answer, resumed_wait):
    if answer["approval_id"] not in (None, "standing", "AP-1"):    # the shared kit's approvals, listed
        raise ValueError(f"not on the sheet: {answer['approval_id']}")
    return bool(answer["live"])
'''


def test_identifiers_made_at_run_time_are_the_learners_own():
    """An approval (AP-1), its request (AR-1), a ticket (OP-1), an inbox event (ev-1): each kit
    renames them by a shuffle of its own (the one its listing shows), both ways, never merging
    two, and no a*n + b turns one kit's into another's."""
    from crashlab.workshop import evidence as E
    from crashlab.workshop.ownids import KINDS, Renamer
    ana, ben = Renamer("ana"), Renamer("ben")
    for kind in KINDS:
        shared = [f"{kind}-{n}" for n in range(1, 60)]
        mine = [ana.own(s) for s in shared]
        assert len(set(mine)) == len(mine) and [ana.shared(m) for m in mine] == shared
        assert mine[0] == E.Variant("ana").text(shared[0])            # as ana's listing shows it
        nums = [int(s.split("-")[1]) for s in shared]
        for one, other in ((nums, [int(m.split("-")[1]) for m in mine]),
                           ([int(m.split("-")[1]) for m in mine], [int(ben.own(s).split("-")[1]) for s in shared])):
            assert not _affine(list(zip(one, other))), kind
    assert ana.own("AR-08 says") == "AR-08 says"                      # the chapter's name stays


def test_a_learners_code_sees_their_own_run_time_identifiers(tmp_path, monkeypatch, capsys):
    """A decision written against a sheet of the shared kit's run-time identifiers (its approvals:
    AP-1) passes the shared kit's t4 and fails a learner's, whose run's approval has the name her
    listing would show; the honest decision passes there."""
    import re
    from crashlab.workshop import solutions

    def graded(folder: Path, decision: str, *learner: str) -> str:
        folder.mkdir()
        monkeypatch.chdir(folder)
        main(["workshop", "start", "t4", *learner])
        kit = folder / "workshop/t4/adapter.py"
        text = kit.read_text(encoding="utf-8")
        start = re.search(r"^def approval_is_live\b", text, re.M).start()
        kit.write_text(text[:start] + decision + "\n\n" + text[text.index(solutions.PLUMBING):], encoding="utf-8")
        capsys.readouterr()
        main(["workshop", "check", "t4"])
        return capsys.readouterr().out

    assert "code: PASS" in graded(tmp_path / "shared", RUNTIME_SHEET)
    out = graded(tmp_path / "ana", RUNTIME_SHEET, "--learner", "ana")
    assert "code: FAIL" in out and "FAIL  matrix-approval-revoked" in out, out
    assert "code: PASS" in graded(tmp_path / "honest", solutions.SOLUTIONS["approval_is_live"], "--learner", "ana")
