"""Correct alternatives: legitimate design choices that differ from the reference's.

Each one must pass every safety invariant on every scenario. A library expectation accepts
every outcome the chapter permits, so an alternative loses a point only where its choice
breaks the rule that expectation names (its registry note in gallery/__init__.py says
which): EscalateEveryAmbiguity skips the authoritative read (E4); StopInsteadOfCompensate
(it never sends a release, so the compensation scenarios accept its escalated
CANCELLED_EFFECT_REMAINS) and PinInsteadOfMigrate lose nothing."""
from __future__ import annotations

from crashlab.vocab.model import Knowledge, RunState
from crashlab.reference_impl import ReferenceAdapter, effects, migrations
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.effects import evolve
from crashlab.reference_impl.matrix import Action, Row
from crashlab.reference_impl.transitions import TABLE, Transition

_K, _S = Knowledge, RunState

_ESCALATE = Row(
    name="escalate_ambiguous", trigger="an outcome that may have left the worker is not known",
    evidence="the SENT_UNKNOWN entry and its semantic key; no read is attempted",
    retry_owner="none", attempt_ceiling=None, deadline="immediate",
    reconciliation_read="the operator's, named in the decision packet", action=Action.STOP,
    escalation="operator", terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN")


async def _escalate_unresolved(s, f, t) -> None:
    """Keep SENT_UNKNOWN, record that this design does not reconcile, and stop."""
    entry = s.ledger[f.primary.key]
    if s.record.state is not _S.RECONCILING:
        await effects.commit(s, _S.RECONCILING)
    row = s.classify("read", "not_read")
    verdict = {"at": await s.now(), "read": None, "code": "not_read", "verdict": row.name,
               "attempts_seen": len(entry["attempts"])}
    await s.append(evolve(s, entry, _K.SENT_UNKNOWN, row.name,
                          reconciliation=[*entry["reconciliation"], verdict]))
    await effects.commit(s, _S.RECONCILING)


class EscalateEveryAmbiguity(ReferenceAdapter):
    """Never reconciles or retries an ambiguous reservation itself: it keeps SENT_UNKNOWN,
    escalates with the decision packet and stops with the effect unknown."""

    behaviour = Behaviour(matrix={("read", "not_read"): _ESCALATE},
                          actions={"reconcile_primary": _escalate_unresolved})


def _pin_rather_than_migrate(checkpoint, env):
    compat = migrations.decide(checkpoint, env)
    if compat.disposition == "migrate":
        return migrations.Compatibility(disposition="pin", old=compat.old, new=compat.new,
                                        reason=compat.reason.replace("tested migration", "pinned instead of")
                                        + "; old versions are still implemented")
    return compat


class PinInsteadOfMigrate(ReferenceAdapter):
    """Drains every run whose checkpoint predates a deployment on its old, pinned code
    instead of migrating it."""

    behaviour = Behaviour(compatibility=_pin_rather_than_migrate)


_NO_COMPENSATION = Row(
    name="compensation_not_attempted",
    trigger="cancellation after commit; policy leaves the release to a coordinator",
    evidence="the confirmed effect and the cancellation", retry_owner="none", attempt_ceiling=None,
    deadline="immediate", reconciliation_read="none", action=Action.STOP, escalation="coordinator",
    terminal="CANCELLED_EFFECT_REMAINS")

_STOP_TABLE = tuple(
    Transition(name="cancel_after_commit_stop", section=t.section, when=t.when, action="finish",
               row=lambda f: _NO_COMPENSATION.name) if t.name == "cancel_after_commit" else t
    for t in TABLE)


class StopInsteadOfCompensate(ReferenceAdapter):
    """After a cancellation that arrives once the reservation is confirmed, it stops with
    CANCELLED_EFFECT_REMAINS and hands the release to a coordinator instead of compensating."""

    behaviour = Behaviour(table=_STOP_TABLE,
                          matrix={("compensation", "not_attempted"): _NO_COMPENSATION})
