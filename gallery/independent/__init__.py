"""Correct adapters written independently of reference_impl, from README.md and docs/ only.

They share one design (gallery/independent/fieldops.py, standard library only) and differ
in the choices AR-08 leaves free, each an option of ``Config`` (fieldops_core.py): lease TTL,
checkpoint cadence (every fact, sparse, or the chapter's boundaries only), reconciliation
schedule (at once or after a pause), read order (search or lookup where both are
authoritative), retry policy (backoff, chunked sleeps, what a spent ceiling reports), keeping
or compensating a confirmed hold, which key verifies a release, and how long to observe
before escalating. ``worker`` names the Worker class (a test may substitute a variant). The same worker
also runs over the wire as a standalone script:
``--adapter "exec:python3 gallery/independent/fieldops.py"``.

Every design follows docs/adapters.md: the decision packet lists the run's ledger as it
stands, a duplicate event's disposition goes into the next checkpoint's evidence, a recorded
retry-after binds every later worker, and a confirmation an earlier worker recorded is read
back before its result is replayed. Where a design still loses a point, the library
expectation rejects an outcome the chapter permits (tests/test_independent.py, CONTESTED).
"""
from __future__ import annotations

from crashlab.vocab.model import PortCall
from crashlab.world.ports import PortError

from .fieldops import Config, PortFailure, Worker


class IndependentAdapter:
    """Runs the fieldops worker in process: each yielded request is awaited as a port call."""

    def __init__(self, **choices):
        self.config = Config(**{**self.choices, **choices})

    choices: dict = {}
    worker = Worker

    async def run(self, ports) -> None:
        gen = self.worker(self.config).run()
        try:
            request = next(gen)
            while True:
                port, op, args = request
                try:
                    value = await PortCall(port=port, op=op, args=args)
                except PortError as exc:
                    request = gen.throw(PortFailure(exc.to_json()))
                    continue
                request = gen.send(value)
        except StopIteration:
            return


class Patient(IndependentAdapter):
    """Short leases (20 s), a checkpoint at every transition, reads every 3 s up to 30 times
    before it escalates an unknown effect."""

    choices = {"lease_ttl_ms": 20_000, "checkpoints": "dense", "poll_ms": 3_000, "reads": 30,
               "attempt_ceiling": 3, "backoff_ms": 1_000}


class Brisk(IndependentAdapter):
    """Long leases (90 s), checkpoints only where recovery needs them, search before lookup,
    reads every 10 s, four attempts with a longer backoff."""

    choices = {"lease_ttl_ms": 90_000, "checkpoints": "sparse", "poll_ms": 10_000, "reads": 15,
               "read_order": "search-first", "attempt_ceiling": 4, "backoff_ms": 2_500}


class Conservative(IndependentAdapter):
    """Escalates and stops as soon as no authoritative read is available (a read answers
    unavailable, or the service offers none), instead of observing further."""

    choices = {"lease_ttl_ms": 30_000, "checkpoints": "dense", "poll_ms": 5_000, "reads": 20,
               "conservative": True}


#: The wire form of the same worker, for ``--adapter``.
WIRE = "exec:python3 gallery/independent/fieldops.py --lease-ttl 25000 --checkpoints sparse --poll 6000"
