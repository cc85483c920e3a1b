"""One worker's session: its ports, its lease, its checkpoint version and its mirror of
the ledger. Everything here either reads durable state or writes it with an ownership
check; nothing survives the worker (a crash simply drops the session).

The session owns the two platform rules every other module relies on:

* **one retry owner.** Platform calls that fail transiently are retried here, with
  seeded jitter, within the ``transient_store`` row's ceiling. Effect calls are never
  retried here: their retries are new attempts in the ledger (effects.py).
* **ownership before every write.** A checkpoint write is a compare-and-set on the
  expected version and the lease epoch; the ledger does not check epochs, so the session
  renews the lease right before each append. A stale epoch raises :class:`FencedOut`:
  another owner exists and this worker writes and dispatches nothing more. A version
  conflict while the lease is still held, or a lease that lapsed with nobody taking over,
  raises :class:`StaleView`: the worker bootstraps again (new epoch, fresh reads).
"""
from __future__ import annotations

import itertools
from typing import Any

from crashlab.vocab.model import RUN_TRANSITIONS, PortCall, RunState
from crashlab.world.ports import PortError

from . import matrix
from .behaviour import REFERENCE, Behaviour
from .matrix import Action, classify
from .record import RunRecord, encode


class FencedOut(Exception):
    """Another owner holds the run (lease loss or stale checkpoint)."""

    def __init__(self, row: matrix.Row, error: PortError) -> None:
        super().__init__(f"{row.name}: {error.code}")
        self.row = row
        self.error = error


class StaleView(Exception):
    """This worker's view is old but no other owner exists (the checkpoint moved under a
    lease holder, or its own lease lapsed unnoticed): bootstrap again from durable state."""

    def __init__(self, row: matrix.Row, detail: str) -> None:
        super().__init__(f"{row.name}: {detail}")
        self.row = row


class StoreDown(Exception):
    """A platform store stayed unavailable through the transient_store ceiling."""

    def __init__(self, row: matrix.Row, call: PortCall, error: PortError) -> None:
        super().__init__(f"{call.port}.{call.op}: {error.code}")
        self.row = row
        self.call = call
        self.error = error


class IllegalTransition(Exception):
    """The adapter tried a run-state transition the model does not allow (a bug)."""


