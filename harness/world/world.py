"""The simulated world, on simpy: clock, seeded streams, transport, scenario events (rule matching: faults.py).

A port call is matched against the scenario's rules, then run: a service call crosses the
transport (and its faults) to the service; a platform call takes its latency and any injected
fault here, then goes to its primitive (platform.py) through one (port, op) table.

Time is integer milliseconds since the scenario origin. Every source of randomness is a
named stream derived from the seed (``streams.get("transport")``), so adding a component
never shifts another's draws. Nothing here reads the wall clock.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Generator

import simpy

from ..vocab import events
from . import transport
from .boundary import refuse_malformed
from ..vocab.events import Event
from .faults import Rules
from ..vocab.model import PLATFORM_PORTS, SERVICE_OPS, PortCall
from .platform import Approval, Authority, CheckpointStore, Inbox, Lease, Leases, Ledger, RunControl
from .ports import PortError
from ..vocab.compiled import Rule, RunSpec, Scenario
from .services import SERVICE_CLASSES, Service
from .trace import Trace

PLATFORM_LATENCY_MS = (1, 4)   # each store call takes a few simulated ms, drawn per call


class Streams:
    """Independent named random streams derived from one seed."""

    __slots__ = ("seed", "_streams")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[str, random.Random] = {}

    def get(self, name: str) -> random.Random:
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = transport.named_stream(self.seed, name)
        return stream


# --------------------------------------------------------------------------- platform state
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
    base_version: int = 0                                       # the store's version before any write
    base_epoch: int = 0                                         # lease epochs used before the scenario


@dataclass(slots=True)
class WorkerState:
    name: str
    number: int
    run: str
    env: dict
    epoch: int | None = None
    alive: bool = True
    paused: bool = False
    fenced: bool = False        # a store or the lease answered it stale_epoch: its finish will not count


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
            rw = RunWorld(spec=spec, env=dict(scenario.env),
                          base_version=spec.history.get("checkpoint_version", 0),
                          base_epoch=spec.history.get("lease_epoch", 0),
                          lease=Lease(epoch=spec.history.get("lease_epoch", 0)))
            rw.wake = self.env.event()
            self.runs[spec.id] = rw
        self.rules = Rules(scenario.rules, lambda: int(self.env.now), self.key_knowledge)
        self._anchors = [(i, ev) for i, ev in enumerate(scenario.events) if ev.anchor is not None]
        self.anchors_fired: set[int] = set()     # indexes of scenario events anchored to a call, fired
        self.emit = self.trace.emit  # the hot path skips one call layer
        self.env_current = dict(scenario.env)
        self._proxy_calls = 0
        self.leases = Leases(self)
        self.store = CheckpointStore(self, self.leases)
        self.ledger = Ledger(self, self.leases)
        self.inbox = Inbox(self)
        self.authority = Authority(self, self.inbox)
        # (port, op) -> handler, for every platform port but the clock (platform.py)
        self._handlers = {key: handler for primitive in (self.leases, self.store, self.ledger, self.inbox,
                                                          self.authority, RunControl(self))
                          for key, handler in primitive.handlers().items()}

    # ------------------------------------------------------------------ small helpers
    @property
    def now(self) -> int:
        return int(self.env.now)

    def emit(self, event: type[Event], /, **data: Any) -> dict:  # replaced per instance below
        return self.trace.emit(event, **data)

    def key_knowledge(self, run: RunWorld, key: str | None) -> str | None:
        return self.ledger.knowledge(run, key)

    # ------------------------------------------------------------------ rule matching (faults.py)
    def matches(self, m, run: RunWorld, worker: WorkerState, call: PortCall, nth: int) -> bool:
        """Whether a call meets every condition of a ``match`` (rules and anchored events)."""
        return self.rules.matches(m, run, run.spec.id, worker.number, call, nth)

    def match_rules(self, action: str, run: RunWorld, worker: WorkerState, call: PortCall,
                    nth: int) -> Rule | None:
        return self.rules.match(action, run, run.spec.id, worker.number, call, nth)

    # ------------------------------------------------------------------ execution
    def execute(self, run: RunWorld, worker: WorkerState, call: PortCall, call_seq: int,
                nth: int) -> Generator[Any, Any, dict]:
        """Run one port call on the world. Returns the result value or raises PortError.

        This is a simpy sub-process body (``yield from``): it may take simulated time. Events
        anchored to this call are scheduled before it executes and after it completes.
        """
        refuse_malformed(call)  # arguments of the wrong shape: bad_request, before anything happens
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
            self.emit(events.Fault, worker=worker.name, run=run.spec.id, call=call_seq,
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

    # -- platform primitives (platform.py) ----------------------------------------------
    def _platform(self, run: RunWorld, worker: WorkerState, call: PortCall, call_seq: int) -> dict:
        return self._handlers[call.port, call.op](run, worker, call.args, call_seq)

    # -- transport to services (the plan of steps: transport.py) -------------------------
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
        steps = transport.plan(call.port, svc.kind, prof, call.op, args, fault)
        return (yield from self._steps(steps, run, svc, call, args, call_seq, one_way))

    def _span(self, span: str, svc: Service, args: dict, one_way: int) -> int:
        prof = svc.profile
        if span == "one_way":
            return one_way
        if span == "round_trip":
            return 2 * one_way
        if span == "timeout":
            return prof["timeout_ms"]
        if span == "timeout_rest":       # the caller's timeout, less the way the request took
            return max(0, prof["timeout_ms"] - one_way)
        if span == "latency":
            return prof["latency_ms"]
        rec = getattr(svc, "jobs", {}).get(args.get("job_id"))          # job
        remaining = max(0, prof.get("job_ms", 0) - (self.now - rec.committed_at)) if rec else 0
        return min(max(0, int(args.get("wait_ms", 0) or 0)), remaining) + 2 * one_way

    def _steps(self, steps, run, svc, call, args, call_seq, one_way):
        """Run a transport plan in simulated time: returns the answer or raises PortError."""
        rid = run.spec.id
        result, committed = None, False
        for step in steps:
            t = type(step)
            if t is transport.Wait:
                yield self.env.timeout(self._span(step.span, svc, args, one_way))
            elif t is transport.Admit:
                svc.refuse_in_flight(call.op, args)
            elif t is transport.Commit:
                try:
                    result = svc.execute_stale(step.stale_ms, call.op, args, cause=step.cause, run=rid, call=call_seq)
                    committed = True
                except PortError as exc:
                    committed = False
                    if step.on_refusal == "raise":
                        raise
                    if step.on_refusal == "record":
                        self.emit(events.LateRejected, run=rid, service=svc.name, call=call_seq, code=exc.code)
            elif t is transport.Callback:
                if committed:
                    delay = svc.callback_delay(call.op, result)
                    if delay is not None:
                        self.env.process(self._callback(run, svc, call, result, delay))
            elif t is transport.Emit:
                self.emit(step.event, run=rid, service=svc.name, op=call.op, call=call_seq, **step.fields)
            elif t is transport.Later:
                self.env.process(self._later(step, run, svc, call, args, call_seq, one_way))
            elif t is transport.Answer:
                return result
            elif t is transport.Fail:
                raise PortError(step.code, step.message, details=step.details)
            else:   # Close
                raise PortError(step.code, step.message)
        return result

    def _later(self, step, run, svc, call, args, call_seq, one_way):
        # a late arrival is executing at the service until it lands: a lookup reports it in
        # flight and a same-key request meets a 409
        key = args.get("key") if step.holds_key else None
        if key is not None:
            svc.in_flight[key] = svc.in_flight.get(key, 0) + 1
        yield self.env.timeout(step.delay_ms)
        if key is not None:
            svc.in_flight[key] -= 1
        yield from self._steps(step.steps, run, svc, call, args, call_seq, one_way)

    def _callback(self, run, svc, call, result, delay):
        yield self.env.timeout(delay)
        self.inbox.deliver(run, "callback", {"service": svc.name, "op": call.op, "key": call.args.get("key"),
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
        """Other actors' traffic on the same service (transport.background, its own seeded stream)."""
        parts = transport.background_parts([r.spec for r in self.runs.values()], svc.name)
        for gap, args in transport.background(self.streams.get(f"background:{svc.name}"),
                                              svc.profile["background_ms"], parts):
            yield self.env.timeout(gap)
            try:
                svc.execute("reserve", args, cause="other_actor", run=None, call=None)
            except PortError as exc:
                self.emit(events.OtherActorRejected, code=exc.code)

    def _intake(self, run: RunWorld):
        yield self.env.timeout(run.spec.start_ms)
        self.inbox.deliver(run, "intake", {"intent": dict(run.spec.intent), "service": run.spec.service,
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
                out.append((ev, call))
        return out

    def _deliver_anchored(self, events: list) -> None:
        """Schedule anchored events from this moment: each is delivered its delay later."""
        for ev, call in events:
            self.env.process(self._world_event(ev, call))

    def _world_event(self, ev, anchor_call: PortCall | None = None):
        yield self.env.timeout(ev.at_ms)
        data = dict(ev.data)
        if data.pop("same_key", False):
            # the key of the call this event is anchored to (the loader requires the anchor)
            data["args"] = {**data.get("args", {}), "key": anchor_call.args.get("key") if anchor_call else None}
        run = self.runs.get(ev.run) if ev.run else None
        self.trace.emit_scenario(ev.type, run=ev.run, data=data, line=ev.line)
        if ev.type == "deploy":
            for name, changed in (data.get("services") or {}).items():
                # the service's contract changes now, for every caller; a worker learns it from
                # describe() (workers that started before keep what they read)
                self.services[name].profile.update(changed)
            versions = {k: v for k, v in data.items() if k != "services"}
            self.env_current.update(versions)
            for rw in self.runs.values():
                if rw.waiting != "PINNED":
                    rw.env.update(versions)
            return
        if ev.type == "other_actor":
            svc = self.services[data.get("service", "reservation")]
            try:
                svc.execute(data.get("op", "reserve"), dict(data.get("args") or {}),
                            cause="other_actor", run=None, call=None)
            except PortError as exc:
                self.emit(events.OtherActorRejected, code=exc.code)
            return
        if run is None:
            return
        if ev.type == "approve":
            self.authority.approve(run, data)
            return
        if ev.type == "revoke":
            self.authority.revoke(run, data)
            return
        if ev.type == "capability_change":
            self.authority.change_capability(run)
            return
        etype = {"event": data.pop("kind", "event")}.get(ev.type, ev.type)
        copies = 1 + int(data.pop("duplicates", 0))
        gap = int(data.pop("duplicate_after_ms", 0))
        event_id = data.pop("event_id", None)
        producer_seq = data.pop("producer_seq", None)
        producer = data.pop("producer", "user")     # every copy keeps the declared producer
        record = data.pop("record", None)
        if event_id is None:
            event_id = self.inbox.new_event_id()
        for copy in range(copies):
            if copy and gap:
                yield self.env.timeout(gap)
            delivered = self.inbox.deliver(run, etype, data, producer=producer, event_id=event_id,
                                           producer_seq=producer_seq)
            if record == "checkpoint" and not copy:     # the first copy is recorded; the others are duplicates
                self.store.record_cancellation(run, delivered)
