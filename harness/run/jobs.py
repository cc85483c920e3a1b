"""Where adapter code runs: supervised worker processes, and the containment around them.

The process that decides a verdict, writes the results and sets the exit code never runs
adapter code (docs/protocol.md, "Trust boundary"). Adapter code runs in worker processes
forked from it: :class:`Pool` hands them work items by index, reads back what each returns as
JSON (never pickle: a worker's bytes are untrusted input), and yields the outcomes in the
items' order. A worker that dies mid-item (``os._exit``, a native crash, a signal), that sits
in one step beyond the step limit (a long C call, a blocked SIGALRM), that runs past the run
limit, or that is stopped, is that item's :class:`Lost` outcome; the worker is replaced and the
rest goes on.

Containment (Linux; elsewhere each piece degrades to nothing, and the pool still works):
crashlab becomes the *child subreaper* of everything it starts, so an adapter's ``setsid``
grandchild is re-parented to it rather than escaping; :func:`kill_tree` kills every
descendant before results are written, freezing them first (``SIGSTOP``, listed again until no new
one appears) so that a process that keeps re-forking cannot outrun it; every worker dies with crashlab (``PR_SET_PDEATHSIG``),
and a seccomp filter in each worker (inherited by the adapter processes it starts) kills the
process that tries to signal, trace or pidfd crashlab itself.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import select
import signal
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import orjson

from ..vocab.errors import Interrupted, UsageError, clip
from . import frames
from .frames import MAX_FRAME  # noqa: F401 (named here by tests)
from .reap import (REAP_LIMIT_S, _children, children, descendants, freeze, kill_process_tree,  # noqa: F401
                   kill_tree, reap, started)

# prctl options (linux/prctl.h)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP = 1, 4, 22
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
DEPTH = 2                   # items queued at a worker at once
STEP_GRACE_S = 2.0          # the parent kills a worker this long after the step limit passed
RUN_GRACE_S = 10.0          # ... and this long after the run limit passed
_INDEX = struct.Struct("!i")
_SLOT = struct.Struct("d")
_LINUX = sys.platform.startswith("linux")


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library, loaded once per process (a fork inherits it)."""
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, *args: int) -> bool:
    if not _LINUX:
        return False
    try:
        return _libc().prctl(ctypes.c_int(option), *(ctypes.c_ulong(a) for a in args)) == 0
    except (OSError, AttributeError):
        return False


# --------------------------------------------------------------------------- containment
def become_subreaper() -> bool:
    """Orphans among crashlab's descendants are re-parented to crashlab, where kill_tree finds them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def protect_self() -> None:
    """Processes of the same user cannot read or write this process's memory (/proc/PID/mem,
    ptrace) or open its file descriptors (/proc/PID/fd) unless they have CAP_SYS_PTRACE; a
    worker that runs a Python adapter in its own process re-enables it for itself (Pool._worker)."""
    _prctl(PR_SET_DUMPABLE, 0)


def die_with_parent() -> None:
    """In a child, before exec: SIGKILL when the thread that started it dies (crashlab's, or a server's)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with(parent: int) -> None:
    """In a child: SIGKILL when ``parent`` dies (kill -9 included); exit now if it already has."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(70)


def _reap(pid: int, timeout: float) -> int | None:
    """The wait status of a killed child, or None if it is not ours or did not go in time."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


# seccomp: kill the process that signals crashlab (x86_64 and aarch64 syscall numbers)
_AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {"x86_64": {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
                  "pidfd_open": 434, "pidfd_send_signal": 424, "ptrace": 101, "process_vm_writev": 311},
       "aarch64": {"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
                   "pidfd_open": 434, "pidfd_send_signal": 424, "ptrace": 117, "process_vm_writev": 271}}
_RET_KILL_PROCESS, _RET_ALLOW, _RET_EPERM = 0x80000000, 0x7FFF0000, 0x00050000 | errno.EPERM


