"""Exploration: every crash point of a scenario, and generated fault schedules.

``crash_matrix`` enumerates a crash before and after every port call an adapter makes in
a scenario (the chapter's crash laboratory, exhaustively), and with ``double=True`` a
second crash while recovering from the first. ``explore`` draws schedules with hypothesis
(crashlab.scenario.strategies), checks each with the generic invariants, and when one fails shrinks
it to a minimal schedule and prints it as a YAML scenario. docs/exploration.md has the
commands and what they cost.
"""
from __future__ import annotations

import functools
import hashlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


from .crashpoints import (DURABLE_CALLS, Call, Point, crash_documents, double_crash_documents, probe_calls,
                          probe_points)
from .drivers import AdapterSpec, load_adapter
from ..vocab.errors import Interrupted, clip
from .explore_coverage import Coverage, situations
from ..vocab.model import SERVICE_OPS, is_dispatch
from .runner import run_scenario
from ..vocab.compiled import Scenario
from ..scenario.loader import from_dict, library
from ..scenario.yaml import to_yaml  # noqa: F401 (crashlab.run.explore.to_yaml: the documented name)


def matrix_documents(adapter: AdapterSpec | str | None = None, scenarios: list[Scenario] | None = None, *,
                     double: bool = False) -> Iterator[tuple[dict, str | None]]:
    """(document, source file) for every crash point of every scenario (default: the library)."""
    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    make = double_crash_documents if double else crash_documents
    for scenario in scenarios if scenarios is not None else library():
        for doc in make(scenario, probe_points(scenario, spec)):
            yield doc, scenario.source


def check_document(doc: dict, source: str | None, adapter: AdapterSpec | str | None):
    """Run one scenario document and judge it with the generic invariants."""
    from .judge import check_run

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




#: Schedules per unit of work. The examples are cut into chunks of this size per base scenario,
#: each explored with its own seed derived from (seed, base, chunk), so that the schedules tried
#: and the failures found are the same whatever the number of workers, shards or executor.
CHUNK = 50


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str               # "<base>#<n>"
    base: str
    index: int
    examples: int
    seed: int


