"""One CPU for crashlab and a ``wire:`` worker while the worker runs.

A worker over the wire and the harness never compute at the same time: the worker writes a
request and waits, the harness answers and waits. On two CPUs each hand-over is a wake-up of a
process on the other CPU, which costs far more than the work it hands over (a pipe round trip
measured at about 50 us of CPU across two CPUs, about 11 us on one; docs/exploration.md). So
while a ``wire:`` worker is alive, the harness's thread, the warm server that forks the worker
(crashlab.run.warm) and the worker share the CPU the harness was on; when the harness's last
such worker ends, that thread and the server get back every CPU the thread had. The job pool's
worker processes (``--jobs N``) each pin to their own slot's CPU, so they still use N CPUs while
there are N; a pin belongs to one thread (another thread of the same process is not pinned).

Only ``wire:`` workers are pinned: crashlab forks them from its own server and they run one
thread of Python. A program started by ``exec:`` keeps every CPU (a runtime with threads of its
own would lose them). Pinning is a speed measure only: where the platform has no
``sched_setaffinity``, the harness may use a single CPU, or the call is refused, nothing is
pinned and nothing else changes.
"""
from __future__ import annotations

import os
import threading

_held = 0                      # live workers of this process that are pinned
_mask: set[int] | None = None  # the pinned thread's CPUs before it was pinned
_thread = 0                    # that thread (its native id, which sched_setaffinity takes)
_pinned: set[int] = set()      # the other processes pinned with it (the warm server's), given back too
_slot: int | None = None       # in a job pool's worker process: its slot (crashlab.run.jobs)


def prefer(slot: int) -> None:
    """In the job pool's worker ``slot``: pin to that slot's own CPU rather than to the one the
    thread is on, so that the pool's workers pin to different CPUs (while there are as many CPUs
    as workers)."""
    global _slot
    _slot = slot


def _cpu(allowed: set[int]) -> int:
    """The CPU this thread runs on now (one it is allowed), read from /proc/thread-self/stat."""
    try:
        with open("/proc/thread-self/stat", "rb") as stat:
            cpu = int(stat.read().rsplit(b")", 1)[1].split()[36])   # field 39, "processor"
    except (OSError, ValueError, IndexError):
        return min(allowed)
    return cpu if cpu in allowed else min(allowed)


def pin(pids, lasting=()) -> bool:
    """Put this thread (if it is not pinned yet) and the processes ``pids`` and ``lasting`` on
    one CPU; True when they are (then :func:`unpin` must follow, once). ``lasting`` processes
    (the warm server's) outlive the worker and get every CPU back with the thread. A pin belongs
    to one thread: while another thread of this process holds one, nothing is pinned (False)."""
    global _held, _mask, _thread
    if not hasattr(os, "sched_setaffinity"):
        return False
    me = threading.get_native_id()
    try:
        if _held == 0:
            allowed = os.sched_getaffinity(0)
            if len(allowed) < 2:
                return False
            cpus = sorted(allowed)
            os.sched_setaffinity(0, {cpus[_slot % len(cpus)] if _slot is not None else _cpu(allowed)})
            _mask, _thread = allowed, me
        elif _thread != me:
            return False
        one = os.sched_getaffinity(0)
    except OSError:
        return False
    for pid in (*pids, *lasting):
        try:
            os.sched_setaffinity(pid, one)
        except OSError:       # it exited, or is not ours to pin: it runs where it runs
            continue
        if pid in lasting:
            _pinned.add(pid)
    _held += 1
    return True


def unpin() -> None:
    """One pinned worker ended; after the last, the thread that pinned and the processes pinned
    with it get back every CPU that thread had (from whichever thread this is called)."""
    global _held, _mask
    _held = max(0, _held - 1)
    if _held == 0 and _mask is not None:
        for tid in (_thread, *_pinned):
            try:
                os.sched_setaffinity(tid, _mask)
            except OSError:   # a worker that exited
                pass
        _pinned.clear()
        _mask = None


def _forget() -> None:
    """In a process forked from a pinned harness: it holds no worker, and its one thread (the
    one that forked) gets every CPU back; the processes pinned are the parent's to give back."""
    global _held, _thread
    _pinned.clear()
    _held, _thread = min(_held, 1), threading.get_native_id()
    unpin()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
