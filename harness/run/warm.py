"""A warm process server for Python adapters over the wire (``--adapter wire:module:Class``).

Starting a Python interpreter and importing an adapter costs about 0.15 s; a suite starts a
worker process more than a hundred times. The server imports the adapter once and *forks*
one fresh child per worker: the child speaks the wire protocol (crashlab.run.wire) on the pipes
the harness hands it, exactly like ``exec:python -m crashlab.run.wire module:Class``. The
one-process-per-worker rule holds: every worker is a new process forked from the pristine
server (which never runs adapter code), so a crash (SIGKILL to the child's process group)
still loses all of a worker's memory.

Control protocol, on a Unix socket pair: the harness sends ``spawn`` with three file
descriptors (the child's stdin, stdout, stderr) and gets the child's pid; ``status PID``
answers its exit status once it has exited (the server reaps its children).
"""
from __future__ import annotations

import array
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

_SERVERS: dict[tuple, "Server"] = {}
SERVER_TIMEOUT_S = 10.0


class Server:
    """One warm server per (adapter, memory limit) and per harness process. Under namespaces
    (crashlab.run.isolate) the server and every child it forks live in one set of namespaces of
    their own; the pids the server names are translated to this process's."""

    def __init__(self, spec: str, memory_mb: int) -> None:
        from . import isolate
        from .adapterspec import import_path, limit_child

        self.spec = spec
        self.tmp = isolate.private_tmp()   # the children's TMPDIR, emptied before each spawn
        self.isolated = isolate.current().mode == "namespaces"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [sys.executable, "-m", "crashlab.run.warm", spec, str(theirs.fileno()), str(memory_mb), self.tmp]
        cwd = os.getcwd()
        try:
            self.proc = subprocess.Popen(isolate.wrap(argv, writable=[self.tmp], cwd=cwd), cwd=cwd,
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         env={**os.environ, "TMPDIR": self.tmp, "PYTHONPATH": import_path()},
                                         start_new_session=True, preexec_fn=limit_child(0))
        except BaseException:
            isolate.remove_tmp(self.tmp)
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(SERVER_TIMEOUT_S)  # a server that stopped answering is dropped, not waited for
        self.sock = ours
        self.reader = ours.makefile("r", encoding="utf-8")
        self.keep = {self.proc.pid}        # the server's own processes, which outlive each run
        try:
            hello = self._read()           # the server's pid as it sees it, before it imports the adapter
            if self.isolated:
                from .reap import descendants, inner_pid
                self.keep |= {pid for pid in descendants(self.proc.pid) if inner_pid(pid) in (1, hello["pid"])}
        except (OSError, ValueError, KeyError, TypeError):
            self.broken = True

    def _read(self) -> dict:
        try:
            line = self.reader.readline()
            if not line:
                raise OSError("the warm adapter server exited")
        except OSError:
            self.broken = True
            raise
        return json.loads(line)

    def host_pid(self, pid: int) -> int:
        """The pid, in this process's terms, of the server's child ``pid`` (in the server's terms)."""
        if not self.isolated:
            return pid
        from .reap import host_pid
        found = host_pid(self.proc.pid, pid, self.keep)
        if found is None:
            raise OSError(f"the warm adapter server's child {pid} is not among its processes")
        return found

    def _ask(self, message: dict, fds: tuple[int, ...] = ()) -> dict:
        data = (json.dumps(message) + "\n").encode()
        try:
            if fds:
                self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                self.sock.sendall(data)
        except OSError:
            self.broken = True
            raise
        return self._read()

    def spawn(self, fds: tuple[int, int, int]) -> int:
        return self._ask({"op": "spawn"}, fds)["pid"]

    def status(self, pid: int) -> int | None:
        return self._ask({"op": "status", "pid": pid})["status"]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.sock.close()
        from .isolate import remove_tmp
        remove_tmp(self.tmp)


def server(spec: str, memory_mb: int) -> Server:
    key = (spec, memory_mb, os.getpid())  # a forked harness worker starts its own server
    found = _SERVERS.get(key)
    if found is not None and getattr(found, "broken", False):
        found.close()
        found = None
    if found is None or found.proc.poll() is not None:
        found = _SERVERS[key] = Server(spec, memory_mb)
    return found


@atexit.register
def close_servers() -> None:
    for key, srv in list(_SERVERS.items()):
        if key[2] == os.getpid():
            srv.close()
        _SERVERS.pop(key, None)


class WarmProcess:
    """What SubprocessChannel needs of a Popen, for a child forked by the warm server."""

    def __init__(self, spec: str, memory_mb: int) -> None:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            self.server = server(spec, memory_mb)
            self.inner = self.server.spawn((stdin_r, stdout_w, stderr_w))  # its pid as the server knows it
            self.pid = self.server.host_pid(self.inner)
        except OSError:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w, stderr_r, stderr_w):
                os.close(fd)
            raise
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        self.stdin = os.fdopen(stdin_w, "wb")
        self.stdout = os.fdopen(stdout_r, "rb")
        self.stderr = os.fdopen(stderr_r, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.server.status(self.inner)
            except OSError:
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"warm worker {self.pid}", timeout)
            time.sleep(0.002)
        return self.returncode


# --------------------------------------------------------------------------- the server process
def _child(spec: str, fds: list[int], control: socket.socket, memory_mb: int, parent: int) -> None:
    """In the forked child: become a worker process speaking the wire protocol on the fds."""
    os.setsid()
    from .jobs import die_with, guard_crashlab
    die_with(parent)
    guard_crashlab(parent, os.getpgid(parent))  # signalling the server that forked it kills the adapter
    control.close()
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if memory_mb > 0:
        try:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        except (ImportError, ValueError, OSError):
            pass
    from .wire import serve

    code = 1
    try:
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
        code = serve(spec, sys.stdin, sys.stdout)
    except BaseException:  # noqa: BLE001 - a worker process ends here, whatever happened
        code = 1
    finally:
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(code)


def _serve_forever(spec: str, control_fd: int, memory_mb: int, tmp: str = "") -> int:
    from .adapterspec import import_adapter
    from .reuse import empty_folder

    control = socket.socket(fileno=control_fd)
    control.sendall((json.dumps({"pid": os.getpid()}) + "\n").encode())  # before any adapter code runs
    import_adapter(spec)  # import the adapter once, before any fork
    server_pid = os.getpid()
    # and everything a child needs, so that no child imports anything (about 17 ms of CPU each) nor
    # builds its seccomp filter; then freeze what is loaded: the collector of a child never walks
    # (and so never copies) the server's objects
    from . import jobs, wire  # noqa: F401
    import gc
    import resource  # noqa: F401
    jobs.prepare_guard(server_pid, os.getpgid(server_pid))
    gc.freeze()
    exited: dict[int, int] = {}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exited[pid] = os.waitstatus_to_exitcode(status)

    while True:
        msg, fds, _, _ = control.recvmsg(4096, socket.CMSG_LEN(3 * array.array("i").itemsize))
        if not msg:
            return 0
        received: list[int] = []
        for level, kind, data in fds:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(data[:len(data) - (len(data) % arr.itemsize)])
                received.extend(arr)
        request: Any = json.loads(msg.decode())
        reap()
        if request["op"] == "spawn":
            if tmp:
                empty_folder(tmp)
            pid = os.fork()
            if pid == 0:
                _child(spec, received, control, memory_mb, server_pid)
            for fd in received:
                os.close(fd)
            reply = {"pid": pid}
        else:
            reply = {"status": exited.pop(request["pid"], None) if request["pid"] in exited else None}
        control.sendall((json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    sys.exit(_serve_forever(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5]))
