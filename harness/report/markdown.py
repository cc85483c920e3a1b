"""summary.md: a GitHub-flavoured summary for a CI job (``$GITHUB_STEP_SUMMARY``)."""
from __future__ import annotations

from ..results import Scorecard, outcome_text
from .view import Item

_MD_SPECIAL = str.maketrans({"|": "\\|", "`": "\\`", "*": "\\*", "[": "\\[", "]": "\\]",
                             "<": "&lt;", ">": "&gt;", "&": "&amp;", "\\": "\\\\", "\n": " ", "\r": " "})
VERDICT_MARK = {"pass": "✅ pass", "fail": "❌ fail", "unknown": "❔ unknown"}


def md(text: object) -> str:
    """Escape a string for a Markdown table cell (no markup, no raw HTML, no broken columns)."""
    return str(text).translate(_MD_SPECIAL)


def score_line(card: Scorecard) -> str:
    cats = " · ".join(f"{md(name)} {c['score']}/{c['max']}" for name, c in card.categories.items())
    line = f"**Score {card.total}/{card.max}** — {VERDICT_MARK.get(card.verdict, md(card.verdict))}"
    if cats:
        line += f" ({cats})"
    if card.auto_fail:
        line += " — automatic failure: " + "; ".join(md(a) for a in card.auto_fail)
    return line


def summary(items: list[Item], card: Scorecard | None, adapter: str | None) -> str:
    counts = {v: sum(1 for i in items if i.result.verdict == v) for v in ("pass", "fail", "unknown")}
    lines = [f"## crashlab report{f' — adapter `{md(adapter)}`' if adapter else ''}", ""]
    if card is not None:
        lines.append(score_line(card))
    lines.append(f"{len(items)} scenarios: {counts['pass']} pass, {counts['fail']} fail, "
                 f"{counts['unknown']} unknown")
    lines += ["", "| scenario | verdict | disposition | violations |", "|---|---|---|---|"]
    for item in items:
        r = item.result
        invariants = sorted({v.invariant for v in r.violations})
        lines.append(f"| {md(r.id)} — {md(r.title)} | {VERDICT_MARK.get(r.verdict, md(r.verdict))} | "
                     f"{md(r.disposition or '—')} | {', '.join(md(i) for i in invariants) or '—'} |")
    if card is not None and card.lost:
        lines += ["", "### Points lost", ""]
        for p in card.lost:
            ev = ", ".join(f"#{e}" for e in p.events[:8])
            lines.append(f"- {md(p.category)} / {md(p.point)}: {md(p.scenario)} — {md(p.invariant)}"
                         f"{f' ({ev})' if ev else ''} {md(p.message)}".rstrip())
            if p.expected is not None or p.observed is not None:
                lines.append(f"  - expected {md(outcome_text(p.expected))}, observed {md(outcome_text(p.observed))}")
            if p.rule:
                lines.append(f"  - rule ({md(str(p.rule.get('source')))}): \"{md(str(p.rule.get('quote')))}\"")
    lines += ["", "The full report (three timelines per scenario, evidence, decision packets) is index.html "
              "beside this file.", ""]
    return "\n".join(lines)
