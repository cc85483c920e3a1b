"""The simulated world, on simpy: clock, seeded streams, platform primitives, transport.

Time is integer milliseconds since the scenario origin. Every source of randomness is a
named stream derived from the seed (``streams.get("transport")``), so adding a component
never shifts another's draws. Nothing here reads the wall clock.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Generator

import simpy

from .model import (EFFECT_OPS, PLATFORM_PORTS, SERVICE_OPS, PortCall, RunState,
                    TERMINAL_STATES, WAITING_STATES, validate_checkpoint, validate_effect_entry)
from .ports import PortError
from .scenario import Rule, RunSpec, Scenario
from .services import SERVICE_CLASSES, Service
from .trace import Trace

PLATFORM_LATENCY_MS = (1, 4)   # each store call takes a few simulated ms, drawn per call


def _dig(value: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


class Streams:
    """Independent named random streams derived from one seed."""

    __slots__ = ("seed", "_streams")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, random.Random] = {}

    def get(self, name: str) -> random.Random:
        stream = self._streams.get(name)
        if stream is None:
            material = hashlib.sha256(f"crashlab:{self.seed}:{name}".encode()).digest()
            stream = self._streams[name] = random.Random(int.from_bytes(material[:8], "big"))
        return stream


# --------------------------------------------------------------------------- platform state
@dataclass(slots=True)
class Lease:
    epoch: int = 0
    owner: str | None = None
    expires_at: int = 0


@dataclass(slots=True)
class Approval:
    approval_id: str
    proposal_hash: str
    action: str
    granted_at: int
    expires_at: int
    capability_version: int
    revoked: bool = False


@dataclass(slots=True)
class RunWorld:
    """Everything the platform keeps for one run."""

    spec: RunSpec
    lease: Lease = field(default_factory=Lease)
    checkpoints: list[dict] = field(default_factory=list)       # every version kept
    ledger: list[dict] = field(default_factory=list)            # append-only
    inbox: list[dict] = field(default_factory=list)             # deliveries, seq = index + 1
    approvals: list[Approval] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)          # approval requests
    pending_approve: list[dict] = field(default_factory=list)   # manual answers before a request
    capability_version: int = 1
    env: dict = field(default_factory=dict)                     # code the next worker starts with
    workers: int = 0
    finished: str | None = None                                 # terminal disposition
    waiting: str | None = None                                  # durable waiting state
    wake: simpy.Event | None = None
    ordinals: dict = field(default_factory=dict)                # (port, op) -> count
    live: dict = field(default_factory=dict)                    # worker name -> WorkerState
    tickets: int = 0
    takeover: simpy.Event | None = None                         # signalled to replace a zombie
    wake_at: int | None = None                                  # durable wait: timer wake-up
    current: str | None = None                                  # the supervisor's current worker


@dataclass(slots=True)
class WorkerState:
    name: str
    number: int
    run: str
    env: dict
    epoch: int | None = None
    alive: bool = True
    paused: bool = False


class Crash(Exception):
    """Raised inside a worker process when a crash rule fires."""

    def __init__(self, boundary: str, rule: Rule) -> None:
        super().__init__(boundary)
        self.boundary = boundary
        self.rule = rule


class World:
    def __init__(self, scenario: Scenario, seed: int | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.env = simpy.Environment()
        self.streams = Streams(self.seed)
        self.trace = Trace(lambda: int(self.env.now))
        self.services: dict[str, Service] = {
            name: SERVICE_CLASSES[name](name, dict(profile), self.trace.emit, lambda: int(self.env.now))
            for name, profile in scenario.services.items()}
        self.runs: dict[str, RunWorld] = {}
        for spec in scenario.runs:
            rw = RunWorld(spec=spec, env=dict(scenario.env))
            rw.wake = self.env.event()
            self.runs[spec.id] = rw
        self.rule_hits: dict[int, int] = {}
        self._anchors = [(i, ev) for i, ev in enumerate(scenario.events) if ev.anchor is not None]
        self.anchors_fired: set[int] = set()     # indexes of scenario events anchored to a call, fired
        self._actions = frozenset(rule.action for rule in scenario.rules)
        self._rule_index: dict[tuple, tuple] = {}   # (action, port, op) -> the rules that may match
        self.emit = self.trace.emit  # the hot path skips one call layer
        self.env_current = dict(scenario.env)
        self._event_ids = 0
        self._proxy_calls = 0

    # ------------------------------------------------------------------ small helpers
    @property
    def now(self) -> int:
        return int(self.env.now)

    def emit(self, lane: str, kind: str, **data: Any) -> dict:  # replaced per instance below
        return self.trace.emit(lane, kind, **data)

    def key_knowledge(self, run: RunWorld, key: str | None) -> str | None:
        if key is None:
            return None
        for entry in reversed(run.ledger):
            if entry["semantic_key"] == key:
                return entry["knowledge"]
        return None

    # ------------------------------------------------------------------ rule matching
    def matches(self, m, run: RunWorld, worker: WorkerState, call: PortCall, nth: int) -> bool:
        """Whether a call meets every condition of a ``match`` (rules and anchored events)."""
        if m.port is not None and m.port != call.port:
            return False
        if m.op is not None and m.op != call.op:
            return False
        if m.nth is not None and m.nth != nth:
            return False
        if m.worker is not None and m.worker != worker.number:
            return False
        if m.run is not None and m.run != run.spec.id:
            return False
        if m.from_ms is not None and self.now < m.from_ms:
            return False
        if m.until_ms is not None and self.now >= m.until_ms:
            return False
        if m.knowledge is not None and self.key_knowledge(run, call.args.get("key")) != m.knowledge:
            return False
        if m.state is not None and m.state != _dig(call.args, "checkpoint", "control", "state"):
            return False
        if m.appends is not None and m.appends != _dig(call.args, "entry", "knowledge"):
            return False
        if m.disposition is not None and m.disposition != call.args.get("disposition"):
            return False
        return True

    def match_rules(self, action: str, run: RunWorld, worker: WorkerState, call: PortCall,
                    nth: int) -> Rule | None:
        if action not in self._actions:
            return None
        key = (action, call.port, call.op)
        candidates = self._rule_index.get(key)
        if candidates is None:  # the rules of this action that can match this port and op, in order
            candidates = self._rule_index[key] = tuple(
                (index, rule) for index, rule in enumerate(self.scenario.rules)
                if rule.action == action and rule.match.port in (None, call.port)
                and rule.match.op in (None, call.op))
        for index, rule in candidates:
            if not self.matches(rule.match, run, worker, call, nth):
                continue
            hits = self.rule_hits.get(index, 0)
            if rule.times and hits >= rule.times:
                continue
            self.rule_hits[index] = hits + 1
            return rule
        return None

    # ------------------------------------------------------------------ inbox
    def deliver(self, run: RunWorld, etype: str, payload: dict, *, producer: str,
                event_id: str | None = None, producer_seq: int | None = None) -> dict:
        if event_id is None:
            self._event_ids += 1
            event_id = f"ev-{self._event_ids}"
        event = {"seq": len(run.inbox) + 1, "event_id": event_id, "type": etype,
                 "producer": producer, "producer_seq": producer_seq, "payload": payload,
                 "at": self.now}
        run.inbox.append(event)
        self.emit("world", "deliver", run=run.spec.id, event=event)
        self._wake(run)
        return event

    def _wake(self, run: RunWorld) -> None:
        if run.wake is not None and not run.wake.triggered:
            run.wake.succeed()

    # ------------------------------------------------------------------ execution
    def execute(self, run: RunWorld, worker: WorkerState, call: PortCall, call_seq: int,
                nth: int) -> Generator[Any, Any, dict]:
        """Run one port call on the world. Returns the result value or raises PortError.

        This is a simpy sub-process body (``yield from``): it may take simulated time. Events
        anchored to this call are scheduled before it executes and after it completes.
        """
        if not self._anchors:
            return (yield from self._execute(run, worker, call, call_seq, nth))
        self._deliver_anchored(self._anchored("before", run, worker, call, nth))
        after = self._anchored("after", run, worker, call, nth)   # matched as the call is made
        try:
            value = yield from self._execute(run, worker, call, call_seq, nth)
        except PortError:
            self._deliver_anchored(after)
            raise
        self._deliver_anchored(after)
        return value

    def _execute(self, run: RunWorld, worker: WorkerState, call: PortCall, call_seq: int,
                 nth: int) -> Generator[Any, Any, dict]:
        fault = self.match_rules("fault", run, worker, call, nth)
        if fault is not None:
            self.emit("fault", "fault", worker=worker.name, run=run.spec.id, call=call_seq,
                      fault=fault.fault, code=fault.code, rule_line=fault.line)
        if call.port in self.services:
            return (yield from self._service_call(run, worker, call, call_seq, fault))
        if call.port not in PLATFORM_PORTS or call.op not in PLATFORM_PORTS[call.port]:
            raise PortError("bad_request", f"unknown port operation {call.port}.{call.op}")
        if call.port == "clock":
            return (yield from self._clock(run, worker, call))
        if call.port in ("random", "run") and fault is None:
            return self._platform(run, worker, call, call_seq)
        yield self.env.timeout(self.streams.get("platform").randint(*PLATFORM_LATENCY_MS))
        if fault is not None:
            code = fault.code or ("unavailable" if fault.fault in (None, "unavailable", "error")
                                  else fault.fault)
            raise PortError(code, f"injected fault on {call.port}.{call.op}")
        return self._platform(run, worker, call, call_seq)

    def _clock(self, run, worker, call):
        if call.op == "now":
            return {"now": self.now}
        ms = call.args.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            raise PortError("bad_request", f"clock.sleep needs a non-negative integer ms, got {ms!r}")
        if not isinstance(call.args.get("reason"), str):
            raise PortError("bad_request", "clock.sleep needs a reason string")
        yield self.env.timeout(ms)
        return {"now": self.now}

    # -- platform primitives ------------------------------------------------------------
    def _platform(self, run: RunWorld, worker: WorkerState, call: PortCall, call_seq: int) -> dict:
        handler = getattr(self, f"_p_{call.port}_{call.op}")
        return handler(run, worker, call.args, call_seq)

    def _p_random_draw(self, run, worker, args, call_seq):
        low, high = args.get("low"), args.get("high")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or low > high:
            raise PortError("bad_request", f"random.draw needs integers low <= high, got {low!r}, {high!r}")
        return {"value": self.streams.get(f"adapter:{run.spec.id}").randint(low, high)}

    def _p_run_info(self, run, worker, args, call_seq):
        return {"run_id": run.spec.id, "worker": worker.name, "env": dict(worker.env),
                "services": sorted(self.services), "deadline": run.spec.deadline_ms,
                "service": run.spec.service, "operation": run.spec.operation}

    def _p_run_finish(self, run, worker, args, call_seq):
        disposition = args.get("disposition")
        try:
            state = RunState(disposition)
        except ValueError:
            raise PortError("bad_request", f"unknown disposition {disposition!r}") from None
        if state not in TERMINAL_STATES and state not in WAITING_STATES:
            raise PortError("bad_request", f"{disposition} is neither terminal nor a durable waiting state")
        stale = run.lease.epoch > 0 and (worker.epoch != run.lease.epoch)
        accepted = not stale and run.finished is None
        self.emit("run", "finish", worker=worker.name, run=run.spec.id, call=call_seq,
                  disposition=disposition, effects=args.get("effects") or [],
                  next_owner=args.get("next_owner"), reason=args.get("reason") or "",
                  packet=args.get("packet"), accepted=accepted, stale=stale)
        if accepted:
            if state in TERMINAL_STATES:
                run.finished = disposition
                run.waiting = None
            else:
                run.waiting = disposition
                wake_at = args.get("wake_at")
                run.wake_at = wake_at if isinstance(wake_at, int) and not isinstance(wake_at, bool) \
                    else None
        return {"accepted": accepted}

    def _p_lease_acquire(self, run, worker, args, call_seq):
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
        worker.epoch = lease.epoch
        self.emit("run", "lease", worker=worker.name, run=run.spec.id, op="acquire",
                  epoch=lease.epoch, owner=worker.name, expires_at=lease.expires_at, call=call_seq)
        return {"epoch": lease.epoch, "owner": worker.name, "expires_at": lease.expires_at}

    def _lease_ok(self, run: RunWorld, epoch: Any) -> bool:
        return epoch == run.lease.epoch and run.lease.expires_at > self.now

    def _p_lease_renew(self, run, worker, args, call_seq):
        epoch, ttl = args.get("epoch"), args.get("ttl_ms")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise PortError("bad_request", "lease.renew needs a positive integer ttl_ms")
        if not self._lease_ok(run, epoch) or run.lease.owner != worker.name:
            raise PortError("stale_epoch", f"epoch {epoch!r} is not the current live lease "
                            f"(current {run.lease.epoch}, expires {run.lease.expires_at})",
                            details={"current_epoch": run.lease.epoch})
        run.lease.expires_at = self.now + ttl
        self.emit("run", "lease", worker=worker.name, run=run.spec.id, op="renew",
                  epoch=epoch, owner=worker.name, expires_at=run.lease.expires_at, call=call_seq)
        return {"epoch": epoch, "expires_at": run.lease.expires_at}

    def _p_lease_read(self, run, worker, args, call_seq):
        lease = run.lease
        return {"epoch": lease.epoch, "owner": lease.owner, "expires_at": lease.expires_at}

    def _p_checkpoints_load(self, run, worker, args, call_seq):
        if not run.checkpoints:
            return {"version": 0, "checkpoint": None}
        latest = run.checkpoints[-1]
        return {"version": latest["version"], "checkpoint": latest["checkpoint"]}

    def _p_checkpoints_history(self, run, worker, args, call_seq):
        return {"versions": [dict(v) for v in run.checkpoints]}

    def _p_checkpoints_write(self, run, worker, args, call_seq):
        checkpoint = args.get("checkpoint")
        expected, epoch = args.get("expected_version"), args.get("lease_epoch")
        problems = validate_checkpoint(checkpoint)
        if problems:
            self.emit("worker", "adapter_fault", worker=worker.name, run=run.spec.id, call=call_seq,
                      fault="invalid_checkpoint", problems=problems, checkpoint=checkpoint,
                      message="checkpoint failed the harness schema: " + "; ".join(problems))
            raise PortError("invalid", "; ".join(problems), details={"problems": problems})
        latest = run.checkpoints[-1]["version"] if run.checkpoints else 0
        if expected != latest:
            self.emit("run", "checkpoint_rejected", worker=worker.name, run=run.spec.id,
                      call=call_seq, reason="version_conflict", expected=expected, latest=latest,
                      epoch=epoch)
            raise PortError("version_conflict", f"expected version {expected!r}, latest is {latest}",
                            details={"latest": latest})
        if not self._lease_ok(run, epoch):
            self.emit("run", "checkpoint_rejected", worker=worker.name, run=run.spec.id,
                      call=call_seq, reason="stale_epoch", expected=expected, latest=latest,
                      epoch=epoch, current_epoch=run.lease.epoch)
            raise PortError("stale_epoch", f"lease epoch {epoch!r} is not current and live "
                            f"(current {run.lease.epoch})", details={"current_epoch": run.lease.epoch})
        version = latest + 1
        run.checkpoints.append({"version": version, "checkpoint": checkpoint, "at": self.now,
                                "writer": worker.name})
        control = checkpoint["control"]
        self.emit("run", "checkpoint", worker=worker.name, run=run.spec.id, call=call_seq,
                  version=version, state=control["state"], owner=control["owner"],
                  epoch=epoch, state_version=control["state_version"], checkpoint=checkpoint)
        return {"version": version}

    def _p_ledger_append(self, run, worker, args, call_seq):
        entry = args.get("entry")
        problems = validate_effect_entry(entry)
        if problems:
            self.emit("worker", "adapter_fault", worker=worker.name, run=run.spec.id, call=call_seq,
                      fault="invalid_effect_entry", problems=problems, entry=entry,
                      message="effect entry failed the harness schema: " + "; ".join(problems))
            raise PortError("invalid", "; ".join(problems), details={"problems": problems})
        epoch = entry["lease_epoch"]
        if epoch != worker.epoch or not self._lease_ok(run, epoch):
            # Fenced like a checkpoint write: only the current, live lease epoch appends.
            self.emit("run", "ledger_rejected", worker=worker.name, run=run.spec.id, call=call_seq,
                      reason="stale_epoch", epoch=epoch, current_epoch=run.lease.epoch,
                      key=entry["semantic_key"])
            raise PortError("stale_epoch", f"lease epoch {epoch!r} is not this worker's current, live "
                            f"epoch (current {run.lease.epoch})", details={"current_epoch": run.lease.epoch})
        previous = self.key_knowledge(run, entry["semantic_key"])
        run.ledger.append(entry)
        self.emit("knowledge", "ledger", worker=worker.name, run=run.spec.id, call=call_seq,
                  index=len(run.ledger), key=entry["semantic_key"], knowledge=entry["knowledge"],
                  previous=previous, epoch=entry["lease_epoch"], live_epoch=run.lease.epoch,
                  entry=entry)
        return {"index": len(run.ledger)}

    def _p_ledger_read(self, run, worker, args, call_seq):
        key = args.get("semantic_key")
        return {"entries": [e for e in run.ledger if e["semantic_key"] == key]}

    def _p_ledger_by_run(self, run, worker, args, call_seq):
        return {"entries": list(run.ledger)}

    def _p_inbox_poll(self, run, worker, args, call_seq):
        after = args.get("after_seq", 0)
        if not isinstance(after, int) or isinstance(after, bool):
            raise PortError("bad_request", "inbox.poll needs an integer after_seq")
        return {"events": [e for e in run.inbox if e["seq"] > after]}

    def _p_authority_request(self, run, worker, args, call_seq):
        phash, action = args.get("proposal_hash"), args.get("action")
        if not isinstance(phash, str) or not isinstance(action, str):
            raise PortError("bad_request", "authority.request needs proposal_hash and action strings")
        request_id = f"AR-{len(run.requests) + 1}"
        req = {"request_id": request_id, "proposal_hash": phash, "action": action, "at": self.now}
        run.requests.append(req)
        self.emit("run", "approval_requested", worker=worker.name, run=run.spec.id, call=call_seq,
                  **req)
        mode = run.spec.approval.get("mode", "auto")
        if action != run.spec.operation:
            # corrective actions follow the run's compensation-authority policy
            if run.spec.compensation_authority == "granted":
                self.env.process(self._grant_later(run, req, 0))
        elif mode == "auto":
            self.env.process(self._grant_later(run, req, run.spec.approval["delay_ms"]))
        elif mode == "manual" and run.pending_approve:
            run.pending_approve.pop(0)
            self.env.process(self._grant_later(run, req, 0))
        return {"request_id": request_id}

    def _grant_later(self, run: RunWorld, req: dict, delay: int):
        if delay:
            yield self.env.timeout(delay)
        self.grant(run, req)

    def grant(self, run: RunWorld, req: dict) -> None:
        approval = Approval(approval_id=f"AP-{len(run.approvals) + 1}",
                            proposal_hash=req["proposal_hash"], action=req["action"],
                            granted_at=self.now,
                            expires_at=self.now + run.spec.approval["expires_after_ms"],
                            capability_version=run.capability_version)
        run.approvals.append(approval)
        self.emit("world", "approval_granted", run=run.spec.id, approval_id=approval.approval_id,
                  proposal_hash=approval.proposal_hash, action=approval.action,
                  expires_at=approval.expires_at, capability_version=approval.capability_version)
        self.deliver(run, "approval", {"approval_id": approval.approval_id,
                                       "proposal_hash": approval.proposal_hash,
                                       "action": approval.action, "expires_at": approval.expires_at,
                                       "request_id": req["request_id"]}, producer="authority")

    def live_approval(self, run: RunWorld, phash: Any, action: Any) -> Approval | None:
        if run.spec.approval.get("mode") == "none" and action == run.spec.operation:
            return Approval("standing", str(phash), str(action), 0, 1 << 62, run.capability_version)
        for ap in reversed(run.approvals):
            if (ap.proposal_hash == phash and ap.action == action and not ap.revoked
                    and ap.expires_at > self.now and ap.capability_version == run.capability_version):
                return ap
        return None

    def _p_authority_check(self, run, worker, args, call_seq):
        phash, action = args.get("proposal_hash"), args.get("action")
        ap = self.live_approval(run, phash, action)
        if ap is not None:
            return {"live": True, "approval_id": ap.approval_id, "expires_at": ap.expires_at,
                    "revoked": False, "capability_version": run.capability_version, "reason": "live"}
        if action != run.spec.operation and run.spec.compensation_authority == "denied":
            reason = "denied by policy"
        else:
            bound = [a for a in run.approvals if a.proposal_hash == phash and a.action == action]
            if not bound:
                reason = "no approval bound to this proposal hash"
            elif bound[-1].revoked:
                reason = "revoked"
            elif bound[-1].capability_version != run.capability_version:
                reason = "capability version changed"
            else:
                reason = "expired"
        return {"live": False, "approval_id": None, "expires_at": None,
                "revoked": reason == "revoked", "capability_version": run.capability_version,
                "reason": reason}

    def _p_operator_escalate(self, run, worker, args, call_seq):
        packet = args.get("packet")
        if not isinstance(packet, dict):
            raise PortError("bad_request", "operator.escalate needs a packet object")
        run.tickets += 1
        ticket = f"OP-{run.tickets}"
        self.emit("run", "escalation", worker=worker.name, run=run.spec.id, call=call_seq,
                  ticket=ticket, packet=packet)
        return {"ticket": ticket}

    # -- transport to services ----------------------------------------------------------
    def _service_call(self, run, worker, call, call_seq, fault):
        svc = self.services[call.port]
        prof = svc.profile
        if call.op not in SERVICE_OPS[svc.kind]:
            raise PortError("bad_request", f"service {call.port!r} has no operation {call.op!r}")
        args = dict(call.args)
        if not isinstance(args.get("key"), (str, type(None))):
            raise PortError("bad_request", f"{call.port}.{call.op}: 'key' must be a string, "
                            f"got {type(args.get('key')).__name__}")
        jitter = self.streams.get("transport")
        latency = prof["latency_ms"]
        one_way = latency + jitter.randint(0, max(1, latency // 4))
        timeout = prof["timeout_ms"]
        kind = fault.fault if fault is not None else None
        rid = run.spec.id
        is_effect = call.op in EFFECT_OPS[svc.kind]
        if call.op == "wait_job":
            wait = args.get("wait_ms", 0)
            rec = getattr(svc, "jobs", {}).get(args.get("job_id"))
            remaining = max(0, prof.get("job_ms", 0) - (self.now - rec.committed_at)) if rec else 0
            yield self.env.timeout(min(max(0, int(wait or 0)), remaining) + 2 * one_way)
            return svc.execute(call.op, args, cause="adapter", run=rid, call=call_seq)

        def arrive(cause="adapter"):
            return svc.execute(call.op, args, cause=cause, run=rid, call=call_seq)

        if kind == "refused":
            raise PortError("refused", f"{call.port}: connection refused")
        if kind == "timeout_before_send":
            yield self.env.timeout(timeout)
            raise PortError("timeout_before_send", f"{call.port}: connect timed out; nothing was sent")
        if kind == "throttled":
            yield self.env.timeout(one_way * 2)
            retry_after = fault.delay_ms if fault.delay_ms is not None else 1000
            raise PortError("throttled", f"{call.port}: 429 too many requests",
                            details={"retry_after_ms": retry_after})
        if kind in ("unavailable", "error"):
            yield self.env.timeout(one_way * 2)
            code = fault.code or "unavailable"
            raise PortError(code, f"{call.port}.{call.op}: injected {code}")
        if kind == "drop_request":
            yield self.env.timeout(timeout)
            self.emit("remote", "dropped", run=rid, service=call.port, op=call.op, call=call_seq)
            raise PortError("timeout", f"{call.port}: no response within {timeout} ms")
        if kind == "late_arrival":
            delay = fault.delay_ms if fault.delay_ms is not None else timeout + 1000
            self.env.process(self._late(svc, call, args, rid, call_seq, delay))
            yield self.env.timeout(timeout)
            raise PortError("timeout", f"{call.port}: no response within {timeout} ms")

        # The request travels to the service.
        yield self.env.timeout(one_way)
        if is_effect:
            key = args.get("key")
            if key is not None and svc.profile["idempotency"] in ("semantic", "key_only") \
                    and svc.in_flight.get(key):
                raise PortError("conflict_in_flight", f"a request with key {key!r} is executing")
        if kind == "server_error_before":
            self.emit("remote", "server_error", run=rid, service=call.port, op=call.op,
                      call=call_seq, committed=False)
            yield from self._proxy_retries(svc, call, args, rid, call_seq, arrive)
            yield self.env.timeout(one_way)
            raise PortError("server_error", f"{call.port}: 503 service unavailable")
        result = arrive()
        if kind == "duplicate_delivery":
            delay = fault.delay_ms if fault.delay_ms is not None else 5
            self.env.process(self._duplicate(svc, call, args, rid, call_seq, delay))
        if kind == "server_error_after":
            self.emit("remote", "server_error", run=rid, service=call.port, op=call.op,
                      call=call_seq, committed=True)
            yield from self._proxy_retries(svc, call, args, rid, call_seq, arrive)
            yield self.env.timeout(one_way)
            raise PortError("server_error", f"{call.port}: 502 bad gateway")
        if kind == "lost_response":
            yield self.env.timeout(max(0, timeout - one_way))
            self.emit("remote", "response_lost", run=rid, service=call.port, op=call.op, call=call_seq)
            raise PortError("timeout", f"{call.port}: no response within {timeout} ms")
        if is_effect and prof.get("callback_delay_ms") is not None:
            self.env.process(self._callback(run, svc, call, result, prof["callback_delay_ms"]))
        yield self.env.timeout(one_way)
        return result

    def _proxy_retries(self, svc, call, args, rid, call_seq, arrive):
        """A proxy between worker and service that re-sends on 5xx by itself, unless the caller
        declares it owns retries (``retry_owner: "caller"`` in the request)."""
        if call.op not in EFFECT_OPS[svc.kind] or args.get("retry_owner") == "caller":
            return
        for attempt in range(svc.profile["proxy_retries"]):
            yield self.env.timeout(svc.profile["latency_ms"])
            self.emit("remote", "proxy_retry", run=rid, service=svc.name, op=call.op, call=call_seq,
                      attempt=attempt + 1)
            try:
                arrive("proxy_retry")
            except PortError:
                pass

    def _late(self, svc, call, args, rid, call_seq, delay):
        # the request is executing at the service until it lands: a lookup reports it
        # in flight and a same-key request meets a 409
        key = args.get("key")
        if key is not None:
            svc.in_flight[key] = svc.in_flight.get(key, 0) + 1
        yield self.env.timeout(delay)
        if key is not None:
            svc.in_flight[key] -= 1
        self.emit("remote", "late_arrival", run=rid, service=svc.name, op=call.op, call=call_seq,
                  delay_ms=delay)
        try:
            svc.execute(call.op, args, cause="adapter", run=rid, call=call_seq)
        except PortError as exc:
            self.emit("remote", "late_rejected", run=rid, service=svc.name, call=call_seq, code=exc.code)

    def _duplicate(self, svc, call, args, rid, call_seq, delay):
        yield self.env.timeout(delay)
        self.emit("remote", "duplicate_delivery", run=rid, service=svc.name, op=call.op, call=call_seq)
        try:
            svc.execute(call.op, args, cause="duplicate_delivery", run=rid, call=call_seq)
        except PortError as exc:
            self.emit("remote", "late_rejected", run=rid, service=svc.name, call=call_seq, code=exc.code)

    def _callback(self, run, svc, call, result, delay):
        yield self.env.timeout(delay)
        self.deliver(run, "callback", {"service": svc.name, "op": call.op, "key": call.args.get("key"),
                                       "result": result}, producer=svc.name)

    # ------------------------------------------------------------------ world events
    def schedule_events(self) -> None:
        for event in self.scenario.events:
            if event.anchor is None:
                self.env.process(self._world_event(event))
        for run in self.runs.values():
            self.env.process(self._intake(run))
        for svc in self.services.values():
            if svc.profile.get("background_ms"):
                self.env.process(self._background(svc))

    def _background(self, svc: Service):
        """Other actors' traffic on the same service, from its own seeded stream, so aggregate
        reads are genuinely ambiguous: holds on the runs' parts under other incidents."""
        stream = self.streams.get(f"background:{svc.name}")
        parts = sorted({str(r.spec.intent.get("part")) for r in self.runs.values()
                        if r.spec.service == svc.name and r.spec.intent.get("part")}) or ["P-1"]
        mean = svc.profile["background_ms"]
        n = 0
        while True:
            yield self.env.timeout(1 + stream.randint(mean // 2, mean + mean // 2))
            n += 1
            intent = {"tenant": "T-OTHER", "incident": f"I-BG-{n}", "part": stream.choice(parts),
                      "slot": f"S-BG-{stream.randint(1, 99)}", "technician": "TECH-OTHER", "quantity": 1,
                      "principal": "U-OTHER"}
            try:
                svc.execute("reserve", {"key": f"background-{n}", "intent": intent}, cause="other_actor",
                            run=None, call=None)
            except PortError as exc:
                self.emit("remote", "other_actor_rejected", code=exc.code)

    def _intake(self, run: RunWorld):
        yield self.env.timeout(run.spec.start_ms)
        self.deliver(run, "intake", {"intent": dict(run.spec.intent), "service": run.spec.service,
                                     "operation": run.spec.operation,
                                     "deadline": run.spec.deadline_ms, "notify": run.spec.notify},
                     producer="intake", event_id=f"intake-{run.spec.id}", producer_seq=1)

    def _anchored(self, when: str, run: RunWorld, worker: WorkerState, call: PortCall, nth: int) -> list:
        """The not yet fired events anchored ``when`` (before / after) a call like this one, matched
        as the call is made; each is marked fired (an anchored event fires at most once)."""
        out = []
        for index, ev in self._anchors:
            if ev.anchor == when and index not in self.anchors_fired and \
                    self.matches(ev.match, run, worker, call, nth):
                self.anchors_fired.add(index)
                out.append(ev)
        return out

    def _deliver_anchored(self, events: list) -> None:
        """Schedule anchored events from this moment: each is delivered its delay later."""
        for ev in events:
            self.env.process(self._world_event(ev))

    def _world_event(self, ev):
        yield self.env.timeout(ev.at_ms)
        data = dict(ev.data)
        run = self.runs.get(ev.run) if ev.run else None
        self.emit("world", ev.type, run=ev.run, data=data, line=ev.line)
        if ev.type == "deploy":
            self.env_current.update(data)
            for rw in self.runs.values():
                if rw.waiting != "PINNED":
                    rw.env.update(data)
            return
        if ev.type == "other_actor":
            svc = self.services[data.get("service", "reservation")]
            try:
                svc.execute(data.get("op", "reserve"), dict(data.get("args") or {}),
                            cause="other_actor", run=None, call=None)
            except PortError as exc:
                self.emit("remote", "other_actor_rejected", code=exc.code)
            return
        if run is None:
            return
        if ev.type == "approve":
            if run.requests:
                self.grant(run, run.requests[-1])
            else:
                run.pending_approve.append(data)
            return
        if ev.type == "revoke":
            for ap in run.approvals:
                ap.revoked = True
            self.deliver(run, "revocation", data, producer="authority")
            return
        if ev.type == "capability_change":
            run.capability_version += 1
            self.deliver(run, "capability_change", {"capability_version": run.capability_version},
                         producer="authority")
            return
        etype = {"event": data.pop("kind", "event")}.get(ev.type, ev.type)
        copies = 1 + int(data.pop("duplicates", 0))
        gap = int(data.pop("duplicate_after_ms", 0))
        event_id = data.pop("event_id", None)
        producer_seq = data.pop("producer_seq", None)
        producer = data.pop("producer", "user")     # every copy keeps the declared producer
        if event_id is None:
            self._event_ids += 1
            event_id = f"ev-{self._event_ids}"
        for copy in range(copies):
            if copy and gap:
                yield self.env.timeout(gap)
            self.deliver(run, etype, data, producer=producer, event_id=event_id, producer_seq=producer_seq)
