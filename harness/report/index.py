"""index.html: the verdict, the score, the findings grouped by rule, and every scenario
(failures first, then the eight traces in chapter order), each linking to its own page."""
from __future__ import annotations

from ..vocab.results import Scorecard
from .findings import Finding, auto_fail_sources, group, lost_groups
from .html import badge, category_words, e, expected_observed, repro_html, shell, value_html
from ..checks.exercised import coverage, severity
from .view import Item
from ..run.isolate import from_json

DIFFERS_NOTE = ("No invariant was violated: {n} scenario(s) differ from their expected outcome only, as a "
                "correct alternative design can. The score counts them; they are not safety failures.")


def verdict_counts(items: list[Item]) -> dict[str, int]:
    counts = dict.fromkeys(("pass", "fail", "differs", "unknown"), 0)
    for i in items:
        counts[severity(i.result)] += 1
    return counts


def counts_text(counts: dict[str, int]) -> str:
    return (f"{counts['pass']} pass, {counts['fail']} fail, {counts['differs']} differ from their expectation, "
            f"{counts['unknown']} unknown")


def overall(items: list[Item], card: Scorecard | None) -> str:
    """The report's verdict: the card's, except that a fail caused only by expectation
    differences (no invariant violated, no automatic failure) reads "differs"."""
    counts = verdict_counts(items)
    verdict = card.verdict if card is not None else (
        "fail" if counts["fail"] or counts["differs"] else "unknown" if counts["unknown"] else "pass")
    if verdict == "fail" and counts["differs"] and not counts["fail"] and not (card is not None and card.auto_fail):
        return "differs"
    return verdict


def coverage_section(items: list[Item], hrefs: dict[str, str] | None = None, card: Scorecard | None = None) -> str:
    """Per rubric point: its invariants; the scenarios that exercised it (one of its invariants had
    events to judge, or a violation was charged to it); those with a violation charged to it (its
    routed point, as the scorecard counts it: docs/rubric.md); the rest did not exercise it. A
    violation of one of its checks charged to another point is named in its row, and a point the
    scorecard (``card``) lost with no violation of its own charged to it says why."""
    try:
        from ..checks.rubric import RUBRIC, point_for
    except ImportError:
        return ""
    from dataclasses import replace

    from ..checks.exercised import charged_elsewhere, elsewhere_heads
    from .html import catalogue

    hrefs = hrefs or {i.result.id: page_href(i) for i in items}
    ids = [i for i, _ in catalogue()]
    covs = [(item, item.coverage if item.coverage is not None else coverage(item.result, item.events, ids))
            for item in items]
    covs = [(item, c) for item, c in covs if c is not None]
    if not covs:
        return ""
    # the violations the coverage counts (on an integration trace, those its card judged), by the point charged
    judged = [replace(item.result, violations=tuple(v for v in item.result.violations if v.invariant in c.violated))
              for item, c in covs]
    charged: dict[str, list[str]] = {}
    for res in judged:
        for v in res.violations:
            point = point_for(v)
            if point is not None and res.id not in charged.setdefault(point.id, []):
                charged[point.id].append(res.id)
    elsewhere = charged_elsewhere(judged)
    lost = {} if card is None else {lp.point.split(" ", 1)[0]: lp for lp in reversed(card.lost)}
    rows = []
    for p in RUBRIC:
        inv = set(p.invariants)
        violated = tuple(charged.get(p.id, ()))
        exercised = tuple(item.result.id for item, c in covs
                          if inv & (set(c.held) | set(c.violated)) or item.result.id in violated)
        notes = [f"{e(head)}: {_scenario_links(scenarios, hrefs)}"
                 for head, scenarios in elsewhere_heads(elsewhere.get(p.id, {}))]
        if p.id in lost and not violated:
            notes.append(f"lost all the same: {e(lost[p.id].message)}")
        rows.append(f"<tr><td>{e(p.id)} {e(p.name)}</td><td><code>{e(', '.join(p.invariants))}</code></td>"
                    f"<td><span class='ph'>exercised in </span>{len(exercised)}"
                    f"{': ' + _scenario_links(exercised, hrefs) if exercised else ''}</td>"
                    f"<td><span class='ph'>violated in </span>{len(violated)}"
                    f"{': ' + _scenario_links(violated, hrefs) if violated else ''}"
                    + "".join(f"<br><span class='muted'>{n}</span>" for n in notes) + "</td>"
                    f"<td><span class='ph'>not exercised in </span>{len(covs) - len(exercised)}</td></tr>")
    return ('<section id="exercised"><h2>What was exercised</h2><p class="muted">A rubric point is exercised '
            "by a scenario whose trace had events for one of its invariants to judge (an ambiguous send for "
            "the retry rule, a throttled answer for throttling, ...), or that charged it a violation; a "
            "scenario that did not exercise it says nothing about it. <em>violated in</em> counts the "
            "scenarios with a violation charged to the point, as the score counts them: an expectation miss "
            "is charged to the point its scenario's rule names, and the row of the point whose check missed "
            f"says so. {len(covs)} scenario{'' if len(covs) == 1 else 's'} with traces.</p><div class='scroll'>"
            "<table class='collapse'><tr><th>rubric point</th><th>invariants</th><th>exercised in</th>"
            "<th>violated in</th><th>not exercised in</th></tr>" + "".join(rows) + "</table></div></section>")

