"""A runtime's local server process, started and stopped by crashlab (never by a worker).

The process stays in crashlab's own process group (workers get their own groups, so a kill of a
worker never reaches it) and dies with crashlab (``PR_SET_PDEATHSIG``, as the supervisor's
workers do). Its ports are free loopback ports picked at start; its data lives in the work
folder crashlab gives it, removed at stop.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..vocab.errors import UsageError
from ..run.jobs import die_with_parent as _die_with_parent

START_TIMEOUT_S = 60.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (held open together while picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class LocalProcess:
    """One server process: spawned into ``work``, ready when ``probe()`` says so, stopped at ``stop()``."""

    def __init__(self, what: str, argv: list[str], work: Path, env: Mapping[str, str] | None = None,
                 files: Mapping[str, str] | None = None) -> None:
        self.what = what
        self.work = Path(work)
        if self.work.exists():
            shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        for name, text in (files or {}).items():        # its configuration, written before it starts
            (self.work / name).write_text(text)
        self.log = self.work / "server.log"
        with open(self.log, "wb") as log:
            try:
                self.proc: subprocess.Popen | None = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.work,
                    env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent, close_fds=True)
            except OSError as exc:
                raise UsageError(f"cannot start {what} ({argv[0]}): {exc.strerror or exc}") from None
        self.started = time.monotonic()
        self.ready_s: float | None = None

    def wait_ready(self, probe: Callable[[], bool], timeout_s: float = START_TIMEOUT_S) -> float:
        """Seconds until ``probe()`` first held; a UsageError with the log's tail if the server died or never did."""
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                self.stop(keep_log=True)
                raise UsageError(f"{self.what} exited while starting{self.tail()}")
            try:
                if probe():
                    self.ready_s = time.monotonic() - self.started
                    return self.ready_s
            except Exception:      # not up yet: a refused connection, a 503
                pass
            time.sleep(0.05)
        self.stop(keep_log=True)
        raise UsageError(f"{self.what} was not ready within {timeout_s:g} s{self.tail()}")

    def tail(self) -> str:
        try:
            text = self.log.read_bytes()[-400:].decode("utf-8", "replace").strip().replace("\n", " | ")
        except OSError:
            return ""
        return f"; its last output: {text}" if text else ""

    def stop(self, keep_log: bool = False) -> None:
        """SIGTERM, then SIGKILL after 5 s; the data folder is removed (unless ``keep_log``). Safe twice."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            except OSError:
                pass
        if not keep_log:
            shutil.rmtree(self.work, ignore_errors=True)
