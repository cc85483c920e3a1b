"""The pure model: states, transition tables, error codes and record schemas, as data.

No simpy, no I/O. Everything else in crashlab (the world, the checks, the reports, the
reference adapter) reads its vocabulary from here, so a state or a transition exists
in exactly one place. The tables follow AR-08 ("Make Execution Durable and Effects
Recoverable"): the checkpoint contract, the effect-ledger contract and the terminal
dispositions of "Classify before retrying".
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping

# --------------------------------------------------------------------------- versions
TRACE_FORMAT = 1
CHECKPOINT_SCHEMA = "crashlab.checkpoint/1"
EFFECT_ENTRY_SCHEMA = "crashlab.effect-entry/1"


def canonical_json(value: Any) -> str:
    """The one serialisation used for traces and fingerprints: sorted keys, no spaces."""
    return _CANONICAL.encode(value)


# What json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) builds on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- run states
class RunState(str, Enum):
    """Durable run states (the checkpoint's control.state)."""

    INTAKE = "INTAKE"                      # no checkpoint yet
    VALIDATED = "VALIDATED"                # intake validated
    PROPOSED = "PROPOSED"                  # proposal frozen, hash computed
    WAITING_HUMAN = "WAITING_HUMAN"        # durable wait for approval
    APPROVED = "APPROVED"                  # live approval bound to the proposal hash
    EFFECT_PREPARED = "EFFECT_PREPARED"    # ledger entry PROPOSED with its key
    EFFECT_IN_FLIGHT = "EFFECT_IN_FLIGHT"  # dispatched, outcome not yet known
    RECONCILING = "RECONCILING"            # ambiguous outcome under authoritative read
    EFFECT_CONFIRMED = "EFFECT_CONFIRMED"  # effect verified against every intent field
    NOTIFYING = "NOTIFYING"                # separate notification effect
    COMPENSATING = "COMPENSATING"          # corrective effect with its own key
    MIGRATING = "MIGRATING"                # deployment migration record written
    WAITING_OPERATOR = "WAITING_OPERATOR"  # escalated with a decision packet
    WAITING_RETRY = "WAITING_RETRY"        # failed retryable; waits for a deliberate retry intent
    PINNED = "PINNED"                      # drained by pinned old code
    SUCCEEDED = "SUCCEEDED"
    FAILED_NO_EFFECT = "FAILED_NO_EFFECT"
    FAILED_EFFECT_REMAINS = "FAILED_EFFECT_REMAINS"
    FAILED_EFFECT_UNKNOWN = "FAILED_EFFECT_UNKNOWN"
    CANCELLED_NO_EFFECT = "CANCELLED_NO_EFFECT"
    CANCELLED_EFFECT_REMAINS = "CANCELLED_EFFECT_REMAINS"
    CANCELLED_EFFECT_UNKNOWN = "CANCELLED_EFFECT_UNKNOWN"


TERMINAL_STATES = frozenset({
    RunState.SUCCEEDED, RunState.FAILED_NO_EFFECT, RunState.FAILED_EFFECT_REMAINS,
    RunState.FAILED_EFFECT_UNKNOWN, RunState.CANCELLED_NO_EFFECT,
    RunState.CANCELLED_EFFECT_REMAINS, RunState.CANCELLED_EFFECT_UNKNOWN,
})
WAITING_STATES = frozenset({
    RunState.WAITING_HUMAN, RunState.WAITING_OPERATOR, RunState.WAITING_RETRY, RunState.PINNED,
})
#: What each terminal disposition asserts about the remote effect of the run's intent.
DISPOSITION_EFFECT_CLAIM: Mapping[RunState, str] = {
    RunState.SUCCEEDED: "present",
    RunState.FAILED_NO_EFFECT: "absent",
    RunState.FAILED_EFFECT_REMAINS: "present",
    RunState.FAILED_EFFECT_UNKNOWN: "unknown",
    RunState.CANCELLED_NO_EFFECT: "absent",
    RunState.CANCELLED_EFFECT_REMAINS: "present",
    RunState.CANCELLED_EFFECT_UNKNOWN: "unknown",
}

_S = RunState
_ACTIVE = [_S.VALIDATED, _S.PROPOSED, _S.WAITING_HUMAN, _S.APPROVED, _S.EFFECT_PREPARED,
           _S.EFFECT_IN_FLIGHT, _S.RECONCILING, _S.EFFECT_CONFIRMED, _S.NOTIFYING,
           _S.COMPENSATING, _S.MIGRATING, _S.WAITING_OPERATOR, _S.WAITING_RETRY, _S.PINNED]
_NO_EFFECT_YET = [_S.VALIDATED, _S.PROPOSED, _S.WAITING_HUMAN, _S.APPROVED, _S.EFFECT_PREPARED]

#: Legal run-state transitions (checkpoint to checkpoint). A state may always be rewritten
#: to itself (a new version with more evidence). Terminal states have no way out.
#: Every checkpoint sequence follows this table, and it admits a design that checkpoints only
#: at AR-08's responsibility boundaries ("validated intake, frozen proposal, before effect,
#: reconciled effect, durable wait, and terminal disposition"): PROPOSED or WAITING_HUMAN
#: straight to EFFECT_PREPARED (the approval was live; APPROVED is no boundary), and
#: EFFECT_PREPARED straight to an unknown disposition (the send and its reconciliation
#: happened between two boundaries and settled nothing).
RUN_TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    _S.INTAKE: frozenset({_S.VALIDATED, _S.FAILED_NO_EFFECT, _S.CANCELLED_NO_EFFECT}),
    _S.VALIDATED: frozenset({_S.PROPOSED, _S.FAILED_NO_EFFECT, _S.CANCELLED_NO_EFFECT,
                             _S.MIGRATING, _S.PINNED, _S.WAITING_OPERATOR}),
    _S.PROPOSED: frozenset({_S.WAITING_HUMAN, _S.APPROVED, _S.EFFECT_PREPARED, _S.FAILED_NO_EFFECT,
                            _S.CANCELLED_NO_EFFECT, _S.MIGRATING, _S.PINNED, _S.WAITING_OPERATOR}),
    _S.WAITING_HUMAN: frozenset({_S.APPROVED, _S.PROPOSED, _S.EFFECT_PREPARED, _S.FAILED_NO_EFFECT,
                                 _S.CANCELLED_NO_EFFECT, _S.MIGRATING, _S.PINNED,
                                 _S.WAITING_OPERATOR}),
    _S.APPROVED: frozenset({_S.EFFECT_PREPARED, _S.WAITING_HUMAN, _S.PROPOSED,
                            _S.FAILED_NO_EFFECT, _S.CANCELLED_NO_EFFECT, _S.MIGRATING,
                            _S.PINNED, _S.WAITING_OPERATOR}),
    _S.EFFECT_PREPARED: frozenset({_S.EFFECT_IN_FLIGHT, _S.RECONCILING, _S.EFFECT_CONFIRMED,
                                   _S.FAILED_NO_EFFECT, _S.CANCELLED_NO_EFFECT, _S.MIGRATING,
                                   _S.PINNED, _S.WAITING_OPERATOR, _S.WAITING_RETRY,
                                   _S.WAITING_HUMAN, _S.FAILED_EFFECT_UNKNOWN,
                                   _S.CANCELLED_EFFECT_UNKNOWN}),
    _S.EFFECT_IN_FLIGHT: frozenset({_S.RECONCILING, _S.EFFECT_CONFIRMED, _S.EFFECT_PREPARED,
                                    _S.FAILED_NO_EFFECT, _S.FAILED_EFFECT_UNKNOWN,
                                    _S.CANCELLED_NO_EFFECT, _S.CANCELLED_EFFECT_UNKNOWN,
                                    _S.WAITING_OPERATOR, _S.WAITING_RETRY, _S.MIGRATING,
                                    _S.PINNED}),
    _S.RECONCILING: frozenset({_S.EFFECT_CONFIRMED, _S.EFFECT_PREPARED, _S.EFFECT_IN_FLIGHT,
                               _S.FAILED_NO_EFFECT, _S.FAILED_EFFECT_UNKNOWN,
                               _S.FAILED_EFFECT_REMAINS, _S.CANCELLED_NO_EFFECT,
                               _S.CANCELLED_EFFECT_UNKNOWN, _S.CANCELLED_EFFECT_REMAINS,
                               _S.COMPENSATING, _S.WAITING_OPERATOR, _S.WAITING_RETRY,
                               _S.MIGRATING, _S.PINNED}),
    _S.EFFECT_CONFIRMED: frozenset({_S.NOTIFYING, _S.SUCCEEDED, _S.COMPENSATING,
                                    _S.FAILED_EFFECT_REMAINS, _S.CANCELLED_EFFECT_REMAINS,
                                    _S.WAITING_OPERATOR, _S.MIGRATING, _S.PINNED}),
    _S.NOTIFYING: frozenset({_S.SUCCEEDED, _S.WAITING_OPERATOR, _S.MIGRATING, _S.PINNED,
                             _S.FAILED_EFFECT_REMAINS, _S.CANCELLED_EFFECT_REMAINS,
                             _S.COMPENSATING}),
    _S.COMPENSATING: frozenset({_S.CANCELLED_NO_EFFECT, _S.CANCELLED_EFFECT_REMAINS,
                                _S.CANCELLED_EFFECT_UNKNOWN, _S.FAILED_NO_EFFECT,
                                _S.FAILED_EFFECT_REMAINS, _S.FAILED_EFFECT_UNKNOWN,
                                _S.WAITING_OPERATOR, _S.MIGRATING, _S.PINNED}),
    # Migration is a deterministic rewrite that keeps the pre-migration state's meaning:
    # it may lead back to any non-terminal state, never straight to a terminal success.
    _S.MIGRATING: frozenset(set(_ACTIVE) - {_S.MIGRATING}
                            | {_S.FAILED_EFFECT_UNKNOWN, _S.FAILED_NO_EFFECT,
                               _S.FAILED_EFFECT_REMAINS, _S.CANCELLED_NO_EFFECT,
                               _S.CANCELLED_EFFECT_REMAINS, _S.CANCELLED_EFFECT_UNKNOWN}),
    _S.WAITING_OPERATOR: frozenset(set(_ACTIVE) - {_S.WAITING_OPERATOR} | TERMINAL_STATES),
    _S.WAITING_RETRY: frozenset({_S.EFFECT_PREPARED, _S.EFFECT_IN_FLIGHT, _S.RECONCILING,
                                 _S.FAILED_NO_EFFECT, _S.CANCELLED_NO_EFFECT,
                                 _S.WAITING_OPERATOR, _S.MIGRATING, _S.PINNED}),
    _S.PINNED: frozenset(set(_ACTIVE) - {_S.PINNED} | TERMINAL_STATES),
    **{t: frozenset() for t in TERMINAL_STATES},
}


