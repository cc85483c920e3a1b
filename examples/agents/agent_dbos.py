"""Shared by the agent examples that run on DBOS (Pydantic AI, the OpenAI Agents SDK): a tool's body
inline or as a DBOS step, and one crashlab worker process running (or recovering) its run's workflow.

- DBOS runs on crashlab's system database (``CRASHLAB_RUNTIME``) with the workflow id and the
  executor id both ``CRASHLAB_RUNTIME_ID`` (examples/runtimes/common_dbos.py): a restarted worker
  recovers its own run's workflow; the steps DBOS recorded replay (the model's answers among them),
  and everything else in the workflow, an inline tool included, runs again.
- The workflow reads nothing but the worker's store outside its steps (``begin``), runs the agent,
  then writes the finish row from the ledger (``conclude``), never from the model's answer.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtimes"))

from common_dbos import serve as serve_dbos  # noqa: E402  (examples/runtimes/common_dbos.py)
from dbos import DBOS  # noqa: E402

from agent_tools import request  # noqa: E402


def unit_of(name: str, body: Callable, *, step: bool, **step_options) -> Callable:
    """A tool's body as it runs: inline (as written), or as the DBOS step ``name`` (``step_options``
    are ``@DBOS.step``'s: ``retries_allowed`` and the rest)."""
    return DBOS.step(name=name, **step_options)(body) if step else body


def serve(unit, name: str, run_agent: Callable[[str], object], *, begin: Callable[[], None],
          conclude: Callable[[], None], gave_up: Callable[[str], None] | None = None) -> int:
    """Run the agent (``run_agent(prompt)``) inside this run's DBOS workflow, then ``conclude``; an
    exception out of the agent ends the run through ``gave_up`` where there is one (the naive ending)."""

    @DBOS.workflow(name=f"{name}.workflow")
    def workflow() -> str:
        begin()
        try:
            run_agent(request(unit.intent, unit.notify_user))
        except Exception as exc:              # the framework's retries or turns are spent
            if gave_up is None:
                raise
            gave_up(f"{type(exc).__name__}: {exc}")
        conclude()
        return "finished"

    return serve_dbos(unit, name, workflow)
