"""Running many jobs: the executors (worker processes from crashlab.run.jobs' pool, or Dask), shards,
and :func:`execute`, which runs jobs, judges their traces and writes the files to keep. Conformance
and sweep both run through it."""
from __future__ import annotations

import functools
import os
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from .drivers import AdapterSpec
from ..vocab.errors import AdapterProtocolError, InternalError, Interrupted, UsageError
from ..vocab.files import atomic_write_text
from . import isolate
from .isolate import keep_tmp
from .jobs import Lost, Pool
from .judge import Job, _adapter, _parse_trace, judge, run_job, run_traced
from ..vocab.results import ScenarioResult
from .runner import Limits
from ..vocab.compiled import Scenario


DEFAULT_BATCH = 16


def _apply_batch(fn: Callable[..., Any], items: list, kw: dict) -> list:
    """One Dask task: a batch of jobs through a module-level function (run_job, explore_chunk)."""
    return [fn(item, **kw) for item in items]


# --------------------------------------------------------------------------- executors
UNTRUSTED = ("untrusted: --in-process ran the adapter inside crashlab's own process, which an adapter can "
             "make exit, or change its verdict; run without --in-process for a verdict to rely on")


def _kept() -> set[int]:
    """The processes a worker keeps between items: its warm servers and idle adapter processes."""
    from .reuse import spare
    from .warm import _SERVERS

    return {pid for key, srv in _SERVERS.items() if key[2] == os.getpid() for pid in srv.keep} | spare()


class LocalExecutor:
    """``jobs`` worker processes (forked, supervised: crashlab.run.jobs) on this machine; adapter code
    runs only there, whatever ``jobs`` is. ``in_process`` runs everything in this process, one at
    a time (for debugging: its results are marked untrusted)."""

    def __init__(self, jobs: int = 1, batch: int = DEFAULT_BATCH, *, in_process: bool = False,
                 limits: Limits | None = None) -> None:
        self.jobs, self.batch = max(1, jobs), max(1, batch)
        self.in_process = in_process
        self.limits = limits or Limits()

    @property
    def isolated(self) -> bool:
        return not self.in_process

    def pool(self, adapter: str | None = None, *, in_process_adapter: bool = True,
             limits: Limits | None = None) -> Pool:
        limits = limits or self.limits   # the runs' own limits, when given, are what the watchdog times
        keep_tmp()   # the adapter processes' temporary folders go with this process, not with a worker
        return Pool(self.jobs, setup=(lambda: _adapter(adapter) and None) if adapter else None,
                    step_limit_s=limits.wall_guard_s * 1.1 if in_process_adapter else None,
                    run_limit_s=limits.run_wall_s or None, spare=_kept,
                    adapter_in_worker=in_process_adapter)

    def map(self, fn: Callable[[Any], Any], jobs: list, adapter: str | None = None) -> Iterator[Any]:
        """``fn`` over ``jobs`` (its results JSON values), in order; a job whose worker process did
        not return is an error naming it."""
        if self.in_process:
            yield from map(fn, jobs)
            return
        for job, reply in zip(jobs, self.pool(adapter).map(fn, jobs)):
            if isinstance(reply, Lost):
                raise AdapterProtocolError(f"{getattr(job, 'id', job)}: {reply.kind}: {reply.message}")
            if reply.error:
                raise InternalError(reply.error)
            yield reply.header


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
            checks: frozenset[str] | None = None, background_writes: bool = False,
            stderr: dict[str, dict[str, str]] | None = None) -> tuple[list[ScenarioResult], list[dict]]:
    """Run ``jobs`` (skipping those in ``done``), write the traces to keep, and return every
    result in the jobs' order with the list of crashlab's own errors. On an interrupt the
    :class:`Interrupted` carries ``results`` and ``internal`` for what finished.
    ``background_writes``: the files are written by a thread while the next trace is checked
    (all written before this returns or raises; ``on_result`` may run before its own are).
    ``stderr``: filled with each job's adapter standard-error tails, by worker."""
    done = dict(done or {})
    todo = [j for j in jobs if j.id not in done]
    where = str(out_dir) if out_dir is not None else None
    executor = executor or LocalExecutor(1, limits=limits)
    internal: list[dict] = []
    replies = None
    if getattr(executor, "isolated", False):
        traced = functools.partial(run_traced, adapter=adapter.text, seed=seed, limits=limits)
        replies = executor.pool(adapter.text, in_process_adapter=adapter.kind == "python",
                                limits=limits).map(traced, todo)
        outcomes = (judge(job, reply, adapter=adapter.text, seed=seed, out_dir=where, keep=keep, checks=checks)
                    for job, reply in zip(todo, replies))
    else:
        outcomes = executor.map(functools.partial(run_job, adapter=adapter.text, seed=seed, keep=keep,
                                                  limits=limits, out_dir=where, checks=checks), todo)
    untrusted = getattr(executor, "in_process", False)
    writes = _Writes(background_writes and replies is not None)
    try:
        for job, outcome in zip(todo, outcomes):
            if untrusted:
                outcome = replace(outcome, result=replace(outcome.result, notes=(*outcome.result.notes, UNTRUSTED)))
            for path, text in outcome.files:
                writes.add(Path(path), text)
            if outcome.internal:
                internal.append({"scenario": job.id, "error": outcome.internal})
            if stderr is not None and outcome.stderr:
                stderr[job.id] = dict(outcome.stderr)
            done[job.id] = outcome.result
            if on_result is not None:
                on_result(job, outcome.result)
            if Interrupted.requested is not None:   # an interrupt that landed where it could not raise
                raise Interrupted(Interrupted.requested)
    except Interrupted as exc:
        writes.close(quiet=True)  # the finished runs' traces are kept
        exc.results = [done[j.id] for j in jobs if j.id in done]
        exc.internal = internal
        raise
    except BaseException:
        writes.close(quiet=True)
        raise
    finally:
        if replies is not None:
            replies.close()  # the workers, and what they started, are gone before anything is written
    writes.close()
    return [done[j.id] for j in jobs], internal