def _filter(arch: str, crashlab: int, group: int) -> list[tuple[int, int, int, int]]:
    """A BPF program: the signalling calls aimed at ``crashlab`` (its pid, its process group, every
    process) kill the caller; ptrace, process_vm_writev and pidfd_send_signal are refused."""
    nr = _NR[arch]
    targets = {"kill": (crashlab, -group & 0xFFFFFFFF, 0xFFFFFFFF), "tkill": (crashlab,), "tgkill": (crashlab,),
               "rt_sigqueueinfo": (crashlab,), "rt_tgsigqueueinfo": (crashlab,), "pidfd_open": (crashlab,)}
    refused = ("ptrace", "process_vm_writev", "pidfd_send_signal")
    LD, JEQ, RET = 0x20, 0x15, 0x06
    prog: list[Any] = [(LD, 0, 0, 4), (JEQ, 1, 0, _AUDIT[arch]), ("ret", "allow"), (LD, 0, 0, 0)]
    for name in refused:
        prog += [(JEQ, 0, 1, nr[name]), ("ret", "eperm")]
    for name, values in targets.items():
        block = [(LD, 0, 0, 16)] + [("jeq_kill", v) for v in values] + [(LD, 0, 0, 0)]
        prog += [(JEQ, 0, len(block), nr[name])] + block
    prog += [("ret", "allow")]
    kill_at = len(prog)
    prog += [(RET, 0, 0, _RET_KILL_PROCESS)]
    out = []
    for i, ins in enumerate(prog):
        if ins[0] == "ret":
            out.append((RET, 0, 0, {"allow": _RET_ALLOW, "eperm": _RET_EPERM}[ins[1]]))
        elif ins[0] == "jeq_kill":
            out.append((JEQ, kill_at - i - 1, 0, ins[1]))
        else:
            out.append(ins)
    return out


def guard_crashlab(crashlab: int, group: int) -> bool:
    """In a worker: install the seccomp filter of :func:`_filter` (no new privileges first, as
    seccomp requires). False where the platform has no seccomp. A process that forks workers
    builds the filter once before its forks (:func:`seccomp_program`): a child only installs it."""
    arch = os.uname().machine if _LINUX else ""
    if arch not in _NR or sys.byteorder != "little":
        return False
    fprog = seccomp_program(arch, crashlab, group)
    if not _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        return False
    try:
        return _libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(2), ctypes.byref(fprog),
                             ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def prepare_guard(crashlab: int, group: int) -> None:
    """In a process that will fork workers: build their filter now, so that each fork only
    installs it (about 1 ms of CPU a worker otherwise)."""
    arch = os.uname().machine if _LINUX else ""
    if arch in _NR:
        _libc()
        seccomp_program(arch, crashlab, group)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


@functools.lru_cache(maxsize=4)
def seccomp_program(arch: str, crashlab: int, group: int) -> Any:
    """The filter of :func:`_filter` as the kernel takes it (a ``sock_fprog``; it keeps its
    instructions alive), built once per (arch, crashlab, group) in a process."""
    prog = _filter(arch, crashlab, group)
    instructions = (_SockFilter * len(prog))(*(_SockFilter(*ins) for ins in prog))
    fprog = _SockFprog(len(prog), instructions)
    fprog._keep = instructions
    return fprog


# --------------------------------------------------------------------------- the pool
@dataclass(frozen=True, slots=True)
class Lost:
    """What became of an item whose worker process did not return it."""

    kind: str        # an adapter fault kind: died, step_timeout, run_timeout, stopped, garbled, forged
    message: str


@dataclass(frozen=True, slots=True)
class Done:
    """An item's reply: the JSON header the function returned, and its raw payload bytes."""

    header: Any
    payload: bytes = b""
    error: str | None = None     # crashlab's own error in the worker (a bug), if any


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def death_message(status: int | None) -> str:
    if status is None:
        return "the worker process running it ended (status unknown)"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = {signal.SIGSEGV: "a native crash", signal.SIGBUS: "a native crash", signal.SIGABRT: "an abort",
               signal.SIGSYS: "a forbidden system call: signalling or tracing crashlab",
               signal.SIGKILL: "killed"}.get(sig, "a signal")
        return f"the worker process running it died of {_signal_name(sig)} ({why})"
    return f"the worker process running it exited with status {os.waitstatus_to_exitcode(status)} mid-run"


class _Worker:
    __slots__ = ("pid", "task_w", "result_r", "buf", "queue", "started", "slot", "ready", "seq")

    def __init__(self, pid: int, task_w: int, result_r: int, slot: int) -> None:
        self.pid, self.task_w, self.result_r, self.slot = pid, task_w, result_r, slot
        self.buf = bytearray()
        self.queue: deque[int] = deque()   # the items given to it, in order; the first is running
        self.started = 0.0                 # when the first began
        self.ready = False
        self.seq = 0                       # the sequence number its next reply must be signed with

    @property
    def current(self) -> int | None:
        return self.queue[0] if self.queue else None


