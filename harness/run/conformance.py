"""The conformance suite as plain functions (trio's ``check_one_way_stream`` style).

``run_suite`` runs scenarios against an adapter and scores them; ``check_adapter`` raises
:class:`~crashlab.vocab.errors.ConformanceFailure` (an AssertionError) naming the invariant, the
evidence and a one-line repro command. The CLI and the pytest plugin are glue around these.
"""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from .drivers import AdapterSpec, load_adapter
from ..vocab.errors import ConformanceFailure, Interrupted, UsageError
from ..vocab.results import ScenarioResult, Scorecard
from .runner import Limits, RunResult, run_scenario
from ..vocab.compiled import Scenario
from ..scenario.loader import library
from ..world.trace import write_jsonl
from ..vocab.files import safe_name, trace_path  # noqa: F401 (named here by reports and tests)
from .judge import check_run
from ..vocab.results import failure_message  # noqa: F401 (named here by the CLI, the plugin and tests)

def run_one(scenario: Scenario, adapter: AdapterSpec | str | None = None, *, seed: int | None = None,
            out_dir: Path | None = None, limits: Limits | None = None) -> tuple[RunResult, ScenarioResult]:
    result = run_scenario(scenario, adapter, seed, limits)
    saved = None
    if out_dir is not None:
        saved = trace_path(Path(out_dir), scenario, result.seed)
        write_jsonl(result.events, saved)
    return result, check_run(result, saved=saved)


def run_checked(scenario: Scenario, adapter: AdapterSpec | str | None = None, *, seed: int | None = None,
                out_dir: Path | None = None, limits: Limits | None = None, in_process: bool = False,
                stderr: dict[str, str] | None = None) -> ScenarioResult:
    """Run one scenario in a worker process and check its trace here (``in_process``: both here,
    the result marked untrusted). Its trace is written to ``out_dir``; an error of crashlab's own
    raises InternalError. ``stderr`` is filled with the adapter's standard-error tails, by worker."""
    from ..vocab.errors import InternalError
    from .executors import LocalExecutor, execute, scenario_jobs

    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter, import_code=in_process, in_process=in_process)
    executor = LocalExecutor(1, in_process=in_process, limits=limits)
    tails: dict[str, dict[str, str]] = {}
    [result], internal = execute(scenario_jobs([scenario]), adapter=spec, seed=seed, out_dir=out_dir, keep="all",
                                 executor=executor, limits=limits, stderr=tails)
    if stderr is not None:
        stderr.update(tails.get(scenario.id, {}))
    if internal:
        raise InternalError(internal[0]["error"], seed=result.seed, hint="please report this with the repro command")
    return result


def run_suite(adapter: AdapterSpec | str | None = None, scenarios: Iterable[Scenario] | None = None, *,
              seed: int | None = None, out_dir: Path | None = None, limits: Limits | None = None,
              progress=None, executor=None, shard=None, rules: int | None = None) -> Scorecard:
    """Run every scenario (default: the whole library) and score the adapter.

    Whatever one scenario's adapter does, the suite goes on to the next (it becomes that
    scenario's adapter fault). A bug of crashlab's own in one scenario is recorded as that
    scenario's unknown verdict and listed under ``extra["internal_errors"]``. ``executor``
    (crashlab.run.sweep) runs the scenarios in parallel or on a cluster and ``shard`` keeps one
    share of them; the results are the same either way. ``rules`` runs an older rule set this
    crashlab can still reproduce (crashlab.rules.ruleset.runnable): its checks and its library
    scenarios only. On an interrupt the
    :class:`~crashlab.vocab.errors.Interrupted` raised carries ``partial``: the scorecard of the
    scenarios that finished, marked partial (verdict unknown)."""
    from ..checks.rubric import score
    from ..rules.ruleset import selection
    from .executors import execute, scenario_jobs
    from .isolate import for_adapter

    in_process = getattr(executor, "in_process", False)
    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter, import_code=in_process, in_process=in_process)
    scenarios = library() if scenarios is None else list(scenarios)
    checks, later = selection(rules)
    jobs = scenario_jobs([s for s in scenarios if s.id not in later])
    if shard is not None:
        jobs = shard.select(jobs)
    extra = {"shard": shard.to_json()} if shard is not None else {}
    extra["isolation"] = for_adapter(spec, in_process=in_process).to_json()
    if in_process:
        from .executors import UNTRUSTED
        extra["untrusted"] = UNTRUSTED
    on_result = (lambda job, result: progress(result)) if progress is not None else None
    try:
        results, internal = execute(jobs, adapter=spec, seed=seed, out_dir=out_dir, keep="all",
                                    executor=executor, limits=limits, on_result=on_result, checks=checks,
                                    background_writes=True)
    except Interrupted as exc:
        card = score(exc.results, adapter=spec.text, seed=seed, rules=rules)
        exc.partial = replace(card, verdict="unknown", extra={
            **card.extra, **extra, "partial": {"done": len(exc.results), "planned": len(jobs),
                                               "reason": f"interrupted by signal {exc.signum}"},
            **({"internal_errors": exc.internal} if exc.internal else {})})
        raise
    card = score(results, adapter=spec.text, seed=seed, rules=rules)
    if internal:
        extra["internal_errors"] = internal
    return replace(card, verdict="unknown" if internal and card.verdict == "pass" else card.verdict,
                   extra={**card.extra, **extra})


