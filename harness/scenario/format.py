"""The scenario format's vocabulary, as data: the fields each section takes, the event types, faults,
profile knobs, dispositions and evidence forms a scenario may name, and the defaults it starts from.

The loader checks files against these tables and the JSON Schema is generated from them
(docs/scenarios.md documents the same format for people).
"""
from __future__ import annotations

from typing import Mapping

from ..vocab.event_tables import BY_NAME as KIND_NAMES
from ..vocab.model import Knowledge, RunState

DEFAULT_ORIGIN_MS = 10 * 3_600_000     # 10:00, the chapter's clock
DEFAULT_HORIZON_MS = 3_600_000         # one simulated hour after the origin
DEFAULT_ENV = {"code_version": 1, "schema_version": 1, "canonicalization_version": 1,
               "policy_version": 1, "capability_version": 1}
#: Events delivered to the run's inbox (with optional duplicates and delivery identity).
INBOX_EVENTS = frozenset({"cancel", "callback", "operator_answer", "retry", "deny", "event"})
EVENT_TYPES = frozenset({"approve", "revoke", "capability_change", "deploy", "other_actor"}) | INBOX_EVENTS
DELIVERY_FIELDS = frozenset({"duplicates", "duplicate_after", "event_id", "producer_seq", "producer"})
#: The fields each event type takes besides at, type and run.
EVENT_FIELDS: Mapping[str, frozenset[str]] = {
    "deploy": frozenset(DEFAULT_ENV) | {"alters", "services"},
    "other_actor": frozenset({"service", "op", "args", "same_key"}),
    "approve": frozenset(),
    "capability_change": frozenset(),
    "revoke": frozenset({"reason", "payload"}),
    **{t: frozenset({"reason", "payload"}) | DELIVERY_FIELDS for t in INBOX_EVENTS - {"event", "cancel"}},
    "cancel": frozenset({"reason", "payload", "record"}) | DELIVERY_FIELDS,
    "event": frozenset({"kind", "reason", "payload"}) | DELIVERY_FIELDS,
}
RUNLESS_EVENTS = frozenset({"deploy", "other_actor"})
#: ``cancel.record``: where the platform records a cancellation as it is delivered, besides the
#: inbox. ``checkpoint``: as the run's next checkpoint version (a conditional write of its own), so
#: that a dispatcher's write against the earlier version fails: the cancellation wins the version race.
CANCEL_RECORDS = ("checkpoint",)
#: ``deploy.alters``: what a code change alters (AR-08 "Deployment compatibility"), and the
#: contract version the deploy must change with it so that new code can tell.
DEPLOY_ALTERS: Mapping[str, str] = {
    "transition_meaning": "schema_version",
    "proposal_hashing": "canonicalization_version",
    "effect_identity": "canonicalization_version",
    "capability_semantics": "capability_version",
    "authority_checks": "policy_version",
}
#: ``deploy.services``: the service-contract knobs a deployment may change (AR-08's "adapter"
#: compatibility axis): how long keys are kept, how a request can be read back, how fresh reads are.
CONTRACT_KNOBS = ("retention", "lookup", "consistency", "lag", "max_delivery_delay")
#: Payload keys the world reads as delivery controls: a payload may not use them.
RESERVED_PAYLOAD_KEYS = DELIVERY_FIELDS | {"kind", "duplicate_after_ms", "record"}

FAULTS = frozenset({"refused", "timeout_before_send", "drop_request", "lost_response", "late_arrival",
                    "throttled", "server_error_before", "server_error_after", "duplicate_delivery",
                    "stale_read", "unavailable", "error"})
#: Faults only a read can suffer (stale_read: a replica that misses recent commits answers as fresh).
READ_FAULTS = frozenset({"stale_read"})
#: Faults with a send boundary: they only make sense on a service port.
TRANSPORT_FAULTS = FAULTS - {"unavailable", "error"}
CARD_FIELDS = ("known_before_failure", "survived", "recovery_owner", "authoritative_query",
               "terminal_state")
