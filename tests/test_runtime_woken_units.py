"""The runtime record on an integration card covers every unit of work of a run: the first unit
(CRASHLAB_RUNTIME_ID) and each unit a worker woken after the run's Nth wait ran
(CRASHLAB_RUNTIME_ID.woken-N, as examples/runtimes/crashlab_env.py numbers them)."""
from __future__ import annotations

from crashlab.checks.card import RuntimeRun, RuntimeSection
from crashlab.integrate.run import woken_units


def _start(run, n):
    return {"kind": "start", "run": run, "worker": f"{run}/w{n}", "number": n}


def _finish(run, disposition):
    return {"kind": "finish", "run": run, "disposition": disposition}


def test_a_worker_started_after_the_nth_wait_runs_unit_n():
    events = [_start("run-82", 1), _finish("run-82", "WAITING_HUMAN"),
              _start("run-82", 2),                        # woken: unit 1
              _start("run-82", 3),                        # restarted after a kill inside unit 1: the same unit
              _finish("run-82", "WAITING_HUMAN"), _start("run-82", 4),       # unit 2
              _finish("run-82", "SUCCEEDED"),
              _start("run-83", 1), _finish("run-83", "WAITING_OPERATOR")]   # ends waiting: no unit after it
    assert woken_units(events, "run-82") == [1, 2]
    assert woken_units(events, "run-83") == []


def test_a_finish_that_is_not_a_wait_wakes_no_unit():
    events = [_start("run-82", 1), _finish("run-82", "FAILED_EFFECT_UNKNOWN"), _start("run-82", 2)]
    assert woken_units(events, "run-82") == []


def test_the_card_names_each_unit_and_counts_the_runs_commits_once():
    section = RuntimeSection(name="dbos", title="DBOS", version="1", settings=("max_recovery_attempts",), runs=(
        RuntimeRun(run="run-82", unit="u-82", summary="workflow SUCCESS, 0 steps", commits=1, record="a.json"),
        RuntimeRun(run="run-82", unit="u-82.woken-1", summary="workflow SUCCESS, 4 steps", commits=1,
                   record="b.json", woken=1),
        RuntimeRun(run="run-83", unit="u-83", summary="workflow SUCCESS, 3 steps", commits=0, record="c.json")))
    text = section.text()
    assert text[1:] == [
        "  runtime record run-82: workflow SUCCESS, 0 steps; the sandbox counted 1 commit(s) for the run, "
        "over its 2 units of work",
        "  runtime record run-82, woken unit 1 (u-82.woken-1): workflow SUCCESS, 4 steps",
        "  runtime record run-83: workflow SUCCESS, 3 steps; the sandbox counted 0 commit(s)"]
    assert [r["woken"] for r in section.to_json()["runs"]] == [0, 1, 0]
