"""The rules nothing enforced before: what a packet and a message say (PKT-02, MSG-01), the lease
(LEASE-01), the business deadline (DEAD-02, DEAD-01), a definite refusal treated as ambiguous
(CLS-03) and an absence claimed on a lucky read (REC-02).

Each catches a hand-made counterexample, lets the honest variant pass, stops catching it when
it alone is switched off, and catches its gallery exhibit on a library scenario, as the only
invariant that does, charged to the rubric point the chapter names."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

from checks_traces import PROFILE, SENT, TraceBuilder  # noqa: E402

from crashlab.checks import check_trace, invariants, verdict  # noqa: E402
from crashlab.checks.rubric import POINT_OF  # noqa: E402
from crashlab.run.conformance import run_one  # noqa: E402
from crashlab.scenario import library  # noqa: E402

W1 = "run-82/w1"
TIMEOUT = {"code": "timeout", "definite": False, "message": "client deadline", "details": {}}
REFUSED = {"code": "refused", "definite": True, "message": "connection refused", "details": {}}
NEW = ("CLS-03", "LEASE-01", "DEAD-02", "PKT-02", "MSG-01", "REC-02", "DEAD-01")


def ids(res) -> set[str]:
    return {v.invariant for v in res.violations}


def hits(res, inv_id: str) -> list[str]:
    return [v.message for v in res.violations if v.invariant == inv_id]


def without(monkeypatch, inv_id: str) -> None:
    monkeypatch.setattr(verdict, "INVARIANTS", tuple(i for i in invariants.INVARIANTS if i.id != inv_id))


def test_each_new_rule_costs_the_point_the_chapter_names():
    assert {i: POINT_OF[i].id for i in NEW} == {"CLS-03": "C3", "LEASE-01": "O1", "DEAD-02": "O3", "PKT-02": "O4",
                                               "MSG-01": "O4", "REC-02": "E4", "DEAD-01": "D1"}


# --------------------------------------------------------------------------- PKT-02
PACKET = {"header": {"run_id": "run-82", "state": "FAILED_EFFECT_UNKNOWN"},
          "effects": [{"semantic_key": "k-1", "knowledge": "SENT_UNKNOWN", "intent": dict(SENT),
                       "reconciliation": ["lookup(key): unavailable at 60000"]}],
          "authority": {}, "compatibility": {}, "budget": {"deadline": None},
          "recommended": {"action": "STOP", "effect": "unknown", "reason": "the reservation is not confirmed"},
          "alternatives": [{"action": "RECONCILE", "query": "reservation.lookup(key)"}],
          "next_owner": "operator", "cancellation": {"event": "ev-1"}}


def _escalated(packet: dict) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    b.deliver("cancel", reason="the customer said the van broke down again")
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    c = b.call(W1, "operator", "escalate", packet=packet)
    b.emit("run", "escalation", worker=W1, call=c, ticket="OP-1", packet=packet)
    b.result(c, value={"ticket": "OP-1"})
    return b.end()


@pytest.mark.parametrize("change,needle", [
    ({"assessment": "it probably went through"}, "speculates"),
    ({"summary": "The reservation went through; closing"}, "\u201cwent through\u201d while the ledger holds k-1 "
                                                          "SENT_UNKNOWN"),
    ({"context": {"type": "cancel", "reason": "x"}}, None),
    ({"note": "customer: the customer said the van broke down again"}, "raw text of inbox event ev-1"),
    ({"recommended": {"action": "RETRY", "semantic_key": "k-1"}}, "offers RETRY while k-1 is SENT_UNKNOWN"),
    ({"alternatives": [{"action": "RETRY"}]}, "offers RETRY while k-1 is SENT_UNKNOWN"),
    ({"recommended": {"action": "EDIT_STATE"}}, "recommends EDIT_STATE (edit state), which no packet may offer"),
])
def test_pkt_02_judges_what_a_packet_says(change, needle, monkeypatch):
    res = check_trace(_escalated({**PACKET, **change}))
    found = hits(res, "PKT-02")
    if needle is None:
        assert not found, found
    else:
        assert found and needle in found[0], found
        assert res.violations[[v.invariant for v in res.violations].index("PKT-02")].point == "O4"
        without(monkeypatch, "PKT-02")
        assert "PKT-02" not in ids(check_trace(_escalated({**PACKET, **change})))


def test_pkt_02_passes_a_packet_of_typed_fields_and_evidence_references():
    assert "PKT-02" not in ids(check_trace(_escalated(PACKET)))


def test_pkt_02_refuses_an_inbox_event_copied_whole():
    b = TraceBuilder()
    b.clean_prefix()
    ev = b.deliver("cancel", reason="late")
    packet = {**PACKET, "inbox": [b.events[ev]["event"]]}
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    c = b.call(W1, "operator", "escalate", packet=packet)
    b.emit("run", "escalation", worker=W1, call=c, ticket="OP-1", packet=packet)
    b.result(c, value={"ticket": "OP-1"})
    assert any("copies inbox event ev-1 (#" in m and "whole" in m for m in hits(check_trace(b.end()), "PKT-02"))


# --------------------------------------------------------------------------- MSG-01
def _finished_unknown(reason: str) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    b.checkpoint(W1, "FAILED_EFFECT_UNKNOWN", 1, effects=[("k-1", "SENT_UNKNOWN")])
    s = b.finish(W1, "FAILED_EFFECT_UNKNOWN", effects=[("k-1", "SENT_UNKNOWN")], next_owner="operator")
    b.events[s]["reason"] = reason
    return b.end(finished="FAILED_EFFECT_UNKNOWN")


@pytest.mark.parametrize("reason,caught", [
    ("your reservation is confirmed", True),
    ("it was probably reserved", True),
    ("the reservation is not confirmed; an operator checks it", False),
    ("whether the hold was reserved is unknown", False),
    ("weak_service: an ambiguous outcome on a service with no read", False),
    ("the request might have left before the crash; the outcome is unknown", False),
])
def test_msg_01_a_finish_reason_claims_only_what_the_ledger_holds(reason, caught, monkeypatch):
    found = hits(check_trace(_finished_unknown(reason)), "MSG-01")
    assert bool(found) is caught, found
    if caught:
        without(monkeypatch, "MSG-01")
        assert "MSG-01" not in ids(check_trace(_finished_unknown(reason)))


def _notified(confirmed: bool) -> list[dict]:
    b = TraceBuilder(services={"reservation": dict(PROFILE), "notification": {**PROFILE, "lookup": "none"}})
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1", error=None if confirmed else TIMEOUT)
    if confirmed:
        b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.append(W1, "n-1", "PROPOSED", None, 1, service="notification", operation="send")
    b.append(W1, "n-1", "SENT_UNKNOWN", "PROPOSED", 1, service="notification", operation="send")
    c = b.call(W1, "notification", "send", key="n-1", retry_owner="caller",
               intent={"to": "U-7", "template": "reserve-confirmed", "about": "k-1"})
    b.result(c, value={"message_id": "M-1"})
    return b.end()


def test_msg_01_a_user_told_confirmed_needs_the_confirmation(monkeypatch):
    found = hits(check_trace(_notified(False)), "MSG-01")
    assert found and "tells the user \u201creserve confirmed\u201d" in found[0] and "k-1 SENT_UNKNOWN" in found[0]
    assert "MSG-01" not in ids(check_trace(_notified(True)))
    without(monkeypatch, "MSG-01")
    assert "MSG-01" not in ids(check_trace(_notified(False)))


# --------------------------------------------------------------------------- LEASE-01
def _leased(ttl: int) -> list[dict]:
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1, ttl=ttl)
    return b.end()


def test_lease_01_a_lease_of_hours_is_a_lease_mistake(monkeypatch):
    found = hits(check_trace(_leased(86_400_000)), "LEASE-01")
    assert found and "24 h lease" in found[0] and "lease" in found[0]
    assert "LEASE-01" in ids(check_trace(_leased(7_200_000)))
    for ttl in (5_000, 300_000, 3_600_000):
        assert "LEASE-01" not in ids(check_trace(_leased(ttl))), ttl
    without(monkeypatch, "LEASE-01")
    assert "LEASE-01" not in ids(check_trace(_leased(86_400_000)))


# --------------------------------------------------------------------------- DEAD-02, DEAD-01
def _checkpointed(deadline, held, state="VALIDATED") -> list[dict]:
    b = TraceBuilder(deadline=deadline)
    b.start(W1)
    b.acquire(W1, 1)
    s = b.checkpoint(W1, state, 1)
    b.events[s]["checkpoint"]["control"]["deadline"] = held
    return b.end()


def test_dead_02_every_checkpoint_carries_the_business_deadline(monkeypatch):
    for held in (None, 1_200_000, "10:15"):
        found = hits(check_trace(_checkpointed(900_000, held)), "DEAD-02")
        assert found and "business deadline" in found[0], held
    for deadline, held in ((900_000, 900_000), (900_000, 600_000), (None, None), (None, 1_800_000)):
        assert "DEAD-02" not in ids(check_trace(_checkpointed(deadline, held))), (deadline, held)
    # a run cancelled before it was validated ends with nothing to keep
    assert "DEAD-02" not in ids(check_trace(_checkpointed(900_000, None, "CANCELLED_NO_EFFECT")))
    without(monkeypatch, "DEAD-02")
    assert "DEAD-02" not in ids(check_trace(_checkpointed(900_000, None)))


def _waiting(state: str, deadline) -> list[dict]:
    b = TraceBuilder(deadline=deadline)
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    b.checkpoint(W1, state, 1, effects=[("k-1", "SENT_UNKNOWN")])
    b.finish(W1, state, effects=[("k-1", "SENT_UNKNOWN")], next_owner="operator")
    return b.end(waiting=state)


def test_dead_01_a_wait_past_the_business_deadline_is_a_deadline_mistake(monkeypatch):
    found = hits(check_trace(_waiting("WAITING_OPERATOR", 900_000)), "DEAD-01")
    assert found and "past its business deadline 10:15:00" in found[0]
    # no business deadline: an operator wait is a durable state; WAITING_RETRY is refinement R2's
    assert "DEAD-01" not in ids(check_trace(_waiting("WAITING_OPERATOR", None)))
    assert "DEAD-01" not in ids(check_trace(_waiting("WAITING_RETRY", 900_000)))
    assert "DEAD-01" not in ids(check_trace(_waiting("WAITING_OPERATOR", 1_800_000)))   # the horizon is the deadline
    without(monkeypatch, "DEAD-01")
    assert "DEAD-01" not in ids(check_trace(_waiting("WAITING_OPERATOR", 900_000)))


# --------------------------------------------------------------------------- CLS-03
def _refused_then(step: str) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=REFUSED)
    if step == "read":
        b.io(W1, "reservation", "lookup", key="k-1", value={"found": False, "record": None, "as_of": b.t,
                                                           "consistency": "strong", "in_flight": False})
    if step == "unknown":
        b.checkpoint(W1, "FAILED_EFFECT_UNKNOWN", 1, effects=[("k-1", "SENT_UNKNOWN")])
        b.finish(W1, "FAILED_EFFECT_UNKNOWN", effects=[("k-1", "SENT_UNKNOWN")], next_owner="operator")
        return b.end(finished="FAILED_EFFECT_UNKNOWN")
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.io(W1, "random", "draw", low=0, high=100, reason="jitter", value={"value": 7})
    b.io(W1, "clock", "sleep", ms=1007, reason="backoff refused #1", value={"now": b.t})
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    b.reserve(W1, "k-1")
    return b.end()


def test_cls_03_a_definite_refusal_is_not_reconciled_as_ambiguous(monkeypatch):
    for step, needle in (("read", "read it back with reservation.lookup"), ("unknown", "finished FAILED_EFFECT_UNKNOWN")):
        found = hits(check_trace(_refused_then(step)), "CLS-03")
        assert found and "refused definitely (refused" in found[0] and needle in found[0], found
    assert "CLS-03" not in ids(check_trace(_refused_then("resend")))
    without(monkeypatch, "CLS-03")
    assert "CLS-03" not in ids(check_trace(_refused_then("read")))


# --------------------------------------------------------------------------- REC-02
def _absent_on_read_at(read_at: int, resend: bool = False) -> list[dict]:
    """A timeout (nothing commits), one negative lookup as_of ``read_at``, PROPOSED, then a cancellation
    and CANCELLED_NO_EFFECT (or, with ``resend``, a resend under the same key)."""
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    b.t = read_at
    b.acquire(W1, 1, ttl=600_000)
    b.io(W1, "reservation", "lookup", key="k-1", value={"found": False, "record": None, "as_of": read_at,
                                                       "consistency": "strong", "in_flight": False})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    if resend:
        b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
        b.reserve(W1, "k-1")
        return b.end()
    b.append(W1, "k-1", "REJECTED", "PROPOSED", 1)
    b.checkpoint(W1, "FAILED_NO_EFFECT", 1, effects=[("k-1", "REJECTED")])
    b.finish(W1, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    return b.end(finished="FAILED_NO_EFFECT")


def test_rec_02_an_absence_claimed_on_an_early_read_was_lucky(monkeypatch):
    res = check_trace(_absent_on_read_at(30_000))
    found = hits(res, "REC-02")
    assert found and "late-delivery bound" in found[0] and "TRUTH-02" not in ids(res)
    assert check_trace(_absent_on_read_at(61_000)).verdict == "pass"            # past the bound
    assert "REC-02" not in ids(check_trace(_absent_on_read_at(30_000, resend=True)))   # the key collapses it
    without(monkeypatch, "REC-02")
    assert check_trace(_absent_on_read_at(30_000)).verdict == "pass"


# --------------------------------------------------------------------------- the gallery exhibits
@pytest.fixture(scope="module")
def lib():
    return {s.id: s for s in library()}


@pytest.mark.parametrize("exhibit,scenario,inv_id,point,words", [
    ("SpeculativePacket", "matrix-weak-service", "PKT-02", "O4", "speculates"),
    ("SpeculativePacket", "matrix-weak-service", "PKT-02", "O4", "copies the payload of inbox event"),
    ("RetryUnknownEffect", "matrix-weak-service", "PKT-02", "O4", "offers RETRY"),
    ("OfferNewKey", "matrix-weak-service", "PKT-02", "O4", "offers NEW_KEY (mint a new key for the same intent)"),
    ("ReassuringMessage", "matrix-weak-service", "MSG-01", "O4", "confirmed"),
    ("DayLongLease", "t1-crash-before-dispatch", "LEASE-01", "O1", "lease"),
    ("DeadlineDropped", "matrix-reconciliation-down", "DEAD-02", "O3", "deadline"),
    ("WaitsPastDeadline", "matrix-reconciliation-down", "DEAD-01", "D1", "deadline"),
    ("PreSendAsAmbiguous", "matrix-timeout-before-send", "CLS-03", "C3", "refused definitely"),
    ("EarlyAbsenceClaim", "matrix-early-negative-read-cancelled", "REC-02", "E4", "late-delivery bound"),
])
def test_each_exhibit_is_caught_by_its_rule_alone(exhibit, scenario, inv_id, point, words, lib, monkeypatch):
    _, res = run_one(lib[scenario], f"crashlab.gallery.unenforced:{exhibit}")
    generic = {v.invariant for v in res.violations if not v.invariant.startswith("EXP-")}
    assert generic == {inv_id}, [(v.invariant, v.message) for v in res.violations]
    mine = [v for v in res.violations if v.invariant == inv_id]
    assert {v.point for v in mine} == {point} and any(words in v.message for v in mine), mine
    _, res = run_one(lib[scenario], "crashlab.reference_impl:ReferenceAdapter")
    assert res.verdict == "pass"
    without(monkeypatch, inv_id)
    _, res = run_one(lib[scenario], f"crashlab.gallery.unenforced:{exhibit}")
    assert inv_id not in ids(res)


def test_an_adapter_cannot_take_the_integration_traces_name_to_dodge_the_lease_rule():
    """LEASE-01 leaves an integration trace's lease calls alone (they are crashlab's own grant); no
    adapter spec may carry that name."""
    import pytest

    from crashlab.run.drivers import load_adapter
    from crashlab.vocab.errors import UsageError

    with pytest.raises(UsageError, match="integrate:"):
        load_adapter("integrate:Adapter")
