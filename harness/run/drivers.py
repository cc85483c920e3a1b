"""Drivers: how an adapter's port calls reach the world.

A *channel* turns the adapter into a sequence of port calls: ``start()`` returns the first
call, ``send(result)`` / ``throw(error)`` answer the last one and return the next call, and
``kill()`` is process death. Two channels share one worker lifecycle:

* :class:`InProcessChannel` drives an ``async def run(ports)`` coroutine by hand
  (``coro.send``), without an asyncio loop or threads;
* :class:`SubprocessChannel` speaks newline-delimited JSON over stdin/stdout with a
  process per worker (docs/protocol.md); a crash is SIGKILL.

What crosses a port call, arguments one way and results the other, is copied and checked
by crashlab.world.boundary. A misbehaving adapter never crashes or hangs the harness: every way it
can misbehave becomes an :class:`AdapterFault`, which the worker lifecycle records on the trace.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import orjson

from . import affinity, isolate, reuse
from .adapterspec import import_adapter, limit_child as _limit_child, named_as
from ..world.boundary import MAX_LINE_BYTES, adapter_call, harness_error, harness_value
from .lines import AdapterFault, idle_status, parse_request, worker_pid  # noqa: F401 (AdapterFault is named here too)
from ..vocab.errors import Interrupted, UsageError, clip
from .jobs import STEP_CLOCK, step_started
from ..vocab.model import PortCall
from ..world.ports import PortError, Ports

DEFAULT_STEP_BUDGET = 5_000        # port calls per worker
DEFAULT_WALL_GUARD_S = 10.0        # in-process: longest a single resume may compute
DEFAULT_REPLY_TIMEOUT_S = 10.0     # subprocess: longest to wait for the next request (or to write a reply)
DEFAULT_MEMORY_MB = 4096           # subprocess address-space limit (RLIMIT_AS), where the platform has it
EXIT_WAIT_S = 2.0                  # subprocess: time to exit after run.finish or after closing stdout
_REUSE = b'{"type":"reuse"'        # a program that accepts reuse says so before its first request
_IDLE = b'{"type":"idle"'          # and, after each worker, that the worker exited


class Finished(Exception):
    """The adapter returned (in-process) or exited (subprocess)."""


# --------------------------------------------------------------------------- in-process
class _Overrun(BaseException):
    """Raised by SIGALRM inside an adapter that computes too long without awaiting a port."""


def _fire(signum, frame):
    if _Forks.computing:  # an alarm while the harness itself runs is left unanswered
        raise _Overrun()
    WallGuard.armed_until = 0.0


class WallGuard:
    """Interrupts a resume that computes for too long without awaiting a port.

    The SIGALRM handler is installed once per run (``with WallGuard.installed():``). A resume
    that starts with less than its guard left on the timer re-arms it for the guard and a tenth
    more (one system call per tenth of the guard, not two per resume), so a resume is interrupted
    between its guard and 1.1 times its guard after it started. An alarm outside a resume is
    ignored. Without signals (not the main thread) the port-call step budget still bounds loops
    that await ports."""

    active = False
    armed_until = 0.0   # time.monotonic() at which the armed timer fires

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
            cls.armed_until = 0.0


class _Forks:
    """Notices a fork made by an in-process adapter while it computes: the child exits at
    once (it must not run the simulation a second time) and the parent records the fault."""

    computing = False
    forked = False

    @classmethod
    def _child(cls) -> None:
        if cls.computing:
            os._exit(70)

    @classmethod
    def _parent(cls) -> None:
        if cls.computing:
            cls.forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Forks._child, after_in_parent=_Forks._parent)


_ACTIVE, _LIMBO = getattr(threading, "_active", None), getattr(threading, "_limbo", None)
if isinstance(_ACTIVE, dict) and isinstance(_LIMBO, dict):
    def _thread_count() -> int:
        """``threading.active_count()`` without its lock: this runs after every adapter step, on
        the thread that starts and stops adapters (a thread being started is already in ``_limbo``)."""
        return len(_ACTIVE) + len(_LIMBO)
else:                                   # another Python: the public call
    _thread_count = threading.active_count


class InProcessChannel:
    def __init__(self, factory: Callable[[], Any], services: list[str],
                 wall_guard_s: float = DEFAULT_WALL_GUARD_S) -> None:
        self.factory = factory
        self.services = services
        self.wall_guard_s = wall_guard_s
        self.coro = None
        self.threads = _thread_count()  # more after a step: the adapter started a thread

    def _step(self, fn, arg):
        guard = self.wall_guard_s
        try:
            if WallGuard.active and guard > 0:
                now, longest = time.monotonic(), guard + guard / 10
                if not guard <= WallGuard.armed_until - now <= longest:
                    signal.setitimer(signal.ITIMER_REAL, longest)
                    WallGuard.armed_until = now + longest
            _Forks.computing, _Forks.forked = True, False
            timed = STEP_CLOCK[0] is not None   # in a worker process: its watchdog times the step too
            if timed:
                step_started(time.monotonic())
            try:
                value = fn(arg)
            finally:
                _Forks.computing = False
                if timed:
                    step_started(0.0)
        except StopIteration:
            raise Finished() from None
        except _Overrun:
            self.kill()
            raise AdapterFault("step_timeout", f"adapter computed for more than {self.wall_guard_s:g} s "
                               "without awaiting a port (infinite loop?)") from None
        except Interrupted:
            raise
        except PortError as exc:
            raise AdapterFault("unhandled_port_error",
                               f"adapter let a port error escape: {exc.code}: {clip(str(exc.message))}") from None
        except BaseException as exc:  # noqa: BLE001 - the adapter's own bug, whatever it raised
            self.kill()
            kind = "exception" if isinstance(exc, Exception) else "base_exception"
            raise AdapterFault(kind, f"adapter raised {type(exc).__name__}: {clip(str(exc))}") from None
        if Interrupted.requested is not None:  # the adapter swallowed the user's interrupt
            self.kill()
            raise Interrupted(Interrupted.requested)
        if _Forks.forked:
            self.kill()
            raise AdapterFault("forked", "adapter forked a process (the child was stopped); adapters act "
                               "only through ports")
        if _thread_count() > self.threads:
            self.kill()
            raise AdapterFault("thread", "adapter started a thread; adapters act only through ports, "
                               "one step at a time (the thread is left behind until crashlab exits)")
        if not isinstance(value, PortCall):
            self.kill()
            raise AdapterFault("not_a_port", f"adapter awaited {type(value).__name__} {clip(repr(value), 80)}, "
                               "which is not a port call; adapters may await only ports")
        try:
            # The call crosses the boundary by value, as over the wire: later mutation of the
            # adapter's own objects cannot rewrite what it sent.
            return adapter_call(value)
        except (TypeError, RecursionError) as exc:
            self.kill()
            raise AdapterFault("not_json", f"{clip(str(value.port), 40)}.{clip(str(value.op), 40)}: arguments "
                               f"must be JSON values within the limits of docs/protocol.md: {exc}") from None

    def start(self) -> PortCall:
        try:
            adapter = self.factory()
            coro = adapter.run(Ports(self.services))
        except Interrupted:
            raise
        except BaseException as exc:  # noqa: BLE001 - the adapter's own code, whatever it raised
            raise AdapterFault("exception", f"adapter could not start: {type(exc).__name__}: "
                               f"{clip(str(exc))}") from None
        if not hasattr(coro, "send"):
            raise AdapterFault("not_a_coroutine", "adapter.run(ports) must be an async def method")
        self.coro = coro
        return self._step(coro.send, None)

    def send(self, value: Any) -> PortCall:
        # results cross by value too: the adapter never holds a reference into the stores
        return self._step(self.coro.send, harness_value(value))

    def throw(self, error: PortError) -> PortCall:
        return self._step(self.coro.throw, harness_error(error))

    def kill(self) -> None:
        if self.coro is not None:
            try:
                self.coro.close()
            except BaseException:  # noqa: BLE001 - a dying adapter may raise anything
                pass
            self.coro = None


# --------------------------------------------------------------------------- subprocess
_LIVE: "set[SubprocessChannel]" = set()


def kill_all_adapters() -> None:
    """Kill every adapter process group still running (on interrupt and at exit), idle ones too."""
    for channel in list(_LIVE):
        channel.kill()
    reuse.close_all()


atexit.register(kill_all_adapters)


def _findable(program: str, cwd: str) -> None:
    """OSError unless ``program`` is an executable (a path, from ``cwd``) or on PATH."""
    import shutil

    found = os.path.join(cwd, program) if os.sep in program else shutil.which(program)
    if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
        raise FileNotFoundError(f"no such program: {program!r}")


class SubprocessChannel:
    """One OS process (and process group) per worker, newline-delimited JSON on stdin/stdout.

    Every read and write is bounded: a request must arrive whole within the reply timeout and
    within MAX_LINE_BYTES, a reply must be taken within the reply timeout, and a request written
    before the previous reply was read is a protocol fault (``flood``), so no adapter can make
    the harness wait forever or buffer without bound."""

    def __init__(self, command: list[str], services: list[str], hello: dict,
                 reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S, cwd: str | None = None,
                 memory_mb: int = DEFAULT_MEMORY_MB, warm: str | None = None, scope: Any = None) -> None:
        self.command = command
        self.scope = scope  # the run this worker belongs to: a process that says it can be reused may be (crashlab.run.reuse)
        self.reusable = False
        self.worker: int | None = None   # a reused program's process of this worker, as the program names it
        self.warm = warm  # module:attribute served by a warm process server (crashlab.run.warm)
        self.services = services
        self.hello = hello
        self.reply_timeout_s = reply_timeout_s
        self.cwd = cwd
        self.memory_mb = memory_mb
        self.proc: subprocess.Popen | None = None
        self.last_id: Any = None
        self._buf = b""
        self.stderr_tail = b""
        self.run_deadline: float | None = None  # time.monotonic() at which the whole run's bound ends
        self.tmp: str | None = None  # the process's private temporary folder (its TMPDIR), removed by kill()
        self.pinned = False          # a wire: worker shares this thread's CPU while it lives (crashlab.run.affinity)

    def _deadline(self) -> tuple[float, bool]:
        """When the current read or write must be done, and whether the run's bound decides it."""
        call = time.monotonic() + self.reply_timeout_s
        if self.run_deadline is not None and self.run_deadline < call:
            return self.run_deadline, True
        return call, False

    def _run_over(self) -> AdapterFault:
        return self._fault("run_timeout", "the run reached its wall-clock bound (--run-timeout) waiting for the "
                           "adapter process")

    def _fault(self, kind: str, message: str) -> AdapterFault:
        self.kill()
        return AdapterFault(kind, message)

    def _write(self, message: dict) -> None:
        try:
            data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
        except (orjson.JSONEncodeError, TypeError):   # a lone surrogate, an integer beyond 64 bits
            data = (json.dumps(message, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd, out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        deadline, bound = self._deadline()
        try:   # the pipe has room for a reply almost always: write first, wait only when it has not
            data = data[os.write(fd, data):]
        except BlockingIOError:
            pass
        except OSError:
            raise self._died() from None
        while data:
            left = deadline - time.monotonic()
            if left <= 0:
                if bound:
                    raise self._run_over()
                raise self._fault("not_reading", f"adapter process did not read its reply for "
                                  f"{self.reply_timeout_s:g} s")
            _, writable, _ = select.select([], [fd], [], min(left, 0.5))
            if not writable:
                if select.select([out], [], [], 0)[0] and self._peek_stdout():
                    raise self._fault("flood", "adapter wrote another request before reading the reply to "
                                      "the last one; write one request, then read its reply")
                continue
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
            except OSError:
                raise self._died() from None

    def _died(self) -> AdapterFault:
        code = self.proc.poll()
        return self._fault("died", f"adapter process exited (status {code})" + self._stderr_note())

    def _peek_stdout(self) -> bool:
        """Read what the adapter wrote meanwhile into the buffer; True if it holds more than blanks."""
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        self._buf += chunk
        return bool(self._buf.strip())

    def _stderr_note(self) -> str:
        tail = self.stderr_tail.decode(errors="replace").strip().splitlines()[-1:] if self.stderr_tail else []
        return f"; last stderr line: {clip(tail[0], 200)}" if tail else ""

    def _drain_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        for _ in range(64):  # bounded: an adapter flooding stderr cannot hold the harness here
            if not select.select([fd], [], [], 0)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.stderr_tail = (self.stderr_tail + chunk)[-4096:]

    def _ended(self, code: int | None = None) -> PortCall:
        """Standard output closed: the process should be exiting (or a reused process said with what
        status its worker exited, ``code``)."""
        try:
            code = self.proc.wait(timeout=EXIT_WAIT_S) if code is None else code
        except subprocess.TimeoutExpired:
            raise self._fault("closed_stdout", "adapter process closed its standard output but kept running "
                              f"for {EXIT_WAIT_S:g} s; it was killed") from None
        self._drain_stderr()
        note = self._stderr_note()
        self.kill()  # the whole process group: children it left behind go too
        if code == 0:
            raise Finished()
        raise AdapterFault("died", f"adapter process exited with status {code} before finishing" + note)

    def _read(self) -> PortCall:
        return self._request(self._line())

    def _request(self, line: bytes) -> PortCall:
        if self.reusable and line.startswith(_IDLE):   # its worker exited, the process did not
            return self._ended(idle_status(line))
        try:
            self.last_id, call = parse_request(line)
        except AdapterFault:
            self.kill()
            raise
        return call

    def _line(self, deadline: tuple[float, bool] | None = None) -> bytes:
        fd, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        deadline, bound = deadline or self._deadline()
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_LINE_BYTES:
                raise self._fault("line_too_long", f"adapter wrote a line longer than {MAX_LINE_BYTES} bytes")
            left = deadline - time.monotonic()
            ready = select.select([fd, err], [], [], left)[0] if left > 0 else []
            if not ready:
                if bound:
                    raise self._run_over()
                raise self._fault("no_reply", f"adapter process sent no complete request for "
                                  f"{self.reply_timeout_s:g} s (hung?)")
            if err in ready:
                self._drain_stderr()
                if fd not in ready:
                    continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return self._ended()
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        if len(line) > MAX_LINE_BYTES:
            raise self._fault("line_too_long", f"adapter wrote a line longer than {MAX_LINE_BYTES} bytes")
        if line.startswith(_REUSE):   # a declaration, not a request: the first request may follow at once
            return line
        if self._buf.strip():
            raise self._fault("flood", "adapter wrote another request before reading the reply to the last "
                              "one; write one request, then read its reply")
        self._buf = b""
        return line

    def start(self) -> PortCall:
        offer = self.scope is not None and not self.warm   # a warm worker is forked fresh anyway
        cwd, mode = self.cwd or os.getcwd(), isolate.current().mode
        if offer:   # a process keeps the environment it started with
            self._key = (tuple(self.command), cwd, self.memory_mb, mode, frozenset(os.environ.items()))
        idle = reuse.take(self._key, self.scope) if offer else None
        try:
            if self.warm:
                from .warm import WarmProcess
                self.proc = WarmProcess(self.warm, self.memory_mb)
            elif idle is not None:
                self.proc, self.tmp, self.reusable = idle.proc, idle.tmp, True
            else:
                _findable(self.command[0], cwd)   # inside bwrap it would be bwrap's error, not this one
                self.tmp = isolate.private_tmp()
                scratch = {"CRASHLAB_SCRATCH": "/dev/shm"} if mode == "namespaces" else {}  # the sandbox's own
                self.proc = isolate.popen(self.command, writable=[self.tmp], cwd=cwd,
                                          env={**os.environ, "TMPDIR": self.tmp, **scratch},
                                          preexec_fn=_limit_child(self.memory_mb))
        except (OSError, subprocess.SubprocessError) as exc:
            isolate.remove_tmp(self.tmp)
            self.tmp = None
            raise AdapterFault("died", f"cannot start adapter command {self.command!r}: {exc}") from None
        _LIVE.add(self)
        self.pinned = bool(self.warm) and affinity.pin([self.proc.pid], self.proc.server.keep)
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._write({"type": "init", **self.hello, **({"reuse": True} if offer else {})})
        line = self._line()
        if offer and line.startswith(_REUSE):   # the program serves another worker after this one
            self.reusable, self.worker = True, worker_pid(line)
            line = self._line()
        return self._request(line)

    def send(self, value: Any) -> PortCall:
        self.send_only(value)
        return self._read()

    def send_only(self, value: Any) -> None:
        self._write({"type": "reply", "id": self.last_id, "ok": True, "value": value})

    def throw(self, error: PortError) -> PortCall:
        self._write({"type": "reply", "id": self.last_id, "ok": False, "error": error.to_json()})
        return self._read()

    def close_after_finish(self, value: Any = None) -> None:
        """The worker finished (``value``: run.finish's result): a process that is reused gets that
        reply and says its worker exited (then it goes to the pool); any other has its standard
        input closed and is killed once it exits."""
        if self.proc is not None and self.reusable:   # its worker exits; the process waits for another
            try:
                self.send_only(value)
            except AdapterFault:
                return
            return self._release(b'{"type":"idle","status":0}')
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=EXIT_WAIT_S)
            except (subprocess.TimeoutExpired, OSError):
                pass
            self.kill()

    def crash(self) -> None:
        """A crash at a port-call boundary: SIGKILL to the worker's whole process group. A program
        that is reused ran this worker in a process group of its own, which is killed; the program
        itself, which never ran the worker's code, goes back to the pool."""
        pid = self._host_pid(self.worker) if self.proc is not None and self.reusable else None
        if pid is None:
            return self.kill()
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            return self.kill()
        self._release(b'{"type":"idle","status":-9}')

    def _host_pid(self, pid: int | None) -> int | None:
        """The pid, in this process's terms, of the program's process ``pid`` (in the program's)."""
        if pid is None or isolate.current().mode != "namespaces":
            return pid
        from .reap import host_pid
        return host_pid(self.proc.pid, pid)

    def _release(self, expected: bytes) -> None:
        """The program says its worker exited as ``expected``: to the pool; anything else: killed."""
        try:
            line = self._line((time.monotonic() + EXIT_WAIT_S, False))
        except AdapterFault:       # it did not say so in time, or wrote more: killed
            return
        self._drain_stderr()
        if line != expected:
            return self.kill()
        self._gone()
        reuse.give(self._key, reuse.Idle(self.proc, self.tmp, self.scope))
        self.proc = self.tmp = None

    def _gone(self) -> None:
        _LIVE.discard(self)
        if self.pinned:
            self.pinned = False
            affinity.unpin()

    def kill(self) -> None:
        """SIGKILL to the whole process group, whatever state the process is in. What it wrote to
        standard error is kept (the last 4 KiB, ``stderr_tail``) for ``crashlab run`` to show."""
        self._gone()
        if self.proc is not None:
            try:
                self._drain_stderr()
            except (OSError, ValueError):
                pass
            worker = self._host_pid(self.worker) if self.reusable else None
            reuse.end(self.proc, self.tmp, {worker} if worker else set())
            self.proc = None
        else:
            isolate.remove_tmp(self.tmp)
        self.tmp = None


# --------------------------------------------------------------------------- adapter specs
@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """Parsed ``--adapter`` value: ``module:attribute``, ``exec:COMMAND`` or ``wire:module:attribute``."""

    text: str
    kind: str                       # python | exec | warm (wire: a Python adapter over the wire, forked warm)
    factory: Callable | None = None
    command: tuple[str, ...] = ()
    module: str = ""                # warm: the module:attribute the wire server runs

    @property
    def name(self) -> str:
        return self.text

    def channel(self, services: list[str], hello: dict, *, wall_guard_s: float = DEFAULT_WALL_GUARD_S,
                reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
                scope: Any = None):
        """The channel to one worker; ``scope`` (one object per simulation) lets an ``exec:`` worker
        take a process that served another simulation (crashlab.run.reuse), None a fresh one."""
        if self.kind == "python":
            return InProcessChannel(self.factory, services, wall_guard_s)
        return SubprocessChannel(list(self.command), services, hello, reply_timeout_s, memory_mb=memory_mb,
                                 warm=self.module if self.kind == "warm" else None, scope=scope)


DEFAULT_ADAPTER = "crashlab.reference_impl:ReferenceAdapter"


def load_adapter(spec: str | None, *, import_code: bool = True, in_process: bool = False) -> AdapterSpec:
    """Resolve an adapter SPEC; errors are one line naming what was not found. With
    ``import_code=False`` a Python adapter's module is not imported (the spec has no factory):
    crashlab's own process checks the spec's form, and its worker processes import it. A Python
    adapter that isolation puts in namespaces (:func:`isolate.isolates_python`) runs as ``wire:``
    does, under the name it was given, unless ``in_process`` (crashlab's own process: it is imported)."""
    spec = spec or DEFAULT_ADAPTER
    try:
        spec.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"--adapter {spec!r}: not valid UTF-8; name the adapter in UTF-8") from None
    if spec.startswith("integrate:"):   # a trace's name for an integration run's worker, never an adapter
        raise UsageError(f"--adapter {spec!r}: 'integrate:' names a real worker in an integration trace; a worker "
                         "process is judged with crashlab integrate --worker CMD (docs/integration.md)")
    if spec.startswith("wire:"):
        inner = named_as(spec, spec[5:], lambda: load_adapter(spec[5:], import_code=import_code))  # its form, now
        if inner.kind not in ("python", "warm") or inner.text.startswith("wire:"):
            raise UsageError(f"--adapter {spec!r}: wire: takes a Python adapter, module:attribute")
        return _over_the_wire(spec, spec[5:])
    if spec.startswith("exec:"):
        command = shlex.split(spec[5:])
        if not command:
            raise UsageError(f"--adapter {spec!r}: exec: needs a command, e.g. 'exec:python my_adapter.py'")
        return AdapterSpec(text=spec, kind="exec", command=tuple(command))
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--adapter {spec!r}: expected module:attribute (a Python adapter) "
                         "or exec:COMMAND (any language)")
    if not in_process and isolate.isolates_python(module_name):  # in namespaces: it runs as wire: does, under
        return _over_the_wire(spec, spec)     # its own name, and its module is imported only there (never in crashlab's)
    if not import_code:
        return AdapterSpec(text=spec, kind="python")
    return AdapterSpec(text=spec, kind="python", factory=import_adapter(spec))


def _over_the_wire(text: str, module: str) -> AdapterSpec:
    return AdapterSpec(text=text, kind="warm", command=(sys.executable, "-m", "crashlab.run.wire", module),
                       module=module)


def script_path(name: str) -> Path:
    return Path(__file__).parent / name
