"""An OpenAI Agents SDK agent on DBOS written the way the tutorials write a tool: it fails crashlab's card on purpose.

    crashlab integrate --runtime openai-agents-dbos examples/integration/scenarios/keyless-502.yaml \
        t2-commit-before-record --worker 'python3 examples/agents/openai_agents/naive.py'

- The agent runs through ``DBOSRunner``: its model calls are DBOS steps. Its function tools run
  inline in the workflow (``--tools=step`` makes each one a DBOS step instead): an inline tool leaves
  no row, so when DBOS recovers the workflow after a kill, the recorded model steps replay and the
  tool runs again, even if it had returned before the kill.
- The booking tool posts with a key taken from the model's ``call_id``, on every call, with no read
  of the service (RETRY-01; on a service that keeps no keys, two holds: EFF-01).
- A 5xx, a timeout or a closed connection is raised: the SDK's default ``failure_error_function``
  turns it into an error message for the model, which calls the tool again under a new ``call_id``,
  so a new key.

It writes a ledger to the worker's store (so the card can judge it: SENT_UNKNOWN before each send,
what the answer said after), but never reads it before sending (examples/agents/agent_tools.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_openai_agents import TOOLS, agent, serve, unit_of  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Naive, NaiveUnit, fenced  # noqa: E402
from agents import function_tool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

UNIT = NaiveUnit.__new__(NaiveUnit)          # set up in main(); the tools below close over it
TOOLS_ = Naive(UNIT)
STEP = TOOLS == "step"
_RESERVE = unit_of("reserve", fenced(TOOLS_.reserve), step=STEP)    # DBOS's step defaults: no retries
_NOTIFY = unit_of("notify", fenced(TOOLS_.notify), step=STEP)


@function_tool(strict_mode=False)    # an intent is a free-form object
async def reserve(ctx: ToolContext, intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    return _RESERVE(ctx.tool_call_id)         # raises Retryable: the SDK tells the model it failed


@function_tool(strict_mode=False)
async def notify(ctx: ToolContext, message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return _NOTIFY(ctx.tool_call_id)


BOOKER = agent([reserve, notify])


def main() -> int:
    NaiveUnit.__init__(UNIT)
    return serve(UNIT, BOOKER, "crashlab-openai-agents-naive", begin=TOOLS_.recover,
                 conclude=fenced(TOOLS_.conclude), gave_up=fenced(UNIT.gave_up))


if __name__ == "__main__":
    sys.exit(main())
