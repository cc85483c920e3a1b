"""The reference adapter against its scenarios (tests/data/reference/*.yaml).

Every assertion reads the trace directly: the ``remote`` lane is the ground truth of
what the services did, the ``knowledge`` lane is what the ledger asserted, the ``run``
lane holds checkpoints, escalations and finishes, and the ``port`` lane every call.
The generic invariant checker (crashlab.checks) must also accept every trace.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from crashlab.run.runner import RunResult, run_scenario
from crashlab.scenario import from_dict, load_file

from crashlab.reference_impl import canonical

DATA = Path(__file__).parent / "data" / "reference"
ADAPTER = "crashlab.reference_impl:ReferenceAdapter"
INTENT = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19",
          "technician": "TECH-4", "quantity": 1, "principal": "U-7"}
#: Where the reference adapter and the invariant checker disagree, with the argument.


# --------------------------------------------------------------------------- helpers
@cache
def run(name: str) -> RunResult:
    return run_scenario(load_file(DATA / f"{name}.yaml"), ADAPTER)


def events(result: RunResult, lane: str | None = None, kind: str | None = None) -> list[dict]:
    return [e for e in result.events
            if (lane is None or e["lane"] == lane) and (kind is None or e["kind"] == kind)]


def intent_of(result: RunResult, run_id: str | None = None) -> dict:
    runs = result.events[0]["runs"]
    return next(r for r in runs if run_id in (None, r["id"]))["intent"]


def effects(result: RunResult) -> list[dict]:
    """Remote commits of the run's own business intent (ground truth)."""
    intent = intent_of(result)
    return [e for e in events(result, "remote", "effect")
            if all(e["intent"].get(k) == v for k, v in intent.items())]


def calls(result: RunResult, port: str, op: str) -> list[dict]:
    return [e for e in events(result, "port", "call") if e["port"] == port and e["op"] == op]


def result_of(result: RunResult, call: dict) -> dict:
    return next(e for e in events(result, "port", "result") if e["call"] == call["seq"])


def finishes(result: RunResult, accepted: bool = True) -> list[dict]:
    return [e for e in events(result, "run", "finish") if e["accepted"] is accepted]


def final(result: RunResult) -> dict:
    return finishes(result)[-1]


def ledger(result: RunResult, key: str | None = None) -> list[dict]:
    return [e for e in events(result, "knowledge", "ledger") if key in (None, e["key"])]


def knowledge_path(result: RunResult, key: str) -> list[str]:
    return [e["knowledge"] for e in ledger(result, key)]


def checkpoints(result: RunResult) -> list[dict]:
    return events(result, "run", "checkpoint")


def states(result: RunResult) -> list[str]:
    return [c["state"] for c in checkpoints(result)]


def primary_key(result: RunResult) -> str:
    return ledger(result)[0]["key"]


def sleeps(result: RunResult, prefix: str) -> list[dict]:
    return [c for c in calls(result, "clock", "sleep") if c["args"]["reason"].startswith(prefix)]


def escalations(result: RunResult) -> list[dict]:
    return events(result, "run", "escalation")


def checker_violations(result: RunResult) -> set[str]:
    from crashlab.checks import check_trace
    return {v.invariant for v in check_trace(result.events).violations}


SCENARIOS = sorted(p.stem for p in DATA.glob("*.yaml"))


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_trace_is_accepted_by_the_invariant_checker(name):
    result = run(name)
    assert checker_violations(result) == set()


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_run_ends_truthfully_with_one_owner_and_a_named_next_owner(name):
    result = run(name)
    end = final(result)
    unresolved = [e for e in end["effects"] if e["knowledge"] in ("SENT_UNKNOWN", "COMPENSATION_PROPOSED")]
    if unresolved or end["disposition"] in ("WAITING_OPERATOR", "CANCELLED_EFFECT_REMAINS"):
        assert end["next_owner"], end
        assert escalations(result), "an unresolved state is escalated with the decision packet"
        packet = escalations(result)[-1]["packet"]
        assert {"header", "effects", "authority", "compatibility", "budget", "recommended",
                "alternatives", "next_owner"} <= packet.keys()
    for cp in checkpoints(result):           # every checkpoint names its version and owner
        assert cp["checkpoint"]["control"]["state_version"] == cp["version"]
        assert cp["checkpoint"]["control"]["owner"] == cp["worker"]
    for e in events(result, "port", "call"):  # one retry owner on every effect call
        if e["op"] in ("reserve", "release", "send", "publish"):
            assert e["args"]["retry_owner"] == "caller"


