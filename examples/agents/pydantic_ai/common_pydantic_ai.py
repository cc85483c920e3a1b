"""Shared by the Pydantic AI examples: the agent, its DBOS durability, and one crashlab worker process
running (or recovering) its run's workflow.

- The agent is a plain ``Agent`` with the scripted model (``scripted.py``) and Pydantic AI's
  ``DBOSDurability`` capability: inside a ``@DBOS.workflow`` each model request is a DBOS step
  (``booker__model.request``), its output (the model's tool calls and their ids) recorded once it
  returns. A function tool runs inline in the workflow unless it is made a DBOS step: ``unit_of()``
  does that when asked (the careful example always does; the naive one with ``--tools=step``).
- DBOS and the workflow: examples/agents/agent_dbos.py (recorded steps replay, inline tools run again).
- No Logfire and no OpenTelemetry export: nothing leaves 127.0.0.1.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LOGFIRE_SEND_TO_LOGFIRE", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tools import option  # noqa: E402  (examples/agents/agent_tools.py; puts examples/runtimes on the path)
from agent_dbos import serve as serve_dbos, unit_of  # noqa: E402  (examples/agents/agent_dbos.py)
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.durable_exec.dbos import DBOSDurability  # noqa: E402

from scripted import model  # noqa: E402

__all__ = ["TOOLS", "agent", "serve", "unit_of"]

#: "inline" (Pydantic AI's way with a function tool) or "step" (each tool made a DBOS step)
TOOLS = option("tools", "inline")


def agent(*, retries: int = 1) -> Agent:
    """The booking agent; ``retries`` is Pydantic AI's tool retry budget (its default, 1)."""
    return Agent(model(), name="booker", retries=retries, capabilities=[DBOSDurability()])


def serve(unit, booker: Agent, name: str, **steps) -> int:
    """Run the agent inside this run's DBOS workflow (``agent.run_sync``), then write the finish row."""
    return serve_dbos(unit, name, booker.run_sync, **steps)
