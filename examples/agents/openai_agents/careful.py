"""An OpenAI Agents SDK agent on DBOS whose tools follow the chapter (docs/agents/openai-agents.md).

    crashlab integrate --runtime openai-agents-dbos --suite --worker 'python3 examples/agents/openai_agents/careful.py'

The agent is the usual one (a scripted ``Model``, ``DBOSRunner``, its model calls DBOS steps); what
changes is the tools:

- Each tool is a DBOS step (``reserve``, ``notify``; ``retries_allowed=False``): once it returns, its
  result is recorded and a recovered workflow replays it instead of running the tool again.
- A step is recorded only once it returns, so a kill after the service committed still runs it
  again: the key comes from the run's intent (with its tenant), never from ``call_id``, and the tool
  reads its ledger first, resolving a key left in SENT_UNKNOWN by a read by key before any resend;
  with no read by key the effect stays unknown and goes to the operator.
- One retry owner, the tool: ``failure_error_function=None`` (an exception ends the run, never a
  message the model answers by calling the tool again), DBOS's step retries off, and every send
  says ``retry_owner: caller``.
- The worker's own lease (epoch = CRASHLAB_EPOCH) fences every write and send; a stale worker's
  tool ends the process before it records anything.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_openai_agents import agent, serve, unit_of  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Careful, Unit, fenced  # noqa: E402
from agents import function_tool  # noqa: E402

UNIT = Unit.__new__(Unit)                     # set up in main(); the tools below close over it
TOOLS = Careful(UNIT)
_RESERVE = unit_of("reserve", fenced(TOOLS.reserve), step=True, retries_allowed=False)
_NOTIFY = unit_of("notify", fenced(TOOLS.notify), step=True, retries_allowed=False)


@function_tool(failure_error_function=None, strict_mode=False)    # an intent is a free-form object
async def reserve(intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    return _RESERVE(intent)


@function_tool(failure_error_function=None, strict_mode=False)
async def notify(message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return _NOTIFY()


BOOKER = agent([reserve, notify])


def main() -> int:
    Unit.__init__(UNIT)
    return serve(UNIT, BOOKER, "crashlab-openai-agents-careful", begin=lambda: None, conclude=fenced(TOOLS.conclude))


if __name__ == "__main__":
    sys.exit(main())
