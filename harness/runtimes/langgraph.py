"""LangGraph (Python) with its SQLite checkpointer under ``crashlab integrate --runtime langgraph``.

LangGraph has no server: its durable state is a checkpointer. crashlab prepares one SQLite file for
the invocation, ``OUT/runtime-langgraph/langgraph-checkpoints.sqlite`` (its schema created once here,
so concurrent workers never race on it), and gives its path to every worker as ``CRASHLAB_RUNTIME``
(``{runtime}``). It is the framework's file, never the worker's store: LangGraph's ``SqliteSaver``
and a worker's own store both want a table named ``checkpoints``. A worker compiles its graph with
``SqliteSaver`` on that file and runs it under ``thread_id = CRASHLAB_RUNTIME_ID``, an id unique to
the run and to this invocation: a restarted worker resumes its own run's thread, and a second
``crashlab integrate`` never resumes the first one's finished thread (``{run}`` is the same in
every invocation).

The record of a run is LangGraph's own: the thread's checkpoints (one per super-step the framework
saved, with its step number and source) and its pending writes (a task's output saved before the
step's checkpoint), decoded with LangGraph's serializer from a read-only connection. From them the
summary names every tool call the model made that the record kept, with its ``tool_call_id``: a
model step whose checkpoint was lost (``durability="async"``, a kill) runs again and asks for the
tool under a new id. A tool call cut by a kill leaves no write: only the sandbox's log holds it.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from ..vocab.errors import UsageError
from . import Runtime

VERSION = "1.2.24"
CHECKPOINT_SQLITE_VERSION = "3.1.2"
#: LangSmith tracing off in every worker: nothing leaves 127.0.0.1
QUIET = {"LANGCHAIN_TRACING_V2": "false", "LANGSMITH_TRACING": "false", "LANGSMITH_TRACING_V2": "false"}


class LangGraphState:
    """The checkpoint database of one ``crashlab integrate`` invocation."""

    def __init__(self, work: Path) -> None:
        try:
            Path(work).mkdir(parents=True, exist_ok=True)
            self.path = Path(work).resolve() / "langgraph-checkpoints.sqlite"
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            conn = sqlite3.connect(self.path, timeout=10)
            try:
                SqliteSaver(conn).setup()           # the framework's own schema, created once
            finally:
                conn.close()
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"LangGraph's checkpoint database cannot be made in {work}: "
                             f"{getattr(exc, 'strerror', None) or exc}",
                             hint="give an --out folder crashlab can write") from None
        self.env = {"CRASHLAB_RUNTIME": str(self.path), "CRASHLAB_RUNTIME_NAME": "langgraph", **QUIET}
        self.writable = (str(self.path.parent),)     # every worker writes the checkpoint database

    def record(self, run: str) -> list[dict]:
        """The thread's checkpoints, oldest first, each with the pending writes saved against it."""
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=2, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.is_setup = True                   # read only: no schema statement on this connection
            tuples = list(saver.list({"configurable": {"thread_id": run}}))
        finally:
            conn.close()
        rows = []
        for t in reversed(tuples):                  # list() is newest first
            meta = dict(t.metadata or {})
            values = (t.checkpoint or {}).get("channel_values") or {}
            rows.append({"table": "checkpoints", "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                         "step": meta.get("step"), "source": meta.get("source"),
                         "messages": [_message(m) for m in values.get("messages") or ()]})
            for task_id, channel, value in t.pending_writes or ():
                rows.append({"table": "writes", "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                             "task_id": task_id, "channel": channel,
                             "messages": [_message(m) for m in _as_list(value)] if channel == "messages" else [],
                             "value": None if channel == "messages" else repr(value)[:200]})
        return rows

    def summary(self, record: list[dict]) -> str:
        return summary(record)

    def stop(self) -> None:
        """Nothing runs: the checkpoint database stays in the output folder as evidence."""


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _message(m) -> dict:
    """A message, as much as the summary needs: its type, its tool calls (name and id), the tool
    call it answers and the first 120 characters of its text."""
    calls = [{"name": c.get("name"), "id": c.get("id")} for c in getattr(m, "tool_calls", None) or ()]
    out = {"type": getattr(m, "type", type(m).__name__), "content": str(getattr(m, "content", m))[:120]}
    if calls:
        out["tool_calls"] = calls
    if getattr(m, "tool_call_id", None):
        out["tool_call_id"] = m.tool_call_id
        out["status"] = getattr(m, "status", None)
    return out


def summary(record: list[dict]) -> str:
    """One line for the card: the checkpoints saved, the tool calls the model made that the record
    kept (a call asked again under a new id means the model step ran again), and what it lacks."""
    if record and "error" in record[0]:
        return f"LangGraph record not read: {record[0]['error']}"
    points = [r for r in record if r.get("table") == "checkpoints"]
    if not points:
        return "LangGraph has no checkpoint under this thread id (the worker never ran the graph)"
    writes = [r for r in record if r.get("table") == "writes"]
    calls: dict[str, list[str]] = {}
    answered: set[str] = set()
    for row in record:
        for m in row.get("messages") or ():
            for c in m.get("tool_calls") or ():
                ids = calls.setdefault(str(c["name"]), [])
                if c["id"] not in ids:
                    ids.append(c["id"])
            if m.get("tool_call_id"):
                answered.add(m["tool_call_id"])
    last = points[-1]
    tail = (last.get("messages") or [{}])[-1]
    finished = tail.get("type") == "ai" and not tail.get("tool_calls")     # the model's final answer
    asked = "; ".join(f"the model called {name} {len(ids)} time(s) ({', '.join(ids)}), "
                      f"{sum(i in answered for i in ids)} answer(s) recorded" for name, ids in calls.items()) \
        or "no tool call recorded"
    return (f"LangGraph thread {'finished' if finished else 'not finished'}: {len(points)} checkpoint(s) up to "
            f"step {last.get('step')}, {len(writes)} pending write(s); {asked}; "
            "a tool call cut by a kill has no write")


RUNTIME = Runtime(
    name="langgraph",
    title=f"LangGraph (Python, SqliteSaver: langgraph-checkpoint-sqlite {CHECKPOINT_SQLITE_VERSION})",
    extra="langgraph",
    tested_version=VERSION,
    retry_owner_settings=('graph.invoke(durability="async"|"sync"|"exit"), default "async"',
                          "add_node(..., retry_policy=RetryPolicy(max_attempts=3, retry_on=default_retry_on))",
                          "ToolNode(handle_tool_errors=...): an exception becomes a message the model may answer "
                          "by calling the tool again",
                          "resume: graph.invoke(None, {thread_id}) re-runs the step whose checkpoint was not saved"),
    start=LangGraphState,
)
