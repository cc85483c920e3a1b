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

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
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
        raise UsageError(f"{ENV}=namespaces, but {detail}",
                         hint="or use --isolation auto" if INSTALL_HINT in detail else
                         f"{INSTALL_HINT}, or use --isolation auto")
    return Isolation("process", detail)


OWN_ADAPTER = ("crashlab's own adapter, run in crashlab's worker processes as crashlab's own code; "
               "--isolation namespaces runs it in namespaces too")
PYTHON_OBJECT = ("a Python adapter handed over as an object runs in crashlab's worker processes; named as "
                 "module:attribute it runs in namespaces")


def own_module(module: str) -> bool:
    """Whether ``module`` is crashlab's own (the reference adapter, the gallery): code as trusted as
    the verdict process, which imports it anyway."""
    return module == "crashlab" or module.startswith("crashlab.")


def isolates_python(module: str) -> bool:
    """Whether a Python adapter named ``module:attribute`` runs in namespaces, as ``wire:`` does (a
    process of its own, its module imported only there), rather than in crashlab's worker processes,
    whose memory it would share (it could write its own trace there). ``namespaces``: every one;
    ``auto``: every one but crashlab's own, where namespaces work; ``process``: none."""
    want = requested()
    if want != "auto":
        return want == "namespaces"
    return not own_module(module) and current().mode == "namespaces"


def for_adapter(spec, *, in_process: bool = False) -> Isolation:
    """The isolation an adapter (drivers.AdapterSpec) runs under: what :func:`current` says for the
    processes of ``exec:`` and ``wire:`` and for Python adapters run as they are; a Python adapter
    left in crashlab's worker processes (crashlab's own under ``auto``, or one handed over as an
    object) says so, and with ``--in-process`` it ran in crashlab's own."""
    if in_process:
        return Isolation("process", "--in-process: the adapter ran inside crashlab's own process")
    found = current()
    if spec.kind == "python" and found.mode == "namespaces":
        return Isolation("process", OWN_ADAPTER if own_module(spec.text.partition(":")[0]) else PYTHON_OBJECT)
    return found


def refuse_in_process() -> None:
    """``--in-process`` with ``namespaces`` asked for: a usage error (crashlab's own process has none)."""
    if requested() == "namespaces":
        raise UsageError("--in-process runs the adapter inside crashlab's own process, which has no namespaces",
                         hint="drop --in-process, or use --isolation auto or process")


def from_json(value) -> Isolation | None:
    """The ``isolation`` field of a results JSON (None where it has none: written before it was recorded)."""
    if isinstance(value, dict) and isinstance(value.get("mode"), str):
        return Isolation(value["mode"], str(value.get("detail") or ""))
    return None


_ANNOUNCED: list[str] = []
_BASE: list[str] = []   # the folder holding the private temporary folders, and the pid that removes it


def prepare(stream=None) -> Isolation:
    """In crashlab's own process, before any adapter runs: the isolation in force, checked now (a
    usage error if ``namespaces`` was asked for and cannot be had); under ``auto`` without
    namespaces, one line on standard error says so and why (once per process); and
    :func:`keep_tmp`."""
    found = current()
    if found.mode == "process" and requested() == "auto" and not _ANNOUNCED:
        _ANNOUNCED.append(found.detail)
        print(f"crashlab: isolation: process only, no namespaces for adapter processes: {found.detail}",
              file=stream or sys.stderr)
    keep_tmp()
    return found


def keep_tmp() -> None:
    """In crashlab's own process (before its workers are forked): the folder the private temporary
    folders are made in from here on, removed when this process exits (a worker process, and the
    warm server it keeps, end without cleaning up)."""
    if not _BASE or not os.path.isdir(_BASE[0]):
        _remove_orphans()
        _BASE[:] = [tempfile.mkdtemp(prefix=f"crashlab-isolation-{os.getpid()}-"), str(os.getpid())]
        atexit.register(_remove_base)