def recheck_saved(events: list[dict], path: str | Path) -> ScenarioResult:
    """Check a trace read from a file (``read_jsonl``). A trace crashlab wrote checks cleanly; one
    that was edited into a shape the checks cannot read is a usage error naming the file, not a
    crash."""
    from ..checks import check_trace  # local: checks import networkx

    head = events[0]
    try:
        result = check_trace(events, trace_path=str(path))
    except UsageError as exc:        # a field the checks or the integration card refuse: name the file too
        if str(exc.message).startswith(f"{path}:"):
            raise
        raise UsageError(f"{path}: {exc.message}", hint=exc.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        raise UsageError(f"{path}: cannot check this trace: an event does not have the shape crashlab writes "
                         f"({type(exc).__name__}: {str(exc)[:200]})",
                         hint="was it edited? docs/trace.md describes every event") from None
    src = head.get("source") or head.get("scenario")
    adapter = str(head.get("adapter"))
    if adapter.startswith("integrate:"):   # an integration run: a real worker in real time, no seed replays it
        from .repro import repro_line
        repro = repro_line(head)
    else:
        repro = shlex.join(["crashlab", "run", str(src), "--adapter", adapter, "--seed", str(head.get("seed"))])
    return replace(result, seed=head.get("seed", 0), repro=repro)


def collect_scenarios(paths: Iterable[str | Path]) -> list[Scenario]:
    """Scenario files, and the ``*.yaml``/``*.yml`` files of folders (sorted), in the order given;
    two scenarios with one id are a usage error naming both files."""
    from ..scenario.loader import load_file

    found: list[Scenario] = []
    where: dict[str, str] = {}
    for given in paths:
        p = Path(given)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml") and f.is_file())
            if not files:
                raise UsageError(f"--scenarios {p}: no .yaml scenario file in this folder")
        elif p.exists():
            files = [p]
        else:
            raise UsageError(f"--scenarios {p}: no such file or folder")
        for f in files:
            sc = load_file(f)
            if sc.id in where:
                raise UsageError(f"--scenarios: the id {sc.id!r} is used by both {where[sc.id]} and {f}; "
                                 "give each scenario its own id")
            where[sc.id] = str(f)
            found.append(sc)
    return found


def check_scenario(scenario: Scenario, adapter: AdapterSpec | str | None = None, *,
                   seed: int | None = None, out_dir: Path | None = None, in_process: bool = False) -> ScenarioResult:
    """Run one scenario (in a worker process, checked here); raise ConformanceFailure unless the
    verdict is pass."""
    verdict = run_checked(scenario, adapter, seed=seed, out_dir=out_dir, in_process=in_process)
    if verdict.verdict != "pass":
        raise ConformanceFailure(failure_message(verdict), seed=verdict.seed)
    return verdict


def check_adapter(adapter: AdapterSpec | str | None = None, *, seed: int | None = None) -> Scorecard:
    """The whole suite; raise ConformanceFailure unless the adapter scores 20/20 with no violation."""
    card = run_suite(adapter, seed=seed)
    if card.verdict != "pass":
        bad = [s for s in card.scenarios if s.verdict != "pass"]
        raise ConformanceFailure(card.score_text()
                                 + (f", automatic failure: {', '.join(card.auto_fail)}" if card.auto_fail else "")
                                 + "\n" + "\n".join(failure_message(s) for s in bad))
    return card
