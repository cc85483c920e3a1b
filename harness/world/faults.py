"""Fault-rule matching: which of a scenario's fault, crash and pause rules a port call meets.

One implementation, used by the simulated transport (world.py) and by the HTTP sandbox
(crashlab.sandbox): a rule names its call by port, operation, ordinal, worker, run, a time
window, the key's ledger knowledge, the state a checkpoint declares, the knowledge an append
declares or the disposition a finish reports (crashlab.vocab.compiled.Match). A rule fires
on at most ``times`` matching calls (0: every one), and the first rule of an action that
matches wins, in scenario order.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..vocab.model import PortCall
from ..vocab.compiled import Match, Rule


def _dig(value: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


class Rules:
    """A scenario's rules with their hit counts.

    ``now()`` gives the time a window is judged at; ``knowledge(run, key)`` the latest ledger
    knowledge of a key in a run (``run`` is whatever the caller passes through: the world's
    run state, or the sandbox's run id)."""

    __slots__ = ("rules", "hits", "_now", "_knowledge", "_actions", "_index")

    def __init__(self, rules: Iterable[Rule], now: Callable[[], int],
                 knowledge: Callable[[Any, Any], str | None]) -> None:
        self.rules = tuple(rules)
        self.hits: dict[int, int] = {}
        self._now = now
        self._knowledge = knowledge
        self._actions = frozenset(rule.action for rule in self.rules)
        self._index: dict[tuple, tuple] = {}   # (action, port, op) -> the rules that may match

    def matches(self, m: Match, run: Any, run_id: str, worker: int, call: PortCall, nth: int) -> bool:
        """Whether a call meets every condition of a ``match`` (rules and anchored events)."""
        if m.port is not None and m.port != call.port:
            return False
        if m.op is not None and m.op != call.op:
            return False
        if m.nth is not None and m.nth != nth:
            return False
        if m.worker is not None and m.worker != worker:
            return False
        if m.run is not None and m.run != run_id:
            return False
        if m.from_ms is not None and self._now() < m.from_ms:
            return False
        if m.until_ms is not None and self._now() >= m.until_ms:
            return False
        if m.knowledge is not None and self._knowledge(run, call.args.get("key")) != m.knowledge:
            return False
        if m.state is not None and m.state != _dig(call.args, "checkpoint", "control", "state"):
            return False
        if m.appends is not None and m.appends != _dig(call.args, "entry", "knowledge"):
            return False
        if m.disposition is not None and m.disposition != call.args.get("disposition"):
            return False
        return True

    def match(self, action: str, run: Any, run_id: str, worker: int, call: PortCall,
              nth: int) -> Rule | None:
        """The first rule of ``action`` this call meets that has not used up its ``times``
        (counted as a hit), or None."""
        if action not in self._actions:
            return None
        key = (action, call.port, call.op)
        candidates = self._index.get(key)
        if candidates is None:  # the rules of this action that can match this port and op, in order
            candidates = self._index[key] = tuple(
                (index, rule) for index, rule in enumerate(self.rules)
                if rule.action == action and rule.match.port in (None, call.port)
                and rule.match.op in (None, call.op))
        for index, rule in candidates:
            if not self.matches(rule.match, run, run_id, worker, call, nth):
                continue
            hits = self.hits.get(index, 0)
            if rule.times and hits >= rule.times:
                continue
            self.hits[index] = hits + 1
            return rule
        return None
