"""The chapter's six crash points (AR-08 "Six crash points in one reservation") on one
reserve-then-notify run: a crash before and after every port call, each recovery ending in
the one disposition the run allows, with one reservation and one notification.

The crash matrix of every library scenario (single and double crashes, judged by the
generic invariants) and the generated schedules run in tests/test_explore.py; this file
keeps only what they do not assert: the disposition each crash must still reach."""
from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from crashlab.run.runner import run_scenario
from crashlab.scenario import Match, Rule, load_file

from test_reference import ADAPTER, DATA, calls, checker_violations, effects, final, run

#: baseline -> the dispositions a crash may legitimately lead to
BASELINES = {
    "happy_notify": {"SUCCEEDED"},
    # a crash after the admitted attempt was claimed but before it was sent consumes the
    # admission: the run waits for another retry intent until its deadline
    "deliberate_retry": {"SUCCEEDED", "FAILED_NO_EFFECT"},
}



@cache
def boundaries(name: str) -> list[tuple[str, str, int]]:
    return [(c["port"], c["op"], c["nth"]) for c in run(name).events
            if c["lane"] == "port" and c["kind"] == "call"]


def crash_at(name: str, port: str, op: str, nth: int, boundary: str):
    scenario = load_file(DATA / f"{name}.yaml")
    rule = Rule(action="crash", match=Match(port=port, op=op, nth=nth), boundary=boundary,
                restart_after_ms=1000)
    return run_scenario(dataclasses.replace(scenario, rules=scenario.rules + (rule,)), ADAPTER)


CASES = [(name, boundary, *point) for name in BASELINES for point in boundaries(name)
         for boundary in ("before", "after")]


@pytest.mark.parametrize("name,boundary,port,op,nth", CASES,
                         ids=[f"{n}-{b}-{p}.{o}#{k}" for n, b, p, o, k in CASES])
def test_crash_at_every_boundary_recovers_without_duplicate_or_lie(name, boundary, port, op, nth):
    result = crash_at(name, port, op, nth, boundary)
    crashes = [e for e in result.events if e["kind"] == "crash"]
    assert len(crashes) == 1, "the crash rule fired"
    assert len(effects(result)) <= 1, "one business intent, at most one remote effect"
    assert len([e for e in result.events if e["lane"] == "remote" and e["kind"] == "effect"
                and e["service"] == "notification"]) <= 1, "no blind resend of a notification"
    end = final(result)
    assert end["disposition"] in BASELINES[name]
    if end["disposition"] == "SUCCEEDED":
        assert len(effects(result)) == 1
    assert checker_violations(result) == set()


def test_the_sweep_covers_the_six_crash_points():
    points = set(boundaries("happy_notify"))
    for needed in [("ledger", "append", 1),                 # before prepare / after prepare
                   ("reservation", "reserve", 1),           # after send / after remote commit
                   ("checkpoints", "write", 7),             # after local record, before advance
                   ("notification", "send", 1)]:            # after checkpoint, before notification
        assert needed in points
    assert len(calls(run("happy_notify"), "reservation", "reserve")) == 1
