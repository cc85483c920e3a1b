"""Crash points: the port calls an adapter makes in an undisturbed run, and one scenario
document per crash before or after each of them (the crash matrix's jobs, crashlab.run.sweep and
crashlab.run.explore), or two crashes at each durable call.
"""
from __future__ import annotations

import copy
from typing import Iterator

from .drivers import AdapterSpec
from ..vocab.model import is_dispatch
from .runner import run_scenario
from ..vocab.compiled import Scenario

Call = tuple[str, str, int]


def probe_calls(scenario: Scenario, adapter: AdapterSpec) -> list[Call]:
    """The (port, op, nth) of every port call the adapter makes in an undisturbed run."""
    result = run_scenario(scenario, adapter)
    calls = [(e["port"], e["op"], e["nth"]) for e in result.events
             if e["kind"] == "call" and e["lane"] == "port"]
    return sorted(set(calls), key=calls.index)


#: A crash point of one run: (run id, port, op, nth); the run is None in a one-run scenario.
Point = tuple[str | None, str, str, int]


def probe_points(scenario: Scenario, adapter: AdapterSpec) -> list[Point]:
    """Every run's port calls in an undisturbed run, each once per run, in order.

    ``nth`` counts a run's calls of one (port, op) (the ordinal a crash rule matches), so the
    second run of a scenario repeats the first run's ordinals: without the run, a crash rule
    meant for the second run fires in the first, and the second run is never crashed."""
    result = run_scenario(scenario, adapter)
    several = len(scenario.runs) > 1
    points = [(e.get("run") if several else None, e["port"], e["op"], e["nth"]) for e in result.events
              if e["kind"] == "call" and e["lane"] == "port"]
    return sorted(set(points), key=points.index)


def _point(call: Call | Point) -> Point:
    return call if len(call) == 4 else (None, *call)  # type: ignore[return-value]


def _crash_rule(run: str | None, port: str, op: str, nth: int, boundary: str) -> dict:
    match = {"port": port, "op": op, "nth": nth}
    if run is not None:
        match["run"] = run
    return {"match": match, "boundary": boundary}


_SCALARS = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    pass


def _plain_copy(value):
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain_copy(item)
        return out
    if kind is list:
        return [_plain_copy(item) for item in value]
    if kind in _SCALARS:
        return value
    raise _NotPlain


def _fresh_copy(doc: dict) -> dict:
    """``copy.deepcopy`` of a scenario document: the same new dicts and lists around the same
    scalars, without deepcopy's memo and dispatch for a document of plain dicts, lists, strings,
    numbers, booleans and nulls (as YAML gives it); anything else goes through deepcopy."""
    try:
        return _plain_copy(doc)
    except (_NotPlain, RecursionError):
        return copy.deepcopy(doc)


def crash_base(scenario: Scenario) -> dict:
    """The document every crash point of ``scenario`` is made from: its own, expecting nothing (the
    generic invariants judge a crash point). Shared by the crash points' jobs: never changed."""
    base = copy.deepcopy(dict(scenario.raw))
    base["expect"] = {}
    return base


def with_crashes(base: dict, id: str, rules: tuple[dict, ...]) -> dict:
    """A crash point's document: a new copy of ``base`` named ``id``, with ``rules`` added to its crashes."""
    doc = _fresh_copy(base)
    doc["id"] = id
    doc["crashes"] = list(doc.get("crashes") or []) + [_fresh_copy(rule) for rule in rules]
    return doc


#: A crash point as a job holds it: its scenario id and the crash rules added to its base document.
Plan = tuple[str, tuple[dict, ...]]


def crash_plans(scenario: Scenario, calls: list[Call] | list[Point]) -> Iterator[Plan]:
    """One plan per crash point: before and after each call (``calls`` from :func:`probe_points`,
    one crash point per run, or :func:`probe_calls`)."""
    for run, port, op, nth in map(_point, calls):
        where = f"{run}-" if run is not None else ""
        for boundary in ("before", "after"):
            yield (f"{scenario.id}.crash-{where}{port}-{op}-{nth}-{boundary}"[:80],
                   (_crash_rule(run, port, op, nth, boundary),))


#: Calls that change durable state or the world: where a second crash during recovery bites.
DURABLE_CALLS = frozenset({("ledger", "append"), ("checkpoints", "write"), ("lease", "acquire"),
                           ("run", "finish")})


def double_crash_plans(scenario: Scenario, calls: list[Call] | list[Point]) -> Iterator[Plan]:
    """One plan per durable call (ledger append, checkpoint write, lease grant, finish, effect): a
    crash there, and a second crash at the next call of the same kind, the one recovery makes when
    it redoes that step (both before, or both after it took effect)."""
    for run, port, op, nth in map(_point, calls):
        if (port, op) not in DURABLE_CALLS and not is_dispatch(port, op):
            continue
        where = f"{run}-" if run is not None else ""
        for boundary in ("before", "after"):
            yield (f"{scenario.id}.crash2-{where}{port}-{op}-{nth}-{boundary}"[:80],
                   tuple(_crash_rule(run, port, op, n, boundary) for n in (nth, nth + 1)))


def crash_documents(scenario: Scenario, calls: list[Call] | list[Point]) -> Iterator[dict]:
    """One scenario document per crash point (:func:`crash_plans`)."""
    base = crash_base(scenario)
    for id, rules in crash_plans(scenario, calls):
        yield with_crashes(base, id, rules)


def double_crash_documents(scenario: Scenario, calls: list[Call] | list[Point]) -> Iterator[dict]:
    """One scenario document per durable call, crashed twice (:func:`double_crash_plans`)."""
    base = crash_base(scenario)
    for id, rules in double_crash_plans(scenario, calls):
        yield with_crashes(base, id, rules)
