"""A Celery task that follows the adapter table (docs/runtimes/celery.md).

    crashlab integrate --runtime celery keyless-502.yaml t2-commit-before-record \
        --worker 'python3 examples/runtimes/celery/careful.py'

- The ledger lives in the worker's own store (the views crashlab reads), outside Celery's result
  backend: PROPOSED before anything leaves, SENT_UNKNOWN right before each send.
- One retry owner: the adapter. No ``autoretry_for``, ``max_retries=0``: an ambiguous answer (a 5xx,
  a timeout, a closed connection) is resolved inside the task by a read by key, never by sending
  again blind.
- Celery's redelivery is kept (``acks_late``, ``task_reject_on_worker_lost``): it is how a killed
  worker's run resumes, so it is coordinated rather than switched off. A redelivered task starts
  by reading the ledger: a key left in SENT_UNKNOWN is resolved by a read by key before anything
  is sent again (the commit-before-return ambiguity a kill after the commit leaves).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Unit  # noqa: E402
from common_celery import app, finishing, serve  # noqa: E402

APP = app("crashlab-careful")
UNIT = Unit()


@APP.task(bind=True, max_retries=0, acks_late=True, task_reject_on_worker_lost=True)
def reservation(self) -> str:
    def work() -> None:
        if UNIT.prepare() == "cancelled":
            return
        UNIT.careful_dispatch()        # SENT_UNKNOWN left by a killed delivery: read by key first
        UNIT.conclude()
    finishing(UNIT, work)
    return "done"


if __name__ == "__main__":
    sys.exit(serve(APP, UNIT, reservation))
