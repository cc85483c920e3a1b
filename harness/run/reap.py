"""Cleanup that holds: every process below crashlab (or below one process), killed so that none
survives by re-forking faster than the kills.

One pass of "list the tree, then kill each" loses to a process that forks in a loop: between the
listing and the kill it has forked again and exited, and its child, re-parented, is not in the list.
So each cleanup *freezes* first: it stops (``SIGSTOP``) every process it finds and lists again until
no new one appears (a stopped process cannot fork; a fork in progress when the stop arrives is
undone by the kernel), then kills them all, collects the direct children among them, and repeats
until a listing is empty, for at most :data:`REAP_LIMIT_S`; what survives is named on standard error.
Linux (/proc); elsewhere every listing is empty and nothing is done.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this one), parents before children (Linux /proc)."""
    out: list[int] = []
    todo = [pid or os.getpid()]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


REAP_LIMIT_S = 5.0          # how long a cleanup keeps freezing and killing before it reports survivors


#: after it killed something, how many more empty listings a cleanup wants before it ends (a child whose
#: parent has just exited is re-parented to crashlab in a moment in which neither lists it)
QUIET_LISTINGS = 3


def kill_tree(spare: frozenset[int] | set[int] = frozenset(), only_new: frozenset[int] | None = None,
              limit_s: float = REAP_LIMIT_S) -> int:
    """Kill every descendant of this process (not the ``spare`` pids themselves, but what is below
    them) so that none survives by forking faster than the kills (:func:`reap`); with ``only_new``,
    only children that are not in it (and their descendants). Returns how many were killed."""
    me = os.getpid()

    def below() -> list[int]:
        if only_new is None:
            found = descendants(me)
        else:
            found = []
            for child in _children(me):
                if child not in only_new:
                    found += [child] + descendants(child)
        return [pid for pid in found if pid not in spare]

    return reap(below, limit_s)


def kill_process_tree(pid: int, limit_s: float = REAP_LIMIT_S) -> int:
    """Kill ``pid`` and every process below it, as :func:`kill_tree` does below this process."""
    return reap(lambda: [pid] + descendants(pid), limit_s)


def freeze(listing: Callable[[], list[int]], deadline: float | None = None) -> list[int]:
    """SIGSTOP every process ``listing()`` names, and list again until no new one appears: a stopped
    process cannot fork, so the listing ends (or ``deadline`` passes). The stopped pids, in order."""
    stopped: list[int] = []
    seen: set[int] = set()
    while True:
        new = [pid for pid in listing() if pid not in seen and not _zombie(pid)]
        if not new:
            return stopped
        for pid in new:
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        if deadline is not None and time.monotonic() > deadline:
            return stopped


def reap(listing: Callable[[], list[int]], limit_s: float = REAP_LIMIT_S) -> int:
    """Freeze what ``listing()`` names (:func:`freeze`), SIGKILL all of it, reap the direct children
    among it, and repeat until a listing is empty: a process that keeps re-forking, or that was
    re-parented here mid-way, does not survive one pass of "list, then kill". Bounded by
    ``limit_s``; what is still alive then is named on standard error. Returns how many were killed."""
    deadline = time.monotonic() + limit_s
    killed: set[int] = set()
    quiet = 0
    while True:
        _reap_all({pid for pid in listing() if _zombie(pid)}, 0.0)   # orphans that ended on their own
        stopped = freeze(listing, deadline)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        _reap_all(killed, deadline)
        if time.monotonic() > deadline:
            break
        if not stopped:
            if not killed or quiet >= QUIET_LISTINGS:
                break
            quiet += 1          # a process in the middle of being re-parented here can miss one listing
            time.sleep(0.005)
        else:
            quiet = 0
    survivors = [pid for pid in listing() if not _zombie(pid)]
    if survivors:
        print(f"crashlab: {len(survivors)} process(es) it started survived {limit_s:g} s of cleanup "
              f"(pid {', '.join(map(str, survivors[:10]))})", file=sys.stderr)
    return len(killed)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie not yet reaped, or gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _reap_all(pids: set[int], deadline: float) -> None:
    """Collect the exit status of the killed ``pids`` that are this process's children (others are
    their own parents' to collect), waiting for them until ``deadline``."""
    mine = set(_children(os.getpid())) & pids
    while mine:
        for pid in list(mine):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                mine.discard(pid)
        if not mine or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def started(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None if it is gone: with the pid, it names one
    process, even after the system reuses the pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def children(pid: int | None = None) -> list[int]:
    """The direct children of ``pid`` (default: this process), from /proc (Linux; elsewhere none)."""
    return _children(pid or os.getpid())


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                    out += [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return out
