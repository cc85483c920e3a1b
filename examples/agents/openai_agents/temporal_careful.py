"""An OpenAI Agents SDK agent on Temporal whose tools follow the chapter (docs/agents/openai-agents.md, "Temporal").

    crashlab integrate --runtime openai-agents-temporal --suite \\
        --worker 'python3 examples/agents/openai_agents/temporal_careful.py'

The agent is the usual one (the scripted model, ``OpenAIAgentsPlugin``: model calls and tools are
activities, each under a 2 s heartbeat timeout); what changes is the tools and the retry policy:

- Temporal's activity retry is the one retry owner, bounded (``maximum_attempts=10``, 50 ms backing off to
  500 ms), for the model activity and the tools alike: it retries an attempt a kill or a pause cut short,
  nothing else. The tool never raises and every send says ``retry_owner: caller``.
- An activity is recorded only once it returns, so a kill after the service committed runs the tool
  again: the key comes from the run's intent (with its tenant), never from the activity or the call, and the
  tool reads its ledger first, resolving a key left in SENT_UNKNOWN by a read by key before any resend; with
  no read by key the effect stays unknown and goes to the operator.
- The worker's own lease (epoch = CRASHLAB_EPOCH) fences every write and send; a stale worker's tool ends
  the process before it records anything.
"""
from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_temporal import agent, beating, serve, tool  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Careful, Unit, fenced  # noqa: E402
from temporalio import activity  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402

UNIT = Unit.__new__(Unit)                     # set up in main(); the tools below close over it
TOOLS = Careful(UNIT)
#: bounded, yet past what a paused worker swallows (examples/agents/pydantic_ai/temporal_careful.py)
RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=2.0,
                    maximum_interval=timedelta(milliseconds=500), maximum_attempts=10)
_RESERVE = fenced(TOOLS.reserve)
_NOTIFY = fenced(TOOLS.notify)


@activity.defn(name="reserve")
async def reserve(intent: Any) -> str:     # free-form: activity_as_tool builds a strict schema
    """Reserve the part the request names (reservation.reserve)."""
    return await beating(_RESERVE, intent)


@activity.defn(name="notify")
async def notify(message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return await beating(_NOTIFY)


BOOKER = agent([tool(reserve, RETRY), tool(notify, RETRY)])


def main() -> int:
    Unit.__init__(UNIT)
    return serve(UNIT, BOOKER, "crashlab-openai-agents-temporal-careful", [reserve, notify], RETRY,
                 conclude=fenced(TOOLS.conclude))


if __name__ == "__main__":
    sys.exit(main())
