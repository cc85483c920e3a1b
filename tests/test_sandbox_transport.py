"""One copy of the transport-fault semantics: transport.plan() decides what happens to a service
call under a fault rule; the world and the sandbox only interpret its steps."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashlab.world import transport as tp
from crashlab.vocab.compiled import Match, Rule
from crashlab.world.services import PROFILE_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
RES = dict(PROFILE_DEFAULTS["reservation"])
INTENT = {"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1", "technician": "X", "quantity": 1,
          "principal": "U-1"}


def rule(fault: str, **kw) -> Rule:
    return Rule(action="fault", match=Match(), fault=fault, **kw)


def kinds(steps) -> list[str]:
    return [type(s).__name__ for s in steps]


def commits(steps) -> int:
    return sum(isinstance(s, tp.Commit) for s in steps)


def test_an_unfaulted_call_travels_commits_calls_back_and_answers():
    steps = tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"})
    assert kinds(steps) == ["Wait", "Admit", "Commit", "Callback", "Wait", "Answer"]


@pytest.mark.parametrize("fault,committed,last", [
    ("refused", 0, "Close"), ("timeout_before_send", 0, "Close"), ("throttled", 0, "Fail"),
    ("unavailable", 0, "Fail"), ("drop_request", 0, "Close"), ("server_error_before", 0, "Fail"),
    ("server_error_after", 1, "Fail"), ("lost_response", 1, "Close"), ("duplicate_delivery", 1, "Answer"),
    ("late_arrival", 0, "Close")])
def test_each_fault_commits_or_not_and_ends_as_its_table_says(fault, committed, last):
    steps = tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"}, rule(fault))
    assert commits(steps) == committed and kinds(steps)[-1] == last


def test_a_lost_response_commits_before_the_connection_closes_and_a_409_is_checked_first():
    steps = kinds(tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"}, rule("lost_response")))
    assert steps.index("Admit") < steps.index("Commit") < steps.index("Close")


def test_a_late_arrival_holds_its_key_and_lands_later_recording_a_refusal():
    (later, *rest) = tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"},
                             rule("late_arrival", delay_ms=7000))
    assert isinstance(later, tp.Later) and later.holds_key and later.delay_ms == 7000
    assert [type(s).__name__ for s in later.steps] == ["Emit", "Commit", "Callback"]
    assert later.steps[1].on_refusal == "record" and isinstance(rest[-1], tp.Close)


def test_a_duplicate_delivery_executes_again_later_with_its_own_cause():
    steps = tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"}, rule("duplicate_delivery"))
    later = next(s for s in steps if isinstance(s, tp.Later))
    assert later.delay_ms == 5 and not later.holds_key and later.steps[1].cause == "duplicate_delivery"


def test_a_proxy_re_sends_on_5xx_unless_the_caller_owns_retries():
    prof = {**RES, "proxy_retries": 2}
    theirs = tp.plan("reservation", "reservation", prof, "reserve", {"key": "k"}, rule("server_error_before"))
    mine = tp.plan("reservation", "reservation", prof, "reserve", {"key": "k", "retry_owner": "caller"},
                   rule("server_error_before"))
    reads = tp.plan("reservation", "reservation", prof, "lookup", {"key": "k"}, rule("server_error_after"))
    assert [s.cause for s in theirs if isinstance(s, tp.Commit)] == ["proxy_retry", "proxy_retry"]
    assert commits(mine) == 0 and commits(reads) == 1     # a read is never re-sent by the proxy


def test_a_429_carries_the_rules_delay_and_the_default_one():
    assert tp.plan("r", "reservation", RES, "reserve", {}, rule("throttled", delay_ms=2500))[-1].details == \
        {"retry_after_ms": 2500}
    assert tp.plan("r", "reservation", RES, "reserve", {}, rule("throttled"))[-1].details == {"retry_after_ms": 1000}


def test_the_plan_is_pure_data():
    steps = tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"}, rule("lost_response"))
    assert steps == tp.plan("reservation", "reservation", RES, "reserve", {"key": "k"}, rule("lost_response"))
    assert all(s.span in tp.SPANS for s in steps if isinstance(s, tp.Wait))
    assert "import simpy" not in (ROOT / "harness" / "world/transport.py").read_text()


@pytest.mark.parametrize("module", ["world/world.py", "sandbox/server.py"])
def test_no_interpreter_decides_a_fault_by_its_name(module):
    """The world and the sandbox interpret plans; a fault's name in them would be a second copy."""
    source = (ROOT / "harness" / module).read_text()
    names = ("refused", "timeout_before_send", "throttled", "drop_request", "late_arrival", "server_error_before",
             "server_error_after", "lost_response", "duplicate_delivery")
    found = [n for n in names if re.search(rf"[\"']{n}[\"']", source)]
    assert not found, f"{module} branches on {found}: move the decision into transport.plan()"


def _expected_kinds(steps) -> list[str]:
    """The remote-lane events a plan's steps produce when every commit is new (no refusal)."""
    out = []
    for step in steps:
        if isinstance(step, tp.Emit):
            out.append(step.event.kind)
        elif isinstance(step, tp.Commit):
            out.append("effect")
        elif isinstance(step, tp.Later):
            out += _expected_kinds(step.steps)
    return out


@pytest.mark.parametrize("fault", ["lost_response", "server_error_after", "server_error_before", "drop_request",
                                   "duplicate_delivery", "late_arrival", "throttled", "refused"])
def test_the_sandbox_does_over_http_what_the_plan_says(fault):
    """The sandbox interprets the same plan the simulator does: the remote events of one reserve over a
    real socket (on a keyless service, so every commit is a new effect) are the plan's."""
    import http.client
    import json
    import time

    from crashlab.sandbox import Sandbox
    from crashlab.scenario.loader import from_dict

    profile = {"proxy_retries": 1, "idempotency": "none", "lookup": "by_incident_slot"}   # every commit is new
    sc = from_dict({"id": "plan-test", "title": "plan test", "seed": 1, "clock": {"origin": "10:00", "horizon": "10:10"},
                    "services": {"reservation": profile},
                    "runs": [{"id": "run-1", "intent": INTENT, "approval": {"mode": "none"}}],
                    "faults": [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": fault,
                                **({"delay": "2s"} if fault == "late_arrival" else {})}]})
    sb = Sandbox(sc, time_scale=1000.0)
    sb.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", sb.httpd.server_address[1], timeout=10)
        status = None
        try:
            conn.request("POST", "/w/run-1.w1/reservation/reserve", json.dumps({"intent": INTENT}),
                         {"Content-Type": "application/json", "Idempotency-Key": "k1"})
            status = conn.getresponse().status
        except (http.client.HTTPException, ConnectionError):
            pass                        # closed with no answer
        finally:
            conn.close()
        deadline = time.monotonic() + 10
        while sb.pending and time.monotonic() < deadline:
            time.sleep(0.01)
        with sb.lock:
            seen = [e["kind"] for e in sb.trace.events if e["lane"] == "remote"]
    finally:
        sb.stop()
    rule = sc.rules[0]
    steps = tp.plan("reservation", "reservation", sc.services["reservation"], "reserve", {"key": "k1"}, rule)
    expected = _expected_kinds(steps)
    assert seen == expected, (seen, expected)
    final = steps[-1]
    if isinstance(final, tp.Close):
        assert status is None
    elif isinstance(final, tp.Fail):
        assert status == (final.status or {"throttled": 429}.get(final.code, 503))
    else:
        assert status == 200
