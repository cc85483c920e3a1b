"""Two runs side by side.

* ``crashlab diff A.jsonl B.jsonl``: two traces of the same scenario (typically the
  reference and a candidate, same seed) in two columns, aligned event by event, with the
  first divergence marked, then what each run ended with.
* ``crashlab compare --adapter A --adapter B``: both implementations on the same library
  (and, with ``--examples N``, the same generated schedules); every scenario where their
  dispositions, remote effects, next owners or failing checks differ is listed. AR-08: equal dispositions
  across implementations are stronger evidence of provider-neutral semantics than equal API
  shapes.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..vocab.errors import UsageError
from . import style
from .text import load

CONTEXT = 6      # events shown before the first divergence
AFTER = 14       # events shown from it on


# --------------------------------------------------------------------------- outcome
@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a run ended with, as an observer outside the adapter sees it."""

    dispositions: tuple[tuple[str, str], ...]       # (run, final disposition or waiting state)
    effects: tuple[tuple[str, str, int], ...]       # (run, cause, committed records)
    released: tuple[tuple[str, int], ...]           # (run, releases that took effect)
    next_owners: tuple[tuple[str, str], ...]        # (run, next owner of the accepted finish)

    def facts(self) -> dict[str, str]:
        """Each fact by name (``run-82 disposition``, ``run-82 effects by adapter``, ...)."""
        out = {f"{run} disposition": d for run, d in self.dispositions}
        out.update({f"{run} effects by {cause}": str(n) for run, cause, n in self.effects})
        out.update({f"{run} releases": str(n) for run, n in self.released})
        out.update({f"{run} next owner": o for run, o in self.next_owners})
        return out

    def lines(self) -> list[str]:
        return [f"{name}: {value}" for name, value in self.facts().items()]


#: What a fact one run lacks reads as (a count of nothing is 0).
ABSENT = {"disposition": "no terminal disposition", "next owner": "none"}


def paired(a: Outcome, b: Outcome) -> list[tuple[str, str, str]]:
    """(fact, A's value, B's value) for every fact either run has: like with like, never one
    run's disposition against the other's effect count."""
    fa, fb = a.facts(), b.facts()

    def missing(name: str) -> str:
        return next((v for k, v in ABSENT.items() if name.endswith(k)), "0")

    return [(name, fa.get(name, missing(name)), fb.get(name, missing(name))) for name in dict.fromkeys([*fa, *fb])]


def outcome(events: list[dict]) -> Outcome:
    disp: dict[str, str] = {}
    end = events[-1] if events and events[-1].get("kind") == "end" else {}
    for run, info in (end.get("runs") or {}).items():
        if isinstance(info, dict):
            disp[run] = str(info.get("finished") or info.get("waiting") or "none")
    effects: dict[tuple[str, str], int] = {}
    released: dict[str, int] = {}
    owners: dict[str, str] = {}
    for ev in events:
        run = ev.get("run")
        if ev.get("lane") == "remote" and ev.get("kind") == "effect" and ev.get("cause") != "other_actor":
            effects[(str(run), str(ev.get("cause")))] = effects.get((str(run), str(ev.get("cause"))), 0) + 1
        elif ev.get("lane") == "remote" and ev.get("kind") == "released":
            released[str(run)] = released.get(str(run), 0) + 1
        elif ev.get("lane") == "run" and ev.get("kind") == "finish" and ev.get("accepted"):
            owners[str(run)] = str(ev.get("next_owner") or "none")
    return Outcome(dispositions=tuple(sorted(disp.items())),
                   effects=tuple(sorted((r, c, n) for (r, c), n in effects.items())),
                   released=tuple(sorted(released.items())), next_owners=tuple(sorted(owners.items())))


# --------------------------------------------------------------------------- diff
def _steps(events: list[dict]) -> list[tuple[str, str]]:
    """(comparable text, shown text) per event after the header: the one-line summary
    without its sequence number, so two runs compare by what happened, not by numbering."""
    origin = int(events[0].get("origin_ms") or 0)
    out = []
    for ev in events[1:]:
        if ev.get("lane") == "meta":
            continue
        shown = style.summarize(ev, origin)
        out.append((shown.split(" ", 1)[1], shown))
    return out


def first_divergence(a: list[dict], b: list[dict]) -> int | None:
    """Index (into the aligned steps) of the first event that differs; None when none does."""
    sa, sb = _steps(a), _steps(b)
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x[0] != y[0]:
            return i
    return None if len(sa) == len(sb) else min(len(sa), len(sb))


