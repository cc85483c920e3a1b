"""Approvals: the authority's semantics, as plain functions over one run's book.

The simulator's authority port (platform.Authority) and the sandbox's (crashlab.sandbox.authority)
both decide by these functions, as the simulator and the sandbox share transport.py: a request
binds a proposal hash and an action; the run's approval policy grants it after its delay (``auto``),
when the scenario says so (``manual``: a scenario ``approve``), or never (``none`` needs no approval
for the run's own operation); a corrective action (a release) follows the run's compensation-
authority policy and needs an approval of its own. An approval is live while it is unexpired,
unrevoked and of the run's current capability version. Time is the caller's (scenario ms);
emitting events, scheduling grants and delivering to the inbox are the caller's too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ports import PortError


@dataclass(slots=True)
class Approval:
    approval_id: str
    proposal_hash: str
    action: str
    granted_at: int
    expires_at: int
    capability_version: int
    revoked: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    """A run's approval policy (its spec's ``approval``, ``operation`` and ``compensation_authority``)."""

    mode: str                   # auto | manual | none
    delay_ms: int
    expires_after_ms: int
    operation: str
    compensation_authority: str  # granted | denied

    @classmethod
    def of(cls, spec: Any) -> "Policy":
        approval = spec.approval
        return cls(mode=approval.get("mode", "auto"), delay_ms=int(approval.get("delay_ms", 0)),
                   expires_after_ms=int(approval["expires_after_ms"]), operation=spec.operation,
                   compensation_authority=spec.compensation_authority)


@dataclass(slots=True)
class Book:
    """One run's approval state (the simulator keeps the same fields on its RunWorld)."""

    approvals: list[Approval] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)          # approval requests
    pending_approve: list[dict] = field(default_factory=list)   # manual answers before a request
    capability_version: int = 1


def request(book: Any, policy: Policy, args: dict, now: int) -> tuple[dict, int | None]:
    """A worker's ``authority.request``: the recorded request and the delay after which it is
    granted (None: not by itself; a scenario ``approve`` may grant it later)."""
    phash, action = args.get("proposal_hash"), args.get("action")
    if not isinstance(phash, str) or not isinstance(action, str):
        raise PortError("bad_request", "authority.request needs proposal_hash and action strings")
    req = {"request_id": f"AR-{len(book.requests) + 1}", "proposal_hash": phash, "action": action, "at": now}
    book.requests.append(req)
    if action != policy.operation:      # corrective actions follow the compensation-authority policy
        return req, 0 if policy.compensation_authority == "granted" else None
    if policy.mode == "auto":
        return req, policy.delay_ms
    if policy.mode == "manual" and book.pending_approve:
        book.pending_approve.pop(0)
        return req, 0
    return req, None


def grant(book: Any, policy: Policy, req: dict, now: int) -> tuple[Approval, dict]:
    """Grant ``req`` now: the approval, and the payload the run's inbox receives."""
    approval = Approval(approval_id=f"AP-{len(book.approvals) + 1}", proposal_hash=req["proposal_hash"],
                        action=req["action"], granted_at=now, expires_at=now + policy.expires_after_ms,
                        capability_version=book.capability_version)
    book.approvals.append(approval)
    return approval, {"approval_id": approval.approval_id, "proposal_hash": approval.proposal_hash,
                      "action": approval.action, "expires_at": approval.expires_at,
                      "request_id": req["request_id"]}


def approve(book: Any, data: dict) -> dict | None:
    """A scenario's ``approve``: the latest request, to grant now; with none yet, it answers the next."""
    if book.requests:
        return book.requests[-1]
    book.pending_approve.append(data)
    return None


def revoke(book: Any) -> None:
    """A scenario's ``revoke``: every approval of the run."""
    for ap in book.approvals:
        ap.revoked = True


def change_capability(book: Any) -> int:
    """A scenario's ``capability_change``: approvals of the old version are no longer live."""
    book.capability_version += 1
    return book.capability_version


def live(book: Any, policy: Policy, phash: Any, action: Any, now: int) -> Approval | None:
    if policy.mode == "none" and action == policy.operation:
        return Approval("standing", str(phash), str(action), 0, 1 << 62, book.capability_version)
    for ap in reversed(book.approvals):
        if (ap.proposal_hash == phash and ap.action == action and not ap.revoked
                and ap.expires_at > now and ap.capability_version == book.capability_version):
            return ap
    return None


def check(book: Any, policy: Policy, args: dict, now: int) -> dict:
    """A worker's ``authority.check``: whether an approval bound to the proposal hash and action is live."""
    phash, action = args.get("proposal_hash"), args.get("action")
    ap = live(book, policy, phash, action, now)
    if ap is not None:
        return {"live": True, "approval_id": ap.approval_id, "expires_at": ap.expires_at,
                "revoked": False, "capability_version": book.capability_version, "reason": "live"}
    if action != policy.operation and policy.compensation_authority == "denied":
        reason = "denied by policy"
    else:
        bound = [a for a in book.approvals if a.proposal_hash == phash and a.action == action]
        if not bound:
            reason = "no approval bound to this proposal hash"
        elif bound[-1].revoked:
            reason = "revoked"
        elif bound[-1].capability_version != book.capability_version:
            reason = "capability version changed"
        else:
            reason = "expired"
    return {"live": False, "approval_id": None, "expires_at": None, "revoked": reason == "revoked",
            "capability_version": book.capability_version, "reason": reason}
