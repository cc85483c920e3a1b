"""Ownership mistakes: lease, epoch and the checkpoint's owner (AR-08 "Checkpoint identity
and ownership", "Design the checkpoint as a recovery contract")."""
from __future__ import annotations

from crashlab.reference_impl import ReferenceAdapter
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.session import FencedOut, Session, StaleView, StoreDown


class _UnfencedSession(Session):
    """A failed lease renewal, conditional checkpoint write or fenced ledger append is
    logged and ignored."""

    async def hold_lease(self, ttl_ms=None):
        try:
            await super().hold_lease(ttl_ms)
        except FencedOut:
            pass

    async def commit(self, state, record=None):
        try:
            await super().commit(state, record)
        except (FencedOut, StaleView):
            self.record = (record or self.record).evolve(state=state)

    async def append(self, entry):
        try:
            await super().append(entry)
        except StoreDown as down:
            if down.error.code != "stale_epoch":
                raise
            self.ledger[entry["semantic_key"]] = entry


class UnfencedZombie(ReferenceAdapter):
    """Treats a stale-epoch or version-conflict answer to its lease renewals and durable
    writes as a storage hiccup and carries on, so a worker that resumes after losing its
    lease keeps dispatching."""

    behaviour = Behaviour(session=_UnfencedSession)


class _OwnerlessSession(Session):
    def document(self, record, state):
        checkpoint = super().document(record, state)
        control = {k: v for k, v in checkpoint["control"].items() if k not in ("owner", "state_version")}
        return {**checkpoint, "control": control}


class CheckpointWithoutOwner(ReferenceAdapter):
    """Writes its checkpoints without a state version or an owner, relying on the store's
    own version counter and on the lease to say who wrote them."""

    behaviour = Behaviour(session=_OwnerlessSession)
