"""Inbox events: order, deduplicate, and give every delivery a disposition
(AR-08 "Late, duplicate, and reordered events").

Every event id is processed once; a second delivery of the same id is recorded as a
duplicate of the first and causes no transition. Events of one producer that carry a
``producer_seq`` are applied in that order. A callback is admitted to the evidence
only: it never advances state (reconciliation decides). Approval, revocation and
capability events only make the worker ask ``authority.check`` again: the event itself
is never treated as authority.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .matrix import classify
from .record import RunRecord


def ordered(events: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Delivery order, except that each producer's sequenced events are applied in
    producer_seq order within the slots they were delivered in."""
    events = sorted(events, key=lambda e: e["seq"])
    slots: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        if event["producer_seq"] is not None:
            slots.setdefault(event["producer"], []).append(index)
    out = list(events)
    for indexes in slots.values():
        by_producer_seq = sorted((events[i] for i in indexes),
                                 key=lambda e: (e["producer_seq"], e["seq"]))
        for index, event in zip(indexes, by_producer_seq):
            out[index] = event
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Absorbed:
    record: RunRecord
    authority_changed: bool      # ask authority.check again before relying on it


def _disposition(record: RunRecord, event: Mapping[str, Any]) -> tuple[str, dict, RunRecord]:
    """(disposition, detail, record) for the first delivery of one event."""
    etype, payload = event["type"], event["payload"] or {}
    cancelled = record.cancellation["requested"]
    if etype == "intake":
        if record.intake is not None:
            return "ignored: an intake was already accepted", {}, record
        intake = {"event_id": event["event_id"], "intent": payload.get("intent"),
                  "service": payload.get("service"), "operation": payload.get("operation"),
                  "deadline": payload.get("deadline"), "notify": bool(payload.get("notify")),
                  "at": event["at"]}
        intent = intake["intent"] if isinstance(intake["intent"], dict) else {}
        return ("accepted: intake (validated before it becomes a proposal)", {},
                record.evolve(intake=intake, tenant=str(intent.get("tenant", "")),
                              principal=str(intent.get("principal", ""))))
    if etype == "cancel":
        row = classify("inbox", "cancel")
        if cancelled:
            return "ignored: cancellation already recorded", {}, record
        cancellation = {"requested": True, "at": event["at"], "event_id": event["event_id"],
                        "seq": event["seq"]}
        return f"accepted: {row.name}: {row.action.value}", {}, record.evolve(cancellation=cancellation)
    if etype == "callback":
        row = classify("inbox", "callback")
        result = payload.get("result") or {}
        detail = {"service": payload.get("service"), "key": payload.get("key"),
                  "ref": result.get("ref") if isinstance(result, dict) else None}
        return f"{row.name}: {row.action.value}", detail, record
    if etype == "approval":
        detail = {"approval_id": payload.get("approval_id"), "proposal_hash": payload.get("proposal_hash"),
                  "action": payload.get("action"), "expires_at": payload.get("expires_at"),
                  "request_id": payload.get("request_id")}
        if cancelled and payload.get("action") == (record.intake or {}).get("operation"):
            return "late: approval after cancellation; no new work", detail, record
        return "evidence: approval (authority.check decides)", detail, record
    if etype == "retry":
        detail = {"retry_id": payload.get("retry_id") or event["event_id"]}
        return "accepted: deliberate retry intent (admits one attempt when claimed)", detail, record
    if etype in ("revocation", "capability_change"):
        return "evidence: authority changed (authority.check decides)", dict(payload), record
    return f"recorded: no transition for a {etype!r} event", dict(payload), record


def absorb(record: RunRecord, events: list[Mapping[str, Any]]) -> Absorbed:
    known = {k: dict(v) for k, v in record.events.items()}
    authority_changed = False
    sequence = record.event_sequence
    for event in ordered(events):
        sequence = max(sequence, event["seq"])
        first = known.get(event["event_id"])
        if first is not None:
            if event["seq"] != first["seq"] and event["seq"] not in first["duplicates"]:
                # duplicate_event row: record the delivery, no second transition
                first["duplicates"] = [*first["duplicates"], event["seq"]]
            continue
        disposition, detail, record = _disposition(record, event)
        known[event["event_id"]] = {"seq": event["seq"], "type": event["type"],
                                    "disposition": disposition, "detail": detail, "duplicates": []}
        authority_changed |= event["type"] in ("approval", "revocation", "capability_change")
    return Absorbed(record=record.evolve(events=known, event_sequence=sequence),
                    authority_changed=authority_changed)


def retry_intents(record: RunRecord) -> list[str]:
    """Deliberate retry ids in delivery order."""
    return [ev["detail"]["retry_id"] for ev in record.events.values() if ev["type"] == "retry"]


def answered_requests(record: RunRecord) -> set[str]:
    """Approval request ids an approval event has answered."""
    return {ev["detail"]["request_id"] for ev in record.events.values() if ev["type"] == "approval"}
