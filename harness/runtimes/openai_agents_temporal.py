"""The OpenAI Agents SDK on Temporal under ``crashlab integrate --runtime openai-agents-temporal``.

The agent runs under Temporal's own integration (``temporalio.openai_agents``, the ``temporalio-openai-agents``
package; ``temporalio.contrib.openai_agents`` forwards to it) inside the worker's own Temporal workflow:
``OpenAIAgentsPlugin`` makes every model call the activity ``invoke_model_activity``; a tool is an activity
where the application made it one (``activity_as_tool``: the activity is named as the tool and given the
tool's arguments only), and a plain ``function_tool`` runs in the workflow's own code. crashlab starts the dev
server as for ``--runtime temporal`` (crashlab.runtimes.temporal) and reads the same history, adding what
the integration put in it: the tool calls each model activity answered with (their ``call_id``), and, as no
tool activity carries a ``call_id``, the n-th call of a tool matched with the n-th activity of the tool's
name, its attempts and the activity config it was scheduled with. The payloads are JSON (the integration's
pydantic payload converter): crashlab reads them with ``json``, never with the worker's code.
The unit of work is the Temporal workflow whose id, and task queue, is the run's ``CRASHLAB_RUNTIME_ID``.
Tracing is off in every worker (``OPENAI_AGENTS_DISABLE_TRACING=1``, ``OTEL_SDK_DISABLED=true``).
"""
from __future__ import annotations

import temporalio.openai_agents  # noqa: F401  (the extra: load() names it when missing)

from . import Runtime
from .agents_temporal import AgentOnTemporal, asked, payloads, summary as agents_summary
from .temporal import VERSION as TEMPORAL_VERSION

VERSION = "0.22.3"
INTEGRATION_VERSION = "1.1.0"
QUIET = {"OPENAI_AGENTS_DISABLE_TRACING": "1", "OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA": "false",
         "OTEL_SDK_DISABLED": "true"}


def annotate(event: dict) -> dict:
    """What the integration's payloads add to one history event: the tool calls a model activity answered
    with (``tool_calls``: each output item of type ``function_call``, its ``name`` and ``call_id``), and the
    scheduled event an activity event belongs to (``scheduled``)."""
    extra: dict = {}
    for attrs in event.values():
        if not isinstance(attrs, dict):
            continue
        if "scheduledEventId" in attrs:
            extra["scheduled"] = int(attrs["scheduledEventId"])
        for value in payloads(attrs, "result"):
            output = value.get("output") if isinstance(value, dict) and "usage" in value else None
            if isinstance(output, list):
                extra["tool_calls"] = [{"tool": o.get("name"), "call_id": o.get("call_id")} for o in output
                                       if isinstance(o, dict) and o.get("type") == "function_call"]
    return extra


def summary(rows: list[dict]) -> str:
    """One line for the card (crashlab.runtimes.agents_temporal.summary): the n-th call of a tool ran as the
    n-th activity of the tool's name, where there is one."""
    scheduled: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("event") == "ACTIVITY_TASK_SCHEDULED":
            scheduled.setdefault(str(row.get("activity", "")), []).append(row)
    ran = {call: row for tool, ids in asked(rows).items() for call, row in zip(ids, scheduled.get(tool, []))}
    return agents_summary("OpenAI Agents SDK on Temporal", rows, ran)



RUNTIME = Runtime(
    name="openai-agents-temporal",
    title=f"OpenAI Agents SDK (OpenAIAgentsPlugin: temporalio-openai-agents {INTEGRATION_VERSION}) on Temporal "
          f"({TEMPORAL_VERSION})",
    extra="openai-agents-temporal",
    tested_version=f"openai-agents {VERSION}",
    retry_owner_settings=(
        "OpenAIAgentsPlugin(model_params=ModelActivityParameters(start_to_close_timeout=60 s, heartbeat_timeout="
        "None, retry_policy=None)): the model activity invoke_model_activity; a killed attempt is retried only "
        "once start_to_close_timeout lapses (the activity heartbeats only when heartbeat_timeout is set)",
        "activity_as_tool(..., start_to_close_timeout, heartbeat_timeout, retry_policy): a tool is an activity "
        "only when made one, with no timeout of its own; a plain function_tool runs in the workflow, and every "
        "replay runs it again",
        "the activity RetryPolicy (Temporal's default: unlimited attempts, initial_interval=1 s, "
        "backoff_coefficient=2.0, maximum_interval=100 s), the model's and each tool's; the integration makes "
        "OpenAI's 4xx answers non-retryable (except 408, 409, 429) and builds its default client with "
        "max_retries=0",
        "function_tool(failure_error_function=default_tool_error_function): a tool's exception becomes a message "
        "the model may answer by calling it again under a new call_id, up to Runner.run(max_turns=10); an "
        "activity tool's failure is an ActivityError, retried by Temporal first",
        "workflow task_timeout (a lost workflow task is retried; recorded activities replay, the model's "
        "answers among them)",
    ),
    start=lambda work: AgentOnTemporal(work, name="openai-agents-temporal", quiet=QUIET, annotate=annotate,
                                       summary=summary),
)
