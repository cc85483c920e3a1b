"""Deployment compatibility (AR-08 "Deployment compatibility", "Runbook: incompatible deployment").

Four dispositions and no fifth: replay compatible, migrate, pin, stop. The decision is
taken from the checkpoint's contract versions and the worker's ``env`` before the worker
acquires effect authority (bootstrap step 2).

* **replay**: the checkpoint was written under this worker's schema, canonicalization,
  policy and capability versions.
* **migrate**: every differing version has a tested migration below. A migration is a
  deterministic transformation of the checkpoint that explains every changed field,
  keeps the old record (the store keeps every version; ``previous_version`` names it),
  issues no effect, keeps unresolved effects and their semantic keys, and copies the
  approval binding unchanged: it never refreshes authority.
* **pin**: no tested migration, but the checkpoint's versions are implemented here: the
  platform drains the run with those versions (``finish("PINNED")``).
* **stop**: the checkpoint (or this worker) needs versions this code does not implement:
  human resolution (WAITING_OPERATOR with the decision packet).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from crashlab.vocab.model import RunState

from .record import events_from_v1

#: The contract versions whose change can make old state mean something else. A policy or
#: capability version change alters authority checks or capability semantics: the frozen
#: proposal was judged under the old ones, so there is no migration, only pin or stop.
AXES = ("schema_version", "canonicalization_version", "policy_version", "capability_version")
#: Versions this code reads, writes and executes.
IMPLEMENTED: Mapping[str, tuple[int, ...]] = {"schema_version": (1, 2),
                                              "canonicalization_version": (1, 2),
                                              "policy_version": (1, 2),
                                              "capability_version": (1, 2)}


def _schema_1_to_2(cp: dict) -> list[str]:
    folded = events_from_v1(cp["evidence"]["events"])
    cp["evidence"]["events"] = folded
    cp["contract"]["schema_version"] = 2
    return ["contract.schema_version: 1 -> 2",
            f"evidence.events: delivery log -> map by event id ({len(folded)} events, "
            "duplicate deliveries folded into their first delivery)"]


def _canonicalization_1_to_2(cp: dict) -> list[str]:
    cp["contract"]["canonicalization_version"] = 2
    changes = ["contract.canonicalization_version: 1 -> 2 for proposals frozen from now on"]
    if cp["evidence"]["proposal"] is not None:
        changes.append("evidence.proposal: kept under canonicalization 1 (the approval binds "
                       "this hash; recomputing it would make a new proposal)")
    if cp["effects"]:
        changes.append(f"effects: {len(cp['effects'])} prepared semantic keys kept under "
                       "canonicalization 1 (a recomputed key would be a new key for the same intent)")
    return changes


#: (axis, from, to) -> the transformation. Each one is covered by tests on frozen
#: checkpoints in every state (tests/test_reference_migrations.py).
MIGRATIONS: Mapping[tuple[str, int, int], Callable[[dict], list[str]]] = {
    ("schema_version", 1, 2): _schema_1_to_2,
    ("canonicalization_version", 1, 2): _canonicalization_1_to_2,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Compatibility:
    disposition: str                 # replay | migrate | pin | stop
    old: Mapping[str, Any]
    new: Mapping[str, Any]
    reason: str


def _implemented(versions: Mapping[str, Any]) -> bool:
    return all(versions[axis] in IMPLEMENTED[axis] for axis in versions)


def decide(checkpoint: Mapping[str, Any] | None, env: Mapping[str, Any]) -> Compatibility:
    # the core versions always; a policy or capability version where the platform names one
    new = {axis: env.get(axis) for axis in AXES if axis in AXES[:2] or axis in env}
    # a contract that omits an optional version (policy, capability) is read as this code's
    old = new if checkpoint is None else {axis: checkpoint["contract"].get(axis, new[axis]) for axis in new}
    differing = [axis for axis in new if old[axis] != new[axis]]
    if not _implemented(new) and (checkpoint is None or not _implemented(old)):
        return Compatibility(disposition="stop", old=old, new=new,
                             reason=f"this code implements {dict(IMPLEMENTED)}, not {new}")
    if not differing:
        return Compatibility(disposition="replay", old=old, new=new, reason="same versions")
    if _implemented(new) and all((a, old[a], new[a]) in MIGRATIONS for a in differing):
        return Compatibility(disposition="migrate", old=old, new=new,
                             reason="tested migration " + ", ".join(
                                 f"{a} {old[a]}->{new[a]}" for a in differing))
    if _implemented(old):
        return Compatibility(disposition="pin", old=old, new=new,
                             reason="no tested migration " + ", ".join(
                                 f"{a} {old[a]}->{new[a]}" for a in differing)
                             + "; old versions are still implemented")
    return Compatibility(disposition="stop", old=old, new=new,
                         reason=f"checkpoint versions {old} are not implemented by this code")


def migrate(checkpoint: Mapping[str, Any], *, previous_version: int, compat: Compatibility,
            owner: str, epoch: int) -> dict:
    """The migrated checkpoint, in state MIGRATING, with its transformation record.
    Pure: no port is called, so no effect and no authority check can happen here."""
    cp = copy.deepcopy(dict(checkpoint))
    changes: list[str] = []
    for axis in compat.new:
        if compat.old[axis] != compat.new[axis]:
            changes += MIGRATIONS[(axis, compat.old[axis], compat.new[axis])](cp)
    previous_state = cp["control"]["state"]
    cp["control"].update(state=RunState.MIGRATING.value, state_version=previous_version + 1,
                         owner=owner, lease_epoch=epoch)
    cp["migration"] = {"from": dict(compat.old), "to": dict(compat.new),
                       "previous_version": previous_version, "previous_state": previous_state,
                       "changes": changes,
                       "kept": ["approval binding (not refreshed)", "unresolved effects",
                                "semantic keys", "cancellation", "deadline and budgets"]}
    return cp
