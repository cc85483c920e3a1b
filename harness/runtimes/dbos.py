"""DBOS Transact (Python) on SQLite under ``crashlab integrate --runtime dbos``.

DBOS has no server: its state is a system database every worker of the invocation shares. crashlab
prepares it (an empty SQLite file in the output folder, migrated once by a short-lived DBOS process
so that concurrent workers never race on its schema) and gives its URL to every worker as
``CRASHLAB_RUNTIME`` (``{runtime}``). A worker launches DBOS with that URL and with
``executor_id = CRASHLAB_RUNTIME_ID``, and starts its workflow under that same id: DBOS recovers a
pending workflow only for its own executor, so a restarted worker resumes its own run's workflow
and never another run's.

The record of a run is DBOS's own: the ``workflow_status`` row of the workflow and its
``operation_outputs`` rows (one per step that completed, in order). A step attempt cut by a kill, or
retried in the process by ``retries_allowed``, leaves no row of its own: DBOS records a step's
output only once it returns.
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import dbos  # noqa: F401  (the extra: load() names it when missing)

from ..vocab.errors import UsageError
from . import Runtime

VERSION = "3.4.0"

_MIGRATE = """
import os, sys
from dbos import DBOS
DBOS(config={"name": "crashlab", "system_database_url": sys.argv[1], "log_level": "ERROR"})
DBOS.launch()          # creates and migrates the schema, committed before it returns
os._exit(0)            # DBOS.destroy() would wait about a second for its background threads
"""


class DbosState:
    """The shared system database of one ``crashlab integrate`` invocation."""

    def __init__(self, work: Path) -> None:
        try:
            Path(work).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"DBOS's system database cannot be placed in {work}: {exc.strerror or exc}",
                             hint="give an --out folder crashlab can write") from None
        self.path = Path(work).resolve() / "dbos-system.sqlite"
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self.url = f"sqlite:///{self.path}"
        self.env = {"CRASHLAB_RUNTIME": self.url, "CRASHLAB_RUNTIME_NAME": "dbos"}
        self.writable = (str(self.path.parent),)     # every worker writes the system database
        try:
            done = subprocess.run([sys.executable, "-c", _MIGRATE, self.url], capture_output=True, text=True,
                                  timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UsageError("DBOS could not prepare its system database within 60 s",
                             hint=f"check that {self.path.parent} is writable") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise UsageError(f"DBOS could not prepare its system database {self.path}: " + " | ".join(tail),
                             hint=f"check that {self.path.parent} is writable and that DBOS Transact {VERSION} is "
                                  "installed (pip install 'crashlab[dbos]')")

    def _rows(self, sql: str, args: tuple) -> list[dict]:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=2)
        try:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql, args)]
        finally:
            db.close()

    def record(self, run: str) -> list[dict]:
        """The workflow's status row, then one row per recorded step (function_id order). Outputs stay
        encoded as DBOS stored them; only whether there is one, and the error text, are shown."""
        status = self._rows("SELECT workflow_uuid, status, name, executor_id, recovery_attempts, "
                            "application_version, created_at, updated_at FROM workflow_status "
                            "WHERE workflow_uuid = ?", (run,))
        steps = self._rows("SELECT function_id, function_name, output IS NOT NULL AS has_output, error, "
                           "started_at_epoch_ms, completed_at_epoch_ms FROM operation_outputs "
                           "WHERE workflow_uuid = ? ORDER BY function_id", (run,))
        return [{"table": "workflow_status", **row} for row in status] + \
               [{"table": "operation_outputs", **row, "error": bool(row["error"])} for row in steps]

    def summary(self, record: list[dict]) -> str:
        wf = next((r for r in record if r.get("table") == "workflow_status"), None)
        if wf is None:
            return "DBOS has no workflow under this id (the worker never started it)"
        steps = [r for r in record if r.get("table") == "operation_outputs"]
        named = ", ".join(f"{s['function_name']}{' (error)' if s['error'] else ''}" for s in steps) or "none"
        starts = int(wf.get("recovery_attempts") or 0)
        return (f"DBOS workflow {wf['status']}, started {starts} time(s); steps recorded: {named}; "
                "an attempt cut by a kill or retried in the process has no row")

    def stop(self) -> None:
        """Nothing runs: the system database stays in the output folder as evidence."""


RUNTIME = Runtime(
    name="dbos",
    title="DBOS Transact (Python, SQLite system database)",
    extra="dbos",
    tested_version=VERSION,
    retry_owner_settings=("@DBOS.step(retries_allowed, max_attempts, interval_seconds, backoff_rate)",
                          "workflow recovery on launch (executor_id)", "@DBOS.workflow(max_recovery_attempts)"),
    start=DbosState,
)
