"""The integration supervisor: a real worker process against the sandbox, under real kills.

For each run of a scenario it starts the worker command (templated ``{url}``, ``{db}``,
``{worker}``, ``{run}``; also in the environment as CRASHLAB_URL, CRASHLAB_DB, CRASHLAB_WORKER,
CRASHLAB_RUN, CRASHLAB_EPOCH, CRASHLAB_FAILPOINT and CRASHLAB_SESSION), each worker in its own process group
that dies with crashlab (PR_SET_PDEATHSIG), one worker of a run at a time. It kills the group
with SIGKILL at service boundaries (a crash rule on a service call, before it executes or after
it committed and before the answer), arms failpoints for crash rules on the worker's store
(``ledger.append:2:before``: the worker's helper kills itself there), restarts workers after the
rule's delay, and reads the worker's store while it is blocked on each request, after every kill
and at the end. What it reads becomes the trace's run and knowledge lanes (trace synthesis);
the sandbox writes the port and remote lanes into the same trace, in real order. Its own acts are
recorded as its own: each lease grant (``granted_by``), each failpoint it arms (a ``failpoint``
event; the ``crash`` where one fired names it), each takeover, and the worker a handover went to.
A waiting run is woken (its next worker started) by a delivery it has not read; misbehaviour is a recorded fault.
A scenario's deploy event starts the next code version (``--worker-next``: crashlab.integrate.deploy).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..vocab import events
from ..vocab.errors import UsageError
from ..vocab.model import TERMINAL_STATES, PortCall, WAITING_STATES, validate_checkpoint, validate_effect_entry
from ..sandbox import Caller, Hooks, Sandbox
from ..sandbox.server import Gate
from ..vocab.compiled import Rule, Scenario
from ..run.jobs import become_subreaper, children
from . import clocks, workers
from .command import fired_failpoint, parse_worker
from .deploy import Redeploying, version_env as deploy_env
from ..run.repro import DEFAULTS, header_options
from .store import PostgresStore, SqliteStore, open_store

DEFAULT_TIME_SCALE = DEFAULTS["time_scale"]
WALL_LIMIT_S = DEFAULTS["wall_limit_s"]   # a scenario's real-time limit: beyond it the worker is unresponsive
MAX_OUTPUT_BYTES = 4 << 20     # a worker's stdout + stderr: beyond it, a flood
MAX_WORKERS = 12
#: after a takeover, how long a paused worker stays stopped waiting for the run's next worker to make
#: its first request (under a durable runtime the handover is the runtime's, and takes real time)
HANDOVER_WAIT_S = DEFAULTS["handover_wait_s"]
ANSWER_WAIT_S = 1.0     # a resuming worker's held request: how long its answer may take to reach its socket
LEASE_TTL_MS = 10 ** 9         # the supervisor's grant: one live worker per run, until it is killed
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
_WAITING = frozenset(s.value for s in WAITING_STATES)
_PLATFORM_CRASH_PORTS = ("ledger", "checkpoints", "run", "lease", "inbox")


@dataclass(slots=True)
class Paused:
    """A worker stopped by a pause rule. Unreplaced, it resumes at ``resume_at``. Replaced (a takeover
    at ``takeover_at``), it resumes once the run's next worker has had, from its first request, the
    time the rule gives a replacement before the stale worker resumes (resume_after − restart_after)
    (its first request: a service request other than describe, or a store row of its own):
    how long a durable runtime takes to hand the run over is its own, and does not eat into the
    replacement's time, so the replacement acts before the stale worker as in the simulator. A
    handover that does not come within the handover wait (``--handover-wait``) is recorded as missed."""
    caller: Caller
    proc: subprocess.Popen
    pgid: int
    call: int
    resume_at: float        # time.monotonic(): the rule's resume_after
    takeover_at: float      # time.monotonic(): the rule's restart_after (the platform notices the silent worker)
    gate: Gate = field(default_factory=Gate)   # its held request: opened when it is to run again (or is gone)
    replaced_at: float | None = None
    handed_at: float | None = None       # when the run's next worker made its first request
    handed_to: str | None = None         # that worker


@dataclass(slots=True)
class RunState:
    id: str
    store: SqliteStore | PostgresStore
    workers: int = 0
    proc: subprocess.Popen | None = None
    pgid: int = 0                      # the current worker's process group (its pid)
    caller: Caller | None = None
    log: Path | None = None
    killed: str | None = None          # the boundary of a crash the supervisor inflicted
    failpoints: list = field(default_factory=list)   # (spec, rule) armed for the current worker
    restart_at: float = 0.0
    done: bool = False
    finished: str | None = None
    waiting: str | None = None
    knowledge: dict = field(default_factory=dict)    # key -> latest knowledge read
    zombies: list = field(default_factory=list)      # (proc, caller) of paused workers a replacement took over
    paused: list = field(default_factory=list)       # Paused workers not yet resumed
    wrote: set = field(default_factory=set)          # numbers of the workers a store row was attributed to
    last_writer: Caller | None = None  # the writer of a checkpoint in the rows being read (a finish row names none)
    ledger_count: int = 0
    store_problem: str | None = None
    flooded: str | None = None         # why the current worker is to be stopped for its requests
    tmp: str | None = None             # the private temporary folder of the run's workers (TMPDIR)


class Supervisor(Redeploying, Hooks):
    supervised = True

    def __init__(self, scenario: Scenario, worker: str, *, store: str = "sqlite:{db}", out: Path,
                 time_scale: float = DEFAULT_TIME_SCALE, wall_limit_s: float = WALL_LIMIT_S,
                 handover_wait_s: float = HANDOVER_WAIT_S, runtime_env: Mapping[str, str] | None = None,
                 runtime_ids: Mapping[str, str] | None = None, runtime_name: str | None = None,
                 runtime_writable: tuple[str, ...] = (), worker_next: str | None = None) -> None:
        self.argv_template = parse_worker(worker, runtime=bool(runtime_ids))
        self.scenario = scenario
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.wall_limit_s = wall_limit_s
        self.handover_wait_s = handover_wait_s
        options = header_options(runtime=runtime_name, store=store, time_scale=time_scale, wall_limit_s=wall_limit_s,
                                 handover_wait_s=handover_wait_s, worker_next=worker_next)   # the repro line's
        self.sandbox = Sandbox(scenario, time_scale=time_scale, hooks=self, adapter=f"integrate:{worker}",
                               header={"integration": options})
        self.runs: dict[str, RunState] = {}
        for spec in scenario.runs:
            st = open_store(store, scenario=scenario.id, run=spec.id, out=self.out)
            st.reset()           # every integration run starts from an empty store
            self.runs[spec.id] = RunState(id=spec.id, store=st)
        self.used: set[int] = set()        # failpoint rules already armed (they fire once)
        self.notes: list[str] = []
        self.cut: list[str] = []           # the wall-clock limits that ended a run
        self.missed: list[str] = []        # takeovers whose replacement did not work on the run while the stale worker waited
        self.token = secrets.token_hex(8)  # in every worker's environment: finds what escaped its group
        # a durable runtime (--runtime): its server's environment, and each run's unit-of-work id
        self.runtime_env = dict(runtime_env or {})
        self.runtime_ids = dict(runtime_ids or {})
        self.runtime_writable = tuple(runtime_writable)     # the runtime's state folder, if the worker writes it
        self.in_namespaces = workers.wrapped()              # UsageError (exit 3) if namespaces are asked but absent
        self.faketime = clocks.require(scenario)            # UsageError (exit 3) if a clock needs libfaketime, absent
        self.clocks: list[str] = []                         # the workers that ran on a skewed clock, and which
        self.skewed: list[int] = []                         # their pids (libfaketime's /dev/shm files, removed at the end)
        self.before: frozenset[int] = frozenset()           # crashlab's children before the first worker
        self.init_deploys(worker_next, runtime=bool(runtime_ids))   # --worker-next: the next code version

    # ------------------------------------------------------------------ hooks (sandbox threads)
    def observe(self, caller: Caller) -> None:
        self._read(self.runs[caller.run], caller)

    def knowledge(self, run: str, key) -> str | None:
        return self.runs[run].knowledge.get(key)

    def killable(self, caller: Caller) -> bool:
        rs = self.runs[caller.run]
        return rs.caller is caller and rs.proc is not None

    def crash(self, caller: Caller, boundary: str, rule: Rule) -> None:
        rs = self.runs[caller.run]
        if rs.caller is not caller or rs.proc is None:
            return
        rs.killed = boundary
        rs.restart_at = time.monotonic() + self.sandbox.clock.real_s(rule.restart_after_ms)
        with self.sandbox.lock:
            self.sandbox.emit(events.Crash, worker=caller.name, run=caller.run, boundary=boundary,
                              rule_line=rule.line, restart_after_ms=rule.restart_after_ms)
        self._kill(rs)

    def over_budget(self, caller: Caller, budget: int) -> None:
        rs = self.runs[caller.run]
        if rs.caller is caller:          # the main loop stops it and records the fault
            rs.flooded = f"the worker sent more than {budget} requests to the sandbox (a request flood)"

    def pause(self, caller: Caller, rule: Rule, call_seq: int) -> Gate | None:
        rs = self.runs[caller.run]
        proc = rs.proc                    # read once: the main loop may clear it meanwhile
        if proc is None or rs.caller is not caller:
            return None
        pgid = proc.pid
        if not workers.pause(proc):   # it is gone: nothing is paused, and a request it held never leaves
            gone = Gate()
            gone.cancel()
            return gone
        with self.sandbox.lock:
            self.sandbox.emit(events.Pause, worker=caller.name, run=caller.run, call=call_seq,
                              boundary=rule.boundary, resume_after_ms=rule.resume_after_ms, rule_line=rule.line)
        now, real = time.monotonic(), self.sandbox.clock.real_s
        paused = Paused(caller=caller, proc=proc, pgid=pgid, call=call_seq, resume_at=now + real(rule.resume_after_ms),
                        takeover_at=now + real(rule.restart_after_ms))
        with self.sandbox.lock:
            rs.paused.append(paused)
        return paused.gate

    # ------------------------------------------------------------------ the store, as trace events
    def _read(self, rs: RunState, caller: Caller | None) -> None:
        rows = rs.store.read()
        if rows.problem and rs.store_problem is None:
            rs.store_problem = rows.problem
        if not rows.items:
            return
        who = caller or rs.caller
        with self.sandbox.lock:
            rs.last_writer = None    # a finish is its checkpoint writer's only when both are read together
            for view, number, record in rows.items:
                writer = self._writer(rs, view, record) or who
                if writer is not None:
                    rs.wrote.add(writer.number)
                {"ledger": self._ledger_row, "checkpoints": self._checkpoint_row,
                 "finish": self._finish_row}[view](rs, writer, number, record)

    def _writer(self, rs: RunState, view: str, record) -> Caller | None:
        """The worker a row names as its writer (a ledger entry's lease epoch, a checkpoint's owner, a
        finish's owner), when it is one of the run's workers: with a paused worker and its replacement
        both alive, the request that triggered the read may be the other one's."""
        if not isinstance(record, dict):
            return None
        if view == "ledger":
            epoch = record.get("lease_epoch")
            return next((c for c in self.sandbox.callers.values() if c.run == rs.id and c.number == epoch), None)
        owner = (record.get("control") or {}).get("owner") if view == "checkpoints" else record.get("owner")
        named = next((c for c in self.sandbox.callers.values() if c.run == rs.id and c.name == owner), None)
        if named is None and view == "finish":
            return rs.last_writer        # a finish read with a checkpoint follows its writer's terminal checkpoint
        return named

    def _ledger_row(self, rs: RunState, who: Caller | None, number, record) -> None:
        sb, name = self.sandbox, who.name if who else None
        seq = self._call(who, rs.id, "ledger", "append", {"entry": record})
        problems = validate_effect_entry(record)
        if problems:
            sb.emit(events.AdapterFault, worker=name, run=rs.id, fault="invalid_effect_entry",
                    message="a ledger row fails the effect-entry schema", call=seq, problems=problems, entry=record)
        else:
            key = record["semantic_key"]
            previous = rs.knowledge.get(key)
            rs.knowledge[key] = record["knowledge"]
            sb.emit(events.Ledger, worker=name, run=rs.id, index=rs.ledger_count, key=key,
                    knowledge=record["knowledge"], previous=previous, epoch=record["lease_epoch"],
                    live_epoch=who.number if who else 0, entry=record, call=seq)
            rs.ledger_count += 1
        self._answer(name, rs.id, seq, {"index": rs.ledger_count - 1} if not problems else None)

    def _checkpoint_row(self, rs: RunState, who: Caller | None, number, record) -> None:
        sb, name = self.sandbox, who.name if who else None
        seq = self._call(who, rs.id, "checkpoints", "write", {"checkpoint": record})
        problems = validate_checkpoint(record)
        if problems:
            sb.emit(events.AdapterFault, worker=name, run=rs.id, fault="invalid_checkpoint",
                    message="a checkpoint row fails the checkpoint schema", call=seq, problems=problems,
                    checkpoint=record)
        else:
            control = record["control"]
            if who is not None:
                rs.last_writer = who
            sb.emit(events.Checkpoint, worker=name, run=rs.id, version=int(number), state=control["state"],
                    owner=control["owner"], epoch=control["lease_epoch"], state_version=control["state_version"],
                    checkpoint=record, call=seq)
        self._answer(name, rs.id, seq, {"version": int(number)} if not problems else None)

    def _finish_row(self, rs: RunState, who: Caller | None, number, record) -> None:
        sb, name = self.sandbox, who.name if who else None
        rec = record if isinstance(record, dict) else {}
        disposition = str(rec.get("disposition"))
        seq = self._call(who, rs.id, "run", "finish", rec)
        sb.emit(events.Finish, worker=name, run=rs.id, disposition=disposition, effects=rec.get("effects"),
                next_owner=rec.get("next_owner"), reason=rec.get("reason"), packet=rec.get("packet"),
                accepted=True, stale=False, call=seq)
        self._answer(name, rs.id, seq, {"accepted": True})
        self.pinned_by(rs, disposition, rec.get("packet"))
        if disposition in _TERMINAL:
            rs.finished = disposition
        elif disposition in _WAITING:
            rs.waiting = disposition

    def _call(self, who: Caller | None, run, port, op, args) -> int:
        """A store write read from the worker's views, as the port call it stands for; the scenario
        events anchored to it are delivered from now (the worker's next request or poll sees them)."""
        sb = self.sandbox
        key = (run, port, op)
        nth = sb.ordinals[key] = sb.ordinals.get(key, 0) + 1
        seq = sb.emit(events.Call, worker=who.name if who else None, run=run, port=port, op=op, args=args,
                      nth=nth)["seq"]
        if who is not None:
            call = PortCall(port=port, op=op, args=args)
            sb.anchored("before", who, call, nth, at_once=True)
            sb.anchored("after", who, call, nth, at_once=True)
        return seq

    def _answer(self, worker, run, seq, value) -> None:
        ok = value is not None
        error = None if ok else {"code": "invalid", "definite": True, "message": "the record failed the schema"}
        self.sandbox.emit(events.Result, worker=worker, run=run, call=seq, ok=ok, value=value, error=error,
                          delivered=True)

    # ------------------------------------------------------------------ workers (main thread)
    def _start(self, rs: RunState) -> None:
        sb = self.sandbox
        rs.workers += 1
        caller = sb.register(rs.id, rs.workers)
        rs.failpoints = self._failpoints(rs)
        values = {"url": sb.url(caller), "db": rs.store.worker_db, "worker": caller.name, "run": rs.id}
        runtime = self._runtime_values(rs)
        template, versions = self.code(rs)     # --worker, or --worker-next after a deployment; checked in __init__
        argv = [part.format(**values, **runtime) for part in template]
        env = {**os.environ, **deploy_env(versions), "CRASHLAB_URL": values["url"], "CRASHLAB_DB": values["db"],
               "CRASHLAB_WORKER": caller.name, "CRASHLAB_RUN": rs.id, "CRASHLAB_EPOCH": str(caller.number),
               "CRASHLAB_FAILPOINT": ",".join(spec for spec, _ in rs.failpoints),
               "CRASHLAB_SESSION": f"{self.token}/{caller.slug}"}
        rs.tmp = rs.tmp or tempfile.mkdtemp(prefix=f"crashlab-{rs.id[:40]}-")
        env["TMPDIR"] = rs.tmp
        if runtime:
            env.update(self.runtime_env, CRASHLAB_RUNTIME_ID=runtime["runtime_id"])
        rs.log = self.out / f"{caller.slug}.log"
        skew = clocks.for_worker(self.scenario, rs.id, caller.number, time_scale=sb.clock.scale, lib=self.faketime,
                                 inherited=os.environ.get("LD_PRELOAD", ""))
        if skew is not None:
            self.clocks.append(f"{caller.name}: {skew.text}")
        with sb.lock:
            sb.emit(events.Start, worker=caller.name, run=rs.id, number=caller.number, env=versions,
                    **({"clock": skew.record} if skew is not None else {}))
            sb.emit(events.Lease, worker=caller.name, run=rs.id, op="acquire", epoch=caller.number,
                    owner=caller.name, expires_at=sb.clock.now() + LEASE_TTL_MS, granted_by="supervisor")
            for spec, rule in rs.failpoints:      # crashlab's, in the worker's CRASHLAB_FAILPOINT
                sb.emit(events.Failpoint, worker=caller.name, run=rs.id, failpoint=spec, rule_line=rule.line)
        rs.caller, rs.killed = caller, None
        with open(rs.log, "wb") as log:
            try:
                rs.proc = workers.start(argv, env=env, log=log, own=skew.env if skew is not None else None,
                                        writable=[*rs.store.folders, rs.tmp, *self.runtime_writable])
                rs.pgid = rs.proc.pid
                self.skewed += [rs.proc.pid] if skew is not None else []
            except OSError as exc:
                rs.proc = None
                raise UsageError(f"--worker: cannot start {argv[0]!r}: {exc.strerror or exc}",
                                 hint="give a command on PATH or a path to an executable") from None

    def _runtime_values(self, rs: RunState) -> dict:
        """``{runtime}`` and ``{runtime_id}`` under --runtime (none without it): the same unit-of-work id
        for every worker of a run, so a restart resumes the run's workflow or task."""
        if not self.runtime_ids:
            return {}
        return {"runtime": self.runtime_env.get("CRASHLAB_RUNTIME", ""), "runtime_id": self.runtime_ids[rs.id]}

    def _failpoints(self, rs: RunState) -> list:
        """Crash rules on the worker's own store that this worker should meet: ``port.op:nth:boundary``."""
        out = []
        for index, rule in enumerate(self.scenario.rules):
            m = rule.match
            if rule.action != "crash" or m.port not in _PLATFORM_CRASH_PORTS or index in self.used:
                continue
            if (m.run not in (None, rs.id)) or (m.worker not in (None, rs.workers)):
                continue
            self.used.add(index)
            out.append((f"{m.port}.{m.op or '*'}:{m.nth or 1}:{rule.boundary}", rule))
        return out

    def _kill(self, rs: RunState) -> None:
        if rs.proc is not None:
            workers.kill(rs.proc)

    def _sweep(self, rs: RunState | None = None) -> None:
        """Kill every process a worker left behind: its group, and any process outside it that was
        re-parented to crashlab (its subreaper) or carries this supervisor's token in its environment
        (a fork that left the group: the ``forked`` fault, of the worker whose end found it)."""
        if rs is not None and rs.pgid:
            try:
                os.killpg(rs.pgid, signal.SIGKILL)      # what is left of its group
            except OSError:
                pass
        orphans = workers.escaped(self.before, self._live_groups)
        if self.in_namespaces:    # bubblewrap's own init as it ends: a worker's processes die with their namespace
            workers.kill_escaped(orphans, lambda: workers.escaped(self.before, self._live_groups))
            orphans = []
        escaped = workers.by_session(orphans, f"CRASHLAB_SESSION={self.token}/", self._live_groups(),
                                     rs.caller.slug if rs and rs.caller else None)
        found = [pid for pids in escaped.values() for pid in pids]
        if found:
            workers.kill_escaped(found, lambda: workers.escaped(self.before, self._live_groups))
        for slug, pids in escaped.items():
            owner = next((r for r in self.runs.values() if r.caller and r.caller.slug == slug), None)
            with self.sandbox.lock:
                self.sandbox.emit(events.AdapterFault, worker=owner.caller.name if owner else None,
                                  run=owner.id if owner else None, fault="forked",
                                  message=f"the worker left {len(pids)} process(es) running outside its process "
                                          f"group (pid {', '.join(map(str, pids[:5]))}); crashlab killed them")

    def _live_groups(self) -> set[int]:
        """The process groups of the workers still running (current, replaced or paused)."""
        live = {r.proc.pid for r in self.runs.values() if r.proc is not None}
        return live | {p.pid for r in self.runs.values() for p, _ in r.zombies if p.poll() is None}

    def _bury(self, rs: RunState, force: bool = False) -> None:
        """Paused workers that were replaced: once one ends (or, ``force``, now), read what it wrote and
        record that it stopped; a stale worker's exit is not a fault."""
        for proc, caller in list(rs.zombies):
            if proc.poll() is None and not force:
                continue
            workers.kill(proc)             # it, or what is left of its group and tree
            rs.zombies.remove((proc, caller))
            self._read(rs, caller)
            with self.sandbox.lock:
                self.sandbox.emit(events.Stop, worker=caller.name, run=rs.id,
                                  reason="stale: a replacement had taken over")

    def _fault(self, rs: RunState, fault: str, message: str) -> None:
        with self.sandbox.lock:
            self.sandbox.emit(events.AdapterFault, worker=rs.caller.name if rs.caller else None, run=rs.id,
                              fault=fault, message=message)
        rs.done = True

    def _tail(self, rs: RunState) -> str:
        try:
            data = rs.log.read_bytes()[-300:] if rs.log else b""
        except OSError:
            return ""
        text = data.decode("utf-8", "replace").strip().replace("\n", " | ")
        return f"; its last output: {text}" if text else ""

    def _exited(self, rs: RunState) -> None:
        """The current worker's process ended: a crash we inflicted, a failpoint, a finish or a fault."""
        code = workers.exit_code(rs.proc, self.in_namespaces)
        rs.proc = None
        self._sweep(rs)
        self._read(rs, rs.caller)
        caller = rs.caller
        if rs.killed is not None or self.redeployed(rs):
            return                                    # restart_at set by crash(), or by the deployment or pin
        if code == -signal.SIGKILL and rs.failpoints and rs.finished is None:
            with self.sandbox.lock:
                spec = fired_failpoint(self.sandbox.trace.events, caller.name, [f for f, _ in rs.failpoints])
                rule = dict(rs.failpoints)[spec]
                self.sandbox.emit(events.Crash, worker=caller.name, run=rs.id, boundary=rule.boundary,
                                  rule_line=rule.line, restart_after_ms=rule.restart_after_ms, failpoint=spec)
            rs.restart_at = time.monotonic() + self.sandbox.clock.real_s(rule.restart_after_ms)
            return
        if rs.finished is not None or rs.waiting is not None:
            with self.sandbox.lock:
                self.sandbox.emit(events.Stop, worker=caller.name, run=rs.id, reason="finished")
            rs.done = True
            return
        if code == 0:
            self._fault(rs, "no_finish", f"the worker exited (code 0) without writing a finish row{self._tail(rs)}")
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
            self._fault(rs, "died", f"the worker exited with {how} without finishing{self._tail(rs)}")

    def _paused(self, rs: RunState, now: float) -> None:
        """Paused workers: replace one whose restart_after has passed while it is stopped (the platform
        noticed the silent worker: a takeover); resume one when its time has come (``Paused``)."""
        sb = self.sandbox
        for p in list(rs.paused):
            if p.proc.poll() is not None:     # killed while stopped: it never runs again, nothing resumes
                rs.paused.remove(p)
                p.gate.cancel()
                continue
            if (p.replaced_at is None and p.takeover_at <= now < p.resume_at and rs.caller is p.caller
                    and rs.proc is not None and rs.finished is None):
                with sb.lock:
                    sb.emit(events.Takeover, run=rs.id, stale=p.caller.name)
                rs.zombies.append((rs.proc, rs.caller))
                rs.proc, rs.restart_at = None, now
                for q in rs.paused:           # every request it holds: one worker, replaced once
                    if q.caller is p.caller and q.replaced_at is None:
                        q.replaced_at = now
            handover = None
            if p.replaced_at is not None:
                if p.handed_at is None and (taker := self._handed_over(rs, p.caller)) is not None:
                    p.handed_at, p.handed_to = now, taker.name
                if p.handed_at is not None:
                    handover = "taken"
                    if now < max(p.resume_at, p.handed_at + (p.resume_at - p.takeover_at)):
                        continue
                elif now >= p.resume_at and (rs.done or now >= p.replaced_at + self.handover_wait_s):
                    handover = "missed"
                else:
                    continue
            elif now < p.resume_at:
                continue
            rs.paused.remove(p)
            extra = {} if handover is None else {"handover": handover}
            if handover == "taken" and p.handed_to:
                extra["by"] = p.handed_to
            with sb.lock:
                sb.emit(events.Resume, worker=p.caller.name, run=rs.id, call=p.call, **extra)
            p.gate.opened.set()           # its request leaves; its answer is on the socket before it runs
            p.gate.written.wait(ANSWER_WAIT_S)
            if not workers.resume(p.pgid):
                continue                  # killed meanwhile: nothing resumes
            if handover == "missed" and not rs.done:
                self.missed.append(f"{rs.id}: the run's next worker did not work on it (no read, send or store row) "
                                   f"within {self.handover_wait_s:g} s of the takeover of {p.caller.name}, which then "
                                   "resumed: nothing handed the run over while it was paused, so the stale-worker "
                                   "case was not exercised")

    def _handed_over(self, rs: RunState, stale: Caller) -> Caller | None:
        """A later worker of the run works on it: it made a service request other than describe (a read,
        a send), or a row of its own reached the store (a checkpoint, a ledger entry, a finish). Polling
        the inbox and reading the profile are not working on the run: a worker process under a durable
        runtime may do both before the runtime hands it the run."""
        return next((c for c in self.sandbox.callers.values()
                     if c.run == rs.id and c.number > stale.number and (c.acted or c.number in rs.wrote)), None)

    # ------------------------------------------------------------------ the whole scenario
    def _unread(self, rs: RunState) -> bool:
        with self.sandbox.lock:
            return len(self.sandbox.inbox[rs.id]) > self.sandbox.polled.get(rs.id, 0)

    def _expecting(self, rs: RunState) -> bool:
        """A waiting run with something unread in its inbox or on its way there (an approval): not over."""
        return rs.waiting is not None and rs.finished is None and (self.sandbox.upcoming.get(rs.id, 0) > 0
                                                                   or self._unread(rs))

    def _woken(self, rs: RunState, now: float) -> bool:
        """A waiting run whose inbox holds what its workers have not polled: its next worker starts now."""
        if rs.waiting is not None and rs.finished is None and rs.proc is None and not rs.zombies and self._unread(rs):
            rs.done, rs.waiting, rs.restart_at = False, None, now
        return not rs.done

    def run(self) -> list[dict]:
        sb = self.sandbox
        become_subreaper()                 # what leaves a worker's tree is re-parented here, where _sweep finds it
        self.before = frozenset(children())
        sb.start()
        try:
            deadline = time.monotonic() + self.wall_limit_s
            while not all(rs.done and not rs.zombies and not self._expecting(rs) for rs in self.runs.values()):
                now = time.monotonic()
                if now > deadline:
                    for rs in self.runs.values():
                        if not rs.done or rs.zombies:
                            self._kill(rs)
                            rs.proc = None
                            self._bury(rs, force=True)
                            self._read(rs, rs.caller)
                            why = f"{rs.id} did not end within {self.wall_limit_s:g} s of real time"
                            self.cut.append(why)
                            self._fault(rs, "step_timeout", f"{why} (an unresponsive worker?)")
                    break
                self.deploys(now)
                for rs in self.runs.values():
                    self._bury(rs)
                    self._paused(rs, now)
                    if rs.done and not self._woken(rs, now):
                        continue
                    if rs.proc is None and now >= rs.restart_at:
                        if rs.workers >= MAX_WORKERS:
                            with sb.lock:
                                sb.emit(events.RestartBudgetExhausted, run=rs.id, workers=rs.workers)
                            rs.done = True
                            continue
                        self._start(rs)
                    elif rs.proc is not None and rs.proc.poll() is not None:
                        self._exited(rs)
                    elif rs.flooded is not None and rs.proc is not None:
                        self._kill(rs)
                        rs.proc = None
                        self._read(rs, rs.caller)
                        self._fault(rs, "step_budget", rs.flooded)
                    elif rs.log is not None and rs.log.stat().st_size > MAX_OUTPUT_BYTES:
                        self._kill(rs)
                        rs.proc = None
                        self._fault(rs, "flood", f"the worker wrote more than {MAX_OUTPUT_BYTES >> 20} MiB of "
                                    "output")
                time.sleep(0.002)
            landing = time.monotonic() + 10.0          # late arrivals still on their way
            while sb.pending and time.monotonic() < landing:
                time.sleep(0.005)
            if sb.pending:
                self.notes.append(f"{sb.pending} late arrival(s) still pending when the run ended")
        finally:
            for rs in self.runs.values():
                for p in rs.paused:
                    p.gate.cancel()          # killed below, never to run again: its held request never left
                if rs.proc is not None:
                    self._kill(rs)
                    rs.proc = None
                self._bury(rs, force=True)
            self._sweep()
            clocks.forget(self.skewed if not self.in_namespaces else ())
            sb.stop()
            for rs in self.runs.values():
                if rs.tmp:
                    shutil.rmtree(rs.tmp, ignore_errors=True)
        for rs in self.runs.values():
            self._read(rs, rs.caller)
            if rs.store_problem:
                self.notes.append(f"{rs.id}: {rs.store_problem}")
        return sb.end({rs.id: {"finished": rs.finished, "waiting": rs.waiting, "workers": rs.workers}
                       for rs in self.runs.values()})
