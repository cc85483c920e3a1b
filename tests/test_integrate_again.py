"""``crashlab integrate --again N``: a scenario whose card is inconclusive (its premise did not happen
under real time, so nothing was tested) is run again, at most N more times; a pass or a fail is final,
and the output and the JSON say which attempt the card is from and why the earlier ones did not count."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from crashlab.integrate.run import until_conclusive
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent


def _outcome(verdict: str, reason: str = "") -> SimpleNamespace:
    return SimpleNamespace(card=SimpleNamespace(verdict=verdict, reasons=[reason] if reason else []))


def _script(*verdicts: str):
    left = [_outcome(v, f"premise {n} missed" if v == "inconclusive" else "") for n, v in enumerate(verdicts, 1)]
    calls = []

    def once():
        calls.append(1)
        return left.pop(0)
    return once, calls


@pytest.mark.parametrize("verdicts, again, final, runs", [
    (("inconclusive", "pass"), 2, "pass", 2),
    (("inconclusive", "fail"), 2, "fail", 2),
    (("fail", "pass"), 2, "fail", 1),                 # a fail is final: never run until it passes
    (("pass", "fail"), 2, "pass", 1),
    (("inconclusive",) * 4, 2, "inconclusive", 3),   # at most N more
    (("inconclusive", "pass"), 0, "inconclusive", 1),
])
def test_only_an_inconclusive_card_is_run_again_and_at_most_n_more_times(verdicts, again, final, runs):
    once, calls = _script(*verdicts)
    outcome, earlier = until_conclusive(once, again)
    assert outcome.card.verdict == final and len(calls) == runs
    assert earlier == [f"premise {n} missed" for n in range(1, runs)]


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")
def test_a_scenario_whose_first_attempt_missed_its_crash_is_run_again_and_says_so(out, tmp_path):
    """The first worker of the first attempt ignores its failpoint (the crash the scenario tests never
    happens: inconclusive); every later worker honours it: the second attempt is the card, a pass."""
    marker = tmp_path / "first-attempt-done"
    honest = careful(out)
    worker = (f"sh -c {shlex.quote(f'if [ -e {marker} ]; then exec {honest}; else touch {marker}; exec env -u CRASHLAB_FAILPOINT {honest}; fi')}")
    report = tmp_path / "cards.json"
    proc = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "crash-2-after-prepare-before-send",
                           "--worker", worker, "--out", str(out / "again"), "--json", str(report),
                           "--isolation", "process"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "attempt 1 of 2 was inconclusive (" in proc.stdout and "never fired" in proc.stdout, proc.stdout
    [card] = json.loads(report.read_text())["integration"]
    assert card["attempts"] == 2 and card["verdict"] == "pass"
    assert "never fired" in card["inconclusive_attempts"][0]
    once = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "crash-2-after-prepare-before-send",
                           "--worker", f"env -u CRASHLAB_FAILPOINT {honest}", "--out", str(out / "once"),
                           "--again", "0", "--isolation", "process"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert once.returncode == 2 and "attempt 1" not in once.stdout, once.stdout


def test_again_out_of_range_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "t1-crash-before-dispatch", "--worker", "true",
                           "--again", "-1", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 3 and "--again must be 0 to 10, got -1" in proc.stderr
