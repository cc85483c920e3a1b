"""The checks: every invariant catches its mistake, and a careful adapter passes.

Two kinds of evidence: small adapters with one deliberate mistake each
(tests/data/checks/checks_mini.py) run through the real world, and hand-made traces
(tests/data/checks/checks_traces.py) for what a well-behaved world never produces.
Every case asserts the invariant id, the automatic-failure reason and the kinds of the
events the violation cites.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

from checks_traces import INTENT, SENT, TraceBuilder  # noqa: E402

from crashlab.checks import EXPECTATIONS, INVARIANTS, check_trace, timelines  # noqa: E402
from crashlab.checks.invariants import BY_ID, KNOWLEDGE_GRAPH, RUN_GRAPH  # noqa: E402
from crashlab.run.explore import crash_documents, probe_calls  # noqa: E402
from crashlab.run.drivers import load_adapter  # noqa: E402
from support import message_faults  # noqa: E402
from crashlab.run.runner import run_scenario  # noqa: E402
from crashlab.scenario import from_dict  # noqa: E402

W1, W2 = "run-82/w1", "run-82/w2"


def scenario(**overrides):
    doc = {"id": "checks", "title": "checks", "clock": {"origin": "10:00", "horizon": "10:30"},
           "runs": [{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}}]}
    doc.update(overrides)
    return from_dict(doc, file="checks.yaml")


def run(adapter: str, **overrides):
    events = run_scenario(scenario(**overrides), f"checks_mini:{adapter}").events
    return events, check_trace(events)


def describe(events, seq) -> str:
    ev = events[seq]
    if ev["kind"] in ("call", "result"):
        call = ev if ev["kind"] == "call" else events[ev["call"]]
        return f"{ev['kind']}:{call['port']}.{call['op']}"
    return ev["kind"]


def only(result, invariant):
    hits = [v for v in result.violations if v.invariant == invariant]
    assert hits, f"{invariant} not raised; got {[(v.invariant, v.message) for v in result.violations]}"
    return hits[0]


def fault(op, kind, nth=1, **extra):
    return {"match": {"port": "reservation", "op": op, "nth": nth}, "fault": kind, **extra}


LOST = [fault("reserve", "lost_response")]
LOOKUP_DOWN = [{"match": {"port": "reservation", "op": "lookup"}, "fault": "unavailable", "times": 0}]
TWO_TENANTS = [{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}},
               {"id": "run-83", "intent": {**INTENT, "tenant": "T-2"}, "approval": {"mode": "none"},
                "start": "10:00:05"}]
DEPLOY = dict(events=[{"at": "10:00:00.110", "type": "deploy", "schema_version": 2}],
              crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "before"}])

# (invariant, adapter, scenario overrides, automatic failure, the kinds of the cited events)
MISTAKES = [
    # a same-key resend to a service that deduplicates it cannot duplicate: it costs C3 only
    ("RETRY-01", "BlindRetry", dict(faults=LOST), None,
     ["call:reservation.reserve", "call:reservation.reserve"]),
    ("RETRY-01", "BlindRetry", dict(faults=LOST, services={"reservation": {"retention": "1s"}}),
     "blind ambiguous retry", ["call:reservation.reserve", "call:reservation.reserve"]),
    ("EFF-01", "BlindRetry", dict(faults=LOST, services={"reservation": {"idempotency": "none", "lookup": "none"}}),
     None, ["effect", "effect"]),
    ("KEY-01", "KeyPerAttempt", dict(faults=[fault("reserve", "refused")]), None,
     ["call:reservation.reserve", "call:reservation.reserve"]),
    ("RETRY-03", "InnerRetry", dict(faults=LOST), "two retry owners",
     ["call:reservation.reserve", "call:reservation.reserve"]),
    ("RETRY-03", "NoOwnerDeclared", dict(services={"reservation": {"proxy_retries": 2}},
                                         faults=[fault("reserve", "server_error_after")]), "two retry owners",
     ["call:reservation.reserve", "proxy_retry", "proxy_retry"]),
    ("KNOW-02", "DeadlineIsFailure", dict(faults=LOST + LOOKUP_DOWN), None, ["call:reservation.reserve", "ledger"]),
    ("TRUTH-01", "DeadlineIsFailure", dict(faults=LOST + LOOKUP_DOWN), None, ["effect", "ledger"]),
    ("KNOW-02", "ConfirmFromSend", dict(faults=LOST), "exactly-once claim", ["ledger"]),
    ("REC-01", "TrustStaleRead", dict(faults=LOST, services={"reservation": {"consistency": "eventual",
                                                                             "lag": "10s"}}), None,
     ["call:reservation.reserve", "result:reservation.lookup", "ledger"]),
    ("PREP-01", "SkipPrepare", {}, None, ["call:reservation.reserve"]),
    ("KNOW-01", "SkipPrepare", {}, None, ["ledger"]),
    ("RETRY-02", "NoBackoff", dict(faults=[fault("reserve", "refused")]), None,
     ["call:reservation.reserve", "call:reservation.reserve"]),
    ("CLS-02", "NoBackoff", dict(faults=[fault("reserve", "throttled", delay="2s")]), None,
     ["result:reservation.reserve", "call:reservation.reserve"]),
    ("RETRY-02", "IgnoreDeadline", dict(runs=[{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"},
                                               "deadline": "10:00:03"}],
                                        faults=[fault("reserve", "throttled", delay="5s")]), None,
     ["call:reservation.reserve"]),
    ("RETRY-02", "NoCeiling", dict(faults=[fault("reserve", "refused")]), None, ["call:reservation.reserve"]),
    ("CLS-01", "OtherPrincipal", dict(services={"reservation": {"denied_principals": ["U-7"]}}), None,
     ["result:reservation.reserve", "call:reservation.reserve"]),
    ("AUTH-02", "OtherPrincipal", dict(services={"reservation": {"denied_principals": ["U-7"]}}), None,
     ["call:reservation.reserve"]),
    ("OWN-04", "NoPacket", dict(faults=LOST + LOOKUP_DOWN), None, ["finish"]),
    ("TRUTH-02", "SucceedOnUnknown", dict(faults=LOST), "exactly-once claim", ["finish"]),
    ("TRUTH-02", "CancelTheater", dict(faults=LOST, events=[{"at": "10:00:01", "type": "cancel"}]), None,
     ["call:reservation.reserve", "finish"]),
    ("AUTH-01", "InventApproval", dict(runs=[{"id": "run-82", "intent": dict(INTENT)}]), None,
     ["call:reservation.reserve"]),
    ("KEY-02", "KeyOmitsTenant", dict(runs=TWO_TENANTS, services={"reservation": {"idempotency": "key_only"}}), None,
     ["call:reservation.reserve", "call:reservation.reserve"]),
    ("EFF-02", "ResendConfirmed", dict(crashes=[{"match": {"port": "ledger", "op": "append", "nth": 3},
                                                 "boundary": "after"}]), None,
     ["ledger", "call:reservation.reserve"]),
    ("LATE-01", "TrustCallback", dict(services={"reservation": {"callback_delay": "2s"}},
                                      crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                                "boundary": "after"}]), None, ["result:inbox.poll", "ledger"]),
    ("EVID-01", "NoEvidence", {}, None, ["ledger"]),
    ("DISP-02", "PartialEffects", {}, None, ["finish"]),
    ("OWN-01", "StaleSend", dict(faults=[fault("reserve", "throttled", delay="15s")]), None,
     ["result:clock.sleep", "call:reservation.reserve"]),
    ("CANCEL-01", "IgnoreCancel", dict(crashes=[{"match": {"port": "checkpoints", "op": "write", "nth": 4},
                                                 "restart_after": "400s"}],
                                       events=[{"at": "10:00:10", "type": "cancel"}]), None,
     ["result:inbox.poll", "call:reservation.reserve"]),
    ("CANCEL-02", "IgnoreCancel", dict(crashes=[{"match": {"port": "checkpoints", "op": "write", "nth": 4},
                                                 "restart_after": "400s"}],
                                       events=[{"at": "10:00:10", "type": "cancel"}]), None,
     ["result:inbox.poll", "finish"]),
    ("MIG-01", "BestEffort", DEPLOY, None, ["checkpoint", "checkpoint"]),
    ("COMP-01", "Rollback", dict(faults=LOST, events=[{"at": "10:00:01", "type": "cancel"}]),
     "compensation as rollback", ["ledger"]),
    ("ADAPTER-FAULT", "Raises", {}, None, ["adapter_fault"]),
    ("OWN-02", "NoLease", {}, None, ["finish"]),
]


@pytest.mark.parametrize("invariant,adapter,overrides,auto,cites", MISTAKES,
                         ids=[f"{m[0]}-{m[1]}" for m in MISTAKES])
def test_a_deliberate_mistake_is_caught(invariant, adapter, overrides, auto, cites):
    events, res = run(adapter, **overrides)
    assert res.verdict == "fail"
    v = only(res, invariant)
    assert v.auto_fail == auto
    assert v.category == BY_ID[invariant].category
    assert v.run == "run-82" or invariant == "KEY-02"
    assert [describe(events, s) for s in v.events] == cites, v.message
    assert not [n for n in res.notes if "could not be evaluated" in n]
    assert not message_faults(v.message), v.message


def test_compensation_that_reuses_the_original_key_is_rollback():
    events, res = run("Rollback", faults=LOST, events=[{"at": "10:00:01", "type": "cancel"}])
    reuse = [v for v in res.violations if v.invariant == "COMP-01" and "reuses" in v.message]
    assert reuse and reuse[0].auto_fail == "compensation as rollback"
    assert [describe(events, s) for s in reuse[0].events] == ["call:reservation.release"]


# --------------------------------------------------------------------------- the careful adapter passes
CLEAN = {
    "plain": {},
    "lost response": dict(faults=LOST),
    "dropped request": dict(faults=[fault("reserve", "drop_request")]),
    "refused then ok": dict(faults=[fault("reserve", "refused")]),
    "throttled": dict(faults=[fault("reserve", "throttled", delay="2s")]),
    "late arrival": dict(faults=[fault("reserve", "late_arrival", delay="20s")]),
    "eventual consistency": dict(faults=LOST, services={"reservation": {"consistency": "eventual", "lag": "10s"}}),
    "lookup down": dict(faults=LOST + LOOKUP_DOWN),
    "cancel before send": dict(events=[{"at": "10:00:00.050", "type": "cancel"}]),
    "cancel after commit": dict(faults=LOST, events=[{"at": "10:00:01", "type": "cancel"}]),
    "approval": dict(runs=[{"id": "run-82", "intent": dict(INTENT)}]),
    "zombie": dict(pauses=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "resume_after": "400s"}]),
    "zombie with fencing": dict(services={"reservation": {"fencing": True}},
                                pauses=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                         "resume_after": "400s"}]),
    "deployment": DEPLOY,
    "two tenants": dict(runs=TWO_TENANTS),
    "callback": dict(services={"reservation": {"callback_delay": "2s"}},
                     crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after"}]),
    "deadline": dict(runs=[{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"},
                            "deadline": "10:00:03"}], faults=[fault("reserve", "throttled", delay="5s")]),
}


@pytest.mark.parametrize("name", list(CLEAN))
def test_the_careful_adapter_passes(name):
    events, res = run("Good", **CLEAN[name])
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations] + list(res.notes)


@pytest.mark.parametrize("name", ["plain", "lost response", "cancel after commit"])
def test_the_careful_adapter_survives_a_crash_at_every_boundary(name):
    spec = load_adapter("checks_mini:Good")
    base = scenario(**CLEAN[name])
    failures = []
    for doc in crash_documents(base, probe_calls(base, spec)):
        res = check_trace(run_scenario(from_dict(doc, file="checks.yaml"), spec).events)
        if res.verdict != "pass":
            failures.append((doc["id"], [(v.invariant, v.message) for v in res.violations], res.notes))
    assert not failures


def test_a_clean_hand_made_trace_passes():
    res = check_trace(TraceBuilder().clean())
    assert (res.verdict, res.violations, res.notes) == ("pass", (), ())
    assert res.dispositions == {"run-82": "SUCCEEDED"}
    assert res.repro == "crashlab run hand.yaml --adapter hand:Made --seed 1"


# --------------------------------------------------------------------------- hand-made counterexamples
def test_own_02_dispatch_without_a_lease():
    b = TraceBuilder()
    b.start(W1)
    c, _ = b.reserve(W1, "k-1")
    v = only(check_trace(b.end()), "OWN-02")
    assert v.events == (c,)


def test_own_03_record_names_another_epoch_and_store_accepts_stale():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    wrong = b.checkpoint(W1, "VALIDATED", 1, record_epoch=7)
    stale = b.checkpoint(W1, "PROPOSED", 2)          # the live lease is epoch 1
    res = check_trace(b.end(waiting="WAITING_OPERATOR"))
    hits = [v for v in res.violations if v.invariant == "OWN-03"]
    assert [v.events for v in hits] == [(wrong,), (stale,)]
    assert "names lease epoch 7" in hits[0].message and "was not the live lease" in hits[1].message


def test_ckpt_01_checkpoint_without_owner_is_automatic_failure():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    f = b.emit("worker", "adapter_fault", worker=W1, fault="invalid_checkpoint",
               problems=["control.owner: missing", "control.state_version: missing"], message="schema")
    other = b.emit("worker", "adapter_fault", worker=W1, fault="invalid_checkpoint",
                   problems=["contract.code_version: missing"], message="schema")
    res = check_trace(b.end(waiting="WAITING_OPERATOR"))
    hits = [v for v in res.violations if v.invariant == "CKPT-01"]
    assert [(v.events, v.auto_fail) for v in hits] == [((f,), "checkpoint without version or owner"),
                                                      ((other,), None)]


def test_evt_01_two_releases_for_one_cancellation():
    b = TraceBuilder()
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    r1 = b.release(W1, "c-1", ref)
    r2 = b.release(W1, "c-1", ref)
    res = check_trace(b.end(waiting="WAITING_OPERATOR"))
    v = only(res, "EVT-01")
    assert [describe(b.events, s) for s in v.events] == ["released", "released"]
    assert r1 < v.events[0] < r2 < v.events[1]


def test_evt_01_one_retry_request_admits_one_attempt():
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "unavailable", "definite": True})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    wait = b.finish(W1, "WAITING_RETRY")
    b.deliver("retry", event_id="retry-1")
    b.start(W2)
    b.acquire(W2, 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    b.reserve(W2, "k-1", commit=False, error={"code": "unavailable", "definite": True})
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    wait2 = b.finish(W2, "WAITING_RETRY")
    b.deliver("retry", event_id="retry-1")              # the same request, delivered twice
    b.start("run-82/w3")
    b.acquire("run-82/w3", 3)
    b.append("run-82/w3", "k-1", "SENT_UNKNOWN", "PROPOSED", 3)
    again, _ = b.reserve("run-82/w3", "k-1")
    v = only(check_trace(b.end(waiting="WAITING_RETRY")), "EVT-01")
    assert v.events == (wait2, again)


def test_term_01_illegal_transition_and_change_after_terminal():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    b.checkpoint(W1, "VALIDATED", 1)
    jump = b.checkpoint(W1, "SUCCEEDED", 1)          # VALIDATED -> SUCCEEDED is not in RUN_TRANSITIONS
    b.append(W1, "k-1", "PROPOSED", None, 1)
    res = check_trace(b.end(finished="SUCCEEDED"))
    hits = [v for v in res.violations if v.invariant == "TERM-01"]
    assert hits[0].events == (jump,)
    assert "not a legal run-state transition" in hits[0].message
    assert hits[1].events[0] == jump and describe(b.events, hits[1].events[1]) == "ledger"


def test_term_01_finish_contradicting_a_terminal_checkpoint():
    b = TraceBuilder()
    b.clean_prefix()
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.append(W1, "k-1", "REJECTED", "PROPOSED", 1)
    term = b.checkpoint(W1, "FAILED_NO_EFFECT", 1, effects=[("k-1", "REJECTED")])
    fin = b.finish(W1, "CANCELLED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    hits = [v for v in check_trace(b.end(finished="CANCELLED_NO_EFFECT")).violations if v.invariant == "TERM-01"]
    assert [v.events for v in hits] == [(term, fin)]


def test_disp_01_restart_budget_exhausted():
    b = TraceBuilder()
    b.start(W1)
    ex = b.emit("worker", "restart_budget_exhausted", workers=40)
    res = check_trace(b.end())
    v = only(res, "DISP-01")
    assert v.events == (ex,)


def test_mig_01_dispatch_while_migrating():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    for state in ("VALIDATED", "PROPOSED", "APPROVED"):
        b.checkpoint(W1, state, 1)
    b.append(W1, "k-1", "PROPOSED", None, 1)
    mig = b.checkpoint(W1, "MIGRATING", 1, migration={"from": {"schema_version": 1}, "to": {"schema_version": 2}})
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    c, _ = b.reserve(W1, "k-1")
    res = check_trace(b.end(waiting="WAITING_OPERATOR"))
    v = only(res, "MIG-01")
    assert v.events == (mig, c)


def test_mig_01_migrating_checkpoint_needs_its_record():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    b.checkpoint(W1, "VALIDATED", 1)
    mig = b.checkpoint(W1, "MIGRATING", 1)
    v = only(check_trace(b.end(waiting="WAITING_OPERATOR")), "MIG-01")
    assert v.events == (mig,) and "migration record" in v.message


def test_hist_01_dropped_unresolved_effect_and_invalid_entry():
    b = TraceBuilder()
    b.clean_prefix()
    carried = b.events[-2]["seq"]                     # EFFECT_IN_FLIGHT lists k-1 SENT_UNKNOWN
    assert b.events[carried]["kind"] == "checkpoint"
    dropped = b.checkpoint(W1, "RECONCILING", 1, effects=[])
    bad = b.emit("worker", "adapter_fault", worker=W1, fault="invalid_effect_entry",
                 problems=["semantic_key: missing"], message="schema")
    hits = [v for v in check_trace(b.end(waiting="WAITING_OPERATOR")).violations if v.invariant == "HIST-01"]
    assert sorted(v.events for v in hits) == sorted([(carried, dropped), (bad,)])


def test_cancel_02_cancelled_without_a_cancellation():
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "refused", "definite": True})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.append(W1, "k-1", "REJECTED", "PROPOSED", 1)
    fin = b.finish(W1, "CANCELLED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    v = only(check_trace(b.end(finished="CANCELLED_NO_EFFECT")), "CANCEL-02")
    assert v.events == (fin,)


def test_cancellation_after_a_terminal_record_does_not_rewrite_it():
    b = TraceBuilder()
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.deliver("cancel")
    b.start(W2)
    b.acquire(W2, 2)
    b.finish(W2, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    assert check_trace(b.end(finished="SUCCEEDED")).verdict == "pass"


def test_a_zombie_that_observed_nothing_is_not_blamed_but_one_that_did_is():
    def trace(evidence: bool):
        b = TraceBuilder()
        b.clean_prefix()
        b.start(W2)
        b.acquire(W2, 2, ttl=600_000)
        b.io(W2, "reservation", "lookup", key="k-1",
             value={"found": False, "record": None, "as_of": 100_000, "consistency": "strong", "in_flight": False})
        b.append(W2, "k-1", "REJECTED", "SENT_UNKNOWN", 2)
        b.finish(W2, "WAITING_OPERATOR", next_owner="operator")
        seen = None
        if evidence:
            _, seen = b.io(W1, "lease", "renew", error={"code": "stale_epoch", "definite": True}, epoch=1, ttl_ms=1)
        c, _ = b.reserve(W1, "k-1", commit=False, error={"code": "intent_mismatch", "definite": True})
        return b, check_trace(b.end(waiting="WAITING_OPERATOR")), seen, c

    _, quiet, _, _ = trace(False)
    assert "OWN-01" not in {v.invariant for v in quiet.violations}
    b, noisy, seen, c = trace(True)
    assert only(noisy, "OWN-01").events == (seen, c)


def test_exp_checks_disposition_effects_and_evidence():
    b = TraceBuilder(expect={"dispositions": ["FAILED_EFFECT_UNKNOWN"], "remote_effects": 2,
                             "evidence": ["reservation.lookup", "escalation"]})
    events = b.clean()
    res = check_trace(events)
    assert {v.invariant for v in res.violations} == {"EXP-DISPOSITION", "EXP-EFFECTS", "EXP-EVIDENCE"}
    fin = [e["seq"] for e in events if e["kind"] == "finish"]
    eff = [e["seq"] for e in events if e["kind"] == "effect"]
    assert only(res, "EXP-DISPOSITION").events == tuple(fin)
    assert only(res, "EXP-EFFECTS").events == tuple(eff)
    assert len([v for v in res.violations if v.invariant == "EXP-EVIDENCE"]) == 2
    ok = check_trace(TraceBuilder(expect={"dispositions": ["SUCCEEDED"], "remote_effects": {"min": 1, "max": 1},
                                          "evidence": ["reservation.reserve", "ledger:CONFIRMED"]}).clean())
    assert ok.verdict == "pass"


# --------------------------------------------------------------------------- verdicts
def test_still_active_at_the_horizon_is_unknown():
    b = TraceBuilder()
    b.clean_prefix()
    res = check_trace(b.end())
    assert res.verdict == "unknown" and res.dispositions == {"run-82": None}
    assert any("still active" in n for n in res.notes)


def test_a_wall_clock_guard_fault_is_unknown_not_fail():
    b = TraceBuilder()
    b.start(W1)
    b.emit("worker", "adapter_fault", worker=W1, fault="no_reply", message="sent nothing for 10 s")
    res = check_trace(b.end())
    assert res.verdict == "unknown" and not res.violations


def test_a_truncated_trace_is_unknown():
    b = TraceBuilder()
    b.clean_prefix()
    assert check_trace(b.events).verdict == "unknown"


def test_violations_are_capped_per_invariant_and_run():
    b = TraceBuilder()
    b.start(W1)
    for _ in range(14):
        b.emit("worker", "adapter_fault", worker=W1, fault="exception", message="boom")
    res = check_trace(b.end())
    assert len([v for v in res.violations if v.invariant == "ADAPTER-FAULT"]) == 10
    assert any("4 more" in n for n in res.notes)


# --------------------------------------------------------------------------- coverage and structure
HAND_MADE = {"OWN-02", "OWN-03", "CKPT-01", "EVT-01", "TERM-01", "DISP-01", "MIG-01", "HIST-01", "CANCEL-02",
             "OWN-01", "EXP-DISPOSITION", "EXP-EFFECTS", "EXP-EVIDENCE",
             # tests/test_rules.py: hand-made traces, each also shown undetected with its rule switched off
             "PKT-01", "FENCE-01", "PREP-02", "JIT-01", "EVT-02", "PIN-01", "KEY-03", "EXP-ABSENT", "EXP-DISPOSITION-AT",
             # tests/test_unenforced_rules.py: the same, and each rule's gallery exhibit caught by it alone
             "CLS-03", "LEASE-01", "DEAD-02", "PKT-02", "MSG-01", "REC-02", "DEAD-01"}


def test_every_invariant_has_a_test_that_catches_it():
    caught = {m[0] for m in MISTAKES} | HAND_MADE
    assert caught == set(BY_ID)


def test_invariants_are_well_formed():
    ids = [inv.id for inv in INVARIANTS + EXPECTATIONS]
    assert len(ids) == len(set(ids))
    for inv in INVARIANTS + EXPECTATIONS:
        assert inv.statement.endswith(".") and "\n" not in inv.statement and len(inv.statement) < 120
        assert inv.computed and inv.evidence
    auto = {inv.auto_fail for inv in INVARIANTS if inv.auto_fail}
    assert auto == {"exactly-once claim", "blind ambiguous retry", "compensation as rollback",
                    "checkpoint without version or owner", "two retry owners"}


def test_transition_graphs_come_from_the_model_tables():
    assert RUN_GRAPH.has_edge("EFFECT_CONFIRMED", "SUCCEEDED")
    assert not RUN_GRAPH.has_edge("SUCCEEDED", "SUCCEEDED")
    assert RUN_GRAPH.has_edge("RECONCILING", "RECONCILING")
    assert KNOWLEDGE_GRAPH.has_edge("(none)", "PROPOSED")
    assert not KNOWLEDGE_GRAPH.has_edge("SENT_UNKNOWN", "COMPENSATED")
    assert not KNOWLEDGE_GRAPH.has_edge("CONFIRMED", "REJECTED")


def test_timelines_show_the_three_lanes():
    events, res = run("Good", **CLEAN["cancel after commit"])
    assert res.verdict == "pass"
    tl = timelines(events)
    lane = tl.run("run-82")
    assert [p.state for p in lane.run_state][:3] == ["VALIDATED", "PROPOSED", "APPROVED"]
    assert lane.run_state[-1].state == "CANCELLED_NO_EFFECT" and lane.disposition == "CANCELLED_NO_EFFECT"
    assert all(p.owner == W1 and p.epoch == 1 for p in lane.run_state)
    kinds = [p.kind for p in lane.remote]
    assert kinds.count("effect") == 2 and "released" in kinds
    keys = {k.key: k for k in lane.knowledge}
    original = next(k for k in keys.values() if k.kind == "effect")
    assert [p.knowledge for p in original.points] == ["PROPOSED", "SENT_UNKNOWN", "CONFIRMED",
                                                      "COMPENSATION_PROPOSED", "COMPENSATED"]
    comp = next(k for k in keys.values() if k.kind == "compensation")
    assert comp.compensates == original.key and comp.points[-1].knowledge == "CONFIRMED"
    assert lane.leases[0].epoch == 1 and [f.accepted for f in lane.finishes if f.worker == W1] == [True]
    with pytest.raises(KeyError):
        tl.run("nope")


def test_timelines_are_frozen_values():
    tl = timelines(TraceBuilder().clean())
    with pytest.raises(AttributeError):
        tl.runs = ()
    assert tl == timelines(TraceBuilder().clean())
    assert SENT["proposal_hash"] == "ph-1"


def test_a_corrupt_trace_is_invalid_input_not_a_crash():
    from crashlab.vocab.errors import UsageError
    events = TraceBuilder().clean()
    del events[3]["worker"]
    with pytest.raises(UsageError, match="not a well-formed crashlab trace"):
        check_trace(events)


def test_strange_values_from_an_adapter_are_findings_not_crashes():
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    b.io(W1, "reservation", "reserve", key=["k"], intent=[1], ref={"x": 1})
    b.io(W1, "reservation", "release", key=5, ref=[1], intent="x")
    b.io(W1, "reservation", "lookup", key={"a": 1}, value={"found": False, "as_of": 0, "in_flight": False})
    b.emit("run", "escalation", worker=W1, ticket="OP-1", packet={"header": 1})
    fin = b.emit("run", "finish", worker=W1, disposition="FAILED_EFFECT_UNKNOWN",
                 effects=[1, "x", {"semantic_key": ["a"], "knowledge": 5}, {"key": "k", "knowledge": []}],
                 next_owner=["x"], reason="", packet=None, accepted=True, stale=False)
    res = check_trace(b.end(finished="FAILED_EFFECT_UNKNOWN"))
    assert res.verdict == "fail" and not res.notes
    assert {"PREP-01", "OWN-04"} <= {v.invariant for v in res.violations}
    assert fin in only(res, "OWN-04").events


def _takeover_trace(zombie_confirms: bool):
    """w1 prepares and stalls; w2 takes over, proves absence and reports no effect; then w1's
    send lands. With ``zombie_confirms`` w1 had confirmed its lease right before the send and
    stalled in it (only a fencing service could have stopped it); without, it sent later,
    after a read, without confirming."""
    b = TraceBuilder()
    b.clean_prefix()                                 # ends with a checkpoint write: a confirmation
    c = None
    if zombie_confirms:
        c = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
        b.emit("fault", "pause", worker=W1, call=c, boundary="before", resume_after_ms=200_000)
    b.start(W2)
    b.t = 60_100                                     # w1's lease (60 s) has expired
    b.acquire(W2, 2, ttl=600_000)
    b.io(W2, "reservation", "lookup", key="k-1",
         value={"found": False, "record": None, "as_of": 61_000, "consistency": "strong", "in_flight": False})
    rejected = b.append(W2, "k-1", "REJECTED", "SENT_UNKNOWN", 2)
    claim = b.finish(W2, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    if zombie_confirms:
        b.emit("fault", "resume", worker=W1, call=c)
    else:
        b.io(W1, "ledger", "read", semantic_key="k-1", value={"entries": []})
        c = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    effect = b.emit("remote", "effect", service="reservation", op="commit", ref="R-9", key="k-1",
                    intent=dict(SENT), fingerprint="f", cause="adapter", call=c)
    b.result(c, value={"ref": "R-9", "intent": dict(SENT)})
    return b, check_trace(b.end(finished="FAILED_NO_EFFECT")), c, (rejected, claim, effect)


def test_a_stalled_send_that_only_fencing_could_stop_is_not_held_against_the_new_owner():
    _, res, _, _ = _takeover_trace(zombie_confirms=True)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]
    assert any("only a service with fencing can stop that" in n for n in res.notes)


def test_a_stale_send_without_confirming_ownership_is_the_zombies_fault():
    b, res, c, (rejected, claim, effect) = _takeover_trace(zombie_confirms=False)
    v = only(res, "OWN-01")
    assert [describe(b.events, s) for s in v.events] == ["call:ledger.read", "call:reservation.reserve"]
    assert v.events[1] == c and "without confirming ownership" in v.message
    truth = sorted(v.events for v in res.violations if v.invariant == "TRUTH-01")
    assert truth == [(rejected, effect), (claim, effect)]


def test_the_ledger_refuses_a_stale_epoch_like_the_checkpoint_store():
    events, res = run("StaleSend", faults=[fault("reserve", "throttled", delay="15s")])
    rejected = [e for e in events if e["kind"] == "ledger_rejected"]
    assert rejected and rejected[0]["reason"] == "stale_epoch" and rejected[0]["lane"] == "run"
    result = next(e for e in events if e["kind"] == "result" and e["call"] == rejected[0]["call"])
    assert result["error"]["code"] == "stale_epoch" and result["error"]["definite"]
    assert not [e for e in events if e["kind"] == "ledger" and e["seq"] > rejected[0]["seq"]
                and e["worker"] == rejected[0]["worker"]]


def test_a_record_a_read_found_is_not_outvoted_by_a_later_stale_miss():
    """Two identifying reads disagree (a stale replica answers the search and says it is fresh):
    the lookup that found the hold warrants CONFIRMED whatever order the reads came in ("do not
    majority-vote"); the read order is the design's to choose."""
    stale = [*LOST, {"match": {"port": "reservation", "op": "search"}, "fault": "stale_read", "delay": "30m",
                     "times": 0}]
    late = [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after", "restart_after": "90s"}]
    events, result = run("SearchAfterLookup", faults=stale, crashes=late)   # both reads past the delivery bound
    searches = [e for e in events if e["kind"] == "call" and e.get("op") == "search"]
    assert searches, "the design searched after its lookup"
    assert any(e["kind"] == "fault" and e.get("fault") == "stale_read" for e in events)
    assert not [v for v in result.violations if v.invariant in ("KNOW-02", "TRUTH-01")], result.violations
    # the rule still bites: confirming with no read that found it is the exactly-once claim
    _, claimed = run("ConfirmFromSend", faults=LOST)
    assert only(claimed, "KNOW-02").auto_fail
