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
    """One warm server per (adapter, memory limit) and per harness process."""

    def __init__(self, spec: str, memory_mb: int) -> None:
        self.spec = spec
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        from .adapterspec import limit_child

        self.proc = subprocess.Popen([sys.executable, "-m", "crashlab.run.warm", spec, str(theirs.fileno()),
                                      str(memory_mb)],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=limit_child(0))
        theirs.close()
        ours.settimeout(SERVER_TIMEOUT_S)  # a server that stopped answering is dropped, not waited for
        self.sock = ours
        self.reader = ours.makefile("r", encoding="utf-8")

    def _ask(self, message: dict, fds: tuple[int, ...] = ()) -> dict:
        data = (json.dumps(message) + "\n").encode()
        try:
            if fds:
                self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                self.sock.sendall(data)
            line = self.reader.readline()
            if not line:
                raise OSError("the warm adapter server exited")
        except OSError:
            self.broken = True
            raise
        return json.loads(line)

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
            self.pid = self.server.spawn((stdin_r, stdout_w, stderr_w))
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
                self.returncode = self.server.status(self.pid)
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


def _serve_forever(spec: str, control_fd: int, memory_mb: int) -> int:
    from .adapterspec import import_adapter

    import_adapter(spec)  # import the adapter once, before any fork
    control = socket.socket(fileno=control_fd)
    server_pid = os.getpid()
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
    sys.exit(_serve_forever(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
