"""The detection matrix: every gallery adapter run on every scenario, and what caught it.

``python tools/docgen.py`` runs the reference adapter and every entry of
:data:`gallery.ENTRIES` on the library scenarios, then writes docs/detection-matrix.md (adapters x invariants and
adapters x rubric points, each cell naming the first scenario that exposes it) and
docs/gallery.md (the workshop exhibits). ``--check`` compares instead of writing and
exits 1 when a document is stale. The score is the conformance score.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crashlab.checks import INVARIANTS
from crashlab.checks.rubric import CATEGORY_MAX, RUBRIC, point_for, score
from crashlab.run.conformance import run_one
from crashlab.run.drivers import load_adapter
from crashlab.vocab.results import ScenarioResult, Scorecard
from crashlab.vocab.compiled import Scenario
from crashlab.scenario.loader import library

from . import ENTRIES, Entry, changes

DOCS = Path(__file__).resolve().parent.parent / "docs"
REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
SAFETY = frozenset(i.id for i in INVARIANTS if i.safety)
_INVARIANT_ORDER = {inv.id: n for n, inv in enumerate(INVARIANTS)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One adapter on every scenario."""

    entry: Entry | None                          # None: the reference adapter
    card: Scorecard                              # the conformance score (library scenarios)
    results: tuple[ScenarioResult, ...]          # one per library scenario

    @property
    def name(self) -> str:
        return self.entry.id if self.entry else "reference"

    @property
    def adapter(self) -> str:
        return self.entry.adapter if self.entry else REFERENCE

    def caught(self) -> dict[str, list[str]]:
        """invariant -> scenarios (in run order) where it was violated."""
        out: dict[str, list[str]] = {}
        for res in self.results:
            for v in res.violations:
                ids = out.setdefault(v.invariant, [])
                if res.id not in ids:
                    ids.append(res.id)
        return dict(sorted(out.items(), key=lambda kv: _INVARIANT_ORDER.get(kv[0], 99)))

    def lost(self) -> dict[str, list[str]]:
        """rubric point -> scenarios (in run order) that take it away."""
        out: dict[str, list[str]] = {}
        for res in self.results:
            for v in res.violations:
                point = point_for(v, tuple(res.tags))
                if point is not None:
                    ids = out.setdefault(point.id, [])
                    if res.id not in ids:
                        ids.append(res.id)
        order = {p.id: n for n, p in enumerate(RUBRIC)}
        return dict(sorted(out.items(), key=lambda kv: order[kv[0]]))

    def categories(self) -> list[str]:
        by_point = {p.id: p.category for p in RUBRIC}
        return sorted({by_point[p] for p in self.lost()}, key=list(CATEGORY_MAX).index)

    def safety_violations(self) -> dict[str, list[str]]:
        return {k: v for k, v in self.caught().items() if k in SAFETY}


def evaluate(adapter: str, entry: Entry | None = None, scenarios: list[Scenario] | None = None) -> Outcome:
    spec = load_adapter(adapter)
    results = [run_one(s, spec)[1] for s in (library() if scenarios is None else scenarios)]
    return Outcome(entry=entry, card=score(results, adapter=spec.text, seed=None), results=tuple(results))


def evaluate_all(entries: tuple[Entry, ...] = ENTRIES) -> list[Outcome]:
    lib = library()
    return [evaluate(REFERENCE, None, lib)] + [evaluate(e.adapter, e, lib) for e in entries]


# --------------------------------------------------------------------------- rendering
def _codes() -> dict[str, str]:
    """A short code per library scenario: S01, S02, ..."""
    return {s.id: f"S{n:02d}" for n, s in enumerate(library(), 1)}


def _cell(ids: list[str], codes: dict[str, str]) -> str:
    if not ids:
        return ""
    return codes[ids[0]] + (f" +{len(ids) - 1}" if len(ids) > 1 else "")


