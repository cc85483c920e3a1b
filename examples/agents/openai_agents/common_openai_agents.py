"""Shared by the OpenAI Agents SDK examples: the agent, its DBOS runner, and one crashlab worker
process running (or recovering) its run's workflow.

- The agent is a plain ``Agent`` with the scripted model (``scripted.py``), run through
  ``dbos_openai_agents.DBOSRunner`` inside a ``@DBOS.workflow``: each model call is the DBOS step
  ``_model_call_step``, its output (the model's tool calls and their ids) recorded once it returns.
  A function tool runs inline in the workflow unless it is made a DBOS step: ``unit_of()`` does that
  when asked (the careful example always does; the naive one with ``--tools=step``).
- DBOS and the workflow: examples/agents/agent_dbos.py (recorded steps replay, inline tools run again).
- Tracing is off (``OPENAI_AGENTS_DISABLE_TRACING=1`` and ``set_tracing_disabled(True)``) and the
  model is an instance, so the SDK builds no OpenAI client: nothing leaves 127.0.0.1.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tools import option  # noqa: E402  (examples/agents/agent_tools.py; puts examples/runtimes on the path)
from agent_dbos import serve as serve_dbos, unit_of  # noqa: E402  (examples/agents/agent_dbos.py)
from agents import Agent, set_tracing_disabled  # noqa: E402
from dbos_openai_agents import DBOSRunner  # noqa: E402

from scripted import ScriptedModel  # noqa: E402

__all__ = ["TOOLS", "agent", "serve", "unit_of"]

set_tracing_disabled(True)

#: "inline" (the SDK's way with a function tool) or "step" (each tool made a DBOS step)
TOOLS = option("tools", "inline")


def agent(tools: list) -> Agent:
    return Agent(name="booker", instructions="Reserve the part the request names; notify if it asks.",
                 model=ScriptedModel(), tools=tools)


def serve(unit, booker: Agent, name: str, **steps) -> int:
    """Run the agent through DBOSRunner inside this run's DBOS workflow, then write the finish row."""
    return serve_dbos(unit, name, lambda prompt: DBOSRunner.run_sync(booker, prompt), **steps)
