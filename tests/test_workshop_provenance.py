"""The graded code is the learner's: a kit's decision, or an --adapter's Python files, that reach
the reference design or the model answer by a split, encoded or computed name are refused. Each
shortcut is first shown to pass the code rung with the reader switched off (it is a real one)."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import provenance, solutions

SOLVED = solutions.SOLUTIONS["replay_disposition"]
KIT_SHORTCUTS = {
    "split": 'exec(__import__("crashlab.work" + "shop.solutions", fromlist=["S"]).SOLUTIONS["replay_disposition"])\n',
    "encoded": "import base64\nexec(base64.b64decode(%r).decode())\n" % base64.b64encode(SOLVED.encode()).decode(),
    "getattr": ('_c = __import__("crash" + "lab.work" + "shop.solutions")\n'
                'exec(getattr(getattr(getattr(_c, "work" + "shop"), "solu" + "tions"), "SOLU" + "TIONS")'
                '["replay_disposition"])\n'),
    "subclasses": ('def replay_disposition(recorded_state, recorded_effects):\n'
                   '    return [c for c in ().__class__.__base__.__subclasses__()][0] and recorded_state\n'),
}


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _with_decision(kit: Path, text: str) -> None:
    src = (kit / "adapter.py").read_text(encoding="utf-8")
    start = re.search(r"^def replay_disposition\b", src, re.M).start()
    (kit / "adapter.py").write_text(text + "\n\n" + src[src.index(solutions.PLUMBING):] if text.startswith("def ")
                                    else src[:start] + text + "\n\n" + src[src.index(solutions.PLUMBING):],
                                    encoding="utf-8")


@pytest.mark.parametrize("how", sorted(KIT_SHORTCUTS))
def test_a_decision_reached_by_a_hidden_name_is_refused(room, capsys, monkeypatch, how):
    assert main(["workshop", "start", "t3"]) == 0
    kit = Path("workshop/t3")
    _with_decision(kit, KIT_SHORTCUTS[how])
    if how != "subclasses":          # the shortcut is real: with the reader off, the code rung passes
        with monkeypatch.context() as m:
            m.setattr(provenance, "check_decision", lambda *a: None)
            capsys.readouterr()
            main(["workshop", "check", "t3"])
            assert "code: PASS" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["workshop", "check", "t3"]) == 3
    err = capsys.readouterr().err
    assert "adapter.py:" in err and "not yours to submit" in err


def test_an_honest_decision_with_a_pure_import_passes(room, capsys):
    main(["workshop", "start", "t3"])
    _with_decision(Path("workshop/t3"), "import re\n\n" + SOLVED)
    capsys.readouterr()
    main(["workshop", "check", "t3"])
    assert "code: PASS" in capsys.readouterr().out


REEXPORT = "from crashlab.reference_impl import ReferenceAdapter as Adapter\n"
HIDDEN = 'import importlib\nAdapter = importlib.import_module("crashlab.refer" + "ence_impl").ReferenceAdapter\n'
WIRE = ('import sys\nfrom crashlab.run.wire import serve\n'
        'sys.exit(serve("crashlab.refer" + "ence_impl:ReferenceAdapter"))\n')


@pytest.mark.parametrize("files,spec", [
    ({"mine.py": REEXPORT}, "mine:Adapter"),
    ({"mine.py": REEXPORT}, "wire:mine:Adapter"),
    ({"mine.py": "from helper import Adapter\n", "helper.py": HIDDEN}, "mine:Adapter"),
    ({"pkg/__init__.py": "", "pkg/mine.py": "from .deep import Adapter\n", "pkg/deep.py": REEXPORT}, "pkg.mine:Adapter"),
    ({"serve_it.py": WIRE}, "exec:python serve_it.py"),
    ({"serve_it.py": 'import sys\nfrom crashlab.run.wire import serve\nsys.exit(serve("mine:Adapter"))\n',
      "mine.py": REEXPORT}, "exec:python serve_it.py"),
    ({}, "crashlab.reference_impl.facts:ReferenceAdapter"),
], ids=["module", "wire", "through-a-helper", "package-relative", "exec-computed", "exec-literal", "crashlab-module"])
def test_an_adapter_that_re_exports_the_reference_is_refused(room, capsys, files, spec):
    main(["workshop", "start", "t1"])
    for name, text in files.items():
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["workshop", "check", "t1", "--adapter", spec]) == 3
    assert "not yours to submit" in capsys.readouterr().err


def test_the_re_export_through_a_helper_was_a_real_shortcut(room, capsys, monkeypatch):
    main(["workshop", "start", "t1"])
    Path("mine.py").write_text("from helper import Adapter\n", encoding="utf-8")
    Path("helper.py").write_text(HIDDEN, encoding="utf-8")
    monkeypatch.setattr(provenance, "check_spec", lambda *a: None)
    capsys.readouterr()
    main(["workshop", "check", "t1", "--adapter", "mine:Adapter"])
    assert "code: PASS" in capsys.readouterr().out


def test_a_learners_own_adapter_file_is_graded(room, capsys):
    """The kit's adapter solved and saved under another name (the plumbing kept) is read as a kit's."""
    kit = Path("workshop/t1")
    main(["workshop", "start", "t1"])
    Path("mine.py").write_text(solutions.solved((kit / "adapter.py").read_text(encoding="utf-8"), "request_key"),
                               encoding="utf-8")
    capsys.readouterr()
    main(["workshop", "check", "t1", "--adapter", "mine:Adapter"])
    assert "code: PASS" in capsys.readouterr().out
