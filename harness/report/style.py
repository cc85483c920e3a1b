"""Colours, glyphs and the one-line event summary shared by the figure, the diagrams and the HTML."""
from __future__ import annotations

from typing import Any, Callable

from ..vocab import event_tables, events
from ..vocab.model import Knowledge, RunState
from ..vocab.timefmt import format_time

_S, _K = RunState, Knowledge
RUN_COLORS: dict[str, str] = {s.value: c for s, c in {
    _S.INTAKE: "#eceff1", _S.VALIDATED: "#dbe7f3", _S.PROPOSED: "#c3d7ec", _S.APPROVED: "#a6c4e4",
    _S.WAITING_HUMAN: "#f4e6a6", _S.WAITING_OPERATOR: "#e9c85a", _S.WAITING_RETRY: "#f7eec4",
    _S.PINNED: "#d9cf9c", _S.EFFECT_PREPARED: "#fde0b8", _S.EFFECT_IN_FLIGHT: "#f9b46b",
    _S.RECONCILING: "#e8893a", _S.EFFECT_CONFIRMED: "#bfe3b4", _S.NOTIFYING: "#9fd494",
    _S.COMPENSATING: "#d6c1e8", _S.MIGRATING: "#a9dbd6", _S.SUCCEEDED: "#43a047",
    _S.FAILED_NO_EFFECT: "#9e9e9e", _S.CANCELLED_NO_EFFECT: "#bdbdbd",
    _S.FAILED_EFFECT_REMAINS: "#d9534f", _S.CANCELLED_EFFECT_REMAINS: "#e57373",
    _S.FAILED_EFFECT_UNKNOWN: "#8d5524", _S.CANCELLED_EFFECT_UNKNOWN: "#b07845",
}.items()}
KNOWLEDGE_COLORS: dict[str, str] = {k.value: c for k, c in {
    _K.PROPOSED: "#c3d7ec", _K.SENT_UNKNOWN: "#f9b46b", _K.CONFIRMED: "#6abf69", _K.REJECTED: "#9e9e9e",
    _K.COMPENSATION_PROPOSED: "#d6c1e8", _K.COMPENSATED: "#9575cd",
}.items()}
KNOWLEDGE_ABBREVIATIONS = {"PROPOSED": "PROP", "SENT_UNKNOWN": "SENT?", "CONFIRMED": "CONF",
                           "REJECTED": "REJ", "COMPENSATION_PROPOSED": "COMP?", "COMPENSATED": "COMP"}
UNKNOWN_COLOR = "#f5f5f5"
CAUSE_COLORS = {"adapter": "#455a64", "proxy_retry": "#d9534f", "duplicate_delivery": "#c2185b",
                "other_actor": "#b0bec5"}
CAUSE_LABELS = {"adapter": "effect (adapter's request)", "proxy_retry": "effect by a proxy retry",
                "duplicate_delivery": "effect by a duplicate delivery", "other_actor": "other actor's effect"}
#: Vertical markers: colour, line style, width, legend label.
MARKERS: dict[str, tuple[str, Any, float, str]] = {
    "deadline": ("#b71c1c", (0, (6, 3)), 2.2, "business deadline"),
    "cancel": ("#000000", "-", 1.6, "cancellation"),
    "deploy": ("#00897b", "-", 1.6, "deployment"),
    "crash": ("#c62828", "-", 1.6, "crash"),
    "adapter_fault": ("#880e4f", "-", 1.4, "adapter fault"),
    "pause": ("#6a1b9a", "--", 1.2, "pause"),
    "resume": ("#6a1b9a", ":", 1.4, "resume"),
    "takeover": ("#37474f", "-.", 1.0, "takeover"),
    "world": ("#78909c", ":", 1.0, "world event"),
    "fault": ("#ef6c00", "--", 0.8, "injected fault"),
}
MARKER_PRIORITY = tuple(MARKERS)   # label placement order: most important first
#: Transport ground truth and service answers on the remote lane: glyph, colour, filled, label.
TRANSPORT_GLYPHS: dict[str, tuple[str, str, bool, str]] = {
    "dropped": ("v", "#757575", True, "request dropped"),
    "response_lost": ("X", "#ef6c00", True, "response lost"),
    "late_arrival": (">", "#6d4c41", True, "late arrival"),
    "late_rejected": ("s", "#6d4c41", False, "late arrival refused"),
    "duplicate_delivery": ("D", "#c2185b", True, "duplicate delivery"),
    "proxy_retry": ("P", "#d9534f", True, "proxy retry"),
    "server_error": ("s", "#e53935", True, "5xx"),
    "replayed": ("o", "#455a64", False, "key replayed"),
    "refused": ("X", "#455a64", True, "refused (mismatch/exists)"),
    "other_actor_rejected": ("x", "#9e9e9e", True, "other actor refused"),
}
#: Glyphs on a worker bar: glyph, colour, filled, legend label.
WORKER_GLYPHS: dict[str, tuple[str, str, bool, str]] = {
    "crash": ("X", "#c62828", True, "worker crashed"),
    "adapter_fault": ("X", "#880e4f", True, "adapter fault"),
    "rejected": ("x", "#c62828", True, "checkpoint write refused"),
    "finish": ("D", "#1b5e20", True, "finish accepted"),
    "finish_stale": ("D", "#9e9e9e", False, "finish refused (stale)"),
    "finish_after_end": ("D", "#6d4c41", False, "finish refused (run already ended)"),
    "escalation": ("^", "#1565c0", True, "escalation (decision packet)"),
    "approval": ("o", "#5c6bc0", False, "approval requested"),
    "replaced": ("s", "#37474f", False, "worker replaced (takeover)"),
    "failpoint": ("v", "#c62828", False, "failpoint armed (crashlab)"),
}
WORKER_COLOR = "#cfd8dc"
LEASE_COLORS = ("#64b5f6", "#1565c0")   # alternate per epoch
VIOLATION_COLOR = "#d50000"


