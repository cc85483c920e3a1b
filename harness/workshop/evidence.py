"""The evidence a rung is read from and graded against: one deterministic trace.

A rung's trace is its scenario run under a fixed seed by a named adapter (the reference
adapter, or an anonymous gallery exhibit). The learner gets a *sanitized* copy (no teaching
card, no adapter name) and a readable listing; the grader re-derives every expected answer
from the same trace with the selectors below, never from hard-coded numbers.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..vocab.compiled import Scenario
from ..scenario.loader import load_file, resolve
from ..vocab.timefmt import format_time

DATA = Path(__file__).resolve().parent / "data"
HIDDEN_ADAPTER = "anonymous"


def scenario_of(name: str) -> Scenario:
    """A library id, or a workshop-only scenario shipped in the package data."""
    local = DATA / "scenarios" / f"{name}.yaml"
    return load_file(local) if local.exists() else resolve(name)


def card(name: str) -> dict:
    """The teaching card reveal shows: the scenario's own, restated where data/cards.yaml says
    its trace shows otherwise."""
    import yaml

    fixes = yaml.safe_load((DATA / "cards.yaml").read_text(encoding="utf-8")) or {}
    return {**dict(scenario_of(name).card or {}), **(fixes.get(name) or {})}


@functools.cache
def _run(name: str, adapter: str, seed: int | None) -> tuple[tuple[dict, ...], Any]:
    from ..run.conformance import run_one

    result, verdict = run_one(scenario_of(name), adapter, seed=seed)
    return tuple(result.events), verdict


def trace(name: str, adapter: str = "crashlab.reference_impl:ReferenceAdapter", seed: int | None = None) -> list[dict]:
    """The events of one run (cached: the same seed always gives the same trace)."""
    return list(_run(name, adapter, seed)[0])


def verdict(name: str, adapter: str = "crashlab.reference_impl:ReferenceAdapter", seed: int | None = None):
    return _run(name, adapter, seed)[1]


def sanitize(events: Iterable[dict], label: str = HIDDEN_ADAPTER) -> list[dict]:
    """The trace a learner may see: the header keeps the scenario, drops the teaching card,
    the description, the expectations with their rules (they quote the chapter's answer) and
    the adapter's name."""
    out = []
    for ev in events:
        if ev["kind"] == "header":
            ev = {k: v for k, v in ev.items() if k not in ("card", "description", "expect")}
            ev["adapter"] = label
        out.append(ev)
    return out


@dataclass(frozen=True, slots=True)
class Numbering:
    """A learner's own event numbers: strictly increasing in the shared kit's (the listing reads in
    the same order) but not by one amount: each step is one or two, drawn from the learner's name,
    after a start of their own. No single subtraction (no affine map) turns a neighbour's event
    answers into this learner's; the shared kit's numbering is ``Numbering("")``."""

    name: str = ""

    def __bool__(self) -> bool:
        return bool(self.name)

    @property
    def base(self) -> int:
        """Where the learner's numbering starts (101 to 899)."""
        return 101 + int(hashlib.sha256(self.name.encode("utf-8")).hexdigest(), 16) % 799 if self.name else 0

    def kit(self, seq: int) -> int:
        """The kit's number for the shared kit's event ``seq``."""
        if not self.name or seq < 0:
            return seq
        return self.base + seq + _skips(self.name, seq)

    def canon(self, n: int) -> int:
        """The shared kit's event for the kit's number ``n`` (-1: no event has that number)."""
        if not self.name:
            return n
        lo, hi = 0, max(0, n - self.base)
        while lo <= hi:
            mid = (lo + hi) // 2
            got = self.kit(mid)
            if got == n:
                return mid
            lo, hi = (mid + 1, hi) if got < n else (lo, mid - 1)
        return -1


_SKIPS: dict[str, list[int]] = {}


def _skips(name: str, seq: int) -> int:
    """How many of the learner's steps up to ``seq`` are two rather than one (cached per name)."""
    have = _SKIPS.setdefault(name, [0])
    while len(have) <= seq:
        i = len(have)
        step = hashlib.sha256(f"{name}\0step\0{i}".encode("utf-8")).digest()[0] % 3 == 0
        have.append(have[-1] + step)
    return have[seq]


def shift(events: Iterable[dict], numbering: Numbering) -> list[dict]:
    """A learner's own numbering: every sequence number (and a result's reference to its call)
    renumbered (Numbering), so a neighbour's event answers are not this learner's."""
    if not numbering:
        return list(events)
    out = []
    for ev in events:
        ev = dict(ev)
        for field in ("seq", "call"):
            if isinstance(ev.get(field), int) and not isinstance(ev.get(field), bool):
                ev[field] = numbering.kit(ev[field])
        out.append(ev)
    return out


_TOKEN = re.compile(r"\b([A-Za-z]+)-(\d+)\b")
_HEX = re.compile(r"\b[0-9a-f]{12,}\b")
#: Names that are the chapter's, never a run's identifiers.
_KEEP = frozenset({"AR-08"})


@dataclass(frozen=True, slots=True)
class Variant:
    """A learner's own identifiers, clock and event numbers, derived from their name only.

    Every ``PREFIX-N`` identifier (runs, workers, incidents, parts, slots, technicians, refs,
    event ids) gets another number by a bijection per learner (two identifiers never merge),
    every long hex string (keys, hashes) another hex string, and the listing's clock starts
    some seconds later; the lesson (which event shows what) is unchanged."""

    name: str

    def _n(self, salt: str) -> int:
        return int(hashlib.sha256(f"{self.name}\0{salt}".encode()).hexdigest(), 16)

    def text(self, s: str) -> str:
        def number(m: re.Match) -> str:
            if m.group(0) in _KEEP:
                return m.group(0)
            digits = m.group(2)
            modulus = 10 ** max(3, len(digits))
            if modulus <= 10_000:       # a shuffle of its own: no formula turns one learner's into another's
                value = _permutation(self.name, m.group(1), modulus)[int(digits)]
            else:
                a = 1 + 2 * (self._n("a" + m.group(1)) % (modulus // 2))
                while a % 5 == 0:
                    a += 2
                value = (a * int(digits) + self._n("b" + m.group(1))) % modulus
            return f"{m.group(1)}-{value or modulus}"

        s = _TOKEN.sub(number, s)
        return _HEX.sub(lambda m: hashlib.sha256(f"{self.name}\0{m.group(0)}".encode()).hexdigest()[:len(m.group(0))], s)

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    @property
    def clock_ms(self) -> int:
        """How much later the listing's clock starts (seconds and milliseconds, never a minute)."""
        return 1000 * (7 + self._n("clock") % 50) + self._n("ms") % 1000

    def events(self, events: Iterable[dict]) -> list[dict]:
        out = []
        for ev in events:
            ev = {k: (v if k in ("seq", "call", "t", "lane", "kind") else self.value(v)) for k, v in ev.items()}
            if ev["kind"] == "header" and isinstance(ev.get("origin_ms"), int):
                ev["origin_ms"] += self.clock_ms
            out.append(ev)
        return out


@functools.lru_cache(maxsize=256)
def _permutation(name: str, prefix: str, modulus: int) -> tuple[int, ...]:
    """A learner's own bijection of one identifier kind's numbers (seeded by name and prefix)."""
    import random
    values = list(range(modulus))
    random.Random(hashlib.sha256(f"{name}\0{prefix}".encode("utf-8")).digest()).shuffle(values)
    return tuple(values)


@functools.cache
def _rule_ids() -> frozenset:
    """The checks' ids (TRUTH-01, OWN-04, ...): words of crashlab's, never a run's identifiers."""
    from ..rules.ruleset import DATA_PATH
    return frozenset(re.findall(r"\b[A-Z]+-\d+\b", DATA_PATH.read_text(encoding="utf-8")))


def own_words(text: str, offset: Numbering = Numbering(), variant: str | None = None,
              keep: Iterable[str] = ()) -> str:
    """Text about a trace (a check's findings, a teaching card) in a learner's own numbering:
    event numbers renumbered by ``offset`` (Numbering), identifiers and keys the learner's (Variant), as their
    kit's listing shows them. The strings in ``keep`` (scenario names) and the checks' ids stay."""
    if not offset and not variant:
        return text
    rules = [t for t in re.findall(r"\b[A-Z]+-\d+\b", text) if t in _rule_ids()]
    rules += re.findall(r"\bepoch-\d+\b", text)      # "the epoch-1 worker": epochs are not moved
    kept = sorted({*keep, *rules}, key=len, reverse=True)
    parts = re.split("(" + "|".join(map(re.escape, kept)) + ")", text) if kept else [text]
    own = Variant(variant) if variant else None
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if offset:
                part = re.sub(r"#(\d+)", lambda m: f"#{offset.kit(int(m.group(1)))}", part)
            part = own.text(part) if own else part
        out.append(part)
    return "".join(out)


# --------------------------------------------------------------------------- listing
def _key(ev: dict) -> str:
    key = ev.get("key") or ""
    return key[:22] + ("..." if len(key) > 22 else "")


def summary(ev: dict, origin_ms: int) -> str | None:
    """One line for an event that carries evidence; None for bookkeeping (clock reads,
    empty inbox polls)."""
    lane, kind = ev["lane"], ev["kind"]
    if lane == "port" and kind == "call":
        if ev["port"] in ("clock", "random") and ev["op"] != "sleep":
            return None
        if ev["port"] == "inbox" or (ev["port"] in ("checkpoints", "ledger", "lease", "run")):
            return None
        args = ev.get("args") or {}
        detail = ", ".join(f"{k}={args[k]}" for k in ("key", "ms", "reason", "action") if k in args)
        return f"call {ev['port']}.{ev['op']}({detail})"
    if lane == "port" and kind == "result":
        if ev["ok"]:
            value = ev.get("value") or {}
            if not isinstance(value, dict):
                return None
            if "found" in value:
                return f"result of #{ev['call']}: found={value['found']} consistency={value.get('consistency')}"
            if "ref" in value and "committed_at" in value:
                return f"result of #{ev['call']}: accepted ref={value['ref']}" + (
                    "" if ev.get("delivered", True) else " (never delivered: the worker died)")
            if "lookup" in value and "idempotency" in value:    # the service profile a worker read
                return (f"result of #{ev['call']}: service profile idempotency={value.get('idempotency')} "
                        f"lookup={value.get('lookup')} consistency={value.get('consistency')} "
                        f"compensation={value.get('compensation')}")
            if "live" in value:
                return f"result of #{ev['call']}: authority live={value['live']} ({value.get('reason')})"
            if value.get("events"):
                kinds = ", ".join(e.get("type", "?") for e in value["events"])
                return f"result of #{ev['call']}: inbox delivered {kinds}"
            return None
        err = ev.get("error") or {}
        definite = {True: "definite", False: "indefinite"}.get(err.get("definite"), "?")
        return f"result of #{ev['call']}: error {err.get('code')} ({definite})" + (
            "" if ev.get("delivered", True) else " (never delivered)")
    if lane == "run":
        if kind == "checkpoint":
            return f"checkpoint v{ev['version']} state={ev['state']} epoch={ev['epoch']}"
        if kind == "lease":
            return f"lease {ev['op']} epoch={ev['epoch']} owner={ev['owner']}"
        if kind == "finish":
            return (f"finish {ev['disposition']} next_owner={ev.get('next_owner')}"
                    + ("" if ev.get("accepted", True) else " (not accepted: stale)"))
        if kind == "escalation":
            return f"escalation to the operator (ticket {ev.get('ticket')})"
        if kind == "approval_requested":
            return f"approval requested for {ev.get('action')}"
        return f"{kind} {ev.get('reason', '')}".strip()
    if lane == "knowledge":
        return f"ledger {ev['knowledge']} (was {ev.get('previous')}) key={_key(ev)} epoch={ev.get('epoch')}"
    if lane == "remote":
        ref = f" ref={ev['ref']}" if ev.get("ref") else ""
        who = f" by {ev['cause']}" if ev.get("cause") and ev["cause"] != "adapter" else ""
        return f"REMOTE {ev.get('op', kind) if kind == 'effect' else kind}{ref} key={_key(ev)}{who}"
    if lane == "fault":
        if kind == "crash":
            return f"CRASH {ev['boundary']} (restart after {ev['restart_after_ms']} ms)"
        if kind == "pause":
            return f"PAUSE worker stalls for {ev['resume_after_ms']} ms"
        if kind == "resume":
            return "RESUME the stalled worker continues with its old view"
        return f"FAULT {ev.get('fault')} on #{ev.get('call')}"
    if lane == "worker":
        if kind == "start":
            return f"worker {ev['worker']} starts"
        if kind == "takeover":
            return f"platform replaces stalled {ev['stale']}"
        return f"worker {kind} {ev.get('reason') or ev.get('fault') or ''}".strip()
    if lane == "world":
        if kind == "deliver":
            e = ev["event"]
            return f"inbox receives {e.get('type')} ({e.get('event_id')})"
        return f"world: {kind}"
    return None


def listing(events: list[dict]) -> str:
    """The readable evidence table: seq, clock time, worker, what happened."""
    origin = events[0].get("origin_ms", 0)
    lines = [f"{'#':>4}  {'time':<12}  {'worker':<10}  event"]
    for ev in events:
        text = summary(ev, origin) if ev["kind"] not in ("header", "end") else None
        if text is None:
            continue
        worker = (ev.get("worker") or "").split("/")[-1]
        lines.append(f"{ev['seq']:>4}  {format_time(ev['t'], origin):<12}  {worker:<10}  {text}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- selectors
def select(events: list[dict], spec: dict) -> list[dict]:
    """Events matching every field of ``spec`` (dotted paths reach into nested values;
    ``error`` matches the error code; ``at_least_t``/``before_t`` bound the time)."""
    out = []
    for ev in events:
        if all(_matches(ev, k, v) for k, v in spec.items()):
            out.append(ev)
    return out


def _get(ev: dict, path: str) -> Any:
    value: Any = ev
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _matches(ev: dict, key: str, want: Any) -> bool:
    if key == "error":
        code = (ev.get("error") or {}).get("code")
        return code in want if isinstance(want, list) else code == want
    if key == "before_t":
        return ev["t"] < want
    if key == "at_least_t":
        return ev["t"] >= want
    got = _get(ev, key)
    if isinstance(want, list):
        return got in want
    return got == want


def results_of(events: list[dict], calls: list[dict]) -> list[dict]:
    seqs = {c["seq"] for c in calls}
    return [e for e in events if e["lane"] == "port" and e["kind"] == "result" and e.get("call") in seqs]
