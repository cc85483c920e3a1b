"""What a worksheet asks (:class:`Question`) and what an answer is judged against (:class:`Expected`).

The ladder, the answer keys (keys.py), the exhibits, the weak-service table and the rubric
rung all build these values; they live on their own floor so none of those imports another.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TYPES = ("event", "events", "choice", "set", "count", "table")


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    id: str
    type: str
    prompt: str
    vocab: tuple = ()
    max: int | None = None
    hint: str | None = None     # where to look when this answer is wrong (never the answer)

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"question {self.id}: unknown type {self.type!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """``one_of``: any of ``accepted``; ``exact``: exactly the set ``accepted``;
    ``subset``: a set containing ``must`` and within ``accepted``."""

    mode: str
    accepted: frozenset
    must: frozenset = frozenset()
    shown: Any = None           # the model answer as reveal prints it
    wrong: str = "is not right"  # what a wrong ``one_of`` answer is told (never the value, nor its side)

    def judge(self, answer: Any) -> str | None:
        """None when right, else which part is wrong (never the right value)."""
        if self.mode == "one_of":
            return None if answer in self.accepted else self.wrong
        got = set(answer or ())
        if self.mode == "exact":
            if got - self.accepted:
                return "contains a value that does not belong"
            return None if got == self.accepted else "misses something"
        if got - self.accepted:
            return "contains a value the trace does not support"
        return None if self.must <= got else "misses something"
