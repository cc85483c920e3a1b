# layer checks: judging a trace: invariants, expectations, the rubric, the integration card, coverage.
# may import: vocab, world, scenario, rules (only floors below it).
"""Checks: the three timelines, the invariants, the verdict and the twenty-point rubric.

``check_trace(events)`` judges one trace; ``timelines(events)`` extracts the three lanes;
``INVARIANTS`` lists every invariant (docs/invariants.md); ``rubric.score(results)`` turns
scenario verdicts into the twenty-point scorecard (docs/rubric.md). The rules live in one
module per rubric category (invariants.py lists them); knowledge.py is the view of what a
worker knew that they judge it by, and states the contract for adding one.
"""
from __future__ import annotations

from .invariants import EXPECTATIONS, INVARIANTS, Invariant
from .timelines import Timelines, timelines
from .verdict import check_trace

__all__ = ["EXPECTATIONS", "INVARIANTS", "Invariant", "Timelines", "check_trace", "timelines"]
