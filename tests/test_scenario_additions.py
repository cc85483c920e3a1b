"""Format additions: a disposition list per run, and a cancellation the platform records as the
run's next checkpoint version (it wins the version race). Each loads, is used by a library
scenario, catches the mistake it exists for, and bad input names the file, line and field."""
from __future__ import annotations

import copy

import pytest

from crashlab.checks import check_trace
from crashlab.run.conformance import run_one
from crashlab.vocab.errors import InvalidScenario
from crashlab.scenario import load_text, resolve

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
INTENT = "{tenant: T-1, incident: I-1, part: P-1, slot: S-1, technician: X, quantity: 1, principal: U-1}"
TWO_RUNS = f"""id: t
title: t
runs:
  - {{id: run-a, intent: {INTENT}}}
  - {{id: run-b, intent: {INTENT}}}
"""


def _error(text: str) -> str:
    with pytest.raises(InvalidScenario) as exc:
        load_text(text, file="s.yaml")
    return str(exc.value)


# --------------------------------------------------------------------------- per-run dispositions
def test_a_disposition_list_per_run_loads():
    sc = load_text(TWO_RUNS + "expect:\n  dispositions:\n    run-a: [SUCCEEDED]\n    run-b: [FAILED_NO_EFFECT, SUCCEEDED]\n")
    assert sc.expect["dispositions"] == {"run-a": ["SUCCEEDED"], "run-b": ["FAILED_NO_EFFECT", "SUCCEEDED"]}


@pytest.mark.parametrize("body, line, words", [
    ("    run-a: [SUCCEEDED]\n    run-c: [SUCCEEDED]\n", 9, "run-c"),
    ("    run-a: [SUCCEEDED]\n", 8, "no list for run run-b"),
    ("    run-a: []\n    run-b: [SUCCEEDED]\n", 8, "at least one"),
    ("    run-a: [DONE]\n    run-b: [SUCCEEDED]\n", 8, "DONE"),
])
def test_a_bad_per_run_list_names_the_line_and_field(body, line, words):
    text = _error(TWO_RUNS + "expect:\n  dispositions:\n" + body)
    assert f"s.yaml:{line}" in text and "expect.dispositions" in text and words in text, text


def test_each_run_is_held_to_its_own_list():
    sc = resolve("combined-cancel-racing-conditional-prepare")
    assert sc.expect["dispositions"]["run-a"] == ["CANCELLED_NO_EFFECT"]
    assert len(sc.expect["dispositions"]["run-c"]) == 3
    run, res = run_one(sc, REFERENCE)
    assert res.verdict == "pass", res.violations
    events = copy.deepcopy(run.events)
    for e in events:      # run-a says its effect is unknown although nothing was prepared
        if e["kind"] == "finish" and e["run"] == "run-a" and e.get("accepted"):
            e["disposition"] = "CANCELLED_EFFECT_UNKNOWN"
        if e["kind"] == "end":
            e["runs"]["run-a"]["finished"] = "CANCELLED_EFFECT_UNKNOWN"
    hits = [v for v in check_trace(events).violations if v.invariant == "EXP-DISPOSITION"]
    assert hits and all(v.run == "run-a" for v in hits), hits
    assert "run-a" in str(hits[0].expected) or "CANCELLED_NO_EFFECT" in hits[0].message


# --------------------------------------------------------------------------- the cancellation wins the race
def test_the_cancellation_recorded_first_fails_the_dispatchers_write():
    run, res = run_one(resolve("combined-cancel-wins-version-race"), REFERENCE)
    assert res.verdict == "pass", res.violations
    kinds = [e["kind"] for e in run.events]
    recorded = run.events[kinds.index("cancel_recorded")]
    rejected = [e for e in run.events if e["kind"] == "checkpoint_rejected"]
    assert rejected and rejected[0]["reason"] == "version_conflict" and rejected[0]["latest"] == recorded["version"]
    assert not [e for e in run.events if e["kind"] == "call" and e.get("op") == "reserve"]
    assert run.events[-1]["runs"]["run-82"]["finished"] == "CANCELLED_NO_EFFECT"


def test_a_dispatcher_that_sends_after_losing_the_race_is_caught():
    run, _ = run_one(resolve("combined-cancel-wins-version-race"), REFERENCE)
    events = copy.deepcopy(run.events)
    end = events.pop()
    call = next(e for e in events if e["kind"] == "call" and e.get("op") == "describe")
    result = next(e for e in events if e["kind"] == "result" and e.get("call") == call["seq"])
    sent = dict(copy.deepcopy(call), seq=len(events), t=end["t"], op="reserve")
    events.append(sent)
    events.append(dict(copy.deepcopy(result), seq=len(events), t=end["t"], call=sent["seq"]))
    events.append(dict(end, seq=len(events)))
    hits = [v for v in check_trace(events).violations if v.invariant == "EXP-ABSENT"]
    assert hits and "cancel_recorded" in hits[0].message and hits[0].point == "D2", hits


