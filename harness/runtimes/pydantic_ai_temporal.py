"""Pydantic AI on Temporal under ``crashlab integrate --runtime pydantic-ai-temporal``.

The agent carries Pydantic AI's ``TemporalDurability`` capability (or is a ``TemporalAgent``) and runs
inside the worker's own Temporal workflow: every model request is the activity
``agent__{agent}__model_request`` and every function tool call the activity
``agent__{agent}__toolset__{toolset}__call_tool``, unless the tool's metadata says ``'temporal': False``
(the tool then runs in the workflow's own code). crashlab starts the dev server as for ``--runtime
temporal`` (crashlab.runtimes.temporal) and reads the same history, adding what Pydantic AI put in it:
each tool call the model asked for (read from the model-request activities' results), which call ran as
an activity (read from the tool activities' inputs: the tool's name and its ``tool_call_id``), its
attempts, and the activity config it was scheduled with. The payloads are JSON (Pydantic AI's payload
converter): crashlab reads them with ``json``, never with the worker's code.
The unit of work is the Temporal workflow whose id, and task queue, is the run's ``CRASHLAB_RUNTIME_ID``.
"""
from __future__ import annotations

import pydantic_ai  # noqa: F401  (the extra: load() names it when missing)

from . import Runtime
from .agents_temporal import AgentOnTemporal, payloads, summary as agents_summary
from .temporal import VERSION as TEMPORAL_VERSION

VERSION = "2.68.0"
#: no Logfire, no OpenTelemetry export: nothing leaves 127.0.0.1
QUIET = {"LOGFIRE_SEND_TO_LOGFIRE": "false", "OTEL_SDK_DISABLED": "true"}


def annotate(event: dict) -> dict:
    """What Pydantic AI's payloads add to one history event: a tool activity's tool and ``tool_call_id``
    (``tool``, ``call_id``), the tool calls a model request answered with (``tool_calls``), and the
    scheduled event an activity event belongs to (``scheduled``)."""
    extra: dict = {}
    for attrs in event.values():
        if not isinstance(attrs, dict):
            continue
        if "scheduledEventId" in attrs:
            extra["scheduled"] = int(attrs["scheduledEventId"])
        for value in payloads(attrs, "input"):
            ctx = value.get("serialized_run_context") if isinstance(value, dict) else None
            if isinstance(ctx, dict) and isinstance(value.get("name"), str):
                extra.update(tool=value["name"], call_id=str(ctx.get("tool_call_id", "")))
        for value in payloads(attrs, "result"):
            parts = value.get("parts") if isinstance(value, dict) else None
            if isinstance(parts, list):
                extra["tool_calls"] = [{"tool": p.get("tool_name"), "call_id": p.get("tool_call_id")}
                                       for p in parts if isinstance(p, dict) and p.get("part_kind") == "tool-call"]
    return extra


def summary(rows: list[dict]) -> str:
    """One line for the card (crashlab.runtimes.agents_temporal.summary): a tool call ran as an activity
    where a tool activity's input carries its ``tool_call_id``."""
    ran = {r["call_id"]: r for r in rows if r.get("event") == "ACTIVITY_TASK_SCHEDULED" and "tool" in r}
    return agents_summary("Pydantic AI on Temporal", rows, ran)



RUNTIME = Runtime(
    name="pydantic-ai-temporal",
    title=f"Pydantic AI (TemporalDurability) on Temporal ({TEMPORAL_VERSION})",
    extra="pydantic-ai-temporal",
    tested_version=f"pydantic-ai-slim {VERSION}",
    retry_owner_settings=(
        "TemporalDurability(activity_config=ActivityConfig(start_to_close_timeout=60 s)) for every activity, "
        "model requests also heartbeat_timeout=30 s, tool activities no heartbeat timeout: a killed attempt is "
        "retried only once that timeout lapses (set by activity_config, model_activity_config, "
        "toolset_activity_config, or a tool's metadata {'temporal': ActivityConfig(...)})",
        "the activity RetryPolicy (Temporal's default: unlimited attempts, initial_interval=1 s, "
        "backoff_coefficient=2.0, maximum_interval=100 s); Pydantic AI adds its non-retryable error types "
        "(UserError, UnexpectedModelBehavior, ...)",
        "a function tool is an activity ({agent}__toolset__{id}__call_tool) unless its metadata sets "
        "'temporal': False: an async tool then runs in the workflow, and every replay runs it again",
        "Agent(retries=1): a tool's ModelRetry (or arguments that fail validation) goes back to the model, which "
        "may call the tool again under a new tool_call_id, once per tool by default",
        "workflow task_timeout (a lost workflow task is retried; recorded activities replay, the model's "
        "answers among them)",
    ),
    start=lambda work: AgentOnTemporal(work, name="pydantic-ai-temporal", quiet=QUIET, annotate=annotate,
                                       summary=summary),
)
