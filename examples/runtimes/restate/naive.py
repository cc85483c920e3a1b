"""A Restate worker written the way Restate's tutorials write a side effect: the reservation is sent
inside ``ctx.run``, any failure is raised, and Restate retries: the ``ctx.run`` after an error, the
whole invocation after the worker process died (its journal holds only the ``ctx.run`` calls that
returned, so the one that was in flight runs again).

    crashlab integrate crash-4-after-commit-before-record --runtime restate \\
        --worker 'python3 examples/runtimes/restate/naive.py' --store 'sqlite:{db}'

It keeps the same ledger as the careful worker (SENT_UNKNOWN before every send), so crashlab can
read it; what it lacks is the read by key before a re-run sends again: a second hold on a service
without keys (EFF-01), a resend without an authoritative read on any service (RETRY-01).
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import restate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import careful_effect  # noqa: E402
import restate_common as common  # noqa: E402

def _send() -> str:
    try:
        return careful_effect.step("naive")
    except careful_effect.Unresolved as exc:
        raise RuntimeError(str(exc)) from None       # the tutorial's way: raise, and Restate retries


def workflow() -> restate.Workflow:
    reserve = common.reserve_workflow("Reserve")

    @reserve.main()
    async def run(ctx: restate.WorkflowContext) -> str:
        async def send() -> str:
            return await asyncio.to_thread(_send)
        return await ctx.run_typed("reserve", send)    # the tutorial's call: Restate's default retries
    return reserve


if __name__ == "__main__":
    sys.exit(common.main(workflow()))
