"""Shared by the OpenAI Agents SDK examples on Temporal: the agent under ``temporalio.openai_agents``
(the ``temporalio-openai-agents`` package, which ``temporalio.contrib.openai_agents`` now forwards to).

- ``OpenAIAgentsPlugin`` makes every model call the activity ``invoke_model_activity`` (its result, the
  model's tool calls and their ``call_id``, recorded once it returns). The agent names its model by a string
  (``scripted``): the plugin's ``model_provider`` builds it in the activity, here the scripted model of
  ``scripted.py``, so the SDK never builds an OpenAI client.
- A function tool runs in the workflow's own code; ``activity_as_tool`` makes a Temporal activity a tool (the
  activity named as the tool, given the tool's arguments only: no ``call_id``). Both examples use
  ``activity_as_tool``, the integration's way with a tool that has an effect.
- The integration's defaults: the model activity ``start_to_close_timeout=60 s``, no heartbeat timeout, and
  Temporal's default retry policy (unlimited attempts); ``activity_as_tool`` sets no timeout of its own.
  A killed attempt would be retried a minute later, past crashlab's 30 s wall limit. Here every activity
  heartbeats under a 2 s heartbeat timeout (the model activity beats every ``heartbeat_timeout / 2``, the
  tools every 0.5 s while their body runs in a thread), so a killed attempt is retried about 2 s later.
  ``--timeouts=default`` keeps the integration's model default (60 s, no heartbeat timeout) and gives the
  tools the same (to see a kill scenario end inconclusive, past the wall limit).
- Tracing is off (``OPENAI_AGENTS_DISABLE_TRACING=1``, ``set_tracing_disabled(True)``) and so is OpenTelemetry
  (``OTEL_SDK_DISABLED``): nothing leaves 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_temporal import serve as serve_temporal  # noqa: E402  (examples/agents/agent_temporal.py)
from agent_tools import option  # noqa: E402
from agents import Agent, ModelProvider, Runner, set_tracing_disabled  # noqa: E402
from temporalio import activity  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin  # noqa: E402
from temporalio.openai_agents.workflow import activity_as_tool  # noqa: E402

from scripted import ScriptedModel  # noqa: E402

__all__ = ["agent", "beating", "serve", "tool"]

set_tracing_disabled(True)

#: "short" (every activity under a 2 s heartbeat timeout) or "default" (the integration's model default: 60 s)
TIMEOUTS = option("timeouts", "short")
START_TO_CLOSE = timedelta(seconds=60 if TIMEOUTS == "default" else 30)
HEARTBEAT = None if TIMEOUTS == "default" else timedelta(seconds=2)


class Scripted(ModelProvider):
    """The worker's model provider: every model name is the scripted model."""

    def get_model(self, model_name):
        return ScriptedModel()


async def beating(body: Callable, *args):
    """``body(*args)`` in a thread while this activity heartbeats every 0.5 s (the tools' bodies block)."""
    async def beat():
        while True:
            await asyncio.sleep(0.5)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        return await asyncio.to_thread(body, *args)
    finally:
        task.cancel()


def tool(fn: Callable, retry_policy: RetryPolicy | None = None):
    """The activity ``fn`` as the agent's tool, under a 2 s heartbeat timeout (``retry_policy`` None:
    Temporal's default, unlimited attempts from 1 s backing off to 100 s)."""
    return activity_as_tool(fn, start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=HEARTBEAT,
                            retry_policy=retry_policy, strict_json_schema=False)


def agent(tools: list) -> Agent:
    return Agent(name="booker", instructions="Reserve the part the request names; notify if it asks.",
                 model="scripted", tools=tools)


def serve(unit, booker: Agent, name: str, activities: list, retry_policy: RetryPolicy | None = None,
          **steps) -> int:
    """Run the agent (``Runner.run``, the plugin's runner inside the workflow) in this run's Temporal
    workflow, its tools' ``activities`` on the same worker, the model activity under ``retry_policy``."""
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=HEARTBEAT,
                                             retry_policy=retry_policy),
        model_provider=Scripted())
    return serve_temporal(unit, name, booker, run_agent=lambda prompt: Runner.run(booker, prompt), plugin=plugin,
                          activities=activities, **steps)
