"""Correct work accepted: a reveal after an honest pass keeps the pass on the roster (which tells
it apart from a reveal before any pass), and t7 accepts every listing line that delivers the late
callback, the worker's "inbox delivered callback" as well as the inbox's "receives"."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from crashlab.cli import main
from crashlab.workshop import grade as G
from crashlab.workshop.ladder import rung
from test_workshop_shortcuts import _learner, _row


def _note(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(name + ":"))


def _answer_combined() -> None:
    model = G.model_answers(rung("combined"))
    Path("workshop/combined/worksheet.yaml").write_text(
        yaml.safe_dump({"rung": "combined", "answers": model["answers"]}), encoding="utf-8")


def test_a_reveal_after_an_honest_pass_keeps_the_pass(tmp_path, monkeypatch, capsys):
    _learner(tmp_path, "ana", monkeypatch)              # passes, then looks at the model answer
    main(["workshop", "start", "combined"])
    _answer_combined()
    assert main(["workshop", "check", "combined"]) == 0
    assert main(["workshop", "reveal", "combined"]) == 0
    _learner(tmp_path, "ben", monkeypatch)              # looks at the model answer, then passes
    main(["workshop", "start", "combined"])
    main(["workshop", "check", "combined"])
    main(["workshop", "reveal", "combined"])
    _answer_combined()
    assert main(["workshop", "check", "combined"]) == 0
    capsys.readouterr()
    main(["workshop", "class", str(tmp_path)])
    out = capsys.readouterr().out
    assert "P" in _row(out, "ana") and " 1/" in _row(out, "ana")
    assert "revealed after passing combined" in _note(out, "ana") and "revealed none" in _note(out, "ana")
    assert "R" in _row(out, "ben") and " 0/" in _row(out, "ben")
    assert "revealed combined (before a pass)" in _note(out, "ben") and "after passing" not in _note(out, "ben")


def test_t7_accepts_the_line_that_says_inbox_delivered_callback(tmp_path, monkeypatch, capsys):
    _learner(tmp_path, "cat", monkeypatch)
    main(["workshop", "start", "t7"])
    listing = Path("workshop/t7/listing.txt").read_text(encoding="utf-8")
    lines = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+)\s.*inbox delivered callback", listing, re.M)]
    assert lines
    answers = G.model_answers(rung("t7"))["answers"]
    for seq in lines:
        Path("workshop/t7/worksheet.yaml").write_text(
            yaml.safe_dump({"rung": "t7", "answers": {**answers, "callback": seq}}), encoding="utf-8")
        capsys.readouterr()
        main(["workshop", "check", "t7"])
        out = capsys.readouterr().out
        assert "wrong  callback" not in out and re.search(r"worksheet: 5 right", out), out
    # a line that does not deliver it is still wrong
    Path("workshop/t7/worksheet.yaml").write_text(
        yaml.safe_dump({"rung": "t7", "answers": {**answers, "callback": lines[0] + 2}}), encoding="utf-8")
    main(["workshop", "check", "t7"])
    assert "wrong  callback" in capsys.readouterr().out
