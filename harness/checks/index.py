"""One pass over a trace: the indexes every invariant reads.

The checks run on every generated run, so nothing here rescans the trace: events are
filed once, per run and per worker, in sequence order. Three kinds of record matter:

* what the adapter **asserted**: ledger appends (knowledge lane), accepted checkpoints
  and finishes (run lane);
* what it **observed**: port results with ``delivered: true``, filed under the worker that
  saw them (a result with ``delivered: false`` was never seen by anyone);
* what really **happened**: the remote lane (ground truth).
"""
from __future__ import annotations

import operator
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Callable

from ..vocab import event_tables, events as kinds
from ..vocab.model import EFFECT_OPS
from .values import dig, hashable, matches, obj

#: Effect operations that correct an earlier effect (compensation), per service.
COMPENSATION_OPS: dict[str, frozenset[str]] = {"reservation": frozenset({"release"})}
#: Service reads that can identify one effect (aggregate reads never can).
IDENTIFYING_READS = frozenset({"lookup", "search", "get_version", "wait_job"})
#: Error codes that tell a worker it no longer owns the run.
STALE_CODES = frozenset({"stale_epoch", "lease_held", "fenced"})
#: Calls whose successful answer confirms the caller still owns the run: the lease itself, and
#: the two stores that fence by lease epoch (a checkpoint write, a ledger append).
_CONFIRMATIONS = frozenset({("lease", "acquire"), ("lease", "renew"), ("checkpoints", "write"),
                            ("ledger", "append")})
#: Adapter faults decided by a wall-clock guard: they depend on the host's speed, so the
#: run cannot be judged deterministically (verdict unknown, never a violation).
WALL_CLOCK_FAULTS = frozenset({"step_timeout", "no_reply"})
#: Adapter faults recorded while the worker keeps running (a rejected record).
RECORD_FAULTS = frozenset({"invalid_checkpoint", "invalid_effect_entry"})


@dataclass(slots=True)
class Dispatch:
    """One effect call (crashlab.vocab.model.is_dispatch) and its result, if any."""

    seq: int
    t: int
    worker: str
    service: str
    op: str
    key: Any
    intent: dict
    args: dict
    role: str                       # primary | compensation | secondary
    target: Any = None              # compensation: the ref it corrects
    result: dict | None = None      # the result event (delivered or not); None: never executed

    @property
    def executed(self) -> bool:
        return self.result is not None

    def seen_by(self, worker: str, before: int) -> dict | None:
        """The result, if ``worker`` saw it before seq ``before``."""
        r = self.result
        if r is not None and r["delivered"] and r["worker"] == worker and r["seq"] < before:
            return r
        return None


@dataclass(slots=True)
class Read:
    """A delivered, successful service read."""

    call_seq: int
    seq: int
    t: int
    call_t: int
    worker: str
    service: str
    op: str
    args: dict
    value: dict


@dataclass(slots=True)
class WorkerInfo:
    name: str
    run: str
    start_seq: int
    env: dict
    acquires: list = field(default_factory=list)      # (lease event seq, epoch)
    stale: list = field(default_factory=list)         # seqs of observed evidence of lost ownership
    reads: list = field(default_factory=list)         # Read
    callbacks: list = field(default_factory=list)     # (seq, key)
    sleeps: list = field(default_factory=list)        # (call seq, ms, reason)
    appends: list = field(default_factory=list)       # ledger append call seqs
    calls: list = field(default_factory=list)         # every port call seq, in order
    loads: list = field(default_factory=list)         # (seq, version, contract or None) of each load seen
    clock_reads: list = field(default_factory=list)   # (result seq, now) of each clock answer seen
    stalls: list = field(default_factory=list)        # seqs of this worker's pause events
    known_expiry: int | None = None

    def epoch_at(self, seq: int) -> tuple[int | None, int]:
        """(epoch, acquire seq) of the latest lease this worker acquired before ``seq``."""
        epoch, at = None, -1
        for s, e in self.acquires:
            if s >= seq:
                break
            epoch, at = e, s
        return epoch, at

    def previous_call(self, seq: int) -> int | None:
        """The seq of this worker's call right before ``seq``."""
        i = bisect_left(self.calls, seq)
        return self.calls[i - 1] if i else None

    def stale_evidence(self, seq: int) -> int | None:
        """The first evidence of lost ownership this worker observed since its latest
        acquisition and before ``seq`` (a seq), or None."""
        _, since = self.epoch_at(seq)
        for s in self.stale:
            if since < s < seq:
                return s
        return None


