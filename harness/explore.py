"""Exploration: every crash point of a scenario, and generated fault schedules.

``crash_matrix`` enumerates a crash before and after every port call an adapter makes in
a scenario (the chapter's crash laboratory, exhaustively). ``explore`` draws schedules
with hypothesis (harness.strategies), checks each with the generic invariants, and when
one fails shrinks it to a minimal schedule and prints it as a YAML scenario.
"""
from __future__ import annotations

import copy
import random
import sys
from typing import Iterator

import yaml

from .drivers import AdapterSpec, load_adapter
from .runner import run_scenario
from .scenario import Scenario, from_dict, library

Call = tuple[str, str, int]


def probe_calls(scenario: Scenario, adapter: AdapterSpec) -> list[Call]:
    """The (port, op, nth) of every port call the adapter makes in an undisturbed run."""
    result = run_scenario(scenario, adapter)
    calls = [(e["port"], e["op"], e["nth"]) for e in result.events
             if e["kind"] == "call" and e["lane"] == "port"]
    return sorted(set(calls), key=calls.index)


def crash_documents(scenario: Scenario, calls: list[Call]) -> Iterator[dict]:
    """One scenario document per crash point: before and after each call."""
    base = copy.deepcopy(dict(scenario.raw))
    base["expect"] = {}
    for port, op, nth in calls:
        for boundary in ("before", "after"):
            doc = copy.deepcopy(base)
            doc["id"] = f"{scenario.id}.crash-{port}-{op}-{nth}-{boundary}"[:80]
            doc["crashes"] = list(doc.get("crashes") or []) + [
                {"match": {"port": port, "op": op, "nth": nth}, "boundary": boundary}]
            yield doc


def crash_matrix(adapter: AdapterSpec | str | None = None, scenarios: list[Scenario] | None = None):
    """Yield (document, ScenarioResult) for a crash at every port-call boundary."""
    from .conformance import check_run

    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    for scenario in scenarios if scenarios is not None else library():
        for doc in crash_documents(scenario, probe_calls(scenario, spec)):
            sc = from_dict(doc, file=scenario.source)
            yield doc, check_run(run_scenario(sc, spec))


def to_yaml(doc: dict) -> str:
    """A scenario document as YAML that `crashlab run FILE` reproduces."""
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)


def explore(*, adapter: str | None, examples: int, seed: int, bases: list[str] | None,
            save: str | None, out=None) -> int:
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    from .conformance import check_run, failure_message
    from .strategies import schedules
    from hypothesis import strategies as st

    out = out or sys.stdout
    spec = load_adapter(adapter)
    pool = library()
    if bases:
        known = {s.id: s for s in pool}
        missing = [b for b in bases if b not in known]
        if missing:
            from .errors import UsageError
            raise UsageError(f"unknown base scenario(s): {', '.join(missing)}; `crashlab list` shows every id")
        pool = [known[b] for b in bases]
    strategies = [schedules(dict(s.raw), probe_calls(s, spec)) for s in pool]
    tried = 0

    def fails(doc: dict) -> bool:
        nonlocal tried
        tried += 1
        verdict = check_run(run_scenario(from_dict(doc), spec))
        return verdict.verdict == "fail"

    config = settings(max_examples=examples, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        doc = find(st.one_of(strategies), fails, settings=config, random=random.Random(seed))
    except NoSuchExample:
        print(f"explored {tried} schedules over {len(pool)} base scenario(s) with {spec.text}: "
              "no invariant violated", file=out)
        return 0
    verdict = check_run(run_scenario(from_dict(doc), spec))
    text = to_yaml(doc)
    print(f"explored {tried} schedules; the minimal failing schedule:\n", file=out)
    print(text, file=out)
    print(failure_message(verdict), file=out)
    if save:
        with open(save, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"saved: {save} (run it with: crashlab run {save} --adapter {spec.text})", file=out)
    return 1
