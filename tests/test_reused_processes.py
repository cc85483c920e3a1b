"""Reused exec: processes (docs/protocol.md, "Reused processes"; crashlab.run.reuse): a program that
accepts reuse serves one simulation's worker after another's, and no worker sees another's state."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from crashlab.run import reuse
from crashlab.run.drivers import parse_request
from crashlab.run.lines import AdapterFault
from crashlab.scenario.loader import library
from reuse_adapters import OUT_VAR
from support import kinds, run

HERE = Path(__file__).parent
ROOT = HERE.parent
SHIM = f"exec:env PYTHONPATH={HERE}:{ROOT} {sys.executable} -m crashlab.run.wire reuse_adapters:CarriesState"
#: one run, crashed runs, a paused worker replaced, several runs in one simulation
SCENARIOS = ("t2-commit-before-record", "crash-3-after-send-before-commit-known", "t4-approval-wait-crash", "matrix-stale-checkpoint",
             "combined-cancel-after-stale-resume", "crash-5-after-record-before-checkpoint")


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASHLAB_ISOLATION", "process")   # the adapter writes its record outside its TMPDIR
    out = tmp_path / "workers.jsonl"
    monkeypatch.setenv(OUT_VAR, str(out))
    reuse.close_all()
    yield lambda: [json.loads(line) for line in out.read_text().splitlines()]
    reuse.close_all()


def _scenarios():
    by_id = {sc.id: sc for sc in library()}
    return [by_id[name] for name in SCENARIOS if name in by_id]


def test_a_worker_never_sees_what_an_earlier_worker_left(recorded):
    results = [run(sc, SHIM) for sc in _scenarios()]
    workers = recorded()
    assert len(workers) >= len(results) + 2
    assert all(w["memory"] == 0 and not w["file"] for w in workers), workers
    # the same program served workers of several simulations: it was reused, each worker in its own process
    servers = [w["server"] for w in workers]
    assert len(set(servers)) < len(servers)
    assert len({w["pid"] for w in workers}) == len(workers)
    assert all(not kinds(r, "adapter_fault") for r in results)


def test_reuse_changes_no_trace_byte(recorded):
    for sc in _scenarios():
        reused = run(sc, SHIM)
        fresh = run(sc, SHIM, reuse=False)
        assert reused.to_jsonl() == fresh.to_jsonl()


def test_fresh_processes_when_reuse_is_off(recorded):
    for sc in _scenarios()[:2]:
        run(sc, SHIM, reuse=False)
    workers = recorded()
    # the adapter ran in a program crashlab started for its worker, not in a fork of a reused one
    assert {w["server"] for w in workers} == {os.getpid()} and len({w["pid"] for w in workers}) == len(workers)


def test_a_crash_kills_the_worker_and_the_program_serves_the_next_simulation(recorded):
    crashed = next(sc for sc in _scenarios() if sc.id.startswith("crash-"))
    run(crashed, SHIM)
    run(crashed, SHIM)
    workers = recorded()
    assert len(workers) >= 4
    assert all(w["memory"] == 0 and not w["file"] for w in workers)
    # the second simulation's workers ran under programs the first one used, crashed worker included
    first = {w["server"] for w in workers[:len(workers) // 2]}
    assert first & {w["server"] for w in workers[len(workers) // 2:]}


@pytest.mark.parametrize("line", [
    b'{"id":1,"port":"clock","op":"now","args":{"n":9223372036854775808}}',     # beyond +-(2**63 - 1)
    b'{"id":1,"port":"clock","op":"now","args":{"n":NaN}}',
    b'{"id":1,"port":"clock","op":"now","args":{"n":1e400}}',
    b'{"id":1,"port":"clock","op":"now","args":{"s":"\\ud800"}}',
    b'{"id":1,"port":"clock","op":"now","args":' + b'[' * 70 + b']' * 70 + b'}',
])
def test_the_fast_reading_of_a_request_refuses_what_the_exact_one_does(line):
    with pytest.raises(AdapterFault):
        parse_request(line)


def test_the_fast_reading_of_a_request_keeps_large_integers_exact():
    _, call = parse_request(b'{"id":1,"port":"clock","op":"now","args":{"n":9223372036854775807,"m":-12}}')
    assert call.args == {"n": 9223372036854775807, "m": -12} and type(call.args["n"]) is int
