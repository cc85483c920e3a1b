"""The careful integration worker's discipline, cut into steps a durable runtime can run and retry.

The code is ``examples/integration/worker.py``'s (imported, not copied): the same SQLite store and
its crashlab views, the same ledger records, the same read by key. What changes under a runtime is
who retries. Each step loads the run from the worker's own store, does one thing and returns:

- ``prepare``: a live approval bound to the proposal's hash (asked of the sandbox's authority), then
  the checkpoints up to EFFECT_PREPARED and the ledger's PROPOSED, before anything leaves. With no
  live approval it requests one and ends the unit WAITING_HUMAN (the step returns that disposition);
  a revoked or denied one ends the run FAILED_NO_EFFECT.
- ``effect``: if the ledger says SENT_UNKNOWN (an earlier attempt may have sent: the runtime is
  retrying after a crash or an ambiguous answer), resolve it first by an authoritative read of the
  key; then, while the effect is still PROPOSED, ask the authority again (a revoked approval ends
  the run with nothing sent), append SENT_UNKNOWN and send **once** (the careful worker's dispatch,
  cut after one send). A definite
  "not executed" (429, an authoritative absence) raises :class:`Unresolved`: the runtime's retry
  policy is the single retry owner and schedules the next attempt. A definite refusal, a confirmed
  hold, a cancellation or an effect that stays unknown ends the run (finish row).
- ``give_up``: the runtime's attempts are exhausted: finish with what the ledger proves.

``naive`` is the tutorials' shape on the same ledger: the send inside the step, any failure raised
for the runtime to retry, and a retried step sending again without reading the key.

Steps take the worker's base URL and database from the environment crashlab gives the current
process (CRASHLAB_URL, CRASHLAB_DB): a retried step runs in whichever worker process is alive now,
and must speak to the sandbox as that worker.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
import worker as careful  # noqa: E402  (examples/integration/worker.py)
from crashlab_env import WAITING  # noqa: E402

ATTEMPT_CEILING = careful.ATTEMPT_CEILING
PHASES = ("prepare", "effect", "give_up", "naive")


class Unresolved(Exception):
    """The effect is not settled yet (still PROPOSED after a definite non-execution, or an ambiguous
    answer in the naive step): the runtime's retry policy decides when the next attempt runs."""


class StepWorker(careful.Worker):
    """One step of the careful worker under a runtime (``phase`` one of PHASES)."""

    def __init__(self, phase: str) -> None:
        named = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--mistake=")]
        if any(m not in careful.MISTAKES for m in named):     # --mistake=NAME: the careful worker's own mistakes
            raise SystemExit(f"--mistake: one of {', '.join(careful.MISTAKES)}")
        super().__init__(os.environ["CRASHLAB_URL"], os.environ["CRASHLAB_DB"], named[0] if named else None)
        self.phase = phase

    # the careful worker's dispatch, cut after one send: under a runtime each step sends at most once
    def dispatch(self) -> None:
        if self.phase == "prepare":
            return                                   # prepared; the effect is the next step's
        if self.phase == "give_up":
            self.append("REJECTED", evidence=["no attempt took effect: the last read or answer proved absence"])
            self.finish("FAILED_NO_EFFECT", "the runtime's attempts are exhausted")
            return
        super().dispatch()          # the cancellation and the approval checked right before the send

    def send(self) -> None:
        super().send()
        if self.knowledge == "PROPOSED":
            raise Unresolved("not executed (a definite refusal to run it now): the runtime retries")

    def finish(self, disposition: str, reason: str, next_owner: str | None = None, **extra) -> None:
        super().finish(disposition, reason, next_owner, **extra)   # extra: a PINNED finish's owner and packet
        self.ended = disposition

    def reconcile(self) -> None:
        if self.phase == "prepare":
            return
        if self.phase == "naive":                    # the tutorial's retry: run the activity again, send again
            self.knowledge = "PROPOSED"
            return
        super().reconcile()
        if self.phase == "give_up" and self.knowledge == "SENT_UNKNOWN" and not self.store.finished():
            self.finish("FAILED_EFFECT_UNKNOWN", "the runtime's attempts are exhausted; the effect may exist",
                        next_owner="operator")

    def ambiguous(self, why: str) -> None:
        if self.phase == "naive":
            raise Unresolved(f"{why}: raised for the runtime to retry")
        super().ambiguous(why)


def step(phase: str) -> str:
    """Run one step in this process; returns the run's disposition once it has one (a waiting one only
    when this step wrote it: a woken unit goes on past the wait its run's earlier unit recorded), else ''."""
    if phase not in PHASES:
        raise ValueError(f"unknown step {phase!r}")
    w = StepWorker(phase)
    w.ended = ""
    try:
        w.main()
    finally:
        db = getattr(w.store, "db", None)
        if db is not None:
            db.close()
    return w.ended or done()


def done() -> str:
    """The finish row's disposition once the run is over, '' while it is open (or waits)."""
    store = careful.Store(os.environ["CRASHLAB_DB"])
    try:
        row = store.db.execute("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        store.db.close()
    disposition = json.loads(row[0]).get("disposition", "") if row else ""
    return "" if disposition in WAITING else disposition
