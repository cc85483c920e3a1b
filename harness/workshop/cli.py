"""``crashlab workshop``: list, start, check (--hint), reveal, class.

Exit codes follow crashlab's: 0 pass, 1 fail (a wrong or incomplete answer), 3 usage error.
The progress file lives in the working folder (the current directory).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..vocab.errors import UsageError
from . import evidence as E
from . import grade as G
from . import kit, progress
from .ladder import rung as get_rung
from .ladder import rungs

HELP = "the failure-injection workshop as a graded ladder (list, start, check, reveal, class)"


def add_workshop_parser(sub, epilog: str) -> None:
    import argparse

    w = sub.add_parser("workshop", help=HELP, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="The AR-08 failure-injection workshop as a ladder of rungs, each graded "
                                   "from its trace's own evidence (docs/workshop.md).")
    ws = w.add_subparsers(dest="workshop_command", metavar="STEP", parser_class=type(w))
    ws.required = True
    ws.add_parser("list", help="the rungs in order with your status")
    s = ws.add_parser("start", help="write a rung's kit (task, scenario, evidence, worksheet, adapter)")
    s.add_argument("rung", metavar="RUNG")
    s.add_argument("--dir", metavar="DIR", help="where to write the kit (default: workshop/RUNG)")
    s.add_argument("--learner", metavar="NAME", help="a kit of your own: its event numbers depend on NAME "
                                                     "(kept for every later kit in this folder)")
    c = ws.add_parser("check", help="grade a rung: what passed, what did not")
    c.add_argument("rung", metavar="RUNG")
    c.add_argument("--hint", action="store_true", help="also show the next hint")
    c.add_argument("--wire", action="store_true",
                   help="grade over the wire protocol: the kit's wire_adapter.py where the rung has one, "
                        "else its adapter.py as a subprocess")
    c.add_argument("--adapter", metavar="SPEC", help="grade this adapter instead of the kit's adapter.py "
                                                     "(module:attribute or exec:COMMAND)")
    from ..run.isolate import add_option
    add_option(c)
    r = ws.add_parser("reveal", help="the model answer, the teaching card and the figure (after an attempt)")
    r.add_argument("rung", metavar="RUNG")
    rl = ws.add_parser("release", help="facilitator: give a field held after too many wrong tries its tries back")
    rl.add_argument("rung", metavar="RUNG")
    rl.add_argument("field", metavar="FIELD", help="the held field, as check names it (e.g. read, r1.knowledge)")
    rm = ws.add_parser("room", help="facilitator: lock the answers of a room of learners, unlock rungs")
    rm.add_argument("folder", metavar="DIR", help="the folder holding the learners' working folders")
    rm.add_argument("--no-answers", action="store_true",
                    help="lock the answers: reveal is refused and reports hide teaching cards until unlocked")
    rm.add_argument("--unlock", action="append", default=[], metavar="RUNG", help="unlock one rung (or all)")
    rm.add_argument("--lock", action="append", default=[], metavar="RUNG", help="lock an unlocked rung again")
    rm.add_argument("--add", action="append", default=[], metavar="NAME",
                    help="issue a learner an identity: DIR/NAME with its secret, and a record in the room that "
                         "their commands append to and the roster reads")
    rm.add_argument("--seed", type=int, metavar="N", help="a room seed: every learner folder under DIR is issued an "
                                                          "identity (as --add does); a folder made later needs --add")
    pl = ws.add_parser("plan", help="facilitator: a session plan with the minutes per rung, and the opening figure")
    pl.add_argument("--minutes", type=int, default=180, metavar="N", help="the session's length (120 or 180)")
    k = ws.add_parser("class", help="aggregate the progress files of a room of learners")
    k.add_argument("folder", metavar="DIR")
    add_option(k)   # learner code graded on the facilitator's machine: namespaces unless told otherwise
    h = ws.add_parser("handoff", help="the handoff rehearsal: three runs, durable artifacts only")
    h.add_argument("--seed", type=int, default=1, metavar="N", help="which three runs (default 1)")
    h.add_argument("--dir", metavar="DIR", help="where to write the artifacts (default: workshop/handoff)")
    h.add_argument("--adapter", metavar="SPEC", help="recover the runs as this adapter left them (default: the "
                                                      "reference design), to repeat the rehearsal on your own")
    add_option(h)
    m = ws.add_parser("compare", help="two reviewers' handoff plans side by side, with every disagreement")
    m.add_argument("a", metavar="PLAN_A", help="a plan.yaml (or the folder holding it)")
    m.add_argument("b", metavar="PLAN_B")


def run(args) -> int:
    from .room import identity_at
    found = identity_at(Path.cwd()) if args.workshop_command not in ("room", "class", "plan", "compare") else None
    here = found[0] if found else Path.cwd()     # an issued learner works in the folder holding the identity
    from .room import one_command
    with one_command():                          # one command at a time per learner
        return _COMMANDS[args.workshop_command](args, here)


def _list(args, here: Path) -> int:
    data = progress.load(here)
    for i, r in enumerate(rungs(), 1):
        st = progress.status(data, r.id)
        print(f"{i:>2}. {r.id:<10} {st:<12} {r.title}")
    print(f"\nstart one: crashlab workshop start {next((r.id for r in rungs() if progress.status(data, r.id) != 'passed'), rungs()[0].id)}")
    return 0


def _kit_dir(data: dict, rung_id: str, here: Path) -> Path:
    kit_dir = data["rungs"].get(rung_id, {}).get("kit")
    if not kit_dir:
        raise UsageError(f"rung {rung_id} has no kit in {here}; run `crashlab workshop start {rung_id}` first")
    return here / kit_dir


def _start(args, here: Path) -> int:
    r = get_rung(args.rung)
    folder = Path(args.dir) if args.dir else Path("workshop") / r.id
    if r.kind == "handoff":
        from . import handoff
        files = handoff.write(here / folder, getattr(args, "seed", 1), getattr(args, "adapter", None))
        (here / folder / "task.md").write_text(kit.task_markdown(r, files + ["task.md"]), encoding="utf-8")
    else:
        data = progress.load(here)
        learner = getattr(args, "learner", None)
        if learner is None and not data.get("variant") and not any(e.get("kit") for e in data["rungs"].values()):
            from .facilitator import room_variant
            room_variant(here)              # a seeded room's folder without an identity: refused, saying why
        if data.get("issued") and progress.path(here).exists():
            print(f"note: {progress.path(here)} is from before the facilitator issued your identity: it is not "
                  "graded; this kit is made from your identity (read the listing again: your worksheet is kept)",
                  file=sys.stderr)
        if learner is not None and data.get("issued"):
            raise UsageError(f"--learner {learner}: this folder is {data['issued']}'s, issued by the facilitator "
                             "(its kits are made from that identity); start without --learner")
        if learner is not None:
            if not learner.strip():
                raise UsageError("--learner: give a name, e.g. --learner ana")
            if data.get("variant") not in (None, learner) and any(e.get("kit") for e in data["rungs"].values()):
                raise UsageError(f"--learner {learner}: this folder's kits are {data['variant']}'s; "
                                 "start in a folder of your own")
            data["variant"] = data["learner"] = learner
            progress.save(here, data)
        files = kit.write(r, here / folder, progress.offset(data), data.get("variant"))
    data = progress.load(here)
    e = progress.entry(data, r.id)
    e["kit"] = os.path.relpath(here / folder, here)
    if e.get("status") == "not started":
        e["status"] = "started"

    progress.save(here, data)
    print(f"rung {r.id}: {r.title}\nkit: {folder}/ ({', '.join(files)})")
    print(f"read {folder}/task.md, then: crashlab workshop check {r.id}")
    return 0


def _check(args, here: Path) -> int:
    r = get_rung(args.rung)
    if args.wire and not r.starter:
        raise UsageError(f"--wire: rung {r.id} has no adapter to run (the code rungs: "
                         f"{', '.join(x.id for x in rungs() if x.starter)})")
    if args.adapter and not (r.starter or r.kind in ("designs", "rubric")):
        raise UsageError(f"--adapter: rung {r.id} grades a worksheet, not an adapter")
    data = progress.load(here)
    kit_dir = _kit_dir(data, r.id, here)
    from .regrade import grade_rung
    e = progress.entry(data, r.id)
    outcome = grade_rung(r, kit_dir, wire=args.wire, adapter=args.adapter, offset=progress.offset(data),
                         held=progress.held(e, G.MAX_TRIES), variant=data.get("variant"))
    passed, lines = outcome.passed, list(outcome.lines)
    if r.questions or r.kind == "table":
        lines += _measured(r, outcome.answers, args.adapter)
    if r.starter:
        from .codecheck import source
        progress.entry(data, r.id)["code"] = {"graded": source(kit_dir, wire=args.wire, adapter=args.adapter),
                                              "adapter": args.adapter, "wire": bool(args.wire),
                                              "passed": outcome.lines[0].startswith("code: PASS")}
    progress.record_attempt(data, r.id, passed)
    before = progress.held(e, G.MAX_TRIES)
    progress.record_tries(e, outcome.tried)
    from .regrade import held_line
    lines += [held_line(r, f).replace("check no longer grades it", "the next check will not grade it")
              for f in sorted(progress.held(e, G.MAX_TRIES) - before)]
    lines += _hints(r, e, outcome, args.hint)
    progress.save(here, data)
    print("\n".join(lines))
    print(f"rung {r.id}: {'PASSED' if passed else 'not yet'}")
    return 0 if passed else 1


def _hints(r, e: dict, outcome, more: bool) -> list[str]:
    """The hints earned so far. ``--hint`` follows the wrong field: the first wrong answer whose
    field has a hint not yet given, else (nothing wrong: blanks or code) the rung's next hint."""
    given = e.setdefault("field_hints", [])
    lines = []
    if more:
        field = next((f for f, _ in outcome.tried if f not in given and r.field_hint(f)), None)
        if field:
            given.append(field)
        elif e["hints"] < len(r.hints):
            e["hints"] += 1
        else:
            lines.append("(no more hints; `crashlab workshop reveal` shows the model answer)")
    lines += [f"hint {i + 1}/{len(r.hints)}: {r.hints[i]}" for i in range(e["hints"])]
    lines += [f"hint for {f}: {r.field_hint(f)}" for f in given if f in outcome.open_fields]
    return lines