def _remove_orphans() -> None:
    """Remove the folders of crashlab processes that are gone without removing theirs (kill -9)."""
    import glob

    for folder in glob.glob(os.path.join(tempfile.gettempdir(), "crashlab-isolation-*-*")):
        pid = os.path.basename(folder).split("-")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}") and os.stat(folder).st_uid == os.getuid():
            shutil.rmtree(folder, ignore_errors=True)


def _remove_base() -> None:
    if _BASE and _BASE[1] == str(os.getpid()):
        shutil.rmtree(_BASE[0], ignore_errors=True)
        _BASE.clear()


OPTION_HELP = ("how the processes of exec: and wire: adapters are isolated: auto (the default: namespaces "
               "where bubblewrap makes them, else process, said on standard error), namespaces (or exit 3 "
               "saying why not) or process; sets CRASHLAB_ISOLATION (docs/protocol.md, Trust boundary)")


def add_option(parser) -> None:
    """``--isolation {auto,namespaces,process}`` on a command that runs adapter code."""
    parser.add_argument("--isolation", choices=MODES, metavar="{auto,namespaces,process}", help=OPTION_HELP)


def choose(mode: str | None) -> None:
    """``--isolation MODE``: set ``CRASHLAB_ISOLATION`` for crashlab and every process it starts."""
    if mode:
        os.environ[ENV] = mode


def private_tmp() -> str:
    """A new private temporary folder for one untrusted process (its ``TMPDIR``, the one place it
    may write); the caller removes it with :func:`remove_tmp` when the process is gone."""
    base = _BASE[0] if _BASE and os.path.isdir(_BASE[0]) else None
    return tempfile.mkdtemp(prefix="crashlab-adapter-", dir=base)


def remove_tmp(folder: str | None) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


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


#: Run inside the namespaces by ``popen``: take the adapter's standard input and output from the
#: socket (fd in argv[1]) and become the adapter's command. bwrap's own processes then hold no copy
#: of those pipes, so an adapter that closes its standard output is seen to close it.
_RECEIVE = ("import array, os, socket, sys\n"
            "s = socket.socket(fileno=int(sys.argv[1]))\n"
            "_, anc, _, _ = s.recvmsg(1, socket.CMSG_LEN(2 * array.array('i').itemsize))\n"
            "fds = array.array('i'); fds.frombytes(anc[0][2][:2 * fds.itemsize]) if anc else None\n"
            "s.close()\n"
            "if len(fds) != 2: sys.exit('crashlab: the adapter process received no standard input and output')\n"
            "os.dup2(fds[0], 0); os.dup2(fds[1], 1); os.close(fds[0]); os.close(fds[1])\n"
            "os.execvp(sys.argv[2], sys.argv[2:])\n")


def popen(argv: Sequence[str], *, cwd: str, env: dict[str, str], writable: Iterable[str] = (),
          preexec_fn=None) -> subprocess.Popen:
    """``argv`` started under the isolation in force (its own session), with pipes for standard
    input, output and error as ``subprocess.Popen(..., stdin=PIPE, stdout=PIPE, stderr=PIPE)``
    gives them. In namespaces the standard input and output reach the command over a socket, past
    bwrap, which keeps every descriptor it is started with for as long as the command runs."""
    if current().mode != "namespaces":
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, env=env, start_new_session=True, preexec_fn=preexec_fn)
    import array
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        inner = [sys.executable, "-I", "-S", "-c", _RECEIVE, str(theirs.fileno()), *argv]
        proc = subprocess.Popen(wrap(inner, writable=writable, cwd=cwd), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(theirs.fileno(),),
                                cwd=cwd, env=env, start_new_session=True, preexec_fn=preexec_fn)
        ours.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [in_r, out_w]))])
    except BaseException:
        for fd in (in_w, out_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w):
            os.close(fd)
        ours.close()
        theirs.close()
    proc.stdin, proc.stdout = os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb")
    return proc
