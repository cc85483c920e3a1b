"""An OpenAI Agents SDK agent on Temporal written the way the tutorials write a tool: it fails crashlab's card on purpose.

    crashlab integrate --runtime openai-agents-temporal crash-4-after-commit-before-record \\
        --worker 'python3 examples/agents/openai_agents/temporal_naive.py'

- The agent runs under ``temporalio.openai_agents``' ``OpenAIAgentsPlugin``: its model calls are the activity
  ``invoke_model_activity``, its tools activities (``activity_as_tool``), all with Temporal's default retry
  policy (common_temporal.py: only the timeouts are shortened). An activity is recorded once it returns: an
  attempt killed after the service committed leaves nothing in the history, and Temporal's next attempt runs
  the tool again.
- The booking tool posts with a key taken from its activity's id (one per tool call, the same on every
  attempt: the activity is given the tool's arguments, not the model's ``call_id``), on every attempt, with no
  read of the service (RETRY-01; on a service that keeps no keys, two holds: EFF-01).
- A 5xx, a timeout or a closed connection is raised: the activity fails and Temporal retries it, resending.

It writes a ledger to the worker's store (SENT_UNKNOWN before each send, what the answer said after), so the
card can judge it, but never reads it before sending (examples/agents/agent_tools.py).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_temporal import agent, beating, serve, tool  # noqa: E402  (puts examples/agents on the path)
from agent_tools import Naive, NaiveUnit, fenced  # noqa: E402
from temporalio import activity  # noqa: E402

UNIT = NaiveUnit.__new__(NaiveUnit)          # set up in main(); the tools below close over it
TOOLS = Naive(UNIT)
_RESERVE = fenced(TOOLS.reserve)
_NOTIFY = fenced(TOOLS.notify)


def _call_id() -> str:
    return f"act{activity.info().activity_id}"


@activity.defn(name="reserve")
async def reserve(intent: Any) -> str:     # free-form: activity_as_tool builds a strict schema
    """Reserve the part the request names (reservation.reserve)."""
    return await beating(_RESERVE, _call_id())      # raises Retryable: Temporal retries the activity


@activity.defn(name="notify")
async def notify(message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    return await beating(_NOTIFY, _call_id())


BOOKER = agent([tool(reserve), tool(notify)])


def main() -> int:
    NaiveUnit.__init__(UNIT)
    # begin: this process follows the keys the tools last used (read after the store, as on DBOS)
    return serve(UNIT, BOOKER, "crashlab-openai-agents-temporal-naive", [reserve, notify], begin=TOOLS.recover,
                 conclude=fenced(TOOLS.conclude), gave_up=fenced(UNIT.gave_up))


if __name__ == "__main__":
    sys.exit(main())
