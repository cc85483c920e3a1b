"""The documents generated from the rule set (crashlab.rules.ruleset): CHANGELOG.md's entries and
docs/adapters.md's table of what to change when a check fails (``python tools/docgen.py``).

Each new check is given with its own rule (its statement), the point it costs, the chapter
sentence behind it (the passage of the gallery mistake it was written to catch, or a library
scenario's rule that relies on it, else the point's passage) and the change an adapter makes;
each new scenario with its title, the rule it quotes and what it accepts.
"""
from __future__ import annotations

from ..rules import ruleset


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _chapter_for(check_id: str, point) -> tuple[str, str]:
    """(source, quote): the chapter sentence a check rests on."""
    from ..gallery import ENTRIES
    from ..scenario.loader import library

    for entry in ENTRIES:
        if check_id in entry.invariants and not entry.correct:
            return f"AR-08, {entry.section}", entry.quote
    field = {"EXP-ABSENT": "absent", "EXP-DISPOSITION-AT": "disposition_at"}.get(check_id)
    for sc in library() if field else ():
        rule = (sc.expect.get("rules") or {}).get(field)
        if rule:
            return rule["source"], rule["quote"]
    return point.source, point.quote


def _accepts(expect: dict) -> str:
    parts = []
    if expect.get("dispositions"):
        want = expect["dispositions"]
        parts.append("ends " + ("; ".join(f"{run} " + " or ".join(f"`{d}`" for d in ds) for run, ds in want.items())
                                if isinstance(want, dict) else " or ".join(f"`{d}`" for d in want)))
    effects = expect.get("remote_effects")
    if isinstance(effects, dict) and set(effects) <= {"min", "max"}:
        parts.append(f"remote effects {effects.get('min', 0)} to {effects.get('max', 'any')}")
    elif isinstance(effects, dict):
        parts.append("remote effects " + ", ".join(f"{k} {v}" for k, v in effects.items()))
    elif effects is not None:
        parts.append(f"remote effects {effects}")
    if expect.get("evidence"):
        parts.append("evidence " + ", ".join(f"`{e}`" for e in expect["evidence"]))
    if expect.get("absent"):
        parts.append("never " + ", ".join(f"`{e}`" for e in expect["absent"]))
    return "; ".join(parts) or "the generic invariants only"


def changelog_entries() -> str:
    """Every release's entry, newest first."""
    from ..checks.invariants import BY_ID
    from ..checks.rubric import POINT_OF
    from ..scenario.loader import library

    scenarios = {s.id: s for s in library()}
    out: list[str] = []
    for s in reversed(ruleset.SETS):
        out += [f"## {s.package}: rule set {s.version} ({s.date}{', commit ' + s.commit if s.commit else ''})", "",
                f"{s.summary} {s.checks} checks, {s.scenarios} library scenarios.", ""]
        if s.added_checks:
            out += [f"### New checks ({len(s.added_checks)})", ""]
            for cid in s.added_checks:
                check, point = BY_ID[cid], POINT_OF[cid]
                source, quote = _chapter_for(cid, point)
                fix = ruleset.fix(cid)
                out.append(f"- **{cid}** ({point.id} {point.name}): {check.statement}  ")
                out.append(f"  {source}: \"{quote}\"  ")
                if fix:
                    out.append(f"  What to change if it fails now: {fix.text} ({fix.where})")
            out.append("")
        if s.added_scenarios:
            out += [f"### New scenarios ({len(s.added_scenarios)})", ""]
            for sid in s.added_scenarios:
                sc = scenarios[sid]
                rules = sc.expect.get("rules") or {}
                rule = next(iter(rules.values()), None)
                line = f"- `{sid}`: {sc.title}. Passes when it {_accepts(sc.expect)}"
                if rule:
                    line += f" ({rule['point']}; {rule['source']}: \"{rule['quote']}\")"
                out.append(line + ".")
            out.append("")
        if s.changed:
            out += [f"### Changed rules ({len(s.changed)})", ""]
            out += [f"- **{c.what}**{f' ({c.commit})' if c.commit else ''}: {c.change}" for c in s.changed]
            out.append("")
        if s.migration:
            out += [f"**Upgrading an adapter**: {s.migration}", ""]
    return "\n".join(out).rstrip() + "\n"


def fixes_markdown() -> str:
    """docs/adapters.md's table: every check, its rule, and what to change when it fails."""
    from ..checks.invariants import BY_ID
    from ..checks.rubric import POINT_OF

    rows = ["| check | point | its rule | what to change | see |", "|---|---|---|---|---|"]
    for cid, check in BY_ID.items():
        fix = ruleset.fix(cid)
        rows.append(f"| {cid} | {POINT_OF[cid].id} | {_md(check.statement)} | {_md(fix.text if fix else '')} | "
                    f"{_md(fix.section if fix else '')} |")
    return "\n".join(rows) + "\n"
