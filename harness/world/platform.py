"""The platform's primitives: the lease, checkpoint store, ledger, inbox and authority a run's
workers reach through the platform ports, plus the run's own ports (info, finish, draws,
escalation).

Each primitive is a small class owning its port handlers. A handler takes ``(run, worker,
args, call_seq)``, returns the result value or raises PortError, and takes no simulated
time: the world (world.py) applies latency and injected faults before it dispatches a call
through the ``(port, op)`` table built from every primitive's ``PORTS``. The per-run state
the handlers read and write stays on the run's record (``RunWorld``), one field a primitive.
"""
from __future__ import annotations

import copy

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from ..vocab import events
from ..vocab.model import RunState, TERMINAL_STATES, WAITING_STATES, validate_checkpoint, validate_effect_entry
from . import approvals
from .approvals import Approval, Policy  # noqa: F401  (Approval: the run record's type)
from .ports import PortError

if TYPE_CHECKING:
    from .world import RunWorld, World

Handler = Callable[[Any, Any, dict, int], dict]


# --------------------------------------------------------------------------- platform state
@dataclass(slots=True)
class Lease:
    epoch: int = 0
    owner: str | None = None
    expires_at: int = 0


# --------------------------------------------------------------------------- primitives
class Primitive:
    """One primitive of one world. ``PORTS`` names the method handling each (port, op)."""

    __slots__ = ("env", "emit")
    PORTS: ClassVar[dict[tuple[str, str], str]] = {}

    def __init__(self, world: World) -> None:
        self.env = world.env
        self.emit = world.trace.emit

    @property
    def now(self) -> int:
        return int(self.env.now)

    def handlers(self) -> dict[tuple[str, str], Handler]:
        return {key: getattr(self, name) for key, name in self.PORTS.items()}

    def _schema_fault(self, run, worker, call_seq, fault: str, what: str, field: str, value: Any,
                      problems: list[str]):
        """A written record failed the harness schema: an adapter fault, and ``invalid``."""
        self.emit(events.AdapterFault, worker=worker.name, run=run.spec.id, call=call_seq,
                  fault=fault, problems=problems, **{field: value},
                  message=f"{what} failed the harness schema: " + "; ".join(problems))
        raise PortError("invalid", "; ".join(problems), details={"problems": problems})


class Leases(Primitive):
    """One lease a run: an epoch that rises with every acquisition, its owner and expiry."""

    __slots__ = ()
    PORTS = {("lease", "acquire"): "acquire", ("lease", "renew"): "renew", ("lease", "read"): "read"}

    def acquire(self, run, worker, args, call_seq):
        ttl = args.get("ttl_ms")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise PortError("bad_request", f"lease.acquire needs a positive integer ttl_ms, got {ttl!r}")
        lease = run.lease
        if lease.owner is not None and lease.owner != worker.name and lease.expires_at > self.now:
            raise PortError("lease_held", f"held by {lease.owner} (epoch {lease.epoch}) until "
                            f"{lease.expires_at}", details={"owner": lease.owner, "epoch": lease.epoch,
                                                            "expires_at": lease.expires_at})
        lease.epoch += 1
        lease.owner = worker.name
        lease.expires_at = self.now + ttl
        worker.epoch, worker.fenced = lease.epoch, False
        self.emit(events.Lease, worker=worker.name, run=run.spec.id, op="acquire",
                  epoch=lease.epoch, owner=worker.name, expires_at=lease.expires_at, call=call_seq)
        return {"epoch": lease.epoch, "owner": worker.name, "expires_at": lease.expires_at}

    def ok(self, run: RunWorld, epoch: Any) -> bool:
        """Whether ``epoch`` is the run's current lease epoch and that lease is still live:
        the fence on checkpoint writes and ledger appends."""
        return epoch == run.lease.epoch and run.lease.expires_at > self.now

    def renew(self, run, worker, args, call_seq):
        epoch, ttl = args.get("epoch"), args.get("ttl_ms")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise PortError("bad_request", "lease.renew needs a positive integer ttl_ms")
        if not self.ok(run, epoch) or run.lease.owner != worker.name:
            worker.fenced = True
            raise PortError("stale_epoch", f"epoch {epoch!r} is not the current live lease "
                            f"(current {run.lease.epoch}, expires {run.lease.expires_at})",
                            details={"current_epoch": run.lease.epoch})
        run.lease.expires_at = self.now + ttl
        self.emit(events.Lease, worker=worker.name, run=run.spec.id, op="renew",
                  epoch=epoch, owner=worker.name, expires_at=run.lease.expires_at, call=call_seq)
        return {"epoch": epoch, "expires_at": run.lease.expires_at}

    def read(self, run, worker, args, call_seq):
        lease = run.lease
        return {"epoch": lease.epoch, "owner": lease.owner, "expires_at": lease.expires_at}


