"""Adapters that say which CPUs their worker process may run on (tests/test_affinity.py)."""
from __future__ import annotations

import os


class SaysItsCpus:
    """Names the CPUs its process may use in a sleep's reason, then finishes."""

    async def run(self, p):
        await p.run.info()
        await p.clock.sleep(1, "cpus " + ",".join(map(str, sorted(os.sched_getaffinity(0)))))
        await p.run.finish("SUCCEEDED")


class SleepsPastTheHorizon:
    """Its worker is still waiting when the simulation ends; it says its process id first."""

    async def run(self, p):
        await p.run.info()
        await p.clock.sleep(1, f"pid {os.getpid()}")
        await p.clock.sleep(10**9, "past the horizon")


class SaysWhyItWaits:
    """Writes to standard error, then waits past the horizon."""

    async def run(self, p):
        import sys

        await p.run.info()
        print("waiting for a reply that never comes", file=sys.stderr, flush=True)
        await p.clock.sleep(10**9, "past the horizon")
