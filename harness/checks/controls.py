"""The controls a decision packet may recommend: AR-08's allowlisted controls, by what they do.

AR-08 "Operate the recovery system": "Allowlisted controls reduce accidental authority. An
operator may acquire takeover, run a specific reconciliation read, approve a specific
corrective proposal, mark an external reference after independent verification, cancel new
work, or close with an unresolved disposition." "Alerts that lead to action" adds "An
incompatible checkpoint points to the migration or pin runbook", and "Runbook: ambiguous
reservation" the redispatch the retry owner may make: "It distinguishes redispatch under proven
absence from a blind repeat."

A packet's action (``recommended``, each of ``alternatives``) is judged by the control it is,
not by its name: a common name maps onto its control (:data:`NAMES`), and any other name
declares it (``{"action": "CHECK_RECEIPT", "control": "mark_external_reference"}``). Each control
states the recorded state it needs (:data:`PRECONDITIONS`). Two controls are never legal in a
packet: a generic state edit and a new key for the same intent (the chapter reserves the first
for a break-glass process and has the runbook prevent the second).

This module is a table and the lookups over it; the checks that apply it are PKT-01 (what a
recommendation names, and the states of the controls that name a query or a proposal) and
PKT-02 (everything else about an action's legality).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .common import UNRESOLVED

_OPERATE = "Operate the recovery system"
_ALLOWLIST = ("An operator may acquire takeover, run a specific reconciliation read, approve a specific "
              "corrective proposal, mark an external reference after independent verification, cancel new "
              "work, or close with an unresolved disposition.")
_RUNBOOK = "Runbook: ambiguous reservation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    id: str                          # what recommended.control declares
    does: str                        # the chapter's words for it
    section: str                     # the chapter section the sentence is in
    quote: str                       # the sentence
    names: tuple[str, ...] = ()      # common action names that mean this control
    requires: str | None = None      # a key of PRECONDITIONS, or None (legal from any state)
    names_too: str = ""              # what a recommendation of it names (PKT-01), in words
    judged_by: str = "PKT-02"        # the check that judges its precondition
    refusal: str = ""                # why it is never legal in a packet (empty: allowlisted)

    @property
    def refused(self) -> bool:
        return bool(self.refusal)


@dataclass(frozen=True, slots=True, kw_only=True)
class Precondition:
    id: str
    words: str                       # the state it needs, in words
    unmet: str                       # what the state holds instead, in words


#: The recorded state a control needs (the ledger as the escalating worker knew it).
PRECONDITIONS: Mapping[str, Precondition] = {p.id: p for p in (
    Precondition(id="unresolved_effect", words="the ledger holds an unresolved effect (SENT_UNKNOWN or "
                                               "COMPENSATION_PROPOSED)",
                 unmet="the ledger holds nothing unresolved"),
    Precondition(id="sent_effect", words="the ledger holds an effect that was sent (any knowledge but PROPOSED): "
                                         "something outside the run to verify",
                 unmet="the ledger holds no effect that was sent"),
    Precondition(id="releasable_effect", words="the ledger holds a confirmed effect on a service that can "
                                               "release it",
                 unmet="the ledger holds no confirmed effect a release can correct"),
    Precondition(id="nothing_unresolved", words="the ledger holds no unresolved effect (absence proven, or "
                                                "never sent)",
                 unmet="an effect is unresolved"),
)}

#: The controls, in the chapter's order; the last two are refused.
CONTROLS: tuple[Control, ...] = (
    Control(id="acquire_takeover", does="acquire takeover", section=_OPERATE, quote=_ALLOWLIST,
            names=("TAKEOVER", "ACQUIRE_TAKEOVER")),
    Control(id="reconciliation_read", does="run a specific reconciliation read", section=_OPERATE,
            quote=_ALLOWLIST, names=("RECONCILE", "RECONCILIATION_READ"), requires="unresolved_effect",
            names_too="query: an identifying read the service offers (RECONCILE should name the "
                      "authoritative query and expected result classes)", judged_by="PKT-01"),
    Control(id="approve_corrective_proposal", does="approve a specific corrective proposal", section=_OPERATE,
            quote=_ALLOWLIST, names=("COMPENSATE", "APPROVE_CORRECTIVE_PROPOSAL"), requires="releasable_effect",
            names_too="the corrective proposal and the authority it needs", judged_by="PKT-01"),
    Control(id="mark_external_reference", does="mark an external reference after independent verification",
            section=_OPERATE, quote=_ALLOWLIST,
            names=("MARK_EXTERNAL_REFERENCE", "VERIFY", "VERIFY_DELIVERY", "VERIFY_EXTERNAL_REFERENCE"),
            requires="sent_effect"),
    Control(id="cancel_new_work", does="cancel new work", section=_OPERATE, quote=_ALLOWLIST,
            names=("STOP", "CANCEL", "CANCEL_NEW_WORK"),
            names_too="effect: whether an effect remains or is unknown, as the ledger holds it (none only "
                      "while nothing may have been sent, remains only for a confirmed effect)"),
    Control(id="close_unresolved", does="close with an unresolved disposition", section=_OPERATE,
            quote=_ALLOWLIST, names=("STOP", "CLOSE", "CLOSE_UNRESOLVED"),
            names_too="effect: whether an effect remains or is unknown, as the ledger holds it (none only "
                      "while nothing may have been sent, remains only for a confirmed effect)"),
    Control(id="migration_or_pin_runbook", does="point to the migration or pin runbook",
            section="Alerts that lead to action",
            quote="An incompatible checkpoint points to the migration or pin runbook.",
            names=("MIGRATE", "PIN", "MIGRATE_OR_PIN")),
    Control(id="redispatch", does="redispatch under the same key once absence is proven", section=_RUNBOOK,
            quote="The runbook never asks the operator to \u201cjust retry.\u201d It distinguishes redispatch "
                  "under proven absence from a blind repeat.",
            names=("RETRY", "RESEND", "REDISPATCH"), requires="nothing_unresolved"),
    Control(id="edit_state", does="edit state", section=_OPERATE,
            quote="A generic \u201cedit state\u201d control bypasses the contract and should be reserved for a "
                  "separate audited break-glass process owned by the platform and security teams.",
            names=("EDIT_STATE", "SET_STATE", "FORCE_STATE", "OVERRIDE_STATE", "EDIT_LEDGER", "SET_KNOWLEDGE"),
            refusal="a generic state edit bypasses the contract; the chapter reserves it for a separate audited "
                    "break-glass process owned by the platform and security teams"),
    Control(id="new_key", does="mint a new key for the same intent", section=_RUNBOOK,
            quote="It also prevents a human from minting a new key merely to make the interface proceed.",
            names=("NEW_KEY", "MINT_KEY", "REKEY", "RETRY_WITH_NEW_KEY"),
            refusal="a new key for an unchanged intent can duplicate its effect; the runbook prevents a human "
                    "from minting one merely to make the interface proceed"),
)
BY_ID: Mapping[str, Control] = {c.id: c for c in CONTROLS}
#: Common action names (normalized: upper case, '_' for '-' and spaces) -> the controls they mean.
NAMES: Mapping[str, tuple[str, ...]] = {
    name: tuple(c.id for c in CONTROLS if name in c.names) for c in CONTROLS for name in c.names}
ALLOWED = tuple(c.id for c in CONTROLS if not c.refused)


def normal(action: str) -> str:
    return "_".join(action.replace("-", " ").split()).upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    action: str
    controls: tuple[str, ...]        # the controls it is (empty: unknown, or a bad declaration)
    declared: bool                   # named by recommended.control rather than by a common name
    problem: str | None = None       # why it maps to no control ("which ...", after the action)


def resolve(item: Any) -> Resolved | None:
    """The controls a packet action (``{"action": ..., "control": ...}``) is, or None when it names
    no action (PKT-01 says so)."""
    if not isinstance(item, dict) or not isinstance(item.get("action"), str):
        return None
    action, declared = item["action"], item.get("control")
    named = NAMES.get(normal(action), ())
    if declared is None:
        return Resolved(action=action, controls=named, declared=False,
                        problem=None if named else "which is no allowlisted control: use a common name "
                        f"({', '.join(_common())}) or declare what it does with \"control\" "
                        f"({', '.join(ALLOWED)}; docs/adapters.md, \u201cThe operator's controls\u201d)")
    if not isinstance(declared, str) or declared not in BY_ID:
        shown = f"\u201c{declared}\u201d" if isinstance(declared, str) else json.dumps(declared)
        return Resolved(action=action, controls=(), declared=True,
                        problem=f"which declares control {shown}, not one of {', '.join(ALLOWED)}")
    if named and declared not in named:
        return Resolved(action=action, controls=(), declared=True,
                        problem=f"which declares control {declared}, but {action} is {' or '.join(named)}: "
                        "give the action its own name")
    return Resolved(action=action, controls=(declared,), declared=True)


def _common() -> list[str]:
    return list(dict.fromkeys(c.names[0] for c in CONTROLS if not c.refused))


def unmet(control: Control, held: Mapping[str, Any], *, can_release: bool = True) -> Precondition | None:
    """The precondition of ``control`` the ledger ``held`` (key -> knowledge) does not meet, or None."""
    if control.requires is None:
        return None
    pre = PRECONDITIONS[control.requires]
    unresolved = any(v in UNRESOLVED for v in held.values())
    met = {"unresolved_effect": unresolved,
           "releasable_effect": can_release and any(v in ("CONFIRMED", "COMPENSATION_PROPOSED")
                                                    for v in held.values()),
           "sent_effect": any(v not in (None, "PROPOSED") for v in held.values()),
           "nothing_unresolved": not unresolved}[pre.id]
    return None if met else pre
