"""A Pydantic AI agent on Temporal whose tools follow the chapter (docs/agents/pydantic-ai.md, "Temporal").

    crashlab integrate --runtime pydantic-ai-temporal --suite \\
        --worker 'python3 examples/agents/pydantic_ai/temporal_careful.py'

The agent is the usual one (the scripted model, ``TemporalDurability``: model requests and tool calls are
activities, each under a 2 s heartbeat timeout); what changes is the tools and the retry policy:

- Temporal's activity retry is the one retry owner, bounded (``maximum_attempts=10``, 50 ms backing off to
  500 ms): it retries an attempt a kill or a pause cut short, nothing else. The tool never raises (no ``ModelRetry``:
  the model is never invited to book again) and every send says ``retry_owner: caller``.
- An activity is recorded only once it returns, so a kill after the service committed runs the tool
  again: the key comes from the run's intent (with its tenant), never from ``tool_call_id``, and the tool
  reads its ledger first, resolving a key left in SENT_UNKNOWN by a read by key before any resend; with no
  read by key the effect stays unknown and goes to the operator.
- The worker's own lease (epoch = CRASHLAB_EPOCH) fences every write and send; a stale worker's tool ends
  the process before it records anything.
"""
from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_temporal import agent, serve  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Careful, Unit, fenced  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402

UNIT = Unit.__new__(Unit)                     # set up in main(); the tools below close over it
TOOLS = Careful(UNIT)
#: bounded, yet past what a paused worker swallows: a worker stopped (SIGSTOP) past its lease keeps its polls
#: open and loses the attempts handed to them (measured: attempts 2 to 3 lost before the replacement got one);
#: the sends themselves stay bounded by the tool's own attempt ceiling in the ledger
BOOKER = agent(RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=2.0,
                           maximum_interval=timedelta(milliseconds=500), maximum_attempts=10))

_RESERVE = fenced(TOOLS.reserve)
_NOTIFY = fenced(TOOLS.notify)


@BOOKER.tool_plain
def reserve(intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    return _RESERVE(intent)


@BOOKER.tool_plain
def notify(message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return _NOTIFY()


def main() -> int:
    Unit.__init__(UNIT)
    return serve(UNIT, "crashlab-pydantic-ai-temporal-careful", BOOKER, conclude=fenced(TOOLS.conclude))


if __name__ == "__main__":
    sys.exit(main())
