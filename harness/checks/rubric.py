"""The twenty-point rubric of AR-08 "Assess the eight traces", as an explicit mapping.

Classification 5, ownership 4, effect correctness 6, disposition 5. Each point names the
invariants that can take it away and the chapter passage that defines it; a point is lost
when any of them fails in any scenario, and the scorecard names the scenario, the finding,
the rule and the evidence events for every loss. A scenario expectation miss (EXP-*) takes
the point its scenario's ``expect.rules`` names, else the point of its kind
(crashlab.checks.rules.KIND_POINT); no scenario tag routes anything.

A point is kept only when some selected scenario exercised it: at least one of its invariants
was held on events it had to judge, or violated (crashlab.checks.exercised decides which; each
ScenarioResult carries the record as ``exercised``). A point no scenario exercised is "not
exercised" (or "not recorded", for results that carry no record): never kept, never lost, and
the verdict is at best unknown.

A violation counts against the point it is charged to (its routed point, :func:`point_for`) on
every face; a point's own check violated but charged by its scenario's rule to another point still
exercised it, costs it nothing, and is named where the point is shown (crashlab.checks.exercised.
charged_elsewhere). Under an automatic failure the score line also gives the points kept otherwise.

A point is earned by what the adapter did, never by default: an adapter that faulted in every
run of every selected scenario before reaching any disposition (it crashed, raised, hung, wrote
garbage or never finished) loses every point, each loss naming the adapter fault.

The chapter's three scoring rules (crashlab.checks.rules): a blind retry is an automatic
failure only when the resend could duplicate; two live recovery workers able to cause
effects at once zero the ownership category; a key without defined intent caps effect
correctness at one point.

Automatic failure (total 0): an exactly-once claim, a blind ambiguous retry, compensation
as rollback, a checkpoint without version or owner, two retry owners.

docs/rubric.md is generated from this module (``python tools/docgen.py``).
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from ..rules import ruleset
from ..vocab.errors import CrashlabError, UsageError, clip
from .exercised import charged_elsewhere, coverage, elsewhere_heads, listed
from ..vocab.results import LostPoint, ScenarioResult, Scorecard, Violation, outcome_text
from .invariants import BY_ID
from .rules import KEY_WITHOUT_INTENT, TWO_LIVE_WORKERS

CATEGORY_MAX: dict[str, int] = {"classification": 5, "ownership": 4, "effect_correctness": 6,
                                "disposition": 5}
AUTO_FAIL_REASONS: tuple[str, ...] = ("exactly-once claim", "blind ambiguous retry",
                                      "compensation as rollback", "checkpoint without version or owner",
                                      "two retry owners")

_ASSESS = "AR-08, Assess the eight traces"
_CLASSIFY = ("Full credit requires distinguishing caller observation from effect truth and naming the "
             "evidence needed.")
_OWNERSHIP = ("Four ownership points require one current lease holder, fenced stale workers, a single retry "
              "owner, and an explicit accountable operator for unresolved states.")
_EFFECTS = ("Six effect-correctness points cover stable semantic identity, same-intent deduplication, "
            "changed-intent rejection, authoritative reconciliation, separate compensation, and "
            "preservation of effect history.")
_DISPOSITION = ("Five disposition points require each trace to end in a truthful terminal or durable waiting "
                "state, with cancellation and residual effects visible.")


@dataclass(frozen=True, slots=True, kw_only=True)
class RubricPoint:
    id: str                          # C1 ... D5
    category: str
    name: str                        # the chapter's wording
    invariants: tuple[str, ...]      # the invariants that take this point away
    source: str = _ASSESS            # the chapter passage that defines the point ...
    quote: str = ""                  # ... in its own words

    def to_json(self) -> dict:
        return {"id": self.id, "category": self.category, "name": self.name,
                "invariants": list(self.invariants), "source": self.source, "quote": self.quote}


def _p(id, category, name, invariants, quote, source=_ASSESS) -> RubricPoint:
    return RubricPoint(id=id, category=category, name=name, invariants=tuple(invariants), source=source,
                       quote=quote)


RUBRIC: tuple[RubricPoint, ...] = (
    _p("C1", "classification", "caller observation is distinguished from effect truth", ["TRUTH-01"], _CLASSIFY),
    _p("C2", "classification", "the evidence needed is named", ["EVID-01", "EXP-EVIDENCE", "EXP-ABSENT"], _CLASSIFY),
    _p("C3", "classification", "timeouts are distinguished: pre-send versus ambiguous", ["RETRY-01", "CLS-03"],
       "A learner loses points for treating every timeout alike, but automatic failure is reserved for blind "
       "retry of an ambiguous non-idempotent effect."),
    _p("C4", "classification", "throttling, validation, permission and incompatibility are classified",
       ["CLS-01", "CLS-02", "AUTH-02", "MIG-01", "PIN-01"],
       "A validation failure stops. A transient read may retry within a bound. Throttling uses coordinated "
       "backoff and seeded jitter.", "AR-08, Classify before retrying"),
    _p("C5", "classification", "no knowledge upgrade without evidence", ["KNOW-01", "KNOW-02", "LATE-01"],
       "The ledger never upgrades SENT_UNKNOWN to failure because a deadline elapsed.",
       "AR-08, Effect ledger and semantic identity"),
    _p("O1", "ownership", "one current lease holder", ["OWN-02", "OWN-03", "CKPT-01", "LEASE-01"], _OWNERSHIP),
    _p("O2", "ownership", "stale workers are fenced", ["OWN-01", "FENCE-01"], _OWNERSHIP),
    _p("O3", "ownership", "a single retry owner with a bounded budget", ["RETRY-03", "RETRY-02", "JIT-01", "DEAD-02"], _OWNERSHIP),
    _p("O4", "ownership", "an accountable operator for unresolved states", ["OWN-04", "PKT-01", "PKT-02", "MSG-01"], _OWNERSHIP),
    _p("E1", "effect_correctness", "stable semantic identity", ["PREP-01", "KEY-01", "PREP-02"], _EFFECTS),
    _p("E2", "effect_correctness", "same-intent deduplication", ["EFF-01", "EFF-02", "EVT-01", "EVT-02", "EXP-EFFECTS"],
       _EFFECTS),
    _p("E3", "effect_correctness", "changed-intent rejection (and live authority for the intent)",
       ["KEY-02", "KEY-03", "AUTH-01"], _EFFECTS),
    _p("E4", "effect_correctness", "authoritative reconciliation", ["REC-01", "REC-02"], _EFFECTS),
    _p("E5", "effect_correctness", "compensation is a separate effect", ["COMP-01"], _EFFECTS),
    _p("E6", "effect_correctness", "effect history is preserved", ["HIST-01"], _EFFECTS),
    _p("D1", "disposition", "a truthful terminal or durable waiting state", ["DISP-01", "ADAPTER-FAULT",
                                                                             "EXP-DISPOSITION", "EXP-DISPOSITION-AT", "DEAD-01"], _DISPOSITION),
    _p("D2", "disposition", "cancellation is visible", ["CANCEL-01", "CANCEL-02"], _DISPOSITION),
    _p("D3", "disposition", "residual effects are visible", ["DISP-02"], _DISPOSITION),
    _p("D4", "disposition", "unknown stays unknown, with a next owner", ["TRUTH-02"],
       "The learner must state what effect exists or remains unknown and who acts next."),
    _p("D5", "disposition", "terminal is terminal", ["TERM-01"],
       "Apply cancellation and terminal state before other transitions.", "AR-08, Runbook: lost owner"),
)

BY_POINT: dict[str, RubricPoint] = {p.id: p for p in RUBRIC}
#: check id -> the rubric point it costs (an expectation whose scenario rule names another point costs that one).
POINT_OF: dict[str, RubricPoint] = {}
for _point in RUBRIC:
    for _inv in _point.invariants:
        POINT_OF.setdefault(_inv, _point)
_BY_INVARIANT = POINT_OF


@dataclass(frozen=True, slots=True, kw_only=True)
class Cap:
    """One of the chapter's scoring rules that bounds a whole category."""

    rule: str                        # crashlab.checks.rules: the finding's ``cap``
    category: str
    limit: int                       # the category scores at most this
    source: str
    quote: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "category": self.category, "limit": self.limit, "source": self.source,
                "quote": self.quote}


