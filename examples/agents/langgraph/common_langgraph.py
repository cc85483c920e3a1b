"""Shared by the LangGraph examples: the agent graph, its checkpointer, and one crashlab worker
process running (or resuming) its run's thread.

- The graph is the prebuilt tool-calling loop: an ``agent`` node (the scripted model) and a
  ``tools`` node (``ToolNode``), ``tools_condition`` between them.
- Its checkpointer is ``SqliteSaver`` on ``CRASHLAB_RUNTIME``, the framework's own SQLite file that
  crashlab prepared (never the worker's store: both want a table named ``checkpoints``), and the
  thread id is ``CRASHLAB_RUNTIME_ID``, unique to the run and to this invocation of crashlab.
- A thread with a step left to run (a worker died in it) is resumed with ``invoke(None, ...)``:
  LangGraph re-runs the step whose checkpoint it had not saved. A finished thread is not run again.
  A step whose writes were saved but whose successor's checkpoint was not (the default ``async``
  durability, a kill in the next step) shows an empty ``next`` and the step in ``tasks``: resumed too.
- A thread that ends with the run waiting (WAITING_HUMAN: the booking tool requested an approval) is
  over; the worker crashlab starts when the run is woken runs the run's next thread,
  ``CRASHLAB_RUNTIME_ID.woken-N`` (``crashlab_env.unit_id``), whose tool asks the authority again.
- LangSmith tracing is off before anything of LangChain is imported: nothing leaves 127.0.0.1.
"""
from __future__ import annotations

import functools
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

for _name in ("LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGSMITH_TRACING_V2"):
    os.environ[_name] = "false"

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtimes"))

from common import Stale, Unit, need, unit_id  # noqa: E402  (examples/runtimes/common.py)
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

from scripted import ScriptedModel, request  # noqa: E402

__all__ = ["Stale", "Unit", "fenced", "option", "serve"]


def option(name: str, default: str) -> str:
    """``--name=value`` from the command line (other words are ignored)."""
    return next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(f"--{name}=")), default)


def fenced(tool: Callable) -> Callable:
    """A tool body that ends the process once a newer worker holds the run's lease: nothing more is
    sent, and nothing is recorded in the worker's store or in LangGraph's checkpoints."""
    @functools.wraps(tool)
    def body(*args, **kwargs):
        try:
            return tool(*args, **kwargs)
        except Stale as exc:
            print(f"stopping: {exc}", file=sys.stderr, flush=True)
            os._exit(0)
    return body


def graph(tools: list, *, handle_tool_errors, retry_policy=None):
    model = ScriptedModel().bind_tools(tools)

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools, handle_tool_errors=handle_tool_errors), retry_policy=retry_policy)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g


def serve(unit: Unit, builder, conclude: Callable[[], None], after_begin: Callable[[], None] | None = None) -> int:
    """Run the run's thread to its end in this process, then write the finish row (``conclude``)."""
    try:
        if not unit.begin():
            return 0
        if after_begin is not None:
            after_begin()
    except Stale as exc:
        print(f"stopping: {exc}", file=sys.stderr)
        return 0
    durability = option("durability", "async")        # LangGraph's default
    conn = sqlite3.connect(need("CRASHLAB_RUNTIME"), timeout=10, check_same_thread=False)
    app = builder.compile(checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": unit_id()}, "recursion_limit": 40}
    try:
        state = app.get_state(config)
        if state.next or state.tasks:                 # a worker died in this thread: resume it (a task whose
            # writes were saved, its successor's checkpoint not yet: ``next`` is empty, ``tasks`` names it)
            app.invoke(None, config, durability=durability)
        elif not state.values:                        # a new thread
            app.invoke({"messages": [request(unit.intent, unit.notify_user)]}, config, durability=durability)
        conclude()
    except Stale as exc:
        print(f"stopping: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)        # every write is committed; skip the interpreter's teardown of LangChain's threads
