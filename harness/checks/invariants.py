"""The invariants: generic oracles over the three timelines, every rule of every rubric
category in the order reports and docs list them, and the scenario expectations.

Each invariant is computed from the trace alone, with no per-scenario expectation. The rules
live in one module per rubric category: classification.py, ownership.py, effects.py (effect
correctness) and disposition.py, with refusals.py (a definite refusal and a lucky absence),
budgets.py (lease and deadline) and statements.py (what packets and messages say) beside them; the EXP-* checks in expectations.py. What they share is in
common.py, and what a worker knew when it acted, which they judge it by, in knowledge.py,
whose docstring states the contract for adding one.

docs/invariants.md is generated from these modules (``python tools/docgen.py``).
"""
from __future__ import annotations

from . import budgets, classification, disposition, effects, ownership, refusals, statements
from .common import CATEGORIES, KNOWLEDGE_GRAPH, RUN_GRAPH, Finding, Invariant
from .expectations import EXPECTATIONS

INVARIANTS: tuple[Invariant, ...] = (classification.INVARIANTS + refusals.CLASSIFICATION
                                     + ownership.INVARIANTS + budgets.OWNERSHIP + statements.INVARIANTS
                                     + effects.INVARIANTS + refusals.EFFECTS
                                     + disposition.INVARIANTS + budgets.DISPOSITION)

BY_ID: dict[str, Invariant] = {inv.id: inv for inv in INVARIANTS + EXPECTATIONS}

__all__ = ["BY_ID", "CATEGORIES", "EXPECTATIONS", "INVARIANTS", "KNOWLEDGE_GRAPH", "RUN_GRAPH", "Finding",
           "Invariant"]