CAPS: tuple[Cap, ...] = (
    Cap(rule=TWO_LIVE_WORKERS, category="ownership", limit=0, source=_ASSESS,
        quote="A design with two helpful recovery workers receives zero ownership points because the "
              "duplicate-effect risk is structural."),
    Cap(rule=KEY_WITHOUT_INTENT, category="effect_correctness", limit=1, source=_ASSESS,
        quote="Saying \u201cidempotency key\u201d without defining intent earns at most one of these points."),
)


def point_for(violation: Violation, tags: tuple[str, ...] = ()) -> RubricPoint | None:
    """The rubric point a violation takes away: the point its rule names (an expectation miss),
    else the point of its invariant. ``tags`` is accepted for older callers and ignored."""
    if violation.point is not None and violation.point in BY_POINT:
        return BY_POINT[violation.point]
    return _BY_INVARIANT.get(violation.invariant)


def rule_of(violation: Violation, point: RubricPoint) -> dict[str, str]:
    """The rule a finding broke, as the scorecard quotes it: an expectation's rule from its
    scenario, else the check's own statement (docs/invariants.md), else the point's passage."""
    if violation.rule:
        return violation.rule
    check = BY_ID.get(violation.invariant)
    if check is not None and not check.id.startswith("EXP-"):
        return {"source": f"crashlab {check.id} (docs/invariants.md)", "quote": check.statement}
    return {"source": point.source, "quote": point.quote}