@dataclass(slots=True)
class RunIndex:
    id: str
    spec: dict
    intent: dict
    service: str
    operation: str
    deadline: int | None
    approval: str
    compensation_authority: str
    intents: list = field(default_factory=list)
    calls: dict = field(default_factory=dict)          # seq -> port call event
    dispatches: list = field(default_factory=list)     # Dispatch, seq order
    dispatch_at: dict = field(default_factory=dict)    # call seq -> Dispatch
    ledger: list = field(default_factory=list)
    ledger_by_key: dict = field(default_factory=dict)
    checkpoints: list = field(default_factory=list)    # accepted checkpoint events
    finishes: list = field(default_factory=list)
    escalations: list = field(default_factory=list)
    leases: list = field(default_factory=list)
    lease_seqs: list = field(default_factory=list)
    effects: list = field(default_factory=list)        # remote effect events caused by this run
    released: list = field(default_factory=list)
    proxy_retries: list = field(default_factory=list)
    remote: list = field(default_factory=list)         # every remote-lane event of this run
    faults: list = field(default_factory=list)         # worker adapter_fault events
    workers: dict = field(default_factory=dict)
    inbox: list = field(default_factory=list)          # deliver events
    cancels_seen: list = field(default_factory=list)   # (seq, worker) of polls that showed a cancel
    approvals: list = field(default_factory=list)      # approval_granted events
    revokes: list = field(default_factory=list)        # seqs
    capability_changes: list = field(default_factory=list)
    budget_exhausted: dict | None = None
    end: dict | None = None
    paused_calls: set = field(default_factory=set)     # call seqs a worker stalled in front of
    resumes: dict = field(default_factory=dict)        # call seq -> (seq, t) of the resume event
    confirmed: set = field(default_factory=set)        # call seqs that confirmed ownership (seen ok)
    stalled: dict = field(default_factory=dict)        # dispatch seq -> knowledge.stalled_send(), memo

    # ---------------------------------------------------------------- ownership
    def lease_at(self, seq: int) -> dict | None:
        """The lease as it stood just before ``seq`` (the latest grant or renewal)."""
        i = bisect_left(self.lease_seqs, seq)
        return self.leases[i - 1] if i else None

    def live(self, epoch, seq: int, t: int) -> bool:
        lease = self.lease_at(seq)
        return lease is not None and lease["epoch"] == epoch and lease["expires_at"] > t

    def expiry(self, epoch, seq: int) -> int | None:
        """When the lease of ``epoch`` was due to expire, as last granted or renewed before ``seq``."""
        for i in range(bisect_left(self.lease_seqs, seq) - 1, -1, -1):
            if self.leases[i]["epoch"] == epoch:
                return self.leases[i]["expires_at"]
        return None

    def knowledge_before(self, key: Any, seq: int) -> str | None:
        """The ledger's latest knowledge for ``key`` before ``seq``."""
        last = None
        for e in self.ledger_by_key.get(key, ()):
            if e["seq"] >= seq:
                break
            last = e["knowledge"]
        return last

    def ledger_keys_before(self, seq: int) -> list[str]:
        return [k for k, entries in self.ledger_by_key.items() if entries[0]["seq"] < seq]

    def primary_keys(self, before: int) -> list:
        """Keys of the run's own business effect: primary dispatches and effect entries of
        the run's operation."""
        keys: list = []
        for d in self.dispatches:
            if d.seq < before and d.role == "primary" and d.key not in keys:
                keys.append(d.key)
        for k, entries in self.ledger_by_key.items():
            entry = obj(entries[0].get("entry"))
            if entries[0]["seq"] < before and entry.get("kind") == "effect" \
                    and entry.get("operation") == self.operation and k not in keys:
                keys.append(k)
        return keys

    def disposition(self) -> str | None:
        if self.end is not None:
            return self.end.get("finished") or self.end.get("waiting")
        last = None
        for f in self.finishes:
            if f.get("accepted"):
                last = f["disposition"]
        return last

    def cancel_delivered(self, seq: int) -> int | None:
        for ev in self.inbox:
            if ev["seq"] >= seq:
                break
            if ev["event"].get("type") == "cancel":
                return ev["seq"]
        return None


