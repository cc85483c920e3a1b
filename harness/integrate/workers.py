"""An integration worker's processes: started under the isolation in force, stopped, resumed, killed,
and what escaped them found.

Each worker starts through :func:`crashlab.run.isolate.wrap` with the host's network (it must reach
the sandbox and its stores on 127.0.0.1) and, under ``namespaces`` isolation, every file read-only
but its run's store folder, a private temporary folder (``TMPDIR``) and what its runtime needs; every
process it starts then dies with it (its PID namespace). Under ``process`` isolation crashlab is the
child subreaper of what the worker starts: a process that leaves the worker's process group and
outlives its parent is re-parented to crashlab, which finds it there (and by the session token in
its environment, if it kept it) and kills it: the ``forked`` fault.

Kills and pauses reach the whole tree below the worker, not only its process group: under
namespaces the worker's processes are in a session of their own below bubblewrap's, and a process
may leave the group. A pause freezes the tree (``SIGSTOP``, listed again until no new process
appears) and a resume sends ``SIGCONT`` to the same tree.
"""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..run import isolate
from ..run.jobs import children, descendants, die_with_parent, freeze, kill_process_tree, reap


def wrapped() -> bool:
    """Whether workers start inside namespaces (bwrap) under the isolation in force."""
    return isolate.current().mode == "namespaces"


def start(argv: list[str], *, env: Mapping[str, str], log, writable: Iterable[str],
          own: Mapping[str, str] | None = None) -> subprocess.Popen:
    """The worker ``argv`` started under the isolation in force, in a session of its own, its output
    to ``log``, dying with crashlab (``PR_SET_PDEATHSIG``). ``own``: variables for the worker's process
    alone (a clock fault's LD_PRELOAD): under namespaces set inside bubblewrap, which keeps crashlab's.
    OSError if it cannot start."""
    inside = dict(own or {}) if wrapped() else {}
    command = isolate.wrap(argv, network=True, writable=[str(Path(w)) for w in writable], env=inside)
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env={**env, **({} if inside else dict(own or {}))},
                            start_new_session=True, preexec_fn=die_with_parent, close_fds=True)


def exit_code(proc: subprocess.Popen, in_namespaces: bool) -> int | None:
    """The worker's own exit code, negative for a signal as :mod:`subprocess` gives it: bubblewrap
    exits with 128 + N when the worker dies of signal N (a failpoint's SIGKILL included)."""
    code = proc.returncode
    if in_namespaces and code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


def _tree(pid: int) -> list[int]:
    return [pid] + descendants(pid)


def below(pids: Iterable[int]) -> set[int]:
    """The processes ``pids`` and every process below them."""
    return {p for pid in pids for p in _tree(pid)}


def _group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def pause(proc: subprocess.Popen) -> bool:
    """Stop the worker's process group and every process below it; False if it is already gone."""
    if proc.poll() is not None:
        return False
    _group(proc.pid, signal.SIGSTOP)
    return bool(freeze(lambda: (proc.pid,)))


def terminate(proc: subprocess.Popen, in_namespaces: bool) -> bool:
    """``SIGTERM`` to the worker (a deployment stopping it): its process group, or under namespaces every
    process below bubblewrap (bubblewrap itself would end the namespace, killing the worker at once);
    False if it is already gone."""
    if proc.poll() is not None:
        return False
    if not in_namespaces:
        _group(proc.pid, signal.SIGTERM)
        return True
    for pid in descendants(proc.pid):
        try:
            with open(f"/proc/{pid}/comm", "rb") as fh:
                if fh.read().strip() == b"bwrap":
                    continue
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    return True


def resume(pgid: int) -> bool:
    """``SIGCONT`` to a paused worker's group and every process below it; False if it is gone."""
    try:
        os.killpg(pgid, signal.SIGCONT)
    except OSError:
        return False
    for pid in descendants(pgid):
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    return True


def kill(proc: subprocess.Popen, wait_s: float = 5.0) -> None:
    """SIGKILL the worker's process group and every process below it, and wait for the worker."""
    _group(proc.pid, signal.SIGKILL)
    kill_process_tree(proc.pid)
    _group(proc.pid, signal.SIGKILL)       # what a member re-parented outside the tree left of the group
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass


def escaped(before: frozenset[int], live: Callable[[], set[int]]) -> list[int]:
    """crashlab's children that are not its own: re-parented here (it is their subreaper) from a
    worker's tree, outside crashlab's process group (a worker's processes can never join it: they
    are in sessions of their own), not a live worker (``live()``: their process groups) and not
    there before the supervisor started (a runtime's server)."""
    mine = os.getpgrp()
    out = []
    groups = live()
    for pid in children():
        if pid in before or _ended(pid):
            continue
        try:
            group = os.getpgid(pid)
        except OSError:
            continue
        if group != mine and group not in groups:
            out.append(pid)
    return out


def by_session(orphans: list[int], marker: str, groups: set[int], default: str | None) -> dict[str | None, list[int]]:
    """What escaped, by the worker slug in its ``CRASHLAB_SESSION`` (``marker`` is this supervisor's
    ``CRASHLAB_SESSION=TOKEN/``): the re-parented ``orphans`` (``default``'s when they cleared their
    environment), and every other process that carries the marker and is neither in a live worker's
    group nor below one (``groups``; under namespaces a worker's processes are in a session of their own)."""
    token = marker.encode()
    out: dict[str | None, list[int]] = {}
    for pid in orphans:
        out.setdefault(session(pid, token) or default, []).append(pid)
    skip = below(groups) | set(orphans) | {os.getpid()}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        slug = session(int(entry), token) if entry.isdigit() and int(entry) not in skip else None
        try:
            if slug is None or os.getpgid(int(entry)) in groups:
                continue          # a live worker's own process
        except OSError:
            continue
        out.setdefault(slug, []).append(int(entry))
    return out


def session(pid: int, token: bytes) -> str | None:
    """The worker slug after ``token`` in a process's environment, if it kept it."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return None
    at = env.find(token)
    return env[at + len(token):].split(b"\0", 1)[0].decode("utf-8", "replace") if at >= 0 else None


def _ended(pid: int) -> bool:
    """A child that has ended (a zombie, collected here): nothing of it runs any more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            if fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                return False
    except (OSError, IndexError):
        pass
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return True


def kill_escaped(pids: list[int], listing: Callable[[], list[int]]) -> None:
    """Kill the escaped ``pids`` and what is below them, and whatever else ``listing()`` names meanwhile
    (a re-forking escapee is re-parented here again and again)."""
    seen = set(pids)

    def roots() -> set[int]:
        seen.update(listing())
        return seen

    reap(roots)