def fix_of(check_id: str) -> dict[str, str] | None:
    """What to change when ``check_id`` fails, and where docs/adapters.md explains it."""
    found = ruleset.fix(check_id)
    return {"text": found.text, "see": found.where} if found else None


#: What a point is when no finding cost it: kept only when some selected scenario exercised it.
KEPT, LOST, NOT_EXERCISED, NOT_RECORDED = "kept", "lost", "not exercised", "not recorded"


def exercised_checks(result: ScenarioResult, events: list[dict], checks) -> tuple[str, ...]:
    """The checks (of ``checks``, ids) a trace exercised: violated, or held on events it had to
    judge (crashlab.checks.exercised decides which)."""
    cov = coverage(result, events, list(checks))
    return () if cov is None else cov.violated + cov.held


def point_states(results: list[ScenarioResult], lost: set[str]) -> dict[str, str]:
    """Per rubric point (in order): lost; kept when at least one of its invariants was exercised
    (held or violated) in at least one scenario; otherwise not exercised, or not recorded when
    some scenario carries no record of what it exercised (no trace was judged, or results
    written before the record existed)."""
    recorded = [set(r.exercised) for r in results if r.exercised is not None]
    unrecorded = len(recorded) < len(results)
    states = {}
    for p in RUBRIC:
        if p.id in lost:
            states[p.id] = LOST
        elif any(set(p.invariants) & ex for ex in recorded):
            states[p.id] = KEPT
        else:
            states[p.id] = NOT_RECORDED if unrecorded else NOT_EXERCISED
    return states


def tally(states: dict[str, str], capped: set[str]) -> dict[str, dict[str, int]]:
    """Each category's score (its kept points, at most its cap) and maximum."""
    categories = {}
    for name, maximum in CATEGORY_MAX.items():
        value = sum(1 for p in RUBRIC if p.category == name and states.get(p.id) == KEPT)
        for cap in CAPS:
            if cap.category == name and cap.rule in capped:
                value = min(value, cap.limit)
        categories[name] = {"score": value, "max": maximum}
    return categories


