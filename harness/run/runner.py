"""One run of one scenario against one adapter: the worker lifecycle and the supervisor.

``run_scenario(scenario, adapter, seed)`` builds the world, starts the first worker of
every run, injects crashes and pauses at port-call boundaries, restarts workers from
durable state only, and returns the recorded trace.
"""
from __future__ import annotations

import functools
import os
import shlex
import time
import weakref
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from ..vocab import events
from .drivers import (DEFAULT_MEMORY_MB, DEFAULT_REPLY_TIMEOUT_S, DEFAULT_STEP_BUDGET, DEFAULT_WALL_GUARD_S,
                      AdapterFault, AdapterSpec, Finished, WallGuard, load_adapter)
from ..vocab.errors import InternalError, Interrupted
from ..vocab.model import TRACE_FORMAT
from ..world.ports import PortError
from ..rules.ruleset import RULES, package_version
from ..vocab.compiled import Scenario
from ..scenario.loader import library_dir
from ..world.trace import TraceTooLarge
from ..world.world import Crash, RunWorld, WorkerState, World

MAX_WORKERS_PER_RUN = 40
DEFAULT_RUN_WALL_S = 300.0   # a run's wall-clock bound (--run-timeout)


harness_version = package_version   # the trace header's ``harness``: the installed crashlab's version


@dataclass(slots=True)
class RunResult:
    scenario: Scenario
    adapter: str
    seed: int
    events: list[dict[str, Any]]
    world: World = field(repr=False)
    #: worker -> the tail of what its adapter process wrote to standard error (exec: and wire:
    #: adapters; not part of the trace, which stays the same whatever an adapter logs)
    stderr: dict[str, str] = field(default_factory=dict, repr=False)

    def to_jsonl(self) -> str:
        return self.world.trace.to_jsonl()

    @property
    def repro(self) -> str:
        return repro_command(self.scenario, self.adapter, self.seed)


def repro_command(scenario: Scenario, adapter: str, seed: int) -> str:
    src = portable_source(scenario) or scenario.id
    return shlex.join(["crashlab", "run", src, "--adapter", adapter, "--seed", str(seed)])


def portable_source(scenario: Scenario) -> str | None:
    """The scenario file as the trace records it: None for a library scenario (its id
    names it on any machine), else the path as it was given."""
    if scenario.source is None:
        return None
    if _in_library(scenario.source, os.getcwd()):
        return None
    return scenario.source


@functools.lru_cache(maxsize=None)
def _in_library(source: str, cwd: str) -> bool:
    """Whether a scenario file is in the library (resolving paths costs more than a whole run
    of a short scenario, and a sweep asks for every run of the same few files)."""
    return Path(source).resolve().parent == library_dir().resolve()


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    step_budget: int = DEFAULT_STEP_BUDGET
    wall_guard_s: float = DEFAULT_WALL_GUARD_S
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S
    max_workers: int = MAX_WORKERS_PER_RUN
    memory_mb: int = DEFAULT_MEMORY_MB
    run_wall_s: float = DEFAULT_RUN_WALL_S   # real time one run (one scenario) may take in all
    reuse: bool = True                       # exec: workers may take a process another simulation used


