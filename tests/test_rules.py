"""Every rule added for the checker's former blind spots catches its counterexample, and
stops catching it when that rule alone is switched off (so removing a rule fails a test).

Hand-made traces (tests/data/checks/checks_traces.py) isolate each rule; a gallery
mistake on its library scenario shows the same rule catching a realistic adapter."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

from checks_traces import PROFILE, SENT, TraceBuilder  # noqa: E402

from crashlab.checks import check_trace, classification, evidence, invariants, verdict  # noqa: E402
from crashlab.checks.invariants import BY_ID  # noqa: E402

W1, W2 = "run-82/w1", "run-82/w2"
TIMEOUT = {"code": "timeout", "definite": False, "message": "client deadline", "details": {}}


def ids(res) -> set[str]:
    return {v.invariant for v in res.violations}


def without(monkeypatch, inv_id: str) -> None:
    """Switch one invariant off for the checks."""
    monkeypatch.setattr(verdict, "INVARIANTS", tuple(i for i in invariants.INVARIANTS if i.id != inv_id))


def negative_lookup(b, worker, as_of):
    return b.io(worker, "reservation", "lookup", key="k-1",
                value={"found": False, "record": None, "as_of": as_of, "consistency": "strong",
                       "in_flight": False})


# --------------------------------------------------------------------------- the late-delivery bound
def _claim_absent_after(read_at: int) -> list[dict]:
    """A timeout, one negative lookup whose as_of is ``read_at``, then REJECTED and FAILED_NO_EFFECT."""
    b = TraceBuilder()
    b.clean_prefix()
    c, _ = b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    b.t = read_at
    b.acquire(W1, 1, ttl=600_000)                          # the owner kept its lease
    negative_lookup(b, W1, read_at)
    b.append(W1, "k-1", "REJECTED", "SENT_UNKNOWN", 1)
    b.checkpoint(W1, "FAILED_NO_EFFECT", 1, effects=[("k-1", "REJECTED")])
    b.finish(W1, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    return b.end(finished="FAILED_NO_EFFECT")


def test_a_negative_read_earlier_than_the_late_delivery_bound_proves_no_absence():
    early = check_trace(_claim_absent_after(30_000))       # after the answer, before send + 60 s
    assert {"REC-01", "TRUTH-02"} <= ids(early), [(v.invariant, v.message) for v in early.violations]
    late = check_trace(_claim_absent_after(61_000))        # past the documented bound
    assert late.verdict == "pass", [(v.invariant, v.message) for v in late.violations]


def test_switching_the_late_delivery_bound_off_lets_the_early_claim_through(monkeypatch):
    def no_bound(ix, run, d, worker, before, mode):
        r = d.result
        return r["t"] if r is not None and r["seq"] < before else d.t

    monkeypatch.setattr(evidence, "required_as_of", no_bound)
    assert check_trace(_claim_absent_after(30_000)).verdict == "pass"


# --------------------------------------------------------------------------- warrant is what the adapter saw
def _retry_after_own_record(idempotency: str = "none") -> list[dict]:
    """A timeout recorded as a definite pre-send failure (PROPOSED), then a second send (to a service
    without idempotency by default, where the resend could duplicate the hold)."""
    b = TraceBuilder(services={"reservation": {**PROFILE, "idempotency": idempotency,
                                               **({"lookup": "none"} if idempotency == "none" else {})}})
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=True, error=TIMEOUT)
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    b.reserve(W1, "k-1", commit=False)
    return b.end()


def test_a_retry_after_a_falsely_recorded_pre_send_failure_is_blind():
    res = check_trace(_retry_after_own_record())
    retry = [v for v in res.violations if v.invariant == "RETRY-01"]
    assert retry and retry[0].auto_fail == "blind ambiguous retry"
    # to a service that deduplicates the key, the same blind resend cannot duplicate: C3, not automatic failure
    dedup = [v for v in check_trace(_retry_after_own_record("semantic")).violations if v.invariant == "RETRY-01"]
    assert dedup and dedup[0].auto_fail is None


def test_switching_the_recorded_absence_warrant_off_hides_the_blind_retry(monkeypatch):
    monkeypatch.setattr(evidence, "warranted_absence", lambda ix, run, e: True)
    assert "RETRY-01" not in ids(check_trace(_retry_after_own_record()))


# --------------------------------------------------------------------------- PKT-01
def _escalation(packet: dict, *, services=None, unresolved=True) -> list[dict]:
    b = TraceBuilder(services=services)
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    if not unresolved:
        b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    c = b.call(W1, "operator", "escalate", packet=packet)
    b.emit("run", "escalation", worker=W1, call=c, ticket="OP-1", packet=packet)
    b.result(c, value={"ticket": "OP-1"})
    return b.end()


GOOD_PACKET = {"header": {"run_id": "run-82"}, "effects": [{"semantic_key": "k-1", "knowledge": "SENT_UNKNOWN"}],
               "authority": {}, "compatibility": {}, "budget": {"deadline": None},
               "recommended": {"action": "RECONCILE", "query": "reservation.lookup(key)"},
               "next_owner": "operator"}


@pytest.mark.parametrize("change,needle", [
    ({"next_owner": None}, "accountable owner"),
    ({"effects": []}, "omits k-1"),
    ({"effects": [{"semantic_key": "k-1", "knowledge": "CONFIRMED"}]}, "ledger holds SENT_UNKNOWN"),
    ({"effects": GOOD_PACKET["effects"] + [{"semantic_key": "k-9", "knowledge": "CONFIRMED"}]},
     "lists k-9 as CONFIRMED, but the ledger does not hold it"),
    ({"effects": GOOD_PACKET["effects"] + [{"semantic_key": "k-9", "knowledge": None, "note": "not prepared"}]},
     None),                                          # an intent not yet prepared may be named
    ({"budget": {}}, "deadline"),
    ({"recommended": {"action": "RECONCILE", "query": "reservation.search(incident, slot)"}}, None),
    ({"recommended": {"action": "COMPENSATE"}}, "no confirmed effect"),
    ({"recommended": {"action": "STOP"}}, "remains or is unknown"),
])
def test_pkt_01_checks_the_packet_content(change, needle):
    res = check_trace(_escalation({**GOOD_PACKET, **change}))
    hits = [v.message for v in res.violations if v.invariant == "PKT-01"]
    if needle is None:
        assert not hits, hits                        # search exists where lookup is by key; k-9 unprepared
    else:
        assert hits and needle in hits[0], hits


def test_pkt_01_refuses_a_read_the_service_does_not_have_and_passes_a_good_packet(monkeypatch):
    weak = {"reservation": {**PROFILE, "idempotency": "none", "lookup": "none"}}
    res = check_trace(_escalation(GOOD_PACKET, services=weak))
    assert any("does not offer" in v.message for v in res.violations if v.invariant == "PKT-01")
    assert "PKT-01" not in ids(check_trace(_escalation(GOOD_PACKET)))
    nothing_open = check_trace(_escalation({**GOOD_PACKET, "effects": [{"semantic_key": "k-1",
                                                                       "knowledge": "PROPOSED"}]},
                                           unresolved=False))
    assert any("nothing unresolved" in v.message for v in nothing_open.violations if v.invariant == "PKT-01")
    without(monkeypatch, "PKT-01")
    assert "PKT-01" not in ids(check_trace(_escalation({**GOOD_PACKET, "next_owner": None})))


# --------------------------------------------------------------------------- FENCE-01
def _fenced_send(**args) -> list[dict]:
    b = TraceBuilder(services={"reservation": {**PROFILE, "fencing": True}})
    b.clean_prefix(epoch=2)
    b.reserve(W1, "k-1", **args)
    return b.end()


def test_fence_01_wants_the_current_epoch(monkeypatch):
    assert "FENCE-01" not in ids(check_trace(_fenced_send(fence=2)))
    for args in ({}, {"fence": 1}, {"fence": True}):
        assert "FENCE-01" in ids(check_trace(_fenced_send(**args))), args
    without(monkeypatch, "FENCE-01")
    res = check_trace(_fenced_send(fence=1))
    assert res.verdict != "fail" and "FENCE-01" not in ids(res)


# --------------------------------------------------------------------------- PREP-02
def _second_attempt(record_it: bool) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "refused", "definite": True, "message": "", "details": {}})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.io(W1, "random", "draw", low=0, high=100, reason="jitter", value={"value": 7})
    b.io(W1, "clock", "sleep", ms=1007, reason="backoff refused #1", value={"now": 1200})
    if record_it:
        b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    b.reserve(W1, "k-1", commit=False, error={"code": "refused", "definite": True, "message": "", "details": {}})
    return b.end()


def test_prep_02_every_attempt_has_its_own_sent_unknown(monkeypatch):
    assert "PREP-02" not in ids(check_trace(_second_attempt(True)))
    hit = [v for v in check_trace(_second_attempt(False)).violations if v.invariant == "PREP-02"]
    assert hit and "attempt after" in hit[0].message
    without(monkeypatch, "PREP-02")
    assert "PREP-02" not in ids(check_trace(_second_attempt(False)))


# --------------------------------------------------------------------------- JIT-01
def _backoff(draw: bool) -> list[dict]:
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    if draw:
        b.io(W1, "random", "draw", low=0, high=100, reason="jitter", value={"value": 7})
    b.io(W1, "clock", "sleep", ms=1000, reason="backoff x #1", value={"now": 1000})
    b.io(W1, "clock", "sleep", ms=5000, reason="wait for the read to cover the send", value={"now": 6000})
    return b.end()


def test_jit_01_each_backoff_draws_jitter(monkeypatch):
    assert "JIT-01" not in ids(check_trace(_backoff(True)))
    assert "JIT-01" in ids(check_trace(_backoff(False)))
    without(monkeypatch, "JIT-01")
    assert "JIT-01" not in ids(check_trace(_backoff(False)))


# --------------------------------------------------------------------------- EVT-02
def _duplicate_intake(evidence_record: dict, revalidate: bool = False) -> list[dict]:
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    b.deliver("intake", event_id="intake-1", intent=dict(SENT))
    b.checkpoint(W1, "VALIDATED", 1)
    b.checkpoint(W1, "PROPOSED", 1)
    b.deliver("intake", event_id="intake-1", intent=dict(SENT))
    events = [{"seq": 1, "event_id": "intake-1", "type": "intake"}, {"seq": 2, "event_id": "intake-1",
                                                                      "type": "intake"}]
    b.io(W1, "inbox", "poll", after_seq=0, value={"events": events})
    b.checkpoint(W1, "VALIDATED" if revalidate else "PROPOSED", 1, evidence=evidence_record)
    return b.end()


AUDITED = {"events": {"intake-1": {"seq": 1, "disposition": "accepted", "duplicates": [2]}}}


def test_evt_02_a_duplicate_needs_a_recorded_disposition_and_no_transition(monkeypatch):
    assert "EVT-02" not in ids(check_trace(_duplicate_intake(AUDITED)))
    logged = {"events": [{"event_id": "intake-1", "seq": 1}, {"event_id": "intake-1", "seq": 2,
                                                                "disposition": "duplicate"}]}
    assert "EVT-02" not in ids(check_trace(_duplicate_intake(logged)))
    silent = {"events": {"intake-1": {"seq": 1, "disposition": "accepted", "duplicates": []}}}
    assert "EVT-02" in ids(check_trace(_duplicate_intake(silent)))
    again = [v.message for v in check_trace(_duplicate_intake(AUDITED, revalidate=True)).violations
             if v.invariant == "EVT-02"]
    assert again and "validated the intake again" in again[0]
    without(monkeypatch, "EVT-02")
    assert "EVT-02" not in ids(check_trace(_duplicate_intake(silent)))


# --------------------------------------------------------------------------- CLS-02 across workers
def _throttled_then_replaced(recorded: bool) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "throttled", "definite": True, "message": "",
                                               "details": {"retry_after_ms": 120_000}})
    if recorded:
        b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.t = 70_000
    b.start(W2)
    b.acquire(W2, 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED" if recorded else "SENT_UNKNOWN", 2)
    b.reserve(W2, "k-1")
    return b.end()


def test_cls_02_a_recorded_retry_after_binds_the_replacement(monkeypatch):
    assert "CLS-02" in ids(check_trace(_throttled_then_replaced(True)))
    assert "CLS-02" not in ids(check_trace(_throttled_then_replaced(False)))   # it never learnt of it
    monkeypatch.setattr(classification, "_bound", lambda run, r, x: x.worker == r["worker"])
    assert "CLS-02" not in ids(check_trace(_throttled_then_replaced(True)))


# --------------------------------------------------------------------------- PIN-01
def _pinned(pinned_env: dict, later_contract: dict | None = None) -> list[dict]:
    b = TraceBuilder()
    b.start(W1, env={"code_version": 1, "schema_version": 2, "canonicalization_version": 1})
    b.acquire(W1, 1)
    b.checkpoint(W1, "VALIDATED", 1)
    c = b.call(W1, "run", "finish", disposition="PINNED")
    b.emit("run", "finish", worker=W1, call=c, disposition="PINNED", effects=[], next_owner="operator",
           reason="", packet={"pinned_env": pinned_env}, accepted=True, stale=False)
    b.result(c, value={"accepted": True})
    if later_contract is not None:
        b.start(W2)
        b.acquire(W2, 2)
        b.checkpoint(W2, "VALIDATED", 2, contract=later_contract)
    return b.end(waiting="PINNED")


def test_pin_01_names_and_keeps_the_old_versions(monkeypatch):
    old = {"schema_version": 1, "canonicalization_version": 1}
    assert "PIN-01" not in ids(check_trace(_pinned(old)))
    assert "PIN-01" in ids(check_trace(_pinned({"schema_version": 2, "canonicalization_version": 1})))
    moved = {"schema_version": 2, "code_version": 1, "canonicalization_version": 1}
    assert "PIN-01" in ids(check_trace(_pinned(old, later_contract=moved)))
    without(monkeypatch, "PIN-01")
    assert "PIN-01" not in ids(check_trace(_pinned({})))


def test_the_new_rules_are_registered_with_a_rubric_point():
    from crashlab.checks.rubric import RUBRIC

    for inv in ("PKT-01", "FENCE-01", "PREP-02", "JIT-01", "EVT-02", "PIN-01", "KEY-03"):
        assert inv in BY_ID and [p.id for p in RUBRIC if inv in p.invariants], inv


# --------------------------------------------------------------------------- calibration
@pytest.mark.parametrize("ttl", [60_000, 300_000, 3_600_000])
@pytest.mark.parametrize("case", ["lost response", "throttled", "zombie with fencing", "cancel after commit"])
def test_a_careful_adapter_not_derived_from_the_reference_passes_whatever_its_lease_ttl(ttl, case):
    """The chapter leaves the lease TTL free: the new rules must not move the verdict of a
    careful adapter written from the docs alone (tests/data/checks/checks_mini.py) with it."""
    import checks_mini
    from test_checks import CLEAN, scenario

    from crashlab.run.runner import run_scenario

    name = f"GoodTtl{ttl}"
    setattr(checks_mini, name, type(name, (checks_mini.Good,), {"TTL": ttl}))
    res = check_trace(run_scenario(scenario(**CLEAN[case]), f"checks_mini:{name}").events)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


def _approval_requested_twice(same_worker: bool) -> list[dict]:
    b = TraceBuilder(approval="manual")
    b.start(W1)
    b.acquire(W1, 1)
    b.deliver("intake", event_id="intake-1", intent=dict(SENT))
    b.io(W1, "authority", "request", proposal_hash="ph-1", action="reserve", value={"request_id": "AR-1"})
    b.deliver("intake", event_id="intake-1", intent=dict(SENT))
    asker = W1
    if not same_worker:
        asker = W2
        b.start(W2)
        b.acquire(W2, 2)
    events = [{"seq": 1, "event_id": "intake-1", "type": "intake"}, {"seq": 2, "event_id": "intake-1",
                                                                      "type": "intake"}]
    b.io(asker, "inbox", "poll", after_seq=0, value={"events": events})
    b.io(asker, "authority", "request", proposal_hash="ph-1", action="reserve", value={"request_id": "AR-2"})
    return b.end()


def test_evt_02_no_second_approval_request_for_a_duplicate_intake():
    again = [v.message for v in check_trace(_approval_requested_twice(True)).violations if v.invariant == "EVT-02"]
    assert again and "asked for approval" in again[0]
    # a replacement that never saw the first request may ask again
    assert "EVT-02" not in ids(check_trace(_approval_requested_twice(False)))


# --------------------------------------------------------------------------- the correction SENT_UNKNOWN -> PROPOSED
def _correction(read_at: int | None, services=None) -> list[dict]:
    """A timeout, then (maybe) a negative lookup, then the correction back to PROPOSED and a
    redispatch under the same key."""
    b = TraceBuilder(services=services)
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    if read_at is not None:
        b.t = read_at
        b.acquire(W1, 1, ttl=600_000)
        negative_lookup(b, W1, read_at)
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1, evidence=["authoritative absence"])
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return b.end(finished="SUCCEEDED")


def test_authoritative_absence_is_the_evidence_for_the_correction_back_to_proposed():
    """AR-08: "If absence is authoritative, revalidate and possibly redispatch with the same key."
    The correction SENT_UNKNOWN -> PROPOSED is accepted with that evidence and only with it."""
    assert check_trace(_correction(read_at=5_000)).verdict == "pass"
    blind = check_trace(_correction(read_at=None))
    assert {"KNOW-02", "RETRY-01"} <= ids(blind)
    # a key-only service collapses a late arrival too: a read covering the answer suffices
    key_only = {"reservation": {**PROFILE, "idempotency": "key_only", "lookup": "by_key"}}
    assert check_trace(_correction(read_at=5_000, services=key_only)).verdict == "pass"


# --------------------------------------------------------------------------- OWN-04: trace 8
def _compensation_failed(escalate: bool) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.deliver("cancel")
    b.append(W1, "c-1", "PROPOSED", None, 1, kind="compensation", compensates="k-1")
    b.append(W1, "k-1", "COMPENSATION_PROPOSED", "CONFIRMED", 1)
    b.checkpoint(W1, "COMPENSATING", 1, effects=[("k-1", "COMPENSATION_PROPOSED"), ("c-1", "PROPOSED")])
    b.append(W1, "c-1", "SENT_UNKNOWN", "PROPOSED", 1, kind="compensation", compensates="k-1")
    c = b.call(W1, "reservation", "release", key="c-1", ref=ref, intent={"proposal_hash": "ph-c"})
    b.result(c, error={"code": "validation_failed", "definite": True, "message": "", "details": {}})
    b.append(W1, "c-1", "REJECTED", "SENT_UNKNOWN", 1, kind="compensation", compensates="k-1")
    b.append(W1, "k-1", "CONFIRMED", "COMPENSATION_PROPOSED", 1)
    effects = [("k-1", "CONFIRMED"), ("c-1", "REJECTED")]
    if escalate:
        packet = {**GOOD_PACKET, "effects": [{"semantic_key": k, "knowledge": v} for k, v in effects],
                  "recommended": {"action": "STOP", "effect": "remains"}}
        e = b.call(W1, "operator", "escalate", packet=packet)
        b.emit("run", "escalation", worker=W1, call=e, ticket="OP-1", packet=packet)
        b.result(e, value={"ticket": "OP-1"})
    b.checkpoint(W1, "CANCELLED_EFFECT_REMAINS", 1, effects=effects)
    b.finish(W1, "CANCELLED_EFFECT_REMAINS", effects=effects, next_owner="operator" if escalate else None)
    return b.end(finished="CANCELLED_EFFECT_REMAINS")


def test_own_04_a_definitely_failed_compensation_is_escalated():
    """AR-08 trace 8: preserve original and corrective records, mark effects remaining, and escalate."""
    hits = [v.message for v in check_trace(_compensation_failed(False)).violations if v.invariant == "OWN-04"]
    assert hits and "failed definitely" in hits[0]
    assert "OWN-04" not in ids(check_trace(_compensation_failed(True)))


# --------------------------------------------------------------------------- expectations of absence and of a time
def test_exp_absent_flags_forbidden_evidence():
    clean = TraceBuilder(expect={"absent": ["reservation.release", "released"]}).clean()
    assert "EXP-ABSENT" not in ids(check_trace(clean))
    hit = [v for v in check_trace(TraceBuilder(expect={"absent": ["reservation.reserve"]}).clean()).violations
           if v.invariant == "EXP-ABSENT"]
    assert hit and "reservation.reserve" in hit[0].message and len(hit[0].events) == 1


def test_exp_disposition_at_judges_the_record_in_force_at_that_time():
    def trace(at_ms, allowed):
        return TraceBuilder(expect={"disposition_at": {"at_ms": at_ms, "dispositions": allowed}}).clean()

    assert "EXP-DISPOSITION-AT" not in ids(check_trace(trace(1_000_000, ["SUCCEEDED"])))
    late = [v.message for v in check_trace(trace(1, ["SUCCEEDED"])).violations if v.invariant == "EXP-DISPOSITION-AT"]
    assert late and "no disposition was recorded" in late[0]
    wrong = [v.message for v in check_trace(trace(1_000_000, ["CANCELLED_EFFECT_UNKNOWN"])).violations
             if v.invariant == "EXP-DISPOSITION-AT"]
    assert wrong and "was SUCCEEDED" in wrong[0]


def test_the_loader_reads_absent_and_disposition_at_and_refuses_bad_ones():
    from crashlab.vocab.errors import InvalidScenario
    from crashlab.scenario import from_dict

    base = {"id": "x", "title": "x", "clock": {"origin": "10:00", "horizon": "10:20"},
            "runs": [{"id": "run-82", "intent": {"tenant": "T-1", "incident": "I-82", "part": "P-204",
                                                  "slot": "S-19", "quantity": 1}}]}
    sc = from_dict({**base, "expect": {"absent": ["released"],
                                       "disposition_at": {"at": "10:15", "dispositions": ["SUCCEEDED"]}}},
                   file="x.yaml")
    assert sc.expect["absent"] == ["released"]
    assert sc.expect["disposition_at"] == {"at_ms": 900_000, "dispositions": ["SUCCEEDED"]}
    for bad, field in (({"absent": ["no-such-thing"]}, "expect.absent"),
                       ({"disposition_at": {"at": "10:15"}}, "expect.disposition_at.dispositions"),
                       ({"disposition_at": {"at": "09:00", "dispositions": ["SUCCEEDED"]}}, "expect.disposition_at")):
        with pytest.raises(InvalidScenario) as err:
            from_dict({**base, "expect": bad}, file="x.yaml")
        assert field in str(err.value), str(err.value)


# --------------------------------------------------------------------------- events after terminal
def _woken_after_terminal(send: bool, disposition: str) -> tuple[list[dict], int, int]:
    b = TraceBuilder()
    b.clean(W1)
    b.events.pop()                                   # reopen: drop the end event
    terminal = next(e["seq"] for e in b.events if e["kind"] == "checkpoint" and e.get("state") == "SUCCEEDED")
    b.deliver("cancel", reason="too late")
    b.start(W2)
    b.acquire(W2, 2)
    late = b.release(W2, "k-1-undo", "R-1") if send else b.finish(W2, disposition, accepted=False)
    return b.end(finished="SUCCEEDED"), terminal, late


@pytest.mark.parametrize("send, disposition, needle", [
    (True, "SUCCEEDED", "sent reservation.release"),
    (False, "CANCELLED_EFFECT_REMAINS", "reported CANCELLED_EFFECT_REMAINS"),
])
def test_term_01_a_worker_woken_after_terminal_only_replays_it(monkeypatch, send, disposition, needle):
    events, terminal, late = _woken_after_terminal(send, disposition)
    hits = [v for v in check_trace(events).violations if v.invariant == "TERM-01"]
    assert [v.events for v in hits] == [(terminal, late)] and needle in hits[0].message
    without(monkeypatch, "TERM-01")
    assert "TERM-01" not in ids(check_trace(events))
    if not send:      # the refused second finish: no other rule notices it
        assert not check_trace(events).violations


def test_term_01_a_replay_of_the_terminal_record_after_a_late_event_passes():
    events, _, _ = _woken_after_terminal(False, "SUCCEEDED")
    assert "TERM-01" not in ids(check_trace(events))


# --------------------------------------------------------------------------- MIG-01: policy and capability
def _resumed_under(env_change: dict, contract_extra: dict) -> tuple[list[dict], int]:
    from checks_traces import ENV
    b = TraceBuilder()
    contract = {"schema_version": 1, "code_version": 1, "canonicalization_version": 1, **contract_extra}
    b.start(W1)
    b.acquire(W1, 1)
    for state in ("VALIDATED", "PROPOSED", "WAITING_HUMAN"):
        b.checkpoint(W1, state, 1, contract=contract)
    b.start(W2, env={**ENV, "code_version": 2, **env_change})
    b.acquire(W2, 2)
    resumed = b.checkpoint(W2, "APPROVED", 2, contract={**contract, "code_version": 2, **env_change})
    return b.end(waiting="WAITING_HUMAN"), resumed


@pytest.mark.parametrize("axis", ["policy_version", "capability_version"])
def test_mig_01_a_changed_policy_or_capability_version_is_incompatible(monkeypatch, axis):
    events, resumed = _resumed_under({axis: 2}, {"policy_version": 1, "capability_version": 1})
    hits = [v for v in check_trace(events).violations if v.invariant == "MIG-01"]
    assert hits and hits[0].events[-1] == resumed and f"{axis} 1 -> 2" in hits[0].message
    # a code change alone is compatible; a contract that omits the version is not compared
    assert "MIG-01" not in ids(check_trace(_resumed_under({}, {"policy_version": 1, "capability_version": 1})[0]))
    assert "MIG-01" not in ids(check_trace(_resumed_under({axis: 2}, {})[0]))
    without(monkeypatch, "MIG-01")
    assert "MIG-01" not in ids(check_trace(events))


def test_a_deploy_that_alters_behaviour_names_the_contract_version_it_changes():
    from crashlab.vocab.errors import InvalidScenario as ScenarioError
    from crashlab.scenario import from_dict

    doc = {"id": "x", "title": "x", "runs": [{"id": "run-82", "intent": {"part": "P-1"}}], "services": {"reservation": {}},
           "events": [{"at": "10:01", "type": "deploy", "code_version": 2, "alters": ["authority_checks"]}]}
    with pytest.raises(ScenarioError, match="changes policy_version too"):
        from_dict(doc)
    doc["events"][0]["alters"] = ["faster"]
    with pytest.raises(ScenarioError, match="not something a deployment alters"):
        from_dict(doc)
    doc["events"][0].update(alters=["authority_checks"], policy_version=2)
    assert from_dict(doc).events[0].data == {"code_version": 2, "policy_version": 2}


def test_same_key_reuses_the_anchored_calls_key_and_needs_an_anchor():
    from crashlab.vocab.errors import InvalidScenario
    from crashlab.run.runner import run_scenario
    from crashlab.scenario import from_dict, library

    doc = {"id": "x", "title": "x", "runs": [{"id": "run-82", "intent": {"part": "P-1"}}],
           "services": {"reservation": {}},
           "events": [{"at": "10:01", "type": "other_actor", "same_key": True, "args": {"intent": {}}}]}
    with pytest.raises(InvalidScenario, match="anchor it to a service call"):
        from_dict(doc)
    sc = next(s for s in library() if s.id == "matrix-same-key-other-parameters")
    events = run_scenario(sc).events
    sent = next(e for e in events if e["kind"] == "call" and e.get("op") == "reserve")
    other = next(e for e in events if e["kind"] == "effect" and e.get("cause") == "other_actor")
    assert other["key"] == sent["args"]["key"] and other["intent"]["quantity"] == 2


# --------------------------------------------------------------------------- KEY-03
def _conflict_read(then: str) -> tuple[list[dict], int, int]:
    b = TraceBuilder()
    b.clean_prefix(W1)
    b.reserve(W1, "k-1", commit=False, error=TIMEOUT, delivered=True)
    other = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19", "technician": "TECH-9",
             "quantity": 2, "principal": "U-3"}
    _, read = b.io(W1, "reservation", "lookup", key="k-1",
                   value={"found": True, "record": {"ref": "R-9", "key": "k-1", "intent": other, "status": "active"},
                          "as_of": b.t, "consistency": "strong", "in_flight": False})
    if then == "send":
        later, _ = b.reserve(W1, "k-1", commit=False, error={"code": "intent_mismatch", "definite": True,
                                                              "message": "", "details": {}})
        b.finish(W1, "FAILED_NO_EFFECT", next_owner=None)
    elif then == "escalate":
        b.emit("run", "escalation", worker=W1, ticket="OP-1", packet={"next_owner": "operator"})
        later = b.finish(W1, "FAILED_EFFECT_UNKNOWN", next_owner="operator")
    else:
        later = b.finish(W1, "FAILED_EFFECT_UNKNOWN", next_owner="operator")
    return b.end(finished="FAILED_EFFECT_UNKNOWN"), read, later


@pytest.mark.parametrize("then, needle", [("send", "sent the key again"), ("finish", "without escalating")])
def test_key_03_a_same_key_record_with_other_parameters_is_an_integrity_error(monkeypatch, then, needle):
    events, read, later = _conflict_read(then)
    hits = [v for v in check_trace(events).violations if v.invariant == "KEY-03"]
    assert [v.events for v in hits] == [(read, later)] and needle in hits[0].message
    without(monkeypatch, "KEY-03")
    assert "KEY-03" not in ids(check_trace(events))


def test_key_03_an_escalated_conflict_passes():
    events, _, _ = _conflict_read("escalate")
    assert "KEY-03" not in ids(check_trace(events))


# --------------------------------------------------------------------------- TRUTH-01: another run's release
def _claim_after_another_runs_release(read_after: bool) -> tuple[list[dict], int, int]:
    b = TraceBuilder()
    b.clean_prefix(W1)
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.t += 50
    released = b.emit("remote", "released", run="run-83", service="reservation", ref=ref, release_ref="X-9",
                      key="release-k", cause="adapter", call=None)
    if read_after:               # the run looks again and sees the hold released
        b.t += 50
        b.io(W1, "reservation", "lookup", key="k-1",
             value={"found": True, "record": {"ref": ref, "key": "k-1", "intent": {}, "status": "released"},
                    "as_of": b.t, "consistency": "strong", "in_flight": False})
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    claim = b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return b.end(finished="SUCCEEDED"), released, claim


def test_truth_01_another_runs_release_after_the_run_last_saw_the_effect_does_not_falsify_its_claim():
    events, _, _ = _claim_after_another_runs_release(read_after=False)
    assert "TRUTH-01" not in ids(check_trace(events))
    events, released, claim = _claim_after_another_runs_release(read_after=True)
    hits = [v for v in check_trace(events).violations if v.invariant == "TRUTH-01"]
    assert hits and hits[0].events[-1] == claim and "released" in hits[0].message
