"""Typed trace events (crashlab.vocab.events): one frozen class per kind, validated at construction,
parsed from and written back to the very dicts a trace holds, and the dispatch tables of the
checks and the report, which handle every kind or say they ignore it."""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path

import pytest

from crashlab.vocab import event_tables, events
from crashlab.checks import index
from crashlab.vocab.errors import UsageError
from crashlab.vocab.event_tables import parse
from crashlab.vocab.events import ABSENT, EventError
from crashlab.report import style
from crashlab.scenario import EVENT_TYPES, library
from crashlab.world.trace import jsonl, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "traces").glob("*.jsonl"))
EVERY_TYPE = set(events.TYPES.values()) | {events.ScenarioEvent}


@pytest.fixture(scope="module")
def library_traces():
    from crashlab.run.runner import run_scenario

    return [run_scenario(sc, None).events for sc in library()]


# --------------------------------------------------------------------------- the dispatch tables
def test_the_checks_file_every_kind_or_say_they_ignore_it():
    assert set(index.FILERS) | index.IGNORED == EVERY_TYPE
    assert not set(index.FILERS) & index.IGNORED
    assert set(index.SCENARIO_FILERS) <= EVENT_TYPES


def test_the_report_summarizes_every_kind():
    assert set(style.SUMMARIES) == EVERY_TYPE


@pytest.mark.parametrize("handlers, ignored, words", [
    ({t: None for t in EVERY_TYPE - {events.Lease}}, (), "unhandled: Lease"),
    ({t: None for t in EVERY_TYPE}, (events.Crash,), "handled and ignored: Crash"),
    ({**{t: None for t in EVERY_TYPE}, dict: None}, (), "not event kinds: dict"),
])
def test_a_dispatch_table_that_misses_a_kind_fails_naming_it(handlers, ignored, words):
    with pytest.raises(TypeError, match=f"dispatch table t: {words}"):
        event_tables.dispatch(handlers, ignored=ignored, name="t")


# --------------------------------------------------------------------------- construction
def test_construction_validates_the_fields():
    lease = events.Lease(seq=4, t=10, worker="run-1/w1", run="run-1", op="acquire", epoch=1, owner="run-1/w1",
                         expires_at=60_010, call=3)
    assert (lease.kind, lease.lane, lease.epoch) == ("lease", "run", 1)
    with pytest.raises(TypeError, match="expires_at"):
        events.Lease(seq=4, t=10, op="acquire", epoch=1, owner="w", call=3)
    with pytest.raises(TypeError, match="colour"):
        events.Lease(seq=4, t=10, op="acquire", epoch=1, owner="w", expires_at=1, call=3, colour="red")
    with pytest.raises(dataclasses.FrozenInstanceError):
        lease.epoch = 2  # type: ignore[misc]


def test_an_optional_field_is_absent_until_given_and_absent_is_never_written():
    refused = events.Refused(seq=1, t=0, service="reservation", key="k", call=None)
    assert refused.code is ABSENT and refused.call is None
    assert "code" not in refused.to_dict() and refused.to_dict()["call"] is None
    assert events.Refused.fields == ("service", "key", "call")
    assert events.Refused.optional == ("reason", "ref", "code")


@pytest.mark.parametrize("ev, words", [
    ({"seq": 1, "t": 0, "lane": "run", "kind": "no_such_kind"}, "unknown event kind 'no_such_kind' on lane 'run'"),
    ({"seq": 1, "t": 0, "lane": "fault", "kind": "resume"}, "lacks call"),
    ({"seq": 1, "t": 0, "lane": "fault", "kind": "resume", "call": 1, "colour": "red"}, "has no field colour"),
    ({"seq": 1, "t": 0, "lane": "run", "kind": "resume", "call": 1}, "belongs on lane 'fault'"),
    ({"seq": 1, "t": 0, "lane": "remote", "kind": "cancel", "data": {}, "line": 3}, "unknown event kind"),
    ({"seq": 1, "t": 0, "lane": "world", "kind": "cancel", "data": {}, "line": 3, "x": 1}, "does not declare: x"),
    ({"t": 0, "lane": "fault", "kind": "resume", "call": 1}, "no seq"),
    ({"seq": 1, "t": 0, "lane": "fault", "kind": 7}, "must be a string"),
])
def test_parse_refuses_what_the_vocabulary_does_not_declare(ev, words):
    with pytest.raises(EventError, match=words):
        parse(ev)


# --------------------------------------------------------------------------- parse and back
def test_every_golden_trace_parses_and_writes_back_the_same_bytes():
    for path in GOLDEN:
        evs = read_jsonl(path)
        typed = [parse(ev) for ev in evs]
        assert isinstance(typed[0], events.Header) and isinstance(typed[-1], events.End)
        assert jsonl(e.to_dict() for e in typed) == path.read_text(encoding="utf-8"), path.name
        assert [parse(e.to_dict()) for e in typed] == typed