def _release(args, here: Path) -> int:
    r = get_rung(args.rung)
    data = progress.load(here)
    e = data["rungs"].get(r.id) or {}
    if args.field not in progress.held(e, G.MAX_TRIES):
        held = ", ".join(sorted(progress.held(e, G.MAX_TRIES))) or "none"
        raise UsageError(f"release {r.id} {args.field}: that field is not held (held on {r.id}: {held})")
    progress.release(e, args.field)
    progress.save(here, data)
    print(f"rung {r.id}: {args.field} released; the roster shows the release")
    return 0


def _room(args, here: Path) -> int:
    from . import facilitator
    print("\n".join(facilitator.set_room(Path(args.folder), no_answers=args.no_answers, unlock=args.unlock,
                                         lock=args.lock, seed=args.seed, add=args.add)))
    return 0


def _plan(args, here: Path) -> int:
    from . import facilitator
    text = facilitator.plan_markdown(args.minutes)
    print(f"opening figure (answers no rung): {facilitator.opening_command()}\n")
    print(text, end="")
    return 0


def _measured(r, answers: dict, adapter: str | None) -> list[str]:
    """The measured comparison a designs or rubric rung prints after grading."""
    if r.kind == "designs":
        from . import weak
        rows = [(answers["as_is"], weak.measure("as_is", weak.DESIGNS[answers["as_is"]]))] if answers.get("as_is") else []
        if adapter:
            from ..run.drivers import load_adapter
            spec = load_adapter(adapter)
            rows += [("your adapter", weak.measure(p, spec)) for p in weak.PROFILES]
        return ["", "comparison (measured from the runs):", weak.table(rows)] if rows else []
    if r.kind == "rubric":
        from . import rubric
        return ["", rubric.comparison(answers, adapter)]
    return []


