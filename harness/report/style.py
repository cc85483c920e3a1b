"""Colours, glyphs and the one-line event summary shared by the figure, the diagrams and the HTML."""
from __future__ import annotations

from typing import Any

from ..model import Knowledge, RunState
from ..scenario import format_time

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
    "escalation": ("^", "#1565c0", True, "escalation (decision packet)"),
    "approval": ("o", "#5c6bc0", False, "approval requested"),
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


def _args(args: Any, limit: int = 60) -> str:
    if not isinstance(args, dict):
        return ""
    parts = []
    for k in sorted(args):
        v = args[k]
        if isinstance(v, (dict, list)):
            v = "{…}" if isinstance(v, dict) else "[…]"
        parts.append(f"{k}={v}")
    return shorten(", ".join(parts), limit)


def summarize(ev: dict, origin_ms: int) -> str:
    """One line for any trace event: ``#38 10:00:00.074 remote effect R-1 key=… (adapter)``."""
    kind, lane = ev.get("kind"), ev.get("lane")
    head = f"#{ev.get('seq')} {format_time(int(ev.get('t') or 0), origin_ms)}"
    who = f" {ev['worker']}" if ev.get("worker") else (f" {ev['run']}" if ev.get("run") else "")
    if lane == "port" and kind == "call":
        body = f"call {ev.get('port')}.{ev.get('op')}({_args(ev.get('args'))})"
    elif lane == "port" and kind == "result":
        if ev.get("ok"):
            body = f"result of #{ev.get('call')}: ok {_args(ev.get('value'))}"
        else:
            err = ev.get("error") or {}
            body = (f"result of #{ev.get('call')}: error {err.get('code')}"
                    f" ({'definite' if err.get('definite') else 'indefinite'})")
        if ev.get("delivered") is False:
            body += " [never delivered: the worker crashed]"
    elif kind == "checkpoint":
        body = (f"checkpoint v{ev.get('version')} {ev.get('state')} (state_version "
                f"{ev.get('state_version')}, owner {ev.get('owner')}, epoch {ev.get('epoch')})")
    elif kind == "checkpoint_rejected":
        body = (f"checkpoint write refused: {ev.get('reason')} (expected v{ev.get('expected')}, "
                f"latest v{ev.get('latest')}, epoch {ev.get('epoch')})")
    elif kind == "lease":
        body = f"lease {ev.get('op')} epoch {ev.get('epoch')} by {ev.get('owner')}"
    elif kind == "ledger":
        body = (f"ledger {ev.get('key')}: {ev.get('previous') or '∅'} → {ev.get('knowledge')} "
                f"(epoch {ev.get('epoch')}, live {ev.get('live_epoch')})")
    elif kind == "effect":
        body = (f"{ev.get('service')} committed {ev.get('ref')} key={ev.get('key')} "
                f"({ev.get('cause')})")
    elif kind == "released":
        body = f"{ev.get('service')} released {ev.get('ref')} by {ev.get('release_ref')}"
    elif kind == "finish":
        body = (f"finish {ev.get('disposition')} ({'accepted' if ev.get('accepted') else 'not accepted'}"
                f"{', stale worker' if ev.get('stale') else ''}; next owner {ev.get('next_owner')})")
    elif kind == "escalation":
        body = f"escalation {ev.get('ticket')} with a decision packet"
    elif kind == "fault":
        body = f"injected fault {ev.get('fault')}" + (f" ({ev['code']})" if ev.get("code") else "") \
            + f" on call #{ev.get('call')}"
    elif kind == "crash":
        body = f"crash {ev.get('boundary')} the call (restart after {ev.get('restart_after_ms')} ms)"
    elif kind in ("pause", "resume"):
        body = f"{kind} (call #{ev.get('call')})"
    elif kind == "deliver":
        e = ev.get("event") or {}
        body = f"inbox delivery {e.get('type')} {e.get('event_id')} (inbox seq {e.get('seq')})"
    elif lane == "world":
        body = f"world {kind} {_args(ev.get('data'))}".rstrip()
    elif kind == "adapter_fault":
        body = f"adapter fault {ev.get('fault')}: {ev.get('message')}"
    elif lane == "remote":
        body = f"{ev.get('service', '')} {kind}" + (f" (call #{ev['call']})" if ev.get("call") is not None else "")
    else:
        body = f"{lane} {kind}"
    return f"{head}{who} {body}"