# --------------------------------------------------------------------------- knowledge
class Knowledge(str, Enum):
    """Ledger knowledge states: local assertions backed by evidence (AR-08 effect ledger)."""

    PROPOSED = "PROPOSED"                            # prepared with its key, certainly not sent
    SENT_UNKNOWN = "SENT_UNKNOWN"                    # may have left; outcome not known
    CONFIRMED = "CONFIRMED"                          # authoritative evidence of the effect
    REJECTED = "REJECTED"                            # authoritative evidence of no effect
    COMPENSATION_PROPOSED = "COMPENSATION_PROPOSED"  # original confirmed; corrective effect prepared
    COMPENSATED = "COMPENSATED"                      # corrective effect confirmed and verified


_K = Knowledge
#: Legal knowledge transitions for one semantic key. ``None`` is "no entry yet".
#: Each move other than a self-loop needs evidence; which evidence is named in
#: KNOWLEDGE_EVIDENCE and checked by the knowledge-warrant invariant.
KNOWLEDGE_TRANSITIONS: Mapping[Knowledge | None, frozenset[Knowledge]] = {
    None: frozenset({_K.PROPOSED}),
    _K.PROPOSED: frozenset({_K.PROPOSED, _K.SENT_UNKNOWN, _K.CONFIRMED, _K.REJECTED}),
    _K.SENT_UNKNOWN: frozenset({_K.SENT_UNKNOWN, _K.PROPOSED, _K.CONFIRMED, _K.REJECTED}),
    _K.CONFIRMED: frozenset({_K.CONFIRMED, _K.COMPENSATION_PROPOSED}),
    _K.REJECTED: frozenset({_K.REJECTED}),
    _K.COMPENSATION_PROPOSED: frozenset({_K.COMPENSATION_PROPOSED, _K.COMPENSATED,
                                         _K.CONFIRMED}),
    _K.COMPENSATED: frozenset({_K.COMPENSATED}),
}
#: The evidence a move into a state needs (the warrant rule, checked against port results).
KNOWLEDGE_EVIDENCE: Mapping[tuple[Knowledge | None, Knowledge], str] = {
    (_K.SENT_UNKNOWN, _K.PROPOSED): "definite pre-send failure of every attempt, or authoritative absence "
                                    "(the correction before a redispatch under the same key)",
    (_K.PROPOSED, _K.CONFIRMED): "authoritative positive read or accepted response",
    (_K.SENT_UNKNOWN, _K.CONFIRMED): "authoritative positive read or accepted response",
    (_K.PROPOSED, _K.REJECTED): "no attempt ever left the worker",
    (_K.SENT_UNKNOWN, _K.REJECTED): "definite error on every attempt or authoritative absence",
    (_K.COMPENSATION_PROPOSED, _K.COMPENSATED): "compensation entry CONFIRMED",
    (_K.COMPENSATION_PROPOSED, _K.CONFIRMED): "compensation entry REJECTED",
}
UNRESOLVED_KNOWLEDGE = frozenset({_K.SENT_UNKNOWN, _K.COMPENSATION_PROPOSED})


