"""Spot the bug: gallery adapters shown as anonymous exhibits.

The mapping from exhibit label to gallery entry is the answer key: it stays here and never
enters a kit. A kit gets each exhibit's sanitized trace (adapter name "exhibit-A", no
teaching card) and its listing.
"""
from __future__ import annotations

from ..checks.invariants import INVARIANTS
from . import evidence as E
from .questions import Expected, Question

#: label -> (gallery entry id, scenario whose trace shows the mistake)
EXHIBITS = {"A": ("blind-retry", "t2-commit-before-record"),
            "B": ("confirmed-from-send-record", "t7-late-callback"),
            "C": ("cancellation-theater", "t8-compensation-failure"),
            "D": ("invented-approval", "t4-approval-wait-crash")}
RULES = tuple(inv.id for inv in INVARIANTS)


def adapter_of(label: str) -> str:
    from crashlab.gallery import BY_ID

    return BY_ID[EXHIBITS[label][0]].adapter


def questions() -> tuple[Question, ...]:
    out = []
    for label in EXHIBITS:
        out.append(Question(id=f"{label}_rule", type="choice", vocab=RULES,
                            prompt=f"Exhibit {label}: which invariant does it break?",
                            hint=f"Exhibit {label}: start from its finish and its ledger lines: what does it claim, "
                                 "and which result or REMOTE line did it observe? Then read the rule list in vocab.md."))
        out.append(Question(id=f"{label}_evidence", type="event",
                            prompt=f"Exhibit {label}: cite an event that shows the violation.",
                            hint=f"Exhibit {label}: cite the line where the rule you named is broken (the claim or "
                                 "the act), not the fault that preceded it."))
    return tuple(out)


def trace(label: str) -> list[dict]:
    return E.trace(EXHIBITS[label][1], adapter_of(label))


def kit_trace(label: str) -> list[dict]:
    return E.sanitize(trace(label), f"exhibit-{label}")


def expected() -> dict[str, Expected]:
    keys = {}
    for label, (_, scenario) in EXHIBITS.items():
        verdict = E.verdict(scenario, adapter_of(label))
        found = [v for v in verdict.violations if not v.invariant.startswith("EXP-")]
        rules = sorted({v.invariant for v in found})
        seqs = sorted({s for v in found for s in v.events})
        keys[f"{label}_rule"] = Expected(mode="one_of", accepted=frozenset(rules), shown=rules[0])
        keys[f"{label}_evidence"] = Expected(mode="one_of", accepted=frozenset(seqs), shown=seqs[0])
    return keys


def rules_markdown() -> str:
    return "\n".join(f"- `{inv.id}`: {inv.statement}" for inv in INVARIANTS) + "\n"
