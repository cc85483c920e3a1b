"""The trace vocabulary (crashlab.vocab.events) declares every event crashlab writes."""
import pytest

from crashlab.vocab.errors import InternalError
from crashlab.vocab.event_tables import BY_NAME, KINDS, problem
from crashlab.vocab import events
from crashlab.vocab.events import LANES
from crashlab.scenario import library
from crashlab.world.trace import Trace


def test_every_event_of_the_library_matches_its_declaration_and_every_field_is_documented():
    from crashlab.run.runner import run_scenario

    seen: dict[str, set] = {}
    for sc in library():
        for ev in run_scenario(sc, None).events:
            fields = set(ev) - {"seq", "t", "lane", "kind", "worker", "run"}
            assert problem(ev["lane"], ev["kind"], fields) is None
            seen.setdefault(ev["kind"], set()).update(fields)
    for kind, fields in seen.items():
        if kind in BY_NAME:
            declared = set(BY_NAME[kind].fields) | set(BY_NAME[kind].optional)
            assert fields <= declared, f"{kind}: undocumented fields {sorted(fields - declared)}"


class _Undeclared(events.Event):
    """an event class the vocabulary does not register"""


@pytest.mark.parametrize("kind, data, words", [
    (dict, {}, "is not an event kind"),
    (_Undeclared, {}, "is not an event kind"),
    (events.Lease, {"op": "acquire"}, "lacks"),
    (events.Resume, {"call": 1, "colour": "red"}, "has no field colour"),
])
def test_an_undeclared_event_is_refused_where_it_is_made(kind, data, words):
    trace = Trace(lambda: 0)
    with pytest.raises(InternalError, match=words):
        trace.emit(kind, **data)
    assert trace.events == []


def test_a_signature_seen_once_does_not_let_another_through():
    trace = Trace(lambda: 0)
    trace.emit(events.Resume, worker="w1", run="r", call=1)
    trace.emit(events.Resume, worker="w1", run="r", call=2)       # the same signature: accepted
    with pytest.raises(InternalError, match="has no field colour"):
        trace.emit(events.Resume, worker="w1", run="r", call=3, colour="red")
    assert [e["call"] for e in trace.events] == [1, 2]
    assert trace.events[0] == {"seq": 0, "t": 0, "lane": "fault", "kind": "resume", "worker": "w1", "run": "r",
                               "call": 1}


def test_a_scenario_event_may_not_take_the_name_of_a_declared_kind():
    trace = Trace(lambda: 0)
    trace.emit_scenario("cancel", run="r", data={"reason": "user"}, line=3)
    assert trace.events[0]["kind"] == "cancel" and trace.events[0]["lane"] == "world"
    with pytest.raises(InternalError, match="lane"):
        trace.emit_scenario("checkpoint", run="r", data={}, line=4)
    assert len(trace.events) == 1


def test_every_kind_has_a_known_lane_and_a_meaning():
    assert {k.lane for k in KINDS} <= set(LANES) and all(k.meaning for k in KINDS)
    assert len(BY_NAME) == len(KINDS)
