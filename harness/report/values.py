"""Packet and communication values in words: simulated times as clock times ("never" for an
expiry that never comes), durations, repeated observations collapsed
(``unavailable ×20, 10:04:00–10:14:00``), a JSON value on one line. The decision packet
(packet.py) and the generated communications (comms.py) both read them.
"""
from __future__ import annotations

import re
from typing import Any

from ..vocab.timefmt import format_time

#: An expiry at or beyond this many ms (about 146 million years) means "never".
NEVER_MS = 2 ** 62
TIME_FIELDS = re.compile(r"(^|_)(at|deadline|expires_at|until|since|wake_at|time)$")
DURATION_FIELDS = re.compile(r"_ms$")
SECRET_FIELDS = re.compile(r"secret|token|password|passwd|credential|api_?key|private", re.I)
OBSERVATION = re.compile(r"^(?P<what>.*?)\s+at\s+(?P<t>-?\d+)$")


def clock(t: Any, origin: int) -> str:
    """A simulated time as a clock time; "never" for an expiry that never comes."""
    if t is None:
        return "—"
    if isinstance(t, bool) or not isinstance(t, int):
        return str(t)
    if t >= NEVER_MS:
        return "never"
    return format_time(t, origin)


def duration(ms: Any) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int):
        return str(ms)
    if ms >= NEVER_MS:
        return "unbounded"
    if ms % 60_000 == 0 and ms:
        return f"{ms // 60_000} min"
    if ms >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms} ms"


def collapse(lines: list[Any], origin: int) -> list[str]:
    """Consecutive observations that differ only in their time become one line:
    ``lookup(key) -> unavailable ×27, 10:04:00.354–10:15:00.090``."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush():
        if not run:
            return
        what, first = run[0]
        if len(run) == 1:
            out.append(f"{what} at {clock(first, origin)}")
        else:
            out.append(f"{what} ×{len(run)}, {clock(first, origin)}–{clock(run[-1][1], origin)}")
        run.clear()

    for line in lines:
        m = OBSERVATION.match(line) if isinstance(line, str) else None
        if m is None:
            flush()
            out.append(line if isinstance(line, str) else _inline(line, origin))
            continue
        what = m["what"].rstrip(":")
        if run and run[0][0] != what:
            flush()
        run.append((what, int(m["t"])))
    flush()
    return out


def _inline(value: Any, origin: int, key: str = "") -> str:
    """A compact one-line rendering of a JSON value, times as clock times."""
    if isinstance(value, dict):
        return ", ".join(f"{field_name(k, v)}={_inline(v, origin, k)}" for k, v in value.items()
                         if not SECRET_FIELDS.search(str(k)) and v is not None)
    if isinstance(value, list):
        return "; ".join(_inline(v, origin) for v in value if v is not None)
    if value is None:
        return "none" if key in ("deadline", "time_remaining_ms") else "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and TIME_FIELDS.search(key):
        return clock(value, origin)
    if isinstance(value, int) and DURATION_FIELDS.search(key):
        return duration(value)
    return str(value)


def field_name(key: Any, value: Any) -> str:
    """A field's name beside its value: a ``_ms`` duration shown converted loses its unit."""
    key = str(key)
    if DURATION_FIELDS.search(key) and isinstance(value, int) and not isinstance(value, bool) and value >= 1000:
        return key[:-3]
    return key
