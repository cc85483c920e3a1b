"""Run an in-process Python adapter as a subprocess speaking the wire protocol.

    crashlab run t2-commit-before-record --adapter "exec:python -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"

The shim reads the ``init`` line, drives the adapter's ``run(ports)`` coroutine, writes one
request line per port call and resumes the coroutine with each reply (docs/protocol.md).
It is how the same adapter is checked through both drivers.
"""
from __future__ import annotations

import json
import sys

from ..world.boundary import adapter_call
from .adapterspec import import_adapter
from ..vocab.errors import UsageError, clip
from ..vocab.model import PortCall
from ..world.ports import PortError, Ports


def serve(spec: str, stdin=None, stdout=None) -> int:
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
            line = json.dumps({"id": request_id, "port": call.port, "op": call.op, "args": call.args},
                              sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            return fault("not_json", f"{clip(str(call.port), 40)}.{clip(str(call.op), 40)}: arguments must be "
                         f"JSON values within the limits of docs/protocol.md: {exc}")
        stdout.write(line + "\n")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return 0  # the harness closed stdin: the run is over for this worker
        reply = json.loads(line)
        if reply.get("ok"):
            message, is_error = reply.get("value"), False
        else:
            err = reply.get("error") or {}
            message = PortError(err.get("code", "unknown"), err.get("message", ""),
                                definite=err.get("definite"), details=err.get("details"))
            is_error = True


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m crashlab.run.wire module:attribute", file=sys.stderr)
        return 3
    return serve(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