SHOWN_SCENARIOS = 8   # scenario ids listed per finding before "… and n more"


def page_href(item: Item) -> str:
    return f"scenarios/{item.name}.html"


def _scenario_links(ids: tuple[str, ...], hrefs: dict[str, str]) -> str:
    links = [f'<a href="{e(hrefs[i])}">{e(i)}</a>' if i in hrefs else e(i) for i in ids[:SHOWN_SCENARIOS]]
    more = f" … and {len(ids) - SHOWN_SCENARIOS} more" if len(ids) > SHOWN_SCENARIOS else ""
    return ", ".join(links) + more


def finding_html(f: Finding, hrefs: dict[str, str], *, no_answers: bool) -> str:
    first = f.first
    auto = f' <span class="badge auto">automatic failure: {e(f.auto_fail)}</span>' if f.auto_fail else ""
    if f.auto_fail and len(f.auto_scenarios) < len(f.scenarios):
        auto += (f'<br><span class="muted">raised the automatic failure in {len(f.auto_scenarios)} of these '
                 f"scenarios: {_scenario_links(f.auto_scenarios, hrefs)}; elsewhere it cost a point only</span>")
    where = (f"{f.count} violation{'s' if f.count != 1 else ''} in {len(f.scenarios)} "
             f"scenario{'s' if len(f.scenarios) != 1 else ''}")
    cost = f"<br>costs: {e('; '.join(f.points))}" if f.points else ""
    return (f'<div class="finding" id="f-{e(f.rule)}"><h3><code>{e(f.rule)}</code> — {where}{auto}</h3>'
            + (f"<blockquote>{e(f.statement)}</blockquote>" if f.statement else "")
            + f'<p class="muted">{e(category_words(f.category))}{cost}</p>'
            + f'<p>First example: <a href="{e(page_href(first))}">{e(first.result.id)}</a> — '
            f"{e(f.example.message)}</p>"
            + expected_observed(first) + repro_html(first, no_answers=no_answers)
            + (f"<p class='muted'>Scenarios: {_scenario_links(f.scenarios, hrefs)}</p>" if len(f.scenarios) > 1
               else "") + "</div>")


