"""Shared by the runtime examples: the careful integration worker (examples/integration/worker.py),
cut into the phases a durable runtime runs as steps or tasks.

Both examples of a runtime keep their state in the same store crashlab reads (the views
crashlab_checkpoints, crashlab_ledger, crashlab_finish), outside the runtime's own record, so the
integration card can judge them. They differ only in who retries and whether a resend is preceded
by a read:

- ``Unit.naive_send``: one send, SENT_UNKNOWN appended before it, and any 5xx, timeout or closed
  connection raised as an exception, for the runtime's retries to handle (the tutorials' way:
  "let the runtime retry the flaky call"). A restart re-runs it as it is, with no read.
- ``Unit.careful_dispatch``: the careful worker's dispatch. On entry, a key left in SENT_UNKNOWN
  (a previous attempt, killed or unanswered) is resolved by a read by key before anything is sent
  again; an ambiguous answer is resolved the same way, never resent blind; the runtime's own
  retries stay off, so the adapter is the one retry owner.

Approvals: ``Unit.prepare`` asks the sandbox's authority as the careful worker does (``Worker.approved``)
before anything is prepared, and ``careful_dispatch`` asks again right before every send
(``Worker.dispatch``). With no live approval bound to the proposal's hash the unit requests one, writes
WAITING_HUMAN (next owner the approver) and ends: ``done()`` is then true, so no step after it does
anything, and the worker process exits. The worker crashlab starts when the approval reaches the inbox
runs the run's next unit of work (``crashlab_env.unit_id``), which asks again: an approval is never
taken from a checkpoint or a runtime's replay.
"""
from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from crashlab_env import WAITING, need, unit_id  # noqa: E402
from worker import MISTAKES, Ambiguous, Stale, Worker  # noqa: E402  (the careful worker)

__all__ = ["Unit", "Retryable", "Stale", "need", "runtime_id", "unit_id"]


class Retryable(Exception):
    """An outcome the naive examples hand to the runtime's retries (a 5xx, a timeout, a closed connection)."""


def mistake() -> str | None:
    """The one mistake ``--mistake=NAME`` plants in a careful example (the careful worker's MISTAKES):
    the runtime examples run the worker's own decisions, so each is one decision away from passing."""
    named = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--mistake=")]
    if any(m not in MISTAKES for m in named):
        raise SystemExit(f"--mistake: one of {', '.join(MISTAKES)}")
    return named[0] if named else None


def runtime_id() -> str:
    """The run's unit-of-work id, the same for every worker of the run: the workflow or task id."""
    return need("CRASHLAB_RUNTIME_ID")


class Unit(Worker):
    """One run's unit of work, from the environment crashlab gives every worker (CRASHLAB_URL,
    CRASHLAB_DB, CRASHLAB_WORKER, CRASHLAB_EPOCH, CRASHLAB_RUN)."""

    def __init__(self) -> None:
        super().__init__(os.environ["CRASHLAB_URL"], os.environ["CRASHLAB_DB"], mistake())
        if isinstance(getattr(self.store, "db", None), sqlite3.Connection):
            # a runtime runs steps and tasks on its own threads, one at a time: share the connection
            self.store.db.close()
            self.store.db = sqlite3.connect(os.environ["CRASHLAB_DB"], timeout=10, isolation_level=None,
                                            check_same_thread=False)
        self.waited = False            # this unit ended waiting (WAITING_HUMAN): nothing more for it to do

    def finish(self, disposition: str, reason: str, next_owner: str | None = None, **extra) -> None:
        super().finish(disposition, reason, next_owner, **extra)   # extra: a PINNED finish's owner and packet
        self.waited = self.waited or disposition in WAITING

    # -- once per process, outside any step: the inbox, the profile, the lease, the store's state
    def begin(self) -> bool:
        """Read the intake and the store (the careful worker's own start); False when there is
        nothing left to do (already finished)."""
        status = super().begin()
        if status == 3:
            raise SystemExit("no intake event arrived")
        return status is None

    def done(self) -> bool:
        """The run is finished, or this unit ended waiting (the next unit is a woken worker's)."""
        return self.waited or self.store.finished()

    # -- step 1: prepare (a live approval, then PROPOSED in the worker's store before anything leaves)
    def prepare(self) -> str:
        if self.knowledge is None and not self.done():
            if self.cancelled():
                self.finish("CANCELLED_NO_EFFECT", "cancelled before anything was prepared")
                return "cancelled"
            order = ["INTAKE", "VALIDATED", "PROPOSED"]
            for state in order[order.index(self.state) + 1:] if self.state in order else ():
                self.write(state)
            if not self.approved():       # asked live: WAITING_HUMAN (requested), or revoked/denied: ended
                return "waiting" if self.waited else "ended"
            self.append("PROPOSED", note="prepared before any send")
            self.write("EFFECT_PREPARED", "PROPOSED")
        return str(self.knowledge)

    # -- step 2, careful: the adapter owns retries and reads by key before any resend
    def careful_dispatch(self) -> str:
        if self.done():
            return "finished"
        if self.knowledge == "SENT_UNKNOWN":     # attempt > 1: an earlier send may have committed
            if self.mistake == "resend_after_restart":
                self.knowledge = "PROPOSED"
            else:
                self.reconcile()
        if self.knowledge == "PROPOSED" and not self.done():
            self.dispatch()
        return str(self.knowledge)

    # -- step 2, naive: one send; whatever is not a 200 is raised for the runtime to retry
    def naive_send(self) -> str:
        if self.done() or self.knowledge == "CONFIRMED":
            return str(self.knowledge)
        self.append("SENT_UNKNOWN", note="about to send")
        if self.state != "EFFECT_IN_FLIGHT":
            self.write("EFFECT_IN_FLIGHT", self.knowledge)
        try:
            status, data, _ = self.client.call("POST", "/reservation/reserve", {"intent": self.intent}, key=self.key)
        except Ambiguous as exc:
            raise Retryable(f"no answer: {exc}") from None
        if status == 200:
            self.append("CONFIRMED", remote_ref=data["ref"], evidence=[f"reserve answered 200 with {data['ref']}"],
                        observations=[{"outcome": "accepted", "status": 200}])
            self.write("EFFECT_CONFIRMED", "CONFIRMED")
            return "CONFIRMED"
        if status >= 500 or status in (409, 429):
            raise Retryable(f"HTTP {status}")
        code = (data.get("error") or {}).get("code")
        self.append("REJECTED", evidence=[f"definite refusal: HTTP {status} {code}"])
        self.finish("FAILED_NO_EFFECT", f"the service refused the request: {code}")
        return "REJECTED"

    def gave_up(self, why: str) -> None:
        """The naive examples' ending once the runtime's retries are spent: 'it failed'."""
        if not self.done():
            self.finish("FAILED_NO_EFFECT", f"the runtime's retries were exhausted: {why}")

    # -- step 3: conclude (the notification, then the finish row)
    def conclude(self) -> str:
        if self.done():
            return "finished"
        if self.knowledge == "CONFIRMED":
            self.conclude_confirmed()
        elif self.knowledge == "SENT_UNKNOWN":
            self.finish("FAILED_EFFECT_UNKNOWN", "the effect stayed unresolved", next_owner="operator")
        return "finished"
