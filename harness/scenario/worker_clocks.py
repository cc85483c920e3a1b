"""``worker_clocks:``: a real worker's wall clock, off by an offset or drifting (crashlab integrate only).

    worker_clocks:
      - {worker: 1, rate: 0.1}                  # every run's first worker: its clock runs at a tenth of real speed
      - {run: run-82, worker: 2, offset: -2m}   # run-82's second worker: two minutes (scenario time) behind

Read here, checked with the loader's errors (file, line, field, what to do); crashlab integrate starts
the named workers under libfaketime (crashlab.integrate.clocks). The simulator's workers all read the
one scenario clock, so it ignores them.
"""
from __future__ import annotations

from typing import Any

from ..vocab.compiled import WorkerClock
from ..vocab.timefmt import DURATION_HINT, parse_duration
from .format import CLOCK_RATE_RANGE, WORKER_CLOCK_FIELDS
from .yaml import _integer, _line, _Reader

EXAMPLE = "e.g. - {worker: 1, rate: 0.1} (a clock at a tenth of real speed) or - {worker: 1, offset: -2m}"


def signed_duration(value: Any) -> int:
    """``-2m`` / ``+90s`` / ``2m`` / ``-120000`` -> ms (negative: behind the real clock)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value[:1] in "+-" and len(value) > 1:
        try:
            magnitude = parse_duration(value[1:])
        except ValueError:
            magnitude = None
        if magnitude is not None:
            return -magnitude if value[0] == "-" else magnitude
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            pass
    raise ValueError(f"expected a signed duration like -2m or +90s, got {value!r}; {DURATION_HINT}, with a "
                     "leading - for a clock behind the real one")


def rate(value: Any) -> float:
    low, high = CLOCK_RATE_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number like 0.1 (a clock at a tenth of real speed) or 2 (twice as fast), "
                         f"got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"a clock rate is between {low:g} and {high:g} times real speed, got {value!r}")
    return float(value)


def read_worker_clocks(rd: _Reader, doc: dict, run_ids: list[str]) -> tuple[WorkerClock, ...]:
    items = rd.items(doc, "worker_clocks", "worker_clocks")
    clocks: list[WorkerClock] = []
    for i in range(len(items)):
        path = f"worker_clocks[{i}]"
        c = rd.mapping(items, i, path, WORKER_CLOCK_FIELDS, hint=EXAMPLE)
        number = rd.get(c, "worker", path, _integer(1))
        run = rd.get(c, "run", path, lambda v: _run(v, run_ids), None)
        offset = rd.get(c, "offset", path, signed_duration, 0)
        speed = rd.get(c, "rate", path, rate, 1.0)
        if offset == 0 and speed == 1.0:
            rd.fail(items, i, path, f"this clock is the real one (no offset, rate 1): it changes nothing; give an "
                    f"offset or a rate ({EXAMPLE}), or remove the entry")
        for other in clocks:
            if other.worker == number and (None in (other.run, run) or other.run == run):
                whose = f"run {run}'s worker {number}" if run else f"worker {number} of every run"
                rd.fail(c, "worker", f"{path}.worker", f"{whose} already has a clock (worker_clocks entry at line "
                        f"{other.line}); give each worker one entry, with both offset and rate if it needs both")
        clocks.append(WorkerClock(worker=number, run=run, offset_ms=offset, rate=speed, line=_line(items, i)))
    return tuple(clocks)


def _run(value: Any, run_ids: list[str]) -> str:
    if value not in run_ids:
        raise ValueError(f"no run {value!r} in this scenario; name one of: {', '.join(run_ids)}, or leave run out "
                         "for that worker of every run")
    return value
