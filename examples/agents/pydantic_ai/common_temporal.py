"""Shared by the Pydantic AI examples on Temporal: the agent with ``TemporalDurability`` and its activity config.

- The agent is the usual one (the scripted model of ``scripted.py``, named ``booker``) with Pydantic AI's
  ``TemporalDurability`` capability: inside a Temporal workflow each model request is the activity
  ``agent__booker__model_request`` and every function tool call is the activity
  ``agent__booker__toolset__<toolset id>__call_tool`` (its summary ``call tool: <toolset id>:<tool>``).
  An activity is recorded in the workflow's history once it returns.
- ``TemporalDurability``'s default is ``ActivityConfig(start_to_close_timeout=60 s)`` (and a 30 s heartbeat
  timeout for model requests only): a killed attempt would be retried a minute later, past crashlab's
  30 s wall limit. Here every activity heartbeats (Pydantic AI beats every ``heartbeat_timeout / 2``) under a
  2 s heartbeat timeout, so a killed attempt is retried about 2 s after the kill. ``--timeouts=default``
  keeps Pydantic AI's defaults instead (to see a kill scenario end inconclusive, past the wall limit).
- No Logfire, no OpenTelemetry export: nothing leaves 127.0.0.1 (the model is a ``FunctionModel``).
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("LOGFIRE_SEND_TO_LOGFIRE", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_temporal import serve  # noqa: E402  (examples/agents/agent_temporal.py)
from agent_tools import option  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.durable_exec.temporal import TemporalDurability  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402
from temporalio.workflow import ActivityConfig  # noqa: E402

from scripted import model  # noqa: E402

__all__ = ["agent", "serve"]

START_TO_CLOSE = timedelta(seconds=30)
HEARTBEAT = timedelta(seconds=2)
#: "short" (every activity under a 2 s heartbeat timeout) or "default" (TemporalDurability's own)
TIMEOUTS = option("timeouts", "short")


def agent(retry_policy: RetryPolicy | None = None, *, retries: int = 1) -> Agent:
    """The booking agent on Temporal: every activity under a 2 s heartbeat timeout; ``retry_policy`` is
    Temporal's for every activity (None: Temporal's default, unlimited attempts from 1 s backing off to
    100 s); ``retries`` is Pydantic AI's tool retry budget (its default, 1)."""
    config = ActivityConfig(start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=HEARTBEAT)
    if TIMEOUTS == "default":
        config = ActivityConfig(start_to_close_timeout=timedelta(seconds=60))     # TemporalDurability's default
    if retry_policy is not None:
        config["retry_policy"] = retry_policy
    return Agent(model(), name="booker", retries=retries, capabilities=[TemporalDurability(activity_config=config)])
