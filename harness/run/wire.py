"""Run an in-process Python adapter as a subprocess speaking the wire protocol.

    crashlab run t2-commit-before-record --adapter "exec:python -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"

The shim reads the ``init`` line, drives the adapter's ``run(ports)`` coroutine, writes one
request line per port call and resumes the coroutine with each reply (docs/protocol.md).
It is how the same adapter is checked through both drivers.

When crashlab offers to reuse the process (``"reuse": true`` in ``init``), the shim accepts and
serves one worker after another: it imports the adapter once and forks a fresh child for each
``init``, which runs that worker in a process group of its own (a crash kills that group) and
exits, so no worker sees another's memory; between workers it kills whatever a child left
running and empties the folders crashlab names in ``CRASHLAB_SCRATCH`` (docs/protocol.md,
"Reused processes").
"""
from __future__ import annotations

import json
import os
import sys

import orjson

from ..world.boundary import adapter_call
from .adapterspec import import_adapter
from ..vocab.errors import UsageError, clip
from ..vocab.model import PortCall
from ..world.ports import PortError, Ports


def serve(spec: str, stdin=None, stdout=None, init: dict | None = None) -> int:
    """Serve one worker: its ``init`` (read from ``stdin`` unless given), then its port calls."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def fault(kind: str, text: str) -> int:
        stdout.write(json.dumps({"type": "fault", "fault": kind, "message": text[:400]}) + "\n")
        stdout.flush()
        return 1

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or spec.startswith(("exec:", "wire:")):
        print("crashlab.run.wire: the adapter must be module:attribute", file=sys.stderr)
        return 3
    try:
        factory = import_adapter(spec)
    except UsageError as exc:
        print(f"crashlab.run.wire: {exc}", file=sys.stderr)
        return 3
    if init is None:
        init = json.loads(stdin.readline() or "{}")
    try:
        coro = factory().run(Ports(init.get("services", [])))
    except BaseException as exc:  # noqa: BLE001 - reported to the harness as an adapter fault
        return fault("exception", f"adapter could not start: {type(exc).__name__}: {exc}")
    request_id = 0
    message, is_error = None, False
    while True:
        try:
            call = coro.throw(message) if is_error else coro.send(message)
        except StopIteration:
            return 0
        except PortError as exc:
            return fault("unhandled_port_error",
                         f"adapter let a port error escape: {exc.code}: {exc.message}")
        except BaseException as exc:  # noqa: BLE001 - reported to the harness as an adapter fault
            kind = "exception" if isinstance(exc, Exception) else "base_exception"
            return fault(kind, f"adapter raised {type(exc).__name__}: {exc}")
        if not isinstance(call, PortCall):
            return fault("not_a_port", f"adapter awaited {type(call).__name__} {call!r:.80}, which is "
                         "not a port call; adapters may await only ports")
        request_id += 1
        try:
            call = adapter_call(call)  # the same shape and limits as in-process (crashlab.world.boundary)
            line = orjson.dumps({"id": request_id, "port": call.port, "op": call.op, "args": call.args}).decode()
        except (TypeError, ValueError, RecursionError) as exc:  # orjson's JSONEncodeError is a TypeError
            return fault("not_json", f"{clip(str(call.port), 40)}.{clip(str(call.op), 40)}: arguments must be "
                         f"JSON values within the limits of docs/protocol.md: {exc}")
        stdout.write(line + "\n")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return 0  # the harness closed stdin: the run is over for this worker
        reply = orjson.loads(line)
        if reply.get("ok"):
            message, is_error = reply.get("value"), False
        else:
            err = reply.get("error") or {}
            message = PortError(err.get("code", "unknown"), err.get("message", ""),
                                definite=err.get("definite"), details=err.get("details"))
            is_error = True


def serve_reused(spec: str, stdin=None, stdout=None) -> int:
    """Serve workers one after another while crashlab offers reuse, each in a fresh fork."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    try:
        import_adapter(spec)
    except UsageError:
        return serve(spec, stdin, stdout)      # which says what is wrong
    line = stdin.readline()
    init = json.loads(line or "{}")
    if not init.get("reuse") or not hasattr(os, "fork"):
        return serve(spec, stdin, stdout, init)
    import gc

    from .jobs import become_subreaper, die_with
    server = os.getpid()
    become_subreaper()    # what a child leaves running becomes this process's, to be killed below
    scratch = [p for p in os.environ.get("CRASHLAB_SCRATCH", "").split(os.pathsep) if p]
    gc.freeze()           # a child's collector never walks (and so never copies) what is loaded
    while True:
        if not init.get("reuse"):
            return serve(spec, stdin, stdout, init)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgid(0, 0)        # a crash kills this worker's group, not the process serving it
                die_with(server)
                stdout.write(orjson.dumps({"type": "reuse", "worker": os.getpid()}).decode() + "\n")
                stdout.flush()
                code = serve(spec, stdin, stdout, init)
            finally:
                try:
                    stdout.flush()
                finally:
                    os._exit(code)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        _clear(scratch)
        stdout.write(orjson.dumps({"type": "idle", "status": status}).decode() + "\n")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return 0
        init = json.loads(line)


def _clear(scratch: list[str]) -> None:
    """Between two workers: kill every process the last one left (this process is their reaper),
    and empty the scratch folders."""
    import signal

    from .reap import children
    from .reuse import empty_folder
    for _ in range(3):
        left = children(os.getpid())
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    for folder in scratch:
        empty_folder(folder)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m crashlab.run.wire module:attribute", file=sys.stderr)
        return 3
    return serve_reused(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
