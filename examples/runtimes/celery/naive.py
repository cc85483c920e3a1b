"""A Celery task written the way Celery's tutorials write one: the effect is sent from the task,
``autoretry_for`` retries it when it raises, and ``acks_late`` with ``task_reject_on_worker_lost``
has a killed worker's task delivered again. It fails crashlab's integration card on purpose.

    crashlab integrate --runtime celery keyless-502.yaml t2-commit-before-record \
        --worker 'python3 examples/runtimes/celery/naive.py'

It keeps the ledger in the store crashlab reads (so the card can judge it), but the retry owner is
Celery: after a 502, a timeout or a closed connection the task raises and Celery sends it again,
with no read by key (RETRY-01; on a service that keeps no keys, two holds: EFF-01). After a kill,
the redelivered task sends again, with no read (RETRY-01).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Retryable, Unit  # noqa: E402
from common_celery import app, finishing, serve  # noqa: E402

APP = app("crashlab-naive")
UNIT = Unit()


class Reservation(APP.Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):   # Celery's retries are spent
        finishing(UNIT, lambda: (UNIT.gave_up(str(exc)), UNIT.conclude()))


@APP.task(bind=True, base=Reservation, autoretry_for=(Retryable,), max_retries=2, default_retry_delay=0.02,
          acks_late=True, task_reject_on_worker_lost=True)
def reservation(self) -> str:
    def work() -> None:
        if UNIT.prepare() == "cancelled":
            return
        UNIT.naive_send()              # raises Retryable: Celery publishes the task again
        UNIT.conclude()
    finishing(UNIT, work)
    return "done"


if __name__ == "__main__":
    sys.exit(serve(APP, UNIT, reservation))
