"""Request lines: what a subprocess adapter writes, read by the harness (docs/protocol.md).

:func:`parse_request` reads one line as a port call, or names what is wrong with it as an
:class:`AdapterFault`; :func:`worker_pid` and :func:`idle_status` read the lines with which a reused program names
the process of a worker it starts and says how that worker exited.
"""
from __future__ import annotations

import json
from typing import Any

import orjson

from ..vocab.errors import clip
from ..vocab.model import PortCall
from ..world.boundary import MAX_DEPTH, json_copy, request_value


class AdapterFault(Exception):
    """The adapter misbehaved; ``kind`` is a stable name recorded on the trace."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (only finite numbers are)")


def parse_request(line: bytes) -> tuple[Any, PortCall]:
    """One request line from a subprocess adapter: ``(id, PortCall)``, or AdapterFault naming
    what is wrong (not JSON, not a request, beyond a limit of docs/protocol.md)."""
    msg = request_value(line)   # the common case: plain JSON within the limits, read once by orjson
    if msg is None:
        msg = _exact_request(line)
    if isinstance(msg, dict) and msg.get("type") == "fault":
        raise AdapterFault(clip(str(msg.get("fault") or "exception"), 40),
                           clip(str(msg.get("message") or "the adapter reported a fault"), 400))
    if not isinstance(msg, dict) or not isinstance(msg.get("port"), str) \
            or not isinstance(msg.get("op"), str) or not isinstance(msg.get("args", {}), dict) \
            or not isinstance(msg.get("id"), (str, int, type(None))) or isinstance(msg.get("id"), bool):
        raise AdapterFault("garbage", "adapter message lacks port/op strings, an args object or a string or "
                           f"integer id: {clip(repr(line[:120]), 140)}")
    return msg.get("id"), PortCall(port=msg["port"], op=msg["op"], args=msg.get("args", {}))


def _exact_request(line: bytes) -> Any:
    """A request line read by the exact, slower path, which names what is beyond a limit."""
    try:
        msg = json.loads(line, parse_constant=_refuse_constant)
    except RecursionError:
        raise AdapterFault("not_json", f"adapter wrote a line nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, huge integers, NaN, bad UTF-8
        raise AdapterFault("garbage", f"adapter wrote a line that is not JSON ({clip(str(exc), 80)}): "
                           f"{clip(repr(line[:120]), 140)}") from None
    try:
        return json_copy(msg)
    except (TypeError, RecursionError) as exc:
        raise AdapterFault("not_json", f"adapter wrote a value beyond the protocol's limits: {exc}") from None


def worker_pid(line: bytes) -> int | None:
    """The worker's process a reused program names in ``{"type": "reuse", "worker": PID}``."""
    try:
        pid = orjson.loads(line).get("worker")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return pid if type(pid) is int and pid > 1 else None


def idle_status(line: bytes) -> int:
    """The exit status a reused process reports for its worker (``{"type": "idle", "status": N}``)."""
    try:
        status = orjson.loads(line).get("status")
    except (orjson.JSONDecodeError, AttributeError):
        return 1
    return status if type(status) is int else 1
