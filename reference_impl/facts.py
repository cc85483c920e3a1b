"""The facts the reference adapter's decision table reads (``EffectFact``, ``Facts``) and its rows
(``Transition``): one floor below behaviour, session, transitions and effects, which all read them
(so none of those four imports another to name them)."""
from __future__ import annotations

from dataclasses import dataclass
from crashlab.vocab.model import Knowledge
from . import matrix
from typing import Callable
from crashlab.vocab.model import RunState


_K = Knowledge


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectFact:
    """What the ledger proves about one semantic key, for the decision table."""

    key: str
    knowledge: Knowledge
    attempts: int
    claimed_retries: tuple[str, ...]
    verdict: str | None      # matrix row of the decisive reconciliation after the last attempt
    note: str                # matrix row (or step) that produced the latest knowledge
    retry_at: int | None = None   # earliest next send after a retryable failure (backoff, retry-after)

    @property
    def ceiling(self) -> int:
        return matrix.ATTEMPT_CEILING + len(self.claimed_retries)

    @property
    def sendable(self) -> bool:
        """Nothing of it landed (every attempt failed before send, or authoritative absence
        was recorded) and it may be sent under the same key."""
        return self.knowledge is _K.PROPOSED

    @property
    def unresolved(self) -> bool:
        return self.knowledge is _K.SENT_UNKNOWN and self.verdict is None

    @property
    def stuck(self) -> bool:
        """Reconciliation ended without an answer (or with a contradiction)."""
        return self.knowledge is _K.SENT_UNKNOWN and self.verdict is not None

    @property
    def nothing_landed(self) -> bool:
        return self.knowledge in (_K.PROPOSED, _K.REJECTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    state: RunState | None                # None: no checkpoint yet
    intake_problems: tuple[str, ...]      # validation problems of the intake (empty: valid)
    cancelled: bool
    proposal_frozen: bool
    authority_row: str | None             # None: approval live; else the matrix row of the answer
    approval_requests: int
    approval_pending: bool                # the last approval request has no answer yet
    primary: EffectFact | None
    notification: EffectFact | None
    compensation: EffectFact | None
    notify: bool
    pending_retry: str | None             # a deliberate retry intent no attempt has claimed
    deadline_passed: bool
    retry_past_deadline: bool = False     # the run's next attempt could only leave after the deadline

    @property
    def awaiting_authority(self) -> bool:
        """A frozen proposal with nothing in flight: it needs live approval to go on."""
        return self.proposal_frozen and (self.primary is None or self.primary.sendable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    name: str
    section: str                          # the chapter section it implements
    when: Callable[[Facts], bool]
    action: str                           # an action of adapter.ACTIONS
    row: Callable[[Facts], str] | None = None   # finishing transitions: the decisive matrix row
