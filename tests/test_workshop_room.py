"""A room that holds when one learner's file does not: a corrupt progress file is that learner's
row on the roster (naming the file and what is wrong), never the whole room's exit 3; a save
that fails leaves the previous progress file whole (written beside it, then renamed)."""
from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import pytest

from crashlab.cli import main
from test_workshop_shortcuts import _learner


@pytest.mark.parametrize("text,says", [
    ("{not json", "unreadable progress file"),
    ('{"rungs": []}', "not a crashlab workshop progress file"),
    ('{"rungs": {"t1": "passed"}}', "rungs.t1: not a rung's record"),
    ('{"rungs": {"t1": {"kit": "workshop/t1", "attempts": "many"}}}', "rungs.t1.attempts"),
], ids=["json", "shape", "entry", "count"])
def test_one_corrupt_progress_file_is_one_row_not_the_rooms_exit(tmp_path, monkeypatch, capsys, text, says):
    _learner(tmp_path, "ana", monkeypatch)
    main(["workshop", "start", "t1"])
    main(["workshop", "check", "t1"])
    ben = _learner(tmp_path, "ben", monkeypatch)
    (ben / ".crashlab-workshop.json").write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["workshop", "class", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "ana" in rows and "x" in rows["ana"]          # the others are shown
    assert "?" in rows["ben"]
    note = next(line for line in out.splitlines() if line.startswith("ben:"))
    assert "not graded" in note and str(ben / ".crashlab-workshop.json") in note and says in note


def test_a_failed_save_leaves_the_progress_file_whole(tmp_path, monkeypatch, capsys):
    folder = _learner(tmp_path, "cat", monkeypatch)
    main(["workshop", "start", "t1"])
    main(["workshop", "check", "t1"])
    before = (folder / ".crashlab-workshop.json").read_text(encoding="utf-8")
    assert json.loads(before)["rungs"]["t1"]["attempts"] == 1
    real_open = io.open

    class Full:
        """A file on a disk that fills up at the first write of a progress record."""
        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            if '"rungs"' in str(data):
                raise OSError(errno.ENOSPC, "No space left on device")
            return self._fh.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

        def __getattr__(self, name):
            return getattr(self._fh, name)

    def full_disk(file, mode="r", *a, **k):
        fh = real_open(file, mode, *a, **k)
        return Full(fh) if "w" in mode else fh

    monkeypatch.setattr(io, "open", full_disk)
    capsys.readouterr()
    code = main(["workshop", "check", "t1"])
    monkeypatch.setattr(io, "open", real_open)
    assert code != 0
    assert "No space left on device" in capsys.readouterr().err
    assert (folder / ".crashlab-workshop.json").read_text(encoding="utf-8") == before
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []
