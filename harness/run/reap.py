"""Cleanup that holds: every process below crashlab (or below one process), killed so that none
survives by re-forking faster than the kills.

One pass of "list the tree, then kill each" loses to a process that forks in a loop: between the
listing and the kill it has forked again and exited, and its child, re-parented, is not in the list.
Reading the whole tree first and stopping what it names afterwards loses too, once the tree is big
enough (sleepers, or the zombies of earlier generations under a stopped subreaper) that reading it
takes longer than one generation lives. So each cleanup *freezes as it walks*: from a set of roots,
every process is stopped (``SIGSTOP``) the moment its parent's ``children`` file names it, newest
first (the re-parented newcomer is the last in its new parent's list), and only then are its own
children read (a stopped process cannot fork; a fork in progress when the stop arrives is undone by
the kernel, or its child is in the parent's list on the next walk). Ended processes are not walked
again. It walks until a walk stops nothing new, kills all it stopped, collects the direct children
among them, and repeats until a walk is empty, for at most :data:`REAP_LIMIT_S`; what survives is
named on standard error. Linux (/proc); elsewhere every walk is empty and nothing is done.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, Iterable

#: what a cleanup starts from: the processes (with everything below them) it is to kill
Roots = Callable[[], Iterable[int]]


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this one), parents before children (Linux /proc)."""
    out: list[int] = []
    todo = [pid or os.getpid()]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def inner_pid(pid: int) -> int | None:
    """A process's pid in its innermost PID namespace (Linux: the last field of ``NSpid``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_pid(root: int, pid: int, skip=frozenset()) -> int | None:
    """The pid, in this process's terms, of the process below ``root`` that its PID namespace
    calls ``pid`` (a sandbox's process; not one of ``skip``), or None."""
    return next((found for found in descendants(root) if found not in skip and inner_pid(found) == pid), None)


REAP_LIMIT_S = 5.0          # how long a cleanup keeps freezing and killing before it reports survivors


#: after it killed something, how many more empty walks a cleanup wants before it ends (a child whose
#: parent has just exited is re-parented to its subreaper in a moment in which neither lists it)
QUIET_LISTINGS = 3


def kill_tree(spare: frozenset[int] | set[int] = frozenset(), only_new: frozenset[int] | None = None,
              limit_s: float = REAP_LIMIT_S) -> int:
    """Kill every descendant of this process (not the ``spare`` pids themselves, but what is below
    them) so that none survives by forking faster than the kills (:func:`reap`); with ``only_new``,
    only children that are not in it (and their descendants). Returns how many were killed."""
    me = os.getpid()

    def roots() -> list[int]:
        return [pid for pid in _children(me) if only_new is None or pid not in only_new]

    return reap(roots, limit_s, spare)


def kill_process_tree(pid: int, limit_s: float = REAP_LIMIT_S) -> int:
    """Kill ``pid`` and every process below it, as :func:`kill_tree` does below this process."""
    return reap(lambda: (pid,), limit_s)


class _Walk:
    """The state of one cleanup's walks: what it has stopped and what has ended (not walked again)."""

    def __init__(self, spare: frozenset[int] | set[int] = frozenset()):
        self.spare = spare
        self.seen: set[int] = set()
        self.ended: set[int] = set()

    def stop_new(self, roots: Roots) -> list[int]:
        """One walk from ``roots()``: stop each process not seen before as soon as it is named, then
        read its children. The processes it stopped (running or stopped, not ended), in order."""
        stopped: list[int] = []
        todo = list(roots())                        # popped newest first, as below
        while todo:
            pid = todo.pop()
            if pid in self.ended:
                continue
            if pid not in self.seen and pid not in self.spare:
                self.seen.add(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)      # first, then look: an ended process takes it harmlessly
                except (ProcessLookupError, PermissionError):
                    self.ended.add(pid)
                    continue
                if _zombie(pid):
                    self.ended.add(pid)
                    continue
                stopped.append(pid)
            todo += _children(pid)                    # popped newest first
        return stopped


def freeze(roots: Roots, deadline: float | None = None, walk: _Walk | None = None) -> list[int]:
    """SIGSTOP every process in the trees of ``roots()`` (the roots included), each as soon as it is
    named, and walk again until a walk stops no new one: a stopped process cannot fork, so the walks
    end (or ``deadline`` passes). The stopped pids, in order."""
    walk = walk or _Walk()
    stopped: list[int] = []
    while True:
        new = walk.stop_new(roots)
        stopped += new
        if not new or (deadline is not None and time.monotonic() > deadline):
            return stopped


def reap(roots: Roots, limit_s: float = REAP_LIMIT_S, spare: frozenset[int] | set[int] = frozenset()) -> int:
    """Freeze the trees of ``roots()`` (:func:`freeze`; the ``spare`` pids are walked through but
    neither stopped nor killed), SIGKILL all of it, reap the direct children among it, and repeat
    until a walk is empty: a process that keeps re-forking, or that was re-parented here mid-way,
    does not survive. Bounded by ``limit_s``; what is still alive then is named on standard error.
    Returns how many were killed."""
    deadline = time.monotonic() + limit_s
    killed: set[int] = set()
    quiet = 0
    while True:
        walk = _Walk(spare)
        stopped = freeze(roots, deadline, walk)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        _reap_all(killed | walk.ended, deadline)       # and orphans that ended on their own
        if time.monotonic() > deadline:
            break
        if not stopped:
            if not killed or quiet >= QUIET_LISTINGS:
                break
            quiet += 1          # a process in the middle of being re-parented can miss one walk
            time.sleep(0.005)
        else:
            quiet = 0
    survivors = [pid for root in roots() for pid in [root, *descendants(root)]
                 if pid not in spare and pid not in killed and not _zombie(pid)]
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
