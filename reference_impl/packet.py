"""The recovery decision packet (AR-08 "Operate the recovery system", docs/adapters.md).

Header, effect panel, authority panel, compatibility panel, budget panel, a recommended
disposition with its alternatives, and the accountable next owner. It carries typed
parameters and evidence references only: no credentials, no raw private context.
"""
from __future__ import annotations

from typing import Any, Mapping

from crashlab.vocab.model import DISPOSITION_EFFECT_CLAIM, RunState

from . import matrix
from .effects import Role, entry_of, fact_of, read_request, role_of
from .record import ADAPTER
from .session import Session

CONSEQUENCE = {"reservation": "inventory hold", "registry": "package publication",
               "notification": "customer message"}


def _goal(intake: Mapping[str, Any] | None) -> str:
    if not intake or not isinstance(intake.get("intent"), dict):
        return "no valid intake"
    intent = intake["intent"]
    detail = ", ".join(f"{k}={intent[k]}" for k in sorted(intent) if k not in ("tenant", "principal"))
    return f"{intake['operation']} {detail}"


def _effect_panel(s: Session) -> list[dict]:
    panel = []
    for entry in s.ledger.values():
        role = role_of(entry, s.record.intake)
        observations = entry["observations"]
        profile = s.profiles.get(entry["service"])
        target = s.ledger[entry["compensates"]] if role is Role.COMPENSATION else entry
        read = read_request(entry, target, profile) if profile else None
        panel.append({
            "semantic_key": entry["semantic_key"], "kind": entry["kind"], "role": role.value,
            "service": entry["service"], "intent": entry["intent"],
            "attempts": len(entry["attempts"]),
            "last_observation": observations[-1]["code"] if observations else None,
            "remote_ref": entry["remote_ref"],
            "reconciliation": [f"{r.get('read') or r['verdict']}: {r.get('code', r['verdict'])} at {r['at']}"
                               for r in entry["reconciliation"]],
            "authoritative_read": read.label if read else "none",
            "knowledge": entry["knowledge"], "compensates": entry["compensates"],
            "compensated_by": entry["compensated_by"]})
    return panel


def _recommendation(row: matrix.Row, disposition: RunState, unresolved: list[dict],
                    can_release: bool) -> tuple[dict, list[dict]]:
    claim = DISPOSITION_EFFECT_CLAIM.get(disposition, "unknown")
    if unresolved:
        first = unresolved[0]
        if first["authoritative_read"] == "none":
            # the service has no read that identifies the effect: recommending one would send
            # the operator to a query that does not exist
            return ({"action": "STOP", "effect": "unknown", "semantic_key": first["semantic_key"],
                     "reason": f"{first['service']} offers no read that identifies the effect"},
                    [{"action": "MARK_EXTERNAL_REFERENCE", "requires": "independent verification"}])
        return ({"action": "RECONCILE", "query": f"{first['service']}.{first['authoritative_read']}",
                 "semantic_key": first["semantic_key"], "expected": ["found", "absent", "unavailable"]},
                [{"action": "STOP", "effect": "unknown"},
                 {"action": "MARK_EXTERNAL_REFERENCE", "requires": "independent verification"}])
    if row.name == "shared_effect":
        return ({"action": "STOP", "effect": "remains",
                 "reason": "another run of the same intent caused the effect and may still report it"},
                [{"action": "COMPENSATE", "proposal": "release of the shared effect",
                  "requires": "agreement of the run that caused it and coordinator authority"}])
    if disposition in (RunState.CANCELLED_EFFECT_REMAINS, RunState.FAILED_EFFECT_REMAINS) and not can_release:
        return ({"action": "STOP", "effect": "remains", "reason": "the service cannot release it"},
                [{"action": "NEW_REQUEST", "requires": "the service owner corrects the effect by hand"}])
    if disposition in (RunState.CANCELLED_EFFECT_REMAINS, RunState.FAILED_EFFECT_REMAINS):
        return ({"action": "COMPENSATE", "proposal": "release of the remaining effect",
                 "requires": "coordinator authority for the release"},
                [{"action": "STOP", "effect": "remains"}])
    if row.action is matrix.Action.MIGRATE_PIN_OR_STOP:
        return ({"action": "MIGRATE", "requires": "a tested migration for these versions"},
                [{"action": "PIN", "requires": "old code deployed to drain the run"},
                 {"action": "STOP", "effect": claim}])
    return ({"action": "STOP", "effect": claim, "reason": row.trigger},
            [{"action": "NEW_REQUEST", "requires": f"{row.escalation or 'requester'} resolves: {row.evidence}"}])


def build(s: Session, *, row: matrix.Row, disposition: RunState, next_owner: str, reason: str,
          now: int) -> dict:
    rec = s.record
    effects = _effect_panel(s)
    unresolved = [e for e in effects if e["knowledge"] in ("SENT_UNKNOWN", "COMPENSATION_PROPOSED")]
    primary = entry_of(s, Role.PRIMARY) if rec.intake else None
    attempts_remaining = None
    if primary is not None:
        fact = fact_of(primary)
        attempts_remaining = max(0, fact.ceiling - fact.attempts)
    authority = s.authority or {}
    profile = s.profiles.get((rec.intake or {}).get("service")) or {}
    recommended, alternatives = _recommendation(row, disposition, unresolved,
                                                profile.get("compensation") is not False)
    return {
        "header": {"run_id": rec.run_id, "tenant": rec.tenant, "goal": _goal(rec.intake),
                   "consequence": CONSEQUENCE.get((rec.intake or {}).get("service"), "external effect"),
                   "state": disposition.value, "state_version": s.version, "owner": s.worker,
                   "lease_epoch": s.epoch, "cancellation": dict(rec.cancellation)},
        "effects": effects,
        "authority": {"principal": rec.principal, "proposal_hash": (rec.proposal or {}).get("hash"),
                      "approval": authority.get("approval_id") or rec.approval.get("approval_id"),
                      "expires_at": authority.get("expires_at"), "revoked": authority.get("revoked", False),
                      "live": authority.get("live", False), "reason": authority.get("reason")},
        "compatibility": {**rec.contract, "adapter": ADAPTER},
        "budget": {"deadline": rec.deadline, "attempts_remaining": attempts_remaining,
                   "time_remaining_ms": max(0, rec.deadline - now) if rec.deadline is not None else None,
                   "reconcile_reads_remaining": matrix.RECONCILE_READ_CEILING
                   - rec.budgets.get("reconcile_reads_used", 0)},
        "recommended": recommended,
        "alternatives": alternatives,
        "classification": {"row": row.name, "trigger": row.trigger, "evidence": row.evidence,
                           "terminal": row.terminal},
        "reads_this_worker": list(s.reads),
        "reason": reason,
        "next_owner": next_owner,
    }
