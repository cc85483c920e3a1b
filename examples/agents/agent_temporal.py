"""Shared by the agent examples that run on Temporal (Pydantic AI's ``TemporalDurability``, the OpenAI Agents
SDK's ``OpenAIAgentsPlugin``): one crashlab worker process joins (or starts) its run's workflow and serves its
task queue until the workflow ends.

- The workflow id and the task queue are the run's ``CRASHLAB_RUNTIME_ID`` on crashlab's dev server
  (``CRASHLAB_RUNTIME``), as for ``--runtime temporal`` (examples/runtimes/temporal/temporal_common.py):
  a restarted worker process picks up the same workflow; what Temporal recorded (each model request's
  answer, each tool call's result) replays, and an activity attempt a kill cut short is retried once its
  heartbeat (or start-to-close) timeout lapses.
- The workflow reads and writes nothing itself (Temporal replays workflow code): it runs the agent, then
  writes the finish row from the ledger in an activity (``conclude``), never from the model's answer. The
  worker's store is read once per process, before the workflow (``Unit.begin``).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtimes"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtimes" / "temporal"))

from temporalio import activity, workflow  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402

from agent_tools import Stale, request  # noqa: E402
from temporal_common import main as serve_temporal  # noqa: E402  (examples/runtimes/temporal/temporal_common.py)

#: the workflow's own activities (the finish row): quick store writes, retried until they land
FINISH = dict(start_to_close_timeout=timedelta(seconds=10),
              retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100),
                                       maximum_interval=timedelta(seconds=1)))


@workflow.defn(name="crashlab-agent.workflow", sandboxed=False)
class Run:
    """The run's workflow: the agent, then the finish row (an activity); ``setup`` is filled by :func:`serve`."""
    __pydantic_ai_agents__: list = []
    setup: dict = {}

    @workflow.run
    async def run(self, prompt: str) -> str:
        run_agent, finish, give_up = self.setup["run"], self.setup["finish"], self.setup["give_up"]
        try:
            await run_agent(prompt)
        except Exception as exc:              # the framework's retries or turns are spent
            if not self.setup["naive_ending"]:
                raise
            await workflow.execute_activity(give_up, f"{type(exc).__name__}: {exc}", **FINISH)
        await workflow.execute_activity(finish, **FINISH)
        return "finished"


def serve(unit, name: str, agent, *, conclude: Callable[[], None], begin: Callable[[], None] = lambda: None,
          gave_up: Callable[[str], None] | None = None, run_agent: Callable | None = None, plugin=None,
          activities: Sequence[Callable] = ()) -> int:
    """Run ``agent`` in this run's Temporal workflow, then ``conclude`` in an activity (``begin`` runs once per
    process, after the store was read); an exception out of the agent ends the run through ``gave_up`` where
    there is one (the naive ending). By default ``agent`` is a Pydantic AI ``Agent`` with
    ``TemporalDurability`` (``agent.run``, ``PydanticAIPlugin``); another framework passes ``run_agent``
    (``async (prompt) -> result``, run in the workflow), its Temporal ``plugin`` and its tools' ``activities``."""
    try:
        if not unit.begin():
            return 0
        begin()
    except Stale as exc:
        print(f"stopping: {exc}", file=sys.stderr)
        return 0
    @activity.defn(name=f"{name}.conclude")
    def finish() -> None:
        conclude()

    @activity.defn(name=f"{name}.gave_up")
    def give_up(why: str) -> None:
        if gave_up is not None:
            gave_up(why)

    if plugin is None:
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        Run.__pydantic_ai_agents__ = [agent]   # PydanticAIPlugin registers the agent's activities from it
        plugin, run_agent = PydanticAIPlugin(), agent.run
    Run.setup = dict(run=run_agent, finish=finish, give_up=give_up, naive_ending=gave_up is not None)
    code = serve_temporal(Run, [finish, give_up, *activities], args=[request(unit.intent, unit.notify_user)],
                          plugins=[plugin])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