# --------------------------------------------------------------------------- port errors
@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorCode:
    code: str
    definite: bool       # True: the operation certainly did not take effect
    meaning: str


#: Every error a port may return. ``definite`` is Maelstrom's definite/indefinite split:
#: definite means certainly did not happen; indefinite means it may have happened.
ERROR_CODES: Mapping[str, ErrorCode] = {e.code: e for e in [
    ErrorCode(code="refused", definite=True, meaning="connection refused: nothing was sent"),
    ErrorCode(code="timeout_before_send", definite=True,
              meaning="timed out before any byte left the worker (transport proof)"),
    ErrorCode(code="timeout", definite=False,
              meaning="the caller stopped waiting; the request may have been executed"),
    ErrorCode(code="throttled", definite=True,
              meaning="429: rejected before execution; retry after retry_after_ms"),
    ErrorCode(code="server_error", definite=False,
              meaning="5xx: the service failed, before or after commit"),
    ErrorCode(code="unavailable", definite=True,
              meaning="the store or read endpoint is unavailable; nothing was done"),
    ErrorCode(code="conflict_in_flight", definite=True,
              meaning="409: a request with this key is still executing; this one was not"),
    ErrorCode(code="intent_mismatch", definite=True,
              meaning="422: this key was used with a different request fingerprint"),
    ErrorCode(code="already_exists", definite=True,
              meaning="the natural key exists already (it may be this run's earlier success)"),
    ErrorCode(code="validation_failed", definite=True, meaning="the request is malformed"),
    ErrorCode(code="permission_denied", definite=True,
              meaning="the principal lacks the capability; not a transient error"),
    ErrorCode(code="fenced", definite=True, meaning="the fencing token is older than the newest seen"),
    ErrorCode(code="version_conflict", definite=True,
              meaning="checkpoint CAS failed: expected version is not the latest"),
    ErrorCode(code="stale_epoch", definite=True,
              meaning="the lease epoch is not the current one (or has expired)"),
    ErrorCode(code="lease_held", definite=True, meaning="another owner holds an unexpired lease"),
    ErrorCode(code="invalid", definite=True,
              meaning="the record failed the harness schema (names the missing fields)"),
    ErrorCode(code="not_found", definite=True, meaning="no such object"),
    ErrorCode(code="bad_request", definite=True, meaning="unknown operation or bad arguments"),
]}


