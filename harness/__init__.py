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
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, tuple[str, str]] = {
    # running
    "run_scenario": ("runner", "run_scenario"), "Limits": ("runner", "Limits"), "RunResult": ("runner", "RunResult"),
    "run_one": ("conformance", "run_one"), "run_suite": ("conformance", "run_suite"),
    "check_scenario": ("conformance", "check_scenario"), "check_adapter": ("conformance", "check_adapter"),
    "sweep": ("sweep", "sweep"), "merge": ("sweep", "merge"),
    "load_adapter": ("drivers", "load_adapter"), "AdapterSpec": ("drivers", "AdapterSpec"),
    # scenarios
    "load_scenario": ("scenario", "load_file"), "load_scenario_text": ("scenario", "load_text"),
    "resolve_scenario": ("scenario", "resolve"), "library": ("scenario", "library"), "Scenario": ("scenario", "Scenario"),
    # traces and checks
    "read_trace": ("trace", "read_jsonl"), "write_trace": ("trace", "write_jsonl"),
    "check_trace": ("checks", "check_trace"), "score": ("checks.rubric", "score"),
    # the adapter's side
    "Ports": ("ports", "Ports"), "PortError": ("ports", "PortError"), "PortCall": ("model", "PortCall"),
    # results
    "ScenarioResult": ("results", "ScenarioResult"), "Scorecard": ("results", "Scorecard"),
    "Violation": ("results", "Violation"), "LostPoint": ("results", "LostPoint"),
    # errors
    "CrashlabError": ("errors", "CrashlabError"), "UsageError": ("errors", "UsageError"),
    "InvalidScenario": ("errors", "InvalidScenario"), "ConformanceFailure": ("errors", "ConformanceFailure"),
    "NondeterminismDetected": ("errors", "NondeterminismDetected"), "InternalError": ("errors", "InternalError"),
    "Interrupted": ("errors", "Interrupted"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'crashlab' has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