class Session:
    def __init__(self, ports, rereads: tuple[str, ...] = (), behaviour: Behaviour = REFERENCE) -> None:
        self.ports = ports
        self.behaviour = behaviour
        self.rereads = rereads                     # why earlier sessions of this worker reread
        self.run_id = ""
        self.worker = ""
        self.env: dict[str, Any] = {}
        self.services: list[str] = []
        self.epoch: int | None = None
        self.lease_ttl = matrix.LEASE_TTL_MS         # raised to outlive the slowest service call
        self.version = 0                           # checkpoint store version last read or written
        self.record: RunRecord | None = None
        self.ledger: dict[str, dict] = {}          # latest entry per semantic key, first-append order
        self.profiles: dict[str, dict] = {}
        self.authority: dict | None = None         # last authority.check for the run's proposal
        self.reads: list[str] = []                 # this worker's reconciliation notes (packet)
        self.read_failures = 0                     # consecutive failed reconciliation reads
        #: Backoffs this worker owes before its next attempt of a key: a retryable failure at
        #: the attempt ceiling, whose next attempt only a deliberate retry request admits.
        self.owed_backoff: dict[str, tuple[int, str, int]] = {}   # key -> (attempt, what, floor)
        self.backed_off: dict[str, int] = {}     # key -> the attempt whose backoff this worker keeps
        self.contradiction: str | None = None    # the ledger and the authoritative read disagree
        self.started_at = 0
        self.finished = False

    # ------------------------------------------------------------------ calls
    def classify(self, phase: str, code: str) -> matrix.Row:
        """The recovery-matrix row of an observation (the behaviour may reclassify it)."""
        return self.behaviour.matrix.get((phase, code)) or classify(phase, code)

    def row(self, name: str) -> matrix.Row:
        """A recovery-matrix row by name (including rows the behaviour classifies into)."""
        custom = {row.name: row for row in self.behaviour.matrix.values()}
        return custom.get(name) or matrix.ROW[name]

    async def call(self, phase: str, request: PortCall) -> Any:
        """A platform call with the matrix's transient retry; raises FencedOut for a
        lease-loss or stale-checkpoint answer and PortError for rows the caller handles."""
        for n in itertools.count(1):
            try:
                return await request
            except PortError as error:
                lapsed = error.code == "stale_epoch" and error.details.get("current_epoch") == self.epoch
                row = self.classify(phase, "lease_lapsed" if lapsed else error.code)
                if row.action is Action.FENCE_OUT:
                    raise FencedOut(row, error) from None
                if row.action is Action.REREAD:
                    await self.hold_lease()          # FencedOut when another owner wrote
                if row.action in (Action.REREAD, Action.REACQUIRE):
                    raise StaleView(row, error.message) from None
                if row.action is not Action.RETRY_CALL:
                    raise
                if n >= row.attempt_ceiling:
                    raise StoreDown(row, request, error) from None
                await self.backoff(n, f"{row.name} {request.port}.{request.op}")

    async def now(self) -> int:
        return (await self.call("platform", self.ports.clock.now()))["now"]

    async def sleep(self, ms: int, reason: str, deadline: int | None = None) -> None:
        """Sleep on the simulated clock, never past ``deadline``; an owner renews its lease
        first so it does not lapse while asleep ("renew before long sleeps")."""
        if self.epoch is not None:
            await self.hold_lease(ms + self.lease_ttl)
        if deadline is not None:
            ms = max(0, min(ms, deadline - await self.now()))
        await self.call("platform", self.ports.clock.sleep(ms, reason))

    async def backoff(self, n: int, what: str, floor_ms: int = 0, deadline: int | None = None) -> None:
        """Exponential backoff with seeded jitter; the chosen delay is recorded by the clock."""
        delay = max(floor_ms, min(matrix.BACKOFF_CAP_MS, matrix.BACKOFF_BASE_MS * 2 ** (n - 1)))
        jitter = (await self.call("platform", self.ports.random.draw(
            0, matrix.JITTER_MAX_MS, f"jitter {what} #{n}")))["value"]
        await self.sleep(delay + jitter, f"backoff {what} #{n}", deadline)

    async def send(self, service: str, op: str, args: dict) -> Any:
        """One effect call: exactly one request, never retried here (its retries are new
        attempts in the ledger, effects.py). PortError propagates to the caller."""
        return await self.ports.service(service).call(op, **args)

    async def check_authority(self, proposal_hash: str, action: str) -> dict:
        """authority.check: live approval bound to the proposal hash (never a local record)."""
        return await self.call("platform", self.ports.authority.check(proposal_hash, action))

    async def describe(self, service: str) -> dict:
        """A service's capability profile. A lease must outlive the slowest call the worker
        may wait on, so the lease TTL grows with the service's client timeout."""
        if service not in self.profiles:
            profile = await self.call("platform", self.ports.service(service).describe())
            self.profiles[service] = profile
            self.lease_ttl = max(self.lease_ttl, matrix.LEASE_TTL_MS + profile["timeout_ms"])
        return self.profiles[service]

    # ------------------------------------------------------------------ lease
    async def acquire_lease(self) -> bool:
        """Acquire a new epoch, waiting out another owner's lease a bounded number of times."""
        row = self.classify("lease", "lease_held")
        for n in itertools.count(1):
            try:
                lease = await self.call("lease", self.ports.lease.acquire(self.lease_ttl))
            except PortError as error:          # lease_held: the only lease error left to us
                if n > row.attempt_ceiling:
                    return False
                wait = error.details["expires_at"] - await self.now() + 1
                await self.sleep(max(1, wait), f"{row.name}: {error.details['owner']} "
                                 f"(epoch {error.details['epoch']}) until {error.details['expires_at']}")
                continue
            self.epoch = lease["epoch"]
            return True

    async def hold_lease(self, ttl_ms: int | None = None) -> None:
        """Prove ownership now (and extend it); FencedOut when a newer owner exists."""
        await self.call("lease", self.ports.lease.renew(self.epoch, ttl_ms or self.lease_ttl))

    async def release_lease(self) -> None:
        """Before a durable wait: let the lease run out at once so the next worker need
        not wait for it (the epoch stays ours until someone acquires a newer one)."""
        await self.hold_lease(1)

    # ------------------------------------------------------------------ durable writes
    async def commit(self, state: RunState, record: RunRecord | None = None) -> None:
        """Compare-and-set the checkpoint: advance ``version`` only if it is still the
        latest and this worker's epoch is still the current, live lease."""
        record = record or self.record
        record = record.evolve(effects=self.effect_summary(record.effects))
        current = self.record.state or RunState.INTAKE
        if state is not current and state not in RUN_TRANSITIONS[current]:
            # the ledger ran ahead of this worker's checkpoint: only a newer owner can have
            # done that, so prove ownership (FencedOut); holding the lease, it is a bug
            await self.hold_lease()
            raise IllegalTransition(f"{current.value} -> {state.value}")
        checkpoint = self.document(record, state)
        result = await self.call("checkpoint", self.ports.checkpoints.write(
            checkpoint, self.version, self.epoch))
        self.version = result["version"]
        self.record = record.evolve(state=state)

    def document(self, record: RunRecord, state: RunState) -> dict:
        """The checkpoint for the next version, owned by this worker's epoch."""
        return encode(record, state=state, owner=self.worker, epoch=self.epoch,
                      state_version=self.version + 1)

    async def write_raw(self, checkpoint: dict, record: RunRecord) -> None:
        """Write a checkpoint built elsewhere (a migration record) with the same CAS."""
        result = await self.call("checkpoint", self.ports.checkpoints.write(
            checkpoint, self.version, self.epoch))
        self.version = result["version"]
        self.record = record

    async def append(self, entry: dict) -> None:
        await self.hold_lease()
        await self.call("platform", self.ports.ledger.append(entry))
        self.ledger[entry["semantic_key"]] = entry

    def effect_summary(self, carried) -> tuple[dict, ...]:
        """The checkpoint's effects group: what the previous checkpoint carried, updated by
        every ledger entry this worker has read or written (effects are never dropped)."""
        summary = {e["semantic_key"]: dict(e) for e in carried}
        for e in self.ledger.values():
            summary[e["semantic_key"]] = {"semantic_key": e["semantic_key"], "kind": e["kind"],
                                          "service": e["service"], "knowledge": e["knowledge"],
                                          "remote_ref": e["remote_ref"]}
        return tuple(summary.values())

    # ------------------------------------------------------------------ hand-off
    async def escalate(self, packet: dict) -> str:
        return (await self.call("platform", self.ports.operator.escalate(packet)))["ticket"]

    async def finish(self, disposition: RunState, *, reason: str, next_owner: str | None = None,
                     packet: dict | None = None, wake_at: int | None = None) -> None:
        await self.call("platform", self.ports.run.finish(
            disposition.value, effects=[{"semantic_key": e["semantic_key"], "knowledge": e["knowledge"],
                                         "kind": e["kind"], "service": e["service"],
                                         "remote_ref": e["remote_ref"]} for e in self.ledger.values()],
            next_owner=next_owner, reason=reason, packet=packet, wake_at=wake_at))
        self.finished = True
