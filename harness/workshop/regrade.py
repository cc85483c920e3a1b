"""Grading one rung from what is on disk, shared by ``check`` and the facilitator's roster.

The roster (``workshop class``) never trusts a status written in a progress file: it grades
each learner's worksheet, plan and code again, the way ``check`` does, and shows attempts,
hints, reveals and the field each learner is stuck on. A revealed rung shows as revealed.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..vocab.errors import UsageError
from . import grade as G
from . import progress
from .ladder import rung as get_rung
from .ladder import rungs


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    passed: bool
    lines: tuple[str, ...]
    stuck: str | None          # the first field (or "code", a plan's run) not yet right
    answers: dict
    tried: tuple = ()          # (field, wrong value) of this check, for the progress file's try count
    open_fields: tuple = ()    # every field not yet right: the wrong ones first, then blank, then held


def grade_rung(r, kit_dir: Path, *, wire: bool = False, adapter: str | None = None, offset=None,
               held: frozenset = frozenset(), variant: str | None = None) -> Outcome:
    """Grade the rung's code, plan and worksheet in ``kit_dir``; UsageError on unreadable input.
    ``held``: the fields that took too many wrong tries (not graded; the learner is sent to the trace)."""
    lines: list[str] = []
    passed, stuck, answers, tried = True, None, {}, ()
    if r.starter:
        from .codecheck import grade_code
        ok, out = grade_code(r, kit_dir, wire=wire, adapter=adapter, offset=offset, variant=variant)
        passed &= ok
        lines += out
        stuck = stuck or (None if ok else "code")
    if r.kind == "handoff":
        from . import handoff
        ok_runs, wrong = handoff.grade(handoff.read_plan(kit_dir / handoff.PLAN))
        passed &= not wrong
        lines += [f"plan: {len(ok_runs)} of 3 runs recovered within what the evidence permits"] + [
            f"  wrong  {w}" for w in wrong]
        stuck = stuck or (wrong[0].split(":")[0] if wrong else None)
    if r.kind == "designs":
        from . import weak
        rows, wrong = weak.grade_options(weak.read_options(kit_dir / weak.OPTIONS))
        passed &= not wrong
        lines += [f"options: {len(rows)} proposed, measured on the five criteria:", weak.table(rows) if rows else "-"]
        lines += [f"  wrong  {w}" for w in wrong]
        stuck = stuck or ("options" if wrong else None)
    if r.questions or r.kind == "table":
        answers, table = G.read(kit_dir / G.WORKSHEET, r)
        ids = G.row_ids(r, offset, variant)
        canon_answers, table = G.to_canonical(r, answers, table, ids)
        override = None
        if r.kind == "rubric" and adapter:
            from .rubric import measured
            from ..checks.docs import CATEGORY_MAX
            from . import keys as K
            override = {**K.expected(r), **{q.id: measured(q.id, adapter) for q in r.questions
                                            if q.id in CATEGORY_MAX or q.id == "automatic_failure"}}
        back = {canon: kit for canon, kit in ids.items()}
        held = frozenset(_rename(f, {v: k for k, v in back.items()}) for f in held)
        g = G.grade(r, canon_answers, table, override, offset, held)
        if any(k != v for k, v in back.items()):   # feedback in the learner's own row ids
            g = G.Grade(passed=tuple(_rename(f, back) for f in g.passed),
                        wrong=tuple(_rename_row(w, back) for w in g.wrong), blank=tuple(_rename(f, back) for f in g.blank),
                        held=tuple(_rename(f, back) for f in g.held),
                        tried=tuple((_rename(f, back), v) for f, v in g.tried))
        passed &= g.ok
        lines.append(f"worksheet: {len(g.passed)} right, {len(g.wrong)} wrong, {len(g.blank)} blank"
                     + (f", {len(g.held)} held" if g.held else ""))
        lines += [f"  wrong  {w}" for w in g.wrong]
        if g.blank:
            lines.append(f"  blank  {', '.join(g.blank)}")
        lines += [held_line(r, name) for name in g.held]
        first = [f for f, _ in g.tried] + list(g.blank) + list(g.held)
        stuck = stuck or (first[0] if first else None)
        tried = g.tried
        open_fields = tuple(first)
    return Outcome(passed=passed, lines=tuple(lines), stuck=stuck, answers=answers, tried=tuple(tried),
                   open_fields=open_fields if r.questions or r.kind == "table" else ())


def _rename(field: str, ids: dict) -> str:
    row, dot, col = field.partition(".")
    return f"{ids.get(row, row)}.{col}" if dot else field


def _rename_row(line: str, ids: dict) -> str:
    if line.startswith("row "):
        row, _, rest = line[4:].partition(",")
        return f"row {ids.get(row, row)},{rest}"
    return line


def held_line(r, name: str) -> str:
    """A field that took MAX_TRIES wrong answers: the learner is sent to the trace, not to another try."""
    look = r.field_hint(name) or "the listing, from the finish backwards."
    return (f"  held   {name}: {G.MAX_TRIES} wrong tries; check no longer grades it. Read the trace instead: "
            f"{look} Then explain your answer to the facilitator, who releases it "
            f"(`crashlab workshop release {r.id} {name}`), or see `crashlab workshop reveal {r.id}`.")


# --------------------------------------------------------------------------- the roster
@contextmanager
def _in(folder: Path):
    """Run a learner's recorded --adapter from their own folder (an exec: path is relative to it)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def regrade(folder: Path, data: dict, rung_id: str) -> tuple[str, Outcome | None, str | None]:
    """(status, outcome, problem) of one rung for one learner, graded again from disk.
    status: passed | revealed | attempted | started | not started."""
    e = data["rungs"].get(rung_id)
    if not isinstance(e, dict) or not e.get("kit"):
        return "not started", None, None
    r = get_rung(rung_id)
    code = e.get("code") if isinstance(e.get("code"), dict) else {}
    kit = (folder / str(e["kit"])).resolve()
    if data.get("issued") and not kit.is_relative_to(Path(folder).resolve()):
        # an issued learner's kit is graded in the folder issued, never in a neighbour's
        return ("attempted" if e.get("attempts") else "started"), None, \
            f"{e['kit']}: a kit outside {data['issued']}'s folder is not graded as theirs"
    try:
        with _in(folder):
            outcome = grade_rung(r, folder / e["kit"], wire=bool(code.get("wire")), adapter=code.get("adapter"),
                                 offset=progress.offset(data), held=progress.held(e, G.MAX_TRIES),
                                 variant=data.get("variant"))
    except UsageError as exc:
        outcome, problem = None, str(exc).splitlines()[0]
    else:
        problem = None
    after_pass = e.get("revealed_after_pass") and outcome is not None and outcome.passed
    if e.get("revealed") and not after_pass:    # revealed after an honest pass still counts
        return "revealed", outcome, problem
    if outcome is not None and outcome.passed:
        return "passed", outcome, problem
    return ("attempted" if e.get("attempts") else "started"), outcome, problem


