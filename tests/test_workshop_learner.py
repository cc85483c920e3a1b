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
    model = G.model_answers(rung(rung_id), _offset(folder))
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
