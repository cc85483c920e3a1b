"""worker_clocks: a real worker's wall clock offset or drifting under libfaketime (docs/integration.md,
"A worker's clock"). The entry's errors name the file, line and field; the skew reaches the worker's
process and not crashlab's (nor bubblewrap's); a scenario that needs libfaketime where it is missing is
refused naming the install command; and a worker that judges its lease by its own slow clock writes
after its successor (OWN-03, TERM-01) where the careful worker, fenced by the store, passes (the
mutant and the careful worker on the scenario: tests/test_integrate_mutants.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from crashlab.integrate import clocks
from crashlab.integrate.run import integrate
from crashlab.scenario.loader import from_dict, load_file, load_text
from crashlab.vocab.errors import InvalidScenario, UsageError
from crashlab.world.trace import read_jsonl
from runtime_support import assert_only_loopback, careful, hook_network, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent
SLOW = ROOT / "examples" / "integration" / "scenarios" / "slow-clock-past-lease.yaml"
PAUSED_PAST_LEASE = ROOT / "examples" / "integration" / "scenarios" / "paused-past-lease.yaml"
needs_faketime = pytest.mark.skipif(clocks.library() is None or sys.platform != "linux",
                                    reason=f"libfaketime is not installed ({clocks.INSTALL}), or not Linux")

HEAD = """\
id: clocks
title: a worker's clock
runs:
  - id: run-1
    intent: {tenant: T-1, incident: I-1}
"""


def _error(entry: str) -> str:
    with pytest.raises(InvalidScenario) as info:
        load_text(HEAD + "worker_clocks:\n  - " + entry + "\n", file="clock.yaml")
    return str(info.value)


@pytest.mark.parametrize("entry, words", [
    ("{worker: 1, rates: 0.1}", ["clock.yaml:7", "worker_clocks[0].rates", "did you mean 'rate'"]),
    ("{rate: 0.1}", ["clock.yaml:7", "worker_clocks[0].worker", "required field is missing"]),
    ("{worker: 0, rate: 0.1}", ["worker_clocks[0].worker"]),
    ("{worker: 1, rate: 0}", ["worker_clocks[0].rate", "between 0.001 and 1000"]),
    ("{worker: 1, rate: fast}", ["worker_clocks[0].rate", "expected a number like 0.1"]),
    ("{worker: 1, offset: 2 minutes}", ["worker_clocks[0].offset", "signed duration like -2m"]),
    ("{worker: 1, run: run-9, rate: 0.1}", ["worker_clocks[0].run", "no run 'run-9'", "run-1"]),
    ("{worker: 1}", ["worker_clocks[0]", "changes nothing", "give an offset or a rate"]),
    ("{worker: 1, offset: 0, rate: 1}", ["changes nothing"]),
])
def test_a_bad_worker_clock_is_an_error_naming_file_line_field_and_what_to_do(entry, words):
    message = _error(entry)
    for word in words:
        assert word in message, message


def test_a_worker_given_two_clocks_is_refused_naming_the_first_entry():
    message = _error("{worker: 1, rate: 0.1}\n  - {run: run-1, worker: 1, offset: -2m}")
    assert "worker_clocks[1].worker" in message and "already has a clock" in message and "line 7" in message


def test_a_worker_clock_reads_signed_offsets_and_rates_and_says_them_as_faketime_does():
    sc = load_text(HEAD + "worker_clocks:\n  - {worker: 1, offset: -2m, rate: 0.5}\n"
                   "  - {run: run-1, worker: 2, offset: +90s}\n  - {worker: 3, rate: 2}\n")
    first, second, third = sc.worker_clocks
    assert (first.offset_ms, first.rate, first.run) == (-120_000, 0.5, None)
    assert (second.offset_ms, second.run) == (90_000, "run-1")
    assert clocks.faketime(first, 100) == "-1.2 x0.5"       # scenario time divided by the time scale
    assert clocks.faketime(second, 100) == "+0.9" and clocks.faketime(third, 100) == "+0 x2"
    assert clocks.faketime(replace(second, offset_ms=-10 ** 12), 10) == "-100000000"     # never an exponent
    assert clocks.clock_of(sc, "run-1", 2) is second and clocks.clock_of(sc, "run-1", 4) is None
    assert "behind the real clock" in clocks.describe(first, 100)


def test_the_command_line_refuses_a_bad_worker_clock_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + "worker_clocks:\n  - {worker: 1, rate: -1}\n")
    done = subprocess.run([sys.executable, "-m", "crashlab", "integrate", str(bad), "--worker", "true",
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "bad.yaml:7" in done.stderr and "worker_clocks[0].rate" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_libfaketime_a_clock_scenario_is_refused_naming_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(clocks, "PLACES", (str(tmp_path / "none" / "libfaketime.so.1"),))
    with pytest.raises(UsageError) as info:
        integrate(load_file(SLOW), worker=f"{sys.executable} -c pass", out=tmp_path)
    assert clocks.INSTALL in str(info.value) + str(getattr(info.value, "hint", ""))
    line = SLOW.read_text().splitlines().index("  - {worker: 1, rate: 0.05}") + 1
    assert f"slow-clock-past-lease.yaml:{line}: scenario integration-slow-clock-past-lease" in str(info.value)
    assert clocks.require(load_file(PAUSED_PAST_LEASE)) is None      # a scenario with no clock needs none


#: prints its own clock, its pid and whether its parent (bubblewrap, or crashlab) was given LD_PRELOAD
PRINTS_ITS_CLOCK = """
import json, os, time
parent = open(f"/proc/{os.getppid()}/environ", "rb").read()
print(json.dumps({"time": time.time(), "pid": os.getpid(), "faketime": os.environ.get("FAKETIME"),
                  "parent_preloaded": b"LD_PRELOAD=" in parent or b"FAKETIME=" in parent}), flush=True)
