"""Progress of long commands (conformance, sweep): a bar with rate and ETA on a terminal
(tqdm), a one-line status every STATUS_EVERY_S seconds otherwise (CI logs), nothing with -q.

Progress goes to standard error and reads the wall clock only for its own display: it never
touches a simulation, so traces stay byte-identical.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

STATUS_EVERY_S = 10.0


class Progress:
    """``update(failed=...)`` once per finished unit of work; ``close()`` at the end."""

    def __init__(self, total: int, what: str, *, quiet: bool = False, stream: TextIO | None = None,
                 done: int = 0) -> None:
        self.total, self.what, self.done, self.failed = total, what, done, 0
        self.stream = stream or sys.stderr
        self.bar = None
        self.quiet = quiet
        self.started = self.last = time.monotonic()
        if quiet:
            return
        if getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:  # the status line below serves as well
                return
            tqdm.monitor_interval = 0  # no monitor thread: the runs may fork worker processes
            self.bar = tqdm(total=total, initial=done, desc=what, unit="run", file=self.stream,
                            dynamic_ncols=True, leave=False)

    def note(self, text: str) -> None:
        """One line about the work ahead (an expected duration), unless quiet."""
        if not self.quiet:
            print(f"crashlab: {self.what}: {text}", file=self.stream, flush=True)

    def update(self, *, failed: bool = False) -> None:
        if self.bar is not None and self.bar.total != self.total:  # the total became known after start
            self.bar.total = self.total
            self.bar.n = self.done
        self.done += 1
        self.failed += bool(failed)
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(1)
            if failed:
                self.bar.set_postfix(failing=self.failed, refresh=False)
            return
        now = time.monotonic()
        if now - self.last >= STATUS_EVERY_S:
            self.last = now
            print(self.status(now), file=self.stream, flush=True)

    def status(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta = f"{left:.0f} s" if left != float("inf") else "?"
        return (f"crashlab: {self.what}: {self.done}/{self.total} ({100 * self.done / max(self.total, 1):.0f} %), "
                f"{rate:.1f}/s, about {eta} left, {self.failed} failing")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
