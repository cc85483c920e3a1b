"""One copy of the transport-fault semantics: transport.plan() decides what happens to a service
call under a fault rule; the world and the sandbox only interpret its steps."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashlab import transport as tp
from crashlab.scenario_compiled import Match, Rule
from crashlab.services import PROFILE_DEFAULTS

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
    assert "import simpy" not in (ROOT / "harness" / "transport.py").read_text()


@pytest.mark.parametrize("module", ["world.py", "sandbox/server.py"])
def test_no_interpreter_decides_a_fault_by_its_name(module):
    """The world and the sandbox interpret plans; a fault's name in them would be a second copy."""
    source = (ROOT / "harness" / module).read_text()
    names = ("refused", "timeout_before_send", "throttled", "drop_request", "late_arrival", "server_error_before",
             "server_error_after", "lost_response", "duplicate_delivery")
    found = [n for n in names if re.search(rf"[\"']{n}[\"']", source)]
    assert not found, f"{module} branches on {found}: move the decision into transport.plan()"
