"""What the rules of every rubric category share: the Invariant record and its registration,
the transition tables as graphs, the disposition claims, and the helpers more than one
category uses.

A check reads the trace index (index.py) and yields findings ``(run, message, events,
auto_fail)``; ``events`` are the trace sequence numbers it cites as evidence. Ground truth is
the remote lane, what the adapter asserted is the knowledge lane (ledger) and the run lane
(checkpoints, finishes), and what it observed is every port result delivered to one of its
workers (knowledge.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import networkx as nx

from ..vocab.model import (DISPOSITION_EFFECT_CLAIM, KNOWLEDGE_TRANSITIONS, RUN_TRANSITIONS, TERMINAL_STATES,
                           UNRESOLVED_KNOWLEDGE, RunState)
from .index import COMPENSATION_OPS, Dispatch, RunIndex, TraceIndex
from .knowledge import knew
from .values import identity

Finding = tuple  # (run id | None, message, events tuple, auto_fail bool)
CATEGORIES = ("classification", "ownership", "effect_correctness", "disposition")


# --------------------------------------------------------------------------- the tables as graphs
NO_ENTRY = "(none)"


def _graph(table, none_label: str | None = None, self_loops: Iterable = ()) -> nx.DiGraph:
    g = nx.DiGraph()
    for src, dsts in table.items():
        u = none_label if src is None else getattr(src, "value", src)
        g.add_node(u)
        for dst in dsts:
            g.add_edge(u, getattr(dst, "value", dst))
    for s in self_loops:
        g.add_edge(s, s)
    return g


#: RUN_TRANSITIONS as a graph; every non-terminal state may be rewritten to itself.
RUN_GRAPH = _graph(RUN_TRANSITIONS, self_loops=[s.value for s in RunState if s not in TERMINAL_STATES])
#: KNOWLEDGE_TRANSITIONS as a graph; ``(none)`` is "no entry yet".
KNOWLEDGE_GRAPH = _graph(KNOWLEDGE_TRANSITIONS, none_label=NO_ENTRY)
TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
UNRESOLVED = frozenset(k.value for k in UNRESOLVED_KNOWLEDGE)
CLAIM = {s.value: c for s, c in DISPOSITION_EFFECT_CLAIM.items()}


# --------------------------------------------------------------------------- the record of one invariant
@dataclass(frozen=True, slots=True, kw_only=True)
class Invariant:
    """One check: a stable id, a one-line statement, its rubric category, whether it is a
    safety property (a correct design never fails it), the automatic-failure reason it can
    raise, and the function that computes it."""

    id: str
    statement: str
    category: str
    safety: bool
    auto_fail: str | None
    check: Callable[[TraceIndex], Iterable[Finding]]
    computed: str = ""      # how it is computed, for docs/invariants.md
    evidence: str = ""      # what a violation cites

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.id}: unknown category {self.category!r}")


def inv(id, statement, category, safety, auto_fail, check, computed, evidence) -> Invariant:
    return Invariant(id=id, statement=statement, category=category, safety=safety, auto_fail=auto_fail,
                     check=check, computed=computed, evidence=evidence)


# --------------------------------------------------------------------------- helpers of several categories
def finish_call(f: dict) -> int:
    """The seq of the finish call: evidence must precede it."""
    return f.get("call") if isinstance(f.get("call"), int) else f["seq"]


def is_compensation(port, op) -> bool:
    return op in COMPENSATION_OPS.get(port, ())


def live(run: RunIndex, epoch, seq: int, t: int) -> bool:
    return run.live(epoch, seq, t)


def unfenced(ix: TraceIndex) -> dict[int, str]:
    """Commits by a stale worker that had observed nothing (seq -> worker): a zombie that
    stalled between its last ownership check and the send, or sent without knowing it had
    been replaced. Only a service with fencing tokens can stop those, so they do not make
    the new owner's honest claims false (a note records them); OWN-01 blames the zombie
    when it had evidence."""
    found = ix.memo.get("unfenced")
    if found is not None:
        return found
    found = {}
    for ev in ix.effects:
        call = ix.calls.get(ev.get("call"))
        run = ix.runs.get(call.get("run")) if call is not None else None
        sent = knew(run, call["worker"], call["seq"]) if run is not None else None
        if sent is None or sent.w is None:
            continue
        epoch = sent.epoch
        if epoch is None or sent.stale_evidence() is not None:
            continue
        stale_call = not live(run, epoch, call["seq"], call["t"])
        stalled = call["seq"] in run.paused_calls and not live(run, epoch, ev["seq"], ev["t"])
        if (stale_call and sent.confirmed_just_before()) or (stalled and not stale_call):
            found[ev["seq"]] = sent.worker
            ix.memo.setdefault("notes", []).append(
                f"{ev.get('ref')} (#{ev['seq']}) was committed by {sent.worker}, a stale worker that had observed "
                "nothing: only a service with fencing can stop that; it is not held against later claims")
    ix.memo["unfenced"] = found
    return found


def streams(run: RunIndex) -> list[list[Dispatch]]:
    """Dispatches that repeat one effect: the same target (compensation) or the same key or
    business intent (everything else), in seq order."""
    groups: list[list[Dispatch]] = []
    index: dict = {}
    for d in run.dispatches:
        if d.role == "compensation":
            ids = [("target", d.service, d.target)]
        else:
            ids = [("intent", d.service, d.op, identity(d.intent))]
            if d.key is not None:
                ids.append(("key", d.service, d.op, d.key))
        found = next((index[i] for i in ids if i in index), None)
        if found is None:
            found = len(groups)
            groups.append([])
        groups[found].append(d)
        for i in ids:
            index.setdefault(i, found)
    return groups