def verdict_of(verdicts: set[str], states: dict[str, str], total: int, auto_fail) -> str:
    """fail: a failing scenario, an automatic failure, a lost or capped point; unknown (the gate
    fails closed): nothing failed but some scenario was inconclusive or some point was not shown
    exercised; pass: every point exercised and kept."""
    exercised = sum(1 for s in states.values() if s in (KEPT, LOST))
    if "fail" in verdicts or auto_fail or total < exercised:
        return "fail"
    if "unknown" in verdicts or exercised < len(RUBRIC):
        return "unknown"
    return "pass"


def score(results: list[ScenarioResult], *, adapter: str, seed: int | None, rules: int | None = None) -> Scorecard:
    """Score scenario verdicts on the rubric; ``rules`` is the rule set that judged them (default:
    this crashlab's). A point no finding cost is kept only when a selected scenario exercised it
    (:func:`point_states`)."""
    lost: dict[str, list[LostPoint]] = {}
    seen: set = set()
    auto: set = set()
    capped: dict[str, list[str]] = {}
    for res in results:
        for v in res.violations:
            if v.auto_fail:
                auto.add(v.auto_fail)
            if v.cap:
                scenarios = capped.setdefault(v.cap, [])
                if res.id not in scenarios:
                    scenarios.append(res.id)
            point = point_for(v)
            # one entry per point, scenario, check and run; each expectation miss is its own entry
            key = (point.id if point else None, res.id, v.invariant, v.run, outcome_text(v.expected))
            if point is None or key in seen:
                continue
            seen.add(key)
            lost.setdefault(point.id, []).append(LostPoint(
                category=point.category, point=f"{point.id} {point.name}", scenario=res.id,
                invariant=v.invariant, events=v.events, message=v.message, run=v.run, rule=rule_of(v, point),
                expected=v.expected, observed=v.observed, cap=v.cap, fix=fix_of(v.invariant)))
    if results and all(_faulted_throughout(res) for res in results):
        first = next(v for v in results[0].violations if v.invariant == "ADAPTER-FAULT")
        for point in RUBRIC:       # nothing the adapter did demonstrates any point
            if point.id not in lost:
                lost[point.id] = [LostPoint(
                    category=point.category, point=f"{point.id} {point.name}", scenario=results[0].id,
                    invariant="ADAPTER-FAULT", run=first.run, events=first.events,
                    rule={"source": point.source, "quote": point.quote}, fix=fix_of("ADAPTER-FAULT"),
                    message=f"the adapter faulted in every run of every selected scenario ({len(results)}) "
                            "before reaching any disposition, so nothing it did demonstrates this point; "
                            f"the first: {first.message}")]
    states = point_states(results, set(lost))
    categories = tally(states, set(capped))
    auto_fail = tuple(r for r in AUTO_FAIL_REASONS if r in auto) + tuple(sorted(auto - set(AUTO_FAIL_REASONS)))
    total = 0 if auto_fail else sum(c["score"] for c in categories.values())
    maximum = sum(CATEGORY_MAX.values())
    verdict = verdict_of({r.verdict for r in results}, states, total, auto_fail)
    ordered = [lp for p in RUBRIC for lp in lost.get(p.id, ())]
    caps = [{**cap.to_json(), "scenarios": capped[cap.rule]} for cap in CAPS if cap.rule in capped]
    return Scorecard(adapter=adapter, seed=seed, total=total, max=maximum, categories=categories,
                     auto_fail=auto_fail, lost=tuple(ordered), scenarios=tuple(results), verdict=verdict,
                     not_exercised=tuple(k for k, s in states.items() if s == NOT_EXERCISED),
                     not_recorded=tuple(k for k, s in states.items() if s == NOT_RECORDED),
                     extra={"rubric": [p.to_json() for p in RUBRIC], "caps": caps, "rules": rules or ruleset.RULES,
                            "crashlab": ruleset.package_version()})


