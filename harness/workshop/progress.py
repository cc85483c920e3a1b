"""The learner's progress file (in the working folder). Its status is the learner's own record;
the facilitator's roster (regrade.py) grades the work again and never trusts it."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..vocab.errors import UsageError
from ..vocab.files import atomic_write_text

PROGRESS = ".crashlab-workshop.json"
STATUSES = ("not started", "started", "attempted", "passed")


def path(folder: Path) -> Path:
    return Path(folder) / PROGRESS


def load(folder: Path) -> dict:
    """The learner's state: an issued learner's from their record in the room (room.py), never
    from a file they write; anyone else's from the progress file."""
    from . import room
    issued = room.load(folder)
    if issued is not None:
        return issued
    p = path(folder)
    if not p.exists():
        return {"learner": Path(folder).resolve().name, "rungs": {}}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{p}: unreadable progress file ({exc}); remove it to start over") from None
    if not isinstance(data, dict) or not isinstance(data.get("rungs"), dict):
        raise UsageError(f"{p}: not a crashlab workshop progress file")
    for rung_id, e in data["rungs"].items():
        if not isinstance(e, dict):
            raise UsageError(f"{p}: rungs.{rung_id}: not a rung's record; remove that entry (or the file) "
                             "to start that rung over")
        for name in ("attempts", "hints"):
            if not isinstance(e.get(name, 0), int) and e.get(name) is not None:
                raise UsageError(f"{p}: rungs.{rung_id}.{name}: {e[name]!r} is not a count; write a "
                                 "whole number (or remove that entry to start the rung over)")
    return data


def save(folder: Path, data: dict) -> None:
    """Written to a temporary file in the same folder and renamed over the old one: a save that
    fails (a full disk, an interrupted command) leaves the previous progress file as it was.
    An issued learner's changes are appended to their record in the room instead."""
    if data.get("issued"):
        from . import room
        room.save(folder, data)
        return
    atomic_write_text(path(folder), json.dumps(data, indent=2, sort_keys=True) + "\n")


def entry(data: dict, rung_id: str) -> dict:
    return data["rungs"].setdefault(rung_id, {"status": "started", "attempts": 0, "hints": 0, "kit": None,
                                             "revealed": False})


def record_tries(e: dict, tried) -> None:
    """Count each distinct wrong answer per field (checking the same answer again is no new try)."""
    tries = e.setdefault("tries", {})
    for name, value in tried:
        seen = tries.setdefault(name, [])
        if value not in seen:
            seen.append(value)


def held(e: dict, limit: int) -> frozenset:
    """The fields that took ``limit`` distinct wrong answers: no longer graded until released."""
    tries = e.get("tries") if isinstance(e.get("tries"), dict) else {}
    return frozenset(f for f, seen in tries.items() if isinstance(seen, list) and len(seen) >= limit)


def release(e: dict, name: str) -> None:
    """The facilitator gives a held field its tries back (recorded: the roster shows it)."""
    (e.get("tries") or {}).pop(name, None)
    e.setdefault("released", []).append(name)


def hints_used(e: dict) -> int:
    return int(e.get("hints") or 0) + len(e.get("field_hints") or ())


def status(data: dict, rung_id: str) -> str:
    return data["rungs"].get(rung_id, {}).get("status", "not started")


def record_attempt(data: dict, rung_id: str, passed: bool) -> None:
    e = entry(data, rung_id)
    e["attempts"] += 1
    if passed:
        e["status"] = "passed"
    elif e["status"] != "passed":
        e["status"] = "attempted"


def offset(data: dict):
    """This learner's own event numbering (evidence.Numbering; the shared kit's unless the kit
    was started with --learner NAME or issued by a facilitator): drawn from the name."""
    from .evidence import Numbering
    return Numbering(str(data.get("variant") or ""))


# --------------------------------------------------------------------------- answers shown elsewhere
def find(start: Path) -> Path | None:
    """The learner's working folder: ``start`` or the nearest parent holding a progress file."""
    from .room import IDENTITY
    for folder in (Path(start).resolve(), *Path(start).resolve().parents):
        if path(folder).is_file() or (folder / IDENTITY).is_file():
            return folder
    return None


def rungs_answered_by(scenario_id: str) -> list[str]:
    """The rungs whose answer a scenario's teaching card gives away: those read from its trace
    (or from the workshop's own version of it, ``workshop-ID``), and the handoff rehearsal when
    it is one of the runs to recover."""
    from .ladder import rungs

    out = [r.id for r in rungs() if scenario_id in r.scenarios or f"workshop-{scenario_id}" in r.scenarios]
    if scenario_id in _handoff_pool():
        out.append("handoff")
    return out


def _handoff_pool() -> set[str]:
    from .keys import _answers

    return set(_answers()["handoff"])


def record_shown(scenario_id: str, how: str, start: Path) -> list[str]:
    """Any display of a rung's answer counts as a reveal: called before a teaching card is shown
    in a learner's folder. A rung already passed keeps its pass (the display is noted, not held
    against it). -> the rungs recorded as revealed."""
    folder = find(start)
    hit = rungs_answered_by(scenario_id)
    if folder is None or not hit:
        return []
    data = load(folder)
    revealed = []
    for rung_id in hit:
        e = data["rungs"].get(rung_id) or entry(data, rung_id)
        if not e.get("kit"):
            e["status"] = "not started"     # recorded, not started: start keeps the record
        e.setdefault("shown", []).append({"by": how, "after_pass": e.get("status") == "passed"})
        if e.get("status") != "passed":
            e["revealed"] = True
            revealed.append(rung_id)
    save(folder, data)
    return revealed