def _score(o: Outcome) -> str:
    idle = [f"{', '.join(ids)} {state}" for state, ids in (("not exercised", o.card.not_exercised),
                                                             ("not recorded", o.card.not_recorded)) if ids]
    return (f"{o.card.total}/{o.card.max}" + (" (auto-fail)" if o.card.auto_fail else "")
            + (f" ({'; '.join(idle)})" if idle else ""))


def _caught_by(o: Outcome) -> str:
    """Whether a generic invariant catches the adapter, or only scenario expectations."""
    caught = o.caught()
    generic = [inv for inv in caught if not inv.startswith("EXP-")]
    if generic:
        return "generic invariant"
    return "scenario expectation only" if caught else "nothing"


def render_matrix(outcomes: list[Outcome]) -> str:
    codes = _codes()
    lib = library()
    fired = {inv for o in outcomes for inv in o.caught()}
    expected = {inv for o in outcomes if o.entry for inv in o.entry.invariants}
    columns = [i.id for i in INVARIANTS if i.id in fired | expected]
    lines = [
        "# Detection matrix",
        "",
        "<!-- generated by `python tools/docgen.py`; edit gallery/ -->",
        "",
        "Every adapter of the gallery (docs/gallery.md) run on every library scenario. The "
        "reference adapter is the control row. A cell names the first scenario that exposes the invariant or loses the point "
        "(codes below), with the number of further scenarios; **bold** marks what the entry's "
        "registry says must catch it. The score is the conformance score; "
        "a correct alternative must have no cell in a safety column (marked *).",
        "",
        "## Summary",
        "",
        "The *caught by* column says whether a generic invariant (computed from the trace alone, so it "
        "holds for any scenario and any generated schedule) catches a mistake, or only a scenario's "
        "expectations do.",
        "",
        "| adapter | kind | score | automatic failure | expected invariants | caught by | caught (safety) | categories losing points |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        kind = "control" if o.entry is None else ("correct alternative" if o.entry.correct else "mistake")
        expected_inv = ", ".join(o.entry.invariants) if o.entry else ""
        safety = ", ".join(o.safety_violations()) or "none"
        lines.append(f"| `{o.adapter}` | {kind} | {_score(o)} | {'; '.join(o.card.auto_fail) or '-'} | "
                     f"{expected_inv or '-'} | {_caught_by(o)} | {safety} | {', '.join(o.categories()) or '-'} |")
    lines += ["", "## Adapters x invariants", "",
              "| adapter | " + " | ".join(f"{c}{'*' if c in SAFETY else ''}" for c in columns) + " |",
              "|---|" + "---|" * len(columns)]
    for o in outcomes:
        caught = o.caught()
        cells = []
        for c in columns:
            text = _cell(caught.get(c, []), codes)
            if o.entry and c in o.entry.invariants:
                text = f"**{text or 'MISSING'}**"
            elif o.entry and c in o.entry.gaps:
                text = text or "gap"
            cells.append(text)
        lines.append(f"| {o.name} | " + " | ".join(cells) + " |")
    lines += ["", "## Adapters x rubric points", "",
              "| adapter | score | " + " | ".join(p.id for p in RUBRIC) + " |",
              "|---|---|" + "---|" * len(RUBRIC)]
    for o in outcomes:
        lost = o.lost()
        cats = " ".join(f"{o.card.categories[c]['score']}/{m}" for c, m in CATEGORY_MAX.items())
        lines.append(f"| {o.name} | {o.card.total} ({cats}) | "
                     + " | ".join("not exercised" if p.id in o.card.not_exercised else _cell(lost.get(p.id, []), codes)
                                  for p in RUBRIC) + " |")
    lines += ["", "Rubric points: " + "; ".join(f"{p.id} {p.name}" for p in RUBRIC) + ".",
              "", "## What caught each adapter", ""]
    for o in outcomes:
        if o.entry is None:
            continue
        lines.append(f"### {o.entry.id}: {_score(o)}")
        lines.append("")
        if o.card.auto_fail:
            lines.append(f"Automatic failure: {'; '.join(o.card.auto_fail)}.")
            lines.append("")
        for inv, ids in o.caught().items():
            tag = " (expected)" if inv in o.entry.invariants else ""
            lines.append(f"- {inv}{tag}: {_scenario_list(ids, codes, limit=4)}")
        if not o.caught():
            lines.append("- nothing")
        for gap in o.entry.gaps:
            lines.append(f"- {gap}: not raised (a gap; see docs/gallery.md)")
        lines.append("")
    lines += ["## Scenario codes", "", "| code | scenario | tags |", "|---|---|---|"]
    for s in lib:
        lines.append(f"| {codes[s.id]} | {s.id} | {', '.join(s.tags)} |")
    return "\n".join(lines) + "\n"


def render_gallery(outcomes: list[Outcome]) -> str:
    codes = _codes()
    lines = [
        "# The gallery: spot the bug",
        "",
        "<!-- generated by `python tools/docgen.py`; edit gallery/__init__.py -->",
        "",
        "Each exhibit is the reference adapter (reference_impl/) with **one** decision replaced "
        "through its `Behaviour` seams (reference_impl/behaviour.py). For a workshop, show the "
        "statement and the adapter's source, ask which passage of AR-08 it violates and which trace "
        "would expose it, then reveal the rest. Run one with "
        "`crashlab conformance --adapter gallery.<module>:<Class>`; regenerate this page and the "
        "detection matrix (docs/detection-matrix.md) with `python tools/docgen.py`.",
        "",
        "Scenario codes (S01...) are listed in docs/detection-matrix.md.",
        "",
    ]
    mistakes = [o for o in outcomes if o.entry is not None and not o.entry.correct]
    correct = [o for o in outcomes if o.entry is not None and o.entry.correct]
    lines += ["## Mistakes", ""]
    for n, o in enumerate(mistakes, 1):
        lines += _exhibit(n, o, codes)
    lines += ["## Correct alternatives", "",
              "Legitimate choices that differ from the reference's. None of them fails a safety "
              "invariant; what they lose is an expectation a scenario wrote for the reference's choice.", ""]
    for n, o in enumerate(correct, 1):
        lines += _exhibit(n, o, codes)
    return "\n".join(lines).rstrip() + "\n"


def _exhibit(n: int, o: Outcome, codes: dict[str, str]) -> list[str]:
    e = o.entry
    caught = o.caught()
    lines = [f"### {n}. {e.id}", "",
             f"- **{'choice' if e.correct else 'mistake'}**: {e.statement}",
             f"- **chapter**: \u201c{e.quote}\u201d ({e.section})",
             f"- **changed decision**: {'; '.join(changes(e))}",
             f"- **adapter**: `{e.adapter}`: {_score(o)}"
             + (f", automatic failure: {'; '.join(o.card.auto_fail)}" if o.card.auto_fail else "")]
    if e.correct:
        lost = ", ".join(f"{inv} ({_scenario_list(ids, codes)})" for inv, ids in caught.items())
        lines.append(f"- **safety invariants failed**: {', '.join(o.safety_violations()) or 'none'}")
        lines.append(f"- **expectation points lost**: {lost or 'none'}")
    else:
        must = ", ".join(e.invariants)
        lines.append(f"- **caught by**: {must}"
                     + (f" (automatic failure: {e.auto_fail})" if e.auto_fail else "")
                     + f"; rubric {', '.join(e.categories)}")
        for inv in e.invariants:
            lines.append(f"  - {inv}, exposed by {_scenario_list(caught.get(inv, []), codes)}")
        extra = [inv for inv in caught if inv not in e.invariants]
        if extra:
            lines.append(f"- **also reported**: {', '.join(extra)}")
        if e.gaps:
            lines.append(f"- **should also be caught by**: {', '.join(e.gaps)} (not raised today)")
    if e.note:
        lines.append(f"- **note**: {e.note}")
    lines.append("")
    return lines


def _scenario_list(ids: list[str], codes: dict[str, str], limit: int = 3) -> str:
    if not ids:
        return "no scenario"
    shown = ", ".join(f"{i} ({codes[i]})" for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


DOCUMENTS = {"detection-matrix.md": render_matrix, "gallery.md": render_gallery}