class _Writes:
    """Files written in order, here or by one background thread; a failed write raises at the
    next file or at ``close`` (which waits for them all)."""

    def __init__(self, background: bool) -> None:
        self.pool = None
        if background:
            from concurrent.futures import ThreadPoolExecutor
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="crashlab-writes")
        self.pending: deque = deque()

    def add(self, path: Path, text: str) -> None:
        if self.pool is None:
            atomic_write_text(path, text)
            return
        while self.pending and self.pending[0].done():
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(atomic_write_text, path, text))

    def close(self, quiet: bool = False) -> None:
        if self.pool is None:
            return
        try:
            while self.pending:
                future = self.pending.popleft()
                try:
                    future.result()
                except Exception:
                    if not quiet:
                        raise
        finally:
            self.pool.shutdown(wait=True)
            self.pool = None


def _nothing(item: Any) -> None:
    return None


def check_imports(adapter: AdapterSpec) -> None:
    """UsageError unless a worker process can import the adapter (as ``load_adapter`` says it); a
    Python adapter that runs in namespaces (``wire:``, or ``--isolation namespaces``) is imported
    only in namespaces of its own, as its warm server will import it."""
    if adapter.kind == "warm" and isolate.current().mode == "namespaces":
        _check_import_isolated(adapter.module, adapter.text)
    elif adapter.kind in ("python", "warm"):
        from .drivers import load_adapter
        pool = Pool(1, setup=lambda: load_adapter(adapter.text) and None, run_limit_s=Limits().run_wall_s or None)
        for reply in pool.map(_nothing, [None]):
            if isinstance(reply, Lost):
                raise AdapterProtocolError(f"importing {adapter.text}: {reply.kind}: {reply.message}")


_IMPORT = ("import sys\nfrom crashlab.run.adapterspec import import_adapter\nfrom crashlab.vocab.errors import UsageError\n"
           "try:\n    import_adapter(sys.argv[1])\nexcept UsageError as exc:\n    print(exc, file=sys.stderr)\n"
           "    sys.exit(3)\n")


def _check_import_isolated(module: str, text: str) -> None:
    import subprocess
    import sys

    from .adapterspec import import_path

    tmp = isolate.private_tmp()   # the import path the warm server will have (crashlab.run.warm), found the same way
    try:
        done = subprocess.run(isolate.wrap([sys.executable, "-c", _IMPORT, module], cwd=os.getcwd(),
                                           env={"TMPDIR": tmp, "PYTHONPATH": import_path()}),
                              cwd=os.getcwd(), capture_output=True, text=True, errors="replace",
                              timeout=Limits().run_wall_s or 60)
    except subprocess.TimeoutExpired:
        raise AdapterProtocolError(f"importing {module}: it did not finish in namespaces") from None
    finally:
        isolate.remove_tmp(tmp)
    said = (done.stderr.strip().splitlines() or [""])[-1]
    if done.returncode == 3:   # named as the user gave it (wire:module:attribute)
        raise UsageError(said.replace(f"--adapter {module!r}", f"--adapter {text!r}", 1))
    if done.returncode != 0:
        raise AdapterProtocolError(f"importing {module} in namespaces: exit {done.returncode}: {said[:500]}")


def traced_once(scenario: Scenario, adapter: AdapterSpec, seed: int | None, limits: Limits | None = None) -> str:
    """One run in a worker process: its trace as text (``crashlab replay``); a worker that does
    not return one is an AdapterProtocolError naming why."""
    executor = LocalExecutor(1, limits=limits)
    job = Job(id=scenario.id, base=scenario.id, scenario=scenario)
    traced = functools.partial(run_traced, adapter=adapter.text, seed=seed, limits=limits)
    [reply] = executor.pool(adapter.text, in_process_adapter=adapter.kind == "python").map(traced, [job])
    if isinstance(reply, Lost):
        raise AdapterProtocolError(f"{scenario.id}: {reply.kind}: {reply.message}")
    if reply.error or reply.header.get("internal"):
        raise InternalError(reply.error or reply.header["internal"])
    events, text, problem = _parse_trace(reply.payload, scenario, adapter.text)
    if events is None:
        raise AdapterProtocolError(f"{scenario.id}: the worker process returned no trace of this run: {problem}")
    return text


def scenario_jobs(scenarios: Iterable[Scenario]) -> list[Job]:
    return [Job(id=s.id, base=s.id, scenario=s) for s in scenarios]