# --------------------------------------------------------------------------- happy path
def test_happy_path_waits_for_approval_then_reserves_once():
    result = run("happy")
    assert [f["disposition"] for f in finishes(result)] == ["WAITING_HUMAN", "SUCCEEDED"]
    granted = events(result, "world", "approval_granted")[0]
    [reserve] = calls(result, "reservation", "reserve")
    assert reserve["t"] > granted["t"]
    assert len(effects(result)) == 1
    key = primary_key(result)
    assert knowledge_path(result, key) == ["PROPOSED", "SENT_UNKNOWN", "CONFIRMED"]
    assert states(result)[:3] == ["VALIDATED", "PROPOSED", "WAITING_HUMAN"]
    assert states(result)[-3:] == ["EFFECT_IN_FLIGHT", "EFFECT_CONFIRMED", "SUCCEEDED"]
    # the intent sent is the intake intent plus the proposal hash, under the prepared key
    prepared = ledger(result, key)[0]["entry"]
    assert reserve["args"]["intent"] == {**INTENT, "proposal_hash": prepared["proposal_hash"]}
    assert reserve["args"]["key"] == canonical.semantic_key("reserve", reserve["args"]["intent"], 1)
    assert ledger(result, key)[-1]["entry"]["remote_ref"] == effects(result)[0]["ref"]


def test_invalid_intake_stops_without_proposal_or_dispatch():
    result = run("invalid_intake")
    assert final(result)["disposition"] == "FAILED_NO_EFFECT"
    assert not calls(result, "reservation", "reserve")
    assert not calls(result, "authority", "request")
    assert states(result) == ["FAILED_NO_EFFECT"]


# --------------------------------------------------------------------------- ambiguity
def test_lost_response_is_reconciled_by_key_without_a_second_reservation():
    result = run("lost_response")
    [reserve] = calls(result, "reservation", "reserve")
    assert result_of(result, reserve)["error"]["code"] == "timeout"
    [lookup] = calls(result, "reservation", "lookup")
    assert lookup["args"]["key"] == reserve["args"]["key"]
    assert result_of(result, lookup)["value"]["found"] is True
    assert len(effects(result)) == 1
    assert knowledge_path(result, primary_key(result)) == ["PROPOSED", "SENT_UNKNOWN", "SENT_UNKNOWN",
                                                           "CONFIRMED"]
    assert final(result)["disposition"] == "SUCCEEDED"


def test_late_arrival_waits_while_in_flight_and_never_redispatches():
    result = run("late_arrival")
    assert len(calls(result, "reservation", "reserve")) == 1
    landed = events(result, "remote", "late_arrival")[0]
    reads = [result_of(result, c)["value"] for c in calls(result, "reservation", "lookup")]
    assert any(r["in_flight"] for r in reads), "the read saw the request still executing"
    confirmed = [e for e in ledger(result) if e["knowledge"] == "CONFIRMED"][0]
    assert confirmed["t"] > landed["t"]
    assert len(effects(result)) == 1
    assert sleeps(result, "reconcile key_in_flight")


def test_eventual_consistency_waits_for_an_authoritative_negative_read():
    result = run("eventual")
    first, second = calls(result, "reservation", "reserve")
    profile = result.events[0]["services"]["reservation"]
    timeout = result_of(result, first)
    reads = [(c, result_of(result, c)["value"]) for c in calls(result, "reservation", "lookup")]
    deciding = [c for c, v in reads if c["seq"] < second["seq"]][-1]
    as_of = result_of(result, deciding)["value"]["as_of"]
    assert as_of >= timeout["t"] + profile["max_delivery_delay_ms"], "a too-early negative read is not absence"
    assert second["args"]["key"] == first["args"]["key"], "same-key redispatch"
    assert len(effects(result)) == 1
    assert final(result)["disposition"] == "SUCCEEDED"


@pytest.mark.parametrize("name", ["no_lookup", "weak_service"])
def test_without_a_read_an_ambiguous_outcome_stays_unknown_and_is_never_retried(name):
    result = run(name)
    assert len(calls(result, "reservation", "reserve")) == 1
    assert len(effects(result)) == 1                   # it did land: "failed" would be a lie
    end = final(result)
    assert end["disposition"] == "FAILED_EFFECT_UNKNOWN"
    assert end["next_owner"] == "operator"
    assert [e["knowledge"] for e in end["effects"]] == ["SENT_UNKNOWN"]
    packet = escalations(result)[0]["packet"]
    assert packet["effects"][0]["authoritative_read"] == "none"
    # no read exists, so the packet recommends none: STOP with the effect unknown, and an
    # independent verification as the alternative
    assert packet["recommended"]["action"] == "STOP" and packet["recommended"]["effect"] == "unknown"
    assert [a["action"] for a in packet["alternatives"]] == ["MARK_EXTERNAL_REFERENCE"]