def score_html(card: Scorecard, hrefs: dict[str, str], verdict: str | None = None) -> str:
    idle = _unshown_by_category(card)
    rows = "".join(f"<tr><td>{e(category_words(name))}</td><td>{c['score']}/{c['max']}"
                   f"{' <span class=muted>(' + e(idle[name]) + ')</span>' if idle.get(name) else ''}</td></tr>"
                   for name, c in card.categories.items())
    out = [f'<section id="score"><h2>Score {e(card.score_text())} {badge(verdict or card.verdict)}</h2>',
           f"<table><tr><th>category</th><th>points</th></tr>{rows}"
           f"<tr><th>total</th><th>{card.total}/{card.max}</th></tr></table>"]
    for state, ids in (("not exercised", card.not_exercised), ("not recorded", card.not_recorded)):
        if ids:
            out.append(f'<p class="unexercised"><strong>{len(ids)} rubric point{"s" if len(ids) != 1 else ""} '
                       f'{state}: {e(", ".join(ids))}</strong>. '
                       + ("No selected scenario had events for their rules: they are not kept, and not a pass. "
                          "Run the whole library (no <code>--tag</code> or <code>--scenario</code> filter; with "
                          "<code>--scenarios DIR</code>, add <code>--with-library</code>) or scenarios whose traces "
                          "exercise them."
                          if state == "not exercised" else
                          "Some results carry no record of what their traces exercised and the traces are not "
                          "there to compute it from: they cannot be shown kept.") + "</p>")
    if card.auto_fail:
        out.append('<p><span class="badge auto">AUTOMATIC FAILURE</span> '
                   + "; ".join(e(a) for a in card.auto_fail) + "</p><ul>"
                   + "".join(f"<li>{e(src.reason)}: <code>{e(src.invariant)}</code> in {len(src.scenarios)} scenario"
                             f"{'s' if len(src.scenarios) != 1 else ''}: {_scenario_links(src.scenarios, hrefs)}</li>"
                             for src in auto_fail_sources(_report_order(card, hrefs))) + "</ul>")
    groups = lost_groups(card)
    if groups:
        out.append(f"<h3>Where points were lost ({len(groups)} rubric points, {len(card.lost)} scenario hits)</h3>"
                   "<div class='scroll'><table class='collapse'><tr><th>point</th><th>category</th>"
                   "<th>invariants</th><th>scenarios</th><th>first example</th></tr>")
        for g in groups:
            out.append(f"<tr><td>{e(g.point)}</td><td>{e(category_words(g.category))}</td><td><code>{e(', '.join(g.invariants))}</code>"
                       f"</td><td>{len(g.scenarios)}: {_scenario_links(g.scenarios, hrefs)}</td>"
                       f"<td>{e(g.first.scenario)}: {e(g.first.message)}{_rule_html(g.first)}</td></tr>")
        out.append("</table></div>")
    else:
        out.append('<p class="muted">No point was lost.</p>')
    for key, value in card.extra.items():
        out.append(f"<details><summary>{e(key)}</summary><div class='scroll'>{value_html(value)}</div></details>")
    out.append("</section>")
    return "".join(out)


def _unshown_by_category(card: Scorecard) -> dict[str, str]:
    """Per category: ``C4 not exercised`` (its points not shown exercised), for the score table."""
    from ..checks.rubric import BY_POINT

    out: dict[str, list[str]] = {}
    for state, ids in (("not exercised", card.not_exercised), ("not recorded", card.not_recorded)):
        for pid in ids:
            if pid in BY_POINT:
                out.setdefault(BY_POINT[pid].category, []).append(f"{pid} {state}")
    return {k: ", ".join(v) for k, v in out.items()}


def _report_order(card: Scorecard, hrefs: dict[str, str]) -> list:
    """The card's scenarios in the report's order (``hrefs`` is built from it)."""
    rank = {sid: n for n, sid in enumerate(hrefs)}
    return sorted(card.scenarios, key=lambda r: rank.get(r.id, len(rank)))


