"""Many runs at once: parallel, sharded and distributed, with identical results.

A *job* is one run of one scenario document against the adapter; ``execute`` runs a list of
jobs on an executor (in this process, a local pool of worker processes, or a Dask cluster)
and yields their outcomes in the jobs' order, so the results and traces are the same bytes
whatever the executor, the number of workers and the shards. ``--shard I/N`` keeps every
N-th job starting at the I-th, and ``merge`` joins shard results into exactly the results of
an unsharded run.

The sweep (``crashlab sweep``) is the crash matrix as a command: a crash before and after
every port call of every selected scenario (``--double``: two crashes at every durable
call). Each distinct failure (base scenario and violated invariants) is written to a findings
folder as it is found, as a scenario file with a repro command that runs as pasted; a journal
of finished runs lets ``--resume`` continue an interrupted sweep.
"""
from __future__ import annotations

import functools
import json
import os
import shlex
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .drivers import AdapterSpec
from ..vocab.errors import AdapterProtocolError, InternalError, Interrupted, UsageError
from ..vocab.files import atomic_write_text, forget
from .jobs import Lost, Pool
from .judge import Job, _adapter, _parse_trace, judge, run_job, run_traced  # noqa: F401 (run_job, judge: the executors and tests name them here)
from ..vocab.results import ScenarioResult, Scorecard
from .runner import Limits, portable_source
from ..vocab.compiled import Scenario
from .isolate import for_adapter
from .executors import (DEFAULT_BATCH, DaskExecutor, LocalExecutor, Shard, UNTRUSTED, _Writes, _apply_batch,
                        _nothing, check_imports, default_jobs, execute, make_executor, scenario_jobs,
                        traced_once)  # noqa: F401 (moved there)

JOURNAL = "sweep.journal.jsonl"


def expected_duration(runs: int, per_run_s: float, workers: int) -> str:
    """The sweep's expected wall time, estimated from its job count and the probe runs (one
    undisturbed run of each scenario, timed here): an adapter process started per worker makes an
    exec: sweep of the whole library take many minutes, and it says so before it starts."""
    total = runs * per_run_s / max(1, workers)
    when = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
    return (f"{runs} runs planned; the probe runs took {per_run_s:.2f} s each here, so expect about {when} "
            f"with {max(1, workers)} worker(s) (-j N runs more at once; --shard splits it across machines)")


@dataclass(frozen=True, slots=True)
class Coverage:
    """What the crash matrix reaches: every run's port calls in the undisturbed probe runs."""
    scenarios: int
    runs: int                 # runs of the scenarios
    runs_crashed: int         # runs with at least one crash point of their own
    calls: int                # distinct (run, port, op, nth) port calls, each crashed before and after
    jobs: int

    def to_json(self) -> dict:
        return {"scenarios": self.scenarios, "runs": self.runs, "runs_crashed": self.runs_crashed,
                "calls": self.calls, "jobs": self.jobs}

    def text(self) -> str:
        return (f"crash points: {self.calls} port calls of {self.runs_crashed} of {self.runs} runs "
                f"({self.scenarios} scenarios), {self.jobs} crashed runs")


def crash_jobs(scenarios: list[Scenario], adapter: AdapterSpec, *, double: bool, executor=None,
               coverage: list | None = None) -> list[Job]:
    """A job per crash point of every run of every scenario, found by probing an undisturbed run of
    each (in worker processes, unless ``executor`` runs in-process); ``coverage`` (a list) receives
    the :class:`Coverage` reached."""
    from .crashpoints import crash_base, crash_plans, double_crash_plans

    plans = double_crash_plans if double else crash_plans
    jobs: list[Job] = []
    seen: set[str] = set()
    probes = probe_all(scenarios, adapter, executor)
    if coverage is not None:
        crashed = {(sc.id, p[0] if p[0] is not None else sc.runs[0].id) for sc, points in zip(scenarios, probes)
                   for p in points}
    for scenario, calls in zip(scenarios, probes):
        base, source = crash_base(scenario), portable_source(scenario)   # one per scenario, for all its jobs
        for job_id, rules in plans(scenario, calls):
            first, n = job_id, 1
            while job_id in seen:  # ids are cut at 80 characters: keep them distinct
                n += 1
                job_id = f"{first[:76]}~{n}"
            seen.add(job_id)
            jobs.append(Job(id=job_id, base=scenario.id, doc=base, source=source, crashes=rules))
    if coverage is not None:
        coverage.append(Coverage(scenarios=len(scenarios), runs=sum(len(sc.runs) for sc in scenarios),
                                 runs_crashed=len(crashed), calls=sum(len(p) for p in probes), jobs=len(jobs)))
    return jobs


