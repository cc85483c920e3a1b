"""faults.Rules: the rule matching shared by the simulator and the sandbox."""
from crashlab.world.faults import Rules
from crashlab.vocab.model import PortCall
from crashlab.vocab.compiled import Match, Rule

CALL = PortCall(port="reservation", op="reserve", args={"key": "k1"})


def test_first_matching_rule_wins_and_times_are_counted():
    rules = Rules([Rule(action="fault", match=Match(op="reserve", nth=2), fault="lost_response"),
                   Rule(action="fault", match=Match(port="reservation"), fault="throttled", times=2)],
                  now=lambda: 0, knowledge=lambda run, key: None)
    got = [getattr(rules.match("fault", None, "run-1", 1, CALL, nth), "fault", None) for nth in (1, 2, 3, 4)]
    assert got == ["throttled", "lost_response", "throttled", None]     # times: 2, then spent
    assert rules.match("crash", None, "run-1", 1, CALL, 1) is None        # no rule of that action


def test_windows_workers_runs_and_knowledge_all_must_hold():
    clock = {"now": 0}
    known = {}
    rules = Rules([Rule(action="crash", match=Match(from_ms=100, until_ms=200, worker=2, run="run-1",
                                                   knowledge="SENT_UNKNOWN"), times=0)],
                  now=lambda: clock["now"], knowledge=lambda run, key: known.get((run, key)))
    assert rules.match("crash", "r", "run-1", 2, CALL, 1) is None          # before the window
    clock["now"] = 150
    assert rules.match("crash", "r", "run-1", 2, CALL, 1) is None          # knowledge not yet SENT_UNKNOWN
    known[("r", "k1")] = "SENT_UNKNOWN"
    assert rules.match("crash", "r", "run-1", 1, CALL, 1) is None          # another worker
    assert rules.match("crash", "r", "run-2", 2, CALL, 1) is None          # another run
    assert rules.match("crash", "r", "run-1", 2, CALL, 1) is not None
    clock["now"] = 200
    assert rules.match("crash", "r", "run-1", 2, CALL, 1) is None          # the window closed