def test_notification_stays_unknown_and_the_disposition_stays_about_the_reservation():
    result = run("notify_unknown")
    assert len(effects(result)) == 1
    assert len(calls(result, "notification", "send")) == 1
    end = final(result)
    assert end["disposition"] == "SUCCEEDED"
    kinds = {e["service"]: e["knowledge"] for e in end["effects"]}
    assert kinds == {"reservation": "CONFIRMED", "notification": "SENT_UNKNOWN"}
    assert end["next_owner"] == "operator"
    send = calls(result, "notification", "send")[0]
    assert send["args"]["key"] != primary_key(result), "the notification has its own key"


def test_retention_expired_makes_a_negative_read_worthless():
    result = run("retention_expired")
    assert len(calls(result, "reservation", "reserve")) == 1
    [lookup] = calls(result, "reservation", "lookup")
    assert result_of(result, lookup)["value"]["found"] is False
    end = final(result)
    assert end["disposition"] == "FAILED_EFFECT_UNKNOWN"
    assert "key_retention_expired" in end["reason"]
    assert len(effects(result)) == 1


def test_reconciliation_down_until_the_deadline_escalates_unknown():
    result = run("reconciliation_down")
    assert len(calls(result, "reservation", "reserve")) == 1
    end = final(result)
    deadline = result.events[0]["runs"][0]["deadline"]
    assert end["disposition"] == "FAILED_EFFECT_UNKNOWN" and end["t"] >= deadline
    assert "reconciliation_service_down" in end["reason"]
    # every wait between failed reads is a recorded, jittered backoff that stops at the deadline
    waits = sleeps(result, "backoff transient_read")
    assert waits and all(w["t"] + w["args"]["ms"] <= deadline for w in waits)
    assert len(calls(result, "random", "draw")) >= len(waits)


def test_late_callback_is_evidence_only():
    result = run("late_callback")
    callback = next(e for e in events(result, "world", "deliver") if e["event"]["type"] == "callback")
    after = [e for e in ledger(result) if e["t"] >= callback["t"]]
    assert after[0]["knowledge"] == "PROPOSED", "reconciliation (absence), not the callback, decides"
    recorded = checkpoints(result)[-1]["checkpoint"]["evidence"]["events"]
    [entry] = [e for e in recorded if e["type"] == "callback"]
    assert entry["disposition"].startswith("late_callback")
    assert len(effects(result)) == 1


# --------------------------------------------------------------------------- retries
def test_throttling_backs_off_past_retry_after_with_seeded_jitter_under_one_key():
    result = run("throttling")
    reserves = calls(result, "reservation", "reserve")
    assert len(reserves) == 3 and len({c["args"]["key"] for c in reserves}) == 1
    backoffs = sleeps(result, "backoff throttling")
    assert len(backoffs) == 2 and all(b["args"]["ms"] >= 5000 for b in backoffs)
    assert [c["args"]["reason"] for c in calls(result, "random", "draw")][:2] == [
        "jitter throttling reservation.reserve #1", "jitter throttling reservation.reserve #2"]
    assert checkpoints(result)[-1]["checkpoint"]["control"]["budgets"]["attempt_ceiling"] == 3
    assert len(effects(result)) == 1


def test_a_retrying_proxy_is_told_the_caller_owns_retries():
    result = run("retry_amplification")
    assert not events(result, "remote", "proxy_retry")
    reserves = calls(result, "reservation", "reserve")
    assert len(reserves) == 2                    # after authoritative absence only
    assert calls(result, "reservation", "lookup")[-1]["seq"] < reserves[1]["seq"]
    assert len(effects(result)) == 1


def test_deliberate_retry_admits_exactly_one_attempt():
    result = run("deliberate_retry")
    assert [f["disposition"] for f in finishes(result)] == ["WAITING_RETRY", "SUCCEEDED"]
    reserves = calls(result, "reservation", "reserve")
    assert len(reserves) == 4
    attempts = ledger(result)[-1]["entry"]["attempts"]
    assert [a["retry_id"] for a in attempts] == [None, None, None, "R-1"]
    retry = next(e for e in events(result, "world", "deliver") if e["event"]["type"] == "retry")
    assert reserves[3]["t"] > retry["t"]
    assert checkpoints(result)[-1]["checkpoint"]["control"]["budgets"]["attempt_ceiling"] == 4


