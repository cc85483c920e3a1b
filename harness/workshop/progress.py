"""The learner's progress file (in the working folder) and the facilitator's class table."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from .ladder import rungs

PROGRESS = ".crashlab-workshop.json"
STATUSES = ("not started", "started", "attempted", "passed")


def path(folder: Path) -> Path:
    return Path(folder) / PROGRESS


def load(folder: Path) -> dict:
    p = path(folder)
    if not p.exists():
        return {"learner": Path(folder).resolve().name, "rungs": {}}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{p}: unreadable progress file ({exc}); remove it to start over") from None
    if not isinstance(data, dict) or not isinstance(data.get("rungs"), dict):
        raise UsageError(f"{p}: not a crashlab workshop progress file")
    return data


def save(folder: Path, data: dict) -> None:
    p = path(folder)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def entry(data: dict, rung_id: str) -> dict:
    return data["rungs"].setdefault(rung_id, {"status": "started", "attempts": 0, "hints": 0, "kit": None,
                                             "revealed": False})


def status(data: dict, rung_id: str) -> str:
    return data["rungs"].get(rung_id, {}).get("status", "not started")


def record_attempt(data: dict, rung_id: str, passed: bool) -> None:
    e = entry(data, rung_id)
    e["attempts"] += 1
    if passed:
        e["status"] = "passed"
    elif e["status"] != "passed":
        e["status"] = "attempted"


def class_table(folder: Path) -> str:
    """One row per learner (every progress file under ``folder``), one column per rung."""
    files = sorted(Path(folder).rglob(PROGRESS))
    if not files:
        raise UsageError(f"{folder}: no {PROGRESS} files found (one per learner's working folder)")
    ids = [r.id for r in rungs()]
    mark = {"not started": ".", "started": "s", "attempted": "x", "passed": "P"}
    learners = []
    for f in files:
        data = load(f.parent)
        learners.append((str(f.parent.relative_to(folder)) if f.parent != Path(folder) else data["learner"], data))
    width = max(len(n) for n, _ in learners + [("learner", None)])
    lines = [f"{'learner':<{width}}  " + " ".join(ids) + "  passed"]
    for name, data in learners:
        cells = [f"{mark[status(data, i)]:>{len(i)}}" for i in ids]
        passed = sum(status(data, i) == "passed" for i in ids)
        lines.append(f"{name:<{width}}  " + " ".join(cells) + f"  {passed}/{len(ids)}")
    totals = [f"{sum(status(d, i) == 'passed' for _, d in learners):>{len(i)}}" for i in ids]
    lines.append(f"{'passed':<{width}}  " + " ".join(totals))
    lines.append("P passed, x attempted, s started, . not started")
    return "\n".join(lines)
