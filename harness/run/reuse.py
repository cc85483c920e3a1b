"""Adapter processes kept between runs: the pool behind reused ``exec:`` workers.

A program that accepts crashlab's offer of reuse (``"reuse": true`` in ``init``, answered by a
``{"type": "reuse"}`` line; docs/protocol.md, "Reused processes") says when a worker has ended
with ``{"type": "idle", "status": N}`` instead of exiting, and then waits for the next ``init``.
crashlab's Python shim (crashlab.run.wire) serves each worker in a fresh fork, so that nothing of
one worker's memory reaches the next.

The pool holds such idle processes, per harness process (a forked harness worker has a pool of its
own) and per command (its words, folder, environment, memory limit and isolation). A process goes back to the
pool only after its worker finished: a crash, a fault, a timeout or anything unexpected kills it
(SIGKILL to its process group), so the next worker gets a fresh process. It never serves two
workers of one run: a worker woken after another of its run ended gets a process that has not
served that run (``scope``, one per run), as it would with a fresh process each time. Its
private temporary folder is emptied before it is handed out again.
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

from .isolate import remove_tmp

MAX_IDLE = 2     # idle processes kept per command; one more is killed


@dataclass(slots=True)
class Idle:
    proc: subprocess.Popen
    tmp: str | None
    scope: Any           # the run its last worker belonged to


_POOL: dict[tuple, list[Idle]] = {}


def take(key: tuple, scope: Any) -> Idle | None:
    """An idle process for ``key`` that has not served ``scope``, or None."""
    idle = _POOL.get((os.getpid(), *key))
    if not idle:
        return None
    for i, entry in enumerate(idle):
        if entry.scope is not scope and entry.proc.poll() is None:
            del idle[i]
            empty_folder(entry.tmp)
            return entry
    return None


def give(key: tuple, entry: Idle) -> None:
    """Keep ``entry`` for the next worker of another run (or kill it: the pool is full)."""
    idle = _POOL.setdefault((os.getpid(), *key), [])
    idle.append(entry)
    while len(idle) > MAX_IDLE:
        _kill(idle.pop(0))


def spare() -> set[int]:
    """The idle processes this process holds and everything below them (a bwrap's sandbox), which
    the cleanup after each item of a worker pool must leave alone (crashlab.run.jobs)."""
    from .reap import descendants

    out: set[int] = set()
    for key, idle in _POOL.items():
        if key[0] == os.getpid():
            for entry in idle:
                out.add(entry.proc.pid)
                out.update(descendants(entry.proc.pid))
    return out


def close_all() -> None:
    """Kill every idle process this process holds (at exit, and when a suite ends)."""
    for key in [k for k in _POOL if k[0] == os.getpid()]:
        for entry in _POOL.pop(key):
            _kill(entry)


def _kill(entry: Idle) -> None:
    end(entry.proc, entry.tmp)


def end(proc: subprocess.Popen, tmp: str | None, groups: set[int] = frozenset()) -> None:
    """SIGKILL to an adapter process's group (and to ``groups``), then its pipes closed and its
    temporary folder removed."""
    for group in {proc.pid, *groups}:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            stream.close()
        except OSError:
            pass
    remove_tmp(tmp)


def empty_folder(folder: str | None) -> None:
    """Remove what is in ``folder`` (what the last worker left in a folder of its own)."""
    if not folder:
        return
    import shutil

    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
