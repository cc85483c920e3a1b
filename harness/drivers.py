"""Drivers: how an adapter's port calls reach the world.

A *channel* turns the adapter into a sequence of port calls: ``start()`` returns the first
call, ``send(result)`` / ``throw(error)`` answer the last one and return the next call, and
``kill()`` is process death. Two channels share one worker lifecycle:

* :class:`InProcessChannel` drives an ``async def run(ports)`` coroutine by hand
  (``coro.send``), without an asyncio loop or threads;
* :class:`SubprocessChannel` speaks newline-delimited JSON over stdin/stdout with a
  process per worker (docs/protocol.md); a crash is SIGKILL.

A misbehaving adapter never crashes or hangs the harness: every way it can misbehave
becomes an :class:`AdapterFault`, which the worker lifecycle records on the trace.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import UsageError
from .model import PortCall
from .ports import PortError, Ports

DEFAULT_STEP_BUDGET = 5_000        # port calls per worker
DEFAULT_WALL_GUARD_S = 10.0        # in-process: longest a single resume may compute
DEFAULT_REPLY_TIMEOUT_S = 10.0     # subprocess: longest to wait for the next request


class AdapterFault(Exception):
    """The adapter misbehaved; ``kind`` is a stable name recorded on the trace."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Finished(Exception):
    """The adapter returned (in-process) or exited (subprocess)."""


# --------------------------------------------------------------------------- in-process
class _Overrun(BaseException):
    """Raised by SIGALRM inside an adapter that computes too long without awaiting a port."""


def _fire(signum, frame):
    raise _Overrun()


class WallGuard:
    """Interrupts a resume that computes for too long without awaiting a port.

    The SIGALRM handler is installed once per run (``with WallGuard.installed():``); each
    resume only arms and disarms the timer. Without signals (not the main thread) the
    port-call step budget still bounds loops that await ports."""

    active = False

    @classmethod
    @contextlib.contextmanager
    def installed(cls):
        usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if not usable or cls.active:
            yield
            return
        old = signal.signal(signal.SIGALRM, _fire)
        cls.active = True
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            cls.active = False


