"""The recorded trace: one JSONL event log per run.

Every event is a flat JSON object with at least::

    {"seq": 12, "t": 120000, "lane": "port", "kind": "call", "worker": "w2", "run": "run-82", ...}

``seq`` is a gap-free sequence number starting at 0, ``t`` is simulated milliseconds since
the scenario origin. Lanes: ``meta`` (header and end), ``run`` (checkpoints, lease,
finish, escalations: the local run-state timeline), ``remote`` (what the services really
did: the ground truth), ``knowledge`` (ledger appends: what the adapter asserts),
``fault`` (injected faults, crashes, pauses, resumes), ``worker`` (worker lifecycle and
adapter faults), ``port`` (every port call and its result), ``world`` (scenario events:
deliveries, approvals, deployments, other actors). docs/trace.md lists every kind.

Serialisation is canonical (sorted keys, no whitespace), so the same seed yields the same
bytes in any process with any PYTHONHASHSEED.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import UsageError
from .model import canonical_json

LANES = ("meta", "run", "remote", "knowledge", "fault", "worker", "port", "world")


class Trace:
    """An append-only list of events with a clock source."""

    __slots__ = ("events", "_now")

    def __init__(self, now) -> None:
        self.events: list[dict[str, Any]] = []
        self._now = now

    def emit(self, lane: str, kind: str, *, worker: str | None = None, run: str | None = None,
             **data: Any) -> dict[str, Any]:
        event = {"seq": len(self.events), "t": self._now(), "lane": lane, "kind": kind,
                 "worker": worker, "run": run}
        event.update(data)
        self.events.append(event)
        return event

    def to_jsonl(self) -> str:
        return "".join(canonical_json(e) + "\n" for e in self.events)


def write_jsonl(events: Iterable[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for event in events:
            fh.write(canonical_json(event) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a trace, with an error naming the file and line for anything malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read trace: {exc}") from None
    events = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{lineno}: not a JSON object ({exc.msg})",
                             hint="a trace is one JSON object per line, as written by crashlab run") from None
        if not isinstance(event, dict) or not {"seq", "t", "lane", "kind"} <= event.keys():
            raise UsageError(f"{path}:{lineno}: not a crashlab trace event (needs seq, t, lane, kind)")
        events.append(event)
    if not events or events[0].get("kind") != "header":
        raise UsageError(f"{path}: no header event on line 1; is this a crashlab trace?")
    return events


def by_kind(events: Iterable[dict], *kinds: str) -> Iterator[dict]:
    wanted = set(kinds)
    return (e for e in events if e["kind"] in wanted)