# --------------------------------------------------------------------------- port calls
#: The ports every adapter sees, with their operations. Service ports are added per
#: scenario (``reservation``, ``notification``, ``registry``) and share SERVICE_OPS.
PLATFORM_PORTS: Mapping[str, frozenset[str]] = {
    "clock": frozenset({"now", "sleep"}),
    "random": frozenset({"draw"}),
    "lease": frozenset({"acquire", "renew", "read"}),
    "checkpoints": frozenset({"load", "write", "history"}),
    "ledger": frozenset({"append", "read", "by_run"}),
    "inbox": frozenset({"poll"}),
    "authority": frozenset({"request", "check"}),
    "operator": frozenset({"escalate"}),
    "run": frozenset({"info", "finish"}),
}
SERVICE_OPS: Mapping[str, frozenset[str]] = {
    "reservation": frozenset({"describe", "reserve", "lookup", "search", "aggregate", "release"}),
    "notification": frozenset({"describe", "send"}),
    "registry": frozenset({"describe", "publish", "get_version", "wait_job"}),
}
#: Operations that cause (or may cause) an external effect: the dispatches.
EFFECT_OPS: Mapping[str, frozenset[str]] = {
    "reservation": frozenset({"reserve", "release"}),
    "notification": frozenset({"send"}),
    "registry": frozenset({"publish"}),
}


