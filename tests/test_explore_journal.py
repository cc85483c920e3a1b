"""``crashlab explore --resume`` with a damaged journal: a usage error naming the file and what to
do (exit 3), never an internal error; damaged chunk lines are explored again."""
from __future__ import annotations

import json

import pytest

from crashlab.cli import main
from crashlab.vocab.errors import UsageError
from crashlab.run.explore import read_journal

T1 = "t1-crash-before-dispatch"
HEADER = {"journal": 1, "adapter": "crashlab.reference_impl:ReferenceAdapter", "seed": 0, "examples": 2,
          "bases": [T1], "shard": None}
GOOD = json.dumps(HEADER, sort_keys=True)


@pytest.mark.parametrize("content, words", [
    (b"", "has no header"),
    (b"\n\n", "has no header"),
    (GOOD[:40].encode(), "header is damaged (truncated or not JSON"),
    (b"not json at all\n", "header is damaged (truncated or not JSON"),
    (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    (b"[1, 2]\n", "not a crashlab explore journal header"),
    (b'{"journal": 2}\n', "not a crashlab explore journal header"),
    (b'{"journal": 1, "seed": 0}\n', "header is damaged (it lacks adapter"),
    (json.dumps({**HEADER, "extra": 1}).encode(), "has an unknown field extra"),
    (json.dumps({**HEADER, "seed": 7}).encode(), "another exploration (seed: the journal has 7, this run 0)"),
])
def test_a_damaged_journal_header_is_a_usage_error_naming_the_file(tmp_path, capsys, content, words):
    findings = tmp_path / "f"
    findings.mkdir()
    journal = findings / "explore.journal.jsonl"
    journal.write_bytes(content)
    code = main(["explore", "--examples", "2", "--base", T1, "--findings", str(findings), "--resume"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert str(journal) in err and words in err and "remove it" in err
    assert "Traceback" not in err and "internal error" not in err
    assert journal.read_bytes() == content  # nothing overwritten


def test_damaged_chunk_lines_are_explored_again(tmp_path):
    journal = tmp_path / "explore.journal.jsonl"
    done = {"id": f"{T1}#0", "base": T1, "tried": 2, "failure": None}
    lines = [GOOD, "not json", json.dumps([1]), json.dumps({"id": [1]}), json.dumps({**done, "tried": "2"}),
             json.dumps({**done, "failure": "x"}), json.dumps({**done, "id": "elsewhere#0"}),
             json.dumps(done), '{"id": "t1-cr']
    journal.write_text("\n".join(lines))
    assert read_journal(journal, HEADER, {f"{T1}#0"}) == {f"{T1}#0": done}
    journal.write_text("\n".join(lines[:-2]))
    assert read_journal(journal, HEADER, {f"{T1}#0"}) == {}


def test_an_unreadable_journal_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read the journal"):
        read_journal(tmp_path, HEADER, set())   # a folder where the file should be
