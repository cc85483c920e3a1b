"""A check that cannot read its input fails closed (crashlab.checks.guard): the scenario is failed or
inconclusive with a note naming the invariant, the run and the event, and the findings of every other
run and invariant are kept."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from crashlab.checks import check_trace
from crashlab.checks import verdict as verdict_module
from crashlab.checks.common import Invariant
from crashlab.checks.guard import REPORT, evaluate
from crashlab.checks.index import build
from crashlab.run.conformance import check_run, check_scenario
from crashlab.vocab.errors import ConformanceFailure
from crashlab.scenario import resolve
from support import INTENT, run, scenario

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
T6 = "t6-duplicate-input-event"
BAD = "boundary_adapters:SilentDuplicatesAskingBadly"
BAD_WIRE = f"exec:env PYTHONPATH={HERE}:{ROOT} {PY} -m crashlab.run.wire boundary_adapters:SilentDuplicatesAskingBadly"


def _notes(result, inv_id):
    return [n for n in result.notes if n.startswith(f"{inv_id} could not be evaluated")]


# --------------------------------------------------------------------------- the gallery case
@pytest.mark.parametrize("adapter", [BAD, BAD_WIRE], ids=["in-process", "wire"])
def test_silent_duplicates_with_a_malformed_request_still_fails_with_its_duplicate_finding(adapter):
    result = check_run(run(resolve(T6), adapter))
    assert result.verdict == "fail"
    assert any(v.invariant == "EVT-02" and "duplicate delivery" in v.message for v in result.violations)
    [note] = _notes(result, "EVT-02")
    assert "on run-82" in note and "call authority.request: proposal_hash: expected string, got array" in note
    assert note.endswith(REPORT)


def test_silent_duplicates_with_a_malformed_request_fails_the_conformance_check():
    with pytest.raises(ConformanceFailure, match="EVT-02: the duplicate delivery"):
        check_scenario(resolve(T6), BAD)


def test_silent_duplicates_with_a_malformed_request_fails_under_pytest(pytester):
    pytester.syspathinsert(HERE)
    pytester.syspathinsert(ROOT)
    outcome = pytester.runpytest(f"--crashlab-adapter={BAD}", f"--crashlab-scenario={T6}")
    outcome.assert_outcomes(failed=2)   # the scenario, and crashlab::rubric over it
    outcome.stdout.fnmatch_lines(["*EVT-02*duplicate delivery*", "FAILED *crashlab::t6*", "FAILED *crashlab::rubric*"])


# --------------------------------------------------------------------------- per run, per invariant
def two_runs():
    return run(scenario(runs=[{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}},
                              {"id": "run-83", "intent": {**INTENT, "incident": "I-83"},
                               "approval": {"mode": "none"}}])).events


def _poisoned(events, run_id, kind="checkpoint"):
    """A copy of ``events`` whose first ``kind`` event of ``run_id`` carries a garbage field; its seq."""
    events = copy.deepcopy(events)
    ev = next(e for e in events if e["kind"] == kind and e.get("run") == run_id)
    ev["poison"] = [["unreadable"]]
    return events, ev["seq"]


def naive(ix):
    """A check that reads the poison as a dict key (raises on it) and finds one thing per run,
    before and after reading the run's events."""
    for run in ix.runs.values():
        yield run.id, f"{run.id} first", (), False
        for ev in run.checkpoints + run.ledger + run.finishes + list(run.calls.values()) + run.escalations:
            {ev.get("poison"): 1}
        yield run.id, f"{run.id} second", (), False


def test_a_raise_on_one_run_keeps_every_other_runs_findings_and_names_the_event():
    events, seq = _poisoned(two_runs(), "run-82")
    got = evaluate(build(events), naive, "TEST-01")
    assert ("run-83", "run-83 first", (), False) in got.findings
    assert ("run-83", "run-83 second", (), False) in got.findings      # after the poisoned run: kept
    assert ("run-82", "run-82 first", (), False) in got.findings       # before the raise: kept
    assert ("run-82", "run-82 second", (), False) not in got.findings  # never reached
    [note] = got.notes
    assert note.startswith("TEST-01 could not be evaluated on run-82 (TypeError: unhashable type: 'list')")
    assert f"once the trace reaches #{seq} (checkpoint)" in note and note.endswith(REPORT)


def test_a_check_that_reads_everything_is_judged_exactly_as_before():
    events = two_runs()
    got = evaluate(build(events), naive, "TEST-01")
    assert got.notes == [] and len(got.findings) == 4


@pytest.mark.parametrize("kind", ["checkpoint", "ledger", "finish", "call"])
def test_garbage_in_any_event_kind_costs_only_that_invariant_on_that_run(monkeypatch, kind):
    events = run(resolve(T6), "gallery.blindspots:SilentDuplicates").events
    clean = check_trace(events)
    poisoned, seq = _poisoned(events, "run-82", kind)
    fake = Invariant(id="TEST-01", statement="reads the poison", category="disposition", safety=True,
                     auto_fail=None, check=naive)
    monkeypatch.setattr(verdict_module, "EXPECTATIONS", verdict_module.EXPECTATIONS + (fake,))
    result = check_trace(poisoned)
    assert result.verdict == "fail"
    assert [v for v in result.violations if v.invariant != "TEST-01"] == list(clean.violations)
    [note] = _notes(result, "TEST-01")
    assert f"#{seq} ({kind}" in note


def test_an_unreadable_run_without_other_findings_is_inconclusive_never_a_pass(monkeypatch):
    events = run(scenario(), "crashlab.reference_impl:ReferenceAdapter").events
    assert check_trace(events).verdict == "pass"
    poisoned, _ = _poisoned(events, "run-82")

    def quiet(ix):
        for run in ix.runs.values():
            for ev in run.checkpoints:
                {ev.get("poison"): 1}
        return iter(())
    fake = Invariant(id="TEST-02", statement="reads the poison", category="disposition", safety=True,
                     auto_fail=None, check=quiet)
    monkeypatch.setattr(verdict_module, "EXPECTATIONS", verdict_module.EXPECTATIONS + (fake,))
    result = check_trace(poisoned)
    assert result.verdict == "unknown" and _notes(result, "TEST-02")
