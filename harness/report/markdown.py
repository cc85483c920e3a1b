"""summary.md: a GitHub-flavoured summary for a CI job (``$GITHUB_STEP_SUMMARY``)."""
from __future__ import annotations

from ..vocab.results import Scorecard, outcome_text
from .view import Item, repro

_MD_SPECIAL = str.maketrans({"|": "\\|", "`": "\\`", "*": "\\*", "[": "\\[", "]": "\\]",
                             "<": "&lt;", ">": "&gt;", "&": "&amp;", "\\": "\\\\", "\n": " ", "\r": " "})
VERDICT_MARK = {"pass": "✅ pass", "fail": "❌ fail", "unknown": "❔ unknown",
                "differs": "⚠️ differs (no invariant violated; the outcome differs from the expectation)"}
ROW_MARK = {**VERDICT_MARK, "differs": "⚠️ differs"}


def md(text: object) -> str:
    """Escape a string for a Markdown table cell (no markup, no raw HTML, no broken columns)."""
    return str(text).translate(_MD_SPECIAL)


def score_line(card: Scorecard, verdict: str | None = None) -> str:
    """``verdict`` overrides the card's (a fail of expectation differences only reads "differs")."""
    cats = " · ".join(f"{md(name)} {c['score']}/{c['max']}" for name, c in card.categories.items())
    shown = verdict or card.verdict
    line = f"**Score {md(card.score_text())}** — {VERDICT_MARK.get(shown, md(shown))}"
    if cats:
        line += f" ({cats})"
    return line     # an automatic failure is named by the score text itself (Scorecard.score_text)


#: Failures shown in full (violations and a repro block); the rest are one table row each.
DETAILED = 25


def summary(items: list[Item], card: Scorecard | None, adapter: str | None, *, no_answers: bool = False) -> str:
    """Failures first, each with its violations and a shell-quoted repro line; the findings
    grouped by rule; passes as one line. ``items`` are in report order (failures first)."""
    from .findings import group

    from ..checks.exercised import severity
    from .index import DIFFERS_NOTE, counts_text, overall, verdict_counts

    counts = verdict_counts(items)
    shown = None if no_answers else adapter
    lines = [f"## crashlab report{f' — adapter `{md(shown)}`' if shown else ''}", ""]
    if card is not None:
        lines.append(score_line(card, overall(items, card)))
        lines.append("")
        if card.auto_fail:
            from .findings import auto_fail_text

            order = {i.result.id: n for n, i in enumerate(items)}
            ranked = sorted(card.scenarios, key=lambda r: order.get(r.id, len(order)))
            lines += [f"- automatic failure from {md(line)}" for line in auto_fail_text(ranked)] + [""]
    lines.append(f"{len(items)} scenarios: {counts_text(counts)}")
    if overall(items, card) == "differs":
        lines += ["", f"⚠️ {md(DIFFERS_NOTE.format(n=counts['differs']))}"]
    if card is not None and card.lost:
        from .findings import lost_groups

        lines += ["", "### Points lost", ""]
        for g in lost_groups(card):
            entries = [lp for lp in card.lost if lp.point == g.point]
            lines.append(f"- {md(g.point)} ({md(g.category)}): {len(g.scenarios)} scenario"
                         f"{'s' if len(g.scenarios) != 1 else ''}")
            for p in entries[:3]:       # every finding of a point is its own line, misses of one scenario too
                lines.append(f"  - {md(p.scenario)} — {md(p.invariant)}: {md(p.message)}")
                if p.expected is not None or p.observed is not None:
                    lines.append(f"    - expected {md(outcome_text(p.expected))}, observed {md(outcome_text(p.observed))}")
                if p.rule:
                    lines.append(f"    - rule ({md(str(p.rule.get('source')))}): \"{md(str(p.rule.get('quote')))}\"")
                if p.fix:
                    lines.append(f"    - what to change: {md(str(p.fix.get('text')))} ({md(str(p.fix.get('see')))})")
            if len(entries) > 3:         # what it counts, and the scenarios they are in
                rest = entries[3:]
                scenarios = sorted({lp.scenario for lp in rest})
                lines.append(f"  - … {len(rest)} more finding{'s' if len(rest) != 1 else ''} in {len(scenarios)} "
                             f"scenario{'s' if len(scenarios) != 1 else ''}: {', '.join(md(s) for s in scenarios)}")
    findings = group(items, card)
    if findings:
        lines += ["", "### Findings", "", "| rule | scenarios | first example |", "|---|---|---|"]
        for f in findings:
            auto = (f" (automatic failure: {md(f.auto_fail)}, raised in {len(f.auto_scenarios)} of the "
                    f"{len(f.scenarios)})" if f.auto_fail else "")
            lines.append(f"| {md(f.rule)}{auto} | {len(f.scenarios)} | {md(f.first.result.id)}: "
                         f"{md(f.example.message)} |")
    bad = [i for i in items if i.result.verdict != "pass"]
    if bad:
        lines += ["", f"### Failures ({len(bad)})", ""]
    for item in bad[:DETAILED]:
        r = item.result
        lines.append(f"**{ROW_MARK.get(severity(r), md(r.verdict))} {md(r.id)}** — {md(r.title)}  ")
        lines.append(f"disposition: {md(r.disposition or '—')}")
        by_rule: dict[str, list] = {}
        for v in r.violations:
            by_rule.setdefault(v.invariant, []).append(v)
        for rule, vs in by_rule.items():
            first = next((v for v in vs if v.auto_fail), vs[0])
            ev = ", ".join(f"#{e}" for e in first.events[:6])
            times = f" ×{len(vs)}" if len(vs) > 1 else ""
            auto = f"**automatic failure: {md(first.auto_fail)}** — " if first.auto_fail else ""
            lines.append(f"- {md(rule)}{times}: {auto}{md(first.message)}{f' ({ev})' if ev else ''}")
            for other in vs:            # a second miss of one expectation is another miss: never folded
                if other is not first and other.expected is not None \
                        and outcome_text(other.expected) != outcome_text(first.expected):
                    lines.append(f"  - and: {md(other.message)}")
            if first.expected is not None or first.observed is not None:
                lines.append(f"  - expected {md(outcome_text(first.expected))}, observed {md(outcome_text(first.observed))}")
            if first.rule:
                lines.append(f"  - rule {md(str(first.point or ''))} ({md(str(first.rule.get('source')))}): "
                             f"\"{md(str(first.rule.get('quote')))}\"")
        for n in r.notes[:3]:
            lines.append(f"- note: {md(n)}")
        lines += ["", "```sh", repro(item, no_answers=no_answers), "```", ""]
    if len(bad) > DETAILED:
        lines += [f"{len(bad) - DETAILED} more:", "", "| scenario | verdict | violations | repro |", "|---|---|---|---|"]
        for item in bad[DETAILED:]:
            r = item.result
            inv = ", ".join(dict.fromkeys(v.invariant for v in r.violations)) or "—"
            lines.append(f"| {md(r.id)} | {ROW_MARK.get(severity(r), md(r.verdict))} | {md(inv)} | "
                         f"{md(repro(item, no_answers=no_answers))} |")
        lines.append("")
    good = [i.result.id for i in items if i.result.verdict == "pass"]
    if good:
        lines += ["", f"### Passed ({len(good)})", "", ", ".join(md(g) for g in good)]
    if no_answers:
        lines += ["", "Repro lines read the adapter from `$CRASHLAB_ADAPTER`."]
    lines += ["", "The full report (findings, one page per scenario with its three timelines, evidence and "
              "decision packets) is index.html beside this file.", ""]
    return "\n".join(lines)
