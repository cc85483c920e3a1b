"""The rule set: which rules judge a run, and how they changed from one release to the next.

A verdict depends on the scenarios, the invariants, the rubric routing and crashlab's own
refinements. Together they are the **rule set**, numbered 1, 2, ...: the number moves
whenever a verdict can change, and it is recorded in every trace header (``rules``) and every
results JSON (``rules``). ``crashlab conformance --rules N`` pins the rule set a project
certified against: the run goes on when the installed crashlab judges by that set, or can
judge exactly as it did (every later set only added checks and scenarios: they are left out),
and otherwise says what changed since (CHANGELOG.md has the same entries, generated from here).

The data is ``crashlab/data/rules.json``: the history of the sets and, for every check, the
one-line change an adapter makes when it fails and the docs/adapters.md section that explains
it (:func:`fix`). The rule text of a check is its own statement (crashlab.checks) and the
point it costs is the rubric's (crashlab.checks.rubric); the scorecard, docs/adapters.md,
docs/invariants.md and CHANGELOG.md all read them from there, never from a copy.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version as _pkg_version
from pathlib import Path

from ..vocab.errors import UsageError, clip

DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "rules.json"
ADAPTERS_DOC = "docs/adapters.md"


@functools.cache
def package_version() -> str:
    """The installed crashlab's version (``crashlab --version``; the trace header's ``harness``)."""
    try:
        return _pkg_version("crashlab")
    except PackageNotFoundError:
        return "0+source"


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One rule that changed in a rule set: what (checks, a scenario, the rubric), how, where."""

    what: str
    change: str
    commit: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleSet:
    """One numbered rule set: the package release that first shipped it and what it changed."""

    version: int
    package: str
    date: str
    checks: int
    scenarios: int
    summary: str
    commit: str = ""
    fingerprint: str = ""           # checks.fingerprint.fingerprint() of what it declares (recorded from rule set 2 on)
    added_checks: tuple[str, ...] = ()
    added_scenarios: tuple[str, ...] = ()
    changed: tuple[Change, ...] = ()
    migration: str = ""

    def counts(self) -> str:
        """``9 new checks, 17 new scenarios, 10 changed rules``: what this set changed, counted."""
        parts = [(len(self.added_checks), "new check"), (len(self.added_scenarios), "new scenario"),
                 (len(self.changed), "changed rule")]
        return ", ".join(f"{n} {what}{'s' if n != 1 else ''}" for n, what in parts if n) or "no change"


@dataclass(frozen=True, slots=True)
class Fix:
    """What an adapter changes when a check fails: one line, and the section of
    docs/adapters.md that explains it."""

    section: str
    text: str

    @property
    def where(self) -> str:
        return f'{ADAPTERS_DOC}, "{self.section}"'