def is_dispatch(port: str, op: str) -> bool:
    return op in EFFECT_OPS.get(port, ())


@dataclass(frozen=True, slots=True, kw_only=True)
class PortCall:
    """One request an adapter makes: the unit of simulation and of fault injection."""

    port: str
    op: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def __await__(self):  # an in-process adapter awaits this; the driver answers it
        return (yield self)


# --------------------------------------------------------------------------- schemas
@dataclass(frozen=True, slots=True)
class FieldSpec:
    path: str        # dotted path in the record
    types: tuple     # accepted Python types
    required: bool = True
    enum: frozenset | None = None


def _spec(path, types, required=True, enum=None):
    return FieldSpec(path, types if isinstance(types, tuple) else (types,), required,
                     frozenset(enum) if enum else None)


_STATE_NAMES = [s.value for s in RunState]
_KNOWLEDGE_NAMES = [k.value for k in Knowledge]

#: The checkpoint contract (AR-08 "Design the checkpoint as a recovery contract"): five
#: groups. Required fields are what recovery cannot do without.
CHECKPOINT_FIELDS: tuple[FieldSpec, ...] = (
    _spec("identity", dict), _spec("identity.run_id", str), _spec("identity.task_id", str),
    _spec("identity.tenant", str), _spec("identity.principal", str),
    _spec("control", dict), _spec("control.state", str, enum=_STATE_NAMES),
    _spec("control.state_version", int), _spec("control.owner", str),
    _spec("control.lease_epoch", int), _spec("control.event_sequence", int),
    _spec("control.cancellation", dict), _spec("control.deadline", (int, type(None))),
    _spec("control.budgets", dict),
    _spec("contract", dict), _spec("contract.schema_version", int),
    _spec("contract.code_version", int), _spec("contract.canonicalization_version", int),
    _spec("contract.policy_version", (int, str), required=False),
    _spec("contract.capability_version", (int, str), required=False),
    _spec("contract.approval_ref", (str, type(None)), required=False),
    _spec("evidence", dict), _spec("evidence.proposal_hash", (str, type(None)), required=False),
    _spec("effects", list),
    _spec("migration", (dict, type(None)), required=False),
)

