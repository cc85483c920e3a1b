"""Step 10 of the recovery bootstrap: "Choose one declared transition" (AR-08 "Recovery
bootstrap procedure", "Construct AR-08 v0.1.0").

The decision is a pure function of durable evidence, gathered in :class:`Facts` (the
checkpoint record, the ledger, the inbox record, the last authority answer, the clock).
:data:`TABLE` lists the declared transitions in priority order; the first whose
condition holds is taken. Every worker, fresh or recovering, runs the same table after
every step, so a reviewer can predict the next transition from the evidence alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from crashlab.vocab.model import TERMINAL_STATES, Knowledge, RunState

from . import matrix
from .facts import EffectFact
from .facts import Facts, Transition  # noqa: F401 (moved there)

_K, _S = Knowledge, RunState


def _row(name: str) -> Callable[[Facts], str]:
    return lambda f: name


def _exhausted(e: EffectFact | None, f: Facts) -> bool:
    return e is not None and e.sendable and (e.attempts >= e.ceiling or f.deadline_passed)


def _sendable(e: EffectFact | None) -> bool:
    return e is not None and e.sendable


def _unresolved(e: EffectFact | None) -> bool:
    return e is not None and e.unresolved


TABLE: tuple[Transition, ...] = (
    Transition(name="terminal", section="Recovery bootstrap procedure (3): a terminal run does not restart",
               when=lambda f: f.state in TERMINAL_STATES, action="replay_terminal"),
    Transition(name="intake_invalid", section="Classify before retrying: a validation failure stops",
               when=lambda f: f.state is None and bool(f.intake_problems), action="finish",
               row=_row("validation_failure")),
    Transition(name="record_confirmed",
               section="Six crash points: after local record, before checkpoint advance",
               when=lambda f: (f.primary is not None and f.primary.knowledge is _K.CONFIRMED
                               and f.state in (_S.EFFECT_PREPARED, _S.EFFECT_IN_FLIGHT, _S.RECONCILING)),
               action="record_confirmed"),
    # -- cancellation stops new work at every position (Cancellation races)
    Transition(name="cancel_before_effect", section="Cancellation races: before dispatch",
               when=lambda f: f.cancelled and (f.primary is None or f.primary.nothing_landed),
               action="finish", row=_row("cancellation")),
    Transition(name="cancel_in_flight", section="Cancellation races: in flight, reconcile first",
               when=lambda f: f.cancelled and _unresolved(f.primary), action="reconcile_primary"),
    Transition(name="cancel_effect_unknown", section="Cancellation races: in flight, unresolved",
               when=lambda f: f.cancelled and f.primary.stuck, action="finish",
               row=lambda f: f.primary.verdict),
    Transition(name="cancel_after_commit", section="Compensation as forward recovery",
               when=lambda f: (f.cancelled and f.primary.knowledge is _K.CONFIRMED
                               and (f.compensation is None or f.compensation.knowledge is _K.PROPOSED)),
               action="compensate"),
    Transition(name="compensation_exhausted", section="Keep retry budgets end to end",
               when=lambda f: _exhausted(f.compensation, f), action="finish",
               row=lambda f: "deadline_passed" if f.deadline_passed else "retry_budget_exhausted"),
    Transition(name="compensation_dispatch", section="Compensation as forward recovery",
               when=lambda f: _sendable(f.compensation), action="dispatch_compensation"),
    Transition(name="compensation_reconcile",
               section="Handoff rehearsal (third run): reconcile the corrective effect separately",
               when=lambda f: _unresolved(f.compensation) or (
                   f.compensation is not None and f.compensation.knowledge is _K.CONFIRMED
                   and f.primary.knowledge is _K.COMPENSATION_PROPOSED
                   and f.compensation.verdict != "contradictory_evidence"),
               action="reconcile_compensation"),
    Transition(name="cancel_settled", section="Cancellation races: the terminal says whether effects remain",
               when=lambda f: f.cancelled, action="finish", row=_row("cancellation")),
    # -- intake, proposal and approval (Checkpoint boundaries: validated intake, frozen proposal, durable wait)
    Transition(name="validate", section="Choose checkpoint boundaries intentionally: after validation",
               when=lambda f: f.state is None, action="validate_intake"),
    Transition(name="propose", section="Choose checkpoint boundaries intentionally: after proposal freeze",
               when=lambda f: f.state is _S.VALIDATED, action="propose"),
    Transition(name="approval_live", section="Recovery bootstrap procedure (7): approval references",
               when=lambda f: (f.awaiting_authority and f.authority_row is None
                               and f.state in (_S.PROPOSED, _S.WAITING_HUMAN)), action="record_approval"),
    Transition(name="approval_wait", section="Eight traces (4): restore WAITING_HUMAN; do not invent approval",
               when=lambda f: (f.awaiting_authority and f.authority_row is not None and f.approval_pending
                               and not f.deadline_passed), action="await_approval"),
    Transition(name="approval_request", section="Crash laboratory: crash while waiting preserves the human checkpoint",
               when=lambda f: (f.awaiting_authority and f.authority_row == "approval_pending"
                               and f.approval_requests == 0 and not f.deadline_passed),
               action="request_approval"),
    Transition(name="approval_rerequest", section="Deployment with expired approval: re-request, never refresh",
               when=lambda f: (f.awaiting_authority and f.authority_row == "approval_expired"
                               and f.approval_requests < matrix.APPROVAL_REQUEST_CEILING
                               and not f.deadline_passed), action="request_approval"),
    Transition(name="authority_stop", section="A retry counter must never bridge an expired approval",
               when=lambda f: f.awaiting_authority and f.authority_row is not None, action="finish",
               row=lambda f: "deadline_passed" if f.deadline_passed else f.authority_row),
    # -- the run's effect (Six crash points in one reservation)
    Transition(name="prepare", section="Effect ledger: prepare with a stable key before dispatch",
               when=lambda f: f.state is _S.APPROVED, action="prepare_primary"),
    Transition(name="dispatch_deadline", section="Keep retry budgets end to end: absolute deadline",
               when=lambda f: f.primary.sendable and f.deadline_passed, action="finish",
               row=_row("deadline_passed")),
    Transition(name="await_retry_intent", section="Seed 002: one deliberate retry admits one attempt",
               when=lambda f: (f.primary.sendable and f.primary.attempts >= f.primary.ceiling
                               and f.pending_retry is None), action="wait_retry"),
    Transition(name="retry_past_deadline",
               section="Keep retry budgets end to end: a backoff or retry-after past the deadline",
               when=lambda f: f.primary.sendable and f.retry_past_deadline, action="finish",
               row=_row("deadline_passed")),
    Transition(name="dispatch", section="Six crash points: after prepare, before send",
               when=lambda f: f.primary.sendable, action="dispatch_primary"),
    Transition(name="reconcile", section="Six crash points: after send, before remote commit is known",
               when=lambda f: f.primary.unresolved, action="reconcile_primary"),
    Transition(name="effect_not_confirmed", section="Classify before retrying: the terminal column",
               when=lambda f: f.primary.knowledge is not _K.CONFIRMED, action="finish",
               row=lambda f: f.primary.verdict or f.primary.note),
    # -- after commit: the separate notification (Six crash points: after checkpoint, before notification)
    Transition(name="notify_prepare", section="Six crash points: notification is a separate effect",
               when=lambda f: f.notify and f.notification is None, action="prepare_notification"),
    Transition(name="notify_exhausted", section="Keep retry budgets end to end",
               when=lambda f: _exhausted(f.notification, f), action="finish",
               row=lambda f: "deadline_passed" if f.deadline_passed else "retry_budget_exhausted"),
    Transition(name="notify_dispatch", section="Six crash points: notification is a separate effect",
               when=lambda f: _sendable(f.notification), action="dispatch_notification"),
    Transition(name="notify_reconcile", section="Build a failure envelope: DELIVERY_UNKNOWN",
               when=lambda f: _unresolved(f.notification), action="reconcile_notification"),
    Transition(name="succeed", section="Six crash points: after local record, replay the result",
               when=lambda f: True, action="finish",
               row=lambda f: f.notification.verdict if f.notification and f.notification.stuck
               else "known_completion"),
)


def choose(facts: Facts, table: tuple[Transition, ...] | None = None) -> Transition:
    return next(t for t in (table or TABLE) if t.when(facts))
