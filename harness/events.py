"""The trace vocabulary: every event kind crashlab writes, its lane, its fields and its meaning.

Everything a trace can hold is declared here, once (in the manner of h11's ``_events.py``):
the world and the runner emit only these kinds, ``Trace.emit`` refuses an event that does not
match its declaration (a crashlab bug, caught where it is made, never written), the scenario
format's evidence vocabulary is derived from it, and docs/trace.md's table of kinds is
generated from it (``python tools/docgen.py``). Scenario events (``cancel``, ``deploy``, ...)
are written on the ``world`` lane under their own type with ``data`` and ``line``.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The lanes of a trace: the three timelines of AR-08 (run, remote, knowledge) and the rest.
LANES = ("meta", "run", "remote", "knowledge", "fault", "worker", "port", "world")


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One event kind: its lane, the fields every event of it carries, and what it means."""

    name: str
    lane: str
    fields: tuple[str, ...]
    meaning: str
    optional: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.lane not in LANES:
            raise ValueError(f"event kind {self.name!r}: unknown lane {self.lane!r}")


def _k(name: str, lane: str, fields: str, meaning: str, optional: str = "") -> Kind:
    return Kind(name=name, lane=lane, fields=tuple(fields.split()), meaning=meaning,
                optional=tuple(optional.split()))


KINDS: tuple[Kind, ...] = (
    # meta
    _k("header", "meta", "format scenario title seed adapter harness origin_ms horizon_ms env services runs source "
       "card tags expect", "the first event: the scenario, seed, adapter, service profiles, runs and expectations"),
    _k("end", "meta", "runs", "the last event: per run its final disposition (or null), waiting state and "
       "worker count"),
    # port
    _k("call", "port", "port op args nth", "the adapter called a port (nth: the ordinal of this port.op in the run)"),
    _k("result", "port", "call ok value error delivered", "the answer to a call (`call`: the call's seq); `error` "
       "is {code, definite, message, details}; delivered is false when the worker crashed before seeing it"),
    # run: the local run-state timeline
    _k("lease", "run", "op epoch owner expires_at call", "a lease was acquired or renewed"),
    _k("checkpoint", "run", "version state owner epoch state_version checkpoint call",
       "a checkpoint write was accepted (the whole record, its store version and state)"),
    _k("checkpoint_rejected", "run", "reason expected latest epoch call",
       "a checkpoint write was refused: version_conflict or stale_epoch"),
    _k("ledger_rejected", "run", "reason epoch current_epoch key call",
       "a ledger append was refused because its lease epoch is not the current one (fenced)"),
    _k("approval_requested", "run", "request_id proposal_hash action call", "the adapter asked for an approval",
       optional="at"),
    _k("escalation", "run", "ticket packet call", "the adapter escalated a decision packet to the operator"),
    _k("finish", "run", "disposition effects next_owner reason packet accepted stale call",
       "the adapter finished the run (or reached a durable waiting state)"),
    # knowledge: what the ledger asserts
    _k("ledger", "knowledge", "index key knowledge previous epoch live_epoch entry call",
       "an effect-ledger entry was appended: the key's knowledge moved from previous to knowledge"),
    # remote: ground truth
    _k("effect", "remote", "service op ref key intent fingerprint cause call",
       "a service committed an effect (cause: adapter, proxy_retry, duplicate_delivery or other_actor)"),
    _k("replayed", "remote", "service key ref call", "a repeated key was answered with the original record"),
    _k("refused", "remote", "service key call", "a service refused an effect (intent_mismatch, already_exists, ...)",
       optional="reason ref code"),
    _k("released", "remote", "service ref release_ref key call", "a compensation (release) took effect",
       optional="cause"),
    _k("dropped", "remote", "service op call", "the request was dropped before the service: no effect"),
    _k("response_lost", "remote", "service op call", "the effect committed, then its response was lost"),
    _k("late_arrival", "remote", "service op call delay_ms", "a timed-out request is still on its way and will land"),
    _k("late_rejected", "remote", "service call code", "a late request landed and the service refused it"),
    _k("duplicate_delivery", "remote", "service op call", "the transport delivered the request a second time"),
    _k("proxy_retry", "remote", "service op call", "a proxy retried the request on its own", optional="attempt"),
    _k("server_error", "remote", "service op call committed", "a 5xx answer, before or after the commit"),
    _k("other_actor_rejected", "remote", "code", "another actor's background request was refused"),
    # fault
    _k("fault", "fault", "call fault code rule_line", "an injected transport or store fault"),
    _k("crash", "fault", "boundary restart_after_ms rule_line", "a worker crashed (before or after a call)"),
    _k("pause", "fault", "call boundary resume_after_ms rule_line", "a worker paused: it may become a zombie"),
    _k("resume", "fault", "call", "a paused worker resumed with its stale view"),
    # worker
    _k("start", "worker", "number env", "a worker started (env: the versions its code runs)"),
    _k("stop", "worker", "reason", "a worker ended after its finish"),
    _k("takeover", "worker", "stale", "a replacement worker starts because the paused one's lease expired"),
    _k("adapter_fault", "worker", "fault message", "the adapter misbehaved and the worker was stopped; `fault` is "
       "exception, base_exception, not_a_port, not_json, thread, forked, step_budget, step_timeout, garbage, "
       "flood, line_too_long, no_reply, not_reading, closed_stdout, died, no_finish, unhandled_port_error, "
       "invalid_checkpoint or invalid_effect_entry (docs/protocol.md, Limits)", optional="call"),
    _k("restart_budget_exhausted", "worker", "workers", "the run used up its workers"),
    # world
    _k("deliver", "world", "event", "an input event reached the run's inbox (seq, event_id, type, producer, payload)"),
    _k("approval_granted", "world", "approval_id proposal_hash action expires_at capability_version",
       "an approval was granted, bound to a proposal hash"),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
#: A scenario event written on the world lane under its own type (cancel, deploy, revoke, ...).
SCENARIO_EVENT_FIELDS = ("data", "line")
_REQUIRED = {k.name: (k.lane, frozenset(k.fields)) for k in KINDS}


def problem(lane: str, kind: str, fields) -> str | None:
    """Why an event does not match the vocabulary, or None when it does."""
    declared = _REQUIRED.get(kind)
    if declared is None:
        if lane == "world" and "data" in fields and "line" in fields:
            return None
        return f"unknown event kind {kind!r} on lane {lane!r}"
    if declared[0] != lane:
        return f"event kind {kind!r} belongs on lane {declared[0]!r}, not {lane!r}"
    missing = declared[1].difference(fields)
    if missing:
        return f"event kind {kind!r} lacks {', '.join(sorted(missing))}"
    return None


def kinds_markdown() -> str:
    """docs/trace.md's table of kinds."""
    rows = ["| lane | kind | fields | meaning |", "|---|---|---|---|"]
    for k in KINDS:
        fields = ", ".join(f"`{f}`" for f in k.fields) + (
            " (sometimes " + ", ".join(f"`{f}`" for f in k.optional) + ")" if k.optional else "")
        rows.append(f"| {k.lane} | `{k.name}` | {fields} | {k.meaning} |")
    rows.append("| world | a scenario event type (`cancel`, `deploy`, `revoke`, `capability_change`, `approve`, "
                "`callback`, `operator_answer`, `retry`, `other_actor`, ...) | `data`, `line` | the scenario's "
                "event took place (line: its line in the scenario file) |")
    return "\n".join(rows) + "\n"
