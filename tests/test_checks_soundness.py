"""The checks are sound under generated fault schedules: each decision taken after a
generated schedule made a correct run look wrong is pinned here by a hand-made trace of
the excused situation, next to the same trace with the mistake the invariant must still
catch.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

from checks_traces import ENV, INTENT, SENT, TraceBuilder  # noqa: E402

from crashlab.checks import check_trace  # noqa: E402

W1, W2, W3 = "run-82/w1", "run-82/w2", "run-82/w3"
LATER = 200_000                                  # past every late-delivery bound


def ids(res) -> set[str]:
    return {v.invariant for v in res.violations}


def hits(res, invariant):
    return [v for v in res.violations if v.invariant == invariant]


def negative_lookup(b, worker, key="k-1"):
    return b.io(worker, "reservation", "lookup", key=key,
                value={"found": False, "record": None, "as_of": b.t, "consistency": "strong",
                       "in_flight": False})


# --------------------------------------------------------------------------- REC-01: the registry
PUBLISH = {"tenant": "T-1", "package": "fieldops-agent", "version": "1.4.0", "principal": "U-7"}
PUB_SENT = {**PUBLISH, "proposal_hash": "ph-1"}
OTHER = {"tenant": "T-9", "package": "fieldops-agent", "version": "1.4.0", "principal": "U-99"}
REGISTRY = {"idempotency": "natural_key", "retention_ms": 31_536_000_000, "lookup": "by_version",
            "consistency": "strong", "lag_ms": 0, "latency_ms": 50, "timeout_ms": 3000,
            "max_delivery_delay_ms": 30_000, "fencing": False, "job_ms": 20_000, "proxy_retries": 0}


def _registry(read_intent: dict | None):
    """A publish answered already_exists, optionally followed by a version read that shows
    whose record holds the version; the ledger records REJECTED, the run FAILED_NO_EFFECT."""
    b = TraceBuilder(runs=[{"id": "run-82", "intent": dict(PUBLISH), "service": "registry",
                            "operation": "publish", "deadline": None, "start": 0, "approval": "none",
                            "compensation_authority": "granted"}], services={"registry": dict(REGISTRY)})
    pub = {"service": "registry", "operation": "publish", "intent": dict(PUB_SENT)}
    b.start(W1)
    b.acquire(W1, 1)
    for state in ("VALIDATED", "PROPOSED", "APPROVED"):
        b.checkpoint(W1, state, 1)
    b.append(W1, "k-1", "PROPOSED", None, 1, **pub)
    b.checkpoint(W1, "EFFECT_PREPARED", 1, effects=[("k-1", "PROPOSED")])
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1, **pub)
    b.checkpoint(W1, "EFFECT_IN_FLIGHT", 1, effects=[("k-1", "SENT_UNKNOWN")])
    c = b.call(W1, "registry", "publish", key="k-1", intent=dict(PUB_SENT), retry_owner="caller")
    b.emit("remote", "refused", service="registry", key="k-1", call=c, reason="already_exists", ref="J-1")
    b.result(c, error={"code": "already_exists", "definite": True})
    if read_intent is not None:
        b.io(W1, "registry", "get_version", package="fieldops-agent", version="1.4.0",
             value={"found": True, "record": {"ref": "J-1", "key": "other", "intent": dict(read_intent),
                                              "status": "publishing"},
                    "as_of": b.t, "consistency": "strong", "in_flight": False})
    rejected = b.append(W1, "k-1", "REJECTED", "SENT_UNKNOWN", 1, **pub)
    b.checkpoint(W1, "FAILED_NO_EFFECT", 1, effects=[("k-1", "REJECTED")])
    b.finish(W1, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    return check_trace(b.end(finished="FAILED_NO_EFFECT")), rejected


def test_a_version_held_by_another_intent_proves_this_publish_absent():
    res, _ = _registry(OTHER)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


def test_already_exists_alone_does_not_prove_absence():
    res, rejected = _registry(None)
    [v] = hits(res, "REC-01")
    assert rejected in v.events and "already_exists" in v.message


def test_a_version_held_by_this_intent_is_not_absence():
    res, rejected = _registry(PUBLISH)
    [v] = hits(res, "KNOW-02")
    assert rejected in v.events and "version read found" in v.message


# --------------------------------------------------------------------------- EVT-01: waiting again
def _retry(deliver_retry: bool):
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "unavailable", "definite": True})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.finish(W1, "WAITING_RETRY", effects=[("k-1", "PROPOSED")])
    b.start(W2)                                      # w1 crashed right after its finish
    b.acquire(W2, 2)
    again = b.finish(W2, "WAITING_RETRY", effects=[("k-1", "PROPOSED")])
    if deliver_retry:
        b.deliver("retry", event_id="retry-1")
        b.deliver("retry", event_id="retry-1")      # the queue delivers it twice
    b.start(W3)
    b.acquire(W3, 3)
    b.append(W3, "k-1", "SENT_UNKNOWN", "PROPOSED", 3)
    attempt, ref = b.reserve(W3, "k-1")
    b.append(W3, "k-1", "CONFIRMED", "SENT_UNKNOWN", 3, remote_ref=ref)
    b.finish(W3, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="SUCCEEDED")), again, attempt


def test_waiting_again_after_a_restart_admits_nothing():
    res, _, _ = _retry(deliver_retry=True)
    assert "EVT-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_an_attempt_after_waiting_still_needs_a_retry_request():
    res, again, attempt = _retry(deliver_retry=False)
    [v] = hits(res, "EVT-01")
    assert v.events == (again, attempt) and "0 distinct retry event(s) for 1 admission(s)" in v.message


# --------------------------------------------------------------------------- MIG-01: a migrated reread
def _migrated(reread: bool):
    new_env = {**ENV, "schema_version": 2}
    new_contract = {"schema_version": 2, "code_version": 1, "canonicalization_version": 1}
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    for state in ("VALIDATED", "PROPOSED", "APPROVED"):
        b.checkpoint(W1, state, 1)
    b.start(W3, env=new_env)                         # w3 starts before w2's migration is done
    b.start(W2, env=new_env)
    b.acquire(W2, 2)
    b.checkpoint(W2, "MIGRATING", 2, contract=new_contract,
                 migration={"from": {"schema_version": 1}, "to": {"schema_version": 2}})
    migrated = b.checkpoint(W2, "APPROVED", 2, contract=new_contract)
    if reread:
        b.io(W3, "checkpoints", "load", value={"version": 5, "checkpoint": b.events[migrated]["checkpoint"]})
    b.acquire(W3, 3)
    b.append(W3, "k-1", "PROPOSED", None, 3)
    b.checkpoint(W3, "EFFECT_PREPARED", 3, effects=[("k-1", "PROPOSED")], contract=new_contract)
    b.append(W3, "k-1", "SENT_UNKNOWN", "PROPOSED", 3)
    c, ref = b.reserve(W3, "k-1")
    b.append(W3, "k-1", "CONFIRMED", "SENT_UNKNOWN", 3, remote_ref=ref)
    b.finish(W3, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="SUCCEEDED")), c


def test_a_worker_that_rereads_a_migrated_checkpoint_needs_no_migration_of_its_own():
    res, _ = _migrated(reread=True)
    assert "MIG-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_a_worker_that_never_reread_still_runs_an_unmigrated_checkpoint():
    res, c = _migrated(reread=False)
    assert any(c in v.events for v in hits(res, "MIG-01"))


# --------------------------------------------------------------------------- CLS-01: who knew the refusal
DENIED = {"code": "permission_denied", "definite": True}


def _denied(recorded: bool):
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error=DENIED)
    if recorded:                                     # w1 made the refusal durable before dying
        b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1, evidence=["permission_denied"])
    b.start(W2)
    b.t += LATER
    b.acquire(W2, 2)
    if not recorded:
        negative_lookup(b, W2)
        b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    resend, _ = b.reserve(W2, "k-1", commit=False, error=DENIED)
    b.append(W2, "k-1", "REJECTED", "SENT_UNKNOWN", 2)
    b.finish(W2, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    return check_trace(b.end(finished="FAILED_NO_EFFECT")), resend


def test_a_replacement_that_never_learnt_of_a_refusal_may_reconcile_and_send():
    res, _ = _denied(recorded=False)
    assert "CLS-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_a_refusal_recorded_in_the_ledger_binds_every_later_worker():
    res, resend = _denied(recorded=True)
    [v] = hits(res, "CLS-01")
    assert v.events[-1] == resend


# --------------------------------------------------------------------------- CLS-02: an answer not yet seen
def test_retry_after_binds_only_sends_after_the_worker_saw_it():
    b = TraceBuilder()
    b.clean_prefix()
    c1 = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    b.emit("fault", "pause", worker=W1, call=c1, boundary="after", resume_after_ms=100_000)
    b.start(W2)
    b.t += 61_000
    b.acquire(W2, 2)
    negative_lookup(b, W2)
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    _, ref = b.reserve(W2, "k-1")
    b.append(W2, "k-1", "CONFIRMED", "SENT_UNKNOWN", 2, remote_ref=ref)
    b.finish(W2, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    b.emit("fault", "resume", worker=W1, call=c1)
    b.result(c1, error={"code": "throttled", "definite": True, "details": {"retry_after_ms": 20_000}})
    res = check_trace(b.end(finished="SUCCEEDED"))
    assert "CLS-02" not in ids(res), [(v.invariant, v.message) for v in res.violations]


# --------------------------------------------------------------------------- CANCEL-02: terminal first
def _terminal_then_cancel(writer_saw_cancel: bool):
    b = TraceBuilder()
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    cancel = b.deliver("cancel")                     # lands while w1 stalls
    if writer_saw_cancel:
        b.io(W1, "inbox", "poll", after_seq=0, value={"events": [b.events[cancel]["event"]]})
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.start(W2)                                      # w1 died before its finish
    b.io(W2, "inbox", "poll", after_seq=0, value={"events": [b.events[cancel]["event"]]})
    b.acquire(W2, 2)
    fin = b.finish(W2, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="SUCCEEDED")), fin


def test_a_run_made_terminal_before_its_writer_knew_of_the_cancellation_stays_so():
    res, _ = _terminal_then_cancel(writer_saw_cancel=False)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


def test_a_terminal_success_written_after_seeing_the_cancellation_hides_it():
    res, fin = _terminal_then_cancel(writer_saw_cancel=True)
    [v] = hits(res, "CANCEL-02")
    assert v.events[-1] == fin


# --------------------------------------------------------------------------- EFF-02: a stalled send
def _stalled_resend(confirmed_before_send: bool):
    """w1 confirms its ownership with a checkpoint write and stalls before seeing the answer;
    w2 takes over, sends, confirms and finishes; w1 resumes and sends (the service replays)."""
    b = TraceBuilder()
    b.clean_prefix()                                 # ends with w1's checkpoint write
    write = b.events[-1]["call"]
    b.emit("fault", "pause", worker=W1, call=write, boundary="after", resume_after_ms=200_000)
    b.start(W2)
    b.t = 60_100
    b.acquire(W2, 2, ttl=600_000)
    negative_lookup(b, W2)
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    _, ref = b.reserve(W2, "k-1")
    confirmed = b.append(W2, "k-1", "CONFIRMED", "SENT_UNKNOWN", 2, remote_ref=ref)
    b.finish(W2, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    b.emit("fault", "resume", worker=W1, call=write)
    if not confirmed_before_send:
        b.io(W1, "ledger", "read", semantic_key="k-1", value={"entries": []})
    c1 = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    b.emit("remote", "replayed", service="reservation", key="k-1", ref=ref, call=c1)
    b.result(c1, value={"ref": ref, "key": "k-1", "intent": dict(SENT), "status": "active", "replayed": True})
    return check_trace(b.end(finished="SUCCEEDED")), confirmed, c1


def test_a_send_stalled_after_its_ownership_check_is_judged_on_what_it_knew_then():
    res, _, _ = _stalled_resend(confirmed_before_send=True)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


def test_a_stale_send_without_an_ownership_check_is_still_caught():
    res, confirmed, c1 = _stalled_resend(confirmed_before_send=False)
    assert any(c1 in v.events for v in hits(res, "OWN-01"))
    assert [v.events for v in hits(res, "EFF-02")] == [(confirmed, c1)]


# --------------------------------------------------------------------------- a key another run sent
def _same_intent_elsewhere(read: bool, refused_send: bool = False):
    """run-82 prepares its key and stalls before sending (or sends and meets a 409 while the
    other request executes); run-83, the same business intent resubmitted, sends that key
    first; run-82 confirms the record under its key."""
    runs = [{"id": rid, "intent": dict(INTENT), "service": "reservation", "operation": "reserve",
             "deadline": None, "start": 0, "approval": "none", "compensation_authority": "granted"}
            for rid in ("run-82", "run-83")]
    b = TraceBuilder(runs=runs)
    b.clean_prefix()
    b.emit("worker", "start", worker="run-83/w1", run="run-83", number=1, env=dict(ENV))
    c = b.emit("port", "call", worker="run-83/w1", run="run-83", port="lease", op="acquire", args={}, nth=1)
    b.emit("run", "lease", worker="run-83/w1", run="run-83", op="acquire", epoch=1, owner="run-83/w1",
           expires_at=b.t + 60_000, call=c)
    a = b.emit("port", "call", worker="run-83/w1", run="run-83", port="ledger", op="append", args={}, nth=1)
    b.emit("knowledge", "ledger", worker="run-83/w1", run="run-83", call=a, index=1, key="k-1",
           knowledge="PROPOSED", previous=None, epoch=1, live_epoch=1,
           entry={"semantic_key": "k-1", "kind": "effect", "service": "reservation", "operation": "reserve",
                  "intent": dict(SENT), "knowledge": "PROPOSED", "lease_epoch": 1})
    s = b.emit("port", "call", worker="run-83/w1", run="run-83", port="reservation", op="reserve",
               args={"key": "k-1", "intent": dict(SENT), "retry_owner": "caller"}, nth=1)
    b.emit("remote", "effect", run="run-83", service="reservation", op="commit", ref="R-1", key="k-1",
           intent=dict(SENT), fingerprint="f", cause="adapter", call=s)
    if refused_send:
        b.reserve(W1, "k-1", commit=False, error={"code": "conflict_in_flight", "definite": True})
    if read:
        b.io(W1, "reservation", "lookup", key="k-1",
             value={"found": True, "record": {"ref": "R-1", "key": "k-1", "intent": dict(SENT), "status": "active"},
                    "as_of": b.t, "consistency": "strong", "in_flight": False})
    confirmed = b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref="R-1")
    fin = b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    events = b.end(finished="SUCCEEDED")
    events[-1]["runs"]["run-83"] = {"finished": None, "waiting": "WAITING_OPERATOR", "workers": 1}
    return check_trace(events), confirmed, fin


def test_a_read_of_a_prepared_key_confirms_the_record_another_run_of_the_intent_sent():
    res, _, _ = _same_intent_elsewhere(read=True)
    assert not [v for v in res.violations if v.run == "run-82"], [(v.invariant, v.message) for v in res.violations]


def test_confirming_a_prepared_key_without_any_read_is_an_exactly_once_claim():
    res, confirmed, _ = _same_intent_elsewhere(read=False)
    [v] = [v for v in hits(res, "KNOW-02") if v.run == "run-82"]
    assert v.events == (confirmed,) and v.auto_fail == "exactly-once claim"


def test_a_read_after_an_own_send_refused_in_flight_confirms_the_other_runs_record():
    res, _, _ = _same_intent_elsewhere(read=True, refused_send=True)
    assert not [v for v in res.violations if v.run == "run-82"], [(v.invariant, v.message) for v in res.violations]


def test_a_refusal_recorded_by_another_worker_does_not_bind_a_send_stalled_before_it():
    """w1 confirms its ownership and stalls; w2 sends, meets permission_denied and records it;
    w1 resumes and sends: it could not know of the refusal."""
    b = TraceBuilder()
    b.clean_prefix()
    write = b.events[-1]["call"]
    b.emit("fault", "pause", worker=W1, call=write, boundary="after", resume_after_ms=200_000)
    b.start(W2)
    b.t = 60_100
    b.acquire(W2, 2, ttl=600_000)
    negative_lookup(b, W2)
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    b.reserve(W2, "k-1", commit=False, error=DENIED)
    b.append(W2, "k-1", "REJECTED", "SENT_UNKNOWN", 2)
    b.finish(W2, "FAILED_NO_EFFECT", effects=[("k-1", "REJECTED")])
    b.emit("fault", "resume", worker=W1, call=write)
    b.reserve(W1, "k-1", commit=False, error=DENIED)
    res = check_trace(b.end(finished="FAILED_NO_EFFECT"))
    assert "CLS-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


# --------------------------------------------------------------------------- OWN-01: a fenced append confirms
def _stalled_after_append(poll_before_send: bool):
    """w1's SENT_UNKNOWN append succeeds (the ledger fences by epoch, so its lease was live)
    and w1 stalls before seeing the answer; its lease lapses; it resumes and sends."""
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    for state in ("VALIDATED", "PROPOSED", "APPROVED"):
        b.checkpoint(W1, state, 1)
    b.append(W1, "k-1", "PROPOSED", None, 1)
    b.checkpoint(W1, "EFFECT_PREPARED", 1, effects=[("k-1", "PROPOSED")])
    c = b.call(W1, "ledger", "append", entry={})
    b.emit("knowledge", "ledger", worker=W1, call=c, index=2, key="k-1", knowledge="SENT_UNKNOWN",
           previous="PROPOSED", epoch=1, live_epoch=1, entry={"semantic_key": "k-1", "kind": "effect",
                                                              "intent": dict(SENT), "knowledge": "SENT_UNKNOWN"})
    b.emit("fault", "pause", worker=W1, call=c, boundary="after", resume_after_ms=120_000)
    b.t = 120_000                                    # the 60 s lease has lapsed; nobody took over
    b.emit("fault", "resume", worker=W1, call=c)
    b.result(c, value={"index": 2})
    if poll_before_send:
        b.io(W1, "inbox", "poll", after_seq=0, value={"events": []})
    send, _ = b.reserve(W1, "k-1")
    return check_trace(b.end(waiting="WAITING_OPERATOR")), send


def test_a_send_right_after_a_successful_ledger_append_follows_an_ownership_confirmation():
    res, _ = _stalled_after_append(poll_before_send=False)
    assert "OWN-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_a_send_after_a_lapse_with_no_confirmation_right_before_it_is_still_caught():
    res, send = _stalled_after_append(poll_before_send=True)
    [v] = hits(res, "OWN-01")
    assert v.events[-1] == send and "without confirming ownership" in v.message


# --------------------------------------------------------------------------- RETRY-01: the fencing gap
def _resend_after_other_send(zombie: bool):
    """w2 owns the run and proved absence. Another send of the key happens that w2 cannot see:
    w1's, stalled after confirming its ownership (the fencing gap), or w1's, sent while it
    still owned the run and whose answer w1 took down with it. w2 then sends."""
    b = TraceBuilder()
    b.clean_prefix()                                 # ends with w1's checkpoint write
    write = b.events[-1]["call"]
    if not zombie:
        b.reserve(W1, "k-1", delivered=False)        # w1 crashes before seeing the answer
    else:
        b.emit("fault", "pause", worker=W1, call=write, boundary="after", resume_after_ms=200_000)
    b.start(W2)
    b.t = 60_100
    b.acquire(W2, 2, ttl=600_000)
    if zombie:
        b.t += LATER
        negative_lookup(b, W2)
        b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
        b.emit("fault", "resume", worker=W1, call=write)
        b.reserve(W1, "k-1")                         # lands after w2's read
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED" if zombie else "SENT_UNKNOWN", 2)
    resend, _ = b.reserve(W2, "k-1")
    return check_trace(b.end(waiting="WAITING_OPERATOR")), resend


def test_a_send_in_the_fencing_gap_is_not_held_against_the_owner_that_could_not_see_it():
    res, _ = _resend_after_other_send(zombie=True)
    assert "RETRY-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]
    assert any("only a service with fencing can stop that" in n for n in res.notes)


def test_a_resend_over_a_predecessors_unanswered_send_is_blind():
    res, resend = _resend_after_other_send(zombie=False)
    [v] = hits(res, "RETRY-01")
    # the service deduplicates this key and intent, so the blind resend costs C3, not the score
    assert v.events[-1] == resend and v.auto_fail is None and "cannot duplicate" in v.message


# --------------------------------------------------------------------------- RETRY-02: late by a stall
def _late_send(stalled: bool):
    """The worker reads the clock before the deadline, then (stalling, or simply taking its time)
    sends after it."""
    b = TraceBuilder(deadline=10_000)
    b.clean_prefix()
    b.io(W1, "clock", "now", value={"now": b.t})
    write = b.checkpoint(W1, "EFFECT_IN_FLIGHT", 1, effects=[("k-1", "SENT_UNKNOWN")])
    if stalled:
        b.emit("fault", "pause", worker=W1, call=b.events[write]["call"], boundary="after", resume_after_ms=20_000)
    b.t = 12_000
    if stalled:
        b.emit("fault", "resume", worker=W1, call=b.events[write]["call"])
    send, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="SUCCEEDED")), send


def test_a_send_made_late_by_a_stall_after_the_last_clock_reading_is_judged_at_that_reading():
    res, _ = _late_send(stalled=True)
    assert "RETRY-02" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_a_send_after_the_deadline_without_a_stall_is_late():
    res, send = _late_send(stalled=False)
    [v] = hits(res, "RETRY-02")
    assert v.events == (send,) and "past the run's deadline" in v.message


def test_a_zombie_send_while_the_run_waits_for_a_retry_is_no_admitted_attempt():
    b = TraceBuilder()
    b.clean_prefix()                                 # ends with w1's checkpoint write
    write = b.events[-1]["call"]
    b.emit("fault", "pause", worker=W1, call=write, boundary="after", resume_after_ms=200_000)
    b.start(W2)
    b.t = 60_100
    b.acquire(W2, 2, ttl=600_000)
    b.t += LATER
    negative_lookup(b, W2)
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
    b.reserve(W2, "k-1", commit=False, error={"code": "unavailable", "definite": True})
    b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.finish(W2, "WAITING_RETRY", effects=[("k-1", "PROPOSED")])
    b.emit("fault", "resume", worker=W1, call=write)
    b.reserve(W1, "k-1")
    res = check_trace(b.end(waiting="WAITING_RETRY"))
    assert "EVT-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


# --------------------------------------------------------------------------- TRUTH-01: true of its moment
def _released_around_success(before: bool):
    b = TraceBuilder()
    b.clean_prefix()
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])

    def release():                                   # another run of the intent compensates it
        return b.emit("remote", "released", run=None, service="reservation", ref=ref, release_ref="X-9",
                      key="c-83", cause="adapter", call=None)

    gone = release() if before else None
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    fin = b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    if not before:
        release()
    return check_trace(b.end(finished="SUCCEEDED")), gone, fin


def test_a_success_claim_stays_true_when_the_effect_is_released_after_it():
    res, _, _ = _released_around_success(before=False)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


def test_a_success_claimed_after_the_effect_was_released_is_false_and_cites_the_release():
    res, gone, fin = _released_around_success(before=True)
    [v] = hits(res, "TRUTH-01")
    assert v.events == (gone, fin) and "had been released" in v.message


def _send_paused_before_it_left(resumes_after_lapse: bool):
    """w1 sends while it owns the run and stalls before the request leaves; w2 takes over once
    w1's lease lapsed, reads the key (negative as of a moment before the request's answer) and
    records absence. The request leaves when w1 resumes: after its lease lapsed (the fencing
    gap), or while it still held it (then the read is too early)."""
    b = TraceBuilder()
    b.clean_prefix()
    c1 = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    b.emit("fault", "pause", worker=W1, call=c1, boundary="before", resume_after_ms=130_000)
    resumed = b.t = 123_000 if resumes_after_lapse else 20_000
    b.emit("fault", "resume", worker=W1, call=c1)
    b.t += 50
    b.emit("remote", "effect", service="reservation", op="commit", ref="R-1", key="k-1", intent=dict(SENT),
           fingerprint="f", cause="adapter", call=c1)
    b.t = resumed + 3000
    b.result(c1, error={"code": "timeout", "definite": False})
    b.start(W2)
    b.t = 150_000
    b.acquire(W2, 2, ttl=600_000)
    b.io(W2, "reservation", "lookup", key="k-1",          # eventually consistent: as of before the answer
         value={"found": False, "record": None, "as_of": resumed, "consistency": "eventual", "in_flight": False})
    proposed = b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    return check_trace(b.end(waiting="WAITING_OPERATOR")), proposed


def test_a_request_that_left_only_after_its_worker_lost_the_lease_does_not_unsettle_the_new_owner():
    res, _ = _send_paused_before_it_left(resumes_after_lapse=True)
    assert not ids(res) & {"REC-01", "KNOW-02"}, [(v.invariant, v.message) for v in res.violations]


def test_a_request_that_left_in_time_still_needs_a_read_covering_its_answer():
    res, proposed = _send_paused_before_it_left(resumes_after_lapse=False)
    assert any(proposed in v.events for v in res.violations if v.invariant in ("REC-01", "KNOW-02"))


def test_a_resend_with_no_read_over_a_request_still_stalled_in_front_of_its_send_is_blind():
    """The fencing gap excuses a reconciliation that could not see a request that had not left
    yet; it does not excuse having no reconciliation at all."""
    b = TraceBuilder()
    b.clean_prefix()
    c1 = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    b.emit("fault", "pause", worker=W1, call=c1, boundary="before", resume_after_ms=180_000)
    b.start(W2)
    b.t = 63_000
    b.acquire(W2, 2, ttl=600_000)
    resend, _ = b.reserve(W2, "k-1")
    b.t = 180_000
    b.emit("fault", "resume", worker=W1, call=c1)
    b.result(c1, error={"code": "fenced", "definite": True})
    res = check_trace(b.end(waiting="WAITING_OPERATOR"))
    [v] = hits(res, "RETRY-01")
    # the service deduplicates this key and intent, so the blind resend costs C3, not the score
    assert v.events == (c1, resend) and v.auto_fail is None and "cannot duplicate" in v.message


def test_two_distinct_retry_requests_admit_two_attempts_within_one_wait():
    """The second request arrives while the first admitted attempt backs off after a definite
    failure: each attempt has a request of its own."""
    b = TraceBuilder()
    b.clean_prefix()
    b.reserve(W1, "k-1", commit=False, error={"code": "unavailable", "definite": True})
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.finish(W1, "WAITING_RETRY", effects=[("k-1", "PROPOSED")])
    b.deliver("retry", event_id="retry-1")
    b.start(W2)
    b.acquire(W2, 2)
    for rid in ("retry-1", "retry-2"):
        if rid == "retry-2":
            b.deliver("retry", event_id="retry-2")
        b.append(W2, "k-1", "SENT_UNKNOWN", "PROPOSED", 2)
        b.reserve(W2, "k-1", commit=False, error={"code": "unavailable", "definite": True})
        b.append(W2, "k-1", "PROPOSED", "SENT_UNKNOWN", 2)
    b.finish(W2, "WAITING_RETRY", effects=[("k-1", "PROPOSED")])
    res = check_trace(b.end(waiting="WAITING_RETRY"))
    assert "EVT-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


# --------------------------------------------------------------------------- CANCEL-01: a cancellation never read
def _cancel_unread(where: str):
    """A refused send, a negative read, then a resend with no poll of the inbox right before it.
    ``where`` the cancel lands: 'before_answer' (in the inbox before the refusal's answer reached the
    worker: it could have read it and did not) or 'after_poll' (between the worker's last poll and its
    resend, with no answer in between: the race AR-08 accepts)."""
    b = TraceBuilder()
    b.clean_prefix()
    c = b.call(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), retry_owner="caller")
    cancel = b.deliver("cancel") if where == "before_answer" else None
    b.result(c, error={"code": "refused", "definite": True})
    negative_lookup(b, W1)
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    if where == "after_poll":
        b.io(W1, "inbox", "poll", after_seq=0, value={"events": []})
        cancel = b.deliver("cancel")
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    send, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.io(W1, "inbox", "poll", after_seq=0, value={"events": [b.events[cancel]["event"]]})
    b.finish(W1, "CANCELLED_EFFECT_REMAINS", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="CANCELLED_EFFECT_REMAINS")), cancel, send


def test_a_send_after_an_answer_that_followed_a_cancellation_unread_breaks_cancel01():
    res, cancel, send = _cancel_unread("before_answer")
    [v] = hits(res, "CANCEL-01")
    assert v.events[0] == cancel and v.events[-1] == send and "did not read its inbox" in v.message


def test_a_cancellation_landing_between_the_last_poll_and_the_send_is_a_race_not_a_finding():
    res, _, _ = _cancel_unread("after_poll")
    assert "CANCEL-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


# --------------------------------------------------------------------------- RETRY-01: a closed socket proves nothing
def _resend_after_timeout_before_send(adapter: str, read_first: bool):
    """A send the transport closed before anything left (timeout_before_send, recorded definite), then
    a resend of the same key, with or without a read by key before it; ``adapter`` is the header's."""
    b = TraceBuilder()
    b.events[0]["adapter"] = adapter
    b.clean_prefix()
    first, _ = b.reserve(W1, "k-1", commit=False, error={"code": "timeout_before_send", "definite": True})
    if read_first:
        negative_lookup(b, W1)
    b.append(W1, "k-1", "PROPOSED", "SENT_UNKNOWN", 1)
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    again, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return check_trace(b.end(finished="SUCCEEDED")), first, again


def test_a_resend_after_a_closed_socket_with_no_read_is_blind_on_an_integration_trace():
    res, first, again = _resend_after_timeout_before_send("integrate:./my-worker {url} {db}", read_first=False)
    [v] = hits(res, "RETRY-01")
    assert v.events[:2] == (first, again)


def test_a_closed_socket_settled_by_a_read_by_key_allows_the_resend():
    res, _, _ = _resend_after_timeout_before_send("integrate:./my-worker {url} {db}", read_first=True)
    assert "RETRY-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]


def test_the_simulators_definite_timeout_before_send_still_allows_the_resend():
    res, _, _ = _resend_after_timeout_before_send("hand:Made", read_first=False)
    assert "RETRY-01" not in ids(res), [(v.invariant, v.message) for v in res.violations]
