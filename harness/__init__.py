"""crashlab: a deterministic fault-injection simulator and conformance harness for agent runs
that cause external effects (AR-08, "Make Execution Durable and Effects Recoverable").

The public API, one flat namespace (loaded on first use, so ``import crashlab`` stays light)::

    import crashlab

    card = crashlab.run_suite("my_pkg.adapter:MyAdapter")          # the whole library, scored
    print(card.total, card.verdict)
    crashlab.check_adapter(MyAdapter)                               # raises ConformanceFailure unless 20/20
    result = crashlab.run_scenario(crashlab.load_scenario("my.yaml"), MyAdapter, seed=7)
    verdict = crashlab.check_trace(crashlab.read_trace("run.jsonl"))

An adapter is a class (or factory) whose ``async def run(self, ports)`` acts only through
``ports`` (docs/adapters.md); port errors are ``PortError(code, definite)``.

The house, bottom up: ``vocab`` (states, events, results, errors) < ``world`` (the simulated world,
ports, traces) < ``scenario`` (the format) < ``rules`` (the rule set) < ``checks`` (judging a trace)
< ``run`` (runs, suites, sweeps) < ``reference_impl``, ``gallery`` (adapters) < ``sandbox``,
``integrate``, ``runtimes``, ``probe`` (real processes) < ``report`` < ``cli``, ``workshop`` and
``plugin``. Each package opens with two lines, what it owns and which floors it may import (only
those below it); tests/test_house.py holds every import to them. Old module paths
(``crashlab.scenario_loader``) still import for one release, with a DeprecationWarning (``_moved``).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from . import _moved  # old module paths, for one release, with a warning

_EXPORTS: dict[str, tuple[str, str]] = {
    # running
    "run_scenario": ("run.runner", "run_scenario"), "Limits": ("run.runner", "Limits"), "RunResult": ("run.runner", "RunResult"),
    "run_one": ("run.conformance", "run_one"), "run_suite": ("run.conformance", "run_suite"),
    "check_scenario": ("run.conformance", "check_scenario"), "check_adapter": ("run.conformance", "check_adapter"),
    "sweep": ("run.sweep", "sweep"), "merge": ("run.sweep", "merge"),
    "load_adapter": ("run.drivers", "load_adapter"), "AdapterSpec": ("run.drivers", "AdapterSpec"),
    # scenarios
    "load_scenario": ("scenario", "load_file"), "load_scenario_text": ("scenario", "load_text"),
    "resolve_scenario": ("scenario", "resolve"), "library": ("scenario", "library"), "Scenario": ("scenario", "Scenario"),
    # traces and checks
    "read_trace": ("world.trace", "read_jsonl"), "write_trace": ("world.trace", "write_jsonl"),
    "check_trace": ("checks", "check_trace"), "score": ("checks.rubric", "score"),
    # the adapter's side
    "Ports": ("world.ports", "Ports"), "PortError": ("world.ports", "PortError"), "PortCall": ("vocab.model", "PortCall"),
    # results
    "ScenarioResult": ("vocab.results", "ScenarioResult"), "Scorecard": ("vocab.results", "Scorecard"),
    "Violation": ("vocab.results", "Violation"), "LostPoint": ("vocab.results", "LostPoint"),
    # errors
    "CrashlabError": ("vocab.errors", "CrashlabError"), "UsageError": ("vocab.errors", "UsageError"),
    "InvalidScenario": ("vocab.errors", "InvalidScenario"), "ConformanceFailure": ("vocab.errors", "ConformanceFailure"),
    "NondeterminismDetected": ("vocab.errors", "NondeterminismDetected"), "InternalError": ("vocab.errors", "InternalError"),
    "Interrupted": ("vocab.errors", "Interrupted"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        if name in _moved.MOVED:                 # crashlab.scenario_loader: the old path, with its warning
            return import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'crashlab' has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_moved.install()
