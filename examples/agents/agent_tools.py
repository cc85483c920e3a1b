"""The two tools every agent example calls, written once for every framework: a booking tool
(reservation.reserve) and a notification tool (notification.send), naive and careful.

Each framework's example only wraps these bodies in its own tool type (a Pydantic AI function tool,
an OpenAI Agents SDK ``function_tool``), and decides whether each runs inline or as a DBOS step.
Both kinds keep the careful worker's ledger in the worker's store (examples/runtimes/common.py), so
the integration card can judge them:

- ``Naive``: written the way the frameworks' tutorials write a tool. The key is ``rsv-`` + the
  model's tool-call id; every call of the tool posts (SENT_UNKNOWN first, for the card), with no read
  of the ledger or of the service before it, and a 5xx, a timeout or a closed connection is raised for
  the framework to hand back to the model, which calls the tool again under a new id.
- ``Careful``: the chapter's tool. The key comes from the run's intent (with its tenant); PROPOSED
  before anything leaves, SENT_UNKNOWN right before each send; a key left in SENT_UNKNOWN is resolved
  by a read by key before any resend; nothing is raised for the framework to retry.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtimes"))

from common import Retryable, Stale, Unit  # noqa: E402  (examples/runtimes/common.py)

__all__ = ["Careful", "Naive", "NaiveUnit", "Retryable", "Stale", "Unit", "fenced", "option", "request"]


def option(name: str, default: str) -> str:
    """``--name=value`` from the command line (other words are ignored)."""
    return next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(f"--{name}=")), default)


def request(intent: dict, notify: bool) -> str:
    """The user's request, as the examples put it to the model: the intake's intent, in JSON."""
    return json.dumps({"ask": "reserve this part", "intent": intent, "notify": notify}, sort_keys=True)


def fenced(tool: Callable) -> Callable:
    """A tool body that ends the process once a newer worker holds the run's lease: nothing more is
    sent, and nothing is recorded, in the worker's store or in the framework's record."""
    @functools.wraps(tool)
    def body(*args, **kwargs):
        try:
            return tool(*args, **kwargs)
        except Stale as exc:
            print(f"stopping: {exc}", file=sys.stderr, flush=True)
            os._exit(0)
    return body


class NaiveUnit(Unit):
    """The run's unit, its keys being the tool calls' own: the finish and every checkpoint list each key
    the ledger holds, as it last says (the tool may have used several, one per tool call)."""

    def effects(self) -> list:
        last: dict = {}
        for (record,) in self.store.db.execute("SELECT record FROM ledger ORDER BY seq").fetchall():
            entry = json.loads(record)
            last[entry["semantic_key"]] = entry["knowledge"]
        return [{"key": k, "knowledge": v} for k, v in last.items()]


class Naive:
    """The tutorial's tool bodies (see the module's docstring)."""

    def __init__(self, unit: NaiveUnit, *, blind: bool = True) -> None:
        self.unit = unit
        self.blind = blind         # post on every call, even under a key the ledger says CONFIRMED

    def adopt(self, label: str, notice: bool = False) -> None:
        """Point the unit at the key this tool call uses (its ledger rows are under it)."""
        entries = self.unit.store.entries(label)
        if notice:
            self.unit.notice_key, self.unit.notice = label, (entries[-1]["knowledge"] if entries else None)
        else:
            self.unit.key, self.unit.knowledge = label, (entries[-1]["knowledge"] if entries else None)

    def reserve(self, call_id: str) -> str:
        unit = self.unit
        if unit.done():
            return "FINISHED"
        self.adopt(f"rsv-{call_id}")
        if unit.prepare() == "cancelled":
            return "CANCELLED"
        if self.blind and unit.knowledge == "CONFIRMED":
            unit.knowledge = "PROPOSED"          # the tutorial's tool keeps no memory of an earlier call
        result = unit.naive_send()               # raises Retryable on a 5xx, a timeout, a closed connection
        if result == "CONFIRMED":
            return f"CONFIRMED: hold {unit.store.entries(unit.key)[-1].get('remote_ref')}"
        return result

    def notify(self, call_id: str) -> str:
        unit = self.unit
        if unit.done() or not unit.notify_user:
            return "nothing to notify"
        self.adopt(f"msg-{call_id}", notice=True)
        unit.append("SENT_UNKNOWN", notice=True, note="about to send")
        try:
            status, data, _ = unit.client.call("POST", "/notification/send", {"intent": unit.notice_intent},
                                               key=unit.notice_key)
        except Exception as exc:
            raise Retryable(f"no answer: {exc}") from None
        if status != 200:
            raise Retryable(f"HTTP {status}")
        unit.append("CONFIRMED", notice=True, remote_ref=data.get("message_id"), evidence=["send answered 200"])
        return "sent"

    def recover(self) -> None:
        """After a restart, the unit follows the last keys this agent's tools used (not the intent's)."""
        for (record,) in self.unit.store.db.execute("SELECT record FROM ledger ORDER BY seq").fetchall():
            entry = json.loads(record)
            if entry.get("service") == "reservation":
                self.unit.key, self.unit.knowledge = entry["semantic_key"], entry["knowledge"]
            elif entry.get("service") == "notification":
                self.unit.notice_key, self.unit.notice = entry["semantic_key"], entry["knowledge"]

    def conclude(self) -> None:
        if not self.unit.done() and self.unit.knowledge != "CONFIRMED":
            self.unit.gave_up("the model stopped calling the tool")      # "it failed": the naive ending
        self.unit.conclude()


class Careful:
    """The chapter's tool bodies (see the module's docstring)."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit

    def outcome(self) -> str:
        """What the booking tool tells the model: the ledger's knowledge, and the finish if there is one."""
        unit = self.unit
        if unit.waited:
            return f"{unit.state}: an approval of the proposal is requested; nothing was sent"
        if unit.done():
            return f"FINISHED: the run ended ({unit.state}); knowledge {unit.knowledge}"
        if unit.knowledge == "CONFIRMED":
            return f"CONFIRMED: hold {unit.store.entries(unit.key)[-1].get('remote_ref')} under {unit.key}"
        return f"{unit.knowledge}: not confirmed"

    def reserve(self, intent: dict) -> str:
        unit = self.unit
        if intent != unit.intent:            # the model's arguments are not the request's: book nothing
            return "REFUSED: the arguments differ from the request's intent"
        if unit.prepare() == "cancelled":    # PROPOSED before anything leaves, or the run ends cancelled
            return self.outcome()
        unit.careful_dispatch()              # SENT_UNKNOWN left by a killed attempt: a read by key first
        return self.outcome()

    def notify(self) -> str:
        unit = self.unit
        if unit.done() or unit.knowledge != "CONFIRMED" or not unit.notify_user:
            return "nothing to notify"
        if unit.cancelled():
            return "not sent: the run was cancelled"
        if unit.state not in ("EFFECT_CONFIRMED", "NOTIFYING"):
            unit.write("EFFECT_CONFIRMED", "CONFIRMED")
        unit.send_notice()                   # its own key; SENT_UNKNOWN before its one send, never resent
        return f"notification {unit.notice}"

    def conclude(self) -> None:
        self.unit.conclude()                 # the finish row, from the ledger (not from the model's answer)