def scorecard_from_json(data, base: Path | None = None, *, traces=None, source: object = None) -> Scorecard:
    """A results JSON as a Scorecard (Scorecard.from_json), rescored when it was written before
    points were marked exercised (no ``score.exercised``): see :func:`rescored`.

    With ``traces`` (``crashlab report`` and ``merge``), nothing in the file is taken on trust
    where its evidence is at hand. ``traces(result)`` gives each scenario's saved trace as
    ``(path, events)``, None when the file kept none, or a string saying why it is not at hand;
    each trace is checked again (crashlab.checks.check_trace, by the checks of the file's rule
    set) and must show what the file says: the adapter, the scenario and seed in its header, the
    verdict, dispositions, violations, notes and what it exercised; and the file's score must be
    what its scenarios give. Any disagreement raises :class:`Contradicted` (one line per
    scenario), naming ``source``. ``extra["unchecked"]`` of the card returned maps each scenario
    whose verdict was not checked again to why."""
    card = Scorecard.from_json(data)
    fresh = "exercised" in data["score"]
    card = card if fresh else rescored(card, base)
    return card if traces is None else _against_traces(card, traces, source, fresh=fresh)


#: Why a scenario's verdict was not checked again, when its results kept no trace.
NOT_KEPT = "no trace was kept"


class Contradicted(UsageError):
    """A results file that the traces it names contradict (:func:`scorecard_from_json`): ``lines``
    has one line per scenario (each naming the trace, what the file says and what the trace
    shows), and one for a score its scenarios do not give."""

    def __init__(self, source: object, lines: list[str], adapter: str) -> None:
        self.source, self.lines, self.adapter = source, tuple(lines), adapter
        scenarios = sum(1 for line in lines if not line.startswith("the score: "))
        what = (f"{source}: {scenarios} scenario{'' if scenarios == 1 else 's'} say{'s' if scenarios == 1 else ''} "
                f"what {'its trace does' if scenarios == 1 else 'their traces do'} not show" if scenarios
                else f"{source}: its score is not what its scenarios give")
        todo = ("Nothing was written. The results and the traces come from different runs (a second run into the "
                "same folder overwrites the traces), or one was edited: run "
                f"`crashlab conformance --adapter {shlex.quote(adapter)} --out NEW/ --json NEW/results.json` "
                "into a fresh folder and use what it writes")
        super().__init__("\n  ".join([what + ":", *lines, todo]))


def _against_traces(card: Scorecard, traces, source: object, *, fresh: bool) -> Scorecard:
    """``card`` with ``extra["unchecked"]``, after checking each scenario against its trace."""
    checks, not_judged = _checks_for(card.extra.get("rules"))
    lines, unchecked = [], {}
    for res in card.scenarios:
        found = traces(res)
        if found is None or isinstance(found, str):
            unchecked[res.id] = found or NOT_KEPT
            continue
        path, events = found
        said, shown = _provenance(card.adapter, res, events[0] if events else {})
        if not_judged:
            unchecked[res.id] = not_judged
        else:
            a, b = _outcome_differs(res, _checked_again(events, path, checks), fresh, not events[0].get("expect"))
            said, shown = said + a, shown + b
        if said:
            lines.append(f"{res.id}: {path}: the results file says {'; '.join(said)}; the trace, checked again, "
                         f"shows {'; '.join(shown)}")
    if fresh and not not_judged:
        line = _score_differs(card)
        if line:
            lines.append(line)
    if lines:
        raise Contradicted(source, lines, card.adapter)
    return replace(card, extra={**card.extra, "unchecked": unchecked})


def _checks_for(rules: object) -> tuple[frozenset[str] | None, str]:
    """(the checks of rule set ``rules``, '') when this crashlab judges exactly as it did; else
    (None, why a verdict of that set cannot be checked again)."""
    version = 1 if rules is None else rules
    if isinstance(version, int) and not isinstance(version, bool) and ruleset.runnable(version):
        return ruleset.selection(version)[0], ""
    return None, (f"judged by rule set {rules if rules is not None else '1 or earlier'}, which this crashlab "
                  f"(rule set {ruleset.RULES}) cannot judge exactly as it did (CHANGELOG.md)")


