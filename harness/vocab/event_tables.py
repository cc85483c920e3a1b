"""What is read from the trace vocabulary (crashlab.vocab.events) and derived from it: the tables
and functions that check, parse and describe events, so that the vocabulary's module holds
its declarations and nothing else.

* ``SPECS`` and ``KEYS`` are what ``Trace.emit`` checks an event against (a mismatch is a
  crashlab bug, caught where it is made, never written) and what the trace reader checks a
  line against; ``problem`` says why an event does not match;
* ``parse`` turns a trace event (a dict, as written) into its typed event, and
  ``Event.to_dict`` turns it back (the same dict: traces stay byte-identical);
  ``is_scenario_event`` tells a scenario event from a kind of the vocabulary;
* ``dispatch`` checks a dispatch table keyed by event type (the checks' and the report's):
  it must handle every kind or list it as ignored, so a new kind without a handler fails at
  import;
* ``KINDS`` and ``BY_NAME`` are the descriptive view, from which the scenario format's evidence
  vocabulary and docs/trace.md's table of kinds (``kinds_markdown``, ``python tools/docgen.py``)
  are derived.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TypeVar

from .events import ABSENT, ENVELOPE, TYPES, Event, EventError, ScenarioEvent


# ----------------------------------------------------------------------------- checking and parsing
#: kind -> (lane, every field it declares, the fields it requires): what ``Trace.emit`` checks.
SPECS: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    name: (cls.lane, frozenset(cls.fields + cls.optional), frozenset(cls.fields)) for name, cls in TYPES.items()}


#: kind -> (lane, every key an event of it may have, envelope included): what a trace reader checks.
KEYS: dict[str, tuple[str, frozenset[str]]] = {name: (lane, allowed | set(ENVELOPE))
                                              for name, (lane, allowed, _) in SPECS.items()}


def problem(lane: str, kind: str, fields: Iterable[str]) -> str | None:
    """Why an event (its lane, kind and field names, the envelope aside) does not match the
    vocabulary, or None when it does."""
    spec = SPECS.get(kind)
    names = set(fields).difference(ENVELOPE)
    if spec is None:
        if lane == "world" and names == {"data", "line"}:
            return None
        if lane == "world" and {"data", "line"} <= names:
            return (f"scenario event {kind!r} has fields it does not declare: "
                    f"{', '.join(sorted(names - {'data', 'line'}))}")
        return f"unknown event kind {kind!r} on lane {lane!r}"
    if spec[0] != lane:
        return f"event kind {kind!r} belongs on lane {spec[0]!r}, not {lane!r}"
    missing = spec[2].difference(names)
    if missing:
        return f"event kind {kind!r} lacks {', '.join(sorted(missing))}"
    extra = names.difference(spec[1])
    if extra:
        return f"event kind {kind!r} has no field {', '.join(sorted(extra))}"
    return None


def is_scenario_event(ev: Mapping[str, Any]) -> bool:
    """A world-lane event under a scenario event's own type (not a kind of the vocabulary)."""
    return ev["kind"] not in TYPES and ev["lane"] == "world" and "data" in ev and "line" in ev


_SCENARIO_KEYS = frozenset(ENVELOPE) | {"data", "line"}


def parse(ev: Mapping[str, Any]) -> Event:
    """The typed event of a trace event (a dict as written, as ``read_jsonl`` returns it and
    ``Trace.emit`` makes it); EventError when it does not match the vocabulary."""
    kind, lane = ev.get("kind"), ev.get("lane")
    if not isinstance(kind, str):
        raise EventError(f"an event's kind must be a string, not {kind!r}")
    keys = KEYS.get(kind)
    if keys is not None:
        if keys[0] == lane and keys[1].issuperset(ev):
            try:
                return _FROM_DICT[kind](ev)
            except KeyError:  # a required field is missing
                pass
    elif lane == "world" and _SCENARIO_KEYS.issuperset(ev) and all(k in ev for k in ("seq", "t", "data", "line")):
        return ScenarioEvent(seq=ev["seq"], t=ev["t"], worker=ev.get("worker"), run=ev.get("run"), kind=kind,
                             data=ev["data"], line=ev["line"])
    raise EventError(problem(lane, kind, ev) or f"event {kind!r} has no seq or no t")


def _from_dict(cls: type[Event]) -> Callable[[Mapping[str, Any]], Event]:
    """A constructor of ``cls`` from a trace event whose keys ``parse`` has checked: it fills
    the slots as the dataclass ``__init__`` does (``object.__setattr__``, the class being
    frozen) without a keyword-argument call: a third cheaper (KeyError: a field is missing)."""
    lines = ["def from_dict(ev):", "    self = new(cls)"]
    lines += [f"    setattr(self, {n!r}, ev[{n!r}])" for n in ("seq", "t") + cls.fields]
    lines += [f"    setattr(self, {n!r}, ev.get({n!r}))" for n in ("worker", "run")]
    lines += [f"    setattr(self, {n!r}, ev.get({n!r}, ABSENT))" for n in cls.optional]
    namespace = {"new": object.__new__, "setattr": object.__setattr__, "cls": cls, "ABSENT": ABSENT}
    exec("\n".join(lines + ["    return self"]), namespace)  # noqa: S102 - names from the class, not from data
    return namespace["from_dict"]


_FROM_DICT = {name: _from_dict(cls) for name, cls in TYPES.items()}


H = TypeVar("H")


def dispatch(handlers: Mapping[type[Event], H], *, ignored: Iterable[type[Event]] = (),
             name: str) -> dict[type[Event], H]:
    """Check a dispatch table keyed by event type: every kind of the vocabulary, and
    ScenarioEvent, has a handler or is listed as ignored, never both, and nothing else is in
    it (TypeError naming the table otherwise: a new kind without a handler fails at import)."""
    handled, ignored = set(handlers), frozenset(ignored)
    expected = set(TYPES.values()) | {ScenarioEvent}
    wrong = {"unhandled": expected - handled - ignored, "handled and ignored": handled & ignored,
             "not event kinds": (handled | ignored) - expected}
    if any(wrong.values()):
        raise TypeError(f"dispatch table {name}: " + "; ".join(
            f"{what}: {', '.join(sorted(getattr(c, '__name__', repr(c)) for c in group))}"
            for what, group in wrong.items() if group))
    return dict(handlers)


# ----------------------------------------------------------------------------- the descriptive view
@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One event kind: its lane, the fields every event of it carries, and what it means."""

    name: str
    lane: str
    fields: tuple[str, ...]
    meaning: str
    optional: tuple[str, ...] = ()
    cls: type[Event] | None = None


KINDS: tuple[Kind, ...] = tuple(Kind(name=c.kind, lane=c.lane, fields=c.fields, meaning=c.meaning,
                                     optional=c.optional, cls=c) for c in TYPES.values())
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}


def kinds_markdown() -> str:
    """docs/trace.md's table of kinds."""
    rows = ["| lane | kind | fields | meaning |", "|---|---|---|---|"]
    for k in KINDS:
        fields = ", ".join(f"`{f}`" for f in k.fields) + (
            " (sometimes " + ", ".join(f"`{f}`" for f in k.optional) + ")" if k.optional else "")
        rows.append(f"| {k.lane} | `{k.name}` | {fields} | {k.meaning} |")
    rows.append("| world | a scenario event type (`cancel`, `deploy`, `revoke`, `capability_change`, `approve`, "
                "`callback`, `operator_answer`, `retry`, `other_actor`, ...) | `data`, `line` | "
                f"{ScenarioEvent.meaning} |")
    return "\n".join(rows) + "\n"