def chunks(pool: list[Scenario], examples: int, seed: int) -> list[Chunk]:
    """The examples shared evenly among the base scenarios, cut into CHUNK-sized units."""
    per_base = -(-examples // max(len(pool), 1))
    out = []
    for sc in pool:
        left, n = per_base, 0
        while left > 0:
            size = min(CHUNK, left)
            digest = hashlib.sha256(f"{seed}:{sc.id}:{n}".encode()).digest()
            out.append(Chunk(id=f"{sc.id}#{n}", base=sc.id, index=n, examples=size,
                             seed=int.from_bytes(digest[:8], "big")))
            left -= size
            n += 1
    return out


_PROBES: dict = {}
_BASES: dict = {}


def _hypothesis_home(storage: str | None) -> None:
    """Where hypothesis keeps what it caches (the example database is off; it still caches the
    constants of the source it draws from): under the exploration's output folder, never in the
    current directory."""
    if storage is not None:
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(storage)


def explore_chunk(chunk: Chunk, adapter: str, storage: str | None = None) -> dict:
    """Explore one chunk: ``{"id", "tried", "failure": the shrunk failing document or None}``.
    ``storage``: the folder hypothesis may write its caches to (see _hypothesis_home)."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    _hypothesis_home(storage)

    from .judge import check_run
    from ..scenario.loader import resolve
    from ..scenario.strategies import schedules

    spec = load_adapter(adapter)
    base = _BASES.get(chunk.base)
    if base is None:  # a worker explores many chunks of the same few bases: read each file once
        base = _BASES[chunk.base] = resolve(chunk.base)
    key = (adapter, chunk.base)
    if key not in _PROBES:
        _PROBES[key] = probe_calls(base, spec)
    tried = 0
    coverage = Coverage()

    def fails(doc: dict) -> bool:
        nonlocal tried
        tried += 1
        run = run_scenario(from_dict(doc), spec)
        coverage.add(situations(run.events))
        return check_run(run).verdict == "fail"

    config = settings(max_examples=chunk.examples, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        doc = find(schedules(dict(base.raw), _PROBES[key]), fails, settings=config, random=random.Random(chunk.seed))
    except NoSuchExample:
        doc = None
    return {"id": chunk.id, "base": chunk.base, "tried": tried, "failure": doc, "coverage": dict(coverage.counts)}


def read_journal(path: Path, header: dict, ids: set[str]) -> dict[str, dict]:
    """The chunks an interrupted exploration finished, from its journal: ``{chunk id: outcome}``.
    The first line must be this exploration's header; a damaged header (empty, truncated, not
    JSON, not a journal) or another exploration's is a UsageError naming the file and what to do.
    A later line that is not a finished chunk of this exploration (the last line of an interrupted
    write, or a damaged one) is skipped: that chunk is explored again."""
    from ..vocab.errors import UsageError

    again = "remove it to start the exploration over (or run without --resume)"
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"--resume: cannot read the journal {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--resume: {path} is not a crashlab explore journal (not UTF-8 text); {again}") from None
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise UsageError(f"--resume: {path}, line 1: the journal has no header (an empty or damaged file); {again}")
    try:
        found = json.loads(lines[0])
    except ValueError as exc:
        raise UsageError(f"--resume: {path}, line 1: the journal's header is damaged (truncated or not JSON: "
                         f"{clip(exc, 80)}); {again}") from None
    if not isinstance(found, dict) or found.get("journal") != header["journal"]:
        raise UsageError(f"--resume: {path}, line 1: not a crashlab explore journal header (an object with "
                         f"{', '.join(sorted(header))}; got {clip(lines[0], 80)}); {again}")
    odd = sorted(set(header) ^ set(found))
    if odd:
        raise UsageError(f"--resume: {path}, line 1: the journal's header is damaged (it "
                         + ", ".join(f"{'lacks' if k in header else 'has an unknown field'} {clip(k, 40)}"
                                     for k in odd[:4]) + f"); {again}")
    differ = [k for k in sorted(header) if found[k] != header[k]]
    if differ:
        shown = "; ".join(f"{k}: the journal has {clip(json.dumps(found[k]), 60)}, this run "
                          f"{clip(json.dumps(header[k]), 60)}" for k in differ[:3])
        raise UsageError(f"--resume: {path} is the journal of another exploration ({shown}); resume with the "
                         f"same --adapter, --seed, --examples, --base and --shard, or {again}")
    done: dict[str, dict] = {}
    for line in lines[1:]:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"] in ids \
                and isinstance(item.get("base"), str) and type(item.get("tried")) is int and item["tried"] >= 0 \
                and isinstance(item.get("failure", _ABSENT), (dict, type(None))):
            done[item["id"]] = item
    return done


_ABSENT = object()


def explore(*, adapter: str | None, examples: int, seed: int, bases: list[str] | None,
            save: str | None, out=None, executor=None, shard=None, findings_dir: Path | None = None,
            resume: bool = False, progress=None, json_path: Path | None = None) -> int:
    """Swarm-test ``adapter`` with generated schedules; print the first failure (shrunk) as a YAML
    scenario, write every distinct failure to ``findings_dir`` as it is found, and return 1 when
    one was found. The work is chunked (CHUNK schedules per base scenario and chunk, each with its
    own derived seed): ``executor`` runs chunks in parallel, ``shard`` keeps one share, and the
    outcome is the same either way. A journal beside the findings lets ``resume`` skip the chunks
    an interrupted run finished."""
    from ..vocab.results import failure_message
    from ..vocab.files import atomic_write_text, forget
    from .sweep import Findings, Job, LocalExecutor

    from .conformance import run_checked
    from .sweep import check_imports

    out = out or sys.stdout
    spec = load_adapter(adapter, import_code=False)   # imported, and run, in worker processes only
    check_imports(spec)
    pool = library()
    if bases:
        known = {s.id: s for s in pool}
        missing = [b for b in bases if b not in known]
        if missing:
            from ..vocab.errors import UsageError
            raise UsageError(f"unknown base scenario(s): {', '.join(missing)}; `crashlab list` shows every id")
        pool = [known[b] for b in bases]
    todo = chunks(pool, examples, seed)
    if shard is not None:
        todo = todo[shard.index - 1::shard.count]
    findings_dir = Path(findings_dir or "crashlab-findings")
    journal_path = findings_dir / ("explore.journal.jsonl" if shard is None else
                                   f"explore.shard-{shard.index}-of-{shard.count}.journal.jsonl")
    header = {"journal": 1, "adapter": spec.text, "seed": seed, "examples": examples,
              "bases": [s.id for s in pool], "shard": shard.to_json() if shard else None}
    done: dict[str, dict] = {}
    if resume and journal_path.is_file():
        done = read_journal(journal_path, header, {c.id for c in todo})
    findings = Findings(findings_dir, spec.text)
    findings_dir.mkdir(parents=True, exist_ok=True)
    if not (resume and journal_path.is_file()):
        atomic_write_text(journal_path, json.dumps(header, sort_keys=True) + "\n")
        forget(journal_path)   # appended to from now on
    if progress is not None:
        progress.total, progress.done = len(todo), len(done)
    outcomes: dict[str, dict] = dict(done)
    pending = [c for c in todo if c.id not in done]
    executor = executor or LocalExecutor(1)
    # The libraries every chunk needs, loaded before a local pool forks so that each worker does
    # not import them again. Not crashlab's own modules: hypothesis draws from the constants in the
    # source of the local modules loaded when it draws, so those still load in the workers as before.
    import hypothesis  # noqa: F401
    import networkx  # noqa: F401
    storage = str((findings_dir / ".hypothesis").resolve())
    _hypothesis_home(storage)
    fn = functools.partial(explore_chunk, adapter=spec.text, storage=storage)
    tried_so_far = sum(o["tried"] for o in done.values())
    try:
        with open(journal_path, "a", encoding="utf-8") as journal:
            for chunk, outcome in zip(pending, executor.map(fn, pending)):
                outcomes[chunk.id] = outcome
                tried_so_far += outcome["tried"]
                journal.write(json.dumps(outcome, sort_keys=True) + "\n")
                journal.flush()
                if outcome["failure"] is not None:
                    doc = outcome["failure"]
                    result = run_checked(from_dict(doc), spec)
                    findings.add(Job(id=doc.get("id", chunk.base), base=chunk.base, doc=doc), result)
                if progress is not None:
                    progress.update(failed=outcome["failure"] is not None)
    except Interrupted as exc:
        exc.explored = (sum(1 for c in todo if c.id in outcomes), len(todo), tried_so_far, findings_dir)
        raise
    finally:
        if progress is not None:
            progress.close()
    ordered = [outcomes[c.id] for c in todo]
    tried = sum(o["tried"] for o in ordered)
    failures = [o for o in ordered if o["failure"] is not None]
    coverage = total_coverage(ordered)
    kinds = sorted({kind for s in pool for kind in s.services})
    if json_path is not None:
        atomic_write_text(json_path, json.dumps({
            "kind": "explore", "adapter": spec.text, "seed": seed, "examples": examples,
            "bases": [s.id for s in pool], **({"shard": shard.to_json()} if shard else {}),
            "coverage": coverage.to_json(kinds), "chunks": ordered}, indent=2, sort_keys=True) + "\n")
    if not failures:
        print(f"explored {tried} schedules in {len(ordered)} chunk(s) over {len(pool)} base scenario(s) with "
              f"{spec.text}: no invariant violated", file=out)
        print(coverage.table(kinds), file=out)
        return 0
    doc = failures[0]["failure"]
    text = to_yaml(doc)
    if save:
        atomic_write_text(Path(save), text)
    verdict = run_checked(from_dict(doc, file=save), spec)
    print(f"explored {tried} schedules; {len(failures)} chunk(s) found a failure; the first, shrunk:\n", file=out)
    print(text, file=out)
    print(failure_message(verdict), file=out)
    if save:
        print(f"saved: {save} (run it with: crashlab run {save} --adapter {spec.text})", file=out)
    print(f"findings: {findings_dir}/ (one scenario file per distinct failure, each with its repro command)",
          file=out)
    print(coverage.table(kinds), file=out)
    return 1


def total_coverage(outcomes: list[dict]) -> Coverage:
    """The situations of every chunk's schedules together (chunks journaled before coverage was
    recorded add nothing)."""
    coverage = Coverage()
    for o in outcomes:
        coverage.merge(o.get("coverage") or {})
    coverage.schedules = sum(o.get("tried", 0) for o in outcomes)
    return coverage


def merge_explorations(parts: list[tuple[str, dict]]) -> dict:
    """Join the ``--json`` outcomes of the shards of one exploration into the unsharded outcome."""
    from ..vocab.errors import UsageError

    from .sweep import _interleave, shard_order

    first_name, first = parts[0]
    same = ("adapter", "seed", "examples", "bases")
    for name, data in parts:
        for field in same:
            if data.get(field) != first.get(field):
                raise UsageError(f"{name}: {field} differs from {first_name}'s; merge the shards of one exploration")
    order = shard_order([(name, data.get("shard")) for name, data in parts])
    ordered = _interleave([parts[i][1]["chunks"] for i in order])
    kinds = sorted({p["port"] for d in (data.get("coverage") or {} for _, data in parts)
                    for p in d.get("situations", []) + d.get("not_exercised", []) if p["port"] in SERVICE_OPS})
    return {**{k: first[k] for k in ("kind",) + same}, "coverage": total_coverage(ordered).to_json(kinds),
            "chunks": ordered}


def matrix_main(argv: list[str] | None = None, out=None) -> int:
    """``python -m crashlab.run.explore``: the crash matrix (and, with --double, double crashes) of
    an adapter over the library or chosen scenarios; prints each failing schedule as YAML."""
    import argparse

    from ..vocab.results import failure_message
    from ..vocab.errors import UsageError

    parser = argparse.ArgumentParser(prog="python -m crashlab.run.explore",
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
    from ..vocab.errors import CrashlabError

    try:
        sys.exit(matrix_main())
    except CrashlabError as exc:
        print(f"crashlab: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