def _probe(scenario: Scenario, *, adapter: str) -> list:
    from .crashpoints import probe_points

    return [list(c) for c in probe_points(scenario, _adapter(adapter))]


def probe_all(scenarios: list[Scenario], adapter: AdapterSpec, executor=None) -> list[list[tuple]]:
    """Every run's port calls in an undisturbed run of each scenario, in order
    (crashlab.run.explore.probe_points)."""
    if not isinstance(executor, LocalExecutor):
        executor = LocalExecutor(1)
    fn = functools.partial(_probe, adapter=adapter.text)
    return [[tuple(c) for c in calls] for calls in executor.map(fn, list(scenarios), adapter.text)]


# --------------------------------------------------------------------------- findings and journal
class Findings:
    """Each distinct failure (base scenario + violated invariants) as a scenario file with a repro
    command, written the moment it is found; ``index.jsonl`` lists them."""

    def __init__(self, folder: Path, adapter: str) -> None:
        self.folder, self.adapter = folder, adapter
        self.keys: set[tuple] = set()
        index = folder / "index.jsonl"
        if index.is_file():
            drop_torn_line(index)
            for line in index.read_text(encoding="utf-8").splitlines():
                try:
                    item = json.loads(line)
                    self.keys.add((item["base"], tuple(item["invariants"])))
                except (ValueError, KeyError, TypeError):
                    continue

    def add(self, job: Job, result: ScenarioResult) -> Path | None:
        from ..vocab.files import safe_name
        from ..scenario.yaml import to_yaml

        invariants = tuple(sorted({v.invariant for v in result.violations})) or ("verdict:" + result.verdict,)
        key = (job.base, invariants)
        if result.verdict == "pass" or key in self.keys:
            return None
        self.keys.add(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{len(self.keys):04d}-{safe_name(job.id)}.yaml"
        repro = f"crashlab run {shlex.quote(str(path))} --adapter {shlex.quote(self.adapter)}"
        doc = job.document() if job.doc is not None else dict(job.scenario.raw)
        text = (f"# crashlab finding: {', '.join(invariants)}\n# repro: {repro}\n"
                + "".join(f"# {v.invariant}: {' '.join(v.message.split())[:300]}\n" for v in result.violations)
                + to_yaml(doc))
        atomic_write_text(path, text)
        with open(self.folder / "index.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": job.id, "base": job.base, "invariants": list(invariants),
                                 "file": str(path), "repro": repro}, sort_keys=True) + "\n")
        return path


def drop_torn_line(path: Path) -> None:
    """Cut a file back to its last whole line (what a kill in the middle of an append leaves)."""
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)