def text_color(hex_color: str) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return "#ffffff" if 0.299 * r + 0.587 * g + 0.114 * b < 140 else "#212121"


def abbreviation(state: str) -> str:
    return KNOWLEDGE_ABBREVIATIONS.get(state) or "".join(w[:1] for w in state.split("_"))


def shorten(text: str, limit: int) -> str:
    """Keep the beginning and the end of a long identifier: ``rsv-run-82…f6f9``."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = max(1, (limit - 1) * 2 // 3)
    return text[:head] + "…" + text[-(limit - 1 - head):]


def clip(text: str, limit: int) -> str:
    """A sentence cut to ``limit`` characters at a word boundary, ``…`` at its end (prose reads
    from the start; identifiers use :func:`shorten`)."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    cut = head.rfind(" ")
    if cut >= limit // 2:
        head = head[:cut]
    return head.rstrip(" ,;:") + "…"


def _args(args: Any, limit: int = 60) -> str:
    """``k=v, k=v`` of a call's arguments or a result's value, nested values as ``{…}``; past
    ``limit`` characters whole items are left out (``… 2 more``), never cut mid-word, except an
    item that alone is longer than the limit (kept by its beginning and end)."""
    if not isinstance(args, dict):
        return ""
    parts = []
    for k in sorted(args):
        v = args[k]
        if v is None:
            continue
        if isinstance(v, (dict, list)):
            v = "{…}" if isinstance(v, dict) else "[…]"
        parts.append(f"{k}={v}")
    shown: list[str] = []
    used = 0
    for i, part in enumerate(parts):
        cost = len(part) + (2 if shown else 0)
        if used + cost > limit and shown:
            return ", ".join(shown) + f", … {len(parts) - i} more"
        shown.append(shorten(part, limit) if not shown and len(part) > limit else part)
        used += cost
    return ", ".join(shown)


def summarize(ev: dict, origin_ms: int) -> str:
    """One line for any trace event: ``#38 10:00:00.074 remote effect R-1 key=… (adapter)``.
    The body is its type's entry in SUMMARIES; an event the vocabulary does not declare is an
    EventError (the trace reader refuses one)."""
    event = event_tables.parse(ev)
    head = f"#{event.seq} {format_time(int(event.t or 0), origin_ms)}"
    who = f" {event.worker}" if event.worker else (f" {event.run}" if event.run else "")
    return f"{head}{who} {SUMMARIES[type(event)](event)}"


#: The body of each event type's one-line summary.
SUMMARIES: dict[type[events.Event], Callable[[Any], str]] = {}


def _summary(*types: type[events.Event]):
    def register(make: Callable[[Any], str]) -> Callable[[Any], str]:
        for t in types:
            SUMMARIES[t] = make
        return make
    return register


@_summary(events.Call)
def _call(e: events.Call) -> str:
    return f"call {e.port}.{e.op}({_args(e.args)})"


@_summary(events.Result)
def _result(e: events.Result) -> str:
    if e.ok:
        body = f"result of #{e.call}: ok {_args(e.value)}"
    else:
        err = e.error or {}
        body = (f"result of #{e.call}: error {err.get('code')}"
                f" ({'definite' if err.get('definite') else 'indefinite'})")
    if e.delivered is False:
        body += " [never delivered: the worker crashed]"
    return body


@_summary(events.Checkpoint)
def _checkpoint(e: events.Checkpoint) -> str:
    return (f"checkpoint v{e.version} {e.state} (state_version {e.state_version}, owner {e.owner}, "
            f"epoch {e.epoch})")


@_summary(events.CheckpointRejected)
def _checkpoint_rejected(e: events.CheckpointRejected) -> str:
    return (f"checkpoint write refused: {e.reason} (expected v{e.expected}, latest v{e.latest}, "
            f"epoch {e.epoch})")


@_summary(events.CancelRecorded)
def _cancel_recorded(e: events.CancelRecorded) -> str:
    return f"cancellation {e.event_id} recorded by the platform as checkpoint v{e.version} (still {e.state})"


@_summary(events.Lease)
def _lease(e: events.Lease) -> str:
    if e.granted_by is not events.ABSENT:      # an integration supervisor's grant: no worker asked for it
        return f"lease epoch {e.epoch} granted by crashlab to {e.owner} (the supervisor's grant: no worker call)"
    return f"lease {e.op} epoch {e.epoch} by {e.owner}"


