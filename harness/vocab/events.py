"""The trace vocabulary: every event kind crashlab writes, its lane, its fields and its meaning.

Everything a trace can hold is declared here, once, in the manner of h11's ``_events.py``:
each kind is a small frozen class (its lane, its fields, its meaning as the docstring) and a
class is the only place its kind is declared; ``TYPES`` holds them by kind, and
``Event.to_dict`` turns an event into the dict a trace writes.

The world emits an event by naming its class, never a lane and kind as strings:
``trace.emit(events.Checkpoint, worker=..., run=..., version=..., ...)`` takes the lane and
kind from the class and refuses (InternalError, a crashlab bug caught where it is made) fields
the class does not declare or a required field left out. The record it writes is the plain
dict of ``Event.to_dict`` (an instance per event would cost the hot path; ``parse`` gives the
typed event back to whoever reads it).

What reads these classes lives in crashlab.vocab.event_tables, derived from them: the tables
``Trace.emit`` and the trace reader check events against, ``parse`` (a written event back to
its typed event), the check of the ``dispatch`` tables through which the checks and the report
handle every kind, and the descriptive view from which the scenario format's evidence
vocabulary and docs/trace.md's table of kinds are made (``python tools/docgen.py``).

A scenario event (``cancel``, ``deploy``, ...) is written on the ``world`` lane under its own
type with ``data`` and ``line`` (``trace.emit_scenario``): a ``ScenarioEvent``.

An optional field an event does not carry is ``ABSENT`` (never written), which keeps it apart
from a field whose value is ``null``.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, TypeVar

#: The lanes of a trace: the three timelines of AR-08 (run, remote, knowledge) and the rest.
LANES = ("meta", "run", "remote", "knowledge", "fault", "worker", "port", "world")
#: The fields every event carries, whatever its kind.
ENVELOPE = ("seq", "t", "lane", "kind", "worker", "run")


class EventError(ValueError):
    """An event that does not match the vocabulary: an unknown kind, a kind on the wrong lane,
    a required field missing or a field its kind does not declare."""


class Absent(enum.Enum):
    """The value of an optional field an event does not carry."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One trace event. A subclass per kind declares its fields; ``seq``, ``t``, ``worker`` and
    ``run`` are common to all (``lane`` and ``kind`` are the class's)."""

    kind: ClassVar[str]
    lane: ClassVar[str]
    meaning: ClassVar[str]
    #: The fields every event of this kind carries, in declaration order.
    fields: ClassVar[tuple[str, ...]] = ()
    #: The fields it carries only sometimes (ABSENT when it does not).
    optional: ClassVar[tuple[str, ...]] = ()

    seq: int
    t: int
    worker: str | None = None
    run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as a trace writes it (``parse(e.to_dict()) == e``)."""
        out = {"seq": self.seq, "t": self.t, "lane": self.lane, "kind": self.kind, "worker": self.worker,
               "run": self.run}
        for name in self.fields:
            out[name] = getattr(self, name)
        for name in self.optional:
            value = getattr(self, name)
            if value is not ABSENT:
                out[name] = value
        return out


#: Every kind of the vocabulary, by name, in declaration order.
TYPES: dict[str, type[Event]] = {}
_RESERVED = frozenset(ENVELOPE) | {"fields", "optional", "meaning", "to_dict"}
_C = TypeVar("_C", bound=type[Event])


def _kind(name: str, lane: str) -> Callable[[_C], _C]:
    """Declare ``cls`` as the event kind ``name`` on ``lane``: its annotated fields are the
    kind's fields (those defaulting to ABSENT are optional), its docstring the meaning."""
    if lane not in LANES:
        raise ValueError(f"event kind {name!r}: unknown lane {lane!r}")

    def declare(cls: _C) -> _C:
        cls = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        own = [f for f in dataclasses.fields(cls) if f.name not in ENVELOPE]
        clash = _RESERVED.intersection(f.name for f in own)
        odd = [f.name for f in own if f.default not in (dataclasses.MISSING, ABSENT)
               or f.default_factory is not dataclasses.MISSING]
        if clash or odd or name in TYPES:
            raise ValueError(f"event kind {name!r}: declared twice, or a field named {sorted(clash)}, or a "
                             f"default other than ABSENT (fields {odd})")
        cls.kind, cls.lane = name, lane
        cls.meaning = " ".join((cls.__doc__ or "").split())
        cls.fields = tuple(f.name for f in own if f.default is dataclasses.MISSING)
        cls.optional = tuple(f.name for f in own if f.default is ABSENT)
        TYPES[name] = cls
        return cls

    return declare


# --------------------------------------------------------------------------------------- meta
@_kind("header", "meta")
class Header(Event):
    """the first event: the scenario, seed, adapter, crashlab release (`harness`) and rule set (`rules`; absent in traces written before crashlab 0.2.0), service profiles, runs and expectations; an integration run's also what its card needs that the events do not show (`integration`: views, notes, cut, timed, undelivered, missed; docs/integration.md), beside the `crashlab integrate` options its repro line repeats (runtime, store, time_scale, wall_limit_s, handover_wait_s)"""

    format: int
    scenario: str
    title: str
    seed: int
    adapter: str
    harness: str
    origin_ms: int
    horizon_ms: int
    env: dict
    services: dict
    runs: list
    source: str | None
    card: dict
    tags: list
    expect: dict
    rules: int | Absent = ABSENT    # the rule set the run was made under (crashlab.rules.ruleset); older traces lack it
    #: integration traces: the card's inputs (crashlab.checks.card.FIELD) and the ``crashlab integrate``
    #: options the repro line repeats (crashlab.run.repro); older integration traces lack it
    integration: dict | Absent = ABSENT


@_kind("end", "meta")
class End(Event):
    """the last event: per run its final disposition (or null), waiting state and worker count: what its own
    events give (its last accepted terminal `finish`, its last accepted waiting `finish` since, its workers'
    `start` events); a trace whose end says otherwise is refused, naming the run and the field"""

    runs: dict


# --------------------------------------------------------------------------------------- port
@_kind("call", "port")
class Call(Event):
    """the adapter called a port (nth: the ordinal of this port.op in the run)"""

    port: str
    op: str
    args: Any
    nth: int


@_kind("result", "port")
class Result(Event):
    """the answer to a call (`call`: the call's seq); `error` is {code, definite, message, details};
    delivered is false when the worker crashed before seeing it"""

    call: int
    ok: bool
    value: Any
    error: dict | None
    delivered: bool


# ------------------------------------------------------------------ run: the local run-state timeline
@_kind("lease", "run")
class Lease(Event):
    """a lease was acquired or renewed, or released by the worker whose finish was accepted (op release);
    in an integration trace, `granted_by: supervisor` and no `call`: crashlab's grant of the run to the
    worker it starts (one live worker per run), which no worker asked for"""

    op: str
    epoch: int
    owner: str
    expires_at: int
    call: int | Absent = ABSENT
    granted_by: str | Absent = ABSENT


@_kind("checkpoint", "run")
class Checkpoint(Event):
    """a checkpoint write was accepted (the whole record, its store version and state)"""

    version: int
    state: str
    owner: str
    epoch: int
    state_version: int
    checkpoint: dict
    call: int


@_kind("checkpoint_rejected", "run")
class CheckpointRejected(Event):
    """a checkpoint write was refused: version_conflict or stale_epoch (then `current_epoch` is the
    live lease's)"""

    reason: str
    expected: Any
    latest: int
    epoch: Any
    call: int
    current_epoch: int | Absent = ABSENT


@_kind("cancel_recorded", "run")
class CancelRecorded(Event):
    """the platform recorded a delivered cancellation as the run's next checkpoint version (the adapter's
    latest document, unchanged): a write against the earlier version now fails"""

    version: int
    event_id: str
    state: str


@_kind("ledger_rejected", "run")
class LedgerRejected(Event):
    """a ledger append was refused because its lease epoch is not the current one (fenced)"""

    reason: str
    epoch: int
    current_epoch: int
    key: str
    call: int


@_kind("approval_requested", "run")
class ApprovalRequested(Event):
    """the adapter asked for an approval"""

    request_id: str
    proposal_hash: str
    action: str
    call: int
    at: int | Absent = ABSENT


@_kind("escalation", "run")
class Escalation(Event):
    """the adapter escalated a decision packet to the operator"""

    ticket: str
    packet: dict
    call: int


@_kind("finish", "run")
class Finish(Event):
    """the adapter finished the run (or reached a durable waiting state)"""

    disposition: str
    effects: Any
    next_owner: Any
    reason: Any
    packet: Any
    accepted: bool
    stale: bool
    call: int


# ------------------------------------------------------------------ knowledge: what the ledger asserts
@_kind("ledger", "knowledge")
class Ledger(Event):
    """an effect-ledger entry was appended: the key's knowledge moved from previous to knowledge"""

    index: int
    key: str
    knowledge: str
    previous: str | None
    epoch: int
    live_epoch: int
    entry: dict
    call: int


# ------------------------------------------------------------------ remote: ground truth
@_kind("effect", "remote")
class Effect(Event):
    """a service committed an effect (cause: adapter, proxy_retry, duplicate_delivery or other_actor)"""

    service: str
    op: str
    ref: str
    key: Any
    intent: Any
    fingerprint: str
    cause: str
    call: int | None


@_kind("replayed", "remote")
class Replayed(Event):
    """a repeated key was answered with the original record"""

    service: str
    key: Any
    ref: str
    call: int | None


@_kind("refused", "remote")
class Refused(Event):
    """a service refused an effect (intent_mismatch, already_exists, ...)"""

    service: str
    key: Any
    call: int | None
    reason: str | Absent = ABSENT
    ref: str | Absent = ABSENT
    code: Any = ABSENT


@_kind("released", "remote")
class Released(Event):
    """a compensation (release) took effect"""

    service: str
    ref: Any
    release_ref: str
    key: Any
    call: int | None
    cause: str | Absent = ABSENT


@_kind("dropped", "remote")
class Dropped(Event):
    """the request was dropped before the service: no effect"""

    service: str
    op: str
    call: int


@_kind("response_lost", "remote")
class ResponseLost(Event):
    """the effect committed, then its response was lost"""

    service: str
    op: str
    call: int


@_kind("late_arrival", "remote")
class LateArrival(Event):
    """a timed-out request is still on its way and will land"""

    service: str
    op: str
    call: int
    delay_ms: int


@_kind("late_rejected", "remote")
class LateRejected(Event):
    """a late request landed and the service refused it"""

    service: str
    call: int
    code: str


@_kind("duplicate_delivery", "remote")
class DuplicateDelivery(Event):
    """the transport delivered the request a second time"""

    service: str
    op: str
    call: int


@_kind("proxy_retry", "remote")
class ProxyRetry(Event):
    """a proxy retried the request on its own"""

    service: str
    op: str
    call: int
    attempt: int | Absent = ABSENT


@_kind("server_error", "remote")
class ServerError(Event):
    """a 5xx answer, before or after the commit"""

    service: str
    op: str
    call: int
    committed: bool


@_kind("other_actor_rejected", "remote")
class OtherActorRejected(Event):
    """another actor's background request was refused"""

    code: str


# --------------------------------------------------------------------------------------- fault
@_kind("fault", "fault")
class Fault(Event):
    """an injected transport or store fault"""

    call: int
    fault: str
    code: str | None
    rule_line: int | None


@_kind("crash", "fault")
class Crash(Event):
    """a worker crashed (before or after a call); in an integration trace, `failpoint` when the worker's own
    helper killed it at the store failpoint crashlab armed (the `failpoint` event of the same name: it fired)"""

    boundary: str
    restart_after_ms: int
    rule_line: int | None
    failpoint: str | Absent = ABSENT


@_kind("failpoint", "fault")
class Failpoint(Event):
    """integration only: crashlab armed a store failpoint (`port.op:nth:boundary`, in CRASHLAB_FAILPOINT) for the
    worker it was starting, from the crash rule at `rule_line`; a `crash` naming the same failpoint is where it fired,
    none means the worker never reached it"""

    failpoint: str
    rule_line: int | None


@_kind("redeploy", "fault")
class Redeploy(Event):
    """integration only: at a scenario's deploy event crashlab deployed the next code version: every worker of the
    `runs` started from now runs the --worker-next command with the versions `env` (a pinned run keeps the old
    command); `stopping`: the old-version workers it stopped (SIGTERM, then SIGKILL `grace_ms` later)"""

    env: dict
    runs: list
    stopping: list
    grace_ms: int


@_kind("pause", "fault")
class Pause(Event):
    """a worker paused: it may become a zombie"""

    call: int
    boundary: str
    resume_after_ms: int
    rule_line: int | None


@_kind("resume", "fault")
class Resume(Event):
    """a paused worker resumed with its stale view (handover, integration only, after a takeover: taken when
    the run's next worker had made its first request, then `by` names that worker; missed when none came within
    the supervisor's wait)"""

    call: int
    handover: str | Absent = ABSENT
    by: str | Absent = ABSENT


# --------------------------------------------------------------------------------------- worker
@_kind("start", "worker")
class Start(Event):
    """a worker started (env: the versions its code runs; in an integration trace, `clock`: the wall clock
    crashlab gave the worker's process, `offset_ms`, `rate`, `faketime`, `rule_line`, where the scenario's
    worker_clocks skew it)"""

    number: int
    env: dict
    clock: dict | Absent = ABSENT


@_kind("stop", "worker")
class Stop(Event):
    """a worker ended after its finish"""

    reason: str


@_kind("takeover", "worker")
class Takeover(Event):
    """the platform (in an integration trace, crashlab) replaces the paused worker `stale`, whose lease expired:
    the run's next worker starts"""

    stale: str


@_kind("adapter_fault", "worker")
class AdapterFault(Event):
    """the adapter misbehaved and the worker was stopped; `fault` is exception, base_exception,
    not_a_port, not_json, thread, forked, step_budget, step_timeout, garbage, flood, line_too_long,
    no_reply, not_reading, closed_stdout, died, stopped, run_timeout, garbled, forged, no_finish,
    unhandled_port_error, trace_too_large,
    invalid_checkpoint or invalid_effect_entry (docs/protocol.md, Limits); the last two only refuse the record, with
    its `problems` and the `checkpoint` or `entry` as written, and the worker goes on"""

    fault: str
    message: str
    call: int | Absent = ABSENT
    problems: list | Absent = ABSENT
    checkpoint: Any = ABSENT
    entry: Any = ABSENT


@_kind("restart_budget_exhausted", "worker")
class RestartBudgetExhausted(Event):
    """the run used up its workers"""

    workers: int


# --------------------------------------------------------------------------------------- world
@_kind("deliver", "world")
class Deliver(Event):
    """an input event reached the run's inbox (seq, event_id, type, producer, payload)"""

    event: dict


@_kind("approval_granted", "world")
class ApprovalGranted(Event):
    """an approval was granted, bound to a proposal hash"""

    approval_id: str
    proposal_hash: str
    action: str
    expires_at: int
    capability_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioEvent(Event):
    """the scenario's event took place (line: its line in the scenario file)"""

    kind: str  # type: ignore[misc]  # the scenario event's type: cancel, deploy, revoke, ...
    data: dict
    line: int | None

    lane: ClassVar[str] = "world"
    fields: ClassVar[tuple[str, ...]] = ("data", "line")

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "t": self.t, "lane": "world", "kind": self.kind, "worker": self.worker,
                "run": self.run, "data": self.data, "line": self.line}


ScenarioEvent.meaning = " ".join((ScenarioEvent.__doc__ or "").split())
#: A scenario event written on the world lane under its own type (cancel, deploy, revoke, ...).
SCENARIO_EVENT_FIELDS = ScenarioEvent.fields
