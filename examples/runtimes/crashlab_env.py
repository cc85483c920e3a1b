"""What every runtime example reads from the environment crashlab gives a worker under ``--runtime``,
and the run's unit of work that follows from it."""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path

#: the dispositions a run waits in (it is not over: crashlab wakes it with a new worker on a delivery)
WAITING = ("WAITING_HUMAN", "WAITING_OPERATOR", "WAITING_RETRY", "PINNED")


def need(name: str) -> str:
    """The variable ``name`` crashlab sets for a worker under ``crashlab integrate --runtime NAME``; a clear
    one-line error (exit 2, no traceback) when the worker was started without it."""
    value = os.environ.get(name)
    if not value:
        print(f"error: {name} is not set: this worker runs under a durable runtime; start it with "
              "crashlab integrate SCENARIO --runtime NAME --worker ... (as its repro line says)", file=sys.stderr)
        raise SystemExit(2)
    return value


def waits() -> int:
    """How many times the run ended a unit of work waiting (a waiting finish row: WAITING_HUMAN while an
    approval is requested), read from the worker's store (CRASHLAB_DB), the one crashlab reads. On SQLite
    the read is read-only and waits out a writer's lock (a stalled worker's transaction), as a step would."""
    db = need("CRASHLAB_DB")
    if db.startswith(("postgresql://", "postgres://")):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
        import worker   # examples/integration/worker.py: its store on PostgreSQL, through psql

        rows = [r for r in worker.PsqlStore(db).sql("SELECT record FROM finish").splitlines() if r]
    elif not Path(db).exists():
        return 0                                   # the run's first worker: nothing recorded yet
    else:
        deadline = time.monotonic() + 60
        while True:
            conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True, timeout=10)
            try:
                rows = [r for (r,) in conn.execute("SELECT record FROM finish").fetchall()]
                break
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return 0
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            finally:
                conn.close()
            time.sleep(0.05)
    return sum(1 for r in rows if json.loads(r).get("disposition") in WAITING)


def unit_id() -> str:
    """The id of the run's current unit of work (workflow, task, thread): CRASHLAB_RUNTIME_ID until the run
    first waits, then ``CRASHLAB_RUNTIME_ID.woken-N`` after its Nth wait. A unit that ends waiting is over in
    the runtime (its record says what it did); the worker crashlab starts when a delivery wakes the run
    starts the next unit, which asks again (the approval live, never taken from a checkpoint), and a worker
    restarted after a kill finds the same N, so it resumes the unit that was cut."""
    base, n = need("CRASHLAB_RUNTIME_ID"), waits()
    return base if n == 0 else f"{base}.woken-{n}"
