"""A Pydantic AI agent on Temporal written the way the tutorials write a tool: it fails crashlab's card on purpose.

    crashlab integrate --runtime pydantic-ai-temporal crash-4-after-commit-before-record \\
        --worker 'python3 examples/agents/pydantic_ai/temporal_naive.py'

- The agent has Pydantic AI's ``TemporalDurability``: its model requests and its tool calls are Temporal
  activities, with Temporal's default retry policy (common_temporal.py: only the timeouts are shortened).
  An activity is recorded once it returns: an attempt killed after the service committed leaves nothing
  in the history, and Temporal's next attempt runs the tool again.
- The booking tool posts with a key taken from the model's ``tool_call_id``, on every call, with no read of
  the service (RETRY-01; on a service that keeps no keys, two holds: EFF-01).
- A 5xx, a timeout or a closed connection is raised as ``ModelRetry``: Pydantic AI hands it back to the
  model (``Agent(retries=1)``), which calls the tool again under a new ``tool_call_id``, so a new key.

It writes a ledger to the worker's store (SENT_UNKNOWN before each send, what the answer said after), so the
card can judge it, but never reads it before sending (examples/agents/agent_tools.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_temporal import agent, serve  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Naive, NaiveUnit, Retryable, fenced  # noqa: E402
from pydantic_ai import ModelRetry, RunContext  # noqa: E402

UNIT = NaiveUnit.__new__(NaiveUnit)          # set up in main(); the tools below close over it
TOOLS = Naive(UNIT)
BOOKER = agent()


def _tool(body, what: str):
    @fenced
    def run(call_id: str) -> str:
        try:
            return body(call_id)
        except Retryable as exc:
            raise ModelRetry(f"the {what} failed ({exc}); try again") from None
    return run


_RESERVE = _tool(TOOLS.reserve, "booking")
_NOTIFY = _tool(TOOLS.notify, "notification")


@BOOKER.tool
def reserve(ctx: RunContext, intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    return _RESERVE(ctx.tool_call_id)


@BOOKER.tool
def notify(ctx: RunContext, message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return _NOTIFY(ctx.tool_call_id)


def main() -> int:
    NaiveUnit.__init__(UNIT)
    # begin: this process follows the keys the tools last used (read after the store, as on DBOS)
    return serve(UNIT, "crashlab-pydantic-ai-temporal-naive", BOOKER, begin=TOOLS.recover,
                 conclude=fenced(TOOLS.conclude), gave_up=fenced(UNIT.gave_up))


if __name__ == "__main__":
    sys.exit(main())
