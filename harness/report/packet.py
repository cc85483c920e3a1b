"""The decision packet, laid out for a tired operator (AR-08 "Operate the recovery system").

The packet is whatever the adapter escalated (free-form JSON). This module humanizes it
without changing a fact: the recommended action and its alternatives first, then one card
per effect, then the authority, compatibility and budget panels, then anything else.
Simulated times become clock times (``10:04``), an expiry far beyond any horizon becomes
"never", and repeated observations collapse (``unavailable ×20, 10:04:00–10:14:00``).

It also writes the chapter's three communications ("Communicate unresolved effects"): one
for the user, one for the operator and one for the service owner - the same facts at three
altitudes, with no secrets (fields whose names suggest a credential are never shown).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from typing import Any

from ..timefmt import format_time

PANELS = ("header", "effects", "authority", "compatibility", "budget", "recommended", "alternatives")
#: An expiry at or beyond this many ms (about 146 million years) means "never".
NEVER_MS = 2 ** 62
TIME_FIELDS = re.compile(r"(^|_)(at|deadline|expires_at|until|since|wake_at|time)$")
DURATION_FIELDS = re.compile(r"_ms$")
SECRET_FIELDS = re.compile(r"secret|token|password|passwd|credential|api_?key|private", re.I)
OBSERVATION = re.compile(r"^(?P<what>.*?)\s+at\s+(?P<t>-?\d+)$")


def e(value: Any) -> str:
    return escape("—" if value is None else str(value), quote=True)


# --------------------------------------------------------------------------- values
def clock(t: Any, origin: int) -> str:
    """A simulated time as a clock time; "never" for an expiry that never comes."""
    if isinstance(t, bool) or not isinstance(t, int):
        return str(t)
    if t >= NEVER_MS:
        return "never"
    return format_time(t, origin)


def duration(ms: Any) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int):
        return str(ms)
    if ms >= NEVER_MS:
        return "unbounded"
    if ms % 60_000 == 0 and ms:
        return f"{ms // 60_000} min"
    if ms >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms} ms"


def collapse(lines: list[Any], origin: int) -> list[str]:
    """Consecutive observations that differ only in their time become one line:
    ``lookup(key) -> unavailable ×27, 10:04:00.354–10:15:00.090``."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush():
        if not run:
            return
        what, first = run[0]
        if len(run) == 1:
            out.append(f"{what} at {clock(first, origin)}")
        else:
            out.append(f"{what} ×{len(run)}, {clock(first, origin)}–{clock(run[-1][1], origin)}")
        run.clear()

    for line in lines:
        m = OBSERVATION.match(line) if isinstance(line, str) else None
        if m is None:
            flush()
            out.append(line if isinstance(line, str) else _inline(line, origin))
            continue
        what = m["what"].rstrip(":")
        if run and run[0][0] != what:
            flush()
        run.append((what, int(m["t"])))
    flush()
    return out


