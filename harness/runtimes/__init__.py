# layer real: real processes, sockets and stores.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, integrate, probe (only floors below it).
"""Durable runtimes under ``crashlab integrate --runtime NAME``: one profile per runtime.

A profile says how crashlab starts the runtime's local server where it has one (the server is
crashlab's, never the worker's: kills hit the worker's process group, not the server), how it
reads the runtime's own record of a run (workflow history, step tables, result backend) next to
the sandbox's log and the worker's store views, and which runtime settings are part of the
declared retry owner. Each runtime is an optional extra (``pip install 'crashlab[NAME]'``);
nothing here imports a runtime's package until that runtime is asked for.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..vocab.errors import UsageError


class Server(Protocol):
    """A runtime's local server (or, for a serverless runtime, its shared state), started by crashlab."""

    #: added to every worker's environment; ``{runtime}`` in the worker command is ``env["CRASHLAB_RUNTIME"]``
    env: Mapping[str, str]

    def record(self, run: str) -> list[dict]:
        """The runtime's own record of one run (JSON-able rows, oldest first): what it says happened."""

    def stop(self) -> None:
        """Stop the server and remove what it left; safe to call twice."""

    # Optional: ``summary(record) -> str``, one line for the card saying what the record shows
    # (without it the card counts the record's rows).
    # Optional: ``writable``, the folders every worker must write (a serverless runtime's state
    # file's folder): under namespaces isolation a worker writes nothing else but its store and TMPDIR.


@dataclass(frozen=True, slots=True)
class Runtime:
    name: str                                   # "dbos"
    title: str                                  # "DBOS Transact (Python, SQLite)"
    extra: str                                  # pip install 'crashlab[<extra>]'
    tested_version: str                         # the runtime version this profile was tested with
    retry_owner_settings: tuple[str, ...]       # settings that make the runtime a retry owner, as worded in its docs
    start: Callable[[Path], Server]             # start(work_dir) -> Server, on 127.0.0.1 only


#: runtime name -> module holding ``RUNTIME: Runtime``
RUNTIMES: dict[str, str] = {
    "dbos": "crashlab.runtimes.dbos",
    "celery": "crashlab.runtimes.celery",
    "temporal": "crashlab.runtimes.temporal",
    "restate": "crashlab.runtimes.restate",
    "langgraph": "crashlab.runtimes.langgraph",
    "pydantic-ai-dbos": "crashlab.runtimes.pydantic_ai_dbos",
    "pydantic-ai-temporal": "crashlab.runtimes.pydantic_ai_temporal",
    "openai-agents-dbos": "crashlab.runtimes.openai_agents_dbos",
    "openai-agents-temporal": "crashlab.runtimes.openai_agents_temporal",
}
#: runtime name -> its extra, where the two differ (an agent framework on a durable runtime)
EXTRAS: dict[str, str] = {"pydantic-ai-dbos": "pydantic-ai", "pydantic-ai-temporal": "pydantic-ai-temporal",
                          "openai-agents-dbos": "openai-agents", "openai-agents-temporal": "openai-agents-temporal"}


def load(name: str) -> Runtime:
    """The profile of runtime ``name``; a UsageError naming the extra when its package is missing."""
    if name not in RUNTIMES:
        raise UsageError(f"unknown runtime {name!r}", hint=f"one of: {', '.join(sorted(RUNTIMES))}")
    try:
        module = importlib.import_module(RUNTIMES[name])
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("crashlab.runtimes."):
            raise UsageError(f"runtime {name!r} has no profile in this version of crashlab") from None
        raise UsageError(f"runtime {name!r} needs the package {exc.name!r}",
                         hint=f"pip install 'crashlab[{EXTRAS.get(name, name)}]'") from None
    return module.RUNTIME
