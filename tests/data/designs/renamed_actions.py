"""Two designs that differ from the reference adapter only in the name of the action their
decision packet recommends, each a name the AR-08 chapter itself uses for an allowlisted
control ("Operate the recovery system", "Alerts that lead to action").

* :class:`VerifyDelivery`: where the service offers no read that identifies the effect (a
  notification whose answer was lost), it recommends ``VERIFY_DELIVERY`` (\u201cmark an external
  reference after independent verification\u201d) with ``STOP`` (effect unknown) as the alternative,
  where the reference recommends STOP and offers the verification.
* :class:`MigrateOrPin`: a design that hands every checkpoint whose versions differ from its
  code to the operator (:class:`StopOnIncompatible`, whose packet recommends MIGRATE as the
  reference's does) and recommends ``MIGRATE_OR_PIN`` (\u201cAn incompatible checkpoint points to
  the migration or pin runbook\u201d) instead.
* :class:`DeclaredControl`: an action of the design's own name, declared as the control it is.
"""
from __future__ import annotations

from crashlab.reference_impl import ReferenceAdapter, migrations
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.session import Session


def _no_read(packet: dict) -> bool:
    """The reference's packet for an unresolved effect no read identifies: STOP (effect unknown)
    with the independent verification offered."""
    rec = packet.get("recommended") or {}
    return rec.get("action") == "STOP" and rec.get("effect") == "unknown" and any(
        a.get("action") == "MARK_EXTERNAL_REFERENCE" for a in packet.get("alternatives") or ())


class _VerifyDeliverySession(Session):
    async def escalate(self, packet: dict) -> str:
        rec = packet.get("recommended") or {}
        if _no_read(packet):
            packet = {**packet,
                      "recommended": {"action": "VERIFY_DELIVERY", "semantic_key": rec.get("semantic_key"),
                                      "requires": "independent verification by the service owner"},
                      "alternatives": [{"action": "STOP", "effect": "unknown"}]}
        return await super().escalate(packet)


class VerifyDelivery(ReferenceAdapter):
    """Recommends VERIFY_DELIVERY, with STOP (effect unknown) as the alternative, where the
    service offers no read that identifies an unresolved effect."""

    behaviour = Behaviour(session=_VerifyDeliverySession)


def _stop_rather_than_migrate(checkpoint, env) -> migrations.Compatibility:
    compat = migrations.decide(checkpoint, env)
    if compat.disposition in ("migrate", "pin"):
        return migrations.Compatibility(disposition="stop", old=compat.old, new=compat.new,
                                        reason=f"checkpoint versions {dict(compat.old)} differ from this code's "
                                               f"{dict(compat.new)}: the operator runs the migration or pin runbook")
    return compat


class StopOnIncompatible(ReferenceAdapter):
    """Neither migrates nor pins by itself: a checkpoint whose versions differ from the code's
    is escalated to the operator, whose packet recommends MIGRATE (the reference's name) with
    PIN and STOP as alternatives."""

    behaviour = Behaviour(compatibility=_stop_rather_than_migrate)


class _MigrateOrPinSession(Session):
    async def escalate(self, packet: dict) -> str:
        rec = packet.get("recommended") or {}
        if rec.get("action") == "MIGRATE":
            packet = {**packet, "recommended": {**rec, "action": "MIGRATE_OR_PIN"},
                      "alternatives": [a for a in packet.get("alternatives") or () if a.get("action") != "PIN"]}
        return await super().escalate(packet)


class MigrateOrPin(ReferenceAdapter):
    """StopOnIncompatible, whose packet recommends MIGRATE_OR_PIN for the incompatible checkpoint."""

    behaviour = Behaviour(compatibility=_stop_rather_than_migrate, session=_MigrateOrPinSession)


class _DeclaredControlSession(Session):
    async def escalate(self, packet: dict) -> str:
        rec = packet.get("recommended") or {}
        if _no_read(packet):
            packet = {**packet, "recommended": {"action": "ASK_PROVIDER_FOR_RECEIPT",
                                                "control": "mark_external_reference",
                                                "semantic_key": rec.get("semantic_key")},
                      "alternatives": [{"action": "STOP", "effect": "unknown"}]}
        return await super().escalate(packet)


class DeclaredControl(ReferenceAdapter):
    """Recommends an action of its own name, ASK_PROVIDER_FOR_RECEIPT, declared as the
    control it is (mark an external reference after independent verification)."""

    behaviour = Behaviour(session=_DeclaredControlSession)