def _inline(value: Any, origin: int, key: str = "") -> str:
    """A compact one-line rendering of a JSON value, times as clock times."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_inline(v, origin, k)}" for k, v in value.items()
                         if not SECRET_FIELDS.search(str(k)) and v is not None)
    if isinstance(value, list):
        return "; ".join(_inline(v, origin) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and TIME_FIELDS.search(key):
        return clock(value, origin)
    if isinstance(value, int) and DURATION_FIELDS.search(key):
        return duration(value)
    return str(value)


def value_html(value: Any, origin: int, key: str = "", depth: int = 0) -> str:
    """Any JSON value from a packet as escaped HTML: objects as definition lists, lists of
    observations collapsed, times as clock times."""
    if isinstance(value, dict):
        if not value:
            return '<span class="muted">(empty)</span>'
        if depth >= 1:
            return e(_inline(value, origin))
        rows = "".join(f"<dt>{e(k)}</dt><dd>{value_html(v, origin, str(k), depth + 1)}</dd>"
                       for k, v in value.items() if not SECRET_FIELDS.search(str(k)))
        return f'<dl class="kv">{rows}</dl>'
    if isinstance(value, list):
        if not value:
            return '<span class="muted">(none)</span>'
        if all(isinstance(v, str) for v in value):
            return "<ul>" + "".join(f"<li>{e(x)}</li>" for x in collapse(value, origin)) + "</ul>"
        return "<ul>" + "".join(f"<li>{value_html(v, origin, key, depth + 1)}</li>" for v in value) + "</ul>"
    return e(_inline(value, origin, key))


# --------------------------------------------------------------------------- cards
def _action(value: Any, origin: int) -> str:
    if isinstance(value, dict):
        action = value.get("action")
        rest = {k: v for k, v in value.items() if k != "action"}
        head = f"<b>{e(action)}</b>" if action else ""
        return head + (f" <span class='muted'>{e(_inline(rest, origin))}</span>" if rest else "")
    return e(_inline(value, origin))


def effect_card(effect: Any, origin: int) -> str:
    if not isinstance(effect, dict):
        return f'<div class="card effect">{value_html(effect, origin)}</div>'
    knowledge = effect.get("knowledge")
    title = " · ".join(str(x) for x in (effect.get("service"), effect.get("kind") or effect.get("role"),
                                        knowledge) if x)
    key = effect.get("semantic_key") or effect.get("key")
    shown = {"semantic_key", "key", "service", "knowledge"}
    rows = []
    if key:
        rows.append(f"<dt>key</dt><dd><code>{e(key)}</code></dd>")
    for k, v in effect.items():
        if k in shown or SECRET_FIELDS.search(str(k)) or v is None or v == []:
            continue
        rows.append(f"<dt>{e(k)}</dt><dd>{value_html(v, origin, str(k), 1)}</dd>")
    cls = "card effect " + ("k-unknown" if knowledge == "SENT_UNKNOWN" else "")
    return (f'<div class="{cls.strip()}"><h4>{e(title or "effect")}</h4>'
            f'<dl class="kv">{"".join(rows)}</dl></div>')


def without_adapter(value: Any) -> Any:
    """The packet with every field named ``adapter`` removed (a report that hides answers)."""
    if isinstance(value, dict):
        return {k: without_adapter(v) for k, v in value.items() if k != "adapter"}
    if isinstance(value, list):
        return [without_adapter(v) for v in value]
    return value


def packet_html(packet: Any, origin: int, *, no_answers: bool = False) -> str:
    """The packet: recommended action and alternatives first, one card per effect, then the
    other panels; a panel the packet lacks is shown as missing. ``no_answers`` drops the
    fields that name the adapter."""
    if no_answers:
        packet = without_adapter(packet)
    if not isinstance(packet, dict):
        return f'<p class="warn">The packet is not an object: {value_html(packet, origin)}</p>'
    out = ['<div class="decide">']
    if "recommended" in packet:
        out.append(f'<div class="card rec"><h4>Recommended</h4>{_action(packet["recommended"], origin)}</div>')
    else:
        out.append('<div class="card missing"><h4>Recommended</h4>missing from the packet</div>')
    alts = packet.get("alternatives")
    if isinstance(alts, list) and alts:
        out.append('<div class="card"><h4>Alternatives</h4><ul>'
                   + "".join(f"<li>{_action(a, origin)}</li>" for a in alts) + "</ul></div>")
    elif "alternatives" not in packet:
        out.append('<div class="card missing"><h4>Alternatives</h4>missing from the packet</div>')
    out.append("</div>")
    if "header" in packet:
        out.append(f'<div class="card"><h4>Header</h4>{value_html(packet["header"], origin, "header")}</div>')
    else:
        out.append('<div class="card missing"><h4>Header</h4>missing from the packet</div>')
    effects = packet.get("effects")
    if isinstance(effects, list):
        out.append(f"<h4 class='sub'>Effects ({len(effects)})</h4><div class='cards'>"
                   + ("".join(effect_card(x, origin) for x in effects) or '<p class="muted">none</p>')
                   + "</div>")
    elif "effects" in packet:
        out.append(f'<div class="card"><h4>Effects</h4>{value_html(effects, origin)}</div>')
    else:
        out.append('<div class="card missing"><h4>Effects</h4>missing from the packet</div>')
    out.append("<div class='cards'>")
    for name in ("authority", "compatibility", "budget"):
        if name in packet:
            out.append(f'<div class="card"><h4>{e(name)}</h4>{value_html(packet[name], origin, name)}</div>')
        else:
            out.append(f'<div class="card missing"><h4>{e(name)}</h4>missing from the packet</div>')
    for name, value in packet.items():
        if name not in PANELS and not SECRET_FIELDS.search(str(name)):
            out.append(f'<div class="card"><h4>{e(name)}</h4>{value_html(value, origin, str(name))}</div>')
    out.append("</div>")
    return "".join(out)


# --------------------------------------------------------------------------- communications
@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What every audience is told, read from the packet and the trace."""

    run: str
    disposition: str
    goal: str
    consequence: str
    effects: tuple[tuple[str, str, str | None], ...]   # (key, knowledge, remote ref)
    next_owner: str
    action: str
    cancellation: str | None
    reconciliation: tuple[str, ...]
    sends: tuple[str, ...]          # the adapter's effect requests, with time and outcome
    adapter_version: str | None
    inconsistency: str | None


