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
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from ..vocab.errors import InternalError, UsageError, clip
from ..vocab.event_tables import KEYS, problem
from ..vocab.events import LANES, TYPES, Event
from ..vocab.files import atomic_writer

#: The bound on one run's trace (docs/protocol.md "Limits"): once the trace holds this many events
#: or this many bytes (as written), the adapter's next port call is refused and recorded as the
#: adapter fault ``trace_too_large``. The largest trace of the library holds under 1,000 events
#: and 400 KB.
MAX_TRACE_EVENTS = 200_000
MAX_TRACE_BYTES = 8 * 2**20

_dumps = orjson.dumps
_CALL = TYPES["call"]   # the event of an adapter's port call: the one the bound refuses


class TraceTooLarge(Exception):
    """An adapter drove its run's trace past the bound (MAX_TRACE_EVENTS, MAX_TRACE_BYTES): raised
    by ``Trace.emit`` for the port call that would go beyond it, and recorded by the runner like
    any adapter fault, under ``kind``."""

    kind = "trace_too_large"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Trace:
    """An append-only list of events with a clock source, bounded in events and bytes."""

    __slots__ = ("events", "_now", "_size", "_sized", "max_events", "max_bytes")

    def __init__(self, now, *, max_events: int | None = None, max_bytes: int | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self._now = now
        self._size = 0    # bytes of the first ``_sized`` events as trace lines (jsonl)
        self._sized = 0
        self.max_events = MAX_TRACE_EVENTS if max_events is None else max_events
        self.max_bytes = MAX_TRACE_BYTES if max_bytes is None else max_bytes

    @property
    def size(self) -> int:
        """Bytes of the events as trace lines (jsonl). Counted when asked (the bound asks at every
        port call), all the events recorded since in one serialisation: an event's line is as long
        with its keys sorted as without, and a JSON array of n events is one byte longer than
        their n lines."""
        events, sized = self.events, self._sized
        if sized < len(events):
            self._size += len(_dumps(events[sized:])) - 1
            self._sized = len(events)
        return self._size

    def emit(self, event: type[Event], /, *, worker: str | None = None, run: str | None = None,
             **data: Any) -> dict[str, Any]:
        """Record an event of the kind ``event`` (a class of crashlab.vocab.events, which gives its
        lane and kind) with these fields; refused (InternalError) when they do not match the
        class's declaration. A port call (what an adapter asks for) is refused with
        TraceTooLarge once the trace has reached its bound; every other event is recorded (the
        scenario bounds them)."""
        if (event, *data) not in _DECLARED:
            _check(len(self.events), event, data)
        if event is _CALL and (len(self.events) >= self.max_events or self.size >= self.max_bytes):
            raise TraceTooLarge(self.over())
        events = self.events
        record = {"seq": len(events), "t": self._now(), "lane": event.lane, "kind": event.kind,
                  "worker": worker, "run": run, **data}
        events.append(record)
        return record

    def over(self) -> str:
        """What the bound refused, as an adapter fault's message."""
        return (f"the run's trace reached {len(self.events):,} events and {self.size:,} bytes; the bound is "
                f"{self.max_events:,} events or {self.max_bytes:,} bytes ({self.max_bytes / 2**20:g} MiB) per run "
                "(docs/protocol.md, Limits): the adapter's next port call was refused")

    def emit_scenario(self, kind: str, *, run: str | None, data: Any, line: int | None) -> dict[str, Any]:
        """Record a scenario event (``cancel``, ``deploy``, ...): on the world lane under its own
        type, with its data and the scenario line (a ScenarioEvent)."""
        wrong = problem("world", kind, ("data", "line"))
        if wrong is not None:
            raise InternalError(f"trace event #{len(self.events)}: {wrong} (crashlab.vocab.events)")
        record = {"seq": len(self.events), "t": self._now(), "lane": "world", "kind": kind,
                  "worker": None, "run": run, "data": data, "line": line}
        self.events.append(record)
        return record

    def to_jsonl(self) -> str:
        return jsonl(self.events)


#: The (event class, field names...) signatures already found to match the vocabulary: each
#: is checked once per process, and an emit with a known signature costs one set look-up.
_DECLARED: set[tuple] = set()


def _check(seq: int, event: type[Event], data: dict) -> None:
    """Refuse an event the vocabulary does not declare (a crashlab bug: never written), or
    remember its signature as declared."""
    kind = getattr(event, "kind", None)
    if TYPES.get(kind) is not event:
        raise InternalError(f"trace event #{seq}: {event!r} is not an event kind of crashlab.vocab.events")
    wrong = problem(event.lane, kind, data)
    if wrong is not None:
        raise InternalError(f"trace event #{seq}: {wrong} (crashlab.vocab.events)")
    _DECLARED.add((event, *data))


def jsonl(events: Iterable[dict]) -> str:
    """Events as trace lines: the same bytes as ``canonical_json`` (sorted keys, no spaces, UTF-8),
    made by orjson, several times faster."""
    dumps, sort = orjson.dumps, orjson.OPT_SORT_KEYS
    return b"".join([dumps(e, option=sort) + b"\n" for e in events]).decode("utf-8")


def write_jsonl(events: Iterable[dict], path: Path) -> None:
    """Write a trace atomically (a reader never sees half a trace)."""
    with atomic_writer(Path(path)) as fh:
        fh.write(jsonl(events))


#: A trace line nested deeper than this is refused (crashlab's own traces stay far below it).
MAX_TRACE_DEPTH = 100
_HEADER_FIELDS = {"scenario": str, "seed": int, "adapter": str}


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any, limit: int) -> bool:
    """True when ``value`` nests no deeper than ``limit`` (iterative: no recursion limit)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level >= limit:
                return False
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


#: The largest trace file crashlab reads: a run's trace stops growing at MAX_TRACE_BYTES but for
#: the last result and the end of the run, so a larger file was not written by crashlab.
MAX_READ_BYTES = 4 * MAX_TRACE_BYTES


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a trace, line by line (the file is never held whole in memory), with an error naming
    the file and line for anything malformed: larger than MAX_READ_BYTES, not UTF-8, not JSON,
    NaN or Infinity, nesting beyond MAX_TRACE_DEPTH, a missing or malformed header, sequence
    numbers out of order, an event the vocabulary does not declare (an unknown kind, a kind on
    the wrong lane, a missing or an undeclared field: crashlab.vocab.events), no end event (an
    incomplete trace). Every event it returns parses (``crashlab.vocab.event_tables.parse``)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_READ_BYTES:
                raise UsageError(f"{path}: {size:,} bytes, more than any trace crashlab writes (a run's trace "
                                 f"is bounded at {MAX_TRACE_BYTES / 2**20:g} MiB; files beyond "
                                 f"{MAX_READ_BYTES / 2**20:g} MiB are refused)")
            return _read_events(fh, path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such trace file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder; give a trace file (.jsonl)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read trace: {exc.strerror or exc}") from None


def _read_events(fh, path: Path) -> list[dict]:
    events = []
    lineno = 0
    for raw in fh:   # binary: a line ends at b"\n" only (U+2028 inside a string is no line break)
        lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}:{lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not line.strip():
            continue
        try:
            event = json.loads(line, parse_constant=_refuse_constant)
        except RecursionError:
            raise UsageError(f"{path}:{lineno}: nested too deeply to be a crashlab trace event") from None
        except ValueError as exc:  # JSONDecodeError, NaN/Infinity, integers with too many digits
            raise UsageError(f"{path}:{lineno}: not a JSON object ({clip(getattr(exc, 'msg', str(exc)))})",
                             hint="a trace is one JSON object per line, as written by crashlab run") from None
        if not isinstance(event, dict) or not {"seq", "t", "lane", "kind"} <= event.keys():
            raise UsageError(f"{path}:{lineno}: not a crashlab trace event (needs seq, t, lane, kind)")
        if event["seq"] != len(events) or type(event["t"]) is not int or event["lane"] not in LANES \
                or not isinstance(event["kind"], str):
            raise UsageError(f"{path}:{lineno}: malformed event: seq must count from 0 without gaps, t must be "
                             f"an integer, lane one of {', '.join(LANES)}")
        if line.count("[") + line.count("{") > MAX_TRACE_DEPTH and not _depth(event, MAX_TRACE_DEPTH):
            raise UsageError(f"{path}:{lineno}: nested deeper than {MAX_TRACE_DEPTH} levels; not a crashlab trace")
        if not events:
            _check_header(event, path)
        keys = KEYS.get(event["kind"])  # (lane, every key it may have): crashlab.vocab.event_tables
        if (keys is None or keys[0] != event["lane"] or len(event) != len(keys[1])
                or not keys[1].issuperset(event)) and (wrong := problem(event["lane"], event["kind"], event)):
            raise UsageError(f"{path}:{lineno}: {clip(wrong)}; not an event crashlab writes",
                             hint="docs/trace.md lists every event kind and its fields")
        events.append(event)
    if not events:
        raise UsageError(f"{path}: no header event on line 1; is this a crashlab trace?")
    if events[-1].get("kind") != "end":
        raise UsageError(f"{path}: the trace has no end event (line {len(events)} is the last); it is "
                         "incomplete or was cut")
    _check_end(events, path)
    return events


def end_states(events: list[dict], ids: Iterable[str] | None = None) -> dict[str, dict]:
    """What the end event must say of each run, from the events before it: the disposition of its
    last accepted terminal finish (``finished``), of its last accepted waiting finish since
    (``waiting``), and how many workers started (``workers``). The runs are ``ids``, by default the
    header's."""
    from ..vocab.model import TERMINAL_STATES

    if ids is None:
        listed = events[0].get("runs")
        ids = [r.get("id") for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    states = {rid: {"finished": None, "waiting": None, "workers": 0} for rid in ids if isinstance(rid, str)}
    for ev in events:
        state = states.get(ev.get("run"))  # type: ignore[arg-type]
        if state is None:
            continue
        if ev["kind"] == "start" and ev["lane"] == "worker":
            state["workers"] += 1
        elif ev["kind"] == "finish" and ev["lane"] == "run" and ev.get("accepted") is True:
            if ev.get("disposition") in TERMINAL_STATES:
                state["finished"], state["waiting"] = ev["disposition"], None
            else:
                state["waiting"] = ev.get("disposition")
    return states


def _check_end(events: list[dict], path: Path) -> None:
    """Refuse a trace whose end event does not say what its own events give (end_states): the
    checks read a run's disposition from the end event, so an end edited apart from its finishes
    (or finishes edited apart from their end) would be judged by two different stories."""
    said, line = events[-1].get("runs"), len(events)
    if not isinstance(said, dict):
        raise UsageError(f"{path}:{line}: the end event's 'runs' is not an object; not a trace crashlab writes")
    states = end_states(events, None if "runs" in events[0] else said)   # no run list: the runs the end names
    if sorted(said) != sorted(states):
        raise UsageError(f"{path}:{line}: the end event names the runs {clip(sorted(said))}, the header "
                         f"{clip(sorted(states))}; the trace was edited or not written by crashlab")
    for rid, state in states.items():
        told = said[rid] if isinstance(said[rid], dict) else {}
        for field, value in state.items():
            if told.get(field) != value:
                raise UsageError(
                    f"{path}:{line}: the end event says {rid}'s {field} is {clip(json.dumps(told.get(field)))}, "
                    f"but the trace's events give {clip(json.dumps(value))} (its accepted finishes and its "
                    "workers' starts); the trace was edited or not written by crashlab",
                    hint="re-run the scenario (its repro line) for a trace crashlab wrote")


def _check_header(head: dict, path: Path) -> None:
    if head["kind"] != "header":
        raise UsageError(f"{path}: no header event on line 1; is this a crashlab trace?")
    for name, kind in _HEADER_FIELDS.items():
        if type(head.get(name)) is not kind:
            raise UsageError(f"{path}:1: the header's '{name}' is missing or not a {kind.__name__}; "
                             "the trace was not written by crashlab or was edited")
    rules = head.get("rules")
    if "rules" in head and (type(rules) is not int or rules < 1):
        raise UsageError(f"{path}:1: the header's 'rules' must be a rule-set number (1, 2, ...), not "
                         f"{clip(rules, 40)}; the trace was not written by crashlab or was edited")


def by_kind(events: Iterable[dict], *kinds: str) -> Iterator[dict]:
    wanted = set(kinds)
    return (e for e in events if e["kind"] in wanted)