def _handoff(args, here: Path) -> int:
    args.rung = "handoff"
    return _start(args, here)


def _compare(args, here: Path) -> int:
    from . import handoff

    a, b = handoff.read_plan(Path(args.a)), handoff.read_plan(Path(args.b))
    lines, disagreements = handoff.compare(a, b, a.get("reviewer") or "A", b.get("reviewer") or "B")
    print("\n".join(lines))
    return 0 if disagreements == 0 else 1


def _reveal(args, here: Path) -> int:
    from . import solutions
    from .exhibits import EXHIBITS

    r = get_rung(args.rung)
    data = progress.load(here)
    e = data["rungs"].get(r.id, {})
    if e.get("attempts", 0) < 1:
        raise UsageError(f"rung {r.id}: reveal comes after an attempt; run `crashlab workshop check {r.id}` first")
    from .facilitator import locked
    room = locked(here, r.id)
    if room is not None:
        raise UsageError(f"rung {r.id}: the facilitator has locked the answers in this room ({room}); ask them, "
                         f"they unlock it with `crashlab workshop room {room} --unlock {r.id}`")
    kit_dir = _kit_dir(data, r.id, here)
    if not e.get("revealed"):       # revealed after passing honestly, or revealed to pass
        e["revealed_after_pass"] = e.get("status") == "passed"
    e["revealed"] = True            # recorded before anything is shown: a closed pipe still counts
    progress.save(here, data)
    print(f"rung {r.id}: model answer")
    model = G.model_answers(r, progress.offset(data), data.get("variant"))
    for qid, value in model["answers"].items():
        print(f"  {qid}: {value}")
    if r.kind == "rubric":
        from ..report.scorecard import format_scorecard
        from . import rubric
        print("\ncrashlab's score of exhibit R:\n")
        print(format_scorecard(rubric.card()))
        for label, (entry, scenario) in rubric.FAILURES.items():
            print(f"exhibit {label}: the gallery's {entry} on {scenario}")
    if r.kind == "designs":
        from . import weak
        print("\nthe chapter's three bounded options (options.yaml form), measured:\n")
        import yaml
        print(yaml.safe_dump({"options": [dict(o) for o in weak.MODEL_OPTIONS]}, sort_keys=False))
        print(weak.table([(o["design"], weak.measure_option(o)) for o in weak.MODEL_OPTIONS]))
        print("\nevery design on the weak service as it is (measured):\n")
        print(weak.table([(d, weak.measure("as_is", s)) for d, s in weak.DESIGNS.items()]))
    if r.kind == "handoff":
        from . import handoff
        plan = handoff.read_plan(kit_dir / handoff.PLAN)
        for label, name in zip("ABC", handoff.pick(plan["seed"])):
            key = handoff.pool()[name]
            print(f"  run {label} ({name}): dispositions {', '.join(key['dispositions'])}; "
                  f"required {' and '.join('/'.join(g) for g in key['required'])}; "
                  f"prohibited {', '.join(key['prohibited'])}; next owner {' or '.join(key['next_owner'])}")
    for row, cells in model["table"].items():
        print(f"  {row}: " + ", ".join(f"{c}={v}" for c, v in cells.items()))
    if r.starter:
        print("\nthe decision, corrected:\n")
        print(solutions.SOLUTIONS[r.starter])
    if r.kind == "exhibits":
        from crashlab.gallery import BY_ID
        for label, (entry_id, scenario) in EXHIBITS.items():
            entry = BY_ID[entry_id]
            print(f"exhibit {label}: {entry.adapter} on {scenario}: {entry.statement}")
            print(f"  the chapter ({entry.section}): \"{entry.quote}\"")
    for name in r.scenarios:
        card = E.card(name)
        if card:
            print(f"\nteaching card ({name}):")
            for k, v in card.items():      # in the learner's own numbering, as their listing
                print(f"  {k}: {E.own_words(' '.join(str(v).split()), progress.offset(data), data.get('variant'))}")
    figure = _figure(r, kit_dir)
    if figure:
        print(f"\nannotated figure: {figure}")
    return 0


