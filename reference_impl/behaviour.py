"""The decisions a variant of the reference adapter may replace, in one frozen value.

``Behaviour()`` (every field at its default) is the reference adapter itself. Each field
names one decision the chapter constrains; ``None`` or an empty mapping means "the
reference's own". A variant is ``ReferenceAdapter`` with one field replaced, so the
difference between a correct design and a broken one is exactly one named decision
(the gallery of known-bad adapters in ``gallery/`` is built this way).

This module imports nothing at run time so that every other module may read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

if TYPE_CHECKING:  # annotations only
    from crashlab.vocab.model import RunState

    from .inbox import Absorbed
    from .matrix import Row
    from .migrations import Compatibility
    from .record import RunRecord
    from .session import Session
    from .facts import Facts, Transition

Action = Callable[["Session", "Facts", "Transition"], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Behaviour:
    #: Observations classified into another recovery-matrix row: (phase, code) -> row.
    matrix: Mapping[tuple[str, str], "Row"] = field(default_factory=dict)
    #: The decision table (transitions.TABLE when None).
    table: tuple["Transition", ...] | None = None
    #: Actions replaced by name (adapter.ACTIONS otherwise).
    actions: Mapping[str, Action] = field(default_factory=dict)
    #: The terminal disposition the evidence supports (adapter.truthful_disposition).
    disposition: Callable[["Session"], "RunState"] | None = None
    #: Deployment compatibility: replay, migrate, pin or stop (migrations.decide).
    compatibility: Callable[[Mapping[str, Any] | None, Mapping[str, Any]], "Compatibility"] | None = None
    #: The migration transformation (migrations.migrate).
    migrate: Callable[..., dict] | None = None
    #: How a negative read is judged (effects.judge_negative).
    judge_negative: Callable[..., tuple[str, int]] | None = None
    #: The semantic key of an intent (canonical.semantic_key).
    semantic_key: Callable[[str, Mapping[str, Any], int], str] | None = None
    #: Inbox deduplication and dispositions (inbox.absorb).
    absorb: Callable[["RunRecord", list], "Absorbed"] | None = None
    #: The effect entries a recovering worker works from, given what the ledger holds
    #: (bootstrap step 9: the ledger's latest entry per key).
    recover_effects: Callable[["Session", list[dict]], dict[str, dict]] | None = None
    #: The worker's session class: its lease, writes, effect calls and authority checks.
    session: type | None = None


REFERENCE = Behaviour()