#: The step clock of this worker process (a view of the pool's shared map); crashlab.run.drivers
#: writes the time a step of an in-process adapter starts, 0.0 when it returns.
STEP_CLOCK: list = [None]


def step_started(now: float) -> None:
    clock = STEP_CLOCK[0]
    if clock is not None:
        _SLOT.pack_into(clock, 0, now)


class Pool:
    """``jobs`` worker processes forked for one :meth:`map`, replaced when one dies.

    ``setup`` runs once in each worker before any item (import the adapter); a UsageError
    there is raised in the parent. ``fn(item)`` returns a JSON value, or ``(JSON value, bytes)``.
    ``step_limit_s``/``run_limit_s`` bound a step of an in-process adapter and a whole item.
    ``adapter_in_worker``: adapter code runs in the worker process itself (a Python adapter),
    rather than only in processes the worker starts (``exec:``, ``wire:``).

    Every reply is signed (crashlab.run.frames) with a key made for each :meth:`map` before the
    workers are forked; a reply whose MAC fails is that item's :class:`Lost` outcome ``forged``, and its
    worker is killed and replaced."""

    def __init__(self, jobs: int = 1, *, setup: Callable[[], None] | None = None,
                 step_limit_s: float | None = None, run_limit_s: float | None = None,
                 spare: Callable[[], set[int]] | None = None, adapter_in_worker: bool = True) -> None:
        self.jobs = max(1, jobs)
        self.adapter_in_worker = adapter_in_worker
        self._key = b""
        self.setup = setup
        self.step_limit_s, self.run_limit_s = step_limit_s, run_limit_s
        self.spare = spare  # in a worker: processes kept between items (a warm server)

    # ---------------------------------------------------------------- parent
    def map(self, fn: Callable[[Any], Any], items: list) -> Iterator[Done | Lost]:
        if not items:
            return
        before = frozenset(_children(os.getpid()))
        self._key = frames.new_key()   # before any worker is forked: each inherits it
        count = min(self.jobs, len(items))
        slots = mmap.mmap(-1, _SLOT.size * count)
        workers: dict[int, _Worker] = {}
        self._todo = todo = list(range(len(items) - 1, -1, -1))  # a stack: pop() gives the next index
        ready: dict[int, Done | Lost] = {}
        nxt = 0
        free_slots = list(range(count))
        try:
            for _ in range(count):
                self._spawn(fn, items, workers, slots, free_slots.pop())
            while nxt < len(items):
                while nxt in ready:
                    yield ready.pop(nxt)
                    nxt += 1
                if nxt >= len(items):
                    break
                for w in list(workers.values()):
                    self._top_up(w)
                fds = {w.result_r: w for w in workers.values()}
                readable = select.select(list(fds), [], [], 0.1)[0] if fds else []
                for fd in readable:
                    w = fds[fd]
                    try:
                        chunk = os.read(fd, 1 << 20)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        self._lost(w, workers, ready, free_slots, None)
                        continue
                    w.buf += chunk
                    self._frames(w, workers, ready, free_slots)
                self._watch(workers, ready, free_slots, slots)
                if todo or any(w.current is not None for w in workers.values()):
                    while len(workers) < count and free_slots and todo:
                        self._spawn(fn, items, workers, slots, free_slots.pop())
        finally:
            for w in list(workers.values()):
                self._stop(w, workers, free_slots)
            slots.close()
            kill_tree(only_new=before)  # what an adapter left behind, re-parented here (a subreaper)

    def _spawn(self, fn, items, workers, slots, slot: int) -> None:
        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        _bigger_pipe(result_w)
        parent = os.getpid()
        _SLOT.pack_into(slots, slot * _SLOT.size, 0.0)
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            code = 70
            try:
                others = [fd for w in workers.values() for fd in (w.task_w, w.result_r)]
                for fd in [task_w, result_r, *others]:
                    os.close(fd)
                from . import affinity
                affinity.prefer(slot)   # a wire: worker it starts shares this slot's CPU (crashlab.run.affinity)
                self._worker(fn, items, task_r, result_w, memoryview(slots)[slot * _SLOT.size:][:_SLOT.size],
                             parent)
                code = 0
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(result_w)
        workers[pid] = w = _Worker(pid, task_w, result_r, slot)
        w.started = time.monotonic()  # until it is ready: its set-up's start

    def _top_up(self, w: _Worker) -> None:
        """Keep DEPTH items queued at a ready worker: it starts the next while crashlab checks the last."""
        while w.ready and len(w.queue) < DEPTH and self._todo:
            index = self._todo.pop()
            if not w.queue:
                w.started = time.monotonic()
            w.queue.append(index)
            try:
                os.write(w.task_w, _INDEX.pack(index))
            except OSError:
                pass  # it died: its result pipe says so

    def _frames(self, w: _Worker, workers, ready, free_slots) -> None:
        while True:
            try:
                taken = frames.take(w.buf, self._key, w.seq, w.pid)
            except (frames.TooLarge, frames.Forged) as exc:
                kind = "forged" if isinstance(exc, frames.Forged) else "garbled"
                self._lost(w, workers, ready, free_slots, None, Lost(kind, str(exc)))
                return
            if taken is None:
                return
            head, payload = taken
            w.seq += 1
            try:
                msg = orjson.loads(head)
                index = msg["i"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                self._lost(w, workers, ready, free_slots, None,
                           Lost("garbled", "the worker process wrote something that is not a reply"))
                return
            if index == -1:  # set-up done
                if "usage" in msg:
                    raise UsageError(clip(str(msg["usage"]), 2000))
                w.ready = True
                self._top_up(w)
                continue
            if index != w.current:
                self._lost(w, workers, ready, free_slots, None,
                           Lost("garbled", "the worker process answered for another item"))
                return
            w.queue.popleft()
            w.started = time.monotonic()
            if "usage" in msg:
                raise UsageError(clip(str(msg["usage"]), 2000))
            ready[index] = Done(msg.get("value"), payload, msg.get("error"))
            self._top_up(w)

    def _watch(self, workers, ready, free_slots, slots) -> None:
        now = time.monotonic()
        for w in list(workers.values()):
            status = None
            try:
                pid, status = os.waitpid(w.pid, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                pid = 0
            if pid and os.WIFSTOPPED(status):
                if os.WSTOPSIG(status) == signal.SIGSTOP:
                    self._lost(w, workers, ready, free_slots, None,
                               Lost("stopped", "the worker process running it was stopped (SIGSTOP); an adapter "
                                    "may not stop or signal crashlab's processes"))
                continue
            if pid:  # exited: what it wrote before it died still counts (a reply may sit in the pipe)
                self._drain(w, workers, ready, free_slots)
                if w.pid in workers:
                    self._lost(w, workers, ready, free_slots, status)
                continue
            if not w.ready and self.run_limit_s and now - w.started > self.run_limit_s:
                self._lost(w, workers, ready, free_slots, None, Lost(
                    "run_timeout", f"importing the adapter in a worker process took more than {self.run_limit_s:g} s"))
            if w.current is None:
                continue
            step = _SLOT.unpack_from(slots, w.slot * _SLOT.size)[0]
            if self.step_limit_s and step and now - step > self.step_limit_s + STEP_GRACE_S:
                self._lost(w, workers, ready, free_slots, None, Lost(
                    "step_timeout", f"adapter computed for more than {self.step_limit_s:g} s without awaiting a "
                    "port and did not yield to the step timer (blocked SIGALRM or a long native call); its worker "
                    "process was killed"))
            elif self.run_limit_s and now - w.started > self.run_limit_s + RUN_GRACE_S:
                self._lost(w, workers, ready, free_slots, None, Lost(
                    "run_timeout", f"the run took more than its {self.run_limit_s:g} s wall-clock bound; its worker "
                    "process was killed"))

    def _drain(self, w: _Worker, workers, ready, free_slots) -> None:
        """Read what an exited worker left in its result pipe (without blocking: a process it forked
        may still hold the pipe open) and take the whole replies in it."""
        os.set_blocking(w.result_r, False)
        while True:
            try:
                chunk = os.read(w.result_r, 1 << 20)
            except OSError:   # EAGAIN: nothing more now; anything else: nothing more at all
                break
            if not chunk:
                break
            w.buf += chunk
        self._frames(w, workers, ready, free_slots)

    def _lost(self, w: _Worker, workers, ready, free_slots, status, lost: Lost | None = None) -> None:
        """The worker is gone (or must go): its item, if any, is lost; kill and reap it."""
        status = self._stop(w, workers, free_slots, status)
        if w.current is not None:
            ready[w.current] = lost or Lost("died", death_message(status))
            self._todo.extend(reversed(list(w.queue)[1:]))  # given but not begun: another worker runs them
        elif not w.ready:
            raise UsageError(lost.message if lost else
                             "the adapter's worker process ended while importing the adapter: "
                             + death_message(status).removeprefix("the worker process running it "))

    def _stop(self, w: _Worker, workers, free_slots, status=None) -> int | None:
        workers.pop(w.pid, None)
        free_slots.append(w.slot)
        for fd in (w.task_w, w.result_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if status is None or os.WIFSTOPPED(status):
            try:
                os.kill(w.pid, signal.SIGSTOP)  # it forks no more while what is below it goes first
            except (ProcessLookupError, PermissionError):
                pass
            reap(lambda: children(w.pid))
            try:
                os.kill(w.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            killed = _reap(w.pid, 5.0)
            status = status if status is not None and not os.WIFSTOPPED(status) else killed
            if w.current is not None and killed is not None and os.WIFSIGNALED(killed) \
                    and os.WTERMSIG(killed) != signal.SIGKILL:
                status = killed
        return status

    # ---------------------------------------------------------------- worker
    def _worker(self, fn, items, task_r: int, result_w: int, slot, parent: int) -> None:
        import gc

        die_with(parent)
        try:
            os.setpgid(0, 0)  # the terminal's Ctrl-C and Ctrl-Z go to crashlab, which stops its workers
        except OSError:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # Not dumpable (like crashlab's own process) when the worker runs no adapter code itself (exec:,
        # wire:): the adapter processes it starts cannot open its result pipe through /proc/PID/fd nor
        # read its reply key (ptrace access). Nothing of crashlab's needs a dumpable worker; one that runs
        # a Python adapter is dumpable for the adapter's author (a core file of a native crash in the
        # adapter, gdb or py-spy on a hung one), which protects nothing less: that adapter shares its memory.
        _prctl(PR_SET_DUMPABLE, 1 if self.adapter_in_worker else 0)
        become_subreaper()  # an adapter's orphans come here, and go with the item
        guard_crashlab(parent, os.getpgid(parent))
        STEP_CLOCK[0] = slot
        Interrupted.requested = None  # the user's interrupts are crashlab's to handle: it stops the workers
        try:
            import faulthandler
            faulthandler.disable()  # a native crash is the run's recorded fault, not a traceback on the terminal
        except (ImportError, RuntimeError):
            pass
        gc.freeze()  # inherited objects stay shared with the parent (a scan would copy their pages)
        cwd = os.getcwd()
        out = os.fdopen(result_w, "wb", buffering=0)
        signer = frames.Signer(out, self._key, os.getpid())

        def reply(msg: dict, payload: bytes = b"") -> None:
            signer.write(orjson.dumps(msg), payload)

        try:
            if self.setup is not None:
                self.setup()
            reply({"i": -1})
        except UsageError as exc:
            reply({"i": -1, "usage": str(exc)})
            return
        while True:
            data = _read_exact(task_r, _INDEX.size)
            if data is None:
                return
            index = _INDEX.unpack(data)[0]
            try:
                os.chdir(cwd)  # an adapter that moved it in an earlier item does not move this one
            except OSError:
                pass
            try:
                value = fn(items[index])
            except UsageError as exc:
                reply({"i": index, "usage": str(exc)})
                continue
            except Exception as exc:  # noqa: BLE001 - crashlab's own bug in this item: reported, not fatal
                reply({"i": index, "error": f"{type(exc).__name__}: {clip(str(exc), 1500)}"})
                continue
            payload = b""
            if isinstance(value, tuple):
                value, payload = value
            reply({"i": index, "value": value}, payload)
            kill_tree(spare=self.spare() if self.spare else frozenset())


def _read_exact(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = os.read(fd, size - len(data))
        except InterruptedError:
            continue
        if not chunk:
            return None
        data += chunk
    return data


def _bigger_pipe(fd: int) -> None:
    """A trace fits in the pipe, so a worker finishes writing while crashlab checks the last one."""
    if _LINUX:
        import fcntl
        try:
            fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
