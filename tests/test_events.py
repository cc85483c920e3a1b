"""The trace vocabulary (crashlab.events) declares every event crashlab writes."""
import pytest

from crashlab.errors import InternalError
from crashlab.event_tables import BY_NAME, KINDS, problem
from crashlab.events import LANES
from crashlab.scenario import library
from crashlab.trace import Trace


def test_every_event_of_the_library_matches_its_declaration_and_every_field_is_documented():
    from crashlab.runner import run_scenario

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


@pytest.mark.parametrize("lane, kind, data, words", [
    ("run", "no_such_kind", {}, "unknown event kind"),
    ("remote", "checkpoint", {"version": 1}, "belongs on lane 'run'"),
    ("run", "lease", {"op": "acquire"}, "lacks"),
    ("fault", "resume", {"call": 1, "colour": "red"}, "has no field colour"),
    ("world", "cancel", {"data": {}, "line": 3, "colour": "red"}, "does not declare: colour"),
])
def test_an_undeclared_event_is_refused_where_it_is_made(lane, kind, data, words):
    trace = Trace(lambda: 0)
    with pytest.raises(InternalError, match=words):
        trace.emit(lane, kind, **data)
    assert trace.events == []


def test_every_kind_has_a_known_lane_and_a_meaning():
    assert {k.lane for k in KINDS} <= set(LANES) and all(k.meaning for k in KINDS)
    assert len(BY_NAME) == len(KINDS)
