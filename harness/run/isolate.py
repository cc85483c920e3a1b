"""Namespaces for untrusted processes: the isolation crashlab gives the code it starts.

An ``exec:`` or ``wire:`` adapter, an integration worker and a learner's code run as processes
crashlab starts. Where Debian's ``bubblewrap`` (``bwrap``) can make namespaces, each such process
starts inside its own user, PID, mount, IPC and UTS namespaces (and its own empty network
namespace, unless it must reach the sandbox on 127.0.0.1): it cannot see or signal crashlab's
processes or open their pipes, every file is read-only but the folders crashlab hands it (its
private temporary folder, an integration worker's store), and every process it starts dies with it.
Where it cannot, the process runs as crashlab's own child (``process`` isolation), crashlab says so
once on standard error, and the results record which isolation the run had.

The choice is the ``CRASHLAB_ISOLATION`` environment variable, which the command line's
``--isolation`` sets and every worker inherits:

* ``auto`` (the default): namespaces where they work, else ``process``;
* ``namespaces``: namespaces or a usage error (exit 3) saying why they are unavailable;
* ``process``: never namespaces (debugging, or a machine where they misbehave).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..vocab.errors import UsageError

ENV = "CRASHLAB_ISOLATION"
MODES = ("auto", "namespaces", "process")
INSTALL_HINT = "install Debian's bubblewrap (apt-get install bubblewrap)"


@dataclass(frozen=True)
class Isolation:
    """What the processes crashlab starts for untrusted code run inside."""

    mode: str        # "namespaces" or "process"
    detail: str      # the tool and version, or why namespaces were not used

    def to_json(self) -> dict:
        return {"mode": self.mode, "detail": self.detail}

    def line(self) -> str:
        """The scorecard's line."""
        if self.mode == "namespaces":
            return f"isolation: namespaces ({self.detail})"
        return f"isolation: process only ({self.detail})"


def requested() -> str:
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise UsageError(f"{ENV}={value[:40]!r} is not one of {', '.join(MODES)}",
                         hint="unset it, or set it to auto, namespaces or process")
    return value


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    """Whether bwrap makes namespaces on this machine, and its version or the reason it does not."""
    if not sys.platform.startswith("linux"):
        return False, f"namespaces need Linux, this is {sys.platform}"
    tool = shutil.which("bwrap")
    if tool is None:
        return False, f"bwrap not found; {INSTALL_HINT}"
    try:
        done = subprocess.run([tool, *_base(network=False), "--", "true"], capture_output=True,
                              text=True, timeout=10, stdin=subprocess.DEVNULL)
        version = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bwrap could not start: {exc}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return False, f"bwrap cannot make namespaces here: {why[:200]}"
    return True, version or "bwrap"


def current() -> Isolation:
    """The isolation in force, from ``CRASHLAB_ISOLATION`` and what this machine can do."""
    want = requested()
    if want == "process":
        return Isolation("process", f"{ENV}=process")
    works, detail = _probe()
    if works:
        return Isolation("namespaces", detail)
    if want == "namespaces":
        raise UsageError(f"{ENV}=namespaces, but {detail}", hint=f"{INSTALL_HINT}, or use --isolation auto")
    return Isolation("process", detail)


def _base(*, network: bool) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm"]
    if network:
        args.insert(1, "--share-net")
    return args


def wrap(argv: Sequence[str], *, network: bool = False, writable: Iterable[str] = (),
         cwd: str | None = None, env: dict[str, str] | None = None) -> list[str]:
    """``argv`` as it runs under the isolation in force: unchanged for ``process`` isolation;
    otherwise inside bwrap, with every file read-only except the ``writable`` folders (which must
    exist), its own PID namespace, and no network but its own loopback unless ``network`` (the
    host's, to reach the sandbox and stores on 127.0.0.1). ``env`` entries are set inside."""
    if current().mode != "namespaces":
        return list(argv)
    args = ["bwrap", *_base(network=network)]
    for folder in writable:
        real = os.path.realpath(folder)
        args += ["--bind", real, real]
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    if cwd is not None:
        args += ["--chdir", os.path.realpath(cwd)]
    return args + ["--", *argv]
