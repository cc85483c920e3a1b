"""The workshop's machine time per rung: prints figures, asserts nothing.

    python benchmarks/workshop_bench.py

For each rung, in a fresh learner folder: the wall time of ``workshop start`` and of a
``workshop check`` of the model answer (and, on a code rung, the corrected decision: every
code scenario is run), cold (first in this process) and warm (again). A facilitator's plan
gives people minutes per rung (``crashlab workshop plan``); this is what the tool adds to them.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crashlab.cli import main  # noqa: E402
from crashlab.workshop import grade as G  # noqa: E402
from crashlab.workshop import handoff, solutions  # noqa: E402
from crashlab.workshop.ladder import rung, rungs  # noqa: E402


def _quiet(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


def one(rung_id: str) -> tuple[float, float, float, bool]:
    r = rung(rung_id)
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        t0 = time.perf_counter()
        _quiet(["workshop", "handoff", "--seed", "1"] if rung_id == "handoff" else ["workshop", "start", rung_id])
        t1 = time.perf_counter()
        kit = Path("workshop") / rung_id
        model = G.model_answers(r)
        if rung_id == "handoff":
            (kit / "plan.yaml").write_text(yaml.safe_dump(handoff.model_plan(1)))
        elif r.questions or r.kind == "table":
            doc = {"rung": rung_id, "answers": model["answers"], **({"table": model["table"]} if model["table"] else {})}
            (kit / "worksheet.yaml").write_text(yaml.safe_dump(doc))
        if r.kind == "designs":
            from crashlab.workshop import weak
            (kit / weak.OPTIONS).write_text(yaml.safe_dump({"options": [dict(o) for o in weak.MODEL_OPTIONS]}))
        if r.starter:
            (kit / "adapter.py").write_text(solutions.solved((kit / "adapter.py").read_text(), r.starter))
        code = _quiet(["workshop", "check", rung_id])
        t2 = time.perf_counter()
        _quiet(["workshop", "check", rung_id])
        t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, code == 0


def main_() -> None:
    here = os.getcwd()
    print(f"{'rung':<13} {'start s':>8} {'check s':>8} {'again s':>8}  model answer")
    try:
        for r in rungs():
            start, check, again, passed = one(r.id)
            print(f"{r.id:<13} {start:>8.2f} {check:>8.2f} {again:>8.2f}  {'passes' if passed else 'DOES NOT PASS'}")
    finally:
        os.chdir(here)


if __name__ == "__main__":
    main_()