def test_recovery_during_an_admitted_retry_reconciles_and_never_mints_another():
    result = run("deliberate_retry_crash")
    assert events(result, "fault", "crash")
    reserves = calls(result, "reservation", "reserve")
    assert len(reserves) == 4                    # the 4th was claimed, then the worker died before it
    claims = [a for a in ledger(result)[-1]["entry"]["attempts"] if a["retry_id"] == "R-1"]
    assert len(claims) == 1
    crash = events(result, "fault", "crash")[0]
    assert any(c["t"] > crash["t"] for c in calls(result, "reservation", "lookup"))
    assert not effects(result)
    dispositions = [f["disposition"] for f in finishes(result)]
    assert dispositions.count("WAITING_RETRY") >= 2 and dispositions[-1] == "FAILED_NO_EFFECT"


# --------------------------------------------------------------------------- refusals
def test_permission_denied_stops_and_escalates_without_another_principal():
    result = run("permission_denied")
    [reserve] = calls(result, "reservation", "reserve")
    assert result_of(result, reserve)["error"]["code"] == "permission_denied"
    assert knowledge_path(result, primary_key(result))[-1] == "REJECTED"
    end = final(result)
    assert (end["disposition"], end["next_owner"]) == ("FAILED_NO_EFFECT", "security")
    principals = {c["args"]["intent"]["principal"] for c in events(result, "port", "call")
                  if "intent" in c["args"]}
    assert principals == {"U-7"}


def _collision(idempotency: str, **other_intent) -> RunResult:
    intent = {**INTENT, "proposal_hash": canonical.proposal_hash("reserve", INTENT, 1)}
    key = canonical.semantic_key("reserve", intent, 1)
    doc = {"id": "ref-key-collision", "title": "key collision", "clock": {"origin": "10:00", "horizon": "11:00"},
           "services": {"reservation": {"idempotency": idempotency}},
           "runs": [{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}, "start": "10:01"}],
           "events": [{"at": "10:00:10", "type": "other_actor",
                       "args": {"key": key, "intent": {**intent, **other_intent}}}]}
    return run_scenario(from_dict(doc, file="collision.yaml"), ADAPTER)


def test_a_422_under_the_key_is_an_integrity_stop_without_retry():
    result = _collision("semantic", quantity=3)
    [reserve] = calls(result, "reservation", "reserve")
    assert result_of(result, reserve)["error"]["code"] == "intent_mismatch"
    end = final(result)
    assert (end["disposition"], end["next_owner"]) == ("FAILED_NO_EFFECT", "service_owner")
    assert knowledge_path(result, reserve["args"]["key"])[-1] == "REJECTED"
    assert not effects(result)
    assert checker_violations(result) == set()


def test_a_key_only_replay_naming_another_intent_is_contradictory_evidence():
    result = _collision("key_only", quantity=3)
    [reserve] = calls(result, "reservation", "reserve")
    assert result_of(result, reserve)["value"]["intent"]["quantity"] == 3     # the other actor's record
    end = final(result)
    assert (end["disposition"], end["next_owner"]) == ("FAILED_EFFECT_UNKNOWN", "service_owner")
    assert "contradictory_evidence" in end["reason"]
    assert not effects(result)
    assert checker_violations(result) == set()


# --------------------------------------------------------------------------- cancellation
def test_cancellation_during_the_approval_wait_has_no_effect():
    result = run("cancel_before_dispatch")
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT"
    assert not calls(result, "reservation", "reserve") and not ledger(result)
    # the late approval arrives after the run is terminal: the worker it wakes only replays
    late = events(result, "worker", "start")[2:]
    assert len(late) == 1 and not calls(result, "reservation", "reserve")
    assert [f["disposition"] for f in finishes(result, accepted=False)] == ["CANCELLED_NO_EFFECT"]


def test_cancellation_after_prepare_closes_the_prepared_entry():
    result = run("cancel_after_prepare")
    assert not calls(result, "reservation", "reserve")
    assert knowledge_path(result, primary_key(result)) == ["PROPOSED", "REJECTED"]
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT"


