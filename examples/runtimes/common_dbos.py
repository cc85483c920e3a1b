"""Shared by the DBOS examples: one crashlab worker process launches DBOS on crashlab's system
database and runs (or resumes) its run's workflow.

- ``system_database_url`` is ``CRASHLAB_RUNTIME`` (the SQLite system database crashlab prepared);
  ``executor_id`` and the workflow id are the run's ``CRASHLAB_RUNTIME_ID``: DBOS recovers a pending
  workflow only for its own executor, so a restarted worker resumes its own run's workflow, and a
  worker of another run never touches it.
- ``DBOS.launch()`` re-enqueues this executor's pending workflow (the one a killed worker left);
  the worker then waits for it. A new run starts the workflow under its id.
- A workflow that ends with the run waiting (WAITING_HUMAN: an approval was requested) is over; the
  worker crashlab starts when the run is woken starts the run's next workflow, ``CRASHLAB_RUNTIME_ID.woken-N``
  (``crashlab_env.unit_id``), which asks the authority again.
- DBOS keeps no lease epoch: a worker that was paused and resumes goes on running its step beside
  the workflow its replacement recovered, and the first to end decides the outcome DBOS records.
  ``fenced`` steps stop such a worker the moment its own lease says a newer one owns the run: the
  process exits, as a crash would, and records nothing in DBOS.
"""
from __future__ import annotations

import os
import sys
import functools
from collections.abc import Callable

from dbos import DBOS, SetWorkflowID

from common import Stale, Unit, need, runtime_id, unit_id


def fenced(step: Callable) -> Callable:
    """A step body that ends the process (recording nothing, in DBOS or anywhere) once a newer
    worker holds the run's lease."""
    @functools.wraps(step)
    def body(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except Stale as exc:
            print(f"stopping: {exc}", file=sys.stderr, flush=True)
            os._exit(0)
    return body


def serve(unit: Unit, name: str, workflow: Callable[[], str]) -> int:
    try:
        if not unit.begin():
            return 0
    except Stale as exc:
        print(f"stopping: {exc}", file=sys.stderr)
        return 0
    DBOS(config={"name": name, "system_database_url": need("CRASHLAB_RUNTIME"),
                 "executor_id": runtime_id(), "log_level": "WARNING"})
    DBOS.launch()                      # recovers this run's pending workflow, if a worker died in it
    wf_id = unit_id()                  # the run's workflow, or its next one once a woken worker runs it
    try:
        if DBOS.get_workflow_status(wf_id) is None:
            with SetWorkflowID(wf_id):
                handle = DBOS.start_workflow(workflow)
        else:
            handle = DBOS.retrieve_workflow(wf_id)
        handle.get_result(polling_interval_sec=0.02)
    except Stale as exc:               # a newer worker owns the run (this one was paused past its lease)
        print(f"stopping: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)        # the workflow's outcome is committed; DBOS.destroy() would wait ~1 s for its threads