def _wrap(text: str, width: int) -> list[str]:
    """A cell's text over as many lines as it needs, broken at spaces (never mid-word unless
    one word is wider than the column)."""
    import textwrap

    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def _row(mark: str, left: str, right: str, col: int) -> list[str]:
    lw, rw = _wrap(left, col), _wrap(right, col)
    return [(mark if i == 0 else "   ") + (lw[i] if i < len(lw) else "").ljust(col) + " | "
            + (rw[i] if i < len(rw) else "") for i in range(max(len(lw), len(rw)))]


#: Lanes whose events are what a run knew and what it did to the world.
DECISIVE = ("knowledge", "remote")


def _decisive(events: list[dict]) -> list[tuple[str, int]]:
    """(comparable text, index into the steps) of the events that carry knowledge or outcome:
    ledger moves, remote effects and releases, and finishes. Keys are numbered in the order
    they first appear, so two designs that name their keys differently still compare."""
    keys: dict[str, str] = {}
    refs: dict[str, str] = {}

    def k(value) -> str:
        return keys.setdefault(str(value), f"k{len(keys) + 1}")

    def r(value) -> str:
        return refs.setdefault(str(value), f"r{len(refs) + 1}")

    out = []
    steps = [ev for ev in events[1:] if ev.get("lane") != "meta"]
    for i, ev in enumerate(steps):
        lane, kind = ev.get("lane"), ev.get("kind")
        if lane == "knowledge" and kind == "ledger":
            text = f"{ev.get('run')} ledger {k(ev.get('key'))}: {ev.get('previous') or '∅'} → {ev.get('knowledge')}"
        elif lane == "remote" and kind == "effect":
            text = f"{ev.get('run')} {ev.get('service')} commit {r(ev.get('ref'))} ({ev.get('cause')})"
        elif lane == "remote" and kind == "released":
            text = f"{ev.get('run')} {ev.get('service')} release of {r(ev.get('ref'))}"
        elif lane == "run" and kind == "finish" and ev.get("accepted"):
            text = f"{ev.get('run')} finish {ev.get('disposition')}"
        else:
            continue
        out.append((text, i))
    return out


def first_decisive_divergence(a: list[dict], b: list[dict]) -> tuple[int | None, int | None] | None:
    """Where the runs first differ in what they knew or did to the world: the indexes (into
    each run's steps) of the first differing knowledge/outcome event (None: that run had no
    more); None when they never differ there."""
    da, db = _decisive(a), _decisive(b)
    for x, y in zip(da, db):
        if x[0] != y[0]:
            return x[1], y[1]
    if len(da) == len(db):
        return None
    shorter = min(len(da), len(db))
    return (da[shorter][1] if shorter < len(da) else None), (db[shorter][1] if shorter < len(db) else None)


def column_names(path_a: str, path_b: str) -> tuple[str, str]:
    """Two labels that tell the traces apart: their file names, or, when those are the same,
    as much of their paths as differs."""
    pa, pb = Path(path_a), Path(path_b)
    if pa.name != pb.name:
        return pa.name, pb.name
    a_parts, b_parts = pa.parts, pb.parts
    n = 1
    while n < max(len(a_parts), len(b_parts)) and a_parts[-n:] == b_parts[-n:]:
        n += 1
    return str(Path(*a_parts[-n:])), str(Path(*b_parts[-n:]))