def facts(run: str, disposition: str | None, packet: Any, events: list[dict], origin: int, *,
          no_answers: bool = False) -> Facts:
    p = packet if isinstance(packet, dict) else {}
    if no_answers:
        p = without_adapter(p)
    head = p.get("header") if isinstance(p.get("header"), dict) else {}
    effects, recon = [], []
    for x in p.get("effects") or ():
        if isinstance(x, dict):
            effects.append((str(x.get("semantic_key") or x.get("key") or "?"), str(x.get("knowledge") or "?"),
                            x.get("remote_ref")))
            recon += [r for r in x.get("reconciliation") or () if isinstance(r, str)]
    rec = p.get("recommended")
    action = _inline(rec, origin) if rec is not None else "not named in the packet"
    cancel = head.get("cancellation")
    cancelled = None
    if isinstance(cancel, dict) and cancel.get("requested"):
        cancelled = f"cancellation requested at {clock(cancel.get('at'), origin)}"
    sends, truth = [], []
    calls = {ev["seq"]: ev for ev in events if ev.get("kind") == "call" and ev.get("run") == run}
    services = {str(s) for s in (events[0].get("services") or {})} if events else set()
    for ev in events:
        if ev.get("kind") == "result" and ev.get("run") == run:
            call = calls.get(ev.get("call"))
            if call is None or call.get("port") not in services:
                continue
            if call.get("op") in ("describe",):
                continue
            err = ev.get("error") or {}
            outcome = "ok" if ev.get("ok") else f"{err.get('code')} ({'definite' if err.get('definite') else 'indefinite'})"
            sends.append(f"{call.get('port')}.{call.get('op')} → {outcome} at {int(call.get('t') or 0)}")
        elif ev.get("lane") == "remote" and ev.get("kind") == "effect" and ev.get("run") == run:
            truth.append(ev)
    known = [k for _, k, _ in effects]
    inconsistency = None
    if truth and any(k in ("SENT_UNKNOWN", "PROPOSED") for k in known):
        inconsistency = (f"the service holds {len(truth)} record(s) for this run ("
                         + ", ".join(str(t.get("ref")) for t in truth)
                         + ") that the run's ledger does not know as confirmed")
    elif not truth and "CONFIRMED" in known:
        inconsistency = "the ledger says CONFIRMED but the service holds no record for this run"
    return Facts(run=run, disposition=disposition or str(head.get("state") or "no terminal disposition"),
                 goal=str(head.get("goal") or "the requested action"),
                 consequence=str(head.get("consequence") or "the requested action"),
                 effects=tuple(effects), next_owner=str(p.get("next_owner") or "not named"),
                 action=action, cancellation=cancelled, reconciliation=tuple(collapse(recon, origin)),
                 sends=tuple(collapse(sends, origin)[-12:]),
                 adapter_version=(p.get("compatibility") or {}).get("adapter")
                 if isinstance(p.get("compatibility"), dict) else None,
                 inconsistency=inconsistency)


def _user_line(f: Facts) -> str:
    states = {k for _, k, _ in f.effects}
    if "SENT_UNKNOWN" in states or "EFFECT_UNKNOWN" in f.disposition:
        what = (f"The confirmation for your {f.consequence} was lost, so we do not yet know whether it "
                f"happened. We are not trying again on our own, to avoid doing it twice.")
    elif "EFFECT_REMAINS" in f.disposition:
        what = f"Your {f.consequence} was made and is still in place; undoing it did not complete."
    elif "CONFIRMED" in states:
        what = f"Your {f.consequence} is in place."
    else:
        what = f"Your {f.consequence} was not completed."
    if f.cancellation:
        what += " We received your cancellation."
    return (f"{what} {f.next_owner.capitalize()} now owns the check. Please do not place the request "
            f"again yourself; we will tell you the outcome.")


def communications(f: Facts) -> dict[str, list[str]]:
    """The three messages (user, operator, service owner): same facts, three altitudes."""
    effects = [f"{k}: {state}" + (f" (ref {ref})" if ref else "") for k, state, ref in f.effects]
    operator = [f"Run {f.run}: {f.disposition}. Goal: {f.goal}.",
                "Effects: " + ("; ".join(effects) or "none recorded") + ".",
                *([f.cancellation.capitalize() + "."] if f.cancellation else []),
                *(["Reconciliation: " + "; ".join(f.reconciliation) + "."] if f.reconciliation else []),
                f"Next safe action: {f.action}. Next owner: {f.next_owner}."]
    owner = [f"Run {f.run}, keys: " + (", ".join(k for k, _, _ in f.effects) or "none") + ".",
             *(["Requests (outcome, when sent): " + "; ".join(f.sends) + "."] if f.sends else []),
             *([f"Adapter version: {f.adapter_version}."] if f.adapter_version else []),
             *([f"Observed inconsistency: {f.inconsistency}."] if f.inconsistency else []),
             f"Asked of you: confirm the record for these keys by the authoritative query ({f.action})."]
    return {"user": [_user_line(f)], "operator": operator, "service owner": owner}


def communications_html(f: Facts) -> str:
    parts = []
    for who, lines in communications(f).items():
        parts.append(f'<div class="card comm"><h4>To the {e(who)}</h4>'
                     + "".join(f"<p>{e(line)}</p>" for line in lines) + "</div>")
    return "<h4 class='sub'>Communications</h4><div class='cards'>" + "".join(parts) + "</div>"