def _rule_html(p) -> str:
    """A lost point's expected and observed outcomes, and the rule (with its quote) that cost it."""
    from ..vocab.results import outcome_text

    out = ""
    if p.expected is not None or p.observed is not None:
        out += (f'<br><span class="muted">expected {e(outcome_text(p.expected))}, observed '
                f'{e(outcome_text(p.observed))}</span>')
    if p.rule:
        out += (f'<br><span class="muted">rule ({e(str(p.rule.get("source")))}): '
                f'&ldquo;{e(str(p.rule.get("quote")))}&rdquo;</span>')
    return out


def _dispositions(r) -> str:
    """A scenario's final disposition; with several runs, one line per run, named."""
    if len(r.dispositions) <= 1:
        return e(r.disposition)
    return "<br>".join(f'<span class="muted">{e(run)}</span> {e(d or "none")}' for run, d in r.dispositions.items())


def scenarios_html(items: list[Item]) -> str:
    rows = []
    for item in items:
        r = item.result
        inv = ", ".join(dict.fromkeys(v.invariant for v in r.violations))
        rows.append(f'<tr><td><a href="{e(page_href(item))}">{e(r.id)}</a><br><span class="muted">'
                    f"{e(r.title)}</span></td><td>{badge(severity(r))}</td><td>{_dispositions(r)}</td>"
                    f"<td><code>{e(inv) if inv else ''}</code></td></tr>")
    return ('<section id="scenarios"><h2>Scenarios</h2><p class="muted">Failures first (FAIL: an invariant '
            "was violated; DIFFERS: no invariant was violated, the outcome differs from the scenario's "
            "expectation), then the eight traces in chapter order.</p><div class='scroll'><table class='collapse'><tr><th>scenario</th>"
            "<th>verdict</th><th>disposition</th><th>violations</th></tr>" + "".join(rows)
            + "</table></div></section>")


def _isolation_html(card: Scorecard | None) -> str:
    """The isolation the adapter's processes ran under, as the results record it (none before it was)."""
    isolation = from_json(card.extra.get("isolation")) if card is not None else None
    if isolation is None:
        return ""
    return f'<p id="isolation">{e(isolation.line())}</p>'


def index_page(items: list[Item], card: Scorecard | None, *, adapter: str | None, notes: list[str],
               no_answers: bool = False) -> str:
    """``items`` in report order (failures first)."""
    counts = verdict_counts(items)
    verdict = overall(items, card)
    hrefs = {i.result.id: page_href(i) for i in items}
    shown_adapter = None if no_answers else adapter
    head = (f"<header><h1>crashlab report {badge(verdict)}</h1><p>"
            + (f"adapter <code>{e(shown_adapter)}</code> · " if shown_adapter else "")
            + (f"seed {e(card.seed)} · " if card is not None and card.seed is not None else "")
            + f"{len(items)} scenario{'' if len(items) == 1 else 's'}: {counts_text(counts)}"
            + "</p>" + _isolation_html(card) + (f'<p>{e(DIFFERS_NOTE.format(n=counts["differs"]))}</p>' if verdict == "differs" else "")
            + "".join(f'<p class="muted">{e(n)}</p>' for n in notes) + "</header>")
    body = [head]
    findings = group(items, card)
    if findings:
        body.append(f'<section id="findings"><h2>Findings ({len(findings)} rules broken)</h2>'
                    '<p class="muted">Each rule once, with how many scenarios break it and the first '
                    "example; every scenario has its own page.</p>"
                    + "".join(finding_html(f, hrefs, no_answers=no_answers) for f in findings) + "</section>")
    if card is not None:
        body.append(score_html(card, hrefs, verdict))
    body.append(coverage_section(items, hrefs, card))
    body.append(scenarios_html(items))
    body.append('<p class="muted">How to read this report: docs/reports.md in the crashlab repository.</p>')
    title = f"crashlab report — {shown_adapter}" if shown_adapter else "crashlab report"
    return shell(title, "".join(body))