def _provenance(adapter: str, res: ScenarioResult, head: dict) -> tuple[list[str], list[str]]:
    """What the trace's header says of where it came from, where the results say otherwise."""
    odd = [(name, claimed) for name, claimed in (("adapter", adapter), ("scenario", res.id), ("seed", res.seed))
           if head.get(name) != claimed]
    return [f"{n} {c}" for n, c in odd], [f"{n} {clip(head.get(n), 200)}" for n, _ in odd]


def _checked_again(events: list[dict], path: object, checks: frozenset[str] | None) -> ScenarioResult:
    """A saved trace judged again; one the checks cannot read is a usage error naming it."""
    from .verdict import check_trace

    try:
        return check_trace(events, trace_path=str(path), checks=checks)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc.message}", hint=exc.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        raise UsageError(f"{path}: cannot check this trace: an event does not have the shape crashlab writes "
                         f"({type(exc).__name__}: {clip(exc, 200)})",
                         hint="was it edited? docs/trace.md describes every event") from None


#: crashlab's own note on a result whose adapter ran in its process (crashlab.run.executors.UNTRUSTED).
_UNTRUSTED = "untrusted: "
#: crashlab's own note on a result whose expectations --services set aside (crashlab.probe.profile.profiled)
SET_ASIDE = "judged by the invariants only: --services "


def _outcome_differs(res: ScenarioResult, again: ScenarioResult, fresh: bool,
                     unexpected: bool) -> tuple[list[str], list[str]]:
    """What the results say of a scenario that its trace, checked again, does not show; ``unexpected``:
    its trace's header holds no expectation (a --services note saying they were set aside is true)."""
    said, shown = [_finding(v) for v in res.violations], [_finding(v) for v in again.violations]
    notes = [n for n in res.notes if not n.startswith(_UNTRUSTED) and not (unexpected and n.startswith(SET_ASIDE))]
    if (res.verdict, res.dispositions) != (again.verdict, again.dispositions):
        return [_outcome(res)], [_outcome(again)]
    if said != shown:
        return [_findings_text(res.violations, shown)], [_findings_text(again.violations, said)]
    if notes != list(again.notes):
        return [f"the notes {clip(notes, 200)}"], [f"the notes {clip(list(again.notes), 200)}"]
    if fresh and res.exercised != again.exercised:
        return [f"it exercised {', '.join(res.exercised or ()) or 'nothing recorded'}"], \
            [f"it exercised {', '.join(again.exercised or ()) or 'nothing'}"]
    return [], []


def _finding(v: Violation) -> str:
    return json.dumps(v.to_json(), sort_keys=True, default=str)     # every field, tuples and lists alike


def _outcome(r: ScenarioResult) -> str:
    """``FAIL (run-82: SUCCEEDED): RETRY-01 (automatic failure), EXP-DISPOSITION``."""
    runs = ", ".join(f"{run}: {d}" for run, d in r.dispositions.items())
    found: dict[str, int] = {}
    for v in r.violations:
        key = v.invariant + (" (automatic failure)" if v.auto_fail else "")
        found[key] = found.get(key, 0) + 1
    named = ", ".join(k + (f" ×{n}" if n > 1 else "") for k, n in found.items()) or "no violation"
    return f"{r.verdict.upper()}{f' ({runs})' if runs else ''}: {named}"


def _findings_text(violations, other: list[str]) -> str:
    """The findings not among ``other``'s (the first two, each with its run, cited events and message)."""
    odd = [v for v in violations if _finding(v) not in other]
    if not odd:
        return "the same findings in another order"
    text = "; ".join(f"{v.invariant} on {v.run} citing {', '.join(f'#{e}' for e in v.events[:6]) or 'no event'}: "
                     f"{clip(v.message, 120)!r}" for v in odd[:2])
    return f"{text}{f' and {len(odd) - 2} more' if len(odd) > 2 else ''}"