def test_a_scenario_event_is_typed_under_its_own_kind():
    ev = {"seq": 9, "t": 120_000, "lane": "world", "kind": "deploy", "worker": None, "run": None,
          "data": {"code_version": 2}, "line": 14}
    typed = parse(ev)
    assert isinstance(typed, events.ScenarioEvent) and (typed.kind, typed.lane, typed.line) == ("deploy", "world", 14)
    assert typed.to_dict() == ev


def _matches(value, hint) -> bool:
    if hint is typing.Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    return isinstance(value, typing.get_origin(hint) or hint)


def test_the_declared_field_types_hold_for_every_event_of_the_library(library_traces):
    hints = {cls: typing.get_type_hints(cls) for cls in EVERY_TYPE}
    for evs in library_traces:
        for ev in evs:
            typed = parse(ev)
            for f in dataclasses.fields(typed):
                value = getattr(typed, f.name)
                assert _matches(value, hints[type(typed)][f.name]), (type(typed).__name__, f.name, value)


# --------------------------------------------------------------------------- an unknown kind
def _with_unknown_kind(tmp_path) -> Path:
    lines = GOLDEN[0].read_text(encoding="utf-8").splitlines()
    i = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "lease")
    lines[i] = lines[i].replace('"kind":"lease"', '"kind":"leash"')
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_reader_refuses_an_unknown_kind_naming_the_line(tmp_path):
    path = _with_unknown_kind(tmp_path)
    with pytest.raises(UsageError, match=r"edited.jsonl:\d+: unknown event kind 'leash' on lane 'run'"):
        read_jsonl(path)


def test_check_refuses_a_trace_with_an_unknown_kind_instead_of_judging_it(tmp_path, capsys):
    from crashlab.cli import main

    assert main(["check", str(_with_unknown_kind(tmp_path))]) == 3
    err = capsys.readouterr().err
    assert "unknown event kind 'leash'" in err and "internal" not in err


@pytest.mark.parametrize("ev", [
    {"seq": 1, "t": 0, "lane": "run", "kind": "leash", "worker": None, "run": None},
    {"seq": 1, "t": 0, "lane": "world", "kind": "cancel", "worker": None, "run": None},   # no data, no line
])
def test_the_checks_and_the_report_refuse_an_unknown_kind(ev):
    header = read_jsonl(GOLDEN[0])[0]
    with pytest.raises(EventError, match="unknown event kind"):
        index.build([header, ev])
    with pytest.raises(EventError, match="unknown event kind"):
        style.summarize(ev, 0)


def test_scenario_events_are_filed_by_type_and_the_others_are_ignored():
    header = read_jsonl(GOLDEN[0])[0]
    run = header["runs"][0]["id"]
    world = [{"seq": i, "t": 0, "lane": "world", "kind": kind, "worker": None, "run": run, "data": {}, "line": 1}
             for i, kind in enumerate(("deploy", "revoke", "capability_change", "cancel"), 1)]
    ix = index.build([header, *world])
    assert [e["kind"] for e in ix.deploys] == ["deploy"]
    assert ix.runs[run].revokes == [2] and ix.runs[run].capability_changes == [3]


@pytest.mark.parametrize("cls", sorted(events.TYPES.values(), key=lambda c: c.kind), ids=lambda c: c.kind)
def test_every_kind_summarizes_to_one_line_even_with_empty_fields(cls):
    ev = {"seq": 7, "t": 0, "lane": cls.lane, "kind": cls.kind, "worker": None, "run": "run-1",
          **dict.fromkeys(cls.fields)}
    line = style.summarize(ev, 36_000_000)
    assert line.startswith("#7 10:00 run-1 ") and "\n" not in line


@pytest.mark.parametrize("ev, body", [
    ({"lane": "remote", "kind": "other_actor_rejected", "code": "already_exists"},
     "other_actor_rejected (already_exists)"),
    ({"lane": "remote", "kind": "refused", "service": "registry", "key": "k", "call": 3, "reason": "x"},
     "registry refused (call #3)"),
    ({"lane": "worker", "kind": "adapter_fault", "fault": "no_finish", "message": "returned"},
     "adapter fault no_finish: returned"),
    ({"lane": "world", "kind": "approval_granted", "approval_id": "A", "proposal_hash": "h", "action": "reserve",
      "expires_at": 1, "capability_version": 1}, "world approval_granted"),
    ({"lane": "world", "kind": "deploy", "data": {"code_version": 2}, "line": 4}, "world deploy code_version=2"),
])
def test_the_summary_of_kinds_the_library_rarely_writes(ev, body):
    line = style.summarize({"seq": 2, "t": 1500, "worker": None, "run": None, **ev}, 36_000_000)
    assert line == f"#2 10:00:01.500 {body}"