#: The effect-ledger contract (AR-08 "Effect-ledger checklist").
EFFECT_ENTRY_FIELDS: tuple[FieldSpec, ...] = (
    _spec("semantic_key", str), _spec("kind", str, enum=["effect", "compensation"]),
    _spec("service", str), _spec("operation", str), _spec("run_id", str),
    _spec("intent", dict), _spec("intent_fingerprint", str),
    _spec("canonicalization_version", int),
    _spec("knowledge", str, enum=_KNOWLEDGE_NAMES),
    _spec("attempts", list), _spec("lease_epoch", int),
    _spec("proposal_hash", (str, type(None)), required=False),
    _spec("observations", list, required=False), _spec("remote_ref", (str, type(None)), required=False),
    _spec("reconciliation", list, required=False),
    _spec("compensates", (str, type(None)), required=False),
    _spec("compensated_by", (str, type(None)), required=False),
    _spec("evidence", list, required=False), _spec("note", str, required=False),
)

_MISSING = object()


def _get(record: dict, path: tuple[str, ...]):
    cur: Any = record
    for part in path:
        if type(cur) is not dict or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def validate(record: Any, fields: tuple[FieldSpec, ...]) -> list[str]:
    """Return a list of problems ("control.owner: missing"); empty when the record is valid."""
    if type(record) is not dict:
        return [f"record: expected an object, got {type(record).__name__}"]
    problems = []
    for spec, parts, exact in _compiled(fields):
        value = _get(record, parts)
        if value is _MISSING:
            if spec.required:
                problems.append(f"{spec.path}: missing")
            continue
        if type(value) in exact and (spec.enum is None or value in spec.enum):
            continue  # the common case: JSON values of exactly the declared type
        if isinstance(value, bool) and bool not in spec.types:
            problems.append(f"{spec.path}: expected {'/'.join(t.__name__ for t in spec.types)}, got bool")
        elif not isinstance(value, spec.types):
            problems.append(f"{spec.path}: expected {'/'.join(t.__name__ for t in spec.types)}, "
                            f"got {type(value).__name__}")
        elif spec.enum is not None and value not in spec.enum:
            problems.append(f"{spec.path}: {value!r} is not one of {sorted(spec.enum)}")
    return problems


_COMPILED: dict[int, tuple] = {}


def _compiled(fields: tuple[FieldSpec, ...]) -> tuple:
    compiled = _COMPILED.get(id(fields))
    if compiled is None:
        compiled = _COMPILED[id(fields)] = tuple(
            (spec, tuple(spec.path.split(".")), frozenset(spec.types)) for spec in fields)
    return compiled


def validate_checkpoint(record: Any) -> list[str]:
    return validate(record, CHECKPOINT_FIELDS)


def validate_effect_entry(record: Any) -> list[str]:
    return validate(record, EFFECT_ENTRY_FIELDS)


def schema_document(fields: tuple[FieldSpec, ...], title: str) -> dict:
    """A JSON Schema document generated from a field table (for docs and editors)."""
    names = {str: "string", int: "integer", dict: "object", list: "array", type(None): "null",
             bool: "boolean", float: "number"}
    root: dict = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
                  "type": "object", "properties": {}, "required": []}
    for spec in fields:
        parts = spec.path.split(".")
        node = root
        for part in parts[:-1]:
            node = node["properties"][part]
        prop: dict = {"type": [names[t] for t in spec.types] if len(spec.types) > 1
                      else names[spec.types[0]]}
        if spec.enum:
            prop["enum"] = sorted(spec.enum)
        if dict in spec.types:
            prop.update(properties={}, required=[])
        node["properties"][parts[-1]] = prop
        if spec.required:
            node["required"].append(parts[-1])
    return root