def test_a_bad_record_names_the_line_and_field():
    text = _error(TWO_RUNS + "events:\n  - at: '10:01'\n    type: cancel\n    record: ledger\n")
    assert "s.yaml:9" in text and "events[0].record" in text and "ledger" in text and "checkpoint" in text, text


def test_only_a_cancellation_is_recorded_as_a_checkpoint():
    text = _error(TWO_RUNS + "events:\n  - {at: '10:01', type: callback, record: checkpoint}\n")
    assert "s.yaml:7" in text and "record" in text, text


# --------------------------------------------------------------------------- a deployment changes a service's contract
def test_a_deployment_changes_the_service_contract_that_describe_reports():
    run, res = run_one(resolve("matrix-contract-change-retention"), REFERENCE)
    assert res.verdict == "pass", res.violations
    seen = [e["value"]["retention_ms"] for e in run.events if e["kind"] == "result"
            and isinstance(e.get("value"), dict) and "retention_ms" in e["value"]]
    assert seen[0] == 24 * 3_600_000 and seen[-1] == 300_000
    deploy = next(e for e in run.events if e["kind"] == "deploy")
    assert deploy["data"]["services"] == {"reservation": {"retention_ms": 300_000}}


def test_a_design_blind_to_the_new_retention_is_caught():
    run, res = run_one(resolve("matrix-contract-change-retention"), "crashlab.gallery.knowledge:RetentionBlindRedispatch")
    assert {"EFF-01", "EXP-EFFECTS"} <= {v.invariant for v in res.violations}


def _deploy(body: str) -> str:
    return TWO_RUNS + "events:\n  - at: '10:01'\n    type: deploy\n" + body


def test_a_contract_change_loads_without_a_version():
    sc = load_text(_deploy("    services:\n      reservation: {lookup: by_incident_slot, retention: 10m}\n"))
    assert sc.events[0].data == {"services": {"reservation": {"lookup": "by_incident_slot", "retention_ms": 600_000}}}


@pytest.mark.parametrize("body, words", [
    ("    services:\n      registry: {retention: 5m}\n", "registry"),
    ("    services:\n      reservation: {idempotency: none}\n", "idempotency"),
    ("    services:\n      reservation: {lookup: sideways}\n", "sideways"),
    ("    services:\n      reservation: {lag: 5s}\n", "consistency: eventual"),
    ("    services:\n      reservation: {}\n", "at least one knob"),
])
def test_a_bad_contract_change_names_the_line_and_field(body, words):
    text = _error(_deploy(body))
    assert "s.yaml:" in text and "events[0].services" in text and words in text, text


def test_a_contract_change_the_service_cannot_honour_is_refused():
    text = _error("id: t\ntitle: t\nservices:\n  reservation: {idempotency: none, lookup: none}\nruns:\n"
                  f"  - {{id: run-a, intent: {INTENT}}}\nevents:\n  - at: '10:01'\n    type: deploy\n"
                  "    services:\n      reservation: {lookup: by_key}\n")
    assert "s.yaml:11" in text and "after this deployment" in text and "key index" in text, text


# --------------------------------------------------------------------------- two identifying reads disagree
def test_a_stale_replica_hides_a_real_commit_from_one_read_only():
    run, res = run_one(resolve("matrix-reads-disagree"), REFERENCE)
    assert res.verdict == "pass", res.violations
    calls = {e["seq"]: e for e in run.events if e["kind"] == "call"}
    answers = {}
    for e in run.events:
        if e["kind"] == "result" and e.get("ok") and calls.get(e["call"], {}).get("op") in ("lookup", "search"):
            answers.setdefault(calls[e["call"]]["op"], e["value"])
    if "search" in answers:
        assert answers["search"]["records"] == []
    assert answers["lookup"]["found"] is True


def test_concluding_absence_from_the_stale_reads_is_caught():
    run, _ = run_one(resolve("matrix-reads-disagree"), REFERENCE)
    events = copy.deepcopy(run.events)
    for e in events:
        if e["kind"] == "finish" and e.get("accepted"):
            e["disposition"] = "FAILED_NO_EFFECT"
        if e["kind"] == "end":
            e["runs"]["run-82"]["finished"] = "FAILED_NO_EFFECT"
    found = {(v.invariant, v.point) for v in check_trace(events).violations}
    assert ("EXP-ABSENT", "C2") in found and ("EXP-EVIDENCE", "E4") in found, found


@pytest.mark.parametrize("op", ["reserve", "release", "describe", None])
def test_a_stale_read_on_anything_but_a_read_names_the_line(op):
    match = "{port: reservation" + (f", op: {op}" if op else "") + "}"
    text = _error(TWO_RUNS + f"faults:\n  - match: {match}\n    fault: stale_read\n")
    assert "s.yaml:8" in text and "faults[0].fault" in text and "identifying read" in text, text