@dataclass(slots=True)
class TraceIndex:
    header: dict
    events: list
    runs: dict                                          # run id -> RunIndex
    end: dict | None = None
    effects_by_ref: dict = field(default_factory=dict)  # every committed record, any cause
    released_refs: dict = field(default_factory=dict)   # ref -> first released event
    other_actor: list = field(default_factory=list)     # remote events of other actors
    deploys: list = field(default_factory=list)
    memo: dict = field(default_factory=dict)            # results shared between checks
    calls: dict = field(default_factory=dict)           # every port call, by seq
    effects: list = field(default_factory=list)         # commits caused by any run (not other actors)

    def origin(self, ev: dict) -> tuple[str | None, str | None]:
        """(port, op) of the call that caused a remote event."""
        call = self.calls.get(ev.get("call"))
        return (call["port"], call["op"]) if call is not None else (None, None)

    def forward_effects(self, service: str, operation: str, intents: list) -> list[dict]:
        """Commits of ``service.operation`` by any run whose intent matches one of ``intents``
        on every business field: the effects that belong to that business intent."""
        out = []
        for ev in self.effects:
            port, op = self.origin(ev)
            if port == service and op == operation and any(matches(ev.get("intent"), i) for i in intents):
                out.append(ev)
        return out

    def profile(self, service: str) -> dict:
        return (self.header.get("services") or {}).get(service) or {}

    def fmt(self, t: int) -> str:
        origin = self.header.get("origin_ms") or 0
        total = origin + t
        h, rem = divmod(total, 3_600_000)
        m, rem = divmod(rem, 60_000)
        s, ms = divmod(rem, 1000)
        out = f"{h:02d}:{m:02d}:{s:02d}"
        return out + (f".{ms:03d}" if ms else "")


def build(events: list[dict]) -> TraceIndex:
    """File every event once, through the handler its kind has in FILERS. ``events[0]`` must be
    the header. An event the vocabulary does not declare (crashlab.vocab.events) is an EventError: the
    trace reader and ``Trace.emit`` refuse one, so only a hand-made trace can hold it."""
    header = events[0] if events and events[0].get("kind") == "header" else {}
    runs: dict[str, RunIndex] = {}
    for spec in header.get("runs") or ():
        intent = spec.get("intent") or {}
        ri = RunIndex(id=spec["id"], spec=spec, intent=intent,
                      service=spec.get("service", "reservation"),
                      operation=spec.get("operation", "reserve"), deadline=spec.get("deadline"),
                      approval=spec.get("approval", "auto"),
                      compensation_authority=spec.get("compensation_authority", "granted"))
        ri.intents.append(intent)
        runs[ri.id] = ri
    ix = TraceIndex(header=header, events=events, runs=runs)
    by_kind = _BY_KIND
    for ev in events:
        file = by_kind.get(ev["kind"])
        if file is None:
            file = _scenario_filer(ev)
        file(ix, runs.get(ev.get("run")), ev)
    return ix


# ------------------------------------------------------------------------------ filing, per kind
#: A filer files one event into the index; ``run`` is the index of the event's run, None when
#: it has none or names a run the header does not declare.
Filer = Callable[[TraceIndex, "RunIndex | None", dict], object]
#: The filer of each event type (crashlab.vocab.events); the kinds in IGNORED are filed nowhere (no
#: check reads them).
FILERS: dict[type[kinds.Event], Filer] = {}
IGNORED: frozenset[type[kinds.Event]] = frozenset({
    kinds.Header,                 # read before the pass: the runs it declares
    kinds.CheckpointRejected, kinds.LedgerRejected, kinds.ApprovalRequested,
    kinds.Fault, kinds.Crash, kinds.Failpoint, kinds.Redeploy, kinds.Stop, kinds.Takeover, kinds.CancelRecorded,
})


def _files(*types: type[kinds.Event]):
    def register(filer: Filer) -> Filer:
        for t in types:
            FILERS[t] = filer
        return filer
    return register