class Runner:
    def __init__(self, scenario: Scenario, adapter: AdapterSpec, seed: int | None, limits: Limits) -> None:
        self.world = World(scenario, seed)
        self.seen_inbox: dict[str, int] = {}   # run id -> inbox length at the last delivered poll
        self.offered: dict[str, int] = {}      # run id -> inbox length when its latest worker started
        self.adapter = adapter
        self.limits = limits
        self.scenario = scenario
        self.stderr: dict[str, str] = {}       # worker -> its adapter process's standard error tail
        self.deadline: float | None = None   # time.monotonic() at which the run's wall-clock bound ends
        #: whether the scenario has rules of each action a worker matches its calls against itself
        self.actions = {action: any(rule.action == action for rule in scenario.rules) for action in ("crash", "pause")}
        #: this simulation, to the pool of reused adapter processes: none serves two of its workers
        self.scope = object() if limits.reuse else None
        self.channels = weakref.WeakKeyDictionary()   # its adapter processes' channels still held -> worker name

    # -------------------------------------------------------------- supervisor
    def supervise(self, run: RunWorld):
        """Start workers for one run until it reaches a terminal disposition, then one more for
        every delivery that arrives after it (``_after_terminal``).

        A crash restarts after the rule's delay; a paused worker is replaced once its lease
        expires (the zombie keeps running, detached, with its stale view); a durable wait
        sleeps until the inbox receives something or the requested wake time comes."""
        env = self.world.env
        yield env.timeout(run.spec.start_ms)
        if (yield from self._until_terminal(run)):
            yield from self._after_terminal(run)

    def _until_terminal(self, run: RunWorld):
        """Workers until the run is terminal (-> True) or the platform gives up on it."""
        env = self.world.env
        delay = 0
        pinned_env: dict | None = None
        while run.finished is None:
            if run.workers >= self.limits.max_workers:
                self.world.emit(events.RestartBudgetExhausted, run=run.spec.id,
                                workers=run.workers)
                return False
            if delay:
                yield env.timeout(delay)
                delay = 0
                if run.finished is not None:
                    return True
            run.takeover = env.event()
            proc = env.process(self.worker(run, dict(pinned_env or run.env)))
            pinned_env = None
            yield proc | run.takeover
            if run.finished is not None:
                return True
            if not proc.triggered:      # takeover: the current worker is a paused zombie
                continue
            kind, value = proc.value
            if kind == "adapter_fault":
                return False
            if kind == "crash":
                delay = value
                continue
            # finished: a durable waiting state, or a finish the platform did not accept
            if run.waiting is None:
                delay = 1000
                continue
            if run.waiting == "PINNED":
                pinned_env = {**run.env, **self._pinned_versions(run)}
                continue
            # Sleep until the inbox holds something the finished worker had not seen (an event
            # delivered between its last poll and its finish wakes the run at once).
            delivered = self.seen_inbox.get(run.spec.id, 0)
            if len(run.inbox) > delivered:
                continue
            run.wake = env.event()
            waits = [run.wake]
            if run.wake_at is not None and run.wake_at > env.now:
                waits.append(env.timeout(run.wake_at - int(env.now)))
            yield env.any_of(waits)
        return True

    def _after_terminal(self, run: RunWorld):
        """Events keep arriving after a run is terminal (a late cancellation, callback or
        duplicate): the platform wakes a worker for each new delivery, as it would for any
        durable inbox. The worker finds the terminal record; the checks hold it to rewriting
        nothing (TERM-01, TERM-02)."""
        env = self.world.env
        rid = run.spec.id
        # what the worker that ended the run could have read: polled, or there when it started
        seen = max(self.seen_inbox.get(rid, 0), self.offered.get(rid, 0))
        delay = 0
        while True:
            if delay:
                yield env.timeout(delay)
                delay = 0
            elif len(run.inbox) <= seen:
                run.wake = env.event()
                yield run.wake
            if run.workers >= self.limits.max_workers:
                self.world.emit(events.RestartBudgetExhausted, run=rid, workers=run.workers)
                return
            kind, value = yield env.process(self.worker(run, dict(run.env)))
            if kind == "adapter_fault":
                return
            if kind == "crash":
                delay = value
                continue
            # one worker per delivery: what it was offered counts as seen even if it never polled
            seen = max(seen, self.seen_inbox.get(rid, 0), self.offered[rid])

    def _pinned_versions(self, run: RunWorld) -> dict:
        for ev in reversed(self.world.trace.events):
            if ev["kind"] == "finish" and ev["run"] == run.spec.id and ev["disposition"] == "PINNED":
                pins = (ev.get("packet") or {}).get("pinned_env") or {}
                return {k: v for k, v in pins.items() if k in run.env}
        return {}

    # -------------------------------------------------------------- one worker
    def worker(self, run: RunWorld, worker_env: dict):
        world = self.world
        run.workers += 1
        number = run.workers
        name = f"{run.spec.id}/w{number}"
        ws = WorkerState(name=name, number=number, run=run.spec.id, env=worker_env)
        run.live[name] = ws
        run.current = name
        rid = run.spec.id
        self.offered[rid] = len(run.inbox)
        world.emit(events.Start, worker=name, run=rid, number=number, env=worker_env)
        hello = {"run_id": rid, "worker": name, "env": worker_env, "services": sorted(world.services)}
        channel = self.adapter.channel(sorted(world.services), hello,
                                       wall_guard_s=self.limits.wall_guard_s,
                                       reply_timeout_s=self.limits.reply_timeout_s,
                                       memory_mb=self.limits.memory_mb, scope=self.scope)
        if hasattr(channel, "proc"):
            self.channels[channel] = name
        steps = 0
        if hasattr(channel, "run_deadline"):
            channel.run_deadline = self.deadline
        # the hot loop's constants, looked up once per worker
        emit, match_rules, execute, ordinals = world.emit, world.match_rules, world.execute, run.ordinals
        budget, deadline, monotonic = self.limits.step_budget, self.deadline, time.monotonic
        crashes, pauses = self.actions["crash"], self.actions["pause"]
        Call, Result = events.Call, events.Result
        try:
            self._in_time()
            call = channel.start()
            while True:
                steps += 1
                if deadline is not None and monotonic() > deadline:
                    self._in_time(channel)
                if steps > budget:
                    channel.kill()
                    raise AdapterFault("step_budget", f"adapter made more than {budget} "
                                       "port calls in one worker (livelock?)")
                port, op, args = call.port, call.op, call.args
                key = (port, op)
                nth = ordinals.get(key, 0) + 1
                ordinals[key] = nth
                seq = emit(Call, worker=name, run=rid, port=port, op=op, args=args, nth=nth)["seq"]
                # a scenario without crash (pause) rules matches none: the look-up is skipped
                crash = match_rules("crash", run, ws, call, nth) if crashes else None
                pause = match_rules("pause", run, ws, call, nth) if pauses else None
                if crash is not None and crash.boundary == "before":
                    raise Crash("before", crash)
                if pause is not None and pause.boundary == "before":
                    yield from self._pause(run, ws, pause, seq)
                try:
                    value = yield from execute(run, ws, call, seq, nth)
                    error = None
                except PortError as exc:
                    value, error = None, exc
                if crash is not None:  # boundary == "after": it took effect; the worker never sees it
                    emit(Result, worker=name, run=rid, call=seq, ok=error is None,
                         value=value, error=error.to_json() if error else None, delivered=False)
                    raise Crash("after", crash)
                if pause is not None and pause.boundary == "after":
                    yield from self._pause(run, ws, pause, seq)
                emit(Result, worker=name, run=rid, call=seq, ok=error is None,
                     value=value, error=error.to_json() if error else None, delivered=True)
                if error is None and port == "inbox" and op == "poll":
                    self.seen_inbox[rid] = len(run.inbox)
                if error is None and port == "run" and op == "finish":
                    if hasattr(channel, "close_after_finish"):
                        channel.close_after_finish(value)
                    else:
                        channel.kill()
                    world.emit(events.Stop, worker=name, run=rid, reason="finished")
                    return ("finished", None)
                call = channel.throw(error) if error is not None else channel.send(value)
                if Interrupted.requested is not None:  # the user's interrupt, even if something swallowed it
                    channel.kill()
                    raise Interrupted(Interrupted.requested)
        except Crash as crash:
            getattr(channel, "crash", channel.kill)()
            ws.alive = False
            world.emit(events.Crash, worker=name, run=rid, boundary=crash.boundary,
                       rule_line=crash.rule.line, restart_after_ms=crash.rule.restart_after_ms)
            return ("crash", crash.rule.restart_after_ms)
        except Finished:
            channel.kill()
            world.emit(events.AdapterFault, worker=name, run=rid, fault="no_finish",
                       message="adapter returned without calling run.finish")
            return ("adapter_fault", None)
        except (AdapterFault, TraceTooLarge) as fault:
            channel.kill()
            world.emit(events.AdapterFault, worker=name, run=rid, fault=fault.kind,
                       message=fault.message)
            return ("adapter_fault", None)
        finally:
            ws.alive = False
            run.live.pop(name, None)
            tail = getattr(channel, "stderr_tail", b"")
            if tail:
                self.stderr[name] = tail.decode(errors="replace")

    def _in_time(self, channel=None) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            if channel is not None:
                channel.kill()
            raise AdapterFault("run_timeout", f"the run took more than its {self.limits.run_wall_s:g} s wall-clock "
                               "bound (--run-timeout)")

    def _pause(self, run: RunWorld, ws: WorkerState, rule, seq: int):
        world, env = self.world, self.world.env
        world.emit(events.Pause, worker=ws.name, run=run.spec.id, call=seq, boundary=rule.boundary,
                   resume_after_ms=rule.resume_after_ms, rule_line=rule.line)
        ws.paused = True
        # The platform notices the silent worker: a replacement starts once its lease expires.
        env.process(self._takeover(run, ws, run.takeover, rule.restart_after_ms))
        yield env.timeout(rule.resume_after_ms)
        ws.paused = False
        world.emit(events.Resume, worker=ws.name, run=run.spec.id, call=seq)

    def _takeover(self, run: RunWorld, ws: WorkerState, takeover, restart_after: int):
        env = self.world.env
        lease = run.lease
        wait = max(0, lease.expires_at - int(env.now)) if lease.owner == ws.name else restart_after
        yield env.timeout(wait + 1)
        if run.finished is None and ws.paused and run.current == ws.name and not takeover.triggered:
            self.world.emit(events.Takeover, run=run.spec.id, stale=ws.name)
            takeover.succeed()

    # -------------------------------------------------------------- the whole run
    def header(self) -> None:
        self.world.emit(events.Header, **header_fields(self.scenario, self.world.seed, self.adapter.text))

    def run(self) -> RunResult:
        world = self.world
        sc = self.scenario
        if self.limits.run_wall_s and self.limits.run_wall_s > 0:
            self.deadline = time.monotonic() + self.limits.run_wall_s
        self.header()
        world.schedule_events()
        for run in world.runs.values():
            world.env.process(self.supervise(run))
        try:
            with WallGuard.installed():
                world.env.run(until=sc.horizon_ms)
        except Exception as exc:  # noqa: BLE001 - anything here is our bug
            raise InternalError(f"the simulation failed: {type(exc).__name__}: {exc}",
                                seed=world.seed, step=len(world.trace.events),
                                hint="please report this with the repro command") from exc
        finally:   # a worker still waiting at the horizon: its process ends with the simulation
            for channel, name in list(self.channels.items()):
                if channel.proc is not None:
                    channel.kill()
                    if channel.stderr_tail:   # what it wrote, for crashlab run to show as any worker's
                        self.stderr[name] = channel.stderr_tail.decode(errors="replace")
        world.emit(events.End, runs={r.spec.id: {"finished": r.finished, "waiting": r.waiting,
                                                    "workers": r.workers}
                                        for r in world.runs.values()})
        return RunResult(scenario=sc, adapter=self.adapter.text, seed=world.seed,
                         events=world.trace.events, world=world, stderr=dict(self.stderr))


