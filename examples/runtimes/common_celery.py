"""Shared by the Celery examples: one crashlab worker process = a Celery producer and a Celery
worker (solo pool, in this process, so crashlab's kill reaches the task) for one run.

- The app uses ``CRASHLAB_RUNTIME`` (crashlab's redis-server) as its broker (database 0) and its
  result backend (database 1), and the run's ``CRASHLAB_RUNTIME_ID`` as the task id and the name
  of the only queue it consumes: a restarted worker consumes its own run's task, no other.
- The task is published once per run (a Redis ``SET NX`` marks it); a worker that is killed leaves
  the delivered message unacknowledged (``acks_late``), and Redis gives it back to the next worker
  once the visibility timeout has passed. With kombu's defaults (a sweep every
  ``unacked_restore_interval`` x ``unacked_restore_throttle`` = 100 s, visibility timeout 1 hour)
  nothing comes back within a scenario; these examples lower both (the settings below).
- When the task has written the run's finish row, the process asks Celery for a warm shutdown
  (SIGTERM: the task is acknowledged, the worker exits 0). So it does when the task ends with the run
  waiting (WAITING_HUMAN: an approval was requested): the worker crashlab starts when the run is woken
  publishes the run's next task, id ``CRASHLAB_RUNTIME_ID.woken-N`` (``crashlab_env.unit_id``), once.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from celery import Celery

from common import Stale, Unit, need, runtime_id, unit_id

#: the broker settings that decide when a killed worker's task is delivered again (seconds)
TRANSPORT = {"visibility_timeout": 2, "unacked_restore_interval": 0.25, "unacked_restore_throttle": 1}

FINISHED = threading.Event()
STALE = threading.Event()


def app(name: str) -> Celery:
    url = need("CRASHLAB_RUNTIME")
    a = Celery(name, broker=f"{url}/0", backend=f"{url}/1")
    a.conf.update(task_default_queue=runtime_id(), broker_transport_options=TRANSPORT,
                  result_backend_transport_options=TRANSPORT, result_extended=True, task_track_started=True,
                  worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True,
                  worker_hijack_root_logger=False, worker_redirect_stdouts=False)
    return a


def serve(a: Celery, unit: Unit, task) -> int:
    """Publish the run's task once, then consume the run's queue until the run is finished or waits."""
    try:
        if not unit.begin():
            return 0
    except Stale as exc:
        print(f"stopping: {exc}", file=sys.stderr)
        return 0
    import redis
    marker = redis.Redis.from_url(f"{need('CRASHLAB_RUNTIME')}/0")
    task_id = unit_id()                # the run's task, or its next one once a woken worker runs it
    if marker.set(f"crashlab:published:{task_id}", "1", nx=True):
        task.apply_async(task_id=task_id, queue=runtime_id())
    marker.close()

    def stop_when_finished() -> None:
        FINISHED.wait()
        os.kill(os.getpid(), signal.SIGTERM)     # Celery's warm shutdown: ack, then exit

    threading.Thread(target=stop_when_finished, daemon=True).start()
    worker = a.Worker(pool="solo", concurrency=1, queues=[runtime_id()], without_heartbeat=True,
                      without_mingle=True, without_gossip=True, loglevel="WARNING", quiet=True)
    worker.start()
    return 0 if unit.done() or STALE.is_set() else (worker.exitcode or 1)


def finishing(unit: Unit, body: Callable[[], None]) -> None:
    """Run ``body`` (the task's work), then let the process end once the run is finished. A worker
    that finds a newer one owns the run (it was paused past its lease) gives the task back to the
    queue unacknowledged, for the owner, and shuts down: a stale worker's task is not a failure."""
    try:
        body()
    except Stale as exc:
        from celery.exceptions import Reject
        STALE.set()
        FINISHED.set()
        raise Reject(f"stale: {exc}", requeue=True) from None
    finally:
        if unit.done():
            FINISHED.set()