DISPOSITIONS = frozenset(s.value for s in RunState) - {"INTAKE"}
KNOWLEDGE = frozenset(k.value for k in Knowledge)
RUN_STATES = frozenset(s.value for s in RunState if s is not RunState.INTAKE)
VERDICTS = ("pass", "fail", "unknown")
#: The effect a run causes, per service kind (compensation is not a run operation).
PRIMARY_OPERATION = {"reservation": "reserve", "notification": "send", "registry": "publish"}
#: Per service kind, the values its profile knobs accept.
PROFILE_CHOICES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "reservation": {"idempotency": ("semantic", "key_only", "none"),
                    "lookup": ("by_key", "by_incident_slot", "none"),
                    "consistency": ("strong", "eventual")},
    "notification": {"idempotency": ("none", "key_only", "semantic"), "lookup": ("none",),
                     "consistency": ("strong", "eventual")},
    "registry": {"idempotency": ("natural_key",), "lookup": ("by_version",),
                 "consistency": ("strong", "eventual")},
}
APPROVAL_MODES = ("auto", "manual", "none")
COMPENSATION_AUTHORITY = ("granted", "denied")
BOUNDARIES = ("before", "after")

TOP_FIELDS = frozenset({"id", "title", "description", "tags", "card", "seed", "clock", "services",
                        "runs", "events", "faults", "crashes", "pauses", "expect", "env", "worker_clocks"})
RUN_FIELDS = frozenset({"id", "intent", "service", "operation", "start", "deadline", "approval",
                        "compensation_authority", "notify", "history"})
#: ``runs[].history``: where a run that arrives with earlier history stands.
HISTORY_FIELDS = ("checkpoint_version", "lease_epoch")
RULE_FIELDS: Mapping[str, frozenset[str]] = {
    "faults": frozenset({"match", "fault", "code", "delay", "times"}),
    "crashes": frozenset({"match", "boundary", "restart_after", "times"}),
    "pauses": frozenset({"match", "boundary", "resume_after", "restart_after", "times"}),
}
RULE_ACTION = {"faults": "fault", "crashes": "crash", "pauses": "pause"}
#: ``worker_clocks[]``: a real worker's wall clock, off by ``offset`` and running at ``rate`` (integrate only).
WORKER_CLOCK_FIELDS = frozenset({"worker", "run", "offset", "rate"})
#: The rates a worker's clock may run at, relative to real time (0.1: a tenth of real speed).
CLOCK_RATE_RANGE = (0.001, 1000.0)
MATCH_FIELDS = frozenset({"port", "op", "nth", "worker", "run", "from", "until", "knowledge", "state",
                          "appends", "disposition"})
EXPECT_FIELDS = frozenset({"dispositions", "remote_effects", "evidence", "absent", "disposition_at", "violations",
                           "verdict", "rules"})
#: ``expect.rules.<expectation>``: the rubric point a miss costs and the passage that justifies it.
EXPECT_RULE_FIELDS = ("point", "source", "quote")
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,79}$"
TAG_PATTERN = r"^[^\s](?:[^\n]{0,58}[^\s])?$"
INVARIANT_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"

#: Every event kind a trace holds (crashlab.vocab.events, docs/trace.md); ``expect.evidence`` may name any of them.
TRACE_KINDS = frozenset(KIND_NAMES) | EVENT_TYPES
#: ``expect.evidence`` items: what the trace must contain besides the generic invariants.
EVIDENCE_FORMS = {
    "<port>.<op>": "a port call of this operation whose result reached the worker (reservation.lookup)",
    "ledger:<KNOWLEDGE>": "a ledger append moved some key of the run to this knowledge state",
    "checkpoint:<STATE>": "an accepted checkpoint had this control.state",
    "finish:<DISPOSITION>": "an accepted finish with this disposition",
    "<event kind>": "any trace event of this kind (escalation, released, late_arrival, takeover, ...)",
    "<item>|<item>": "expect.evidence only: any one of these items (reservation.lookup|reservation.search, "
                     "where either read is authoritative); an alternative may be <item>&<item> (both of them), an item "
                     "!<item> (it never occurs: a premise, reservation.lookup|!takeover)",
}

#: Seeds are integers from 0 to 2**53 - 1, so that every JSON reader keeps them exact.
SEED_MAX = 2**53 - 1

#: ``at: {after: MATCH, delay: D}`` / ``at: {before: MATCH}``: an event anchored to a port call.
ANCHORS = ("before", "after")