def header_fields(sc: Scenario, seed: int, adapter: str) -> dict:
    """The header event's fields for a run of ``sc`` (the simulator's, and the sandbox's)."""
    return dict(format=TRACE_FORMAT, scenario=sc.id, title=sc.title, seed=seed, adapter=adapter,
                harness=harness_version(), origin_ms=sc.origin_ms, horizon_ms=sc.horizon_ms, env=dict(sc.env),
                services={k: dict(v) for k, v in sc.services.items()},
                runs=[{"id": r.id, "intent": dict(r.intent), "service": r.service,
                       "operation": r.operation, "deadline": r.deadline_ms,
                       "start": r.start_ms, "approval": r.approval.get("mode", "auto"),
                       "compensation_authority": r.compensation_authority} for r in sc.runs],
                source=portable_source(sc), card=dict(sc.card), tags=list(sc.tags), expect=dict(sc.expect),
                rules=RULES)


def run_scenario(scenario: Scenario, adapter: AdapterSpec | str | None = None, seed: int | None = None,
                 limits: Limits | None = None) -> RunResult:
    spec = adapter if isinstance(adapter, AdapterSpec) else load_adapter(adapter)
    return Runner(scenario, spec, seed, limits or Limits()).run()


def fault_trace(scenario: Scenario, adapter: str, seed: int | None, kind: str, message: str) -> RunResult:
    """The trace of a run whose worker process did not return one (it died, hung or was stopped):
    the header, the adapter fault on every run, the end. Checked like any trace, it fails the
    adapter (or is inconclusive, for a wall-clock fault)."""
    runner = Runner(scenario, AdapterSpec(text=adapter, kind="exec"), seed, Limits())
    world = runner.world
    runner.header()
    for rid in world.runs:
        world.emit(events.AdapterFault, worker=f"{rid}/process", run=rid, fault=kind, message=message)
    world.emit(events.End, runs={rid: {"finished": None, "waiting": None, "workers": 0} for rid in world.runs})
    return RunResult(scenario=scenario, adapter=adapter, seed=world.seed, events=world.trace.events, world=world)