#: The twenty rubric points of AR-08 "Assess the eight traces" by id (their names and the invariants
#: behind them live in crashlab.checks.rubric); a scenario expectation's rule names one of these.
RUBRIC_POINT_IDS: tuple[str, ...] = ("C1", "C2", "C3", "C4", "C5", "O1", "O2", "O3", "O4",
                                     "E1", "E2", "E3", "E4", "E5", "E6", "D1", "D2", "D3", "D4", "D5")


#: What each checkpoint field means (docs/adapters.md "Field tables" is generated from this).
CHECKPOINT_FIELD_MEANINGS: dict[str, str] = {
    "identity": "who and what the run is: stable for the run's life",
    "identity.run_id": "the run's stable identifier (`run.info()`)",
    "identity.task_id": "the task the run serves",
    "identity.tenant": "the tenant the run acts for (part of every intent)",
    "identity.principal": "the verified principal, never a credential",
    "control": "where the run stands and who may advance it",
    "control.state": "the run state (the run state machine): the next permitted transition starts here",
    "control.state_version": "this checkpoint's version; a write names the version it replaces",
    "control.owner": "the worker holding the lease that wrote it",
    "control.lease_epoch": "that lease's epoch: a stale worker's lower epoch is fenced",
    "control.event_sequence": "the highest inbox sequence number applied (duplicates are at or below it)",
    "control.cancellation": "the cancellation observed, with its sequence and time (`{}` when none)",
    "control.deadline": "the absolute business deadline in simulated ms (null: none)",
    "control.budgets": "what remains: attempts (`attempt_ceiling`), time, reconciliation reads, human waits",
    "contract": "the versions needed to interpret this checkpoint; a change is a compatibility event",
    "contract.schema_version": "the checkpoint schema the writer used",
    "contract.code_version": "the behavioural contract of the writer's code",
    "contract.canonicalization_version": "how intents are canonicalized into keys and proposal hashes",
    "contract.policy_version": "the policy in force when the proposal was frozen",
    "contract.capability_version": "the capability semantics the approval was given under",
    "contract.approval_ref": "the approval bound to the proposal hash (null: none yet)",
    "evidence": "validated references the transition rests on",
    "evidence.proposal_hash": "the frozen proposal's hash, which approvals and intents are bound to",
    "effects": "every effect of the run with its semantic key and last knowledge: never dropped",
    "migration": "on a migrated checkpoint: `{from, to, previous_version, changes}`",
}

#: What each effect-ledger entry field means (docs/adapters.md "Field tables").
EFFECT_ENTRY_FIELD_MEANINGS: dict[str, str] = {
    "semantic_key": "the stable idempotency key of one business intent, made before the first dispatch",
    "kind": "`effect`, or `compensation` (a separate effect that addresses another)",
    "service": "the service the effect goes to",
    "operation": "the effect operation (`reserve`, `release`, `send`, `publish`)",
    "run_id": "the run that prepared it",
    "intent": "the business fields the key binds (plus `proposal_hash`)",
    "intent_fingerprint": "a hash of the canonical intent: the same key with another fingerprint is an integrity error",
    "canonicalization_version": "the canonical form the key and fingerprint were made with",
    "knowledge": "what the ledger can prove now (the knowledge state machine)",
    "attempts": "every transport attempt under this key, appended before each send",
    "lease_epoch": "the epoch of the worker that appended the entry (appends are fenced by it)",
    "proposal_hash": "the proposal the intent belongs to",
    "observations": "transport observations as seen: outcome, send boundary, definite or not",
    "remote_ref": "the service's stable reference once known",
    "reconciliation": "authoritative reads: query, time, answer, consistency caveat",
    "compensates": "on a compensation: the key of the effect it addresses",
    "compensated_by": "on an original: the key of its compensation",
    "evidence": "references to the trace events or reads that justify this entry",
    "note": "a free-text remark (never evidence by itself)",
}
