"""World events anchored to a port call: `at: {after|before: MATCH, delay: D}`."""
from __future__ import annotations

import pytest

import support
from crashlab.vocab.errors import InvalidScenario
from crashlab.scenario import library
from support import kinds, run, scenario


def _cancel(at):
    return [{"at": at, "type": "cancel", "reason": "user"}]


def _delivered(result, etype="cancel"):
    return [e for e in kinds(result, "deliver") if e["event"]["type"] == etype]


def _call(result, port, op, nth=1):
    return [e for e in kinds(result, "call") if e["port"] == port and e["op"] == op][nth - 1]


def _result_of(result, call):
    return next(e for e in kinds(result, "result") if e["call"] == call["seq"])


def test_after_delivers_the_delay_after_the_call_completes():
    result = run(scenario(events=_cancel({"after": {"port": "reservation", "op": "reserve"}, "delay": "2s"})))
    [cancel] = _delivered(result)
    done = _result_of(result, _call(result, "reservation", "reserve"))
    assert cancel["t"] == done["t"] + 2000


def test_before_delivers_as_the_call_happens_before_it_takes_effect():
    result = run(scenario(events=_cancel({"before": {"port": "checkpoints", "op": "write", "nth": 1}})))
    [cancel] = _delivered(result)
    call = _call(result, "checkpoints", "write")
    checkpoint = kinds(result, "checkpoint")[0]
    assert call["t"] == cancel["t"] and call["seq"] < cancel["seq"] < checkpoint["seq"]


def test_an_anchored_event_fires_once_and_an_unmatched_one_never():
    result = run(scenario(events=_cancel({"after": {"port": "lease"}})
                          + [{"at": {"after": {"port": "reservation", "op": "release"}}, "type": "cancel"}]))
    assert len(_delivered(result)) == 1


class SlowScript(support.Script):
    """The same script, at another pace: it sleeps before its first lease."""

    DELAY = 0

    async def run(self, p):
        await p.clock.sleep(self.DELAY, "think")
        await super().run(p)


@pytest.mark.parametrize("delay", [0, 7_000, 45_000])
def test_an_anchored_event_keeps_its_place_whatever_the_adapters_pace(delay):
    anchored = scenario(events=_cancel({"after": {"port": "checkpoints", "op": "write"}, "delay": "1ms"}))
    SlowScript.DELAY = delay
    support.SlowScript = SlowScript
    result = run(anchored, "support:SlowScript")
    [cancel] = _delivered(result)
    write = _result_of(result, _call(result, "checkpoints", "write"))
    assert cancel["t"] == write["t"] + 1
    assert cancel["t"] >= delay


@pytest.mark.parametrize("at, field, words", [
    ({"after": {"port": "lease"}, "before": {"port": "lease"}}, "events[0].at", "exactly one of"),
    ({"delay": "1s"}, "events[0].at", "exactly one of"),
    ({"after": {}}, "events[0].at.after", "empty match"),
    ({"after": {"port": "lease", "nht": 1}}, "events[0].at.after.nht", "did you mean"),
    ({"after": {"port": "lease"}, "delay": "soon"}, "events[0].at.delay", ""),
    ({"aftr": {"port": "lease"}}, "events[0].at.aftr", "did you mean"),
])
def test_a_bad_anchor_names_its_field(at, field, words):
    with pytest.raises(InvalidScenario) as info:
        scenario(events=_cancel(at))
    assert info.value.field == field and words in str(info.value)


def test_the_stale_resume_scenario_anchors_its_cancellation_to_the_stalled_prepare():
    sc = next(s for s in library() if s.id == "combined-cancel-after-stale-resume")
    [ev] = sc.events
    assert ev.anchor == "after" and (ev.match.port, ev.match.op, ev.match.nth) == ("ledger", "append", 1)