class CheckpointStore(Primitive):
    """Every checkpoint version a run wrote, written by compare-and-set on the latest version
    and fenced by the lease. A run with earlier history starts at ``run.base_version``."""

    __slots__ = ("leases",)
    PORTS = {("checkpoints", "load"): "load", ("checkpoints", "history"): "history",
             ("checkpoints", "write"): "write"}

    def __init__(self, world: World, leases: Leases) -> None:
        super().__init__(world)
        self.leases = leases

    def load(self, run, worker, args, call_seq):
        if not run.checkpoints:
            return {"version": run.base_version, "checkpoint": None}
        latest = run.checkpoints[-1]
        return {"version": latest["version"], "checkpoint": latest["checkpoint"]}

    def history(self, run, worker, args, call_seq):
        return {"versions": [dict(v) for v in run.checkpoints]}

    def write(self, run, worker, args, call_seq):
        checkpoint = args.get("checkpoint")
        expected, epoch = args.get("expected_version"), args.get("lease_epoch")
        problems = validate_checkpoint(checkpoint)
        if problems:
            self._schema_fault(run, worker, call_seq, "invalid_checkpoint", "checkpoint", "checkpoint",
                               checkpoint, problems)
        latest = run.checkpoints[-1]["version"] if run.checkpoints else run.base_version
        if expected != latest:
            self.emit(events.CheckpointRejected, worker=worker.name, run=run.spec.id,
                      call=call_seq, reason="version_conflict", expected=expected, latest=latest,
                      epoch=epoch)
            raise PortError("version_conflict", f"expected version {expected!r}, latest is {latest}",
                            details={"latest": latest})
        if not self.leases.ok(run, epoch):
            worker.fenced = True
            self.emit(events.CheckpointRejected, worker=worker.name, run=run.spec.id,
                      call=call_seq, reason="stale_epoch", expected=expected, latest=latest,
                      epoch=epoch, current_epoch=run.lease.epoch)
            raise PortError("stale_epoch", f"lease epoch {epoch!r} is not current and live "
                            f"(current {run.lease.epoch})", details={"current_epoch": run.lease.epoch})
        version = latest + 1
        run.checkpoints.append({"version": version, "checkpoint": checkpoint, "at": self.now,
                                "writer": worker.name})
        control = checkpoint["control"]
        self.emit(events.Checkpoint, worker=worker.name, run=run.spec.id, call=call_seq,
                  version=version, state=control["state"], owner=control["owner"],
                  epoch=epoch, state_version=control["state_version"], checkpoint=checkpoint)
        return {"version": version}


    def record_cancellation(self, run: RunWorld, event: dict) -> None:
        """A cancellation recorded by the platform as the run's next checkpoint version (its own
        conditional write on the latest). The adapter's document is its own and is kept as it was
        (``history`` names the writer and the cancellation); a writer that expected the earlier
        version now fails with version_conflict and, rereading, finds the cancellation in its
        inbox. Before the run's first checkpoint there is nothing to advance."""
        if not run.checkpoints:
            return
        latest = run.checkpoints[-1]
        checkpoint = copy.deepcopy(latest["checkpoint"])
        version = latest["version"] + 1
        run.checkpoints.append({"version": version, "checkpoint": checkpoint, "at": self.now,
                                "writer": "platform", "cancellation": {"event_id": event["event_id"],
                                                                      "seq": event["seq"], "at": event["at"]}})
        self.emit(events.CancelRecorded, run=run.spec.id, version=version, event_id=event["event_id"],
                  state=checkpoint["control"]["state"])


