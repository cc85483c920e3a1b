"""The recovery matrix, as data (AR-08 "Classify before retrying", "Recovery-matrix checklist").

One row per failure class with the chapter's columns: trigger, evidence needed, retry
owner, attempt ceiling, deadline, reconciliation read, corrective action, escalation and
terminal disposition. Every port error and every classified observation goes through
:func:`classify`, which looks the (phase, code) pair up in the rows' ``matches``; the
adapter then does what the row's ``action`` says. Nothing else decides how a failure is
handled, so reading this table predicts the adapter's reaction to any failure.

Phases: ``dispatch`` (an effect call), ``read`` (a reconciliation or verification read),
``authority`` (an authority.check answer), ``checkpoint`` (a compare-and-set write),
``lease`` (acquire/renew), ``platform`` (any other store call), ``intake``, ``inbox``,
``contract`` (deployment compatibility), ``budget``, ``compensation``.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping

from crashlab.vocab.model import Knowledge

# --------------------------------------------------------------------------- budgets
# "Use both an attempt ceiling and an absolute deadline" (Keep retry budgets end to end).
ATTEMPT_CEILING = 3             # sends of one semantic key; +1 per claimed deliberate retry
TRANSIENT_CEILING = 4           # consecutive tries of one platform call
RECONCILE_READ_CEILING = 40     # reconciliation reads per run
APPROVAL_REQUEST_CEILING = 2    # approval requests per proposal (the first and one re-request)
LEASE_WAIT_CEILING = 3          # waits for another owner's lease to expire
REREAD_CEILING = 3              # rereads of a checkpoint that moved under a lease holder
LEASE_TTL_MS = 60_000
BACKOFF_BASE_MS = 1_000         # backoff = base * 2^(n-1) + seeded jitter
BACKOFF_CAP_MS = 30_000
JITTER_MAX_MS = 500
RECONCILE_POLL_MS = 2_000       # wait between reads while a request is still in flight
JOB_WAIT_MS = 4_000             # registry.wait_job: a short wait; "running" is not failure
DEFAULT_DEADLINE_MS = 30 * 60_000   # a design's own deadline (the gallery's DeadlineDropped); the reference keeps the intake's, or none


class Action(str, Enum):
    RETRY_CALL = "retry the same call after backoff"
    RETRY_SAME_KEY = "ledger back to PROPOSED; backoff; redispatch under the same key"
    RECONCILE = "keep SENT_UNKNOWN; authoritative read by semantic identity"
    VERIFY = "compare every intent field; record CONFIRMED with the remote reference"
    WAIT = "bounded wait, then read again"
    WAIT_HUMAN = "durable WAITING_HUMAN until an approval event"
    REREQUEST_APPROVAL = "request a new approval for the same frozen proposal; never refresh"
    WAIT_RETRY_INTENT = "durable WAITING_RETRY until a deliberate retry intent"
    WAIT_LEASE = "sleep until the other owner's lease expires, then acquire again"
    STOP = "no further effect; finish with the disposition the evidence supports"
    FENCE_OUT = "another owner exists: write nothing, dispatch nothing, stop this worker"
    REREAD = "still the lease holder: reread durable state and reclassify (bootstrap again)"
    REACQUIRE = "the lease lapsed and nobody took over: acquire a new epoch and reread"
    MIGRATE_PIN_OR_STOP = "migrate with a tested migration, else pin, else stop"
    BLOCK_NEW_WORK = "no new effect; reconcile in-flight effects; consider compensation"
    RECORD_DUPLICATE = "record the duplicate disposition; no second transition"
    EVIDENCE_ONLY = "record as evidence; reconcile instead of applying it"
    DECLARE_RETRY_OWNER = "send retry_owner=caller so no other layer retries"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    name: str
    trigger: str
    evidence: str                 # what must be known to classify into this row
    retry_owner: str              # the one layer allowed to schedule a retry
    attempt_ceiling: int | None   # None: this row never retries
    deadline: str
    reconciliation_read: str
    action: Action
    escalation: str | None        # next owner named in the decision packet, if any
    terminal: str                 # the disposition this row leads to
    knowledge: Knowledge | None = None   # ledger knowledge the observation warrants
    matches: tuple[tuple[str, str], ...] = ()


_RUN_DEADLINE = "the run's absolute deadline"
_NO_READ = "none"
_BY_IDENTITY = "lookup(key) / search(incident, slot) comparing every intent field / get_version"

ROWS: tuple[Row, ...] = (
    Row(name="validation_failure",
        trigger="malformed intake or a request the service refuses as malformed",
        evidence="the validation problems (definite: nothing executed)",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation=None, terminal="FAILED_NO_EFFECT", knowledge=Knowledge.REJECTED,
        matches=(("intake", "invalid_intent"), ("dispatch", "validation_failed"),
                 ("dispatch", "bad_request"), ("dispatch", "not_found"))),
    Row(name="transient_read",
        trigger="a reconciliation read is unavailable, throttled or times out",
        evidence="the read's error; reads have no effect",
        retry_owner="worker", attempt_ceiling=RECONCILE_READ_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read="the same read", action=Action.RETRY_CALL,
        escalation=None, terminal="continue; on exhaustion see reconciliation_service_down",
        matches=tuple(("read", c) for c in ("unavailable", "timeout", "server_error", "throttled",
                                            "refused", "timeout_before_send"))),
    Row(name="transient_store",
        trigger="a platform store call (checkpoint, ledger, inbox, lease, authority) fails",
        evidence="the store's error code",
        retry_owner="worker", attempt_ceiling=TRANSIENT_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_NO_READ, action=Action.RETRY_CALL, escalation="platform",
        terminal="WAITING_OPERATOR when the store stays down",
        matches=(("platform", "*"), ("checkpoint", "*"), ("lease", "*"))),
    Row(name="throttling",
        trigger="429 on an effect call",
        evidence="throttled is definite: rejected before execution; retry_after_ms",
        retry_owner="worker", attempt_ceiling=ATTEMPT_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_NO_READ, action=Action.RETRY_SAME_KEY, escalation=None,
        terminal="WAITING_RETRY at the ceiling, FAILED_NO_EFFECT at the deadline",
        knowledge=Knowledge.PROPOSED, matches=(("dispatch", "throttled"),)),
    Row(name="timeout_before_send",
        trigger="connection refused, connect timeout or endpoint unavailable on an effect call",
        evidence="transport proof that no byte could have been accepted (definite error)",
        retry_owner="worker", attempt_ceiling=ATTEMPT_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_NO_READ, action=Action.RETRY_SAME_KEY, escalation=None,
        terminal="WAITING_RETRY at the ceiling, FAILED_NO_EFFECT at the deadline",
        knowledge=Knowledge.PROPOSED,
        matches=(("dispatch", "refused"), ("dispatch", "timeout_before_send"),
                 ("dispatch", "unavailable"))),
    Row(name="ambiguous_effect",
        trigger="timeout or 5xx after the request may have left",
        evidence="semantic key and the reconciliation method",
        retry_owner="none until authoritative absence", attempt_ceiling=ATTEMPT_CEILING,
        deadline=_RUN_DEADLINE, reconciliation_read=_BY_IDENTITY, action=Action.RECONCILE,
        escalation="operator", terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN when unresolved",
        knowledge=Knowledge.SENT_UNKNOWN,
        matches=(("dispatch", "timeout"), ("dispatch", "server_error"), ("read", "unresolved"))),
    Row(name="authoritative_absence",
        trigger="a negative read that is strong (or old enough), not in flight, within key "
                "retention and taken after the last send + max delivery delay",
        evidence="as_of, consistency, in_flight, retention horizon, the send horizon",
        retry_owner="worker", attempt_ceiling=ATTEMPT_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_BY_IDENTITY, action=Action.RETRY_SAME_KEY, escalation=None,
        terminal="same-key redispatch if authority is live; CANCELLED_NO_EFFECT if cancelled",
        knowledge=Knowledge.PROPOSED, matches=(("read", "absent"),)),
    Row(name="known_completion",
        trigger="an accepted response or a positive authoritative read",
        evidence="stable remote reference and every intent field equal",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_BY_IDENTITY,
        action=Action.VERIFY, escalation=None, terminal="SUCCEEDED (or compensation if cancelled)",
        knowledge=Knowledge.CONFIRMED, matches=(("dispatch", "accepted"), ("read", "found"))),
    Row(name="non_compensatable_effect",
        trigger="cancellation after commit on a service without release",
        evidence="confirmed effect; the capability profile offers no compensation",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="operator", terminal="CANCELLED_EFFECT_REMAINS",
        matches=(("compensation", "not_supported"),)),
    Row(name="shared_effect",
        trigger="cancellation after commit of an effect another run of the same intent caused",
        evidence="the record under the shared semantic key was committed before this run's first attempt",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="operator", terminal="CANCELLED_EFFECT_REMAINS",
        matches=(("compensation", "shared"),)),
    Row(name="compensation_denied",
        trigger="cancellation after commit; the release is not authorized",
        evidence="authority.check for the compensation proposal is not live",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="coordinator", terminal="CANCELLED_EFFECT_REMAINS",
        matches=(("authority", "denied by policy"),)),
    Row(name="lease_loss",
        trigger="stale epoch on a checkpoint write or a renewal; fenced by the service",
        evidence="the current epoch named in the error",
        retry_owner="the newer owner", attempt_ceiling=None, deadline="immediate",
        reconciliation_read="the newer owner reconciles", action=Action.FENCE_OUT, escalation=None,
        terminal="none from this worker (its finish is recorded as stale)",
        matches=(("checkpoint", "stale_epoch"), ("lease", "stale_epoch"), ("dispatch", "fenced"))),
    Row(name="lease_lapsed",
        trigger="stale epoch, but the current epoch is still this worker's: it expired unnoticed "
                "(a long pause) and no other worker acquired the run",
        evidence="current_epoch in the error equals this worker's epoch",
        retry_owner="worker", attempt_ceiling=REREAD_CEILING, deadline="immediate",
        reconciliation_read="checkpoints.load, ledger.by_run (the bootstrap)", action=Action.REACQUIRE,
        escalation="platform", terminal="none from this worker until it owns a new epoch",
        matches=(("checkpoint", "lease_lapsed"), ("lease", "lease_lapsed"))),
    Row(name="stale_checkpoint",
        trigger="version conflict on a compare-and-set checkpoint write",
        evidence="the latest version differs from the expected one; a lease renewal says "
                 "whether this worker still owns the run",
        retry_owner="worker", attempt_ceiling=REREAD_CEILING, deadline="immediate",
        reconciliation_read="checkpoints.load, ledger.by_run (the bootstrap)", action=Action.REREAD,
        escalation="platform", terminal="none from this worker; lease_loss when the renewal fails",
        matches=(("checkpoint", "version_conflict"),)),
    Row(name="lease_held",
        trigger="another owner's unexpired lease at acquisition",
        evidence="owner, epoch and expiry in the error",
        retry_owner="worker", attempt_ceiling=LEASE_WAIT_CEILING, deadline="the lease expiry",
        reconciliation_read=_NO_READ, action=Action.WAIT_LEASE, escalation="platform",
        terminal="no transition by this worker", matches=(("lease", "lease_held"),)),
    Row(name="incompatible_version",
        trigger="checkpoint schema or canonicalization version differs from the worker's",
        evidence="old versions, current versions, the tested migration if any",
        retry_owner="none", attempt_ceiling=None, deadline="before acquiring effect authority",
        reconciliation_read=_NO_READ, action=Action.MIGRATE_PIN_OR_STOP, escalation="operator",
        terminal="MIGRATING then the same state; PINNED; or WAITING_OPERATOR",
        matches=(("contract", "incompatible"),)),
    Row(name="cancellation",
        trigger="a cancel event in the inbox",
        evidence="event id and time; the ledger knowledge of every effect",
        retry_owner="none", attempt_ceiling=None, deadline=_RUN_DEADLINE, reconciliation_read=_BY_IDENTITY,
        action=Action.BLOCK_NEW_WORK, escalation=None,
        terminal="CANCELLED_NO_EFFECT / CANCELLED_EFFECT_REMAINS / CANCELLED_EFFECT_UNKNOWN",
        matches=(("inbox", "cancel"),)),
    Row(name="duplicate_event",
        trigger="an inbox event whose event id was already processed",
        evidence="the event id in the checkpoint's event record",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.RECORD_DUPLICATE, escalation=None, terminal="unchanged",
        matches=(("inbox", "duplicate"),)),
    Row(name="late_callback",
        trigger="a callback event from a service",
        evidence="the callback payload, kept as evidence only",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_BY_IDENTITY,
        action=Action.EVIDENCE_ONLY, escalation=None, terminal="unchanged",
        matches=(("inbox", "callback"),)),
    Row(name="contradictory_evidence",
        trigger="a read or response that names another intent under the key (a key-only "
                "service replays whatever it stored), several matches, or an unnamed error",
        evidence="both observations, kept side by side",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_BY_IDENTITY,
        action=Action.STOP, escalation="service_owner",
        terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN",
        matches=(("read", "mismatch"), ("read", "ambiguous"), ("read", "*"),
                 ("dispatch", "mismatch"), ("dispatch", "*"))),
    Row(name="permission_denied",
        trigger="the principal lacks the capability",
        evidence="permission_denied (definite); never another principal or credential",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="security", terminal="FAILED_NO_EFFECT",
        knowledge=Knowledge.REJECTED, matches=(("dispatch", "permission_denied"),)),
    Row(name="key_collision",
        trigger="422 for the key: the service stores another request fingerprint under it",
        evidence="stored fingerprint differs: the request did not execute under this key",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="service_owner", terminal="FAILED_NO_EFFECT",
        knowledge=Knowledge.REJECTED, matches=(("dispatch", "intent_mismatch"),)),
    Row(name="effect_released",
        trigger="the key's record is already released: the service replays, or a read finds, a hold "
                "that a compensation undid",
        evidence="the record under the key with status released; no hold exists, and the same key "
                 "cannot make a new one",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_BY_IDENTITY,
        action=Action.STOP, escalation="operator",
        terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN (the run cannot prove its own effect)",
        matches=(("dispatch", "released"), ("read", "released"))),
    Row(name="natural_key_exists",
        trigger="already_exists on a publish (it may hide this run's earlier success)",
        evidence="get_version record compared field by field",
        retry_owner="none", attempt_ceiling=None, deadline=_RUN_DEADLINE,
        reconciliation_read="get_version(package, version)", action=Action.RECONCILE,
        escalation=None, terminal="SUCCEEDED when the record is ours, FAILED_NO_EFFECT otherwise",
        knowledge=Knowledge.SENT_UNKNOWN, matches=(("dispatch", "already_exists"),)),
    Row(name="natural_key_taken",
        trigger="the natural key holds a record with another intent",
        evidence="get_version record whose fields differ from the intent",
        retry_owner="none", attempt_ceiling=None, deadline="immediate",
        reconciliation_read="get_version(package, version)", action=Action.STOP,
        escalation="service_owner", terminal="FAILED_NO_EFFECT", knowledge=Knowledge.REJECTED,
        matches=(("read", "taken"),)),
    Row(name="key_retention_expired",
        trigger="a negative read after the provider's key-retention horizon",
        evidence="first send time + retention_ms <= read time",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_BY_IDENTITY,
        action=Action.STOP, escalation="operator",
        terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN", matches=(("read", "beyond_retention"),)),
    Row(name="eventual_consistency_lag",
        trigger="a negative read whose as_of does not cover the last send + max delivery delay",
        evidence="as_of, consistency, the send horizon",
        retry_owner="worker", attempt_ceiling=RECONCILE_READ_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read="the same read after the horizon", action=Action.WAIT, escalation=None,
        terminal="continue; unresolved at the deadline is an ambiguous effect",
        matches=(("read", "negative_too_early"),)),
    Row(name="key_in_flight",
        trigger="409 for the key, an in-flight read, or a publish job still running",
        evidence="conflict_in_flight / in_flight / job status running",
        retry_owner="worker", attempt_ceiling=RECONCILE_READ_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_BY_IDENTITY, action=Action.WAIT, escalation=None,
        terminal="continue; unresolved at the deadline is an ambiguous effect",
        knowledge=Knowledge.SENT_UNKNOWN,
        matches=(("dispatch", "conflict_in_flight"), ("dispatch", "job_running"),
                 ("read", "in_flight"))),
    Row(name="reconciliation_service_down",
        trigger="the reconciliation read stays unavailable until the budget or deadline ends",
        evidence="every failed read with its time",
        retry_owner="none", attempt_ceiling=None, deadline=_RUN_DEADLINE, reconciliation_read=_BY_IDENTITY,
        action=Action.STOP, escalation="operator",
        terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN", matches=(("read", "down"),)),
    Row(name="retry_amplification",
        trigger="a layer between worker and service may retry on its own (proxy_retries)",
        evidence="the capability profile",
        retry_owner="caller", attempt_ceiling=ATTEMPT_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_NO_READ, action=Action.DECLARE_RETRY_OWNER, escalation=None,
        terminal="unchanged", matches=(("profile", "proxy_retries"),)),
    Row(name="weak_service",
        trigger="an ambiguous outcome on a service with no read by key or reference",
        evidence="lookup: none in the capability profile",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="operator",
        terminal="FAILED_EFFECT_UNKNOWN / CANCELLED_EFFECT_UNKNOWN", matches=(("read", "no_read"),)),
    Row(name="approval_pending",
        trigger="no approval is bound to the proposal hash yet",
        evidence="authority.check reason; the approval request id",
        retry_owner="none", attempt_ceiling=None, deadline=_RUN_DEADLINE, reconciliation_read=_NO_READ,
        action=Action.WAIT_HUMAN, escalation=None, terminal="WAITING_HUMAN",
        matches=(("authority", "no approval bound to this proposal hash"),)),
    Row(name="approval_expired",
        trigger="the approval bound to the proposal hash has expired",
        evidence="authority.check reason expired; migration never refreshes it",
        retry_owner="worker", attempt_ceiling=APPROVAL_REQUEST_CEILING, deadline=_RUN_DEADLINE,
        reconciliation_read=_NO_READ, action=Action.REREQUEST_APPROVAL, escalation="approver",
        terminal="WAITING_HUMAN; FAILED_NO_EFFECT when requests are exhausted",
        matches=(("authority", "expired"),)),
    Row(name="authority_withdrawn",
        trigger="approval revoked, capability version changed, or any other non-live answer",
        evidence="authority.check reason",
        retry_owner="none", attempt_ceiling=None, deadline="immediate", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="approver", terminal="FAILED_NO_EFFECT (no dispatch)",
        matches=(("authority", "revoked"), ("authority", "capability version changed"),
                 ("authority", "*"))),
    Row(name="retry_budget_exhausted",
        trigger="definite failures reached the attempt ceiling",
        evidence="every attempt's definite error in the ledger",
        retry_owner="a deliberate retry intent (one admission, one attempt)", attempt_ceiling=None,
        deadline=_RUN_DEADLINE, reconciliation_read=_NO_READ, action=Action.WAIT_RETRY_INTENT,
        escalation=None, terminal="WAITING_RETRY; FAILED_NO_EFFECT at the deadline",
        matches=(("budget", "attempts"),)),
    Row(name="deadline_passed",
        trigger="the absolute deadline is reached",
        evidence="the deadline and the current knowledge of every effect",
        retry_owner="none", attempt_ceiling=None, deadline="reached", reconciliation_read=_NO_READ,
        action=Action.STOP, escalation="operator", terminal="the disposition the ledger supports",
        matches=(("budget", "deadline"),)),
)

ROW: Mapping[str, Row] = {row.name: row for row in ROWS}
_INDEX: Mapping[tuple[str, str], Row] = {match: row for row in ROWS for match in row.matches}


def classify(phase: str, code: str) -> Row:
    """The row for an observation: the exact (phase, code) pair, else the phase's ``*`` row."""
    return _INDEX.get((phase, code)) or _INDEX[(phase, "*")]


def _check_table() -> None:
    # every (phase, code) pair belongs to exactly one row
    seen: dict[tuple[str, str], str] = {}
    for row in ROWS:
        for match in row.matches:
            assert match not in seen, f"{match} in both {seen[match]} and {row.name}"
            seen[match] = row.name


_check_table()
