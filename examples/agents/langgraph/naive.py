"""A LangGraph agent written the way the tutorials write a tool: it fails crashlab's card on purpose.

    crashlab integrate --runtime langgraph examples/integration/scenarios/keyless-502.yaml \
        t2-commit-before-record --worker 'python3 examples/agents/langgraph/naive.py'

- The booking tool posts with a key taken from the model's ``tool_call_id``. The id is the model
  step's: when LangGraph runs the model step again (its checkpoint not saved: ``durability="exit"``,
  or ``"async"`` when the save had not landed), the call comes back under a new id, so a new key.
- Recovery is the framework's checkpointer only: a restarted worker resumes the thread with
  ``invoke(None, ...)`` and LangGraph re-runs the tools step that had not been recorded, which posts
  again with no read of the service (RETRY-01; on a service that keeps no keys, two holds: EFF-01).
- ``ToolNode(handle_tool_errors=True)``: a 5xx or a closed connection becomes an error message, and
  the model answers it by calling the tool again, under a new ``tool_call_id`` (``--retry=policy``:
  a ``RetryPolicy`` on the tools node re-runs the tool instead).

It writes a ledger to the worker's store (so the card can judge it: SENT_UNKNOWN before each send,
what the answer said after), but never reads it back before sending.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_langgraph import Unit, fenced, graph, option, serve  # noqa: E402  (puts examples/runtimes on the path)
from common import Retryable  # noqa: E402  (examples/runtimes/common.py)
from langchain_core.tools import InjectedToolCallId, tool  # noqa: E402
from langgraph.types import RetryPolicy  # noqa: E402

class NaiveUnit(Unit):
    """The run's unit, its keys being the tool calls' own: the finish and every checkpoint list each key
    the ledger holds, as it last says (the tool may have used several, one per tool call)."""

    def effects(self) -> list:
        last: dict = {}
        for (record,) in self.store.db.execute("SELECT record FROM ledger ORDER BY seq").fetchall():
            entry = json.loads(record)
            last[entry["semantic_key"]] = entry["knowledge"]
        return [{"key": k, "knowledge": v} for k, v in last.items()]


UNIT: NaiveUnit
RETRY = option("retry", "message")              # or "policy"


def _adopt(label: str, notice: bool = False) -> None:
    """Point the unit at the key this tool call uses (its ledger rows are under it)."""
    entries = UNIT.store.entries(label)
    if notice:
        UNIT.notice_key, UNIT.notice = label, (entries[-1]["knowledge"] if entries else None)
    else:
        UNIT.key, UNIT.knowledge = label, (entries[-1]["knowledge"] if entries else None)


@tool
@fenced
def reserve(intent: dict, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    if UNIT.done():
        return "FINISHED"
    _adopt(f"rsv-{tool_call_id}")
    if UNIT.prepare() == "cancelled":
        return "CANCELLED"
    result = UNIT.naive_send()       # raises Retryable on a 5xx, a timeout, a closed connection
    if result == "CONFIRMED":
        return f"CONFIRMED: hold {UNIT.store.entries(UNIT.key)[-1].get('remote_ref')}"
    return result


@tool
@fenced
def notify(message: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    if UNIT.done() or not UNIT.notify_user:
        return "nothing to notify"
    _adopt(f"msg-{tool_call_id}", notice=True)
    UNIT.append("SENT_UNKNOWN", notice=True, note="about to send")
    try:
        status, data, _ = UNIT.client.call("POST", "/notification/send", {"intent": UNIT.notice_intent},
                                           key=UNIT.notice_key)
    except Exception as exc:
        raise Retryable(f"no answer: {exc}") from None
    if status != 200:
        raise Retryable(f"HTTP {status}")
    UNIT.append("CONFIRMED", notice=True, remote_ref=data.get("message_id"), evidence=["send answered 200"])
    return "sent"


def recover() -> None:
    """After a restart, the unit follows the last keys this agent's tools used (not the intent's)."""
    rows = UNIT.store.db.execute("SELECT record FROM ledger ORDER BY seq").fetchall()
    for row in rows:
        entry = json.loads(row[0])
        if entry.get("service") == "reservation":
            UNIT.key, UNIT.knowledge = entry["semantic_key"], entry["knowledge"]
        elif entry.get("service") == "notification":
            UNIT.notice_key, UNIT.notice = entry["semantic_key"], entry["knowledge"]


@fenced
def conclude() -> None:
    if not UNIT.done() and UNIT.knowledge != "CONFIRMED":
        UNIT.gave_up("the model stopped calling the tool")      # "it failed": the naive ending
    UNIT.conclude()


def main() -> int:
    global UNIT
    UNIT = NaiveUnit()
    policy = RetryPolicy(max_attempts=3, initial_interval=0.02, retry_on=Retryable) if RETRY == "policy" else None
    return serve(UNIT, graph([reserve, notify], handle_tool_errors=RETRY != "policy", retry_policy=policy),
                 conclude, after_begin=recover)


if __name__ == "__main__":
    sys.exit(main())
