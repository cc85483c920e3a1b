"""A LangGraph agent whose booking tool follows the chapter (docs/agents/langgraph.md).

    crashlab integrate --runtime langgraph --suite --worker 'python3 examples/agents/langgraph/careful.py'

The graph is the usual tool-calling loop (a scripted model, ``ToolNode``, ``SqliteSaver``); what
changes is the tool:

- The key comes from the run's intent (the intake's, with its tenant), never from the model's
  ``tool_call_id``: a model step that LangGraph runs again after a lost checkpoint asks for the
  booking under a new id, and the key stays the same.
- The ledger lives in the worker's own store (the views crashlab reads), outside LangGraph's
  checkpoints: PROPOSED before anything leaves, SENT_UNKNOWN right before each send.
- Before any resend the tool reads its ledger: a key left in SENT_UNKNOWN (a worker killed after
  the service committed, before LangGraph recorded the step) is resolved by a read by key; with no
  read by key the effect stays unknown and goes to the operator.
- One retry owner, the tool: ``handle_tool_errors=False`` (an exception stops the graph, never a
  message the model answers by calling the tool again), no ``RetryPolicy`` on the tools node, and
  ``retry_owner: caller`` on every send.
- The worker's own lease (epoch = CRASHLAB_EPOCH) fences every write and send; a stale worker's
  tool ends the process before it records anything.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common_langgraph import Unit, fenced, graph, serve  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

UNIT: Unit


def outcome() -> str:
    """What the booking tool tells the model: the ledger's knowledge, and the finish if there is one."""
    if UNIT.waited:
        return f"{UNIT.state}: an approval of the proposal is requested; nothing was sent"
    if UNIT.done():
        return f"FINISHED: the run ended ({UNIT.state}); knowledge {UNIT.knowledge}"
    if UNIT.knowledge == "CONFIRMED":
        entry = UNIT.store.entries(UNIT.key)[-1]
        return f"CONFIRMED: hold {entry.get('remote_ref')} under {UNIT.key}"
    return f"{UNIT.knowledge}: not confirmed"


@tool
@fenced
def reserve(intent: dict) -> str:
    """Reserve the part the request names (reservation.reserve)."""
    if intent != UNIT.intent:          # the model's arguments are not the request's: book nothing
        return "REFUSED: the arguments differ from the request's intent"
    if UNIT.prepare() == "cancelled":  # PROPOSED before anything leaves, or the run ends cancelled
        return outcome()
    UNIT.careful_dispatch()            # SENT_UNKNOWN left by a killed attempt: a read by key first
    return outcome()


@tool
@fenced
def notify(message: str) -> str:
    """Tell the technician the part is reserved (notification.send)."""
    if UNIT.done() or UNIT.knowledge != "CONFIRMED" or not UNIT.notify_user:
        return "nothing to notify"
    if UNIT.cancelled():
        return "not sent: the run was cancelled"
    if UNIT.state not in ("EFFECT_CONFIRMED", "NOTIFYING"):
        UNIT.write("EFFECT_CONFIRMED", "CONFIRMED")
    UNIT.send_notice()                 # its own key; SENT_UNKNOWN before its one send, never resent
    return f"notification {UNIT.notice}"


@fenced
def conclude() -> None:
    UNIT.conclude()                    # the finish row, from the ledger (not from the model's answer)


def main() -> int:
    global UNIT
    UNIT = Unit()
    return serve(UNIT, graph([reserve, notify], handle_tool_errors=False), conclude)


if __name__ == "__main__":
    sys.exit(main())