def _score_differs(card: Scorecard) -> str:
    """A line when the file's score is not what its scenarios give ('' when it is)."""
    again = score(list(card.scenarios), adapter=card.adapter, seed=card.seed, rules=card.extra.get("rules"))
    verdict = again.verdict
    if card.extra.get("partial") or (card.extra.get("internal_errors") and verdict == "pass"):
        verdict = "unknown"

    def shape(c: Scorecard, v: str) -> tuple:
        return (c.total, c.max, v, tuple(c.auto_fail), json.dumps(c.categories, sort_keys=True),
                tuple((lp.point.split(" ", 1)[0], lp.scenario, lp.invariant, lp.run) for lp in c.lost),
                tuple(c.not_exercised), tuple(c.not_recorded))

    if shape(card, card.verdict) == shape(again, verdict):
        return ""
    lost = lambda c: ", ".join(dict.fromkeys(lp.point.split(" ", 1)[0] for lp in c.lost)) or "none"  # noqa: E731
    return (f"the score: the results file says {card.score_text()}, {card.verdict}, points lost: {lost(card)}; "
            f"its scenarios give {again.score_text()}, {verdict}, points lost: {lost(again)}")


def rescored(card: Scorecard, base: Path | None = None) -> Scorecard:
    """A results file written before points were marked exercised: each scenario's record is
    computed from its saved trace when the file is there (``base``: the results file's folder),
    and a point no scenario is shown to exercise is not recorded, never kept. The findings, caps
    and automatic failures are the file's own; the total and verdict follow from them."""
    from ..world.trace import read_jsonl

    checks = _checks_of(card.extra.get("rules"))
    filled = []
    for res in card.scenarios:
        path = _saved(res.trace, base) if res.exercised is None else None
        if path is not None:
            try:
                events = read_jsonl(path)
            except (CrashlabError, OSError, ValueError):
                events = None
            if events and events[0].get("scenario") == res.id:
                res = replace(res, exercised=exercised_checks(res, events, checks))
        filled.append(res)
    states = point_states(filled, {lp.point.split(" ", 1)[0] for lp in card.lost})
    capped = {c.get("rule") for c in card.extra.get("caps") or () if isinstance(c, dict)}
    categories = tally(states, capped)
    total = 0 if card.auto_fail else sum(c["score"] for c in categories.values())
    verdicts = {r.verdict for r in filled} | {card.verdict}
    return replace(card, scenarios=tuple(filled), categories=categories, total=total,
                   verdict=verdict_of(verdicts, states, total, card.auto_fail),
                   not_exercised=tuple(k for k, s in states.items() if s == NOT_EXERCISED),
                   not_recorded=tuple(k for k, s in states.items() if s == NOT_RECORDED))


def _checks_of(rules: object) -> list[str]:
    """The checks of rule set ``rules`` (a results file's), as far as this crashlab knows them."""
    version = rules if isinstance(rules, int) and not isinstance(rules, bool) else 1
    added = {c for s in ruleset.since(version) for c in s.added_checks}
    return [i for i in BY_ID if i not in added]


def _saved(trace: str | None, base: Path | None) -> Path | None:
    if not trace:
        return None
    given = Path(trace)
    for candidate in (given, *((base / given, base / given.name) if base is not None else ())):
        if candidate.is_file():
            return candidate
    return None


def _faulted_throughout(res: ScenarioResult) -> bool:
    """Whether the adapter faulted (crashed, raised, hung, wrote garbage, never finished) in every
    run of this scenario before any run reached a disposition."""
    faulted = {v.run for v in res.violations if v.invariant == "ADAPTER-FAULT"}
    return bool(res.dispositions) and all(d is None for d in res.dispositions.values()) \
        and faulted.issuperset(res.dispositions)


