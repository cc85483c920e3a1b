"""One CPU for crashlab and a ``wire:`` worker while the worker runs.

A worker over the wire and the harness never compute at the same time: the worker writes a
request and waits, the harness answers and waits. On two CPUs each hand-over is a wake-up of a
process on the other CPU, which costs far more than the work it hands over (a pipe round trip
measured at about 50 us of CPU across two CPUs, about 11 us on one; docs/exploration.md). So
while a ``wire:`` worker is alive, the harness's thread, the warm server that forks the worker
(crashlab.run.warm) and the worker share the CPU the harness was on; when the harness's last
such worker ends, its thread gets back every CPU it had. ``--jobs N`` workers each pin their own
pairs, each on its own slot's CPU, so they still use N CPUs.

Only ``wire:`` workers are pinned: crashlab forks them from its own server and they run one
thread of Python. A program started by ``exec:`` keeps every CPU (a runtime with threads of its
own would lose them). Pinning is a speed measure only: where the platform has no
``sched_setaffinity``, the harness may use a single CPU, or the call is refused, nothing is
pinned and nothing else changes.
"""
from __future__ import annotations

import os

_held = 0                      # live workers of this process that are pinned
_mask: set[int] | None = None  # the harness thread's CPUs before it was pinned
_slot: int | None = None       # in a job pool's worker process: its slot (crashlab.run.jobs)


def prefer(slot: int) -> None:
    """In the job pool's worker ``slot``: pin to that slot's own CPU rather than to the one the
    thread is on, so that two workers of one pool never pin to the same CPU."""
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


def pin(pids) -> bool:
    """Put this thread (if it is not pinned yet) and the processes ``pids`` on one CPU; True
    when they are (then :func:`unpin` must follow, once)."""
    global _held, _mask
    if not hasattr(os, "sched_setaffinity"):
        return False
    try:
        if _held == 0:
            allowed = os.sched_getaffinity(0)
            if len(allowed) < 2:
                return False
            cpus = sorted(allowed)
            os.sched_setaffinity(0, {cpus[_slot % len(cpus)] if _slot is not None else _cpu(allowed)})
            _mask = allowed
        one = os.sched_getaffinity(0)
    except OSError:
        return False
    for pid in pids:
        try:
            os.sched_setaffinity(pid, one)
        except OSError:       # it exited, or is not ours to pin: it runs where it runs
            pass
    _held += 1
    return True


def unpin() -> None:
    """One pinned worker ended; after the last, this thread gets back every CPU it had."""
    global _held, _mask
    _held = max(0, _held - 1)
    if _held == 0 and _mask is not None:
        try:
            os.sched_setaffinity(0, _mask)
        except OSError:
            pass
        _mask = None


def _forget() -> None:
    """In a process forked from a pinned harness: it holds no worker, and gets every CPU back."""
    global _held
    _held = min(_held, 1)
    unpin()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
