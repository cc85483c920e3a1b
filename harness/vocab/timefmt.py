"""The scenario clock's notation: clock times ("10:02", "10:02:30.250"), durations ("90s", "1m30s",
"7d") and points on a scenario's clock, parsed to milliseconds and written back the same way.

Scenario files, reports and the workshop all speak it; it depends on nothing else in crashlab.
"""
from __future__ import annotations

import re
from typing import Any

#: A clock time: hours, minutes, and optional seconds and milliseconds (the JSON Schema reuses it).
CLOCK_PATTERN = r"^(\d{1,2}):([0-5]\d)(?::([0-5]\d)(?:\.(\d{1,3}))?)?$"
_CLOCK = re.compile(CLOCK_PATTERN)
_DUR = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")
_DUR_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
CLOCK_HINT = "write a clock time like '10:02', '10:02:30' or '10:02:30.250'"
DURATION_HINT = "write milliseconds (1500) or a duration like '1500ms', '90s', '2m', '1m30s', '24h', '7d'"


def clock_ms(text: str) -> int | None:
    """``"10:02"`` / ``"10:02:30"`` / ``"10:02:30.250"`` -> milliseconds since midnight."""
    m = _CLOCK.match(text)
    if not m:
        return None
    h, mi, s = int(m[1]), int(m[2]), int(m[3] or 0)
    ms = int((m[4] or "0").ljust(3, "0"))
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


def parse_duration(value: Any) -> int:
    """``1500`` / ``"1500ms"`` / ``"90s"`` / ``"2m"`` / ``"1m30s"`` / ``"24h"`` / ``"7d"`` -> ms."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"a duration cannot be negative ({value}); {DURATION_HINT}")
        return value
    if isinstance(value, str):
        text = value
        if text.isdigit():
            return int(text)
        if _DUR.match(text):
            return int(round(sum(float(n) * _UNITS[u] for n, u in _DUR_PART.findall(text))))
    raise ValueError(f"expected a duration, got {value!r}; {DURATION_HINT}")


def parse_time(value: Any, origin_ms: int) -> int:
    """A point on the scenario clock, in ms after the origin: a clock time (``"10:02"``)
    or a duration after the origin (``"2m"``, ``120000``)."""
    if isinstance(value, str) and ":" in value:
        abs_ms = clock_ms(value)
        if abs_ms is None:
            raise ValueError(f"expected a clock time, got {value!r}; {CLOCK_HINT}")
        if abs_ms < origin_ms:
            raise ValueError(f"{value} is before the scenario origin "
                             f"{format_time(0, origin_ms)}; pick a later time or an earlier clock.origin")
        return abs_ms - origin_ms
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(f"expected a time, got {value!r}; {CLOCK_HINT}, or a duration after "
                         "the origin like '90s' or '2m'") from None


def format_time(t_ms: int, origin_ms: int) -> str:
    """The scenario's own notation: 10:02, 10:02:07 or 10:02:07.250 (round-trips parse_time)."""
    total = origin_ms + t_ms
    h, rem = divmod(total, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    out = f"{h:02d}:{mi:02d}"
    if s or ms:
        out += f":{s:02d}"
    if ms:
        out += f".{ms:03d}"
    return out
