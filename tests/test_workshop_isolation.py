"""A kit's code runs where any adapter runs: in supervised worker processes, never inside
crashlab's own (check and the roster alike); what it does there cannot change the verdict."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import solutions


@pytest.fixture(autouse=True)
def unread(monkeypatch):
    """The reader of a kit's decision (provenance.py) refuses code that imports os or opens files;
    it is not what keeps hostile code away from crashlab and the facilitator: isolation is. These
    tests switch the reader off to show that the code that gets past it still runs isolated."""
    from crashlab.workshop import provenance
    monkeypatch.setattr(provenance, "check_decision", lambda *a: None)


@pytest.fixture
def kit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["workshop", "start", "t3"]) == 0
    return tmp_path / "workshop" / "t3"


def _decide(kit: Path, body: str) -> None:
    text = (kit / "adapter.py").read_text(encoding="utf-8")
    start = re.search(r"^def replay_disposition\b", text, re.M).start()
    end = text.index(solutions.PLUMBING)
    (kit / "adapter.py").write_text(text[:start] + body + "\n\n" + text[end:], encoding="utf-8")


def test_the_learners_decision_runs_in_a_worker_process(kit, capsys):
    solved = solutions.SOLUTIONS["replay_disposition"]
    pid_file = kit / "pid.txt"
    _decide(kit, solved.replace('"""\n', f'"""\n    open({str(pid_file)!r}, "a").write(str(__import__("os").getpid()) + "\\n")\n', 1))
    assert main(["workshop", "check", "t3"]) == 1          # the worksheet is blank; the code is graded
    assert "code: PASS" in capsys.readouterr().out
    pids = {int(p) for p in pid_file.read_text().split()}
    assert pids and os.getpid() not in pids


def test_a_decision_that_ends_its_process_cannot_end_crashlab(kit, capsys):
    _decide(kit, "def replay_disposition(recorded_state, recorded_effects):\n    import os\n    os._exit(0)\n")
    assert main(["workshop", "check", "t3"]) == 1
    out = capsys.readouterr().out
    assert "code: FAIL" in out
    main(["workshop", "class", str(kit.parent.parent)])
    assert "stuck on t3 (code)" in capsys.readouterr().out


def test_a_kit_adapter_that_does_not_parse_names_its_line(kit, capsys):
    (kit / "adapter.py").write_text((kit / "adapter.py").read_text().replace("def replay_disposition(", "def replay_disposition((", 1))
    assert main(["workshop", "check", "t3"]) == 3
    assert re.search(r"adapter\.py:\d+: not valid Python", capsys.readouterr().err)


def _namespaces() -> bool:
    from support import default_isolation
    return default_isolation().mode == "namespaces"


@pytest.mark.skipif(not _namespaces(), reason="bubblewrap cannot make namespaces here (apt-get install bubblewrap)")
def test_the_roster_grades_each_learners_code_in_namespaces_so_it_cannot_write_a_neighbours_folder(tmp_path, monkeypatch,
                                                                                                     capsys):
    """A learner's decision that writes into a neighbour's folder when the facilitator's `class` grades it:
    under the default isolation nothing is written (their code runs over the wire in namespaces) and it
    is still graded; with --isolation process (the facilitator's own choice) the write happens."""
    monkeypatch.delenv("CRASHLAB_ISOLATION", raising=False)   # the default, auto
    room = tmp_path / "room"
    for name in ("ana", "ben"):
        (room / name).mkdir(parents=True)
        monkeypatch.chdir(room / name)
        assert main(["workshop", "start", "t3"]) == 0
    planted = room / "ben" / "planted.txt"
    solved = solutions.SOLUTIONS["replay_disposition"]
    _decide(room / "ana" / "workshop" / "t3",
            solved.replace('"""\n', f'"""\n    try:\n        open({str(planted)!r}, "a").write("x")\n'
                                    f'    except OSError:\n        pass\n', 1))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["workshop", "class", str(room)]) == 0
    assert not planted.exists()
    assert main(["workshop", "class", str(room), "--isolation", "process"]) == 0
    assert planted.exists()
