"""What moved between two results JSON (``crashlab compare --results OLD --results NEW``): the
rubric points lost or regained, the scenarios whose verdict changed, the checks that fire in
one and not the other, and why, as far as the rule sets tell: a check or a scenario new
since the older results' rule set, or a rule that changed (CHANGELOG.md), else the adapter.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..rules import ruleset
from ..vocab.errors import UsageError, clip
from ..vocab.results import LostPoint, Scorecard


@dataclass(frozen=True, slots=True)
class Moves:
    """Every line ``compare --results`` prints, and whether anything moved."""

    lines: tuple[str, ...]
    moved: bool


def read(path: Path) -> Scorecard:
    """A results JSON as a Scorecard; a usage error naming the file otherwise."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        from ..checks.rubric import scorecard_from_json

        return scorecard_from_json(data)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise UsageError(f"{path}: not a crashlab results JSON ({clip(exc, 200)})",
                         hint="give files written by crashlab conformance --json") from None


def whats_new(paths) -> list[str]:
    """What is new since each results JSON among ``paths`` that an older rule set judged
    (``crashlab report`` prints each as a "what's new since your last run" line)."""
    notes = []
    for name in paths:
        if not str(name).endswith(".json"):
            continue
        try:
            data = json.loads(Path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and "score" in data:
            note = ruleset.note_for(data.get("rules"), str(name))
            if note:
                notes.append(note)
    return notes


def _new_since(version: object) -> tuple[set[str], set[str], list[ruleset.Change]]:
    """The checks and scenarios added, and the rules changed, after rule set ``version`` (a
    results JSON without one predates rule set 2: everything since rule set 1)."""
    base = version if isinstance(version, int) and not isinstance(version, bool) else 1
    checks, scenarios, changed = set(), set(), []
    for s in ruleset.since(base):
        checks.update(s.added_checks)
        scenarios.update(s.added_scenarios)
        changed.extend(s.changed)
    return checks, scenarios, changed


def _why(invariant: str, scenario: str, old_rules: object, new_rules: object) -> str:
    if old_rules == new_rules:
        return "same rule set: the adapter's behaviour changed"
    checks, scenarios, changed = _new_since(old_rules)
    if scenario in scenarios:
        return f"{scenario} is a scenario new since rule set {old_rules or 1}"
    if invariant in checks:
        return f"{invariant} is a check new since rule set {old_rules or 1}"
    touched = [c for c in changed if invariant in c.what or scenario in c.what
               or (invariant.startswith("EXP-") and "EXP-*" in c.what)]
    if touched:
        return f"{touched[0].what} changed: {touched[0].change}"
    return "no listed rule change covers it: the adapter's behaviour changed, or a refinement did"


def _by_point(card: Scorecard) -> dict[str, list[LostPoint]]:
    out: dict[str, list[LostPoint]] = {}
    for lp in card.lost:
        out.setdefault(lp.point.split(" ", 1)[0], []).append(lp)
    return out


def _unshown(card: Scorecard, point: str) -> str | None:
    """"not exercised" / "not recorded" for a point the card cannot show kept, else None."""
    return "not exercised" if point in card.not_exercised else "not recorded" if point in card.not_recorded else None


def moves(old: Scorecard, new: Scorecard, names: tuple[str, str] = ("old", "new")) -> Moves:
    """What moved from ``old`` to ``new``, point by point, scenario by scenario, check by check."""
    r_old, r_new = old.extra.get("rules"), new.extra.get("rules")
    lines = [f"{names[0]}: {old.adapter}, {old.score_text()}, rule set {r_old or '(none named: 1 or earlier)'}",
             f"{names[1]}: {new.adapter}, {new.score_text()}, rule set {r_new or '(none named: 1 or earlier)'}"]
    if r_old != r_new:
        note = ruleset.note_for(r_old, names[0])
        lines.append(f"what's new since your last run: {note or 'rule set ' + str(r_new)}")
    moved = False
    lost_old, lost_new = _by_point(old), _by_point(new)
    order = [p.get("id") for p in new.extra.get("rubric") or old.extra.get("rubric") or () if isinstance(p, dict)]
    order += sorted((set(lost_old) | set(lost_new)) - set(order))
    for point in order:
        a, b = lost_old.get(point, []), lost_new.get(point, [])
        if bool(a) == bool(b):
            continue
        moved = True
        lp = (b or a)[0]
        state = "lost" if b else "regained"
        lines.append(f"{lp.point}: {state} ({lp.invariant} in {lp.scenario}: {clip(lp.message, 160)})")
        lines.append(f"  why: {_why(lp.invariant, lp.scenario, r_old, r_new) if b else 'no finding costs it now'}")
    for point in order:   # kept in one, not shown exercised in the other (neither lost)
        a, b = _unshown(old, point), _unshown(new, point)
        if a != b and point not in lost_old and point not in lost_new:
            moved = True
            lines.append(f"{point}: {b or 'kept'} (was {a or 'kept'})"
                         + ("; no selected scenario exercised its rules" if b == "not exercised" else ""))
    sc_old = {s.id: s for s in old.scenarios}
    sc_new = {s.id: s for s in new.scenarios}
    for sid in [s.id for s in new.scenarios] + [s.id for s in old.scenarios if s.id not in sc_new]:
        a, b = sc_old.get(sid), sc_new.get(sid)
        if a is None:
            moved = True
            lines.append(f"{sid}: new scenario, {b.verdict}" + (f" ({_why('', sid, r_old, r_new)})"
                                                                if r_old != r_new else ""))
            continue
        if b is None:
            moved = True
            lines.append(f"{sid}: no longer run (was {a.verdict})")
            continue
        fired_a = {v.invariant for v in a.violations}
        fired_b = {v.invariant for v in b.violations}
        if a.verdict == b.verdict and fired_a == fired_b:
            continue
        moved = True
        change = [f"+{i} ({_why(i, sid, r_old, r_new)})" for i in sorted(fired_b - fired_a)]
        change += [f"-{i}" for i in sorted(fired_a - fired_b)]
        lines.append(f"{sid}: {a.verdict} -> {b.verdict}" + (f"; checks {'; '.join(change)}" if change else ""))
    if not moved:
        lines.append("nothing moved: the same points, verdicts and checks")
    return Moves(lines=tuple(lines), moved=moved)


def cmd(paths: list[str], out) -> int:
    """``compare --results OLD --results NEW``: print what moved; 0 when nothing did, else 1."""
    if len(paths) != 2:
        raise UsageError(f"compare --results needs exactly two results JSON (older first), got {len(paths)}")
    old, new = (read(Path(p)) for p in paths)
    found = moves(old, new, names=(paths[0], paths[1]))
    for line in found.lines:
        print(line, file=out)
    return 1 if found.moved else 0
