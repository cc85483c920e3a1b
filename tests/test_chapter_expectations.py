"""Library expectations true to the chapter: each narrowed expectation refuses the outcome the
chapter rules out (a hand edit of a passing trace), each widened one admits the honest stop it
now allows, and `expect.absent` conjunctions forbid parts only together."""
from __future__ import annotations

import copy

import pytest

from crashlab.checks import check_trace
from crashlab.run.conformance import run_one
from crashlab.vocab.errors import InvalidScenario
from crashlab.scenario import load_text, resolve

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"


def _trace(sid, adapter=REFERENCE):
    run, res = run_one(resolve(sid), adapter)
    assert res.verdict == "pass", res.violations
    return run.events


def _refinish(events, disposition):
    """The same trace with its accepted finish (and the end record) changed to ``disposition``."""
    events = copy.deepcopy(events)
    for e in events:
        if e["kind"] == "finish" and e.get("accepted"):
            e["disposition"] = disposition
        if e["kind"] == "end":
            for r in e["runs"].values():
                if r.get("finished"):
                    r["finished"] = disposition
    return events


def _found(events):
    return {(v.invariant, v.point) for v in check_trace(events).violations}


@pytest.mark.parametrize("sid", ["combined-cancellation-under-pressure", "combined-cancellation-under-pressure-open"])
@pytest.mark.parametrize("wrong", ["FAILED_EFFECT_UNKNOWN", "WAITING_OPERATOR"])
def test_cancellation_under_pressure_owes_the_deadline_disposition(sid, wrong):
    events = _trace(sid, "crashlab.gallery.independent:Conservative")
    assert [e["disposition"] for e in events if e["kind"] == "finish" and e["accepted"]] == ["CANCELLED_EFFECT_UNKNOWN"]
    assert any(inv == "EXP-DISPOSITION" for inv, _ in _found(_refinish(events, wrong)))


def test_every_design_meets_the_cancellation_before_a_takeover():
    sc = resolve("combined-cancellation-under-pressure")
    anchored = [e for e in sc.events if e.anchor == "before"]
    assert anchored and anchored[0].match.port == "lease" and anchored[0].match.nth == 2
    assert {e.data["event_id"] for e in sc.events if e.type == "cancel"} == {"cancel-82"}


@pytest.mark.parametrize("sid", ["fieldops-cancelled-release-fails", "fieldops-release-validation-failed",
                                 "matrix-compensation-authority-denied", "matrix-non-compensatable"])
def test_a_confirmed_hold_that_was_not_released_remains(sid):
    events = _trace(sid)
    assert any(e["kind"] == "ledger" and e["knowledge"] == "CONFIRMED" for e in events)
    found = _found(_refinish(events, "CANCELLED_EFFECT_UNKNOWN"))
    assert ("EXP-ABSENT", "D3") in found, found


def test_a_design_that_never_confirmed_the_hold_may_say_unknown():
    card_lost = []
    run, res = run_one(resolve("fieldops-cancelled-release-fails"),
                       "crashlab.gallery.alternatives:EscalateEveryAmbiguity")
    card_lost = {v.invariant for v in res.violations}
    assert "EXP-ABSENT" not in card_lost and "EXP-DISPOSITION" not in card_lost


def test_the_weak_service_refuses_absence_after_a_sent_request():
    events = _trace("matrix-weak-service")
    assert ("EXP-ABSENT", "D4") in _found(_refinish(events, "FAILED_NO_EFFECT"))


@pytest.mark.parametrize("sid", ["matrix-conflict-in-flight", "matrix-conflict-in-flight-second-run",
                                 "seed000-lost-publish-response", "seed000-short-wait-keep-job-id",
                                 "matrix-late-arrival-search-only"])
def test_an_honest_stop_is_admitted_where_the_read_can_stay_inconclusive(sid):
    expect = resolve(sid).expect
    assert {"FAILED_EFFECT_UNKNOWN", "WAITING_OPERATOR"} <= set(expect["dispositions"])
    assert expect["evidence"], "the authoritative read is still required"
    assert expect["rules"]["dispositions"]["quote"]


HEAD = """id: t
title: t
runs:
  - intent: {tenant: T-1, incident: I-1, part: P-1, slot: S-1, technician: X, quantity: 1, principal: U-1}
expect:
"""


def test_absent_conjunctions_load_and_bad_ones_name_the_line():
    sc = load_text(HEAD + "  absent: [finish:FAILED_NO_EFFECT&reservation.reserve]\n", file="a.yaml")
    assert sc.expect["absent"] == ["finish:FAILED_NO_EFFECT&reservation.reserve"]
    for bad, words in [("finish:FAILED_NO_EFFECT|reservation.reserve", "belong in expect.evidence"),
                       ("!reservation.reserve", "belong in expect.evidence"),
                       ("reservation.reserve&reservation.reserve", "names a part twice"),
                       ("finish:FAILED_NO_EFFECT&reservation.reserv", "reserv")]:
        with pytest.raises(InvalidScenario) as exc:
            load_text(HEAD + f'  absent: ["{bad}"]\n', file="a.yaml")
        text = str(exc.value)
        assert "a.yaml:6" in text and "expect.absent" in text and words in text, text


def _ceiling_design(monkeypatch, name, ceiling):
    import crashlab.gallery.independent as independent

    cls = type(name, (independent.IndependentAdapter,), {"choices": {"attempt_ceiling": ceiling}})
    monkeypatch.setattr(independent, name, cls, raising=False)
    return f"crashlab.gallery.independent:{name}"


@pytest.mark.parametrize("sid", ["matrix-throttling", "t1-crash-before-dispatch"])
def test_a_smaller_attempt_ceiling_spent_honestly_costs_nothing(sid, monkeypatch):
    run, res = run_one(resolve(sid), _ceiling_design(monkeypatch, "CeilingTwo", 2))
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]
    assert run.events[-1]["runs"]["run-82"]["waiting"] == "WAITING_RETRY"
    # within its own ceiling: no RETRY-02 (the attempt recorded before a crash counts too)


def test_a_ceiling_that_leaves_no_backoff_is_still_caught(monkeypatch):
    run, res = run_one(resolve("matrix-throttling"), _ceiling_design(monkeypatch, "CeilingOne", 1))
    assert any(v.invariant == "EXP-EVIDENCE" and "clock.sleep" in v.message for v in res.violations), res.violations
