"""index.html: one self-contained page (no external CSS, JS, fonts or images).

Every string that came from a scenario file, a trace or an adapter goes through
:func:`html.escape`; the page also carries a Content-Security-Policy that forbids scripts,
so a string that slipped through could not run anyway.
"""
from __future__ import annotations

import base64
import json
from html import escape
from typing import Any

from ..conformance import safe_name
from ..results import Scorecard, ScenarioResult
from ..scenario import CARD_FIELDS, format_time
from . import machines, style
from .view import Item, knowledge_steps, packets, run_steps, unresolved

PANELS = ("header", "effects", "authority", "compatibility", "budget", "recommended", "alternatives")
CARD_LABELS = {"known_before_failure": "Known before the failure", "survived": "What survived",
               "recovery_owner": "Who owns recovery", "authoritative_query": "Authoritative query",
               "terminal_state": "Terminal state that follows"}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#212121;margin:0;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0}h2{font-size:19px;margin:0 0 6px}h3{font-size:15px;margin:18px 0 6px}
h4{font-size:13px;margin:0 0 4px;text-transform:uppercase;letter-spacing:.04em;color:#455a64}
section{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:16px 20px;margin:16px 0}
table{border-collapse:collapse;margin:6px 0}td,th{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5;font-weight:600}code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:700;color:#fff;vertical-align:middle}
.pass{background:#2e7d32}.fail{background:#c62828}.unknown{background:#ef6c00}.auto{background:#6a1b9a}
.muted{color:#757575}.warn{color:#b71c1c;font-weight:600}
dl.card{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}dl.card dt{font-weight:600;color:#455a64}dl.card dd{margin:0}
dl.kv{margin:0;display:grid;grid-template-columns:max-content 1fr;gap:1px 10px}dl.kv dt{font-weight:600;color:#546e7a;font-size:12px}dl.kv dd{margin:0}
td.id{white-space:nowrap}
figure{margin:10px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
.packet{display:grid;grid-template-columns:repeat(auto-fill,minmax(280px,1fr));gap:10px;margin:8px 0}
.panel{border:1px solid #e0e0e0;border-radius:5px;padding:8px 10px;background:#fcfcfc;overflow-wrap:anywhere}
.panel.rec{border-color:#1565c0;background:#f3f8fd}.panel.missing{border-style:dashed;color:#9e9e9e}
.machines{display:flex;flex-wrap:wrap;gap:12px}.machines svg{max-width:100%;height:auto;border:1px solid #eee;background:#fff}
ul.ev{margin:2px 0;padding-left:18px}ul.ev li{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
details summary{cursor:pointer;color:#1565c0}a{color:#1565c0}
"""


def e(value: Any) -> str:
    return escape("—" if value is None else str(value), quote=True)


def badge(verdict: str) -> str:
    cls = verdict if verdict in ("pass", "fail", "unknown") else "unknown"
    return f'<span class="badge {cls}">{e(verdict.upper())}</span>'


def anchor(item: Item) -> str:
    return f"s-{item.name}"


# --------------------------------------------------------------------------- values
def value_html(value: Any, depth: int = 0) -> str:
    """Any JSON value from an adapter, as escaped HTML (objects as lists, lists of objects as tables)."""
    if depth > 4:
        return f'<code>{e(json.dumps(value, sort_keys=True, ensure_ascii=False))}</code>'
    if isinstance(value, dict):
        if not value:
            return '<span class="muted">(empty)</span>'
        return '<dl class="kv">' + "".join(f"<dt>{e(k)}</dt><dd>{value_html(v, depth + 1)}</dd>"
                                          for k, v in value.items()) + "</dl>"
    if isinstance(value, list):
        if not value:
            return '<span class="muted">(none)</span>'
        if all(isinstance(v, dict) for v in value):
            cols = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f"<th>{e(c)}</th>" for c in cols)
            rows = "".join("<tr>" + "".join(f"<td>{value_html(v.get(c), depth + 1) if c in v else ''}</td>"
                                            for c in cols) + "</tr>" for v in value)
            return f"<table><tr>{head}</tr>{rows}</table>"
        return "<ul>" + "".join(f"<li>{value_html(v, depth + 1)}</li>" for v in value) + "</ul>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return e(value)


def packet_html(packet: Any) -> str:
    if not isinstance(packet, dict):
        return f'<p class="warn">The packet is not an object: {value_html(packet)}</p>'
    parts = []
    for name in PANELS:
        if name in packet:
            cls = "panel rec" if name == "recommended" else "panel"
            parts.append(f'<div class="{cls}"><h4>{e(name)}</h4>{value_html(packet[name])}</div>')
        else:
            parts.append(f'<div class="panel missing"><h4>{e(name)}</h4>missing from the packet</div>')
    for name, value in packet.items():
        if name not in PANELS:
            parts.append(f'<div class="panel"><h4>{e(name)}</h4>{value_html(value)}</div>')
    return '<div class="packet">' + "".join(parts) + "</div>"


# --------------------------------------------------------------------------- sections
def scorecard_html(card: Scorecard, items: list[Item]) -> str:
    names = {i.result.id: anchor(i) for i in items}
    by_id = {i.result.id: i for i in items}
    rows = "".join(f"<tr><td>{e(name)}</td><td>{c['score']}/{c['max']}</td></tr>"
                   for name, c in card.categories.items())
    out = [f'<section id="score"><h2>Score {card.total}/{card.max} {badge(card.verdict)}</h2>',
           f"<table><tr><th>category</th><th>points</th></tr>{rows}"
           f"<tr><th>total</th><th>{card.total}/{card.max}</th></tr></table>"]
    if card.auto_fail:
        out.append('<p><span class="badge auto">AUTOMATIC FAILURE</span> '
                   + "; ".join(e(a) for a in card.auto_fail) + "</p>")
    if card.lost:
        out.append("<h3>Where points were lost</h3><table><tr><th>category</th><th>point</th>"
                   "<th>scenario</th><th>invariant</th><th>why</th><th>evidence events</th></tr>")
        for p in card.lost:
            scen = (f'<a href="#{e(names[p.scenario])}">{e(p.scenario)}</a>' if p.scenario in names
                    else e(p.scenario))
            item = by_id.get(p.scenario)
            if item is not None and item.events:
                origin = int(item.events[0].get("origin_ms") or 0)
                ev = _evidence(p.events, {x.get("seq"): x for x in item.events}, origin, limit=3)
            else:
                ev = e(", ".join(f"#{int(s)}" for s in p.events)) or '<span class="muted">none</span>'
            out.append(f"<tr><td>{e(p.category)}</td><td>{e(p.point)}</td><td>{scen}</td>"
                       f"<td><code>{e(p.invariant)}</code></td><td>{e(p.message)}{_rule_html(p)}</td>"
                       f"<td>{ev}</td></tr>")
        out.append("</table>")
    else:
        out.append('<p class="muted">No point was lost.</p>')
    for key, value in card.extra.items():
        out.append(f"<details><summary>{e(key)}</summary>{value_html(value)}</details>")
    out.append("</section>")
    return "".join(out)


def index_html(items: list[Item]) -> str:
    rows = []
    for item in items:
        r = item.result
        inv = ", ".join(sorted({v.invariant for v in r.violations}))
        rows.append(f'<tr><td class="id"><a href="#{e(anchor(item))}">{e(r.id)}</a></td><td>{e(r.title)}</td>'
                    f"<td>{badge(r.verdict)}</td><td>{e(r.disposition)}</td>"
                    f"<td><code>{e(inv) if inv else ''}</code></td></tr>")
    return ('<section id="scenarios"><h2>Scenarios</h2><table><tr><th>scenario</th><th>title</th>'
            "<th>verdict</th><th>disposition</th><th>violations</th></tr>" + "".join(rows)
            + "</table></section>")


def _rule_html(p) -> str:
    """An expectation miss's expected and observed outcomes, and the rule that cost the point."""
    from ..results import outcome_text

    out = ""
    if p.expected is not None or p.observed is not None:
        out += f'<br><span class="muted">expected {e(outcome_text(p.expected))}, observed {e(outcome_text(p.observed))}</span>'
    if p.rule:
        out += (f'<br><span class="muted">rule ({e(str(p.rule.get("source")))}): '
                f'&ldquo;{e(str(p.rule.get("quote")))}&rdquo;</span>')
    return out


def _evidence(seqs: tuple[int, ...], by_seq: dict, origin: int, limit: int = 12) -> str:
    if not seqs:
        return '<span class="muted">no events cited</span>'
    items = []
    for s in seqs[:limit]:
        ev = by_seq.get(s)
        items.append(f"<li>{e(style.summarize(ev, origin)) if ev else e(f'#{s} (not in the trace)')}</li>")
    more = f"<li>… {len(seqs) - limit} more</li>" if len(seqs) > limit else ""
    return f'<ul class="ev">{"".join(items)}{more}</ul>'


def violations_html(r: ScenarioResult, by_seq: dict, origin: int) -> str:
    if not r.violations:
        text = "No invariant was violated." if r.verdict == "pass" else "No invariant violation was recorded."
        out = [f'<p class="muted">{text}</p>']
    else:
        out = ["<table><tr><th>#</th><th>invariant</th><th>run</th><th>what happened</th>"
               "<th>evidence events</th></tr>"]
        for i, v in enumerate(r.violations, 1):
            auto = f' <span class="badge auto">automatic failure: {e(v.auto_fail)}</span>' if v.auto_fail else ""
            cat = f'<br><span class="muted">{e(v.category)}</span>' if v.category else ""
            out.append(f"<tr><td>{i}</td><td><code>{e(v.invariant)}</code>{cat}</td><td>{e(v.run)}</td>"
                       f"<td>{e(v.message)}{auto}</td><td>{_evidence(v.events, by_seq, origin)}</td></tr>")
        out.append("</table>")
    if r.notes:
        out.append("<p><b>Notes</b></p><ul>" + "".join(f"<li>{e(n)}</li>" for n in r.notes) + "</ul>")
    violated = {v.invariant for v in r.violations}
    held = [(i, s) for i, s in catalogue() if i not in violated]
    if held:
        out.append(f"<details><summary>{len(held)} invariants not violated</summary><table>"
                   + "".join(f"<tr><td><code>{e(i)}</code></td><td>{e(s)}</td></tr>" for i, s in held)
                   + "</table></details>")
    return "".join(out)


def catalogue() -> list[tuple[str, str]]:
    """(id, statement) of every invariant and expectation the checks know (docs/invariants.md)."""
    from ..checks import EXPECTATIONS, INVARIANTS

    return [(inv.id, inv.statement) for inv in (*INVARIANTS, *EXPECTATIONS)]


def lane_table(item: Item, origin: int) -> str:
    rows = []
    for ev in item.events or ():
        if ev.get("lane") in ("port", "meta") or (ev.get("lane") == "world" and ev.get("kind") == "deliver"):
            continue
        rows.append(f"<tr><td class='mono'>{e(ev.get('seq'))}</td>"
                    f"<td class='mono'>{e(format_time(int(ev.get('t') or 0), origin))}</td>"
                    f"<td>{e(ev.get('lane'))}</td><td class='mono'>{e(style.summarize(ev, origin))}</td></tr>")
    return ("<details><summary>State/event table: every run, remote, knowledge, fault, worker and world "
            f"event ({len(rows)})</summary><table><tr><th>seq</th><th>time</th><th>lane</th><th>event</th></tr>"
            + "".join(rows) + "</table></details>")


def scenario_html(item: Item) -> str:
    r = item.result
    head = (item.events or [{}])[0]
    origin = int(head.get("origin_ms") or 0)
    by_seq = {ev.get("seq"): ev for ev in item.events or ()}
    disp = ", ".join(f"{e(run)}: <b>{e(d or 'no terminal disposition')}</b>" for run, d in r.dispositions.items())
    out = [f'<section class="scenario" id="{e(anchor(item))}">',
           f"<h2>{badge(r.verdict)} {e(r.id)} — {e(r.title)}</h2>",
           f"<p>{disp or '<span class=muted>no run</span>'}<br><span class='muted'>seed {e(r.seed)}"
           + (f" · tags {e(', '.join(r.tags))}" if r.tags else "")
           + (f" · adapter <code>{e(head.get('adapter'))}</code>" if head.get("adapter") else "") + "</span>"
           + (f"<br>repro: <code>{e(r.repro)}</code>" if r.repro else "")
           + (f"<br>trace: <code>{e(r.trace)}</code>" if r.trace else "") + "</p>"]
    card = head.get("card") or {}
    if isinstance(card, dict) and card:
        fields = list(CARD_FIELDS) + [k for k in card if k not in CARD_FIELDS]
        out.append("<h3>Teaching card</h3><dl class='card'>" + "".join(
            f"<dt>{e(CARD_LABELS.get(k, k))}</dt><dd>{e(card[k])}</dd>" for k in fields if k in card) + "</dl>")
    if item.png is not None:
        data = base64.b64encode(item.png).decode("ascii")
        out.append(f'<figure><img alt="three timelines of {e(r.id)}" src="data:image/png;base64,{data}">'
                   f'<figcaption class="muted">Run state, remote effects and knowledge on the scenario '
                   f'clock. Full size: <a href="figures/{e(item.name)}.svg">SVG</a> · '
                   f'<a href="figures/{e(item.name)}.png">PNG</a></figcaption></figure>')
    elif item.events is None:
        out.append('<p class="muted">No trace was saved for this scenario, so there is no timeline.</p>')
    out.append("<h3>Invariants</h3>" + violations_html(r, by_seq, origin))
    escalations = packets(item)
    open_runs = unresolved(item)
    runs = list(dict.fromkeys(open_runs + list(escalations)))
    if runs:
        out.append("<h3>Decision packets</h3>")
    for run in runs:
        evs = escalations.get(run, [])
        status = e(r.dispositions.get(run) or "no terminal disposition")
        if not evs:
            out.append(f'<p class="warn">{e(run)} ({status}) is unresolved and escalated no decision packet.</p>')
            continue
        last = evs[-1]
        what = (f"ticket {e(last.get('ticket'))}" if last.get("kind") == "escalation" else "finish packet")
        out.append(f"<p><b>{e(run)}</b> ({status}): {what} from {e(last.get('worker'))} at "
                   f"{e(format_time(int(last.get('t') or 0), origin))} (event #{e(last.get('seq'))})</p>")
        out.append(packet_html(last.get("packet")))
        if len(evs) > 1:
            out.append(f"<details><summary>{len(evs) - 1} earlier packet(s)</summary>"
                       + "".join(f"<p>#{e(x.get('seq'))} {e(x.get('ticket'))}</p>{packet_html(x.get('packet'))}"
                                 for x in evs[:-1]) + "</details>")
    if item.lanes is not None:
        out.append("<h3>State machines</h3><div class='machines'>")
        for run, steps in run_steps(item).items():
            out.append(machines.svg("run", steps, f"{run}: run states (taken transitions numbered)",
                                    uid=safe_name(f"{item.name}-{run}")))
            odd = machines.unknown_states("run", steps)
            if odd:
                out.append(f"<p class='warn'>States outside the model: {e(', '.join(odd))}</p>")
        ksteps = knowledge_steps(item)
        if ksteps:
            out.append(machines.svg("knowledge", ksteps, "ledger knowledge, all keys (taken transitions counted)",
                                    numbered=False, uid=item.name))
        out.append("</div>")
        out.append(lane_table(item, origin))
    out.append("</section>")
    return "".join(out)


def page(items: list[Item], card: Scorecard | None, *, adapter: str | None, notes: list[str]) -> str:
    counts = {v: sum(1 for i in items if i.result.verdict == v) for v in ("pass", "fail", "unknown")}
    verdict = card.verdict if card is not None else (
        "fail" if counts["fail"] else "unknown" if counts["unknown"] else "pass")
    head = (f"<header><h1>crashlab report {badge(verdict)}</h1><p>"
            + (f"adapter <code>{e(adapter)}</code> · " if adapter else "")
            + (f"seed {e(card.seed)} · " if card is not None and card.seed is not None else "")
            + f"{len(items)} scenarios: {counts['pass']} pass, {counts['fail']} fail, {counts['unknown']} unknown"
            + "</p>" + "".join(f'<p class="muted">{e(n)}</p>' for n in notes) + "</header>")
    body = [head]
    if card is not None:
        body.append(scorecard_html(card, items))
    body.append(index_html(items))
    body.extend(scenario_html(i) for i in items)
    body.append('<p class="muted">How to read this report: docs/reports.md in the crashlab repository.</p>')
    title = f"crashlab report — {adapter}" if adapter else "crashlab report"
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>\n")