def test_cancellation_in_flight_reconciles_then_releases_as_a_separate_effect():
    result = run("cancel_in_flight")
    cancel = next(e for e in events(result, "world", "deliver") if e["event"]["type"] == "cancel")
    assert all(c["t"] < cancel["t"] for c in calls(result, "reservation", "reserve"))
    assert len(effects(result)) == 1
    key = primary_key(result)
    assert knowledge_path(result, key)[-3:] == ["CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED"]
    [release] = calls(result, "reservation", "release")
    comp = ledger(result, release["args"]["key"])[0]["entry"]
    assert comp["kind"] == "compensation" and comp["compensates"] == key
    assert comp["proposal_hash"] != ledger(result, key)[0]["entry"]["proposal_hash"]
    assert events(result, "remote", "released")
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT"
    # the duplicate cancel delivery is recorded and caused no second transition
    recorded = checkpoints(result)[-1]["checkpoint"]["evidence"]["events"]
    cancels = [e for e in recorded if e["type"] == "cancel"]
    assert [c["disposition"].split(":")[0] for c in cancels] == ["accepted", "duplicate_event"]


def test_cancellation_with_a_dropped_request_ends_without_effect_after_authoritative_absence():
    result = run("cancel_in_flight_absent")
    assert len(calls(result, "reservation", "reserve")) == 1
    assert knowledge_path(result, primary_key(result))[-2:] == ["PROPOSED", "REJECTED"]
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT" and not effects(result)


def test_cancellation_after_commit_is_compensated_and_verified():
    result = run("cancel_after_commit")
    [release] = calls(result, "reservation", "release")
    verify = [c for c in calls(result, "reservation", "lookup") if c["seq"] > release["seq"]]
    assert verify and result_of(result, verify[0])["value"]["record"]["status"] == "released"
    assert events(result, "run", "approval_requested")[-1]["action"] == "release"
    assert len(calls(result, "reservation", "reserve")) == 1
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT"


def test_failed_compensation_keeps_both_records_and_reports_the_effect_remains():
    result = run("compensation_failed")
    releases = calls(result, "reservation", "release")
    assert len(releases) == 3 and len({r["args"]["key"] for r in releases}) == 1
    key = primary_key(result)
    assert knowledge_path(result, key)[-2:] == ["COMPENSATION_PROPOSED", "CONFIRMED"]
    assert knowledge_path(result, releases[0]["args"]["key"])[-1] == "REJECTED"
    end = final(result)
    assert end["disposition"] == "CANCELLED_EFFECT_REMAINS" and end["next_owner"] == "operator"


def test_denied_compensation_authority_leaves_the_effect_remaining():
    result = run("compensation_denied")
    assert not calls(result, "reservation", "release")
    end = final(result)
    assert (end["disposition"], end["next_owner"]) == ("CANCELLED_EFFECT_REMAINS", "coordinator")
    assert escalations(result)[-1]["packet"]["recommended"]["action"] == "COMPENSATE"


def test_ambiguous_compensation_with_reads_down_ends_unknown_with_both_records():
    result = run("compensation_unknown")
    assert len(calls(result, "reservation", "release")) == 1
    end = final(result)
    assert end["disposition"] == "CANCELLED_EFFECT_UNKNOWN"
    assert sorted(e["knowledge"] for e in end["effects"]) == ["COMPENSATION_PROPOSED", "SENT_UNKNOWN"]
    assert end["next_owner"] == "operator"


def test_cancellation_under_pressure_blocks_new_work_and_ends_at_the_deadline():
    result = run("pressure")
    cancel = next(e for e in events(result, "world", "deliver") if e["event"]["type"] == "cancel")
    assert all(c["t"] < cancel["t"] for c in calls(result, "reservation", "reserve"))
    assert events(result, "worker", "takeover")
    end = final(result)
    assert end["disposition"] == "CANCELLED_EFFECT_UNKNOWN"
    assert end["t"] >= result.events[0]["runs"][0]["deadline"]
    assert "CONFIRMED" not in [e["knowledge"] for e in ledger(result)], "the callback is not proof"
    assert len(effects(result)) == 1


