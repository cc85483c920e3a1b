"""One job (one run of one scenario document), and its verdict.

:func:`run_traced` runs a job in a worker process and returns its trace unchecked;
:func:`judge`, in crashlab's own process, checks what came back (or records why nothing
usable did: the worker died, hung, was stopped, or returned something that is not a trace of
that run) and says which files to write. :func:`run_job` does both in one process
(``--in-process``, and a Dask worker). The traces are the same bytes either way.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from . import isolate
from .drivers import AdapterSpec, load_adapter
from ..vocab.errors import InternalError
from .jobs import Done, Lost
from ..vocab.results import ScenarioResult
from .runner import Limits, RunResult, fault_trace, portable_source, repro_command, run_scenario
from ..vocab.compiled import Scenario
from ..scenario.loader import from_dict
from ..scenario.yaml import to_yaml
from ..vocab.files import trace_path


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One run: a compiled scenario (conformance), or a scenario document (a crash point)."""

    id: str
    base: str                           # the library or user scenario it comes from
    scenario: Scenario | None = None
    doc: dict | None = None             # with ``crashes``: the document they are added to, shared, never changed
    source: str | None = None
    crashes: tuple[dict, ...] = ()      # a crash point's rules (crashlab.run.crashpoints.crash_plans)

    def document(self) -> dict | None:
        """The scenario document this job runs (None for a compiled scenario): a crash point's is
        made when asked, so that a sweep's many jobs hold one document per base scenario."""
        if not self.crashes:
            return self.doc
        from .crashpoints import with_crashes

        return with_crashes(self.doc, self.id, self.crashes)


@dataclass(frozen=True, slots=True)
class Outcome:
    result: ScenarioResult
    files: tuple[tuple[str, str], ...] = ()   # (path, text) to write: the trace, a crash point's scenario
    internal: str | None = None               # crashlab's own error in this run, if any
    stderr: tuple[tuple[str, str], ...] = ()  # (worker, the tail of its adapter process's standard error)


# --------------------------------------------------------------------------- one job
_ADAPTERS: dict[str, AdapterSpec] = {}   # by isolation asked for and spec


def _adapter(text: str) -> AdapterSpec:
    """The spec, imported here for a Python adapter only: a ``wire:`` adapter's module is imported by
    its warm server, never by the worker process that runs the simulation (crashlab.run.jobs)."""
    key = f"{isolate.requested()} {text}"      # --isolation namespaces runs a Python adapter over the wire
    spec = _ADAPTERS.get(key)
    if spec is None:
        spec = _ADAPTERS[key] = load_adapter(text, import_code=not text.startswith("wire:"))
    return spec


def _scenario(job: Job) -> Scenario:
    return job.scenario if job.scenario is not None else from_dict(job.document(), file=job.source)


def run_job(job: Job, *, adapter: str, seed: int | None, out_dir: str | None, keep: str,
            limits: Limits | None = None, checks: frozenset[str] | None = None) -> Outcome:
    """Run and check one job in this process (``--in-process``, and a Dask worker)."""
    scenario = _scenario(job)
    try:
        run = run_scenario(scenario, _adapter(adapter), seed, limits)
    except InternalError as exc:
        return _internal(job, scenario, adapter, seed, str(exc))
    outcome = _judged(job, scenario, run.events, run.to_jsonl(), run.seed, adapter, out_dir, keep, checks)
    return replace(outcome, stderr=tuple(run.stderr.items()))


def run_traced(job: Job, *, adapter: str, seed: int | None, limits: Limits | None = None) -> tuple[dict, bytes]:
    """In a worker process: run one job and return its trace (JSONL bytes), unchecked; crashlab's
    own process checks it (a worker runs adapter code, so nothing it decides is trusted)."""
    scenario = _scenario(job)
    try:
        run = run_scenario(scenario, _adapter(adapter), seed, limits)
    except InternalError as exc:
        return {"internal": str(exc)[:2000]}, b""
    return {"seed": run.seed, "stderr": run.stderr}, run.to_jsonl().encode("utf-8")


def judge(job: Job, reply: Done | Lost, *, adapter: str, seed: int | None, out_dir: str | None,
          keep: str, checks: frozenset[str] | None = None) -> Outcome:
    """In crashlab's own process: check what a worker returned for ``job``. A worker that did not
    return a trace (it died, hung, was stopped) or returned one that is not a trace of this job
    is the adapter's fault, recorded on a trace of its own."""
    scenario = _scenario(job)
    if isinstance(reply, Done) and reply.error:
        return _internal(job, scenario, adapter, seed, reply.error)
    if isinstance(reply, Done) and isinstance(reply.header, dict) and reply.header.get("internal"):
        return _internal(job, scenario, adapter, seed, str(reply.header["internal"]))
    events = text = None
    if isinstance(reply, Done):
        events, text, problem = _parse_trace(reply.payload, scenario, adapter, seed)
        if events is None:
            reply = Lost("garbled", f"the worker process returned no trace of this run: {problem}")
    if events is None:
        run = fault_trace(scenario, adapter, seed, reply.kind, reply.message)
        events, text = run.events, run.to_jsonl()
    outcome = _judged(job, scenario, events, text, events[0]["seed"], adapter, out_dir, keep, checks)
    return replace(outcome, stderr=_stderr(reply))


#: At most this much of each worker's standard error comes back from a worker process (its tail).
STDERR_KEPT = (40, 4000)