MARK = {"not started": ".", "started": "s", "attempted": "x", "passed": "P", "revealed": "R"}


def _old_seed(folder: Path):
    """A room seed set on a room that issues no identities (made before seeds issued them)."""
    from .facilitator import ROOM, load_room
    return load_room(folder).get("seed") if (Path(folder) / ROOM).is_file() else None


def class_table(folder: Path) -> str:
    """One row per learner (every progress file under ``folder``), one column per rung, each
    cell graded again; then per learner: attempts, hints, reveals, the rung and field they
    are stuck on, what graded their code, and any status the progress file claims that the
    work does not support."""
    folder = Path(folder)
    ids = [r.id for r in rungs()]
    learners, unreadable, extra, strays = [], [], {}, []
    files = sorted(folder.rglob(progress.PROGRESS))
    from . import room as issued_room
    if issued_room.is_issued_room(folder):     # the room's records, never the learners' files
        key, seen = issued_room.room_key(folder), issued_room.load_seen(folder)
        for name in issued_room.issued(folder):
            data, extra[name], problem = issued_room.learner(folder, name, key, seen)
            if problem:       # a record changed by hand or rewound: that learner is not graded
                unreadable.append((name, f"{issued_room.record_path(folder, name)}: {problem}"))
                continue
            home = (folder / name).resolve()
            learners.append((name, home, data, {i: regrade(home, data, i) for i in ids}))
        issued_room.save_seen(folder, seen)
        strays = [str(f.parent.relative_to(folder)) if f.parent != folder else "." for f in files]
        files = []
    elif (old_seed := _old_seed(folder)) is not None:
        raise UsageError(f"{folder}: this room's seed ({old_seed}) was set before seeded rooms issued identities, so its "
                         "kits live in progress files the learners write, which the roster does not read; run "
                         f"`crashlab workshop room {folder} --seed {old_seed}` again (it issues every learner folder an "
                         "identity; each learner then runs `start` again)")
    elif not files:
        raise UsageError(f"{folder}: no {progress.PROGRESS} files found (one per learner's working folder)")
    for f in files:
        try:
            data = progress.load(f.parent)
        except UsageError as exc:     # one learner's broken file: their row says so, the room is shown
            unreadable.append((str(f.parent.relative_to(folder)) if f.parent != folder else f.parent.name,
                               str(exc).splitlines()[0]))
            continue
        name = str(f.parent.relative_to(folder)) if f.parent != folder else data["learner"]
        learners.append((name, f.parent.resolve(), data, {i: regrade(f.parent.resolve(), data, i) for i in ids}))
    if not learners and not unreadable:
        raise UsageError(f"{folder}: no learner issued yet; `crashlab workshop room {folder} --add NAME` issues one")
    width = max(len(n) for n, *_ in learners + unreadable + [("learner",)])
    from .facilitator import describe, find_room, load_room
    room = find_room(folder)
    lines = [f"room {room}: {describe(load_room(room))}", ""] if room else []
    lines += [f"{'learner':<{width}}  " + " ".join(ids) + "  passed"]
    for name, _, _, graded in learners:
        cells = [f"{MARK[graded[i][0]]:>{len(i)}}" for i in ids]
        passed = sum(graded[i][0] == "passed" for i in ids)
        lines.append(f"{name:<{width}}  " + " ".join(cells) + f"  {passed}/{len(ids)}")
    for name, _ in unreadable:
        lines.append(f"{name:<{width}}  " + " ".join(f"{'?':>{len(i)}}" for i in ids) + f"  ?/{len(ids)}")
    totals = [f"{sum(g[i][0] == 'passed' for *_, g in learners):>{len(i)}}" for i in ids]
    lines.append(f"{'passed':<{width}}  " + " ".join(totals))
    lines.append("P passed (graded again now; also when revealed after the pass), R answer revealed before a "
                 "pass, x attempted, s started, . not started")
    if unreadable:
        lines[-1] += ", ? not graded: a progress file unreadable or a record changed (see below)"
    lines.append("")
    for name, _, data, graded in learners:
        entries = {i: data["rungs"].get(i) or {} for i in ids}
        attempts = sum(int(e.get("attempts") or 0) for e in entries.values())
        hints = sum(progress.hints_used(e) for e in entries.values())
        reveals = [i for i in ids if entries[i].get("revealed") and graded[i][0] != "passed"]
        later = [i for i in ids if entries[i].get("revealed") and graded[i][0] == "passed"]
        notes = [f"{attempts} attempts", f"{hints} hints", f"revealed {', '.join(reveals) or 'none'}"
                 + (" (before a pass)" if reveals or later else "")]
        if later:
            notes.append(f"revealed after passing {', '.join(later)}")
        # stuck: checked and not passed; a rung started and never checked is not one they are stuck on
        stuck = next((i for i in ids if graded[i][0] == "attempted"), None)
        unchecked = [i + (f" (unreadable: {graded[i][2]})" if graded[i][1] is None and graded[i][2] else "")
                     for i in ids if graded[i][0] == "started"]
        if stuck:
            outcome, problem = graded[stuck][1], graded[stuck][2]
            where = outcome.stuck if outcome else f"unreadable: {problem}"
            tries = len((entries[stuck].get("tries") or {}).get(where) or ()) if outcome else 0
            notes.append(f"stuck on {stuck} ({where}{f', {tries} wrong tries' if tries else ''}) "
                         f"after {entries[stuck].get('attempts') or 0} attempts")
        if unchecked:
            notes.append(f"started, not checked yet: {', '.join(unchecked)}")
        held = [f"{i}.{f}" for i in ids for f in sorted(progress.held(entries[i], G.MAX_TRIES))]
        if held:
            notes.append(f"held after {G.MAX_TRIES} wrong tries: {', '.join(held)}")
        for i in ids:
            for shown in entries[i].get("shown") or ():
                if isinstance(shown, dict):
                    notes.append(f"{i}: answer shown by `{shown.get('by')}`"
                                 + (" after its pass" if shown.get("after_pass") else ""))
        released = [f"{i}.{f}" for i in ids for f in entries[i].get("released") or ()]
        if released:
            notes.append(f"released: {', '.join(released)}")
        for i in ids:
            code = entries[i].get("code")
            if isinstance(code, dict) and code.get("adapter"):
                notes.append(f"{i} by --adapter {code['adapter']}")
            if entries[i].get("status") == "passed" and graded[i][0] not in ("passed", "revealed"):
                notes.append(f"{i}: the progress file says passed, the work does not")
        notes += extra.get(name, [])
        lines.append(f"{name}: " + "; ".join(notes))
    for name, problem in unreadable:
        lines.append(f"{name}: not graded: {problem}" + "".join(f"; {n}" for n in extra.get(name, ())))
    for name in strays:
        lines.append(f"{name}/{progress.PROGRESS}: a progress file, not a record the facilitator issued: not "
                     "graded (the roster reads the room's records)")
    return "\n".join(lines)