@_summary(events.Ledger)
def _ledger(e: events.Ledger) -> str:
    return (f"ledger {e.key}: {e.previous or '∅'} → {e.knowledge} "
            f"(epoch {e.epoch}, live {e.live_epoch})")


@_summary(events.Effect)
def _effect(e: events.Effect) -> str:
    return f"{e.service} committed {e.ref}" + (f" key={e.key}" if e.key is not None else "") + f" ({e.cause})"


@_summary(events.Released)
def _released(e: events.Released) -> str:
    return f"{e.service} released {e.ref} by {e.release_ref}"


@_summary(events.Finish)
def _finish(e: events.Finish) -> str:
    return (f"finish {e.disposition} ({'accepted' if e.accepted else 'not accepted'}"
            f"{', stale worker' if e.stale else ''}"
            + (f"; next owner {e.next_owner})" if e.next_owner else "; no next owner)"))


@_summary(events.Escalation)
def _escalation(e: events.Escalation) -> str:
    return f"escalation {e.ticket} with a decision packet"


@_summary(events.Fault)
def _fault(e: events.Fault) -> str:
    return f"injected fault {e.fault}" + (f" ({e.code})" if e.code else "") + f" on call #{e.call}"


@_summary(events.Crash)
def _crash(e: events.Crash) -> str:
    if e.failpoint is not events.ABSENT:
        return (f"crash at failpoint {e.failpoint}: it fired, the worker killed itself {e.boundary} the store write "
                f"(restart after {e.restart_after_ms} ms)")
    return f"crash {e.boundary} the call (restart after {e.restart_after_ms} ms)"


@_summary(events.Failpoint)
def _failpoint(e: events.Failpoint) -> str:
    line = f", rule line {e.rule_line}" if e.rule_line is not None else ""
    return f"failpoint {e.failpoint} armed by crashlab (in the worker's CRASHLAB_FAILPOINT{line})"


@_summary(events.Pause)
def _pause(e: events.Pause) -> str:
    return f"{e.kind} (call #{e.call})"


@_summary(events.Resume)
def _resume(e: events.Resume) -> str:
    if e.by is not events.ABSENT:
        return f"resume (call #{e.call}) after the handover: {e.by} had taken the run over"
    if e.handover == "missed":
        return f"resume (call #{e.call}): the handover was missed (no replacement worked on the run)"
    return f"resume (call #{e.call})"


@_summary(events.Redeploy)
def _redeploy(e: events.Redeploy) -> str:
    env = e.env if isinstance(e.env, dict) else {}
    stopped = f"; stopping {', '.join(map(str, e.stopping))}" if e.stopping else ""
    return (f"redeploy by crashlab: code_version {env.get('code_version')} (--worker-next) for "
            f"{', '.join(map(str, e.runs or [])) or 'no run'}{stopped}")


@_summary(events.Takeover)
def _takeover(e: events.Takeover) -> str:
    return f"takeover of {e.stale}: its lease lapsed while it was paused; the run's next worker starts"


@_summary(events.Deliver)
def _deliver(e: events.Deliver) -> str:
    d = e.event or {}
    return f"inbox delivery {d.get('type')} {d.get('event_id')} (inbox seq {d.get('seq')})"


@_summary(events.ScenarioEvent)
def _scenario_event(e: events.ScenarioEvent) -> str:
    return f"world {e.kind} {_args(e.data)}".rstrip()


@_summary(events.ApprovalGranted)
def _approval_granted(e: events.ApprovalGranted) -> str:
    return f"world {e.kind}"


@_summary(events.AdapterFault)
def _adapter_fault(e: events.AdapterFault) -> str:
    return f"adapter fault {e.fault}: {e.message}"


@_summary(events.Replayed, events.Refused, events.Dropped, events.ResponseLost, events.LateArrival,
          events.LateRejected, events.DuplicateDelivery, events.ProxyRetry, events.ServerError)
def _remote(e: events.Event) -> str:
    return f"{e.service} {e.kind}" + (f" (call #{e.call})" if e.call is not None else "")  # type: ignore[attr-defined]


@_summary(events.OtherActorRejected)
def _other_actor_rejected(e: events.OtherActorRejected) -> str:
    return f"{e.kind} ({e.code})"


@_summary(events.Stop)
def _stop(e: events.Stop) -> str:
    return "worker stop" + (f" ({e.reason})" if e.reason and e.reason != "finished" else "")


@_summary(events.Start)
def _start(e: events.Start) -> str:
    clock = e.clock if isinstance(e.clock, dict) else None
    return "worker start" + (f" (its wall clock skewed: FAKETIME '{clock.get('faketime')}')" if clock else "")


@_summary(events.Header, events.End, events.LedgerRejected, events.ApprovalRequested,
          events.RestartBudgetExhausted)
def _plain(e: events.Event) -> str:
    return f"{e.lane} {e.kind}"


event_tables.dispatch(SUMMARIES, name="crashlab.report.style.SUMMARIES")