def diff_lines(a: list[dict], b: list[dict], *, width: int = 160, names: tuple[str, str] = ("A", "B")) -> list[str]:
    ha, hb = a[0], b[0]
    col = max(30, (width - 6) // 2)
    out = [f"A = {names[0]}: {ha.get('scenario')} seed {ha.get('seed')} adapter {ha.get('adapter')} ({len(a)} events)",
           f"B = {names[1]}: {hb.get('scenario')} seed {hb.get('seed')} adapter {hb.get('adapter')} ({len(b)} events)"]
    if ha.get("seed") != hb.get("seed"):
        out.append(f"note: the seeds differ ({ha.get('seed')} and {hb.get('seed')}): the world itself may differ")
    at = first_divergence(a, b)
    sa, sb = _steps(a), _steps(b)
    if at is None:
        out.append(f"no divergence: the same {len(sa)} events")
    else:
        out.append(f"first divergence at event {at + 1} after the header "
                   f"(A {sa[at][1].split(' ', 1)[0] if at < len(sa) else 'ended'}, "
                   f"B {sb[at][1].split(' ', 1)[0] if at < len(sb) else 'ended'})")
        out.append("")
        out += _row("   ", "A", "B", col)
        for i in range(max(0, at - CONTEXT), min(max(len(sa), len(sb)), at + AFTER)):
            left = sa[i][1] if i < len(sa) else "(ended)"
            right = sb[i][1] if i < len(sb) else "(ended)"
            same = i < len(sa) and i < len(sb) and sa[i][0] == sb[i][0]
            out += _row(">> " if i == at else ("   " if same else " ≠ "), left, right, col)
        decisive = first_decisive_divergence(a, b)
        out.append("")
        if decisive is None:
            out.append("knowledge and outcome: the same ledger moves, remote effects and finishes (the runs "
                       "differ only in how they got there)")
        else:
            ia, ib = decisive
            out.append("first divergence in knowledge or outcome (ledger moves, remote effects, finishes; keys "
                       "numbered k1, k2... in order of appearance):")
            out.append(f"   A {sa[ia][1] if ia is not None else '(no more such events)'}")
            out.append(f"   B {sb[ib][1] if ib is not None else '(no more such events)'}")
            out.append("")
            out += _row("   ", "A, around it", "B, around it", col)
            ra = range(max(0, ia - 3), min(len(sa), ia + 4)) if ia is not None else range(0)
            rb = range(max(0, ib - 3), min(len(sb), ib + 4)) if ib is not None else range(0)
            la, lb = list(ra), list(rb)
            for j in range(max(len(la), len(lb))):
                x = la[j] if j < len(la) else None
                y = lb[j] if j < len(lb) else None
                mark = "=> " if (x is not None and x == ia) or (y is not None and y == ib) else "   "
                out += _row(mark, sa[x][1] if x is not None else "", sb[y][1] if y is not None else "", col)
    oa, ob = outcome(a), outcome(b)
    out.append("")
    out.append("outcome: " + ("the same" if oa == ob else "different"))
    for name, left, right in paired(oa, ob):
        out += _row("   " if left == right else " ≠ ", f"{name}: {left}", f"{name}: {right}", col)
    return out


def cmd_diff(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    a, b = load(args.trace_a), load(args.trace_b)
    if a[0].get("scenario") != b[0].get("scenario"):
        raise UsageError(f"{args.trace_b}: scenario {b[0].get('scenario')!r} is not {a[0].get('scenario')!r} "
                         f"of {args.trace_a}", hint="diff compares two runs of the same scenario")
    width = args.width or max(120, shutil.get_terminal_size((160, 40)).columns)
    for line in diff_lines(a, b, width=width, names=column_names(args.trace_a, args.trace_b)):
        print(line, file=out)
    return 0 if first_divergence(a, b) is None and outcome(a) == outcome(b) else 1


# --------------------------------------------------------------------------- compare
OUTCOMES_ONLY = ("note: compare looks at outcomes (dispositions, remote effects, releases, next owners) and at "
                 "which checks fail, not at how a run got there or at lost points: two adapters can fail the same "
                 "checks for different reasons. `crashlab conformance --adapter SPEC` judges and scores each adapter.")


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    scenario: str
    seed: int
    a: Outcome
    b: Outcome
    document: dict | None = None    # a generated schedule (None: a library scenario)
    fired: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())   # the checks that fail for A only, B only


def generated_documents(examples: int, seed: int, bases) -> list[tuple[dict, str | None]]:
    """``examples`` generated schedules, the same for any adapter (drawn from the bases'
    own services, not from one adapter's calls), in a fixed order for one ``seed``."""
    import random

    from hypothesis import HealthCheck, find, settings, strategies as st
    from hypothesis.errors import NoSuchExample

    from ..scenario.strategies import schedules

    drawn: list[tuple[dict, str | None]] = []
    strategy = st.one_of([st.tuples(schedules(dict(s.raw)), st.just(s.source)) for s in bases])

    def keep(pair) -> bool:
        drawn.append(pair)
        return False

    config = settings(max_examples=examples, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        find(strategy, keep, settings=config, random=random.Random(seed))
    except NoSuchExample:
        pass
    return drawn[:examples]


def compare(adapter_a: str, adapter_b: str, scenarios, *, examples: int = 0, seed: int = 0,
            run_seed: int | None = None, progress=None) -> tuple[int, list[Difference]]:
    """Run both adapters on every scenario (and ``examples`` generated schedules); return the
    number of runs compared and every scenario whose outcomes differ. Each adapter runs in worker
    processes, as for conformance: no adapter code runs here, so neither can end or steer the
    comparison (docs/protocol.md, "Trust boundary")."""
    import tempfile

    from ..run.conformance import run_checked
    from ..run.drivers import load_adapter
    from ..scenario.loader import from_dict
    from ..world.trace import read_jsonl

    spec_a, spec_b = load_adapter(adapter_a), load_adapter(adapter_b)
    work = [(s, None) for s in scenarios]
    if examples:
        work += [(from_dict(doc, file=source), doc) for doc, source in generated_documents(examples, seed, scenarios)]
    diffs = []
    with tempfile.TemporaryDirectory(prefix="crashlab-compare-") as tmp:
        for n, (scenario, doc) in enumerate(work):
            runs = []
            for side, spec in (("a", spec_a), ("b", spec_b)):
                result = run_checked(scenario, spec, seed=run_seed, out_dir=Path(tmp) / f"{n}{side}")
                events = read_jsonl(Path(result.trace)) if result.trace else []
                runs.append((result, events))
            (ra, ea), (rb, eb) = runs
            oa, ob = outcome(ea), outcome(eb)
            fa, fb = ({v.invariant for v in r.violations} for r in (ra, rb))
            if oa != ob or fa != fb:
                diffs.append(Difference(scenario=scenario.id, seed=ra.seed, a=oa, b=ob, document=doc,
                                        fired=(tuple(sorted(fa - fb)), tuple(sorted(fb - fa)))))
            if progress is not None:
                progress(scenario.id, oa == ob)
    return len(work), diffs


def cmd_compare(args: argparse.Namespace, out=None) -> int:
    from ..scenario.loader import library

    out = out or sys.stdout
    if len(args.adapter or ()) != 2:
        raise UsageError(f"compare needs exactly two --adapter options (or two --results), got {len(args.adapter or ())}",
                         hint="crashlab compare --adapter crashlab.reference_impl:ReferenceAdapter --adapter my_pkg:MyAdapter")
    if args.examples < 0:
        raise UsageError("--examples must be 0 or more")
    scenarios = library()
    if args.scenario:
        known = {s.id for s in scenarios}
        missing = [i for i in args.scenario if i not in known]
        if missing:
            raise UsageError(f"unknown scenario id(s): {', '.join(missing)}; `crashlab list` shows every id")
    if args.tag or args.scenario:   # as for conformance: every --tag and --scenario adds scenarios
        tags, ids = set(args.tag or ()), set(args.scenario or ())
        scenarios = [s for s in scenarios if s.id in ids or tags & set(s.tags)]
    if not scenarios:
        raise UsageError("no scenario matches the given --tag/--scenario filters")
    a, b = args.adapter
    total, diffs = compare(a, b, scenarios, examples=args.examples, seed=args.schedule_seed, run_seed=args.seed)
    print(f"compared {total} runs: A = {a}, B = {b}", file=out)
    saved = Path(args.save) if args.save else None
    for i, d in enumerate(diffs, 1):
        print(f"\n{d.scenario} (seed {d.seed}): {'outcomes differ' if d.a != d.b else 'the same outcome'}", file=out)
        if d.fired != ((), ()):
            print(f"   checks that fail: A only {', '.join(d.fired[0]) or '-'}; B only {', '.join(d.fired[1]) or '-'}",
                  file=out)
        for name, left, right in paired(d.a, d.b):
            print(("   " if left == right else " ≠ ") + f"{name + ':':<28} A {left:<26} | B {right}", file=out)
        if d.document is not None and saved is not None:
            from ..run.explore import to_yaml

            saved.mkdir(parents=True, exist_ok=True)
            path = saved / f"difference-{i}.yaml"
            path.write_text(to_yaml(d.document), encoding="utf-8")
            print(f"   schedule: {path}", file=out)
    print(f"\n{len(diffs)} of {total} runs differ" if diffs else "\nno difference: the same dispositions, "
          "effects, next owners and failing checks everywhere", file=out)
    print(OUTCOMES_ONLY, file=out)
    return 1 if diffs else 0