_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts with string keys, lists, scalars). Tuples become
    lists and str/int subclasses (enums) plain values, exactly as a JSON round trip would
    make them; anything else raises TypeError."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    raise TypeError(f"object keys must be strings, got {type(key).__name__} {key!r:.40}")
                key = str(key)
            out[key] = json_copy(item)
        return out
    if kind is list or kind is tuple:
        return [json_copy(item) for item in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return json_copy(dict(value))
    raise TypeError(f"{type(value).__name__} {value!r:.40} is not a JSON value")


class InProcessChannel:
    def __init__(self, factory: Callable[[], Any], services: list[str],
                 wall_guard_s: float = DEFAULT_WALL_GUARD_S) -> None:
        self.factory = factory
        self.services = services
        self.wall_guard_s = wall_guard_s
        self.coro = None

    def _step(self, fn, arg):
        armed = WallGuard.active and self.wall_guard_s > 0
        try:
            if armed:
                signal.setitimer(signal.ITIMER_REAL, self.wall_guard_s)
            try:
                value = fn(arg)
            finally:
                if armed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except StopIteration:
            raise Finished() from None
        except _Overrun:
            self.kill()
            raise AdapterFault("step_timeout", f"adapter computed for more than {self.wall_guard_s:g} s "
                               "without awaiting a port (infinite loop?)") from None
        except PortError as exc:
            raise AdapterFault("unhandled_port_error",
                               f"adapter let a port error escape: {exc.code}: {exc.message}") from None
        except Exception as exc:  # the adapter's own bug
            raise AdapterFault("exception", f"adapter raised {type(exc).__name__}: {exc}") from None
        if not isinstance(value, PortCall):
            self.kill()
            raise AdapterFault("not_a_port", f"adapter awaited {type(value).__name__} {value!r:.80}, "
                               "which is not a port call; adapters may await only ports")
        try:
            # The call crosses the boundary by value, as over the wire: later mutation of the
            # adapter's own objects cannot rewrite what it sent.
            return PortCall(port=value.port, op=value.op, args=json_copy(value.args))
        except TypeError as exc:
            self.kill()
            raise AdapterFault("not_json", f"{value.port}.{value.op}: arguments must be JSON values: "
                               f"{exc}") from None

    def start(self) -> PortCall:
        try:
            adapter = self.factory()
            coro = adapter.run(Ports(self.services))
        except Exception as exc:
            raise AdapterFault("exception", f"adapter could not start: {type(exc).__name__}: {exc}") from None
        if not hasattr(coro, "send"):
            raise AdapterFault("not_a_coroutine", "adapter.run(ports) must be an async def method")
        self.coro = coro
        return self._step(coro.send, None)

    def send(self, value: Any) -> PortCall:
        # results cross by value too: the adapter never holds a reference into the stores
        return self._step(self.coro.send, json_copy(value))

    def throw(self, error: PortError) -> PortCall:
        return self._step(self.coro.throw, error)

    def kill(self) -> None:
        if self.coro is not None:
            try:
                self.coro.close()
            except BaseException:  # noqa: BLE001 - a dying adapter may raise anything
                pass
            self.coro = None


# --------------------------------------------------------------------------- subprocess
class SubprocessChannel:
    """One OS process per worker, newline-delimited JSON on stdin/stdout."""

    def __init__(self, command: list[str], services: list[str], hello: dict,
                 reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S, cwd: str | None = None) -> None:
        self.command = command
        self.services = services
        self.hello = hello
        self.reply_timeout_s = reply_timeout_s
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.last_id: Any = None
        self._buf = b""
        self.stderr_tail = b""

    def _write(self, message: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(message, sort_keys=True, separators=(",", ":")) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise AdapterFault("died", f"adapter process exited (status {self.proc.poll()})"
                               + self._stderr_note()) from None

    def _stderr_note(self) -> str:
        tail = self.stderr_tail.decode(errors="replace").strip().splitlines()[-1:] if self.stderr_tail else []
        return f"; last stderr line: {tail[0][:200]}" if tail else ""

    def _drain_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.stderr_tail = (self.stderr_tail + chunk)[-4096:]

    def _read(self) -> PortCall:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd, self.proc.stderr.fileno()], [], [], self.reply_timeout_s)
            if not ready:
                self.kill()
                raise AdapterFault("no_reply", f"adapter process sent nothing for "
                                   f"{self.reply_timeout_s:g} s (hung?)")
            if self.proc.stderr.fileno() in ready:
                self._drain_stderr()
                if fd not in ready:
                    continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self.proc.wait()
                self._drain_stderr()
                code = self.proc.returncode
                self.proc = None
                if code == 0:
                    raise Finished()
                raise AdapterFault("died", f"adapter process exited with status {code} before "
                                   "finishing" + self._stderr_note())
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.kill()
            raise AdapterFault("garbage", f"adapter wrote a line that is not JSON: {line[:120]!r}") from None
        if isinstance(msg, dict) and msg.get("type") == "fault":
            self.kill()
            raise AdapterFault(str(msg.get("fault") or "exception"),
                               str(msg.get("message") or "the adapter reported a fault"))
        if not isinstance(msg, dict) or not isinstance(msg.get("port"), str) \
                or not isinstance(msg.get("op"), str) or not isinstance(msg.get("args", {}), dict):
            self.kill()
            raise AdapterFault("garbage", "adapter message lacks port/op strings or args object: "
                               f"{line[:120]!r}")
        self.last_id = msg.get("id")
        return PortCall(port=msg["port"], op=msg["op"], args=msg.get("args", {}))

    def start(self) -> PortCall:
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=self.cwd, start_new_session=True)
        except OSError as exc:
            raise AdapterFault("died", f"cannot start adapter command {self.command!r}: {exc}") from None
        self._write({"type": "init", **self.hello})
        return self._read()

    def send(self, value: Any) -> PortCall:
        self._write({"type": "reply", "id": self.last_id, "ok": True, "value": value})
        return self._read()

    def throw(self, error: PortError) -> PortCall:
        self._write({"type": "reply", "id": self.last_id, "ok": False, "error": error.to_json()})
        return self._read()

    def close_after_finish(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (subprocess.TimeoutExpired, OSError):
                pass
            self.kill()

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc = None


# --------------------------------------------------------------------------- adapter specs
@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """Parsed ``--adapter`` value: ``module:attribute`` or ``exec:COMMAND``."""

    text: str
    kind: str                       # python | exec
    factory: Callable | None = None
    command: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.text

    def channel(self, services: list[str], hello: dict, *, wall_guard_s: float = DEFAULT_WALL_GUARD_S,
                reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S):
        if self.kind == "python":
            return InProcessChannel(self.factory, services, wall_guard_s)
        return SubprocessChannel(list(self.command), services, hello, reply_timeout_s)


DEFAULT_ADAPTER = "reference_impl:ReferenceAdapter"


def load_adapter(spec: str | None) -> AdapterSpec:
    """Resolve an adapter SPEC; errors are one line naming what was not found."""
    spec = spec or DEFAULT_ADAPTER
    if spec.startswith("exec:"):
        command = shlex.split(spec[5:])
        if not command:
            raise UsageError(f"--adapter {spec!r}: exec: needs a command, e.g. 'exec:python my_adapter.py'")
        return AdapterSpec(text=spec, kind="exec", command=tuple(command))
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--adapter {spec!r}: expected module:attribute (a Python adapter) "
                         "or exec:COMMAND (any language)")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"--adapter {spec!r}: no module named {module_name!r} "
                             "(is it installed or in the current directory?)") from None
        raise UsageError(f"--adapter {spec!r}: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - user code at import time
        raise UsageError(f"--adapter {spec!r}: importing {module_name!r} raised "
                         f"{type(exc).__name__}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UsageError(f"--adapter {spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if isinstance(target, type) or (callable(target) and not hasattr(target, "run")):
        factory = target
    else:
        factory = (lambda obj=target: obj)
    if isinstance(target, type) and not hasattr(target, "run"):
        raise UsageError(f"--adapter {spec!r}: {attr} has no run(ports) method")
    return AdapterSpec(text=spec, kind="python", factory=factory)


def script_path(name: str) -> Path:
    return Path(__file__).parent / name
