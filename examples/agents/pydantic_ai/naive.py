"""A Pydantic AI agent on DBOS written the way the tutorials write a tool: it fails crashlab's card on purpose.

    crashlab integrate --runtime pydantic-ai-dbos examples/integration/scenarios/keyless-502.yaml \
        t2-commit-before-record --worker 'python3 examples/agents/pydantic_ai/naive.py'

- The agent has Pydantic AI's ``DBOSDurability``: its model requests are DBOS steps. Its function
  tools run inline in the workflow (``--tools=step`` makes each one a DBOS step instead): an inline
  tool leaves no row, so when DBOS recovers the workflow after a kill, the recorded model steps
  replay and the tool runs again, even if it had returned before the kill.
- The booking tool posts with a key taken from the model's ``tool_call_id``, on every call, with no
  read of the service (RETRY-01; on a service that keeps no keys, two holds: EFF-01).
- A 5xx, a timeout or a closed connection is raised as ``ModelRetry``: Pydantic AI hands it back to
  the model (``Agent(retries=1)``), which calls the tool again under a new ``tool_call_id``, so a new key.

It writes a ledger to the worker's store (so the card can judge it: SENT_UNKNOWN before each send,
what the answer said after), but never reads it before sending (examples/agents/agent_tools.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_pydantic_ai import TOOLS, agent, serve, unit_of  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Naive, NaiveUnit, Retryable, fenced  # noqa: E402
from pydantic_ai import ModelRetry, RunContext  # noqa: E402

UNIT = NaiveUnit.__new__(NaiveUnit)          # set up in main(); the tools below close over it
TOOLS_ = Naive(UNIT)
BOOKER = agent()
STEP = TOOLS == "step"


@fenced
def _reserve(call_id: str) -> str:
    try:
        return TOOLS_.reserve(call_id)
    except Retryable as exc:
        raise ModelRetry(f"the booking failed ({exc}); try again") from None


@fenced
def _notify(call_id: str) -> str:
    try:
        return TOOLS_.notify(call_id)
    except Retryable as exc:
        raise ModelRetry(f"the notification failed ({exc}); try again") from None


_RESERVE = unit_of("reserve", _reserve, step=STEP)      # DBOS's step defaults: no retries
_NOTIFY = unit_of("notify", _notify, step=STEP)


@BOOKER.tool
async def reserve(ctx: RunContext, intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    return _RESERVE(ctx.tool_call_id)


@BOOKER.tool
async def notify(ctx: RunContext, message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return _NOTIFY(ctx.tool_call_id)


def main() -> int:
    NaiveUnit.__init__(UNIT)
    return serve(UNIT, BOOKER, "crashlab-pydantic-ai-naive", begin=TOOLS_.recover, conclude=fenced(TOOLS_.conclude),
                 gave_up=fenced(UNIT.gave_up))


if __name__ == "__main__":
    sys.exit(main())