# --------------------------------------------------------------------------- waiting, deployment
def test_crash_while_waiting_restores_the_wait_and_never_invents_approval():
    result = run("approval_wait_crash")
    approve = events(result, "world", "approve")[0]
    assert all(c["t"] > approve["t"] for c in calls(result, "reservation", "reserve"))
    assert len(events(result, "fault", "crash")) == 2
    assert finishes(result)[0]["disposition"] == "WAITING_HUMAN"
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_migration_keeps_the_frozen_proposal_and_key_and_issues_no_effect():
    result = run("migration")
    cps = checkpoints(result)
    i = states(result).index("MIGRATING")
    migration = cps[i]["checkpoint"]["migration"]
    unchanged = {"policy_version": 1, "capability_version": 1}
    assert migration["from"] == {"schema_version": 1, "canonicalization_version": 1, **unchanged}
    assert migration["to"] == {"schema_version": 2, "canonicalization_version": 2, **unchanged}
    assert migration["previous_version"] == cps[i - 1]["version"] and migration["changes"]
    assert cps[i + 1]["state"] == cps[i - 1]["state"] == "WAITING_HUMAN"
    assert not [c for c in events(result, "port", "call")
                if cps[i - 1]["seq"] < c["seq"] < cps[i + 1]["seq"] and c["port"] == "reservation"]
    assert isinstance(cps[i]["checkpoint"]["evidence"]["events"], dict)      # schema 2 layout
    assert cps[i]["checkpoint"]["evidence"]["proposal_hash"] == cps[i - 1]["checkpoint"]["evidence"]["proposal_hash"]
    entry = ledger(result)[0]["entry"]
    assert entry["canonicalization_version"] == 1 and entry["semantic_key"].startswith("reserve-v1-")
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_migration_never_refreshes_an_expired_approval():
    result = run("migration_expired_approval")
    assert "MIGRATING" in states(result)
    requests = events(result, "run", "approval_requested")
    assert len(requests) == 2 and requests[0]["proposal_hash"] == requests[1]["proposal_hash"]
    second_grant = events(result, "world", "approval_granted")[1]
    [reserve] = calls(result, "reservation", "reserve")
    assert reserve["t"] > second_grant["t"]
    assert reserve["args"]["key"] == primary_key(result), "the key prepared before the crash"
    assert len(effects(result)) == 1


def test_an_untested_rollback_pins_the_run_to_its_versions():
    result = run("pin")
    pinned = next(f for f in finishes(result) if f["disposition"] == "PINNED")
    assert pinned["packet"]["pinned_env"] == {"schema_version": 2, "canonicalization_version": 2,
                                              "policy_version": 1, "capability_version": 1}
    starts = events(result, "worker", "start")
    after = [s for s in starts if s["t"] >= pinned["t"]][0]
    assert after["env"]["schema_version"] == 2
    assert {c["checkpoint"]["contract"]["schema_version"] for c in checkpoints(result)} == {2}
    assert final(result)["disposition"] == "SUCCEEDED"


def test_an_unimplemented_schema_stops_before_any_write():
    result = run("stop")
    assert not checkpoints(result) and not calls(result, "reservation", "reserve")
    end = final(result)
    assert end["disposition"] == "WAITING_OPERATOR"
    assert escalations(result)[0]["packet"]["classification"]["row"] == "incompatible_version"


def test_a_duplicated_cancel_causes_one_transition():
    result = run("duplicate_cancel")
    recorded = checkpoints(result)[-1]["checkpoint"]["evidence"]["events"]
    cancels = [e for e in recorded if e["type"] == "cancel"]
    assert len(cancels) == 2 and len({c["event_id"] for c in cancels}) == 1
    assert cancels[1]["disposition"].startswith("duplicate_event: duplicate of seq")
    assert [f["disposition"] for f in finishes(result)] == ["WAITING_HUMAN", "CANCELLED_NO_EFFECT"]


# --------------------------------------------------------------------------- ownership
def test_a_zombie_past_its_lease_is_fenced_by_the_checkpoint_and_never_dispatches():
    result = run("zombie")
    resume = events(result, "fault", "resume")[0]
    zombie = resume["worker"]
    assert not [c for c in calls(result, "reservation", "reserve") if c["worker"] == zombie]
    rejected = [e for e in events(result, "run", "checkpoint_rejected") if e["worker"] == zombie]
    assert rejected and not [e for e in ledger(result) if e["worker"] == zombie and e["t"] > resume["t"]]
    assert finishes(result, accepted=False)[0]["worker"] == zombie
    assert len(effects(result)) == 1 and final(result)["disposition"] == "SUCCEEDED"


def test_a_zombie_paused_at_the_send_is_refused_by_the_fencing_service():
    result = run("zombie_fenced")
    zombie = events(result, "fault", "resume")[0]["worker"]
    [stale] = [c for c in calls(result, "reservation", "reserve") if c["worker"] == zombie]
    assert result_of(result, stale)["error"]["code"] == "fenced"
    assert len(effects(result)) == 1