def _figure(r, kit_dir: Path) -> str | None:
    """The annotated timeline figure(s): the rung's trace, or each exhibit with its violations."""
    from ..report.figure import render_figure

    if r.kind == "exhibits":
        from . import exhibits
        jobs = [(f"reveal-figure-{label}", exhibits.trace(label),
                 E.verdict(scenario, exhibits.adapter_of(label)))
                for label, (_, scenario) in exhibits.EXHIBITS.items()]
    elif r.scenario:
        jobs = [("reveal-figure", E.trace(r.scenario), E.verdict(r.scenario))]
    else:
        return None
    try:
        written = [render_figure(events, verdict, kit_dir / name) for name, events, verdict in jobs]
    except ImportError:
        print("(the annotated figure needs the report extra: pip install 'crashlab[report]')")
        return None
    return ", ".join(str(p) for p in written)


def _class(args, here: Path) -> int:
    import sys

    from ..run import isolate
    from .regrade import class_table

    before = os.environ.get(isolate.ENV)
    if isolate.requested() == "auto":   # every learner's code, on the facilitator's machine: untrusted
        if isolate.current().mode == "namespaces":
            os.environ[isolate.ENV] = "namespaces"
        else:
            print("crashlab: workshop class: the learners' code runs with your rights (no namespaces here: "
                  f"{isolate.current().detail})", file=sys.stderr)
    try:
        print(class_table(Path(args.folder)))
    finally:
        if before is None:
            os.environ.pop(isolate.ENV, None)
        else:
            os.environ[isolate.ENV] = before
    return 0


_COMMANDS = {"list": _list, "start": _start, "check": _check, "reveal": _reveal, "class": _class,
             "handoff": _handoff, "compare": _compare, "release": _release, "room": _room, "plan": _plan}