def _load(path: Path = DATA_PATH) -> tuple[int, tuple[RuleSet, ...], dict[str, Fix]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    sets = []
    for raw in data["sets"]:
        changed = tuple(Change(**c) for c in raw.get("changed", ()))
        sets.append(RuleSet(**{**raw, "changed": changed,
                               "added_checks": tuple(raw.get("added_checks", ())),
                               "added_scenarios": tuple(raw.get("added_scenarios", ()))}))
    numbers = [s.version for s in sets]
    if numbers != list(range(1, len(sets) + 1)) or data["current"] != numbers[-1]:
        raise ValueError(f"{path}: rule sets must be numbered 1, 2, ... with the last current, got {numbers}")
    fixes = {k: Fix(section, text) for k, (section, text) in data["fix"].items()}
    return data["current"], tuple(sets), fixes


RULES, SETS, FIXES = _load()
CURRENT: RuleSet = SETS[-1]


def fix(check_id: str) -> Fix | None:
    """The change an adapter makes when the check ``check_id`` fails."""
    return FIXES.get(check_id)


def since(version: int) -> tuple[RuleSet, ...]:
    """The rule sets after ``version`` up to the current one (empty when it is current)."""
    return tuple(s for s in SETS if s.version > version)


def what_changed(version: int, *, brief: bool = False) -> list[str]:
    """One line per rule set since ``version``: its number, release and what it changed; then
    every changed rule (``brief``: only what changed, on one line). Empty when ``version`` is
    the current set."""
    lines = []
    for s in since(version):
        lines.append(f"rule set {s.version} (crashlab {s.package}, {s.date}): {s.counts()}")
        if s.added_checks:
            lines.append(f"  new checks: {', '.join(s.added_checks)}")
        if s.added_scenarios:
            lines.append(f"  new scenarios: {', '.join(s.added_scenarios)}")
        if brief and s.changed:
            lines.append(f"  changed: {'; '.join(c.what for c in s.changed)}")
        elif s.changed:
            lines.extend(f"  changed {c.what}: {c.change}" for c in s.changed)
    return lines


def parse_version(text: str, where: str = "--rules") -> int:
    """A rule-set number as given on the command line (``2``, ``rules-2``); a usage error
    naming the known sets otherwise."""
    raw = str(text).strip().lower().removeprefix("rules").strip(" -=")
    if not raw.isdigit():
        raise UsageError(f"{where}: {clip(text, 40)!r} is not a rule-set number; the known rule sets are "
                         f"{', '.join(str(s.version) for s in SETS)} (this crashlab judges by {RULES})")
    return int(raw)


def runnable(version: int) -> bool:
    """Whether this crashlab can judge exactly as rule set ``version`` did: every later set only
    added checks and scenarios (leaving them out gives the older verdicts), none changed one."""
    return 1 <= version <= RULES and not any(s.changed for s in since(version))


def selection(version: int | None) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(the ids of the checks of rule set ``version``, the library scenarios added after it) for
    a runnable older set; (None: every check, nothing left out) for the current one or None."""
    if version is None or version == RULES:
        return None, frozenset()
    if not runnable(version):
        raise UsageError(f"rule set {version} cannot be run by this crashlab (rule set {RULES}): rules changed since")
    BY_ID = FIXES  # every check has its one-line fix (tests/test_rubric.py: the same ids)

    later = since(version)
    added = {c for s in later for c in s.added_checks}
    return frozenset(set(BY_ID) - added), frozenset(x for s in later for x in s.added_scenarios)


def check_pinned(text: str) -> int:
    """``--rules VERSION``: the pinned rule set when this crashlab judges by it, or can still
    judge exactly as it did (:func:`runnable`: later sets only added checks and scenarios); a
    usage error otherwise that says what changed since it (or that it is newer than this
    crashlab), so that no verdict of another rule set passes for one of the pinned set."""
    wanted = parse_version(text)
    if wanted == RULES or runnable(wanted):
        return wanted
    head = f"--rules {wanted}: this crashlab ({package_version()}) judges by rule set {RULES}"
    if wanted > RULES:
        raise UsageError(f"{head}; rule set {wanted} is newer than this crashlab",
                         hint=f"upgrade crashlab to a release with rule set {wanted} (CHANGELOG.md)")
    old = SETS[wanted - 1] if wanted >= 1 else None
    if old is None:
        raise UsageError(f"{head}; there is no rule set {wanted} (the first is 1)")
    changed = "\n".join(what_changed(wanted, brief=True))
    raise UsageError(f"{head}, not by rule set {wanted} (crashlab {old.package}), which your project pinned, and "
                     f"cannot judge as it did: rules changed since, not only new ones were added. What changed "
                     f"(CHANGELOG.md has each rule with what to change):\n"
                     f"{changed}",
                     hint=f"verdicts of rule set {RULES} may differ from your certified ones; to move to it, read "
                          f"CHANGELOG.md (each rule with what to change) and pin --rules {RULES}; to keep "
                          f"rule set {wanted}, keep crashlab {old.package}")


def note_for(version: object, what: str) -> str | None:
    """A "what's new" line for a trace or results JSON written under an older rule set (or
    one that names none: written before rule sets were numbered), or None when current."""
    if version == RULES:
        return None
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= RULES:
        if version is None:
            return (f"{what} names no rule set (written before crashlab 0.2.0, under rule set 1 or earlier); "
                    f"this crashlab judges by rule set {RULES} ({CURRENT.counts()}; CHANGELOG.md)")
        return f"{what} names rule set {clip(version, 20)}, which this crashlab (rule set {RULES}) does not know"
    news = "; ".join(f"rule set {s.version}: {s.counts()}" for s in since(version))
    return f"{what} names rule set {version}; this crashlab judges by rule set {RULES} ({news}; CHANGELOG.md)"
