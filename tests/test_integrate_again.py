"""``crashlab integrate --again N``: a scenario whose card is inconclusive (its premise did not happen
under real time, so nothing was tested) is run again, at most N more times, each further attempt at a time
scale ``--again-slower`` times lower; a pass or a fail is final, and the output, the JSON, the trace's header
and its repro line say which attempt the card is from, the time scale each attempt ran at and why the
earlier ones did not count."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from crashlab.integrate.run import attempt_scale, until_conclusive
from crashlab.run.repro import repro_line
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent


def _outcome(verdict: str, reason: str = "") -> SimpleNamespace:
    return SimpleNamespace(card=SimpleNamespace(verdict=verdict, reasons=[reason] if reason else []))


def _script(*verdicts: str):
    left = [_outcome(v, f"premise {n} missed" if v == "inconclusive" else "") for n, v in enumerate(verdicts, 1)]
    calls = []

    def once(scale):
        calls.append(scale)
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
    outcome, earlier, scale = until_conclusive(once, again)
    assert outcome.card.verdict == final and len(calls) == runs
    assert [a.why for a in earlier] == [f"premise {n} missed" for n in range(1, runs)]
    assert calls == [100.0] * runs and scale == 100.0      # slower=1 (the function's default) keeps the scale


@pytest.mark.parametrize("verdicts, slower, scales", [
    (("inconclusive", "inconclusive", "pass"), 5, [100, 20, 4]),
    (("inconclusive", "fail"), 5, [100, 20]),            # the slower attempt's fail is the card
    (("pass",), 5, [100]),                              # a pass is never run again, at any scale
    (("fail",), 5, [100]),
    (("inconclusive",) * 3, 1, [100, 100, 100]),         # 1 keeps the scale
    (("inconclusive",) * 3, 10, [100, 10, 1]),
])
def test_each_further_attempt_runs_slower(verdicts, slower, scales):
    once, calls = _script(*verdicts)
    outcome, earlier, scale = until_conclusive(once, 2, time_scale=100, slower=slower)
    assert calls == scales and scale == scales[-1] and outcome.card.verdict == verdicts[len(scales) - 1]
    assert [a.time_scale for a in earlier] == scales[:-1]


def test_a_slower_attempt_never_goes_below_real_time_unless_asked_to():
    assert [attempt_scale(100, 5, n) for n in (1, 2, 3, 4)] == [100, 20, 4, 1]
    assert attempt_scale(50, 100, 2) == 1 and attempt_scale(0.5, 5, 3) == 0.5 and attempt_scale(30, 2, 2) == 15


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
    assert "attempt 1 of 2, at time scale 100, was inconclusive (" in proc.stdout and "never fired" in proc.stdout
    assert "this card is attempt 2's, at time scale 20" in proc.stdout, proc.stdout
    [card] = json.loads(report.read_text())["integration"]
    assert card["attempts"] == 2 and card["verdict"] == "pass" and card["attempt_time_scales"] == [100, 20]
    assert "never fired" in card["inconclusive_attempts"][0]
    once = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "crash-2-after-prepare-before-send",
                           "--worker", f"env -u CRASHLAB_FAILPOINT {honest}", "--out", str(out / "once"),
                           "--again", "0", "--isolation", "process"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert once.returncode == 2 and "attempt 1" not in once.stdout, once.stdout


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")
def test_a_worker_too_slow_for_the_scenarios_window_passes_on_a_slower_attempt(out, tmp_path):
    """matrix-duplicate-callback's lookups fail until 10:01:30 (90 s of scenario time): a worker that sleeps
    0.6 s before it starts (twice: the first worker is killed after its send) first looks up after that
    window at time scale 100, so the fault meets no request and the card is inconclusive; ten times slower
    (a 9 s window) it looks up inside the window and the card is a pass. The card, the JSON, the trace's
    header and its repro line say the attempt ran at time scale 10, with its limits ten times longer."""
    slow = f"sh -c {shlex.quote(f'sleep 0.6; exec {careful(out)}')}"
    report = tmp_path / "cards.json"
    args = [sys.executable, "-m", "crashlab", "integrate", "matrix-duplicate-callback", "--worker", slow,
            "--isolation", "process", "--json", str(report)]
    proc = subprocess.run([*args, "--out", str(out / "slower"), "--again", "1", "--again-slower", "10"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "attempt 1 of 2, at time scale 100, was inconclusive (" in proc.stdout, proc.stdout
    assert "reservation.lookup did not happen" in proc.stdout, proc.stdout
    [card] = json.loads(report.read_text())["integration"]
    assert card["verdict"] == "pass" and card["attempt_time_scales"] == [100, 10] and card["time_scale"] == 10
    head = json.loads(Path(card["trace"]).read_text().splitlines()[0])
    assert head["integration"]["time_scale"] == 10 and head["integration"]["wall_limit_s"] == 300
    assert "--time-scale 10 --wall-limit 300 --handover-wait 150" in repro_line(head) == card["repro"]
    # without the slower attempt, the same worker is inconclusive on every attempt: the scale is what changed
    same = subprocess.run([*args, "--out", str(out / "same"), "--again", "1", "--again-slower", "1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert same.returncode == 2 and "attempt 1 of 2, at time scale 100, was inconclusive" in same.stdout, same.stdout
    assert json.loads(report.read_text())["integration"][0]["attempt_time_scales"] == [100, 100]


@pytest.mark.parametrize("option, value, message", [
    ("--again", "-1", "--again must be 0 to 10, got -1"),
    ("--again-slower", "0.5", "--again-slower must be 1 to 100 (how many times slower each further attempt runs; 1 "
                              "keeps the time scale), got 0.5"),
    ("--again-slower", "101", "--again-slower must be 1 to 100"),
])
def test_again_out_of_range_is_a_usage_error(tmp_path, option, value, message):
    proc = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "t1-crash-before-dispatch", "--worker", "true",
                           option, value, "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 3 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
