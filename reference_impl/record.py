"""The durable run record and its checkpoint encodings (AR-08 "Design the checkpoint as a
recovery contract": identity, control, contract, evidence and effects groups).

:class:`RunRecord` is what a worker knows about its run between two checkpoint writes.
It is encoded into the harness checkpoint schema in one of two layouts:

* schema 1 keeps the inbox dedupe record as a delivery log, one item per delivery
  (``evidence.events = [{"event_id", "seq", "type", "disposition", "detail"}, ...]``);
* schema 2 keys it by event id and folds duplicate deliveries into the first
  (``evidence.events = {event_id: {"seq", "type", "disposition", "detail", "duplicates"}}``).

Which layout a worker writes is ``env.schema_version``. Reading a checkpoint written in
another layout is a deployment-compatibility decision (migrations.py), never a silent
best-effort parse.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from crashlab.vocab.model import RunState

SCHEMAS = (1, 2)
ADAPTER = "reference_impl/AR-08 v0.1.0"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    run_id: str
    task_id: str
    tenant: str
    principal: str
    state: RunState | None                     # None: nothing durable yet
    contract: Mapping[str, Any]                # schema/code/canonicalization/policy/capability versions
    intake: Mapping[str, Any] | None = None    # event_id, intent, service, operation, notify, problems
    deadline: int | None = None                # absolute, simulated ms
    proposal: Mapping[str, Any] | None = None  # hash, operation, canonicalization_version
    approval: Mapping[str, Any] = field(default_factory=dict)  # requests, approval_id, expires_at, reason
    cancellation: Mapping[str, Any] = field(default_factory=lambda: {"requested": False})
    events: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # event_id -> disposition
    event_sequence: int = 0
    budgets: Mapping[str, Any] = field(default_factory=dict)
    effects: tuple[Mapping[str, Any], ...] = ()
    outcome: Mapping[str, Any] | None = None   # terminal/waiting disposition, next owner, ticket
    migration: Mapping[str, Any] | None = None

    def evolve(self, **changes: Any) -> "RunRecord":
        """``dataclasses.replace``, without its walk over the field definitions on every call."""
        if type(self) is not RunRecord or not changes.keys() <= _FIELD_SET:
            return replace(self, **changes)
        new = object.__new__(RunRecord)
        for name in _FIELDS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new


_FIELDS = tuple(f.name for f in fields(RunRecord))
_FIELD_SET = frozenset(_FIELDS)


# --------------------------------------------------------------------------- inbox record layouts
def events_to_v1(events: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    log = []
    for event_id, ev in events.items():
        log.append({"event_id": event_id, "seq": ev["seq"], "type": ev["type"],
                    "disposition": ev["disposition"], "detail": ev["detail"]})
        for dup in ev["duplicates"]:
            log.append({"event_id": event_id, "seq": dup, "type": ev["type"],
                        "disposition": f"duplicate_event: duplicate of seq {ev['seq']}, no transition",
                        "detail": {}})
    return sorted(log, key=lambda item: item["seq"])


def events_from_v1(log: list[Mapping[str, Any]]) -> dict[str, dict]:
    events: dict[str, dict] = {}
    for item in sorted(log, key=lambda i: i["seq"]):
        first = events.get(item["event_id"])
        if first is None:
            events[item["event_id"]] = {"seq": item["seq"], "type": item["type"],
                                        "disposition": item["disposition"],
                                        "detail": item["detail"], "duplicates": []}
        else:
            first["duplicates"].append(item["seq"])
    return events


def _events_v2(events: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    return {k: {"seq": v["seq"], "type": v["type"], "disposition": v["disposition"],
                "detail": v["detail"], "duplicates": list(v["duplicates"])} for k, v in events.items()}


# --------------------------------------------------------------------------- encode / decode
def encode(record: RunRecord, *, state: RunState, owner: str, epoch: int, state_version: int) -> dict:
    schema = record.contract["schema_version"]
    events = events_to_v1(record.events) if schema == 1 else _events_v2(record.events)
    return {
        "identity": {"run_id": record.run_id, "task_id": record.task_id, "tenant": record.tenant,
                     "principal": record.principal, "parent": None},
        "control": {"state": state.value, "state_version": state_version, "owner": owner,
                    "lease_epoch": epoch, "event_sequence": record.event_sequence,
                    "cancellation": dict(record.cancellation), "deadline": record.deadline,
                    "budgets": dict(record.budgets)},
        "contract": {**record.contract, "adapter": ADAPTER,
                     "approval_ref": record.approval.get("approval_id")},
        "evidence": {"intake": record.intake, "proposal": record.proposal,
                     "proposal_hash": record.proposal["hash"] if record.proposal else None,
                     "approval": dict(record.approval), "events": events,
                     "outcome": record.outcome},
        "effects": [dict(e) for e in record.effects],
        "migration": record.migration,
    }


def decode(checkpoint: Mapping[str, Any]) -> RunRecord:
    """Read a checkpoint written in one of this code's layouts (the caller has already
    decided that the layout is this worker's own; see migrations.decide)."""
    identity, control, evidence = checkpoint["identity"], checkpoint["control"], checkpoint["evidence"]
    contract = {k: v for k, v in checkpoint["contract"].items() if k not in ("adapter", "approval_ref")}
    events = (events_from_v1(evidence["events"]) if contract["schema_version"] == 1
              else _events_v2(evidence["events"]))
    return RunRecord(
        run_id=identity["run_id"], task_id=identity["task_id"], tenant=identity["tenant"],
        principal=identity["principal"], state=RunState(control["state"]), contract=contract,
        intake=evidence["intake"], deadline=control["deadline"], proposal=evidence["proposal"],
        approval=dict(evidence["approval"]), cancellation=dict(control["cancellation"]),
        events=events, event_sequence=control["event_sequence"], budgets=dict(control["budgets"]),
        effects=tuple(checkpoint["effects"]), outcome=evidence["outcome"],
        migration=checkpoint.get("migration"))
