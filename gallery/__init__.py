# layer adapters: the reference adapter and the gallery of variants.
# may import: vocab, world, scenario, rules, checks, run, reference_impl (only floors below it).
"""A gallery of known-bad adapters, and the correct alternatives beside them.

Every adapter here is ``crashlab.reference_impl:ReferenceAdapter`` with one decision replaced
(reference_impl/behaviour.py): one realistic mistake from AR-08's "Common durability
traps", "Design review through counterexamples" and "Evidence interpretation drill", or
one legitimate choice that differs from the reference's. Each is importable for
``crashlab conformance --adapter gallery.<module>:<Class>``.

:data:`ENTRIES` is the registry: the mistake in one sentence (the class docstring), the
chapter passage it violates, and what must catch it (invariants, rubric categories, the
automatic-failure reason). ``python tools/docgen.py`` runs every entry on the library
and writes the detection matrix (docs/detection-matrix.md) and the workshop exhibits (docs/gallery.md).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

CATEGORIES = ("classification", "ownership", "effect_correctness", "disposition")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    id: str                              # stable, kebab-case
    adapter: str                         # module:Class, for --adapter
    statement: str                       # the mistake (or, when correct, the choice) in one sentence
    section: str                         # the chapter section the passage is in
    quote: str                           # the passage it violates (or, when correct, that permits it)
    invariants: tuple[str, ...] = ()     # invariants that must catch it
    categories: tuple[str, ...] = ()     # rubric categories that must lose a point
    auto_fail: str | None = None         # the automatic-failure reason it must raise
    correct: bool = False                # a correct alternative: no safety invariant may fail
    gaps: tuple[str, ...] = ()           # invariants that should also catch it but do not (see note)
    note: str = ""                       # what differs from the chapter's mistake, or why a gap exists

    def __post_init__(self) -> None:
        unknown = set(self.categories) - set(CATEGORIES)
        if unknown:
            raise ValueError(f"{self.id}: unknown rubric categories {sorted(unknown)}")
        if self.correct and (self.invariants or self.auto_fail):
            raise ValueError(f"{self.id}: a correct alternative expects no violation")


def _entry(cls: type, id: str, section: str, quote: str, **fields) -> Entry:
    statement = " ".join(inspect.getdoc(cls).split())
    return Entry(id=id, adapter=f"{cls.__module__}:{cls.__qualname__}", statement=statement,
                 section=section, quote=quote, **fields)


def load(entry: Entry) -> type:
    module, _, name = entry.adapter.partition(":")
    return getattr(importlib.import_module(module), name)


def changes(entry: Entry) -> list[str]:
    """The reference decisions an entry's adapter replaces (its Behaviour fields)."""
    from crashlab.reference_impl.behaviour import REFERENCE
    from crashlab.reference_impl.session import Session

    behaviour = load(entry).behaviour
    out = []
    for name in REFERENCE.__dataclass_fields__:
        value = getattr(behaviour, name)
        if value == getattr(REFERENCE, name):
            continue
        if name == "matrix":
            out += [f"matrix: ({phase}, {code}) -> row {row.name}" for (phase, code), row in value.items()]
        elif name == "actions":
            out += [f"action {action} -> {fn.__name__}" for action, fn in value.items()]
        elif name == "session":
            own = value.__mro__[:value.__mro__.index(Session)]
            methods = sorted({m for klass in own for m, v in vars(klass).items()
                              if callable(v) and not m.startswith("__")})
            out.append(f"session -> {value.__name__} ({', '.join(methods)})")
        elif name == "table":
            names = {t.name for t in value} - {t.name for t in _reference_table()}
            out.append(f"decision table: {', '.join(sorted(names))}")
        else:
            out.append(f"{name} -> {value.__name__}")
    return out


def _reference_table():
    from crashlab.reference_impl.transitions import TABLE

    return TABLE


from . import (alternatives, authority, blindspots, cancellation, identity, knowledge, ownership, recovery,  # noqa: E402
               retries, unenforced)

_IDEMPOTENCY = "Specify semantic idempotency, not merely a key header"
_TRAPS = "Common durability traps"
_DRILL = "Evidence interpretation drill"

