"""The sandbox: a scenario's synthetic services as real HTTP endpoints on 127.0.0.1.

The semantics are crashlab.world.services' (the same classes the simulator runs), the rules are
matched by crashlab.world.faults and what a fault does to a call is crashlab.world.transport's plan; this
module runs each request's plan on the socket (hold, commit, answer, or close with no answer),
handler.py reads and writes the HTTP by the mapping in httpmap.py.
Everything the services do is written to one trace in crashlab's vocabulary (``Sandbox.trace``): every request as a ``call`` and its answer as a ``result``
on the port lane, every commit, replay, refusal and fault on the remote and fault lanes.

Time is real and scaled: the sandbox's clock reads scenario milliseconds, ``time_scale``
of them per real millisecond, so a scenario's durations (timeouts, retry-after, retention,
late-arrival delays) pass ``time_scale`` times faster; ``describe`` answers them divided.

Hooks let a supervisor (crashlab.integrate) act at the service boundaries: read the worker's
store while it is blocked on a request, kill or pause it when a crash or pause rule matches.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote

from ..vocab import events
from ..world import transport
from ..vocab.errors import UsageError
from ..world.faults import Rules
from ..vocab.model import PortCall
from ..world.ports import PortError
from ..vocab.compiled import Rule, Scenario
from ..world.services import SERVICE_CLASSES, Service
from ..world.trace import Trace
from .httpmap import STATUS
from .world_events import AUTHORITY_EVENTS, UNDELIVERED, WorldEvents  # noqa: F401 (re-exported)

MAX_HOLD_S = 30.0           # no request is held longer than this, whatever the scale
MAX_REQUESTS = 5_000        # requests per worker (the simulator's step budget): beyond it, a flood




class Clock:
    """Scenario milliseconds from a real monotonic clock, ``scale`` of them per real ms."""

    def __init__(self, scale: float) -> None:
        if not scale > 0:
            raise UsageError(f"--time-scale must be positive, got {scale}")
        self.scale = float(scale)
        self.t0 = time.monotonic()

    def now(self) -> int:
        return int((time.monotonic() - self.t0) * 1000 * self.scale)

    def real_s(self, scenario_ms: int | float) -> float:
        """Real seconds a scenario duration takes."""
        return max(0.0, float(scenario_ms)) / 1000.0 / self.scale


@dataclass(slots=True)
class Caller:
    """A worker the sandbox knows: the slug of its base URL, its run and number."""

    slug: str
    run: str
    number: int
    name: str
    requests: int = 0
    acted: bool = False     # it made a service request other than describe (a read, a send): it works on the run


@dataclass(slots=True)
class Gate:
    """A paused worker's request. The supervisor opens it when the worker is about to run again; the
    sandbox then lets a request held at ``before`` leave, and sets ``written`` once the answer is on the
    socket, so that the answer is waiting when the worker runs, as for a request that left at once
    (a worker stopped past its client's timeout then reads its answer rather than timing out)."""

    opened: threading.Event = field(default_factory=threading.Event)
    written: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False     # the worker will never run again: its held request never left

    def cancel(self) -> None:
        """The worker died (or the run ended) while stopped: a request held at ``before`` is dropped,
        unexecuted and unanswered, as a request the worker never sent."""
        self.cancelled = True
        self.opened.set()


class Hooks:
    """What a supervisor does at the service boundaries; these defaults do nothing (``serve``)."""

    supervised = False      # crash and pause rules apply only when a supervisor can kill and pause

    def observe(self, caller: Caller) -> None:
        """The worker is blocked on a request: read its store now."""

    def killable(self, caller: Caller) -> bool:
        """Whether a crash rule can kill this caller now (a live worker the supervisor owns)."""
        return False

    def crash(self, caller: Caller, boundary: str, rule: Rule) -> None:
        """Kill the worker (its process group)."""

    def pause(self, caller: Caller, rule: Rule, call_seq: int) -> "Gate | None":
        """Stop the worker and resume it later. Returns the paused request's Gate (a request held at
        ``before`` leaves when it opens), or None to hold the request for the rule's ``resume_after``."""
        return None

    def knowledge(self, run: str, key: Any) -> str | None:
        """The latest ledger knowledge of ``key`` in ``run`` (for rules matching on knowledge)."""
        return None

    def over_budget(self, caller: Caller, budget: int) -> None:
        """The worker sent more than ``budget`` requests: stop it (a recorded fault)."""

    def deployed(self, data: dict) -> None:
        """A scenario's deploy event, now (under the sandbox's lock): a supervisor that redeploys
        (crashlab.integrate.deploy) starts the next code version from here; by default nothing."""


class Sandbox(WorldEvents):
    """One scenario's services over HTTP. ``start()`` returns the root URL; ``stop()`` closes
    the socket and ends every held request. Thread-safe: one lock orders the services and the
    trace."""

    def __init__(self, scenario: Scenario, *, time_scale: float = 1.0, port: int = 0,
                 hooks: Hooks | None = None, adapter: str = "sandbox", header: dict | None = None) -> None:
        self.scenario = scenario
        self.adapter = adapter
        self.header = dict(header or {})     # more header fields (an integration run's options)
        self.clock = Clock(time_scale)
        self.hooks = hooks or Hooks()
        self.lock = threading.RLock()
        self.trace = Trace(self.clock.now)
        self.ended = False               # the end event is written: a straggling thread writes nothing more
        self.services: dict[str, Service] = {
            name: SERVICE_CLASSES[name](name, dict(profile), self._emit_locked, self.clock.now)
            for name, profile in scenario.services.items()}
        self.rules = Rules(scenario.rules, self.clock.now, lambda run, key: self.hooks.knowledge(run, key))
        self.callers: dict[str, Caller] = {}
        self.ordinals: dict[tuple, int] = {}
        self.inbox: dict[str, list[dict]] = {spec.id: [] for spec in scenario.runs}
        self.polled: dict[str, int] = {}         # run -> inbox events its workers' last poll returned
        self.upcoming: dict[str | None, int] = {}   # run -> scenario actions scheduled for it, not yet done
        self.pending = 0                 # late arrivals and duplicates not yet landed
        self.anchors_fired: set[int] = set()
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._threads: list[threading.Thread] = []   # other actors' background traffic
        self._event_ids = 0
        self._port = port
        self.httpd: "Server | None" = None
        self._thread: threading.Thread | None = None
        from .authority import Authority
        self.authority = Authority(self)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> str:
        from .handler import Handler, Server

        handler = type("Handler", (Handler,), {"sandbox": self})
        try:
            self.httpd = Server(("127.0.0.1", self._port), handler)
        except OSError as exc:
            raise UsageError(f"cannot listen on 127.0.0.1:{self._port}: {exc.strerror or exc}",
                             hint="choose another --port, or 0 for any free port") from None
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="crashlab-sandbox", daemon=True)
        self._thread.start()
        from ..run.runner import header_fields
        from .authority import header_runs
        fields = header_fields(self.scenario, self.scenario.seed, self.adapter)
        fields["runs"] = header_runs(self.scenario, fields["runs"])   # the approval policy the sandbox applies
        with self.lock:
            self.emit(events.Header, **fields, **self.header)
        self.clock.t0 = time.monotonic()
        self._schedule_world()
        return self.root

    @property
    def root(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self._stop.set()
        for timer in self._timers:
            timer.cancel()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)

    def emit(self, event, /, **data) -> dict:
        """Record an event (call with the lock held); after the end event, nothing is recorded (a
        request thread still unwinding when the sandbox stopped)."""
        if self.ended:
            return {"seq": -1}
        return self.trace.emit(event, **data)

    def end(self, runs: dict) -> list[dict]:
        """Write the end event (per run: finished, waiting, workers) and return the whole trace."""
        with self.lock:
            self.emit(events.End, runs=runs)
            self.ended = True
            return list(self.trace.events)

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ callers
    def register(self, run: str, number: int) -> Caller:
        """A worker of ``run`` numbered ``number``; its base URL is ``url(caller)``."""
        if run not in self.inbox:
            raise UsageError(f"the scenario has no run {run!r} (runs: {', '.join(self.inbox)})")
        slug = f"{run}.w{number}"
        caller = self.callers[slug] = Caller(slug=slug, run=run, number=number, name=f"{run}/w{number}")
        return caller

    def url(self, caller: Caller) -> str:
        return f"{self.root}/w/{quote(caller.slug, safe='')}"

    def caller(self, slug: str) -> Caller | None:
        found = self.callers.get(slug)
        if found is None and not self.hooks.supervised:   # ``serve``: any run.wN is welcome
            run, _, number = slug.rpartition(".w")
            if run in self.inbox and number.isdigit() and int(number) > 0:
                found = self.register(run, int(number))
        return found

    def admit(self, caller: Caller) -> bool:
        """Count one request of ``caller``; False (close the connection unanswered) past its budget,
        the first time telling the supervisor, which stops the worker."""
        if not self.hooks.supervised:            # ``serve``: a session by hand has no budget
            return True
        with self.lock:
            caller.requests += 1
            if caller.requests <= MAX_REQUESTS:
                return True
            first = caller.requests == MAX_REQUESTS + 1
        if first:
            self.hooks.over_budget(caller, MAX_REQUESTS)
        return False

    # ------------------------------------------------------------------ the trace
    def _emit_locked(self, event, /, **data):
        with self.lock:
            return self.emit(event, **data)

    def describe(self, svc: Service) -> dict:
        """The profile as the worker sees it: every duration in real milliseconds."""
        out = svc.describe()
        for name, value in list(out.items()):
            if name.endswith("_ms") and isinstance(value, int) and not isinstance(value, bool):
                out[name] = max(1, round(value / self.clock.scale)) if value else 0
        out["time_scale"] = self.clock.scale
        return out

    # ------------------------------------------------------------------ one service request
    def request(self, caller: Caller, port: str, op: str, args: dict) -> "Answer":
        """Apply one request that reached the sandbox, with its rules and faults. Returns what to
        do on the socket; holds (sleeps) happen in the caller's thread, outside the lock."""
        svc = self.services.get(port)     # None: the authority port
        call = PortCall(port=port, op=op, args=args)
        with self.lock:
            self.hooks.observe(caller)
            caller.acted = caller.acted or op != "describe"
            key = (caller.run, port, op)
            nth = self.ordinals[key] = self.ordinals.get(key, 0) + 1
            self.anchored("before", caller, call, nth)
            seq = self.emit(events.Call, worker=caller.name, run=caller.run, port=port, op=op, args=args,
                            nth=nth)["seq"]
            supervised = self.hooks.supervised
            crash = self.rules.match("crash", caller.run, caller.run, caller.number, call, nth) if supervised else None
            pause = self.rules.match("pause", caller.run, caller.run, caller.number, call, nth) if supervised else None
            if crash is not None and not self.hooks.killable(caller):
                crash = None     # a worker already replaced (a zombie): no one to kill; the rule is spent
            fault = self.rules.match("fault", caller.run, caller.run, caller.number, call, nth)
            if fault is not None:
                self.emit(events.Fault, worker=caller.name, run=caller.run, call=seq, fault=fault.fault,
                          code=fault.code, rule_line=fault.line)
        if crash is not None and crash.boundary == "before":
            self.hooks.crash(caller, "before", crash)
            return Answer.closed(seq)
        gate = None
        if pause is not None and pause.boundary == "before":   # the request leaves when the worker runs again
            gate = self.hooks.pause(caller, pause, seq)
            if gate is None:
                self.hold(self.clock.real_s(pause.resume_after_ms))
            else:
                self.hold_until(gate.opened)
                if gate.cancelled or not gate.opened.is_set():
                    return Answer.closed(seq, written=gate.written)   # it never left: no effect, no answer
                if crash is not None and not self.hooks.killable(caller):
                    crash = None     # replaced while it was stopped (a zombie): no one to kill; the rule is spent
        answer = self._execute(svc, caller, call, seq, fault)
        self.anchored("after", caller, call, nth)
        if crash is not None:   # after: it took effect; the worker never sees the answer
            with self.lock:
                self._result(caller, seq, answer, delivered=False)
            self.hooks.crash(caller, "after", crash)
            return Answer.closed(seq, written=gate.written if gate else None)
        if pause is not None and pause.boundary == "after":
            gate = self.hooks.pause(caller, pause, seq)
        with self.lock:
            self._result(caller, seq, answer, delivered=True)
        if gate is not None:
            answer.written = gate.written
        return answer

    def _result(self, caller: Caller, seq: int, answer: "Answer", *, delivered: bool) -> None:
        error = answer.error
        self.emit(events.Result, worker=caller.name, run=caller.run, call=seq, ok=error is None,
                  value=answer.value, error=error.to_json() if error is not None else None, delivered=delivered)

    def _execute(self, svc: Service | None, caller: Caller, call: PortCall, seq: int, fault: Rule | None) -> "Answer":
        if svc is None:
            return self.authority.call(caller, call, seq, fault)
        if call.op == "describe":
            return Answer.ok(self.describe(svc), seq)
        args = dict(call.args)
        steps = transport.plan(svc.name, svc.kind, svc.profile, call.op, args, fault)
        return self._steps(steps, svc, caller.run, call.op, args, seq)

    def _hold_s(self, span: str, svc: Service, args: dict) -> float:
        """Real seconds a span holds the connection: the caller's timeout and a job's wait (the
        network spans are the real network's)."""
        prof = svc.profile
        if span not in transport.HELD_SPANS:
            return 0.0
        if span != "job":
            return self.clock.real_s(prof["timeout_ms"])
        rec = getattr(svc, "jobs", {}).get(args.get("job_id"))
        with self.lock:
            remaining = max(0, prof.get("job_ms", 0) - (self.clock.now() - rec.committed_at)) if rec else 0
        return self.clock.real_s(min(max(0, int(args.get("wait_ms") or 0)), remaining))

    def _steps(self, steps: tuple, svc: Service, rid: str, op: str, args: dict, seq: int) -> "Answer":
        """Run a transport plan on the socket: returns what to answer, or to close with no answer."""
        value, committed = None, False
        for step in steps:
            t = type(step)
            if t is transport.Wait:
                self.hold(self._hold_s(step.span, svc, args))
            elif t is transport.Admit or t is transport.Commit:
                try:
                    with self.lock:
                        if t is transport.Admit:
                            svc.refuse_in_flight(op, args)
                            continue
                        value, committed = svc.execute_stale(step.stale_ms, op, args, cause=step.cause, run=rid,
                                                             call=seq), True
                except PortError as exc:
                    committed = False
                    if t is transport.Admit or step.on_refusal == "raise":
                        return Answer.failed(exc, seq)
                    if step.on_refusal == "record":
                        with self.lock:
                            self.emit(events.LateRejected, run=rid, service=svc.name, call=seq, code=exc.code)
            elif t is transport.Callback:
                if committed:
                    self._committed(svc, op, args, rid, value)
            elif t is transport.Emit:
                with self.lock:
                    self.emit(step.event, run=rid, service=svc.name, op=op, call=seq, **step.fields)
            elif t is transport.Later:
                self._plan_later(step, svc, rid, op, args, seq)
            elif t is transport.Answer:
                return Answer.ok(value, seq)
            elif t is transport.Fail:
                return self._failed(step, seq)
            else:   # Close: no status line
                return Answer.closed(seq, PortError(step.code, step.message))
        return Answer.ok(value, seq)

    def _failed(self, step: "transport.Fail", seq: int) -> "Answer":
        """An error answer. The trace keeps its durations in scenario milliseconds, as the checks
        judge them; the worker is told them in real milliseconds (scaled), and a ``retry_after_ms``
        also as Retry-After headers."""
        details = dict(step.details or {})
        wire = {name: max(1, round(v / self.clock.scale)) if name.endswith("_ms") and isinstance(v, int) else v
                for name, v in details.items()}
        headers = None
        if "retry_after_ms" in wire:
            real_ms = wire["retry_after_ms"]
            headers = {"Retry-After": str(max(1, math.ceil(real_ms / 1000))), "Retry-After-Ms": str(real_ms)}
        error = PortError(step.code, step.message, details=details or None)
        answer = Answer.failed(error, seq, headers, status=step.status)
        if wire != details:
            answer.wire = PortError(step.code, step.message, details=wire).to_json()
        return answer

    def _committed(self, svc: Service, op: str, args: dict, rid: str, value: Any) -> None:
        """The service's completion callback for a request it carried out (services.callback_delay:
        one per new commit, whatever becomes of the answer), delivered to the run's inbox."""
        delay = svc.callback_delay(op, value)
        if delay is not None:
            self._later(delay, lambda: self.deliver(
                rid, "callback", {"service": svc.name, "op": op, "key": args.get("key"), "result": value},
                producer=svc.name))

    def _plan_later(self, step: "transport.Later", svc: Service, rid: str, op: str, args: dict, seq: int) -> None:
        """Steps that run a scenario duration from now (a late arrival holds its key in flight until
        it lands: a lookup reports it and a same-key request meets 409)."""
        key = args.get("key") if step.holds_key else None
        if key is not None:
            with self.lock:
                svc.in_flight[key] = svc.in_flight.get(key, 0) + 1

        def land() -> None:
            if key is not None:
                with self.lock:
                    svc.in_flight[key] -= 1
            self._steps(step.steps, svc, rid, op, args, seq)
        self._later(step.delay_ms, land)

    def _later(self, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` a scenario duration from now (a pending landing: ``pending`` counts it)."""
        with self.lock:
            self.pending += 1

        def fire() -> None:
            try:
                if not self._stop.is_set():
                    action()
            finally:
                with self.lock:
                    self.pending -= 1
        timer = threading.Timer(self.clock.real_s(delay_ms), fire)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def hold(self, seconds: float) -> None:
        """Hold a request (bounded; ends at once when the sandbox stops)."""
        self._stop.wait(min(max(0.0, seconds), MAX_HOLD_S))

    def hold_until(self, event: threading.Event) -> None:
        """Hold a request until ``event`` is set or the sandbox stops. Not bounded by MAX_HOLD_S: the
        supervisor that holds it sets it (its wall-clock limit bounds the run), and a request that left
        earlier would reach the service while its worker is still stopped."""
        while not event.wait(0.02) and not self._stop.is_set():
            pass

@dataclass(slots=True)
class Answer:
    """What to do on the socket: an HTTP answer, or close with none."""

    seq: int
    status: int
    value: Any = None
    error: PortError | None = None
    headers: dict | None = None
    written: threading.Event | None = None    # set by the HTTP face once this answer is on the socket
    wire: dict | None = None                  # the error as the worker is told it (real-time durations), when it differs

    @classmethod
    def ok(cls, value, seq) -> "Answer":
        return cls(seq, 200, value)

    @classmethod
    def failed(cls, exc: PortError, seq: int, headers: dict | None = None, status: int | None = None) -> "Answer":
        return cls(seq, status or STATUS.get(exc.code, 400), None, exc, headers)

    @classmethod
    def closed(cls, seq: int, exc: PortError | None = None, written: threading.Event | None = None) -> "Answer":
        return cls(seq, 0, None, exc or PortError("timeout", "the worker was killed; no answer"), written=written)