def render(card: Scorecard) -> str:
    """The rubric as printed with a score: every point kept, lost, or not exercised (no selected
    scenario had events for its rules: never kept), and why: the rule with its quote, the
    scenarios and findings, and for an expectation miss what was expected and observed."""
    lost: dict[str, list[LostPoint]] = {}
    for lp in card.lost:
        lost.setdefault(lp.point.split(" ", 1)[0], []).append(lp)
    unshown = {**dict.fromkeys(card.not_exercised, NOT_EXERCISED), **dict.fromkeys(card.not_recorded, NOT_RECORDED)}
    caps = {c.get("category"): c for c in card.extra.get("caps", ()) if isinstance(c, dict)}
    elsewhere = charged_elsewhere(card.scenarios)     # a check's violations charged to another point
    lines = []
    for name, maximum in CATEGORY_MAX.items():
        cat = card.categories.get(name, {"score": 0, "max": maximum})
        idle = {state: [p.id for p in RUBRIC if p.category == name and unshown.get(p.id) == state
                        and p.id not in lost] for state in (NOT_EXERCISED, NOT_RECORDED)}
        lines.append(f"{name} {cat['score']}/{cat['max']}"
                     + "".join(f" ({', '.join(ids)} {state})" for state, ids in idle.items() if ids))
        if name in caps:
            c = caps[name]
            lines.append(f"  capped at {c.get('limit')}: {c.get('rule')} in {', '.join(c.get('scenarios', ()))} "
                         f"({c.get('source')}: \"{c.get('quote')}\")")
        for p in RUBRIC:
            if p.category != name:
                continue
            mark = LOST if p.id in lost else unshown.get(p.id, KEPT)
            lines.append(f"  [{mark}] {p.id} {p.name}  ({', '.join(p.invariants)})")
            shown: set = {("rule", p.source, p.quote)}
            if p.id in lost:
                lines.append(f"         point ({p.source}): \"{p.quote}\"")
            for lp in lost.get(p.id, ())[:3]:
                ev = ", ".join(f"#{e}" for e in lp.events[:6]) or "-"
                lines.append(f"         {lp.scenario}: {lp.invariant} [{ev}] {lp.message}")
                if lp.expected is not None or lp.observed is not None:
                    lines.append(f"           expected {outcome_text(lp.expected)}, observed {outcome_text(lp.observed)}")
                rule, fix = lp.rule or {}, lp.fix or {}
                if rule and ("rule", rule.get("source"), rule.get("quote")) not in shown:
                    shown.add(("rule", rule.get("source"), rule.get("quote")))
                    lines.append(f"           rule ({rule.get('source')}): \"{rule.get('quote')}\"")
                if fix and ("fix", fix.get("text")) not in shown:
                    shown.add(("fix", fix.get("text")))
                    lines.append(f"           what to change: {fix.get('text')} ({fix.get('see')})")
            if len(lost.get(p.id, ())) > 3:
                lines.append("         ... " + more_text(lost[p.id][3:]))
            lines += [f"         {'also' if mark == LOST else mark}: {head}: {listed(ids)}"
                      for head, ids in elsewhere_heads(elsewhere.get(p.id, {}))]
    lines.append(f"total {card.score_text()}")     # an automatic failure is named there
    return "\n".join(lines)


def more_text(more: list[LostPoint]) -> str:
    """The findings of a point not listed one by one: ``13 more findings in 12 scenarios: a, b``."""
    scenarios = sorted({lp.scenario for lp in more})
    return (f"{len(more)} more finding{'s' if len(more) != 1 else ''} in {len(scenarios)} "
            f"scenario{'s' if len(scenarios) != 1 else ''}: " + ", ".join(scenarios))


def _consistent() -> None:
    """Every invariant is mapped to exactly one point of its own category."""
    counted: dict[str, int] = {}
    for p in RUBRIC:
        for inv in p.invariants:
            counted[inv] = counted.get(inv, 0) + 1
            if inv not in BY_ID:
                raise AssertionError(f"rubric point {p.id} names unknown invariant {inv}")
            if BY_ID[inv].category != p.category:
                raise AssertionError(f"{inv} is {BY_ID[inv].category} but mapped to {p.id} ({p.category})")
    missing = sorted(set(BY_ID) - set(counted))
    twice = sorted(k for k, n in counted.items() if n > 1)
    if missing or twice:
        raise AssertionError(f"unmapped invariants {missing}, mapped twice {twice}")
    for name, maximum in CATEGORY_MAX.items():
        if sum(1 for p in RUBRIC if p.category == name) != maximum:
            raise AssertionError(f"{name} must have {maximum} points")


_consistent()
