"""Celery with Redis under ``crashlab integrate --runtime celery``.

crashlab starts Debian's ``redis-server`` once per invocation, on a free 127.0.0.1 port, with no
persistence (``--save ''``, ``--appendonly no``) and its working folder inside the output folder,
in crashlab's process group and dying with crashlab (PR_SET_PDEATHSIG): the worker faults never
reach it. ``CRASHLAB_RUNTIME`` (``{runtime}``) is its URL, ``redis://127.0.0.1:PORT``: a worker
uses database 0 as its broker and database 1 as its result backend, and the run's
``CRASHLAB_RUNTIME_ID`` as its task id and its queue's name, so a restarted worker consumes its own
run's task and no other.

The record of a run is Celery's own: the result backend's task meta (``celery-task-meta-ID``:
status, retries, result or traceback) and what the broker still holds for the run's queue
(messages waiting, messages delivered and not acknowledged). A delivery cut by a kill leaves no
trace in the backend: only the broker's unacknowledged set holds it, until it is restored.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import celery  # noqa: F401  (the extra: load() names it when missing)
import redis

from ..vocab.errors import UsageError
from ..run.jobs import die_with_parent
from . import Runtime

VERSION = "5.7.0"
START_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server on 127.0.0.1 for one ``crashlab integrate`` invocation."""

    def __init__(self, work: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise UsageError("runtime 'celery' needs Debian's redis-server, which is not installed",
                             hint="apt-get install redis-server (crashlab starts it itself, on 127.0.0.1)")
        self.work = Path(work).resolve()
        try:
            self.work.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"redis-server's folder cannot be made in {work}: {exc.strerror or exc}",
                             hint="give an --out folder crashlab can write") from None
        self.log = self.work / "redis.log"
        self.proc: subprocess.Popen | None = None
        for _ in range(3):                      # a free port can be taken between the probe and the bind
            self.port = _free_port()
            self.log.unlink(missing_ok=True)
            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                 "--save", "", "--appendonly", "no", "--dir", str(self.work), "--logfile", str(self.log),
                 "--daemonize", "no", "--databases", "4"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent, close_fds=True)
            try:
                ready = self._ready()
            except BaseException:             # Ctrl-C or SIGTERM while it starts: nothing is left running
                self._kill()
                raise
            if ready:
                break
            self._kill()
        else:
            raise UsageError(f"redis-server did not start on 127.0.0.1: {self._tail()}",
                             hint="check that Debian's redis-server runs (apt-get install redis-server); "
                                  f"its log is {self.log}")
        self.url = f"redis://127.0.0.1:{self.port}"
        self.env = {"CRASHLAB_RUNTIME": self.url, "CRASHLAB_RUNTIME_NAME": "celery"}
        self.client = redis.Redis(host="127.0.0.1", port=self.port, db=1, socket_timeout=5)
        self.broker = redis.Redis(host="127.0.0.1", port=self.port, db=0, socket_timeout=5)

    def _ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return True
            except OSError:
                time.sleep(0.02)
        return False

    def _tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()[-5:]
        except OSError:
            lines = []
        return " | ".join(lines) or "no output"

    def record(self, run: str) -> list[dict]:
        """The backend's task meta for the run's task, then the broker's view of the run's queue."""
        rows = []
        raw = self.client.get(f"celery-task-meta-{run}")
        if raw is not None:
            meta = json.loads(raw)
            rows.append({"table": "task_meta", "task_id": meta.get("task_id"), "status": meta.get("status"),
                         "retries": meta.get("retries"), "worker": meta.get("worker"), "name": meta.get("name"),
                         "date_done": meta.get("date_done"), "result": meta.get("result"),
                         "traceback": (meta.get("traceback") or "")[-300:] or None})
        unacked = 0
        for tag, body in (self.broker.hgetall("unacked") or {}).items():
            try:
                routing_key = json.loads(body)[2]          # kombu keeps [message, exchange, routing_key]
            except (ValueError, IndexError, TypeError):
                continue
            unacked += routing_key == run
        rows.append({"table": "broker", "queue": run, "waiting": self.broker.llen(run), "unacked": unacked})
        return rows

    def summary(self, record: list[dict]) -> str:
        meta = next((r for r in record if r.get("table") == "task_meta"), None)
        broker = next((r for r in record if r.get("table") == "broker"), {})
        held = f"; the broker still holds {broker.get('waiting', 0)} waiting, {broker.get('unacked', 0)} unacked"
        if meta is None:
            return "Celery's result backend has no meta for this task (it never ran to an outcome)" + held
        return (f"Celery task {meta['status']} after {meta.get('retries') or 0} retry(ies) by the task; "
                "a delivery cut by a kill is not in the backend" + held)

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def stop(self) -> None:
        """Stop redis-server (it saves nothing) and remove what it may have left in its folder."""
        for c in (getattr(self, "client", None), getattr(self, "broker", None)):
            if c is not None:
                c.close()
        self._kill()
        for name in ("dump.rdb", "appendonly.aof"):
            target = self.work / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)


RUNTIME = Runtime(
    name="celery",
    title="Celery with Redis (broker and result backend)",
    extra="celery",
    tested_version=VERSION,
    retry_owner_settings=("task autoretry_for / max_retries / self.retry", "task_acks_late",
                          "task_reject_on_worker_lost", "broker_transport_options.visibility_timeout",
                          "unacked_restore_interval", "unacked_restore_throttle"),
    start=RedisServer,
)
