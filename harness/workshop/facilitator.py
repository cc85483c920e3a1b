"""The facilitator's side of the workshop: a room whose answers are locked, the opening figure,
and the session plans.

A room is a folder holding the learners' working folders. ``crashlab workshop room DIR
--no-answers`` writes ``DIR/.crashlab-room.json``; from then on ``reveal`` in any learner's
folder under DIR is refused, and ``crashlab run --report`` there hides the teaching card of a
scenario that answers a rung, until the facilitator unlocks the rung (``--unlock RUNG``, or
``--unlock all``). The plans (data/plans.yaml) are data: ``crashlab workshop plan`` prints
them, docs/workshop.md shows the same tables, and a test checks that they add up, keep
what the chapter requires, and name every rung they leave to homework.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import yaml

from ..vocab.errors import UsageError
from ..vocab.files import atomic_write_text
from .evidence import DATA

ROOM = ".crashlab-room.json"
#: The scenario the opening figure shows: it answers no rung (no rung reads it, grades code on
#: it, shows it as an exhibit, scores it or hands it off), and it is shown without its card.
OPENING = "seed000-lost-publish-response"


def opening_command(out: str = "projector/") -> str:
    return f"crashlab run {OPENING} --no-answers --report {out}"


# --------------------------------------------------------------------------- the room
def find_room(start: Path) -> Path | None:
    for folder in (Path(start).resolve(), *Path(start).resolve().parents):
        if (folder / ROOM).is_file():
            return folder
    return None


def load_room(folder: Path) -> dict:
    p = Path(folder) / ROOM
    if not p.exists():
        return {"answers": "open", "unlocked": []}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{p}: unreadable room file ({exc}); the facilitator writes it again with "
                         "`crashlab workshop room DIR --no-answers`") from None
    if not isinstance(data, dict) or data.get("answers") not in ("open", "locked"):
        raise UsageError(f"{p}: not a crashlab workshop room file")
    data.setdefault("unlocked", [])
    return data


def save_room(folder: Path, data: dict) -> None:
    atomic_write_text(Path(folder) / ROOM, json.dumps(data, indent=2, sort_keys=True) + "\n")


def locked(start: Path, rung_id: str) -> Path | None:
    """The room folder when ``rung_id``'s answer is locked for a learner working in ``start``
    (an issued learner's room is the one that issued them, wherever the folder was copied)."""
    from .room import identity_at
    found = identity_at(start)
    room = Path(found[1]["room"]) if found and (Path(found[1]["room"]) / ROOM).is_file() else find_room(start)
    if room is None:
        return None
    data = load_room(room)
    if data["answers"] != "locked" or rung_id in data["unlocked"] or "all" in data["unlocked"]:
        return None
    return room


def set_room(folder: Path, *, no_answers: bool, unlock: list[str], lock: list[str],
             seed: int | None = None, add: tuple = ()) -> list[str]:
    """Apply the facilitator's settings; -> lines describing the room."""
    from .ladder import rung

    folder = Path(folder)
    if add and not folder.exists():
        folder.mkdir(parents=True)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (the room is the folder holding the learners' folders)")
    for rung_id in unlock + lock:
        if rung_id != "all":
            rung(rung_id)      # an unknown rung is a usage error naming the ladder
    data = load_room(folder)
    if no_answers:
        data["answers"], data["unlocked"] = "locked", []
    if seed is not None:
        data["seed"] = seed
    for rung_id in unlock:
        if rung_id not in data["unlocked"]:
            data["unlocked"].append(rung_id)
    data["unlocked"] = [r for r in data["unlocked"] if r not in lock]
    save_room(folder, data)
    from .room import issue, room_key
    lines = [describe(data)]
    if seed is not None:       # a seeded room is an issued room: every learner folder gets an identity
        room_key(folder.resolve(), create=True)
        found = learner_folders(folder)
        add = tuple(dict.fromkeys([*add, *found]))
        lines.append(f"room seed {seed}: every learner folder under {folder} is issued an identity "
                     f"({', '.join(found) or 'none yet'}); its kits come from it and the roster reads its record. "
                     f"A folder made later gets one with `crashlab workshop room {folder} --add NAME`.")
        from .progress import PROGRESS
        old = [name for name in found if (folder / name / PROGRESS).exists()]
        if old:
            lines.append(f"  {', '.join(old)}: a {PROGRESS} from before holds their kits; it is not graded. "
                         "They run `crashlab workshop start RUNG` again (the listing is rewritten in their "
                         "identity's numbering; the worksheet is kept, and must be read again from it).")
    return lines + [line for name in add for line in issue(folder, name)]


def learner_folders(room: Path) -> list[str]:
    """The folders directly under a room that can be a learner's (a name ``--add`` takes)."""
    from .room import NAME
    return sorted(p.name for p in Path(room).iterdir()
                  if p.is_dir() and not p.name.startswith(".") and NAME.match(p.name) and p.name != "workshop")


def describe(data: dict) -> str:
    seed = (f"; room seed {data['seed']} (every learner's kit is their own)"
            if data.get("seed") is not None else "")
    if data["answers"] != "locked":
        return "answers: open (reveal works after an attempt)" + seed
    return ("answers: locked (reveal refused, reports hide teaching cards); unlocked: "
            + (", ".join(data["unlocked"]) or "none") + seed)


def room_variant(here: Path) -> None:
    """``start`` without an identity in a room with a seed: refused, naming what the facilitator
    runs. A seeded room issues identities (its kits come from them, its roster reads their
    records); a folder without one would keep its kits in a progress file the roster does not
    read. A room seeded before seeds issued identities is told to run ``--seed`` again."""
    from .room import is_issued_room
    room = find_room(here)
    if room is None:
        return None
    data = load_room(room)
    if data.get("seed") is None:
        return None
    if not is_issued_room(room):
        raise UsageError(f"{room / ROOM}: this room's seed ({data['seed']}) was set before seeded rooms issued "
                         "identities; its kits would live in progress files the roster does not read. Ask the "
                         f"facilitator to run `crashlab workshop room {room} --seed {data['seed']}` again (it issues "
                         "every learner folder an identity), then start in your folder")
    raise UsageError(f"{Path(here).resolve()}: this folder is in the room {room}, whose kits come from identities "
                     "the facilitator issues, and it holds none; ask the facilitator to run "
                     f"`crashlab workshop room {room} --add NAME`, then work in {room}/NAME")


def card_shown(scenario_id: str, how: str, start: Path) -> bool:
    """``crashlab run --report`` in a learner's folder: a teaching card that answers a rung counts
    as its reveal (recorded before the report is written); in a room whose answers the facilitator
    locked, it is hidden instead. -> whether the report must hide answers."""
    import sys

    from .progress import record_shown, rungs_answered_by

    held = [r for r in rungs_answered_by(scenario_id) if locked(start, r)]
    if held:
        print(f"crashlab: {scenario_id}'s teaching card answers workshop rung(s) {', '.join(held)}, locked in this "
              "room by the facilitator: the report hides it (as with --no-answers)", file=sys.stderr)
        return True
    revealed = record_shown(scenario_id, how, start)
    if revealed:
        print(f"crashlab: the report shows {scenario_id}'s teaching card, the answer to workshop rung(s) "
              f"{', '.join(revealed)}: recorded as revealed in the progress file (add --no-answers to hide it)",
              file=sys.stderr)
    return False


# --------------------------------------------------------------------------- the plans
@functools.cache
def _plans_doc() -> dict:
    return yaml.safe_load((DATA / "plans.yaml").read_text(encoding="utf-8"))


def plans() -> dict:
    return _plans_doc()["plans"]


def rung_minutes() -> dict:
    """The minutes a rung takes a learner, where that is known (plans.yaml, ``rung_minutes``)."""
    return dict(_plans_doc().get("rung_minutes") or {})


def _minutes(slot: str) -> tuple[int, int]:
    a, b = slot.split("-")
    to = lambda s: int(s.split(":")[0]) * 60 + int(s.split(":")[1])   # noqa: E731
    return to(a), to(b)


#: What every plan keeps: the chapter's two extension exercises and the paired handoff rehearsal.
REQUIRED = ("pressure", "weak-service", "handoff")


def problems(plan: dict, minutes: int) -> list[str]:
    """What is wrong with a plan: gaps or overlaps, a length other than ``minutes``, a rung run
    twice or left out without being named as homework, a required exercise not in the session,
    a rung given fewer minutes than it takes (``rung_minutes``)."""
    from .ladder import rungs

    out, at, seen, takes = [], 0, [], rung_minutes()
    for row in plan["slots"]:
        start, end = _minutes(row["time"])
        if start != at or end <= start:
            out.append(f"slot {row['time']}: expected to start at {at // 60}:{at % 60:02d}")
        at = end
        seen += row.get("rungs") or []
        for r in row.get("rungs") or []:
            per = (end - start) // len(row["rungs"])
            if per < takes.get(r, 0):
                out.append(f"slot {row['time']}: {r} gets {per} minutes and takes about {takes[r]}")
    if at != minutes:
        out.append(f"the plan ends at {at} minutes, not {minutes}")
    homework = list(plan.get("homework") or [])
    every = [r.id for r in rungs()]
    for r in every:
        n = seen.count(r) + homework.count(r)
        if n != 1:
            out.append(f"rung {r} is {'left out' if n == 0 else 'planned twice'}")
    out += [f"{r} is not in the session" for r in REQUIRED if r not in seen]
    out += [f"unknown rung {r}" for r in seen + homework if r not in every]
    return out


def plan_markdown(minutes: int) -> str:
    key = str(minutes)
    if key not in plans():
        raise UsageError(f"no {minutes}-minute plan; the plans: {', '.join(sorted(plans(), key=int))} minutes")
    plan = plans()[key]
    lines = ["| time | rungs | minutes per rung | discuss afterwards |", "|---|---|---|---|"]
    for row in plan["slots"]:
        start, end = _minutes(row["time"])
        rungs = row.get("rungs") or []
        per = f"{(end - start) // len(rungs)}" if rungs else "-"
        shown = ", ".join(f"`{r}`" for r in rungs) or row.get("what", "")
        if row.get("what") and rungs:
            shown = f"{shown} ({row['what']})"
        lines.append(f"| {row['time']} | {shown} | {per} | {row.get('discuss', '')} |")
    if plan.get("homework"):
        lines += ["", "Homework (after the session): " + ", ".join(f"`{r}`" for r in plan["homework"]) + "."]
    return "\n".join(lines) + "\n"