class Ledger(Primitive):
    """A run's append-only effect ledger: what the run knows of each semantic key. An append
    is fenced like a checkpoint write, and on the worker's own epoch besides."""

    __slots__ = ("leases",)
    PORTS = {("ledger", "append"): "append", ("ledger", "read"): "read", ("ledger", "by_run"): "by_run"}

    def __init__(self, world: World, leases: Leases) -> None:
        super().__init__(world)
        self.leases = leases

    @staticmethod
    def knowledge(run: RunWorld, key: str | None) -> str | None:
        """The knowledge of the latest entry for ``key`` in the run's ledger, if any."""
        if key is None:
            return None
        for entry in reversed(run.ledger):
            if entry["semantic_key"] == key:
                return entry["knowledge"]
        return None

    def append(self, run, worker, args, call_seq):
        entry = args.get("entry")
        problems = validate_effect_entry(entry)
        if problems:
            self._schema_fault(run, worker, call_seq, "invalid_effect_entry", "effect entry", "entry",
                               entry, problems)
        epoch = entry["lease_epoch"]
        if epoch != worker.epoch or not self.leases.ok(run, epoch):
            # Fenced like a checkpoint write: only the current, live lease epoch appends.
            worker.fenced = True
            self.emit(events.LedgerRejected, worker=worker.name, run=run.spec.id, call=call_seq,
                      reason="stale_epoch", epoch=epoch, current_epoch=run.lease.epoch,
                      key=entry["semantic_key"])
            raise PortError("stale_epoch", f"lease epoch {epoch!r} is not this worker's current, live "
                            f"epoch (current {run.lease.epoch})", details={"current_epoch": run.lease.epoch})
        previous = self.knowledge(run, entry["semantic_key"])
        run.ledger.append(entry)
        self.emit(events.Ledger, worker=worker.name, run=run.spec.id, call=call_seq,
                  index=len(run.ledger), key=entry["semantic_key"], knowledge=entry["knowledge"],
                  previous=previous, epoch=entry["lease_epoch"], live_epoch=run.lease.epoch,
                  entry=entry)
        return {"index": len(run.ledger)}

    def read(self, run, worker, args, call_seq):
        key = args.get("semantic_key")
        return {"entries": [e for e in run.ledger if e["semantic_key"] == key]}

    def by_run(self, run, worker, args, call_seq):
        return {"entries": list(run.ledger)}


class Inbox(Primitive):
    """A run's input events, numbered by arrival (seq = index + 1); a delivery wakes the run."""

    __slots__ = ("_event_ids",)
    PORTS = {("inbox", "poll"): "poll"}

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self._event_ids = 0

    def new_event_id(self) -> str:
        self._event_ids += 1
        return f"ev-{self._event_ids}"

    def deliver(self, run: RunWorld, etype: str, payload: dict, *, producer: str,
                event_id: str | None = None, producer_seq: int | None = None) -> dict:
        if event_id is None:
            event_id = self.new_event_id()
        event = {"seq": len(run.inbox) + 1, "event_id": event_id, "type": etype,
                 "producer": producer, "producer_seq": producer_seq, "payload": payload,
                 "at": self.now}
        run.inbox.append(event)
        self.emit(events.Deliver, run=run.spec.id, event=event)
        self.wake(run)
        return event

    @staticmethod
    def wake(run: RunWorld) -> None:
        if run.wake is not None and not run.wake.triggered:
            run.wake.succeed()

    def poll(self, run, worker, args, call_seq):
        after = args.get("after_seq", 0)
        if not isinstance(after, int) or isinstance(after, bool):
            raise PortError("bad_request", "inbox.poll needs an integer after_seq")
        return {"events": [e for e in run.inbox if e["seq"] > after]}


class Authority(Primitive):
    """Approvals bound to a proposal hash and an action (approvals.py decides): requested by a
    worker, granted by the run's approval policy or a scenario's ``approve``, revoked, or outlived
    by a capability change. A grant, a revocation and a capability change each reach the run's inbox."""

    __slots__ = ("inbox",)
    PORTS = {("authority", "request"): "request", ("authority", "check"): "check"}

    def __init__(self, world: World, inbox: Inbox) -> None:
        super().__init__(world)
        self.inbox = inbox

    def request(self, run, worker, args, call_seq):
        req, delay = approvals.request(run, Policy.of(run.spec), args, self.now)
        self.emit(events.ApprovalRequested, worker=worker.name, run=run.spec.id, call=call_seq, **req)
        if delay is not None:
            self.env.process(self._grant_later(run, req, delay))
        return {"request_id": req["request_id"]}

    def _grant_later(self, run: RunWorld, req: dict, delay: int):
        if delay:
            yield self.env.timeout(delay)
        self.grant(run, req)

    def grant(self, run: RunWorld, req: dict) -> None:
        approval, payload = approvals.grant(run, Policy.of(run.spec), req, self.now)
        self.emit(events.ApprovalGranted, run=run.spec.id, approval_id=approval.approval_id,
                  proposal_hash=approval.proposal_hash, action=approval.action,
                  expires_at=approval.expires_at, capability_version=approval.capability_version)
        self.inbox.deliver(run, "approval", payload, producer="authority")

    def approve(self, run: RunWorld, data: dict) -> None:
        """A scenario's ``approve``: grants the latest request, or answers the next one."""
        req = approvals.approve(run, data)
        if req is not None:
            self.grant(run, req)

    def revoke(self, run: RunWorld, data: dict) -> None:
        approvals.revoke(run)
        self.inbox.deliver(run, "revocation", data, producer="authority")

    def change_capability(self, run: RunWorld) -> None:
        version = approvals.change_capability(run)
        self.inbox.deliver(run, "capability_change", {"capability_version": version}, producer="authority")

    def check(self, run, worker, args, call_seq):
        return approvals.check(run, Policy.of(run.spec), args, self.now)


