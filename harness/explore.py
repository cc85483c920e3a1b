"""Exploration: every crash point of a scenario, and generated fault schedules.

``crash_matrix`` enumerates a crash before and after every port call an adapter makes in
a scenario (the chapter's crash laboratory, exhaustively), and with ``double=True`` a
second crash while recovering from the first. ``explore`` draws schedules with hypothesis
(crashlab.strategies), checks each with the generic invariants, and when one fails shrinks
it to a minimal schedule and prints it as a YAML scenario. docs/exploration.md has the
commands and what they cost.
"""
from __future__ import annotations

import copy
import random
import sys
from typing import Iterator

import yaml

from .drivers import AdapterSpec, load_adapter
from .model import is_dispatch
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


#: Calls that change durable state or the world: where a second crash during recovery bites.
DURABLE_CALLS = frozenset({("ledger", "append"), ("checkpoints", "write"), ("lease", "acquire"),
                           ("run", "finish")})


def double_crash_documents(scenario: Scenario, calls: list[Call]) -> Iterator[dict]:
    """One document per durable call (ledger append, checkpoint write, lease grant, finish,
    effect): a crash there, and a second crash at the next call of the same kind, the one
    recovery makes when it redoes that step (both before, or both after it took effect)."""
    base = copy.deepcopy(dict(scenario.raw))
    base["expect"] = {}
    for port, op, nth in calls:
        if (port, op) not in DURABLE_CALLS and not is_dispatch(port, op):
            continue
        for boundary in ("before", "after"):
            doc = copy.deepcopy(base)
            doc["id"] = f"{scenario.id}.crash2-{port}-{op}-{nth}-{boundary}"[:80]
            doc["crashes"] = list(doc.get("crashes") or []) + [
                {"match": {"port": port, "op": op, "nth": n}, "boundary": boundary} for n in (nth, nth + 1)]
            yield doc


def matrix_documents(adapter: AdapterSpec | str | None = None, scenarios: list[Scenario] | None = None, *,
                     double: bool = False) -> Iterator[tuple[dict, str | None]]:
    """(document, source file) for every crash point of every scenario (default: the library)."""
    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    make = double_crash_documents if double else crash_documents
    for scenario in scenarios if scenarios is not None else library():
        for doc in make(scenario, probe_calls(scenario, spec)):
            yield doc, scenario.source


def check_document(doc: dict, source: str | None, adapter: AdapterSpec | str | None):
    """Run one scenario document and judge it with the generic invariants."""
    from .conformance import check_run

    return check_run(run_scenario(from_dict(doc, file=source), adapter))


_SPEC: list = []


def _check_in_worker(item: tuple[dict, str | None]):
    doc, source = item
    return doc, check_document(doc, source, _SPEC[0])


def _start_worker(adapter: str | None) -> None:
    _SPEC[:] = [load_adapter(adapter)]


def crash_matrix(adapter: AdapterSpec | str | None = None, scenarios: list[Scenario] | None = None, *,
                 double: bool = False, processes: int = 1):
    """Yield (document, ScenarioResult) for a crash at every port-call boundary (with
    ``double``, for two crashes at every durable call), in a deterministic order; with
    ``processes`` > 1 the runs are shared among that many worker processes."""
    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    items = matrix_documents(spec, scenarios, double=double)
    if processes <= 1:
        for doc, source in items:
            yield doc, check_document(doc, source, spec)
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(processes, _start_worker, (spec.text,)) as pool:
        yield from pool.imap(_check_in_worker, items, chunksize=16)


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
    text = to_yaml(doc)
    if save:
        with open(save, "w", encoding="utf-8") as fh:
            fh.write(text)
    verdict = check_run(run_scenario(from_dict(doc, file=save), spec))
    print(f"explored {tried} schedules; the minimal failing schedule:\n", file=out)
    print(text, file=out)
    print(failure_message(verdict), file=out)
    if save:
        print(f"saved: {save} (run it with: crashlab run {save} --adapter {spec.text})", file=out)
    return 1


def matrix_main(argv: list[str] | None = None, out=None) -> int:
    """``python -m crashlab.explore``: the crash matrix (and, with --double, double crashes) of
    an adapter over the library or chosen scenarios; prints each failing schedule as YAML."""
    import argparse

    from .conformance import failure_message
    from .errors import UsageError

    parser = argparse.ArgumentParser(prog="python -m crashlab.explore",
                                     description="Crash an adapter before and after every port call of "
                                                 "every scenario and check every invariant.")
    parser.add_argument("--adapter", metavar="SPEC", help="module:Class or exec:COMMAND (default: the reference)")
    parser.add_argument("--scenario", action="append", metavar="ID", help="library scenario (default: all)")
    parser.add_argument("--double", action="store_true", help="two crashes at every durable call instead")
    parser.add_argument("--processes", type=int, default=1, metavar="N", help="worker processes (default 1)")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    pool = library()
    if args.scenario:
        known = {s.id: s for s in pool}
        missing = [s for s in args.scenario if s not in known]
        if missing:
            raise UsageError(f"unknown scenario(s): {', '.join(missing)}; `crashlab list` shows every id")
        pool = [known[s] for s in args.scenario]
    runs = failed = 0
    for doc, verdict in crash_matrix(args.adapter, pool, double=args.double, processes=args.processes):
        runs += 1
        if verdict.verdict == "fail":
            failed += 1
            print(f"--- {doc['id']}\n{to_yaml(doc)}{failure_message(verdict)}\n", file=out)
    kind = "double-crash" if args.double else "crash"
    print(f"{runs} {kind} schedules over {len(pool)} scenario(s): {failed} failing", file=out)
    return 1 if failed else 0


if __name__ == "__main__":
    from .errors import CrashlabError

    try:
        sys.exit(matrix_main())
    except CrashlabError as exc:
        print(f"crashlab: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