ENTRIES: tuple[Entry, ...] = (
    # -------------------------------------------------------------- classification
    _entry(retries.BlindRetry, "blind-retry", "Classify before retrying",
           "A timeout after an effect is not failure evidence. Blind retry can duplicate a "
           "non-idempotent action.",
           invariants=("RETRY-01", "EFF-01"), categories=("classification", "effect_correctness"),
           auto_fail="blind ambiguous retry"),
    _entry(retries.TimeoutAsPreSend, "timeout-as-pre-send", _DRILL,
           "The client deadline expired. It proves only that the client stopped waiting.",
           invariants=("RETRY-01", "KNOW-02", "TRUTH-01", "EFF-01"),
           categories=("classification", "effect_correctness"), auto_fail="blind ambiguous retry",
           note="The retry follows the adapter's own PROPOSED record. Warrant is judged on what the "
                "adapter saw (an indefinite timeout), never on what it wrote down: a recorded absence "
                "counts only when that record was itself warranted, so the retry is blind (RETRY-01)."),
    _entry(knowledge.DeadlineAsFailure, "deadline-as-failure", "Effect ledger and semantic identity",
           "The ledger never upgrades SENT_UNKNOWN to failure because a deadline elapsed.",
           invariants=("KNOW-02", "TRUTH-01"), categories=("classification",)),
    _entry(knowledge.ConfirmedFromSendRecord, "confirmed-from-send-record", _DRILL,
           "The local ledger says SENT. It proves dispatch was recorded, not that the remote "
           "service committed.",
           invariants=("KNOW-02",), categories=("classification",), auto_fail="exactly-once claim",
           note="A CONFIRMED entry with no evidence at all is an exactly-once claim (KNOW-02)."),
    _entry(knowledge.LateCallbackApplied, "late-callback-applied", "Late, duplicate, and reordered events",
           "A late tool callback for an old lease can contribute reconciliation evidence but cannot "
           "advance state directly.",
           invariants=("LATE-01", "KNOW-02"), categories=("classification",), auto_fail="exactly-once claim",
           note="Where the callback names no key (matrix-late-callback, matrix-duplicate-callback, the "
                "cancellation-under-pressure timelines) the upgrade "
                "has no evidence at all (KNOW-02, an exactly-once claim) and follows the callback the adapter "
                "saw, so LATE-01 charges it too: the callback advanced state."),
    _entry(authority.CredentialHunt, "credential-hunt", "Build a failure envelope before a retry policy",
           "A permission denial is an authority result. Searching for another token would be privilege "
           "escalation, not recovery.",
           invariants=("AUTH-02", "CLS-01"), categories=("classification",),
           note="The principal is an intent field in this world, so the retry under the service account "
                "also carries a changed intent under the old key (KEY-02)."),
    _entry(authority.BestEffortDeserialize, "best-effort-deserialize", "Deployment compatibility",
           "Use one of four dispositions. [...] \u201cBest effort deserialize\u201d is not a fifth option.",
           invariants=("MIG-01",), categories=("classification",)),
    # -------------------------------------------------------------- ownership
    _entry(ownership.UnfencedZombie, "unfenced-zombie", "Checkpoint identity and ownership",
           "A worker that loses the lease stops issuing effects even if local work continues.",
           invariants=("OWN-01",), categories=("ownership",),
           note="The ledger fences appends by epoch, so the zombie's SENT_UNKNOWN append is refused; it "
                "dispatches anyway. Where the pause falls right before the send (matrix-lease-loss) the "
                "service's fencing token stops it."),
    _entry(ownership.CheckpointWithoutOwner, "checkpoint-without-owner", "Checkpoint identity and ownership",
           "A worker may advance it only while holding the current lease and expected version.",
           invariants=("CKPT-01",), categories=("ownership",),
           auto_fail="checkpoint without version or owner"),
    _entry(retries.InnerClientRetry, "inner-client-retry", "Classify before retrying",
           "Retry policy belongs to one layer. If SDK, client, proxy, queue, and worker all retry, a "
           "small failure becomes a storm.",
           invariants=("RETRY-03",), categories=("ownership",), auto_fail="two retry owners"),
    _entry(retries.UndeclaredRetryOwner, "undeclared-retry-owner", _TRAPS,
           "Retry multiplication: libraries and workers each retry independently. Assign one owner "
           "and include downstream behavior in the attempt budget.",
           invariants=("RETRY-03", "EFF-01"), categories=("ownership", "effect_correctness"),
           auto_fail="two retry owners"),
    _entry(retries.UnboundedThrottleRetry, "unbounded-throttle-retry", "Keep retry budgets end to end",
           "A retry that starts inside the network deadline but completes after the business deadline "
           "is still unacceptable. Use both an attempt ceiling and an absolute deadline.",
           invariants=("RETRY-02",), categories=("ownership",)),
    # -------------------------------------------------------------- effect correctness
    _entry(identity.FreshKeyPerAttempt, "fresh-key-per-attempt", _TRAPS,
           "Key without intent: a UUID prevents nothing if each attempt receives a new UUID.",
           invariants=("KEY-01", "PREP-01", "EFF-01"), categories=("effect_correctness",),
           note="The ledger keeps its own key, so reconciliation reads a key the service never saw: the "
                "checks also report the retry after that read as blind (RETRY-01) and the CONFIRMED "
                "recorded for a key nothing was sent under as an exactly-once claim (KNOW-02)."),
    _entry(identity.AttemptNumberKey, "attempt-number-key", _IDEMPOTENCY,
           "Never derive it from an attempt number. Attempt numbers distinguish transport tries under "
           "one intent; keys distinguish intended business effects.",
           invariants=("KEY-01", "PREP-01", "EFF-01"), categories=("effect_correctness",),
           note="As fresh-key-per-attempt: RETRY-01 and KNOW-02 follow from the key mismatch."),
    _entry(identity.TimestampKey, "timestamp-key", _IDEMPOTENCY,
           "Including a volatile timestamp would make identical retries appear different.",
           invariants=("KEY-01", "PREP-01", "EFF-01"), categories=("effect_correctness",),
           note="As fresh-key-per-attempt: RETRY-01 and KNOW-02 follow from the key mismatch."),
    _entry(identity.TenantlessKey, "tenantless-key", _IDEMPOTENCY,
           "For the FieldOps reservation, intent includes tenant, incident, part, slot, technician, "
           "quantity, requesting principal, and proposal hash. Omitting tenant risks cross-tenant collision.",
           invariants=("KEY-02",), categories=("effect_correctness",)),
    _entry(knowledge.EventualNegativeAsAbsence, "eventual-negative-as-absence", _IDEMPOTENCY,
           "Without that support, a negative read may be only temporarily negative.",
           invariants=("REC-01", "RETRY-01"), categories=("effect_correctness", "classification"),
           auto_fail="blind ambiguous retry",
           note="On a service that keeps no keys (matrix-late-arrival-search-only) the redispatch after a "
                "read before the late-delivery bound is blind (RETRY-01, an automatic failure); where the "
                "key collapses a late arrival it is a reconciliation failure (REC-01)."),
    _entry(knowledge.RetentionBlindRedispatch, "retention-blind-redispatch", _IDEMPOTENCY,
           "If a service forgets keys after twenty-four hours while a workflow can resume after seven "
           "days, the adapter cannot promise safe redispatch on day seven.",
           invariants=("REC-01", "EFF-01"), categories=("effect_correctness",)),
    _entry(authority.InventedApproval, "invented-approval", "Eight traces, not one happy path",
           "Crash during approval wait: restore WAITING_HUMAN; do not invent approval.",
           invariants=("AUTH-01",), categories=("effect_correctness",)),
    _entry(authority.MigrationRefreshesAuthority, "migration-refreshes-authority", "Failure-injection workshop",
           "A design that passes each single fault can still fail when cancellation is applied after a "
           "stale worker resumes or when migration accidentally refreshes old authority.",
           invariants=("AUTH-01",), categories=("effect_correctness",)),
    _entry(cancellation.CompensationAsRollback, "compensation-as-rollback", "Compensation as forward recovery",
           "FieldOps names the relationship: compensation C-82 addresses effect E-82. It does not mutate "
           "E-82 from committed to nonexistent.",
           invariants=("COMP-01",), categories=("effect_correctness",), auto_fail="compensation as rollback"),
    _entry(recovery.TranscriptRecovery, "transcript-recovery", _TRAPS,
           "Transcript recovery: replaying messages can regenerate a different action and cannot "
           "establish what the service committed. Recover contracts and ledgers first.",
           invariants=("RETRY-01", "EFF-02"), categories=("classification", "effect_correctness"),
           auto_fail="blind ambiguous retry",
           note="Where the ledger already held CONFIRMED, the re-derived attempt moves it back to "
                "SENT_UNKNOWN, which COMP-01 reports as compensation as rollback although no compensation "
                "is involved."),
    _entry(recovery.DuplicateEventTwice, "duplicate-event-twice", "Late, duplicate, and reordered events",
           "Duplicate receipt should return the prior processing disposition rather than silently "
           "execute again.",
           invariants=("EVT-01",), categories=("effect_correctness",),
           note="Most duplicated events (intake, cancellation) are idempotent in this adapter; "
                "seed002-duplicate-retry-request, where the admitted attempt fails again and the "
                "retry request is redelivered, shows the second admission."),
    # -------------------------------------------------------------- disposition
    _entry(knowledge.ExactlyOnceClaim, "exactly-once-claim", "Effect ledger and semantic identity",
           "If unknown, escalate. Never claim exactly-once external execution.",
           invariants=("TRUTH-02",), categories=("disposition",), auto_fail="exactly-once claim"),
    _entry(cancellation.IgnoresCancellation, "ignores-cancellation", "Classify before retrying",
           "Cancellation stops new work and reconciles anything in flight.",
           invariants=("CANCEL-01",), categories=("disposition",)),
    _entry(cancellation.CancellationTheater, "cancellation-theater", _TRAPS,
           "Cancellation theater: cancelling local compute while leaving a remote effect unresolved is "
           "not complete cancellation.",
           invariants=("TRUTH-02", "TRUTH-01"), categories=("disposition", "classification")),
    # -------------------------------------------------------------- rules enforced by their own invariant
    _entry(blindspots.PacketWithoutOwner, "packet-without-owner", "Operate the recovery system",
           "The recovery surface should answer: what is the run trying to do, who owns it, what state is "
           "durable, which effects are known, which are ambiguous, what authority is live, what deadline "
           "remains, and what actions are permitted now?",
           invariants=("PKT-01",), categories=("ownership",),
           note="OWN-04 still passes: the finish names its next_owner; only the packet's content check "
                "sees that the packet itself names no one."),
    _entry(blindspots.ConstantFence, "constant-fence", "Design the checkpoint as a recovery contract",
           "External services that support fencing tokens can enforce the epoch; otherwise the adapter "
           "must minimize the interval and reconcile any in-flight ambiguity.",
           invariants=("FENCE-01",), categories=("ownership",),
           note="Where the stale request arrives first the service's own fencing may still stop it; "
                "matrix-stale-send-fencing-service shows the second hold it lets through."),
    _entry(blindspots.SentUnknownOnce, "sent-unknown-once", "Six crash points in one reservation",
           "After send, before remote commit is known. The ledger becomes SENT_UNKNOWN.",
           invariants=("PREP-02",), categories=("effect_correctness",)),
    _entry(blindspots.FixedJitter, "fixed-jitter", "Classify before retrying",
           "Throttling uses coordinated backoff and seeded jitter.",
           invariants=("JIT-01",), categories=("ownership",)),
    _entry(blindspots.SilentDuplicates, "silent-duplicates", "Failure-injection workshop",
           "For duplicate input, deliver the same event twice. Expect one transition and an auditable "
           "duplicate disposition.",
           invariants=("EVT-02",), categories=("effect_correctness",)),
    _entry(blindspots.RetryAfterForgottenOnRestart, "retry-after-forgotten-on-restart", "Classify before retrying",
           "Throttling uses coordinated backoff and seeded jitter.",
           invariants=("CLS-02",), categories=("classification",),
           note="matrix-throttling-restart: the retry-after was recorded in the ledger before the crash, "
                "so it binds the replacement as it bound the worker that saw it."),
    _entry(blindspots.PinNamesNewVersions, "pin-names-new-versions", "Deployment compatibility",
           "Pin means old code drains old runs under bounded operational ownership.",
           invariants=("PIN-01",), categories=("classification",)),
    _entry(blindspots.LedgerOverService, "ledger-over-service", "Recovery when dependencies disagree",
           "A local ledger can prove what FieldOps recorded, not current remote state.",
           invariants=("TRUTH-01",), categories=("classification",),
           note="matrix-ledger-confirmed-service-disagrees: an operator removed the hold while the worker "
                "was down; the record it replays is no longer true."),
    _entry(blindspots.SameKeyRecordAdopted, "same-key-record-adopted", "Runbook: ambiguous reservation",
           "If parameters conflict, stop as integrity error.",
           invariants=("TRUTH-01", "REC-01"), categories=("classification",),
           note="matrix-same-key-other-parameters: another system reserved under the run's key with "
                "another technician and quantity; the lookup's record is not this run's effect."),
    _entry(blindspots.CancellationRewritesTerminal, "cancellation-rewrites-terminal",
           "Late, duplicate, and reordered events",
           "A cancellation arriving after terminal success records user intent but does not rewrite history.",
           invariants=("TERM-01",), categories=("disposition",),
           note="combined-cancel-after-finish: the platform refuses the second finish, so the disposition "
                "stands; TERM-01 holds the woken worker to replaying the terminal record."),
    _entry(blindspots.PolicyBlindResume, "policy-blind-resume", "Deployment compatibility",
           "Backward compatibility means more than successful JSON parsing: the new code must preserve "
           "transition meaning, proposal hashing, capability semantics, authority checks, and effect identity.",
           invariants=("MIG-01",), categories=("classification",),
           note="matrix-policy-change-deployment: the deployment changes the authority policy while the "
                "approval is pending."),
    _entry(blindspots.ConflictReadAsAbsence, "conflict-read-as-absence", "Runbook: ambiguous reservation",
           "If parameters conflict, stop as integrity error.",
           invariants=("KEY-03",), categories=("effect_correctness",),
           note="matrix-same-key-other-parameters: the service refuses the second send (intent_mismatch), "
                "so no second effect lands; the run ends FAILED_NO_EFFECT with nobody told of the collision."),
    # -------------------------------------------------------------- what packets, messages and budgets say
    _entry(unenforced.SpeculativePacket, "speculative-packet", "Communicate unresolved effects",
           "Do not expose secrets, raw private context, or speculative model narratives. Evidence references "
           "and typed parameters are usually sufficient.",
           invariants=("PKT-02",), categories=("ownership",),
           note="Every other panel of the packet is the reference's, so PKT-01 (what a packet must say) still "
                "passes; only the check of what it may not say sees the guess and the copied intake."),
    _entry(unenforced.RetryUnknownEffect, "retry-unknown-effect", "Operate the recovery system",
           "An operator may acquire takeover, run a specific reconciliation read, approve a specific corrective "
           "proposal, mark an external reference after independent verification, cancel new work, or close "
           "with an unresolved disposition.",
           invariants=("PKT-02",), categories=("ownership",),
           note="matrix-weak-service, fieldops-no-key-lookup, notify-crash-delivery-unknown: the service has no "
                "read, so the reference recommends STOP (effect unknown); this exhibit recommends RETRY instead, "
                "\u201cthe next step is reconciliation, not repetition\u201d (Classify before retrying)."),
    _entry(unenforced.OfferNewKey, "offer-new-key", "Runbook: ambiguous reservation",
           "It also prevents a human from minting a new key merely to make the interface proceed.",
           invariants=("PKT-02",), categories=("ownership",),
           note="matrix-weak-service, fieldops-no-key-lookup, notify-crash-delivery-unknown, "
                "matrix-ledger-confirmed-service-disagrees: the recommendation is "
                "the reference's (STOP, effect unknown); only the alternative it adds, a new key for the same "
                "intent, is a control no packet may offer. Before actions were judged by their control, an "
                "alternative was judged only for RETRY, and this exhibit passed."),
    _entry(unenforced.ReassuringMessage, "reassuring-message", "Communicate unresolved effects",
           "Instead of \u201cbooking failed,\u201d say that the confirmation response was lost, the system is "
           "checking whether the reservation occurred, and another attempt is temporarily blocked to avoid "
           "duplication.",
           invariants=("MSG-01",), categories=("ownership",),
           note="The disposition (FAILED_EFFECT_UNKNOWN, CANCELLED_EFFECT_UNKNOWN) is honest; only the reason "
                "the requester reads claims a confirmation the ledger never held."),
    _entry(unenforced.DayLongLease, "day-long-lease", "Checkpoint identity and ownership",
           "Do not hold a lease forever. A lease has a short renewal interval, an expiry, and a monotonic epoch.",
           invariants=("LEASE-01",), categories=("ownership",),
           note="Where the owner crashes, no replacement can acquire the run for a day, so the scenarios that "
                "expect the replacement's read also miss their evidence (EXP-EVIDENCE); LEASE-01 names the "
                "cause on every run."),
    _entry(unenforced.DeadlineDropped, "deadline-dropped", "Keep retry budgets end to end",
           "A retry that starts inside the network deadline but completes after the business deadline is still "
           "unacceptable. Use both an attempt ceiling and an absolute deadline.",
           invariants=("DEAD-02",), categories=("ownership",),
           note="The seven scenarios with a business deadline: the run keeps observing (or closes) at the "
                "design's own 30-minute deadline; the expectations that time the disposition miss it too."),
    _entry(unenforced.WaitsPastDeadline, "waits-past-deadline", "Runbook: ambiguous reservation",
           "Close with a precise terminal disposition when the business deadline ends.",
           invariants=("DEAD-01",), categories=("disposition",),
           note="It escalates and names the operator (OWN-04, PKT-01 pass); in a scenario without a business "
                "deadline the same wait is an honest durable state (docs/invariants.md, \u201cNo deadline\u201d)."),
    _entry(unenforced.PreSendAsAmbiguous, "pre-send-as-ambiguous", "Assess the eight traces",
           "A learner loses points for treating every timeout alike, but automatic failure is reserved for "
           "blind retry of an ambiguous non-idempotent effect.",
           invariants=("CLS-03",), categories=("classification",),
           note="Its reconciliation finds nothing and it resends under the same key, so the outcome is right; "
                "the read after a refusal that proves nothing left is the mistake (C3)."),
    _entry(unenforced.EarlyAbsenceClaim, "early-absence-claim", _IDEMPOTENCY,
           "Without that support, a negative read may be only temporarily negative.",
           invariants=("REC-02",), categories=("effect_correctness",),
           note="matrix-early-negative-read-cancelled: the request was dropped, so nothing arrives late and "
                "CANCELLED_NO_EFFECT happens to be true; the read it rests on was taken before the provider's "
                "late-delivery bound. Everywhere else its early resend is collapsed by the key, which the library "
                "accepts (matrix-eventual-consistency-lag: the worker may rely on \u201cthe service's key to "
                "collapse a same-key redispatch\u201d)."),
    # -------------------------------------------------------------- correct alternatives
    _entry(alternatives.EscalateEveryAmbiguity, "escalate-every-ambiguity", "Worked FieldOps recovery",
           "It records FAILED_EFFECT_UNKNOWN, names the operator escalation, and stops. Durability "
           "succeeded because the system preserved an uncomfortable truth.", correct=True,
           note="It loses exactly one point, E4 authoritative reconciliation: where the service offers "
                "an authoritative read it never uses it (AR-08 \"Runbook: ambiguous reservation\": \"Use "
                "the adapter's authoritative read\"), so scenarios whose rules require the read or its "
                "result (a lookup in the trace, SUCCEEDED where the read is available) charge E4. Its "
                "escalations and FAILED_EFFECT_UNKNOWN cost nothing else."),
    _entry(alternatives.PinInsteadOfMigrate, "pin-instead-of-migrate", "Deployment compatibility",
           "Pin means old code drains old runs under bounded operational ownership.", correct=True),
    _entry(alternatives.StopInsteadOfCompensate, "stop-instead-of-compensate", "Cancellation races",
           "After commit, block new work and consider authorized compensation.", correct=True,
           note="It loses no point: trace 8 and the third handoff run presuppose a release that was sent; "
                "a design that never compensates cannot reach that situation, so those scenarios also "
                "accept CANCELLED_EFFECT_REMAINS with an escalation (and still refuse a kept hold reported "
                "as CANCELLED_NO_EFFECT, or one left without an escalation). It never sends a compensation, "
                "yet E5 (compensation is a separate effect) is still judged: a run cancelled after its hold "
                "was confirmed is where COMP-01 asks that the original is kept, never rewritten to “never "
                "happened”, and it keeps it. It scores 20/20."),
)

BY_ID: dict[str, Entry] = {e.id: e for e in ENTRIES}

__all__ = ["CATEGORIES", "ENTRIES", "BY_ID", "Entry", "changes", "load"]
