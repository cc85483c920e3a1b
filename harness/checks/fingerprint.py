"""The fingerprint of a rule set: a digest of everything that can move a verdict and that the
rule set declares. It reads the checks, the rubric and the library, so it lives above all three
(crashlab.rules.ruleset, below them, records the value; tests compare the two).
"""
from __future__ import annotations

import hashlib
import json

from ..scenario import loader as scenario_loader
from .invariants import BY_ID
from .rubric import AUTO_FAIL_REASONS, CAPS, POINT_OF, RUBRIC
from .rules import KIND_POINT


def fingerprint() -> str:
    """A digest of what the rule set declares: every check (id, statement, category, safety,
    automatic failure, the point it costs), the rubric (points, caps, the points expectation
    misses cost by kind) and every library scenario as parsed. The current set records it
    (``rules.json``); a test fails when they part, so that nothing that can move a verdict
    changes without a new rule-set entry. (A change inside a check's code is not in it: the
    golden traces, the gallery and the detection matrix are what catch those.)"""
    data = {"checks": [[c.id, c.statement, c.category, c.safety, c.auto_fail, POINT_OF[c.id].id]
                       for c in BY_ID.values()],
            "rubric": [p.to_json() for p in RUBRIC], "caps": [c.to_json() for c in CAPS],
            "kind_point": KIND_POINT, "auto_fail": list(AUTO_FAIL_REASONS),
            "scenarios": {s.id: s.raw for s in scenario_loader.library()}}
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]
