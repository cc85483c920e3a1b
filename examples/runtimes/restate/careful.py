"""A Restate worker that follows the adapter table (docs/runtimes/restate.md).

    crashlab integrate --suite --runtime restate \\
        --worker 'python3 examples/runtimes/restate/careful.py' --store 'sqlite:{db}'

The workflow runs the careful integration worker's steps (examples/runtimes/careful_effect.py)
inside ``ctx.run``. The ledger lives in the worker's own store, outside Restate's journal, and
SENT_UNKNOWN is appended there before the send, because the journal records a ``ctx.run`` only
after it returns. The ``ctx.run`` retry options are the single retry owner: each attempt sends at
most once, with ``retry_owner: caller`` (no proxy re-send) and no client retry; an attempt or a
re-run that finds SENT_UNKNOWN reads the key before anything is sent again. When the attempts are
spent, Restate raises a terminal error and the workflow finishes with what the ledger proves.
"""
from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

import restate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import careful_effect  # noqa: E402
import restate_common as common  # noqa: E402

#: the single retry owner: ctx.run's retries, bounded by the worker's attempt ceiling
EFFECT_RETRY = restate.RunOptions(max_attempts=careful_effect.ATTEMPT_CEILING,
                                  initial_retry_interval=timedelta(milliseconds=50),
                                  max_retry_interval=timedelta(milliseconds=500), retry_interval_factor=2.0)
STORE_RETRY = restate.RunOptions(initial_retry_interval=timedelta(milliseconds=50),
                                 max_retry_interval=timedelta(milliseconds=500))

def _step(phase: str):
    async def run_step() -> str:
        return await asyncio.to_thread(careful_effect.step, phase)
    return run_step


def workflow() -> restate.Workflow:
    reserve = common.reserve_workflow("Reserve")

    @reserve.main()
    async def run(ctx: restate.WorkflowContext) -> str:
        done = await ctx.run_typed("prepare", _step("prepare"), STORE_RETRY)
        if done:
            return done
        try:
            return await ctx.run_typed("effect", _step("effect"), EFFECT_RETRY)
        except restate.TerminalError:  # the retry owner's budget is spent: finish with what the ledger proves
            return await ctx.run_typed("give_up", _step("give_up"), STORE_RETRY)
    return reserve


if __name__ == "__main__":
    sys.exit(common.main(workflow()))