class RunControl(Primitive):
    """The run's own ports: what it is (run.info), its end or durable wait (run.finish), its
    seeded draws (random.draw) and escalation to an operator (operator.escalate)."""

    __slots__ = ("services", "streams")
    PORTS = {("run", "info"): "info", ("run", "finish"): "finish", ("random", "draw"): "draw",
             ("operator", "escalate"): "escalate"}

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.services = world.services
        self.streams = world.streams

    def draw(self, run, worker, args, call_seq):
        low, high = args.get("low"), args.get("high")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or low > high:
            raise PortError("bad_request", f"random.draw needs integers low <= high, got {low!r}, {high!r}")
        return {"value": self.streams.get(f"adapter:{run.spec.id}").randint(low, high)}

    def info(self, run, worker, args, call_seq):
        return {"run_id": run.spec.id, "worker": worker.name, "env": dict(worker.env),
                "services": sorted(self.services), "deadline": run.spec.deadline_ms,
                "service": run.spec.service, "operation": run.spec.operation}

    def finish(self, run, worker, args, call_seq):
        disposition = args.get("disposition")
        try:
            state = RunState(disposition)
        except ValueError:
            raise PortError("bad_request", f"unknown disposition {disposition!r}") from None
        if state not in TERMINAL_STATES and state not in WAITING_STATES:
            raise PortError("bad_request", f"{disposition} is neither terminal nor a durable waiting state")
        # a superseded worker, or one that held a lease and was already answered stale_epoch by
        # the stores (or the lease) because it expired, is fenced here too: its finish is recorded,
        # not accepted. (A worker that never held a lease is OWN-02's to judge.)
        stale = (run.lease.epoch > run.base_epoch and worker.epoch != run.lease.epoch) or (
            worker.fenced and worker.epoch is not None)
        accepted = not stale and run.finished is None
        self.emit(events.Finish, worker=worker.name, run=run.spec.id, call=call_seq,
                  disposition=disposition, effects=args.get("effects") or [],
                  next_owner=args.get("next_owner"), reason=args.get("reason") or "",
                  packet=args.get("packet"), accepted=accepted, stale=stale)
        if accepted:
            lease = run.lease
            if lease.owner == worker.name and lease.epoch == worker.epoch and lease.expires_at > self.now:
                # a finished worker stops: its lease is released at once, so that the next worker
                # (woken by a later inbox event or a wake-up) does not wait out the TTL
                lease.owner, lease.expires_at = None, self.now
                self.emit(events.Lease, worker=worker.name, run=run.spec.id, op="release",
                          epoch=lease.epoch, owner=worker.name, expires_at=self.now, call=call_seq)
            if state in TERMINAL_STATES:
                run.finished = disposition
                run.waiting = None
            else:
                run.waiting = disposition
                wake_at = args.get("wake_at")
                run.wake_at = wake_at if isinstance(wake_at, int) and not isinstance(wake_at, bool) \
                    else None
        return {"accepted": accepted}

    def escalate(self, run, worker, args, call_seq):
        packet = args.get("packet")
        if not isinstance(packet, dict):
            raise PortError("bad_request", "operator.escalate needs a packet object")
        run.tickets += 1
        ticket = f"OP-{run.tickets}"
        self.emit(events.Escalation, worker=worker.name, run=run.spec.id, call=call_seq,
                  ticket=ticket, packet=packet)
        return {"ticket": ticket}