# --------------------------------------------------------------------------- seed 000: registry
def test_registry_publish_keeps_the_job_id_through_short_waits():
    result = run("registry_publish")
    assert len(calls(result, "registry", "publish")) == 1
    waits = [result_of(result, c)["value"]["status"] for c in calls(result, "registry", "wait_job")]
    assert waits[0] == "running" and waits[-1] == "succeeded"
    job = result_of(result, calls(result, "registry", "publish")[0])["value"]["job_id"]
    pending = [e for e in ledger(result) if e["knowledge"] == "SENT_UNKNOWN"][-1]
    assert pending["entry"]["remote_ref"] == job
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_registry_lost_publish_is_reconciled_through_get_version():
    result = run("registry_lost_publish")
    assert len(calls(result, "registry", "publish")) == 1
    reads = [result_of(result, c)["value"] for c in calls(result, "registry", "get_version")]
    assert reads[0]["in_flight"] and reads[-1]["found"]
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_registry_already_exists_is_verified_not_assumed_ours():
    result = run("registry_taken")
    [publish] = calls(result, "registry", "publish")
    assert result_of(result, publish)["error"]["code"] == "already_exists"
    assert calls(result, "registry", "get_version")
    end = final(result)
    assert (end["disposition"], end["next_owner"]) == ("FAILED_NO_EFFECT", "service_owner")
    assert not effects(result)


# --------------------------------------------------------------------------- handoff rehearsal
def test_handoff_1_reconciles_by_key_preserves_cancellation_and_never_dispatches():
    result = run("handoff_1")
    epochs = [e["epoch"] for e in events(result, "run", "lease") if e["op"] == "acquire"]
    assert epochs == [1, 2]
    assert len(calls(result, "reservation", "reserve")) == 1
    assert calls(result, "reservation", "lookup")[0]["args"]["key"] == primary_key(result)
    assert final(result)["disposition"] in ("CANCELLED_EFFECT_REMAINS", "CANCELLED_NO_EFFECT",
                                            "CANCELLED_EFFECT_UNKNOWN")
    assert final(result)["disposition"] == "CANCELLED_EFFECT_REMAINS"


def test_handoff_2_replays_the_confirmed_result_after_migration():
    result = run("handoff_2")
    assert len(calls(result, "reservation", "reserve")) == 1
    assert states(result)[-4:] == ["MIGRATING", "EFFECT_IN_FLIGHT", "EFFECT_CONFIRMED", "SUCCEEDED"]
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_handoff_3_reconciles_the_corrective_effect_separately():
    result = run("handoff_3")
    [release] = calls(result, "reservation", "release")
    comp_key = release["args"]["key"]
    assert knowledge_path(result, comp_key) == ["PROPOSED", "SENT_UNKNOWN", "CONFIRMED"]
    assert knowledge_path(result, primary_key(result))[-1] == "COMPENSATED"
    assert final(result)["disposition"] == "CANCELLED_NO_EFFECT"


def test_a_lease_holder_with_an_old_view_rereads_instead_of_writing_over_newer_truth():
    result = run("stale_view")
    slow = events(result, "fault", "pause")[0]["worker"]
    newer = [c for c in checkpoints(result) if c["worker"] != slow]
    mine = [c for c in checkpoints(result) if c["worker"] == slow]
    before = [c for c in newer if c["seq"] < mine[0]["seq"]]
    assert before and before[-1]["state"] == "WAITING_HUMAN"
    assert mine[0]["checkpoint"]["control"]["budgets"]["rereads"] == ["stale_checkpoint"]
    assert mine[0]["state"] == "WAITING_HUMAN", "it resumed from the newer truth, not from its old view"
    epochs = [e["epoch"] for e in events(result, "run", "lease") if e["op"] == "acquire" and e["worker"] == slow]
    assert len(epochs) == 2, "the reread acquires a new epoch"
    assert [c["checkpoint"]["control"]["state_version"] for c in checkpoints(result)] == \
        list(range(1, len(checkpoints(result)) + 1)), "versions only advance"
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_a_lease_that_lapsed_with_nobody_taking_over_is_reacquired_not_abandoned():
    result = run("lease_lapsed")
    lapsed = [r for r in events(result, "port", "result")
              if not r["ok"] and r["error"]["code"] == "stale_epoch"]
    assert lapsed and lapsed[0]["error"]["details"]["current_epoch"] == 1
    acquires = [e["epoch"] for e in events(result, "run", "lease") if e["op"] == "acquire"]
    assert acquires == [1, 2]
    assert checkpoints(result)[-1]["checkpoint"]["control"]["budgets"]["rereads"] == ["lease_lapsed"]
    assert len(calls(result, "registry", "publish")) == 1
    assert final(result)["disposition"] == "SUCCEEDED" and len(effects(result)) == 1