"""


@needs_faketime
@pytest.mark.parametrize("isolation", ["auto", "process"])
def test_the_clock_reaches_the_worker_and_not_crashlab(out, monkeypatch, isolation):
    monkeypatch.setenv("CRASHLAB_ISOLATION", isolation)
    worker = out / "prints_clock.py"
    worker.write_text(textwrap.dedent(PRINTS_ITS_CLOCK))
    sc = from_dict({"id": "clock-reaches", "title": "t", "services": {"reservation": {}},
                    "runs": [{"id": "run-1", "intent": {"tenant": "T-1"}, "approval": {"mode": "none"}}],
                    "worker_clocks": [{"worker": 1, "offset": "-1d"}]})      # 864 s real at time scale 100
    outcome = integrate(sc, worker=f"{sys.executable} {worker} {{url}} {{db}}", out=out)
    seen = json.loads((out / sc.id / "run-1.w1.log").read_text().splitlines()[0])
    behind = time.time() - seen["time"]
    assert 800 < behind < 930, behind                 # the day of scenario time, scaled, and no more
    assert seen["faketime"] == "-864" and not seen["parent_preloaded"]
    assert "LD_PRELOAD" not in os.environ and "FAKETIME" not in os.environ
    events = read_jsonl(outcome.trace)
    start = next(e for e in events if e["kind"] == "start")
    assert start["clock"] == {"offset_ms": -86_400_000, "rate": 1.0, "faketime": "-864", "rule_line": None}
    assert events[0]["integration"]["clocks"] == [f"run-1/w1: {clocks.describe(sc.worker_clocks[0], 100)}"]
    assert "clock: run-1/w1: 86400 s of scenario time behind the real clock" in outcome.card.text()
    assert outcome.card.to_json()["clocks"] == events[0]["integration"]["clocks"]
    from crashlab.checks.card import judged

    broken = [{**events[0], "integration": {**events[0]["integration"], "clocks": "run-1/w1"}}, *events[1:]]
    with pytest.raises(UsageError, match=r"integration\.clocks is not a list of strings"):
        judged(broken)
    if outcome.card.isolation.startswith("process"):    # libfaketime's shared memory is not left in /dev/shm
        assert not Path(f"/dev/shm/faketime_shm_{seen['pid']}").exists()


@needs_faketime
def test_the_careful_worker_on_a_slow_clock_passes_reaching_only_loopback(tmp_path, out, monkeypatch):
    store = tmp_path / "stores"
    store.mkdir()
    hook_network(tmp_path, monkeypatch)
    monkeypatch.setenv("CRASHLAB_TEST_NETLOG", str(store / "net.jsonl"))    # a folder the worker may write
    outcome = integrate(load_file(SLOW), worker=careful(out), out=out, store=f"sqlite:{store}/{{run}}.sqlite")
    assert outcome.card.verdict == "pass", outcome.card.text()
    starts = [e for e in read_jsonl(outcome.trace) if e["kind"] == "start"]
    assert [s["worker"] for s in starts] == ["run-82/w1", "run-82/w2"]
    assert starts[0]["clock"]["rate"] == 0.05 and "clock" not in starts[1]     # the replacement's is real
    assert_only_loopback(store / "net.jsonl")
    shown = subprocess.run([sys.executable, "-m", "crashlab", "show", str(outcome.trace)], capture_output=True,
                           text=True, timeout=120).stdout
    assert "run-82/w1      worker start (its wall clock skewed: FAKETIME '+0 x0.05')" in shown, shown


@needs_faketime
def test_the_clock_trusting_worker_passes_when_its_clock_is_real(out):
    """The clock, not the pause, separates it: on paused-past-lease its own clock says the lease expired."""
    outcome = integrate(load_file(PAUSED_PAST_LEASE), worker=careful(out, "--mistake=clock_lease"), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    slow = integrate(load_file(SLOW), worker=careful(out, "--mistake=clock_lease"), out=out / "slow")
    failed = {line.invariant for line in slow.card.lines if line.status == "fail"}
    assert slow.card.verdict == "fail" and {"OWN-03", "TERM-01"} <= failed, slow.card.text()
