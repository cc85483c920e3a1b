"""The conformance suite as plain functions (trio's ``check_one_way_stream`` style).

``run_suite`` runs scenarios against an adapter and scores them; ``check_adapter`` raises
:class:`~harness.errors.ConformanceFailure` (an AssertionError) naming the invariant, the
evidence and a one-line repro command. The CLI and the pytest plugin are glue around these.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from .drivers import AdapterSpec, load_adapter
from .errors import ConformanceFailure
from .results import ScenarioResult, Scorecard, outcome_text
from .runner import Limits, RunResult, run_scenario
from .scenario import Scenario, library
from .trace import write_jsonl

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file name derived from a scenario id that cannot escape the output folder."""
    name = _SAFE.sub("_", text).strip("._") or "scenario"
    return name[:100]


def trace_path(out_dir: Path, scenario: Scenario, seed: int) -> Path:
    return out_dir / f"{safe_name(scenario.id)}.seed{seed}.jsonl"


def check_run(result: RunResult, *, saved: Path | None = None) -> ScenarioResult:
    from .checks import check_trace  # local: checks import networkx

    verdict = check_trace(result.events, trace_path=str(saved) if saved else None)
    return replace(verdict, repro=result.repro, seed=result.seed)


def run_one(scenario: Scenario, adapter: AdapterSpec | str | None = None, *, seed: int | None = None,
            out_dir: Path | None = None, limits: Limits | None = None) -> tuple[RunResult, ScenarioResult]:
    result = run_scenario(scenario, adapter, seed, limits)
    saved = None
    if out_dir is not None:
        saved = trace_path(Path(out_dir), scenario, result.seed)
        write_jsonl(result.events, saved)
    return result, check_run(result, saved=saved)


def run_suite(adapter: AdapterSpec | str | None = None, scenarios: Iterable[Scenario] | None = None, *,
              seed: int | None = None, out_dir: Path | None = None, limits: Limits | None = None,
              progress=None) -> Scorecard:
    """Run every scenario (default: the whole library) and score the adapter."""
    from .checks.rubric import score

    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    results = []
    for scenario in (library() if scenarios is None else scenarios):
        _, verdict = run_one(scenario, spec, seed=seed, out_dir=out_dir, limits=limits)
        results.append(verdict)
        if progress is not None:
            progress(verdict)
    return score(results, adapter=spec.text, seed=seed)


def failure_message(result: ScenarioResult) -> str:
    """Plain text naming each violated invariant, its evidence and the repro command."""
    lines = [f"scenario {result.id}: {result.verdict}"
             + (f" (dispositions: {result.dispositions})" if result.dispositions else "")]
    for v in result.violations:
        ev = ", ".join(f"#{s}" for s in v.events) or "no events"
        lines.append(f"  {v.invariant}: {v.message} [evidence {ev}]"
                     + (f" (automatic failure: {v.auto_fail})" if v.auto_fail else ""))
        if v.expected is not None or v.observed is not None:
            lines.append(f"    expected {outcome_text(v.expected)}; observed {outcome_text(v.observed)}")
        if v.rule:
            lines.append(f"    rule {v.point or ''} ({v.rule.get('source')}): \"{v.rule.get('quote')}\"")
        elif v.point:
            lines.append(f"    costs rubric point {v.point} (no rule named in the scenario)")
        if v.cap:
            lines.append(f"    scoring rule: {v.cap} (docs/rubric.md)")
    lines.extend(f"  note: {n}" for n in result.notes)
    if result.trace:
        lines.append(f"  trace: {result.trace}")
    lines.append(f"  repro: {result.repro}")
    return "\n".join(lines)


def check_scenario(scenario: Scenario, adapter: AdapterSpec | str | None = None, *,
                   seed: int | None = None, out_dir: Path | None = None) -> ScenarioResult:
    """Run one scenario; raise ConformanceFailure unless the verdict is pass."""
    _, verdict = run_one(scenario, adapter, seed=seed, out_dir=out_dir)
    if verdict.verdict != "pass":
        raise ConformanceFailure(failure_message(verdict), seed=verdict.seed)
    return verdict


def check_adapter(adapter: AdapterSpec | str | None = None, *, seed: int | None = None) -> Scorecard:
    """The whole suite; raise ConformanceFailure unless the adapter scores 20/20 with no violation."""
    card = run_suite(adapter, seed=seed)
    if card.verdict != "pass":
        bad = [s for s in card.scenarios if s.verdict != "pass"]
        raise ConformanceFailure(f"{card.total}/{card.max}"
                                 + (f", automatic failure: {', '.join(card.auto_fail)}" if card.auto_fail else "")
                                 + "\n" + "\n".join(failure_message(s) for s in bad))
    return card