def _stderr(reply: Done | Lost) -> tuple[tuple[str, str], ...]:
    """The standard-error tails a worker returned (adapter output, shown escaped by `crashlab run`,
    never judged): only strings, bounded."""
    tails = reply.header.get("stderr") if isinstance(reply, Done) and isinstance(reply.header, dict) else None
    if not isinstance(tails, dict):
        return ()
    workers, chars = STDERR_KEPT
    return tuple((k[:200], v[-chars:]) for k, v in list(tails.items())[:workers]
                 if isinstance(k, str) and isinstance(v, str))


def _parse_trace(payload: bytes, scenario: Scenario, adapter: str,
                 seed: int | None = None) -> tuple[list | None, str | None, str]:
    """The events of a trace a worker returned, or (None, None, what is wrong). Its provenance is
    checked too: a trace of this scenario (its runs), this adapter and this seed (the scenario's own
    when ``seed`` is None), its events numbered from 0 without a gap, one header first, one end last,
    and every event's run one of the scenario's runs."""
    try:
        text = payload.decode("utf-8")
        if not text.endswith("\n") or text.count("\n") < 3:
            return None, None, "it is cut short"
        events = orjson.loads(b"[" + payload[:-1].replace(b"\n", b",") + b"]")  # one document: faster
        if len(events) != text.count("\n"):
            return None, None, "a line holds more than one event"
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        return None, None, f"it is not JSON lines ({str(exc)[:120]})"
    try:  # whole-list checks: each event an object with seq counting from 0, an integer t, string kind and lane
        shaped = {type(e) for e in events} == {dict} and [e["seq"] for e in events] == list(range(len(events))) \
            and {type(e["t"]) for e in events} == {int} and {type(e["kind"]) for e in events} == {str} \
            and {type(e["lane"]) for e in events} == {str}
    except (KeyError, TypeError):
        shaped = False
    if not shaped:
        return None, None, "not every line is a trace event (seq, t, lane, kind)"
    head = events[0]
    if head["kind"] != "header" or head.get("scenario") != scenario.id or head.get("adapter") != adapter \
            or type(head.get("seed")) is not int or events[-1]["kind"] != "end":
        return None, None, "its header or end does not belong to this run"
    problem = _provenance(events, scenario, scenario.seed if seed is None else seed)
    return (None, None, problem) if problem else (events, text, "")


def _provenance(events: list, scenario: Scenario, seed: int) -> str:
    """What in a trace with a header and an end shows it is not a trace of this run ('' if nothing)."""
    head = events[0]
    if head["seed"] != seed:
        return f"its header names seed {head['seed']!r}, not the seed {seed} of this run"
    runs = [r.get("id") if isinstance(r, dict) else None for r in head.get("runs") or ()] \
        if isinstance(head.get("runs"), list) else None
    if runs != [r.id for r in scenario.runs]:
        return "its header names other runs than this scenario's"
    kinds = [e["kind"] for e in events]
    if kinds.count("header") != 1 or kinds.count("end") != 1:
        return "it holds more than one header or end"
    known = {None, *runs}
    if any(type(e.get("run")) not in (str, type(None)) or e.get("run") not in known for e in events):
        return "an event names a run that is not this scenario's"
    return ""


def _internal(job: Job, scenario: Scenario, adapter: str, seed: int | None, error: str) -> Outcome:
    used = scenario.seed if seed is None else seed
    repro = shlex.join(["crashlab", "run", portable_source(scenario) or scenario.id, "--adapter", adapter,
                        "--seed", str(used)])
    result = ScenarioResult(id=job.id, title=scenario.title, verdict="unknown", dispositions={},
                            notes=(f"internal error: {error[:500]}",), seed=used, repro=repro,
                            tags=tuple(scenario.tags))
    return Outcome(result, internal=error[:2000])


def _judged(job: Job, scenario: Scenario, events: list, text: str, used_seed: int, adapter: str,
            out_dir: str | None, keep: str, checks: frozenset[str] | None = None) -> Outcome:
    """Check a run's trace (by ``checks``, an older rule set's, or every check) and say what to save."""
    from ..checks import check_trace  # local: checks import networkx

    path = trace_path(Path(out_dir), scenario, used_seed) if out_dir is not None else None
    verdict = check_trace(events, trace_path=str(path) if path else None, checks=checks)
    result = replace(verdict, repro=repro_command(scenario, adapter, used_seed), seed=used_seed)
    save = path is not None and (keep == "all" or (keep == "failing" and result.verdict != "pass"))
    if not save:
        return Outcome(replace(result, trace=None, repro=result.repro if job.doc is None else ""))
    files = [(str(path), text)]
    if job.doc is not None:  # a crash point is no library scenario: save it, so that its repro runs as pasted
        doc_path = path.with_name(path.name.removesuffix(".jsonl") + ".yaml")
        files.append((str(doc_path), to_yaml(job.document())))
        result = replace(result, repro=shlex.join(["crashlab", "run", str(doc_path), "--adapter", adapter,
                                                   "--seed", str(used_seed)]))
    return Outcome(result, tuple(files))


def check_run(result: RunResult, *, saved: Path | None = None, checks: frozenset[str] | None = None) -> ScenarioResult:
    from ..checks import check_trace  # local: checks import networkx

    verdict = check_trace(result.events, trace_path=str(saved) if saved else None, checks=checks)
    return replace(verdict, repro=result.repro, seed=result.seed)
