"""A real worker's wall clock as a fault: ``worker_clocks:`` (docs/integration.md, "A worker's clock").

The named worker starts with Debian's libfaketime preloaded (``LD_PRELOAD``, ``FAKETIME``), in its own
process only: under namespaces isolation the variables are set inside bubblewrap (``--setenv``), so
bubblewrap itself, crashlab and the sandbox keep the real clock. ``FAKETIME`` is ``"-1.2 x0.1"``: an
offset in real seconds (the scenario's offset divided by the time scale, like every scenario duration)
and a rate from the worker's start. libfaketime fakes the clock for every call through the C library
(``time.time()``, ``Date.now()``, ``clock_gettime``), sleeps and timeouts included: a worker on a clock
at a tenth of real speed also sleeps ten times longer. A program that reads the clock without the C
library (a Go binary) is not reached.

Where libfaketime is missing, a scenario that asks for a clock is refused (a usage error naming the
install command). Under process isolation libfaketime leaves a shared-memory file and a semaphore in
/dev/shm named by the worker's pid; :func:`forget` removes them when the scenario ends (under
namespaces /dev/shm is the worker's own).
"""
from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..vocab.compiled import Scenario, WorkerClock
from ..vocab.errors import UsageError

INSTALL = "apt-get install faketime"
#: Where Debian's libfaketime package puts the library (its multiarch folder first).
PLACES = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
          "/usr/lib64/faketime/libfaketime.so.1")


def library() -> str | None:
    """The path of libfaketime.so.1, or None where it is not installed."""
    for pattern in PLACES:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def require(scenario: Scenario) -> str | None:
    """libfaketime's path when the scenario asks for a worker clock (None when it asks for none); a usage
    error naming the install command where it is missing."""
    if not scenario.worker_clocks:
        return None
    path = library()
    if path is None:
        line = scenario.worker_clocks[0].line
        where = f"{scenario.source or scenario.id}" + (f":{line}" if line else "")
        raise UsageError(f"{where}: scenario {scenario.id} runs a worker on a skewed clock (worker_clocks), which "
                         f"needs Debian's libfaketime, not installed here (looked for {PLACES[0]})",
                         hint=f"install it ({INSTALL}), or run the scenario without its worker_clocks")
    return path


def clock_of(scenario: Scenario, run: str, number: int) -> WorkerClock | None:
    """The clock the scenario gives the run's n-th worker (a run's own entry before an every-run one)."""
    mine = [c for c in scenario.worker_clocks if c.worker == number and c.run in (run, None)]
    return next((c for c in mine if c.run == run), mine[0] if mine else None)


def faketime(clock: WorkerClock, time_scale: float) -> str:
    """libfaketime's ``FAKETIME``: the offset in real seconds, then the rate (``"-1.2 x0.1"``)."""
    seconds = clock.offset_ms / time_scale / 1000
    spec = f"{'-' if seconds < 0 else '+'}{f'{abs(seconds):.6f}'.rstrip('0').rstrip('.')}"   # never an exponent
    return spec + (f" x{clock.rate:g}" if clock.rate != 1.0 else "")


def describe(clock: WorkerClock, time_scale: float) -> str:
    """In words: how the worker's clock differs from the real one."""
    parts = []
    if clock.offset_ms:
        ahead = "ahead of" if clock.offset_ms > 0 else "behind"
        parts.append(f"{abs(clock.offset_ms) / 1000:g} s of scenario time {ahead} the real clock "
                     f"({abs(clock.offset_ms) / time_scale / 1000:g} s real)")
    if clock.rate != 1.0:
        parts.append(f"running at {clock.rate:g}x real speed from its start")
    return ", ".join(parts) + f" (libfaketime, FAKETIME='{faketime(clock, time_scale)}')"


@dataclass(frozen=True, slots=True)
class Skew:
    """One worker's clock fault: what its process gets (``env``), and what the trace records."""
    clock: WorkerClock
    env: dict
    record: dict
    text: str


def for_worker(scenario: Scenario, run: str, number: int, *, time_scale: float, lib: str | None,
               inherited: str = "") -> Skew | None:
    """The clock fault of the run's n-th worker, or None when its clock is the real one. ``inherited``:
    an ``LD_PRELOAD`` already in crashlab's environment, kept after libfaketime."""
    clock = clock_of(scenario, run, number)
    if clock is None or lib is None:
        return None
    spec = faketime(clock, time_scale)
    env = {"LD_PRELOAD": " ".join(filter(None, (lib, inherited))), "FAKETIME": spec,
           "FAKETIME_DONT_RESET": "1"}      # what the worker starts shares its clock rather than starting its own
    record = {"offset_ms": clock.offset_ms, "rate": clock.rate, "faketime": spec, "rule_line": clock.line}
    return Skew(clock=clock, env=env, record=record, text=describe(clock, time_scale))


def forget(pids: Iterable[int]) -> None:
    """Remove what libfaketime left in /dev/shm for these worker processes (process isolation: a killed
    worker never removes them, and one that exits does not either)."""
    for pid in pids:
        for name in (f"/dev/shm/faketime_shm_{pid}", f"/dev/shm/sem.faketime_sem_{pid}"):
            try:
                os.unlink(name)
            except OSError:
                pass
