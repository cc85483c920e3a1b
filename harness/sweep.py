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
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .drivers import AdapterSpec, load_adapter
from .errors import InternalError, Interrupted, UsageError
from .files import atomic_write_text
from .results import ScenarioResult, Scorecard
from .runner import Limits, portable_source, run_scenario
from .scenario_compiled import Scenario
from .scenario_loader import from_dict

JOURNAL = "sweep.journal.jsonl"
DEFAULT_BATCH = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One run: a compiled scenario (conformance), or a scenario document (a crash point)."""

    id: str
    base: str                           # the library or user scenario it comes from
    scenario: Scenario | None = None
    doc: dict | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    result: ScenarioResult
    files: tuple[tuple[str, str], ...] = ()   # (path, text) to write: the trace, a crash point's scenario
    internal: str | None = None               # crashlab's own error in this run, if any


# --------------------------------------------------------------------------- one job
_ADAPTERS: dict[str, AdapterSpec] = {}


def _adapter(text: str) -> AdapterSpec:
    spec = _ADAPTERS.get(text)
    if spec is None:
        spec = _ADAPTERS[text] = load_adapter(text)
    return spec


def run_job(job: Job, *, adapter: str, seed: int | None, out_dir: str | None, keep: str,
            limits: Limits | None = None, checks: frozenset[str] | None = None) -> Outcome:
    """Run and check one job (in whichever process the executor chose)."""
    from .conformance import check_run, trace_path

    scenario = job.scenario if job.scenario is not None else from_dict(job.doc, file=job.source)
    try:
        run = run_scenario(scenario, _adapter(adapter), seed, limits)
    except InternalError as exc:
        used = scenario.seed if seed is None else seed
        repro = shlex.join(["crashlab", "run", portable_source(scenario) or scenario.id, "--adapter", adapter,
                            "--seed", str(used)])
        result = ScenarioResult(id=job.id, title=scenario.title, verdict="unknown", dispositions={},
                                notes=(f"internal error: {str(exc)[:500]}",), seed=used, repro=repro,
                                tags=tuple(scenario.tags))
        return Outcome(result, internal=str(exc)[:2000])
    path = trace_path(Path(out_dir), scenario, run.seed) if out_dir is not None else None
    result = check_run(run, saved=path, checks=checks)
    save = path is not None and (keep == "all" or (keep == "failing" and result.verdict != "pass"))
    if not save:
        return Outcome(replace(result, trace=None, repro=result.repro if job.doc is None else ""))
    files = [(str(path), run.to_jsonl())]
    if job.doc is not None:  # a crash point is no library scenario: save it, so that its repro runs as pasted
        from .explore import to_yaml

        doc_path = path.with_name(path.name.removesuffix(".jsonl") + ".yaml")
        files.append((str(doc_path), to_yaml(job.doc)))
        result = replace(result, repro=shlex.join(["crashlab", "run", str(doc_path), "--adapter", adapter,
                                                   "--seed", str(run.seed)]))
    return Outcome(result, tuple(files))


def _apply_batch(fn: Callable[..., Any], items: list, kw: dict) -> list:
    """One Dask task: a batch of jobs through a module-level function (run_job, explore_chunk)."""
    return [fn(item, **kw) for item in items]


# --------------------------------------------------------------------------- executors
def _ignore_interrupts() -> None:
    """Pool workers leave SIGINT to the parent, which stops them (a terminal sends it to all).
    What a worker inherited from the parent (the job list, the library) is frozen out of the
    garbage collector's scans: a scan writes to every object it visits, which would copy the
    parent's pages into each worker (its memory then grew with the sweep's size)."""
    import gc

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.freeze()


class LocalExecutor:
    """``jobs`` worker processes (forked) on this machine; 1 runs everything in this process."""

    def __init__(self, jobs: int = 1, batch: int = DEFAULT_BATCH) -> None:
        self.jobs, self.batch = max(1, jobs), max(1, batch)

    def map(self, fn: Callable[[Job], Outcome], jobs: list[Job]) -> Iterator[Outcome]:
        workers = min(self.jobs, len(jobs))
        if workers <= 1:
            yield from map(fn, jobs)
            return
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(workers, _ignore_interrupts)
        try:
            chunk = max(1, min(self.batch, len(jobs) // (4 * workers) or 1))
            yield from pool.imap(fn, jobs, chunksize=chunk)
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()


class DaskExecutor:
    """A Dask cluster: ``scheduler`` is its address (tcp://host:8786); without one, a local
    cluster of ``jobs`` worker processes. Jobs go in batches of ``batch`` per task (one run
    per task costs milliseconds of scheduling; batches of 16 to 64 approach a local pool)."""

    def __init__(self, scheduler: str | None = None, jobs: int = 1, batch: int = DEFAULT_BATCH) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--executor dask needs Dask: pip install 'crashlab[dask]'") from None
        self.batch = max(1, batch)
        self.cluster = None
        try:
            if scheduler:
                self.client = Client(scheduler, timeout=30)
            else:
                self.cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                                            dashboard_address=None)
                self.client = Client(self.cluster)
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {scheduler}: cannot reach the Dask scheduler: {exc}") from None

    def map(self, fn: Callable[[Any], Any], jobs: list) -> Iterator[Any]:
        batches = [jobs[i:i + self.batch] for i in range(0, len(jobs), self.batch)]
        inner = fn.func if isinstance(fn, functools.partial) else fn
        kw = fn.keywords if isinstance(fn, functools.partial) else {}
        futures = [self.client.submit(_apply_batch, inner, b, kw, pure=False) for b in batches]
        try:
            for future in futures:
                yield from future.result()
        except BaseException:
            self.client.cancel(futures)
            raise

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def make_executor(kind: str, *, jobs: int, scheduler: str | None, batch: int):
    if kind == "local":
        return LocalExecutor(jobs, batch)
    if kind == "dask":
        return DaskExecutor(scheduler, jobs, batch)
    raise UsageError(f"--executor {kind!r}: expected local or dask")


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# --------------------------------------------------------------------------- shards
@dataclass(frozen=True, slots=True)
class Shard:
    index: int          # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        i, sep, n = text.partition("/")
        try:
            shard = cls(int(i), int(n))
        except ValueError:
            shard = None
        if not sep or shard is None or not 1 <= shard.index <= shard.count:
            raise UsageError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
        return shard

    def select(self, jobs: list[Job]) -> list[Job]:
        return jobs[self.index - 1::self.count]

    def to_json(self) -> dict:
        return {"index": self.index, "count": self.count}


# --------------------------------------------------------------------------- running many jobs
def execute(jobs: list[Job], *, adapter: AdapterSpec, seed: int | None, out_dir: Path | None, keep: str,
            executor=None, limits: Limits | None = None, done: dict[str, ScenarioResult] | None = None,
            on_result: Callable[[Job, ScenarioResult], None] | None = None,
            checks: frozenset[str] | None = None) -> tuple[list[ScenarioResult], list[dict]]:
    """Run ``jobs`` (skipping those in ``done``), write the traces to keep, and return every
    result in the jobs' order with the list of crashlab's own errors. On an interrupt the
    :class:`Interrupted` carries ``results`` and ``internal`` for what finished."""
    done = dict(done or {})
    todo = [j for j in jobs if j.id not in done]
    fn = functools.partial(run_job, adapter=adapter.text, seed=seed, keep=keep, limits=limits, checks=checks,
                           out_dir=str(out_dir) if out_dir is not None else None)
    executor = executor or LocalExecutor(1)
    internal: list[dict] = []
    try:
        for job, outcome in zip(todo, executor.map(fn, todo)):
            for path, text in outcome.files:
                atomic_write_text(Path(path), text)
            if outcome.internal:
                internal.append({"scenario": job.id, "error": outcome.internal})
            done[job.id] = outcome.result
            if on_result is not None:
                on_result(job, outcome.result)
            if Interrupted.requested is not None:   # an interrupt that landed where it could not raise
                raise Interrupted(Interrupted.requested)
    except Interrupted as exc:
        exc.results = [done[j.id] for j in jobs if j.id in done]
        exc.internal = internal
        raise
    return [done[j.id] for j in jobs], internal


def scenario_jobs(scenarios: Iterable[Scenario]) -> list[Job]:
    return [Job(id=s.id, base=s.id, scenario=s) for s in scenarios]


def expected_duration(runs: int, per_run_s: float, workers: int) -> str:
    """The sweep's expected wall time, estimated from its job count and the probe runs (one
    undisturbed run of each scenario, timed here): an adapter process started per worker makes an
    exec: sweep of the whole library take many minutes, and it says so before it starts."""
    total = runs * per_run_s / max(1, workers)
    when = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
    return (f"{runs} runs planned; the probe runs took {per_run_s:.2f} s each here, so expect about {when} "
            f"with {max(1, workers)} worker(s) (-j N runs more at once; --shard splits it across machines)")


def crash_jobs(scenarios: list[Scenario], adapter: AdapterSpec, *, double: bool, executor=None) -> list[Job]:
    """A job per crash point of every scenario, found by probing an undisturbed run of each."""
    from .explore import crash_documents, double_crash_documents, probe_calls

    make = double_crash_documents if double else crash_documents
    jobs: list[Job] = []
    seen: set[str] = set()
    for scenario in scenarios:
        for doc in make(scenario, probe_calls(scenario, adapter)):
            base_id, n = doc["id"], 1
            while doc["id"] in seen:  # ids are cut at 80 characters: keep them distinct
                n += 1
                doc["id"] = f"{base_id[:76]}~{n}"
            seen.add(doc["id"])
            jobs.append(Job(id=doc["id"], base=scenario.id, doc=doc, source=portable_source(scenario)))
    return jobs


# --------------------------------------------------------------------------- findings and journal
class Findings:
    """Each distinct failure (base scenario + violated invariants) as a scenario file with a repro
    command, written the moment it is found; ``index.jsonl`` lists them."""

    def __init__(self, folder: Path, adapter: str) -> None:
        self.folder, self.adapter = folder, adapter
        self.keys: set[tuple] = set()
        index = folder / "index.jsonl"
        if index.is_file():
            for line in index.read_text(encoding="utf-8").splitlines():
                try:
                    item = json.loads(line)
                    self.keys.add((item["base"], tuple(item["invariants"])))
                except (ValueError, KeyError, TypeError):
                    continue

    def add(self, job: Job, result: ScenarioResult) -> Path | None:
        from .conformance import safe_name
        from .explore import to_yaml

        invariants = tuple(sorted({v.invariant for v in result.violations})) or ("verdict:" + result.verdict,)
        key = (job.base, invariants)
        if result.verdict == "pass" or key in self.keys:
            return None
        self.keys.add(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{len(self.keys):04d}-{safe_name(job.id)}.yaml"
        repro = f"crashlab run {shlex.quote(str(path))} --adapter {shlex.quote(self.adapter)}"
        doc = job.doc if job.doc is not None else dict(job.scenario.raw)
        text = (f"# crashlab finding: {', '.join(invariants)}\n# repro: {repro}\n"
                + "".join(f"# {v.invariant}: {' '.join(v.message.split())[:300]}\n" for v in result.violations)
                + to_yaml(doc))
        atomic_write_text(path, text)
        with open(self.folder / "index.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": job.id, "base": job.base, "invariants": list(invariants),
                                 "file": str(path), "repro": repro}, sort_keys=True) + "\n")
        return path


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
    from .checks.rubric import score

    probing = time.monotonic()
    jobs = crash_jobs(scenarios, adapter, double=double)
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
    if shard is not None:
        extra["shard"] = shard.to_json()
    journal.start(resume)
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
def merge(paths: list[Path]) -> Scorecard:
    """Join the results JSON of the shards of one run into the results of the unsharded run."""
    from .checks.rubric import score

    if not paths:
        raise UsageError("merge: give the results JSON of every shard")
    cards = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"), parse_constant=_refuse)
            cards.append((p, Scorecard.from_json(data)))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{p}: cannot read: {exc}") from None
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise UsageError(f"{p}: not a crashlab results JSON: {str(exc)[:200]}") from None
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
    extra = {k: v for k, v in first.extra.items() if k not in ("shard", "rubric", "internal_errors")}
    internal = [e for _, c in cards for e in c.extra.get("internal_errors", [])]
    if internal:
        extra["internal_errors"] = internal
    merged = {**card.extra, **extra}
    if "rules" not in first.extra:      # shards written before rule sets were numbered name none
        merged.pop("rules", None)
    return replace(card, verdict="unknown" if internal and card.verdict == "pass" else card.verdict,
                   extra=merged)


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
