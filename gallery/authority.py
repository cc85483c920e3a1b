"""Authority and compatibility mistakes: approvals, credentials and deployments (AR-08
"Recovery bootstrap procedure", "Deployment compatibility", "Build a failure envelope
before a retry policy")."""
from __future__ import annotations

from crashlab.vocab.model import Knowledge, RunState
from crashlab.reference_impl import ReferenceAdapter, migrations
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.matrix import Action, Row
from crashlab.reference_impl.session import Session

_S = RunState


class _AssumesApprovalSession(Session):
    """A worker that resumes a run waiting for a human takes the wait as approved."""

    resumed_wait = False
    wrote = False

    async def commit(self, state, record=None):
        if not self.wrote and self.version > 0 and state in (_S.PROPOSED, _S.WAITING_HUMAN):
            self.resumed_wait = True         # this worker's first write resumes a human wait
        self.wrote = True
        await super().commit(state, record)

    async def check_authority(self, proposal_hash, action):
        answer = await super().check_authority(proposal_hash, action)
        if (not answer["live"] and self.resumed_wait and action == self.record.intake["operation"]
                and answer["reason"] == "no approval bound to this proposal hash"):
            return {**answer, "live": True, "approval_id": "approved-while-down",
                    "expires_at": self.record.deadline, "reason": "live"}
        return answer


class InventedApproval(ReferenceAdapter):
    """A worker that restarts a run which was waiting for approval assumes the approval
    arrived while it was down and proceeds to reserve."""

    behaviour = Behaviour(session=_AssumesApprovalSession)


def _refreshing_migration(checkpoint, **kwargs):
    migrated = migrations.migrate(checkpoint, **kwargs)
    approval = migrated["evidence"]["approval"]
    if approval.get("approval_id"):
        approval["expires_at"] = None
        migrated["migration"]["changes"].append(
            f"evidence.approval: {approval['approval_id']} re-issued under the new schema (no expiry)")
    return migrated


class _TrustsCheckpointApprovalSession(Session):
    async def check_authority(self, proposal_hash, action):
        answer = await super().check_authority(proposal_hash, action)
        recorded = self.record.approval if self.record else {}
        if (not answer["live"] and recorded.get("approval_id") and recorded.get("expires_at") is None
                and recorded.get("proposal_hash") == proposal_hash):
            return {**answer, "live": True, "approval_id": recorded["approval_id"], "reason": "live"}
        return answer


class MigrationRefreshesAuthority(ReferenceAdapter):
    """Its schema migration re-issues the checkpoint's approval without an expiry, and the
    migrated worker honours that re-issued approval although the authority says it expired."""

    behaviour = Behaviour(migrate=_refreshing_migration, session=_TrustsCheckpointApprovalSession)


_TRY_ANOTHER_CREDENTIAL = Row(
    name="permission_denied_retry", trigger="the principal lacks the capability",
    evidence="permission_denied (definite)", retry_owner="worker", attempt_ceiling=3,
    deadline="the run's absolute deadline", reconciliation_read="none", action=Action.RETRY_SAME_KEY,
    escalation=None, terminal="retry under the integration's service account",
    knowledge=Knowledge.PROPOSED)


class _ServiceCredentialSession(Session):
    """After a denial, the next attempt acts as the integration's service account."""

    async def send(self, service, op, args):
        observations = self.ledger[args["key"]]["observations"]
        if not observations or observations[-1]["code"] != "permission_denied":
            return await super().send(service, op, args)
        response = await super().send(service, op, {
            **args, "intent": {**args["intent"], "principal": "svc-fieldops"}})
        if isinstance(response, dict) and "intent" in response:
            response = {**response, "intent": args["intent"]}     # verified as the run's own request
        return response


class CredentialHunt(ReferenceAdapter):
    """Answers a permission denial by retrying the reservation under the integration's
    service account instead of stopping."""

    behaviour = Behaviour(matrix={("dispatch", "permission_denied"): _TRY_ANOTHER_CREDENTIAL},
                          session=_ServiceCredentialSession)


def _parse_anything(checkpoint, env):
    compat = migrations.decide(checkpoint, env)
    if compat.disposition in ("migrate", "pin"):
        return migrations.Compatibility(disposition="replay", old=compat.old, new=compat.new,
                                        reason="the old checkpoint parsed")
    return compat


class BestEffortDeserialize(ReferenceAdapter):
    """Loads a checkpoint written under another schema or canonicalization version as if
    it were its own whenever it parses, and resumes under the new code."""

    behaviour = Behaviour(compatibility=_parse_anything)