def test_cancellation_while_the_message_is_in_flight_releases_and_keeps_the_message_unknown():
    result = run("cancel_during_notification")
    notifying = states(result).index("NOTIFYING")
    assert "COMPENSATING" in states(result)[notifying:]
    assert events(result, "remote", "released")
    end = final(result)
    assert end["disposition"] == "CANCELLED_NO_EFFECT"
    knowledge = {e["service"] + "/" + e["kind"]: e["knowledge"] for e in end["effects"]}
    assert knowledge == {"reservation/effect": "COMPENSATED", "reservation/compensation": "CONFIRMED",
                         "notification/effect": "SENT_UNKNOWN"}
    assert end["next_owner"] == "operator" and len(calls(result, "notification", "send")) == 1


# --------------------------------------------------------------------------- fixed reference bugs
def test_a_replayed_released_hold_is_not_confirmed_and_the_run_does_not_claim_success():
    result = run("resubmitted_after_release")
    second = [f for f in finishes(result) if f["run"] == "run-82b"]
    assert [f["disposition"] for f in second] == ["FAILED_EFFECT_UNKNOWN"]
    entries = [e["entry"] for e in ledger(result) if e["run"] == "run-82b"]
    assert entries and all(e["knowledge"] != "CONFIRMED" for e in entries)
    assert entries[-1]["note"] == "effect_released"
    assert escalations(result)[-1]["packet"]["next_owner"] == "operator"


def test_an_attempt_admitted_by_a_deliberate_retry_follows_a_backoff():
    result = run("retry_admitted_without_backoff")
    reserves = calls(result, "reservation", "reserve")
    assert len(reserves) == 4
    backoffs = sleeps(result, "backoff")
    for before, after in zip(reserves, reserves[1:]):
        assert any(before["seq"] < b["seq"] < after["seq"] for b in backoffs), (before["seq"], after["seq"])


def test_a_retry_after_past_the_deadline_stops_without_resending():
    result = run("throttled_near_deadline")
    assert len(calls(result, "reservation", "reserve")) == 1
    end = finishes(result)[-1]
    assert end["disposition"] == "FAILED_NO_EFFECT" and end["t"] <= 120_000
    assert ledger(result)[-1]["entry"]["knowledge"] == "REJECTED"


def test_a_cancelled_resubmission_escalates_the_shared_hold_instead_of_releasing_it():
    """A run compensates only what it caused: the hold run-82b created (and reports) is
    found by run-82 under the shared key, committed before run-82's first attempt."""
    result = run("shared_hold")
    assert not events(result, "remote", "released")
    assert not [c for c in calls(result, "reservation", "release")]
    last = {f["run"]: f for f in finishes(result)}
    assert last["run-82b"]["disposition"] == "SUCCEEDED"
    assert last["run-82"]["disposition"] == "CANCELLED_EFFECT_REMAINS"
    assert last["run-82"]["next_owner"] == "operator"
    packet = [e for e in events(result, "run", "escalation") if e["run"] == "run-82"][-1]["packet"]
    assert packet["classification"]["row"] == "shared_effect" and packet["recommended"]["action"] == "STOP"
    from crashlab.checks import check_trace
    assert check_trace(result.events).verdict == "pass"


def test_a_run_without_a_business_deadline_keeps_none_and_its_packet_says_so():
    """The reference invents no deadline: an intake that names none gives checkpoints with
    ``control.deadline`` null and a decision packet whose budget has no deadline and no
    time remaining (it used to show 10:30, 30 minutes after intake)."""
    from crashlab.scenario.loader import library

    sc = next(s for s in library() if s.id == "fieldops-no-key-lookup")
    result = run_scenario(sc, ADAPTER)
    intake = next(e for e in events(result, "world", "deliver") if e["event"]["type"] == "intake")
    assert intake["event"]["payload"]["deadline"] is None
    held = [c["checkpoint"]["control"]["deadline"] for c in checkpoints(result)]
    assert held and all(d is None for d in held), held
    budget = escalations(result)[-1]["packet"]["budget"]
    assert budget["deadline"] is None and budget["time_remaining_ms"] is None, budget
