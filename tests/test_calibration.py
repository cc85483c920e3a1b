"""Calibration on a design crashlab's authors did not write: calibration/stranger/ is an adapter
written from README.md and docs/ alone, with its own free choices (lease, checkpoint cadence, key
format, backoff, operator action names, reading order). Its whole-library score is the fairness
evidence: a correct design the chapter permits scores 20/20 with every point exercised."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent / "calibration" / "stranger"


@pytest.mark.parametrize("design", ["StrangerAdapter", "StrangerCommonNames"])
def test_a_design_written_from_the_docs_alone_scores_20_of_20(tmp_path, design):
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "crashlab", "conformance", "--adapter", f"stranger_adapter:{design}",
                           "-q", "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("20/20 pass"), proc.stdout