class Journal:
    """The results of finished runs, one line each, so an interrupted sweep can resume."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path, self.header = path, header

    def load(self) -> dict[str, ScenarioResult]:
        if not self.path.is_file():
            return {}
        lines = self.path.read_text(encoding="utf-8").splitlines()
        try:
            head = json.loads(lines[0]) if lines else None
        except ValueError:
            head = None
        if head != self.header:
            raise UsageError(f"--resume: {self.path} is the journal of another sweep (adapter, scenarios, "
                             "seed, --double or --shard differ); remove it or run without --resume")
        done = {}
        for line in lines[1:]:
            try:
                result = ScenarioResult.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue  # the last line of an interrupted write
            done[result.id] = result
        return done

    def start(self, resume: bool) -> None:
        if not resume or not self.path.is_file():
            atomic_write_text(self.path, json.dumps(self.header, sort_keys=True) + "\n")
            forget(self.path)               # appended to from now on
        else:
            drop_torn_line(self.path)       # a line cut by a kill would swallow the next one
        self.fh = open(self.path, "a", encoding="utf-8")

    def add(self, result: ScenarioResult) -> None:
        self.fh.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def sweep(adapter: AdapterSpec, scenarios: list[Scenario], *, double: bool = False, seed: int | None = None,
          executor=None, shard: Shard | None = None, out_dir: Path, findings_dir: Path | None = None,
          keep: str = "failing", resume: bool = False, progress=None) -> Scorecard:
    """The crash matrix of ``scenarios`` as one scored suite (results JSON as conformance's, with
    ``kind: sweep``)."""
    from ..checks.rubric import score

    probing = time.monotonic()
    reached: list[Coverage] = []
    jobs = crash_jobs(scenarios, adapter, double=double, executor=executor, coverage=reached)
    probed = time.monotonic() - probing
    if shard is not None:
        jobs = shard.select(jobs)
    header = {"journal": 1, "adapter": adapter.text, "double": double, "seed": seed,
              "shard": shard.to_json() if shard else None, "jobs": [j.id for j in jobs]}
    name = JOURNAL if shard is None else JOURNAL.replace(".journal", f".shard-{shard.index}-of-{shard.count}.journal")
    journal = Journal(out_dir / name, header)
    done = journal.load() if resume else {}
    findings = Findings(findings_dir or out_dir / "findings", adapter.text)
    if progress is not None:
        progress.total, progress.done = len(jobs), len(done)
        if adapter.kind != "python":
            progress.note(expected_duration(len(jobs) - len(done), probed / max(1, len(scenarios)),
                                            getattr(executor, "jobs", 1)))

    def on_result(job: Job, result: ScenarioResult) -> None:
        journal.add(result)
        findings.add(job, result)
        if progress is not None:
            progress.update(failed=result.verdict != "pass")

    extra = {"kind": "sweep", "double": double, "findings": str(findings.folder)}
    if reached:   # what the crash matrix reached (crash_jobs reports it)
        extra["coverage"] = reached[0].to_json()
        if progress is not None:
            progress.note(reached[0].text())
    extra["isolation"] = for_adapter(adapter, in_process=getattr(executor, "in_process", False)).to_json()
    if getattr(executor, "in_process", False):
        extra["untrusted"] = UNTRUSTED
    if shard is not None:
        extra["shard"] = shard.to_json()
    journal.start(resume)
    for job in jobs:      # a kill between a run's journal line and its finding: write what is missing
        if job.id in done:
            findings.add(job, done[job.id])
    try:
        results, internal = execute(jobs, adapter=adapter, seed=seed, out_dir=out_dir, keep=keep,
                                    executor=executor, done=done, on_result=on_result)
    except Interrupted as exc:
        card = score(exc.results, adapter=adapter.text, seed=seed)
        exc.partial = replace(card, verdict="unknown", extra={
            **card.extra, **extra, "partial": {"done": len(exc.results), "planned": len(jobs),
                                               "reason": f"interrupted by signal {exc.signum}"}})
        raise
    finally:
        journal.close()
    card = score(results, adapter=adapter.text, seed=seed)
    if internal:
        extra["internal_errors"] = internal
    return replace(card, verdict="unknown" if internal and card.verdict == "pass" else card.verdict,
                   extra={**card.extra, **extra})


# --------------------------------------------------------------------------- merge
def merge(paths: list[Path], notes: list[str] | None = None) -> Scorecard:
    """Join the results JSON of the shards of one run into the results of the unsharded run. Each
    shard's scenarios are first checked against the traces it names, where they are here (the path
    as written, or in the shard's folder): a shard its traces contradict is refused
    (crashlab.checks.rubric.Contradicted, one line per scenario). ``notes`` receives a line per
    shard naming the verdicts taken from its file, not re-checked (no trace kept, or not here)."""
    from ..checks.rubric import Contradicted, score, scorecard_from_json

    if not paths:
        raise UsageError("merge: give the results JSON of every shard")
    cards, refused = [], []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"), parse_constant=_refuse)
            cards.append((p, scorecard_from_json(data, traces=_shard_traces(Path(p)), source=p)))
        except Contradicted as exc:       # every shard's disagreements, then refused
            refused.append(exc)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{p}: cannot read: {exc}") from None
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise UsageError(f"{p}: not a crashlab results JSON: {str(exc)[:200]}") from None
    if refused:
        raise Contradicted(", ".join(str(e.source) for e in refused), [ln for e in refused for ln in e.lines],
                           refused[0].adapter)
    for p, card in cards:
        unchecked = card.extra.get("unchecked") or {}
        for why in dict.fromkeys(unchecked.values()):
            named = [r.id + (f" ({r.trace})" if why == NOT_HERE else "") for r in card.scenarios
                     if unchecked.get(r.id) == why]
            if notes is not None:
                notes.append(f"{p}: {len(named)} verdict{'' if len(named) == 1 else 's'} taken from the results "
                             f"file, not re-checked ({why}): {', '.join(named[:5])}"
                             + (f" and {len(named) - 5} more" if len(named) > 5 else ""))
    first_path, first = cards[0]
    for p, card in cards:
        for name in ("adapter", "seed"):
            if getattr(card, name) != getattr(first, name):
                raise UsageError(f"{p}: {name} {getattr(card, name)!r} differs from {first_path}'s "
                                 f"{getattr(first, name)!r}; merge the shards of one run")
        for name in ("kind", "double"):
            if card.extra.get(name) != first.extra.get(name):
                raise UsageError(f"{p}: {name} differs from {first_path}'s; merge the shards of one run")
        if card.extra.get("rules") != first.extra.get("rules"):
            raise UsageError(f"{p}: judged by rule set {card.extra.get('rules')}, {first_path} by rule set "
                             f"{first.extra.get('rules')}; merge shards judged by one rule set (run the other "
                             "shards again with this crashlab)")
        if card.extra.get("partial"):
            raise UsageError(f"{p}: partial results (interrupted); run that shard again (sweeps: --resume)")
    shards = shard_order([(str(p), card.extra.get("shard")) for p, card in cards])
    results = [list(cards[i][1].scenarios) for i in shards]
    ordered = _interleave(results)
    card = score(ordered, adapter=first.adapter, seed=first.seed)
    extra = {k: v for k, v in first.extra.items() if k not in ("shard", "rubric", "internal_errors", "unchecked")}
    weakest = [c.extra.get("isolation") for _, c in cards if c.extra.get("isolation") != first.extra.get("isolation")]
    if weakest:   # shards run under different isolation: the merged results claim only the weaker one
        extra.pop("isolation", None)
        found = next((i for i in (first.extra.get("isolation"), *weakest) if i is None or i.get("mode") != "namespaces"), None)
        if found is not None:
            extra["isolation"] = found
    internal = [e for _, c in cards for e in c.extra.get("internal_errors", [])]
    if internal:
        extra["internal_errors"] = internal
    merged = {**card.extra, **extra}
    if "rules" not in first.extra:      # shards written before rule sets were numbered name none
        merged.pop("rules", None)
    return replace(card, verdict="unknown" if internal and card.verdict == "pass" else card.verdict,
                   extra=merged)


#: Why a shard's verdict was not checked again when the trace it names is not on this machine.
NOT_HERE = "its trace is not here"


def _shard_traces(results: Path):
    """The saved trace of each of a shard's scenarios, as its path is written or in the shard's folder:
    ``(path, events)``, None when it kept none, :data:`NOT_HERE` when the file is elsewhere."""
    from ..world.trace import read_jsonl

    def found(res: ScenarioResult):
        if not res.trace:
            return None
        given = Path(res.trace)
        path = next((c for c in (given, results.parent / given, results.parent / given.name) if c.is_file()), None)
        return NOT_HERE if path is None else (path, read_jsonl(path))
    return found


def shard_order(parts: list[tuple[str, Any]]) -> list[int]:
    """The positions of ``parts`` (name, ``shard`` field) in shard order 1..N, after checking that
    they are every shard of one cut exactly once; a usage error names what is wrong."""
    by_index: dict[Any, int] = {}
    counts = set()
    for i, (name, shard) in enumerate(parts):
        if not isinstance(shard, dict):
            raise UsageError(f"{name}: not the results of a shard (no 'shard' field); run with --shard I/N")
        if shard.get("index") in by_index:
            raise UsageError(f"{name}: shard {shard.get('index')} is also {parts[by_index[shard['index']]][0]}")
        by_index[shard.get("index")] = i
        counts.add(shard.get("count"))
    if len(counts) != 1:
        raise UsageError("merge: the shards were cut differently (--shard I/N with different N)")
    count = counts.pop()
    missing = sorted(set(range(1, count + 1)) - set(by_index))
    if missing:
        raise UsageError(f"merge: shard(s) {', '.join(map(str, missing))} of {count} missing")
    return [by_index[i] for i in range(1, count + 1)]


def _interleave(per_shard: list[list[Any]]) -> list[Any]:
    """Undo ``Shard.select``: shard I holds jobs I-1, I-1+N, ... of the unsharded order."""
    out = []
    for row in range(max((len(r) for r in per_shard), default=0)):
        out.extend(r[row] for r in per_shard if row < len(r))
    return out


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
