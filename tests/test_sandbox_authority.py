"""The sandbox's authority port (crashlab.sandbox.authority): the simulator's approval semantics
(crashlab.world.approvals) over HTTP, the scenario's approve / revoke / capability_change delivered
to the run's inbox, and the approval policy the trace's header records for AUTH-01."""
from __future__ import annotations

import time

import pytest

from crashlab.scenario.loader import from_dict
from crashlab.world import approvals
from crashlab.world.ports import PortError
from test_sandbox import INTENT, Client

H = "sha256:proposal-1"


def scenario(approval=None, events=(), compensation="granted"):
    run = {"id": "run-1", "intent": INTENT, "compensation_authority": compensation}
    if approval is not None:
        run["approval"] = approval
    return from_dict({"id": "authority-test", "title": "authority test", "seed": 1,
                      "clock": {"origin": "10:00", "horizon": "10:30"},
                      "services": {"reservation": {}}, "runs": [run], "events": list(events)})


def inbox(c):
    return [e for e in c.get("/inbox?after_seq=0")[1]["events"] if e["type"] != "intake"]


def wait_for(c, kind, limit=5.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        found = [e for e in inbox(c) if e["type"] == kind]
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"no {kind} in the inbox within {limit} s: {inbox(c)}")


def test_an_auto_approval_is_granted_after_its_delay_and_is_live_until_it_expires(serve):
    sb = serve(scenario({"mode": "auto", "delay": "30s", "expires_after": "2m"}), scale=100.0)
    c = Client(sb)
    status, body, _ = c.get(f"/authority/check?proposal_hash={H}&action=reserve")
    assert status == 200 and body["live"] is False and body["reason"] == "no approval bound to this proposal hash"
    status, body, _ = c.post("/authority/request", {"proposal_hash": H, "action": "reserve"})
    assert (status, body) == (200, {"request_id": "AR-1"})
    grant = wait_for(c, "approval")[0]["payload"]
    assert grant["proposal_hash"] == H and grant["request_id"] == "AR-1"
    assert c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]["live"] is True
    assert c.get(f"/authority/check?proposal_hash=other&action=reserve")[1]["live"] is False
    kinds = [e["kind"] for e in sb.trace.events]
    assert "approval_requested" in kinds and "approval_granted" in kinds
    # expiry is on the scenario clock: 2 minutes pass in 1.2 s at scale 100
    time.sleep(1.4)
    body = c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]
    assert body["live"] is False and body["reason"] == "expired"


def test_manual_approval_waits_for_the_scenario_then_revocation_and_capability_change_end_it(serve):
    events = [{"at": "10:00:30", "type": "approve"}, {"at": "10:01", "type": "revoke", "reason": "withdrawn"}]
    sb = serve(scenario({"mode": "manual"}, events), scale=100.0)
    c = Client(sb)
    c.post("/authority/request", {"proposal_hash": H, "action": "reserve"})
    assert c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]["live"] is False   # not before 10:00:30
    wait_for(c, "approval")
    revoked = wait_for(c, "revocation")[0]
    assert revoked["payload"] == {"reason": "withdrawn"} and revoked["producer"] == "authority"
    body = c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]
    assert body == {"live": False, "approval_id": None, "expires_at": None, "revoked": True,
                    "capability_version": 1, "reason": "revoked"}


def test_a_capability_change_outlives_an_approval(serve):
    events = [{"at": "10:00:20", "type": "capability_change"}]
    sb = serve(scenario({"mode": "auto", "delay": "1s"}, events), scale=100.0)
    c = Client(sb)
    c.post("/authority/request", {"proposal_hash": H, "action": "reserve"})
    wait_for(c, "approval")
    wait_for(c, "capability_change")
    body = c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]
    assert body["reason"] == "capability version changed" and body["capability_version"] == 2


def test_a_release_needs_its_own_approval_and_a_denied_policy_never_grants_it(serve):
    sb = serve(scenario({"mode": "none"}, compensation="denied"), scale=100.0)
    c = Client(sb)
    assert c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]["live"] is True   # standing, own operation
    c.post("/authority/request", {"proposal_hash": "sha256:release", "action": "release"})
    time.sleep(0.2)
    body = c.get("/authority/check?proposal_hash=sha256:release&action=release")[1]
    assert body["live"] is False and body["reason"] == "denied by policy"
    assert not [e for e in inbox(c) if e["type"] == "approval"]


def test_a_request_without_hash_and_action_is_a_400_and_an_unknown_operation_a_404(serve):
    sb = serve(scenario({"mode": "auto"}), scale=100.0)
    c = Client(sb)
    status, body, _ = c.post("/authority/request", {"action": "reserve"})
    assert status == 400 and "proposal_hash and action" in body["error"]["message"]
    status, body, _ = c.get("/authority/grant")
    assert status == 404 and "authority" in body["error"]["message"]


def test_the_header_records_the_policy_the_sandbox_applies(serve):
    declared = serve(scenario({"mode": "manual"}), scale=100.0)
    silent = serve(scenario(None), scale=100.0)
    assert declared.trace.events[0]["runs"][0]["approval"] == "manual"
    # no approval policy in the scenario: a standing approval for the run's own operation
    assert silent.trace.events[0]["runs"][0]["approval"] == "none"
    c = Client(silent)
    assert c.get(f"/authority/check?proposal_hash={H}&action=reserve")[1]["live"] is True


def test_the_simulator_and_the_sandbox_decide_by_the_same_functions():
    book = approvals.Book()
    policy = approvals.Policy(mode="manual", delay_ms=0, expires_after_ms=1000, operation="reserve",
                              compensation_authority="granted")
    assert approvals.approve(book, {}) is None                 # an approve before any request answers the next
    req, delay = approvals.request(book, policy, {"proposal_hash": H, "action": "reserve"}, 10)
    assert delay == 0 and not book.pending_approve
    ap, payload = approvals.grant(book, policy, req, 20)
    assert payload["expires_at"] == 1020 and approvals.live(book, policy, H, "reserve", 1019) is ap
    assert approvals.live(book, policy, H, "reserve", 1020) is None
    with pytest.raises(PortError, match="proposal_hash and action"):
        approvals.request(book, policy, {"proposal_hash": 3, "action": "reserve"}, 0)


def test_the_default_suite_asks_no_approval_unless_tagged_for_the_authority_suite(serve):
    from crashlab.scenario.loader import resolve

    t1 = resolve("t1-crash-before-dispatch")          # declares auto approval, for the simulator
    assert "integration" in t1.tags and t1.runs[0].approval["mode"] == "auto"
    assert serve(t1, scale=100.0).trace.events[0]["runs"][0]["approval"] == "none"
    t4 = resolve("t4-approval-wait-crash")
    assert serve(t4, scale=100.0).trace.events[0]["runs"][0]["approval"] == "manual"
