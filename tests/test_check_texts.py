"""The checks' "why" texts say what the trace shows and no more: a deadline is named only
where the run has one and it had passed, and a late callback is described as what the worker
had seen (with the poll that delivered it), not as the reason it moved."""
from __future__ import annotations

from functools import cache

from crashlab.checks import check_trace
from crashlab.run.runner import run_scenario
from crashlab.scenario.loader import library
from support import message_faults


@cache
def _violations(adapter: str, scenario: str):
    sc = next(s for s in library() if s.id == scenario)
    result = run_scenario(sc, adapter, None)
    return result.events, check_trace(result.events).violations


def test_a_move_out_of_sent_unknown_without_a_deadline_does_not_blame_one():
    events, violations = _violations("crashlab.gallery.retries:TimeoutAsPreSend", "matrix-ambiguous-effect")
    intake = next(e for e in events if e["kind"] == "deliver" and e["event"]["type"] == "intake")
    assert intake["event"]["payload"]["deadline"] is None
    moves = [v for v in violations if v.invariant == "KNOW-02" and "SENT_UNKNOWN ->" in v.message]
    assert moves and not [v.message for v in moves if "deadline" in v.message]


def test_a_move_after_the_deadline_names_it():
    _, violations = _violations("crashlab.gallery.knowledge:DeadlineAsFailure", "matrix-reconciliation-down")
    [move] = [v for v in violations if v.invariant == "KNOW-02" and "SENT_UNKNOWN -> REJECTED" in v.message]
    assert "(the deadline 10:15:00 had passed; a deadline passing is not evidence)" in move.message
    assert not message_faults(move.message)


def test_a_late_callback_is_described_as_what_the_worker_had_seen():
    events, violations = _violations("crashlab.gallery.knowledge:LateCallbackApplied",
                                     "matrix-callback-while-read-down")
    [late] = [v for v in violations if v.invariant == "LATE-01"]
    assert "only a completion callback" not in late.message
    poll = int(late.message.split("inbox poll #")[1].split(")")[0])
    result = next(e for e in events if e["seq"] == poll)
    call = next(e for e in events if e["seq"] == result["call"])
    assert (call["port"], call["op"]) == ("inbox", "poll")
    assert any(item["type"] == "callback" for item in result["value"]["events"])
    assert not message_faults(late.message)
