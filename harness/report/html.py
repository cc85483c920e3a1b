"""The HTML report: an index page and one page per scenario (docs/reports.md).

No page has a script or an external resource (CSS inline, figures embedded as base64 PNG,
state machines as inline SVG) and each carries a Content-Security-Policy that forbids
scripts. Every string that came from a scenario file, a trace or an adapter goes through
:func:`html.escape`. The layout holds from 420 px to wide screens: long identifiers wrap,
wide tables scroll inside their own box, never the page.
"""

from __future__ import annotations

import base64
import json
from html import escape
from typing import Any

from ..checks.expectations import evidence_words
from ..run.conformance import safe_name
from ..vocab.results import ScenarioResult
from ..scenario.format import CARD_FIELDS
from ..vocab.timefmt import format_time
from . import machines, packet as packets_view, style
from ..checks.exercised import severity
from .view import Item, knowledge_steps, packets, repro, run_steps, unresolved

CARD_LABELS = {"known_before_failure": "Known before the failure", "survived": "What survived",
               "recovery_owner": "Who owns recovery", "authoritative_query": "Authoritative query",
               "terminal_state": "Terminal state that follows"}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#212121;margin:0;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:12px 20px 48px}
h1{font-size:23px;margin:8px 0}h2{font-size:18px;margin:0 0 6px}h3{font-size:15px;margin:18px 0 6px}
h4{font-size:12.5px;margin:0 0 4px;text-transform:uppercase;letter-spacing:.04em;color:#455a64}
h4.sub{margin:12px 0 4px}
section{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:14px 18px;margin:14px 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:6px 0}td,th{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5;font-weight:600}code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
code,td,dd,li,p{overflow-wrap:anywhere}
pre.repro{background:#263238;color:#eceff1;padding:8px 10px;border-radius:5px;white-space:pre-wrap;
overflow-wrap:anywhere;margin:6px 0}pre.repro code{user-select:all;color:inherit}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:700;color:#fff;vertical-align:middle}
.pass{background:#2e7d32}.fail{background:#c62828}.unknown{background:#ef6c00}.auto{background:#6a1b9a}
.differs{background:#f9a825;color:#212121}.idle{color:#757575}
.muted{color:#757575}.warn{color:#b71c1c;font-weight:600}
nav{font-size:13px;margin:4px 0}nav a{margin-right:10px}
dl.card,dl.kv{display:grid;grid-template-columns:minmax(0,max-content) minmax(0,1fr);gap:2px 12px;margin:4px 0}
dl.card dt,dl.kv dt{font-weight:600;color:#455a64}dl.kv dt{font-size:12px}dl.card dd,dl.kv dd{margin:0;min-width:0}
.eo{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:8px;margin:6px 0}
.eo>div{border-left:4px solid #90a4ae;padding:4px 10px;background:#fcfcfc}.eo>.obs{border-color:#2e7d32}.eo>.obs.bad{border-color:#c62828}
blockquote{margin:4px 0;padding:2px 10px;border-left:3px solid #b0bec5;color:#37474f;font-style:italic}
.finding{border:1px solid #e0e0e0;border-radius:5px;padding:8px 12px;margin:8px 0;background:#fff}
.finding h3{margin:0 0 4px}
figure{margin:10px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
body.slides{font-size:18px}body.slides main{max-width:none}body.slides figure.slide img{width:100%}
body.slides figcaption{font-size:15px}
.decide,.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px;margin:8px 0}
.card{border:1px solid #e0e0e0;border-radius:5px;padding:8px 10px;background:#fcfcfc;min-width:0}
.card.rec{border:2px solid #1565c0;background:#f3f8fd}.card.missing{border-style:dashed;color:#9e9e9e}
.card.k-unknown{border-left:4px solid #ef6c00}.card.comm p{margin:2px 0}
.card ul{margin:2px 0;padding-left:18px}
.machines{display:flex;flex-wrap:wrap;gap:12px}.machines svg{max-width:100%;height:auto;border:1px solid #eee;background:#fff}
ul.ev{margin:2px 0;padding-left:18px}ul.ev li{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
details summary{cursor:pointer;color:#1565c0}a{color:#1565c0}.ph{display:none}
@media (max-width:600px){main{padding:8px 8px 32px}section{padding:10px 10px}td,th{padding:3px 5px}
dl.card,dl.kv{grid-template-columns:minmax(0,1fr)}dl.card dd,dl.kv dd{margin-left:8px}h1{font-size:20px}
table.collapse,table.collapse tbody,table.collapse tr,table.collapse td{display:block;width:100%}
table.collapse tr:first-child{display:none}table.collapse tr{border-bottom:1px solid #ddd;padding:4px 0}
table.collapse td{border:0;padding:1px 4px}.ph{display:inline;color:#666}}
"""


def e(value: Any) -> str:
    return escape("—" if value is None else str(value), quote=True)


BADGE_TITLES = {"fail": "an invariant was violated", "differs": "no invariant violated; the outcome differs "
                "from the scenario's expectation", "unknown": "could not be judged", "pass": "passed"}


def badge(verdict: str) -> str:
    """PASS (green), FAIL (red: an invariant was violated), DIFFERS (amber: only the scenario's
    own expectations were missed) or UNKNOWN (orange)."""
    cls = verdict if verdict in BADGE_TITLES else "unknown"
    return f'<span class="badge {cls}" title="{e(BADGE_TITLES.get(cls, ""))}">{e(verdict.upper())}</span>'


def category_words(name: str | None) -> str:
    """A rubric category as words (``effect correctness``): a narrow column wraps it between
    words, never inside ``effect_correctness``."""
    return (name or "").replace("_", " ")


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


def _evidence(seqs: tuple[int, ...], by_seq: dict, origin: int, limit: int = 12) -> str:
    """The cited events, each linked to its row in the page's event table."""
    if not seqs:
        return '<span class="muted">no events cited</span>'
    items = []
    for s in seqs[:limit]:
        ev = by_seq.get(s)
        items.append(f'<li><a href="#e-{e(s)}">{e(style.summarize(ev, origin))}</a></li>' if ev
                     else f"<li>{e(f'#{s} (not in the trace)')}</li>")
    more = f"<li>… {len(seqs) - limit} more</li>" if len(seqs) > limit else ""
    return f'<ul class="ev">{"".join(items)}{more}</ul>'


def violations_html(r: ScenarioResult, by_seq: dict, origin: int, events: list[dict] | None = None,
                    cov=None) -> str:
    if not r.violations:
        text = "No invariant was violated." if r.verdict == "pass" else "No invariant violation was recorded."
        out = [f'<p class="muted">{text}</p>']
    else:
        out = ['<div class="scroll"><table class="collapse"><tr><th>#</th><th>invariant</th><th>run</th>'
               "<th>what happened</th><th>evidence events</th></tr>"]
        for i, v in enumerate(r.violations, 1):
            auto = f' <span class="badge auto">automatic failure: {e(v.auto_fail)}</span>' if v.auto_fail else ""
            cat = f'<br><span class="muted">{e(category_words(v.category))}</span>' if v.category else ""
            out.append(f"<tr><td>{i}</td><td><code>{e(v.invariant)}</code>{cat}</td><td>{e(v.run)}</td>"
                       f"<td>{e(v.message)}{auto}</td><td>{_evidence(v.events, by_seq, origin)}</td></tr>")
        out.append("</table></div>")
    if r.notes:
        out.append("<p><b>Notes</b></p><ul>" + "".join(f"<li>{e(n)}</li>" for n in r.notes) + "</ul>")
    out.append(coverage_html(r, events, cov))
    return "".join(out)


def trace_coverage(r: ScenarioResult, events: list[dict] | None):
    """What a trace exercised, against every invariant and expectation (None: no trace). A
    report works it out once per scenario (``Item.coverage``) for its page and its index."""
    from ..checks.exercised import coverage

    return coverage(r, events, [i for i, _ in catalogue()])


def coverage_html(r: ScenarioResult, events: list[dict] | None, cov=None) -> str:
    """What the run exercised: the headline counts, the invariants judged on real events and
    held, and those with nothing to judge ("not exercised", never a pass); ``cov`` when it is
    known already (:func:`trace_coverage`)."""
    from ..checks.exercised import FACTS, headline

    statements = dict(catalogue())
    cov = cov if cov is not None else trace_coverage(r, events)
    if cov is None:
        return '<p class="muted">No trace was saved, so what the run exercised is unknown.</p>'

    def rows(ids) -> str:
        return "".join(f"<tr><td><code>{e(i)}</code></td><td>{e(statements.get(i, ''))}</td></tr>" for i in ids)

    def unjudged(ids) -> str:      # the card's why, and the finding the checks would have charged
        from ..checks.card import judged

        lines = {line.invariant: line for line in judged(events).lines}
        return "".join(f"<tr><td><code>{e(i)}</code></td><td>{e(statements.get(i, ''))}</td>"
                       f"<td>{e(lines[i].why) if i in lines else ''}</td>"
                       f"<td>{e(lines[i].finding or '') if i in lines else ''}</td></tr>" for i in ids)

    facts = "".join(f"<tr><td>{e(label)}</td><td>{cov.counts.get(k, 0)}</td></tr>" for k, label in FACTS.items()
                    if not k.startswith("expect_"))
    return (f"<p><b>Exercised</b>: {e(headline(cov.counts))}</p>"
            f"<details><summary>{len(cov.held)} invariants exercised and held (the trace had events for "
            "them to judge)</summary><table class='collapse'><tr><th>invariant</th><th>statement</th></tr>"
            + rows(cov.held) + "</table></details>"
            f"<details><summary class='idle'>{len(cov.not_exercised)} invariants not exercised (nothing in this "
            "trace for them to judge: not a pass)</summary><table class='collapse'><tr><th>invariant</th>"
            "<th>statement</th></tr>" + rows(cov.not_exercised) + "</table></details>"
            + (f"<details><summary class='idle'>{len(cov.not_judgeable)} invariants not judgeable on an "
               "integration run (they live where a real worker's trace cannot show them: not a pass)</summary>"
               "<table class='collapse'><tr><th>invariant</th><th>statement</th><th>why not judgeable</th>"
               "<th>the checks would have charged</th></tr>" + unjudged(cov.not_judgeable)
               + "</table></details>" if cov.not_judgeable else "") +
            "<details><summary>What the trace holds</summary><table><tr><th>fact</th><th>count</th></tr>"
            + facts + "</table></details>")


def catalogue() -> list[tuple[str, str]]:
    """(id, statement) of every invariant and expectation the checks know (docs/invariants.md)."""
    from ..checks import EXPECTATIONS, INVARIANTS

    return [(inv.id, inv.statement) for inv in (*INVARIANTS, *EXPECTATIONS)]


def lane_table(item: Item, origin: int) -> str:
    """Every event of the trace, one row each (a port call and its result share a row, as
    `crashlab show` prints them), each row anchored by its sequence number (``#e-74``) so
    that cited evidence is one click away."""
    from .text import who_and_body

    results = {ev.get("call"): ev for ev in item.events or () if ev.get("lane") == "port" and ev.get("kind") == "result"}
    calls = {ev.get("seq") for ev in item.events or () if ev.get("lane") == "port" and ev.get("kind") == "call"}
    rows = []
    for ev in item.events or ():
        lane, kind = ev.get("lane"), ev.get("kind")
        if kind == "header" or (lane == "port" and kind == "result" and ev.get("call") in calls):
            continue
        seq = ev.get("seq")
        extra = ""
        res = results.get(seq) if lane == "port" and kind == "call" else None
        if res is not None:
            extra = f"<a id=\"e-{e(res.get('seq'))}\"></a>#{e(res.get('seq'))}"
        # who did it: crashlab for its own acts (a grant, a failpoint, a crash, a takeover), as show prints it
        who, body = who_and_body(ev, results, origin)
        rows.append(f"<tr id='e-{e(seq)}'><td class='mono'>{e(seq)}{'<br>' + extra if extra else ''}</td>"
                    f"<td class='mono'>{e(format_time(int(ev.get('t') or 0), origin))}</td>"
                    f"<td>{e(lane)}</td><td class='mono'>{e(who)}</td><td class='mono'>{e(body)}</td></tr>")
    return ("<details id='events'><summary>State/event table: every event of the trace, a port call and its result on "
            f"one row ({len(rows)} rows); cited evidence links here</summary><div class='scroll'><table><tr><th>seq</th>"
            "<th>time</th><th>lane</th><th>who</th><th>event</th></tr>" + "".join(rows) + "</table></div></details>")


# --------------------------------------------------------------------------- pages
def shell(title: str, body: str, *, slides: bool = False) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{e(title)}</title><style>{CSS}</style></head><body{' class=slides' if slides else ''}><main>"
            + body + "</main></body></html>\n")


def repro_html(item: Item, *, no_answers: bool = False) -> str:
    line = repro(item, no_answers=no_answers)
    note = (' <span class="muted">(set CRASHLAB_ADAPTER to the adapter under test)</span>' if no_answers else "")
    return f'<p><b>Reproduce</b>{note}</p><pre class="repro"><code>{e(line)}</code></pre>'


def _forward_words(head: dict) -> str:
    """The runs' own operations, as the effect expectation counts them: ``reservation.reserve``."""
    ops = dict.fromkeys(f"{run.get('service')}.{run.get('operation')}" for run in head.get("runs") or ()
                        if isinstance(run, dict))
    return ", ".join(ops) or "the runs' operations"


def _effects_words(want) -> str:
    """An ``expect.remote_effects`` value in words: ``1``, ``between 0 and 1``, ``run-a 0, run-b 0``."""
    if isinstance(want, bool) or not isinstance(want, (int, dict)):
        return str(want)
    if isinstance(want, int):
        return str(want)
    parts = []
    lo, hi = want.get("min"), want.get("max")
    if lo is not None or hi is not None:
        parts.append(f"between {lo if lo is not None else 0} and {hi if hi is not None else 'any'}")
    parts += [f"{run} {n}" for run, n in want.items() if run not in ("min", "max")]
    return ", ".join(parts) or "any"


def expected_observed(item: Item) -> str:
    """What the scenario expected (its ``expect`` block) next to what the run did."""
    head = (item.events or [{}])[0]
    expect = head.get("expect") if isinstance(head.get("expect"), dict) else {}
    r = item.result
    exp, obs = [], []
    if expect.get("dispositions"):
        want = expect["dispositions"]
        exp.append("disposition: " + ("; ".join(f"{run} {' or '.join(map(str, ds))}" for run, ds in want.items())
                                      if isinstance(want, dict) else " or ".join(str(d) for d in want)))
    obs.append("disposition: " + (", ".join(f"{run} {d or 'none'}" for run, d in r.dispositions.items()) or "none"))
    if expect.get("remote_effects") is not None:
        exp.append(f"remote effects of {_forward_words(head)}: {_effects_words(expect['remote_effects'])}")
    if item.lanes is not None:
        # counted as the expectation counts them (EXP-EFFECTS): the records of the runs' own operations;
        # the rest of the run's records (a notification, a release) are listed apart
        forward = {str(run.get("service")) for run in head.get("runs") or () if isinstance(run, dict)}
        mine = [x for x in item.lanes.effects if x.cause != "other_actor" and not x.compensates]
        own = [x for x in mine if x.service in forward]
        other = [x for x in mine if x.service not in forward]
        obs.append(f"remote effects of {_forward_words(head)}: {len(own)}"
                   + (f" ({', '.join(x.ref for x in own[:6])})" if own else "")
                   + (f"; other records the runs made: {', '.join(f'{x.ref} ({x.service})' for x in other[:6])}"
                      if other else ""))
    if expect.get("evidence"):
        exp.append("evidence: " + "; ".join(evidence_words(x, quote=str) for x in expect["evidence"]))
    if not exp:
        exp.append("every invariant holds (no scenario-specific expectation)")
    held = "every invariant held" if not r.violations else \
        f"{len(r.violations)} violation(s): " + ", ".join(dict.fromkeys(v.invariant for v in r.violations))
    obs.append(held)
    return ('<div class="eo"><div><h4>Expected</h4>' + "<br>".join(e(x) for x in exp) + "</div>"
            f'<div class="obs{" bad" if r.violations else ""}"><h4>Observed</h4>' + "<br>".join(e(x) for x in obs)
            + "</div></div>")


def packets_html(item: Item, origin: int, *, no_answers: bool = False) -> str:
    """Per run that is unresolved or carried a packet: its latest decision packet, laid out,
    and the three communications (crashlab.report.comms). A run that ended resolved
    (succeeded, or certainly without effect) gets what happened instead of a decision: its
    communications and, folded, the packets it parked with on the way."""
    from .comms import situation

    r = item.result
    escalations = packets(item)
    open_runs = unresolved(item)
    runs = list(dict.fromkeys(open_runs + list(escalations)))
    if not runs:
        return ""
    out = ["<h3>Decision packets</h3>"]
    for run in runs:
        evs = escalations.get(run, [])
        status = r.dispositions.get(run) or "no terminal disposition"
        last = evs[-1] if evs else None
        facts = situation(run, r.dispositions.get(run), (last or {}).get("packet"), item.events or [], origin,
                          no_answers=no_answers)
        if run not in open_runs and facts.facts.resolution.flag:
            out.append(f"<p>{e(packets_view.resolution_sentence(facts).text)}</p>")
            out.append(packets_view.communications_html(facts))
            out.append(f"<details><summary>{len(evs)} packet(s) it carried on the way</summary>"
                       + "".join(f"<p>#{e(x.get('seq'))} {e(_packet_source(x))}</p>"
                                 f"{packets_view.packet_html(x.get('packet'), origin, no_answers=no_answers, decision=False)}"
                                 for x in evs) + "</details>")
            continue
        if run not in open_runs:      # a resolved disposition, but a ledger entry is still unresolved
            out.append(f'<p class="warn">{e(packets_view.resolution_sentence(facts).text)}</p>')
        if last is None:
            out.append(f'<p class="warn">{e(run)} ({e(status)}) is unresolved and escalated no decision packet.</p>')
            out.append(packets_view.communications_html(facts))
            continue
        out.append(f"<p><b>{e(run)}</b> ({e(status)}): {e(_packet_source(last))} from {e(last.get('worker'))} at "
                   f"{e(format_time(int(last.get('t') or 0), origin))} (event #{e(last.get('seq'))})</p>")
        out.append(packets_view.summary_html(facts))
        out.append(packets_view.packet_html(last.get("packet"), origin, no_answers=no_answers))
        out.append(packets_view.communications_html(facts))
        if len(evs) > 1:
            out.append(f"<details><summary>{len(evs) - 1} earlier packet(s)</summary>"
                       + "".join(f"<p>#{e(x.get('seq'))} {e(_packet_source(x))}</p>"
                                 f"{packets_view.packet_html(x.get('packet'), origin, no_answers=no_answers)}"
                                 for x in evs[:-1])
                       + "</details>")
    return "".join(out)


def _packet_source(ev: dict) -> str:
    if ev.get("kind") == "escalation":
        return f"ticket {ev.get('ticket')}" if ev.get("ticket") else "escalation"
    return f"finish packet ({ev.get('disposition')})" if ev.get("disposition") else "finish packet"


def scenario_page(item: Item, *, no_answers: bool = False, prev: Item | None = None,
                  next_: Item | None = None, window=None, slides: bool = False) -> str:
    """One scenario's page: verdict, repro, expected versus observed, the figure, the
    violations with their evidence, decision packets, state machines and the event table.
    ``window`` (crashlab.report.window.Window) is the stretch the figure shows; with ``slides``
    the page opens on its figure, full width, in large type."""
    r = item.result
    head = (item.events or [{}])[0]
    origin = int(head.get("origin_ms") or 0)
    by_seq = {ev.get("seq"): ev for ev in item.events or ()}
    links = ['<a href="../index.html">← all scenarios</a>']
    if prev is not None:
        links.append(f'<a href="{e(prev.name)}.html">‹ {e(prev.result.id)}</a>')
    if next_ is not None:
        links.append(f'<a href="{e(next_.name)}.html">{e(next_.result.id)} ›</a>')
    disp = ", ".join(f"{e(run)}: <b>{e(d or 'no terminal disposition')}</b>" for run, d in r.dispositions.items())
    out = [f"<nav>{' '.join(links)}</nav>", f'<section class="scenario" id="{e(anchor(item))}">',
           f"<h1>{badge(severity(r))} {e(r.id)}</h1><p>{e(r.title)}</p>",
           f"<p>{disp or '<span class=muted>no run</span>'}<br><span class='muted'>seed {e(r.seed)}"
           + (f" · tags {e(', '.join(r.tags))}" if r.tags else "")
           + (f" · adapter <code>{e(head.get('adapter'))}</code>" if head.get("adapter") and not no_answers else "")
           + "</span>" + (f"<br>trace: <code>{e(r.trace)}</code>" if r.trace and not no_answers else "") + "</p>",
           repro_html(item, no_answers=no_answers), expected_observed(item)]
    figure_at = 3 if slides else None        # a slide: the figure straight under the title
    card = head.get("card") or {}
    if isinstance(card, dict) and card and not no_answers:
        fields = list(CARD_FIELDS) + [k for k in card if k not in CARD_FIELDS]
        out.append("<h3>Teaching card</h3><dl class='card'>" + "".join(
            f"<dt>{e(CARD_LABELS.get(k, k))}</dt><dd>{e(card[k])}</dd>" for k in fields if k in card) + "</dl>")
    if item.png is not None:
        data = base64.b64encode(item.png).decode("ascii")
        shown = ""
        if window is not None:
            a, b = window.span(origin)
            inside = [ev.get("seq") for ev in item.events or () if a <= int(ev.get("t") or 0) <= b
                      and ev.get("lane") != "meta"]
            held = (f" It holds {len(inside)} events, <a href=\"#e-{e(inside[0])}\">#{e(inside[0])}</a> to "
                    f"<a href=\"#e-{e(inside[-1])}\">#{e(inside[-1])}</a> in the event table below." if inside
                    else " No event falls inside it.")
            shown = (f" Shown: {e(format_time(a, origin))} to {e(format_time(b, origin))} only "
                     f"(<code>--window {e(window)}</code>); the tables below cover the whole trace.{held}")
        html_fig = (f'<figure{" class=slide" if slides else ""}><img alt="three timelines of {e(r.id)}" '
                    f'src="data:image/png;base64,{data}"><figcaption class="muted">Run state, remote effects and '
                    f'knowledge on the scenario clock.{shown} Full size: <a href="../figures/{e(item.name)}.png">PNG'
                    '</a></figcaption></figure>')
        if figure_at is not None:
            out.insert(figure_at, html_fig)
        else:
            out.append(html_fig)
    elif item.events is None:
        out.append('<p class="muted">No trace was saved for this scenario, so there is no timeline.</p>')
    else:
        out.append('<p class="muted">The figure was not drawn (figures for failing scenarios only: '
                   "<code>--report-failures</code>); <code>crashlab report TRACE</code> draws it.</p>")
    out.append("<h3>Invariants</h3>" + violations_html(r, by_seq, origin, item.events, item.coverage))
    cited = next((s for v in r.violations for s in v.events if s in by_seq), None)
    if cited is not None and by_seq[cited].get("kind") == "result" and by_seq[cited].get("call") in by_seq:
        cited = by_seq[cited]["call"]        # `show` prints a result on its call's line
    if cited is not None:
        import shlex

        trace = shlex.quote(r.trace) if r.trace and not no_answers else "TRACE.jsonl"
        out.append(f'<p class="muted">Each cited event links to its row in the event table below. In a terminal: '
                   f"<code>crashlab show {e(trace)} --around {e(cited)}</code> prints the events around "
                   f"#{e(cited)}.</p>")
    out.append(packets_html(item, origin, no_answers=no_answers))
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
    return shell(f"{r.id} — crashlab", "".join(out), slides=slides)