def _appends_to(attr: str) -> Filer:
    """A filer that only keeps the event, in order, in its run's list ``attr``."""
    keep = operator.attrgetter(attr)

    def file(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
        if run is not None:
            keep(run).append(ev)
    return file


for _kind, _attr in ((kinds.Checkpoint, "checkpoints"), (kinds.Finish, "finishes"), (kinds.Escalation, "escalations"),
                     (kinds.ApprovalGranted, "approvals"), (kinds.AdapterFault, "faults")):
    _files(_kind)(_appends_to(_attr))


@_files(kinds.Call)
def _file_call(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        ix.calls[ev["seq"]] = ev
        _call(run, ev, COMPENSATION_OPS)


@_files(kinds.Result)
def _file_result(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        _result(run, ev)


@_files(kinds.Ledger)
def _file_ledger(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.ledger.append(ev)
        run.ledger_by_key.setdefault(ev["key"], []).append(ev)
        w = run.workers.get(ev["worker"])
        if w is not None:
            w.appends.append(ev["seq"])


@_files(kinds.Replayed, kinds.Refused, kinds.Dropped, kinds.ResponseLost, kinds.LateArrival,
        kinds.LateRejected, kinds.DuplicateDelivery, kinds.ServerError, kinds.OtherActorRejected)
def _file_remote(ix: TraceIndex, run: RunIndex | None, ev: dict) -> bool:
    """Every remote event: the run's ground truth, or another actor's. True when it is the run's."""
    if run is None:
        ix.other_actor.append(ev)
        return False
    run.remote.append(ev)
    return True


@_files(kinds.Effect)
def _file_effect(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    ix.effects_by_ref.setdefault(ev["ref"], ev)
    if _file_remote(ix, run, ev) and ev.get("cause") != "other_actor":
        run.effects.append(ev)
        ix.effects.append(ev)


@_files(kinds.Released)
def _file_released(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    ix.released_refs.setdefault(ev["ref"], ev)
    if _file_remote(ix, run, ev):
        run.released.append(ev)


@_files(kinds.ProxyRetry)
def _file_proxy_retry(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if _file_remote(ix, run, ev):
        run.proxy_retries.append(ev)


@_files(kinds.Lease)
def _file_lease(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.leases.append(ev)
        run.lease_seqs.append(ev["seq"])
        w = run.workers.get(ev["worker"])
        if w is not None and ev.get("op") == "acquire":
            w.acquires.append((ev["seq"], ev["epoch"]))


@_files(kinds.Resume)
def _file_resume(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.resumes[ev.get("call")] = (ev["seq"], ev["t"])


@_files(kinds.Pause)
def _file_pause(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        if ev.get("boundary") == "before":
            run.paused_calls.add(ev.get("call"))
        w = run.workers.get(ev.get("worker"))
        if w is not None:
            w.stalls.append(ev["seq"])


@_files(kinds.Deliver)
def _file_deliver(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.inbox.append(ev)
        payload = ev["event"].get("payload")
        if isinstance(payload, dict) and isinstance(payload.get("intent"), dict) \
                and payload["intent"] not in run.intents:
            run.intents.append(payload["intent"])


@_files(kinds.Start)
def _file_start(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.workers[ev["worker"]] = WorkerInfo(name=ev["worker"], run=run.id, start_seq=ev["seq"],
                                               env=ev.get("env") or {})


@_files(kinds.RestartBudgetExhausted)
def _file_budget_exhausted(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.budget_exhausted = ev


@_files(kinds.End)
def _file_end(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    ix.end = ev
    for rid, info in (ev.get("runs") or {}).items():
        if rid in ix.runs:
            ix.runs[rid].end = info


def _file_deploy(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    ix.deploys.append(ev)


def _file_revoke(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.revokes.append(ev["seq"])


def _file_capability_change(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    if run is not None:
        run.capability_changes.append(ev["seq"])


def _ignore(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    return None


#: The filer of each scenario event type the checks read (crashlab.scenario.EVENT_TYPES); the
#: others (cancel, approve, callback, ...) reach the checks through what they caused.
SCENARIO_FILERS: dict[str, Filer] = {"deploy": _file_deploy, "revoke": _file_revoke,
                                     "capability_change": _file_capability_change}


@_files(kinds.ScenarioEvent)
def _file_scenario_event(ix: TraceIndex, run: RunIndex | None, ev: dict) -> None:
    SCENARIO_FILERS.get(ev["kind"], _ignore)(ix, run, ev)


def _scenario_filer(ev: dict) -> Filer:
    """The filer of an event whose kind is not in the vocabulary: a scenario event's, or an
    EventError (an unknown kind)."""
    if not event_tables.is_scenario_event(ev):
        raise kinds.EventError(f"trace event #{ev.get('seq')}: "
                               + (event_tables.problem(ev["lane"], ev["kind"], ev) or "not in the vocabulary"))
    return FILERS[kinds.ScenarioEvent]


event_tables.dispatch(FILERS, ignored=IGNORED, name="crashlab.checks.index.FILERS")
#: FILERS by kind name, the ignored kinds filed by nobody: what ``build`` looks up.
_BY_KIND: dict[str, Filer] = {cls.kind: FILERS.get(cls, _ignore) for cls in kinds.TYPES.values()}


def _call(run: RunIndex, ev: dict, compensation_ops) -> None:
    run.calls[ev["seq"]] = ev
    w = run.workers.get(ev["worker"])
    if w is not None:
        w.calls.append(ev["seq"])
    port, op = ev["port"], ev["op"]
    if op in EFFECT_OPS.get(port, ()):
        args = obj(ev.get("args"))
        intent = args.get("intent")
        if op in compensation_ops.get(port, ()):
            role = "compensation"
        elif port == run.service and op == run.operation:
            role = "primary"
        else:
            role = "secondary"
        key = args.get("key")
        if key is not None and not isinstance(key, str):
            key = repr(key)
        target = hashable(args.get("ref"))
        d = Dispatch(seq=ev["seq"], t=ev["t"], worker=ev["worker"], service=port, op=op,
                     key=key, intent=intent if isinstance(intent, dict) else {},
                     args=args, role=role, target=target)
        run.dispatches.append(d)
        run.dispatch_at[d.seq] = d
    elif port == "clock" and op == "sleep":
        if w is not None:
            args = obj(ev.get("args"))
            reason = args.get("reason")
            w.sleeps.append((ev["seq"], args.get("ms"), reason if isinstance(reason, str) else ""))


def _result(run: RunIndex, ev: dict) -> None:
    call = run.calls.get(ev["call"])
    if call is None:
        return
    d = run.dispatch_at.get(ev["call"])
    if d is not None:
        d.result = ev
    if not ev["delivered"]:
        return
    w = run.workers.get(ev["worker"])
    if w is None:
        return
    port, op = call["port"], call["op"]
    if not ev["ok"]:
        err = ev.get("error") or {}
        if err.get("code") in STALE_CODES:
            w.stale.append(ev["seq"])
        return
    if (port, op) in _CONFIRMATIONS:
        run.confirmed.add(call["seq"])
    value = ev.get("value")
    if not isinstance(value, dict):
        return
    if port == "lease":
        if op in ("acquire", "renew"):
            w.known_expiry = value.get("expires_at")
        elif op == "read":
            epoch, _ = w.epoch_at(ev["seq"])
            if epoch is not None and (value.get("epoch") != epoch or value.get("owner") != w.name):
                w.stale.append(ev["seq"])
    elif port == "clock":
        now = value.get("now")
        if isinstance(now, int):
            w.clock_reads.append((ev["seq"], now))
            if w.known_expiry is not None and now >= w.known_expiry:
                w.stale.append(ev["seq"])
    elif port == "checkpoints" and op == "load":
        cp = value.get("checkpoint")
        w.loads.append((ev["seq"], value.get("version"), obj(cp.get("contract")) if isinstance(cp, dict) else None))
        epoch, _ = w.epoch_at(ev["seq"])
        if epoch is not None and isinstance(cp, dict):
            seen = dig(cp, "control", "lease_epoch")
            if isinstance(seen, int) and seen > epoch:
                w.stale.append(ev["seq"])
    elif port == "inbox" and op == "poll":
        for item in value.get("events") or ():
            etype = item.get("type")
            if etype == "cancel":
                run.cancels_seen.append((ev["seq"], w.name))
            elif etype == "callback":
                w.callbacks.append((ev["seq"], hashable(dig(item, "payload", "key"))))
    elif op in IDENTIFYING_READS and port not in ("run", "ledger", "checkpoints"):
        w.reads.append(Read(call_seq=call["seq"], seq=ev["seq"], t=ev["t"], call_t=call["t"],
                            worker=w.name, service=port, op=op, args=obj(call.get("args")),
                            value=value))
