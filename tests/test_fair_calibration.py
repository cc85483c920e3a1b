"""What the stranger's calibration (calibration/stranger, an adapter written from the docs alone)
found: passes crashlab should not give, verdicts a correct design should not get, and a rubric
point a correct design could never have exercised. Each wrong variant is now caught, and the
correct design next to it keeps its verdict on the same scenario."""
from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.run.conformance import run_one
from crashlab.checks.exercised import counts, idle
from crashlab.scenario import library

STRANGER = Path(__file__).resolve().parent.parent / "calibration" / "stranger"


@pytest.fixture(scope="module")
def lib():
    return {s.id: s for s in library()}


@pytest.fixture(autouse=True)
def stranger_path(monkeypatch):
    monkeypatch.syspath_prepend(str(STRANGER))


def judged(lib, scenario: str, variant: str):
    run, res = run_one(lib[scenario], f"stranger_adapter:{variant}")
    return run, res, {v.invariant: v for v in res.violations}


# --------------------------------------------------------------------------- A1: a STOP's effect agrees with the ledger
@pytest.mark.parametrize("scenario,knowledge", [("matrix-weak-service", "SENT_UNKNOWN"),
                                                ("matrix-non-compensatable", "CONFIRMED")])
def test_a_stop_saying_no_effect_while_one_was_sent_breaks_pkt01(lib, scenario, knowledge):
    _, res, found = judged(lib, scenario, "StrangerStopSaysNone")
    assert "PKT-01" in found, res.violations
    assert "effect \u201cnone\u201d" in found["PKT-01"].message and knowledge in found["PKT-01"].message
    _, res, found = judged(lib, scenario, "StrangerAdapter")
    assert res.verdict == "pass", res.violations


def test_a_stop_effect_word_is_read_against_the_ledger():
    from crashlab.checks.ownership import _stop_effect_problems
    assert _stop_effect_problems("STOP", "banana", {})
    assert _stop_effect_problems("STOP", "none", {"k": "SENT_UNKNOWN"})
    assert _stop_effect_problems("STOP", "remains", {"k": "SENT_UNKNOWN"})
    assert not _stop_effect_problems("STOP", "unknown", {"k": "SENT_UNKNOWN"})
    assert not _stop_effect_problems("STOP", "none", {"k": "PROPOSED"})
    assert not _stop_effect_problems("STOP", "remains", {"k": "CONFIRMED"})
    assert not _stop_effect_problems("STOP", "Present", {"k": "COMPENSATION_PROPOSED"})


# --------------------------------------------------------------------------- A2: "created" is a success claim
def test_hold_created_while_sent_unknown_breaks_msg01(lib):
    _, res, found = judged(lib, "matrix-weak-service", "StrangerSaysCreated")
    assert "MSG-01" in found and "\u201ccreated\u201d" in found["MSG-01"].message, res.violations


def test_success_lexicon_keeps_negations_and_a_paused_run():
    from crashlab.checks.statements import _EXISTS, _claims
    assert _claims("Done: hold created for the technician.", _EXISTS) == "created"
    assert _claims("the slot is on hold for TECH-4", _EXISTS) == "on hold for"
    assert _claims("no hold was created", _EXISTS) is None
    assert _claims("whether the hold was created is unknown", _EXISTS) is None
    assert _claims("run on hold, waiting for the operator", _EXISTS) is None


# --------------------------------------------------------------------------- A3: no authority carried over a policy change
def test_dispatch_under_the_old_policy_approval_breaks_auth01(lib):
    _, res, found = judged(lib, "matrix-policy-change-deployment", "StrangerCarryApproval")
    assert "AUTH-01" in found and "policy version 1" in found["AUTH-01"].message, res.violations
    _, res, _ = judged(lib, "matrix-policy-change-deployment", "StrangerAdapter")
    assert res.verdict == "pass", res.violations


# --------------------------------------------------------------------------- B1: a strong search settles the conflict
def test_a_strong_search_meets_the_evidence_of_the_ledger_service_conflict(lib):
    run, res, found = judged(lib, "matrix-ledger-confirmed-service-disagrees", "StrangerSearchFirst")
    assert any(e["kind"] == "call" and e.get("op") == "search" for e in run.events)
    assert "EXP-EVIDENCE" not in found, res.violations


# --------------------------------------------------------------------------- B2: a deliberate retry admits one attempt
@pytest.mark.parametrize("scenario", ["seed002-deliberate-retry", "seed002-duplicate-retry-request"])
def test_an_admitted_retry_needs_no_raised_ceiling(lib, scenario):
    run, res, found = judged(lib, scenario, "StrangerFixedCeiling")
    assert "RETRY-02" not in found, res.violations


def test_retry02_still_counts_attempts_beyond_the_admissions(lib):
    from crashlab.checks import check_trace
    run, res = run_one(lib["seed002-deliberate-retry"], "stranger_adapter:StrangerFixedCeiling")
    events = [dict(e) for e in run.events]
    # the retry request taken away: the same attempt is now one past the ceiling
    events = [e for e in events if not (e.get("kind") == "deliver" and (e.get("event") or {}).get("type") == "retry")]
    assert "RETRY-02" in {v.invariant for v in check_trace(events).violations}


def test_a_raised_ceiling_and_an_admission_are_not_counted_twice(lib):
    # the gallery's SentUnknownOnce raises its ceiling 3 -> 4 for the admitted attempt, then resends
    # it blindly after a crash: attempt 5 is past both the raised ceiling and 3 + one admission
    _, res = run_one(lib["seed002-deliberate-retry"], "crashlab.gallery.blindspots:SentUnknownOnce")
    assert "RETRY-02" in {v.invariant for v in res.violations}


# --------------------------------------------------------------------------- C: keeping a confirmed hold exercises E5
def test_a_cancellation_after_a_confirmed_effect_exercises_comp01(lib):
    run, res = run_one(lib["combined-cancel-after-terminal-success"], "stranger_adapter:StrangerAdapter")
    n = counts(run.events)
    assert n["compensations"] == 0 and n["cancelled_committed"] == 1
    assert idle("COMP-01", n) is None
    run, _ = run_one(lib["matrix-weak-service"], "stranger_adapter:StrangerAdapter")
    assert idle("COMP-01", counts(run.events)) is not None
