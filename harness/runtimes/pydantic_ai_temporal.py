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

import base64
import binascii
import json
from pathlib import Path

import pydantic_ai  # noqa: F401  (the extra: load() names it when missing)

from . import Runtime
from .temporal import VERSION as TEMPORAL_VERSION, TemporalServer

VERSION = "2.68.0"
#: no Logfire, no OpenTelemetry export: nothing leaves 127.0.0.1
QUIET = {"LOGFIRE_SEND_TO_LOGFIRE": "false", "OTEL_SDK_DISABLED": "true"}
_ENDS = ("ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED", "ACTIVITY_TASK_TIMED_OUT", "ACTIVITY_TASK_CANCELED")


def _payloads(attrs: dict, field: str) -> list:
    """The JSON values of ``attrs[field]``'s payloads ([] where one is not JSON)."""
    values = []
    for payload in ((attrs.get(field) or {}).get("payloads") or []):
        try:
            values.append(json.loads(base64.b64decode(payload.get("data", ""), validate=True)))
        except (binascii.Error, ValueError, TypeError):
            continue
    return values


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
        for value in _payloads(attrs, "input"):
            ctx = value.get("serialized_run_context") if isinstance(value, dict) else None
            if isinstance(ctx, dict) and isinstance(value.get("name"), str):
                extra.update(tool=value["name"], call_id=str(ctx.get("tool_call_id", "")))
        for value in _payloads(attrs, "result"):
            parts = value.get("parts") if isinstance(value, dict) else None
            if isinstance(parts, list):
                extra["tool_calls"] = [{"tool": p.get("tool_name"), "call_id": p.get("tool_call_id")}
                                       for p in parts if isinstance(p, dict) and p.get("part_kind") == "tool-call"]
    return extra


def activity_config(row: dict) -> str:
    """A scheduled activity's config as the card names it: its timeouts and its retry policy."""
    retry = row.get("retry_policy") or {}
    attempts = int(retry.get("maximumAttempts", 0))
    policy = (f"RetryPolicy(maximum_attempts={attempts or 'unlimited'}, initial_interval="
              f"{retry.get('initialInterval', '?')}, backoff_coefficient={retry.get('backoffCoefficient', '?')}, "
              f"maximum_interval={retry.get('maximumInterval', '?')})")
    timeouts = {t: row.get(t) if row.get(t) not in (None, "0s") else "none"    # unset: absent, or "0s"
                for t in ("startToCloseTimeout", "heartbeatTimeout")}
    return (f"start_to_close_timeout={timeouts['startToCloseTimeout']}, "
            f"heartbeat_timeout={timeouts['heartbeatTimeout']}, {policy}")


def _attempts(rows: list[dict], scheduled: int) -> str:
    """How one activity's attempts show in the history: the last one's number and end, and what is missing."""
    attempt, how, failure = 1, "not ended", ""
    for row in rows:
        if row.get("scheduled") != scheduled:
            continue
        if row["event"] == "ACTIVITY_TASK_STARTED":
            attempt, failure = int(row.get("attempt", 1)), row.get("failure", "")
        elif row["event"] in _ENDS:
            how = row["event"].removeprefix("ACTIVITY_TASK_").lower().replace("_", " ")
    why = f": {failure}" if failure else ""
    lost = "" if attempt == 1 else f" (attempt 1 not in the history{why})" if attempt == 2 else \
        f" (attempts 1..{attempt - 1} not in the history{why.replace(':', ', the last:', 1)})"
    return f"attempt {attempt} {how}{lost}"


def summary(rows: list[dict]) -> str:
    """One line for the card: the workflow, the model requests recorded, each tool the model asked for (with
    its call ids) and whether each call ran as a Temporal activity (and its attempts) or in the workflow,
    the tool activities' config, and what the history lacks."""
    if rows and "error" in rows[0]:
        return f"Temporal history not read: {rows[0]['error']}"
    if not rows:
        return "Temporal has no workflow under this id (the worker never started the Pydantic AI agent)"
    closed = next((r["event"].removeprefix("WORKFLOW_EXECUTION_").lower() for r in reversed(rows)
                   if r["event"].startswith("WORKFLOW_EXECUTION_") and r["event"] != "WORKFLOW_EXECUTION_STARTED"),
                  "open")
    models = sum(1 for r in rows if "tool_calls" in r)
    asked: dict[str, list[str]] = {}
    for row in rows:
        for call in row.get("tool_calls", ()):
            ids = asked.setdefault(str(call["tool"]), [])
            if call["call_id"] not in ids:
                ids.append(str(call["call_id"]))
    ran = {r["call_id"]: r for r in rows if r["event"] == "ACTIVITY_TASK_SCHEDULED" and "tool" in r}
    parts = []
    for tool, ids in asked.items():
        how = [f"{i} ran as a Temporal activity, {_attempts(rows, ran[i]['event_id'])}" if i in ran else
               f"{i} ran in the workflow (no activity: a replay runs it again)" if closed != "open" else
               f"{i} has no activity yet" for i in ids]
        parts.append(f"the model called {tool} {len(ids)} time(s): {'; '.join(how)}")
    config = f"; tool activities scheduled with {activity_config(next(iter(ran.values())))}" if ran else ""
    return (f"Pydantic AI on Temporal: workflow {closed}; {models} model request(s) recorded; "
            f"{'; '.join(parts) or 'no tool call recorded'}{config}; an attempt cut by a kill has no event of "
            "its own (the next attempt's number and last failure stand for it)")


class AgentOnTemporal(TemporalServer):
    """The Temporal dev server for one ``crashlab integrate``, its history read for Pydantic AI."""

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        self.env = {**self.env, "CRASHLAB_RUNTIME_NAME": "pydantic-ai-temporal", **QUIET}

    annotate = staticmethod(annotate)
    summary = staticmethod(summary)


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
    start=AgentOnTemporal,
)
