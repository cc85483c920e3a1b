"""What an exploration exercised: situations (fault kind x port x phase) counted over schedules.

A *situation* is one thing that happened to a run in a trace: an injected fault, a crash or a
pause at a port, or a world event that reaches the run (a cancellation, a deployment). Its
*phase* is where the run stood when it happened: the latest ledger knowledge of the run's keys
(``none`` before the first append), with ``+cancel`` once a cancellation had reached the inbox,
``+deploy`` once new code had been deployed, and ``finished`` once a terminal finish was accepted.
Counts are "sometimes" coverage: in how many schedules a situation occurred at least once, so a
clean exploration says what it actually tried, and the kinds x ports it never reached.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from ..vocab.model import PLATFORM_PORTS, SERVICE_OPS, TERMINAL_STATES

Situation = tuple[str, str, str]      # (fault kind, port, phase)

#: The fault kinds a schedule can draw on a service port, and on a platform port.
SERVICE_KINDS = ("refused", "timeout_before_send", "drop_request", "lost_response", "late_arrival", "throttled",
                 "server_error_before", "server_error_after", "duplicate_delivery", "unavailable",
                 "error:conflict_in_flight", "error:validation_failed", "error:permission_denied",
                 "error:intent_mismatch", "crash:before", "crash:after", "pause")
PLATFORM_KINDS = ("unavailable", "crash:before", "crash:after", "pause")
#: Platform ports a schedule crashes or pauses at but never faults (the run's own reporting channel).
UNFAULTED_PORTS = frozenset({"run"})
#: A profile a schedule can draw: reads that lag longer than the declared late-delivery bound.
LAG = "lag beyond the bound"
#: World events a schedule can draw, at the pseudo-port "world".
WORLD_KINDS = ("cancel", "deploy")
#: Platform ports a schedule's rules can reach (the clock and random draws are not faulted).
FAULTED_PLATFORM_PORTS = tuple(sorted(set(PLATFORM_PORTS) - {"clock", "random"}))
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES)


def situations(events: Iterable[dict]) -> set[Situation]:
    """The situations of one trace."""
    out: set[Situation] = set()
    calls: dict[int, dict] = {}
    last_call: dict[str, dict] = {}            # worker -> its latest call
    knowledge: dict[str, str] = {}             # run -> latest ledger knowledge
    cancelled: set = set()
    deployed = False
    finished: set = set()

    def phase(run) -> str:
        if run in finished:
            return "finished"
        parts = [knowledge.get(run, "none")]
        if run in cancelled:
            parts.append("+cancel")
        if deployed:
            parts.append("+deploy")
        return " ".join(parts)

    for ev in events:
        kind, run = ev.get("kind"), ev.get("run")
        if kind == "header":
            for name, prof in (ev.get("services") or {}).items():
                if isinstance(prof, dict) and prof.get("consistency") == "eventual" and \
                        int(prof.get("lag_ms") or 0) > int(prof.get("max_delivery_delay_ms") or 0):
                    out.add((LAG, str(name), "every read"))
        elif kind == "call":
            calls[ev["seq"]] = ev
            last_call[ev.get("worker")] = ev
        elif kind == "ledger":
            knowledge[run] = str(ev.get("knowledge"))
        elif kind == "deliver" and (ev.get("event") or {}).get("type") == "cancel":
            out.add(("cancel", "world", phase(run)))
            cancelled.add(run)
        elif kind == "deploy":
            for r in (set(knowledge) | cancelled) or {None}:
                out.add(("deploy", "world", phase(r)))
            deployed = True
        elif kind == "finish" and ev.get("accepted") and ev.get("disposition") in _TERMINAL:
            finished.add(run)
        elif kind == "fault":
            call = calls.get(ev.get("call")) or {}
            name = f"error:{ev.get('code')}" if ev.get("fault") == "error" else str(ev.get("fault"))
            out.add((name, str(call.get("port", "?")), phase(run)))
        elif kind == "crash":
            call = last_call.get(ev.get("worker")) or {}
            out.add((f"crash:{ev.get('boundary')}", str(call.get("port", "?")),
                     phase(run) + (" +read cancel" if _read_cancel(call) else "")))
        elif kind == "pause":
            call = calls.get(ev.get("call")) or {}
            out.add(("pause", str(call.get("port", "?")), phase(run)))
        elif kind == "result":
            call = calls.get(ev.get("call"))
            if call is not None:
                call["_cancel_read"] = _holds_cancel(ev)
    return out


def _holds_cancel(result: dict) -> bool:
    value = result.get("value")
    return isinstance(value, dict) and any(isinstance(e, dict) and e.get("type") == "cancel"
                                           for e in value.get("events") or ())


def _read_cancel(call: dict) -> bool:
    """Whether ``call`` was an inbox poll whose answer held a cancellation (a crash right after a
    cancellation is read)."""
    return call.get("port") == "inbox" and bool(call.get("_cancel_read"))


class Coverage:
    """Situations counted over schedules, and the fault kinds x ports never reached."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self.counts: Counter = Counter(dict(counts or {}))
        self.schedules = 0

    @staticmethod
    def key(s: Situation) -> str:
        return "|".join(s)

    def add(self, found: set[Situation]) -> None:
        self.schedules += 1
        self.counts.update(self.key(s) for s in found)

    def merge(self, other: Mapping[str, int]) -> None:
        self.counts.update(dict(other))

    def rows(self) -> list[tuple[str, str, str, int]]:
        return sorted((*k.split("|", 2), n) for k, n in self.counts.items())  # type: ignore[misc]

    def reached(self) -> set[tuple[str, str]]:
        return {(kind, port) for kind, port, _, _ in self.rows()}

    @staticmethod
    def universe(services: Iterable[str]) -> list[tuple[str, str]]:
        """Every fault kind x port a schedule over bases with these services can draw."""
        pairs = [(k, p) for p in sorted(set(services) & set(SERVICE_OPS)) for k in SERVICE_KINDS]
        pairs += [(LAG, "reservation")] if "reservation" in services else []
        pairs += [(k, p) for p in FAULTED_PLATFORM_PORTS for k in PLATFORM_KINDS
                  if not (k == "unavailable" and p in UNFAULTED_PORTS)]
        pairs += [(k, "world") for k in WORLD_KINDS]
        return pairs

    def missing(self, services: Iterable[str]) -> list[tuple[str, str]]:
        reached = self.reached()
        return [pair for pair in self.universe(services) if pair not in reached]

    def to_json(self, services: Iterable[str]) -> dict:
        return {"situations": [{"fault": k, "port": p, "phase": ph, "schedules": n} for k, p, ph, n in self.rows()],
                "not_exercised": [{"fault": k, "port": p} for k, p in self.missing(services)]}

    def table(self, services: Iterable[str], width: int = 100) -> str:
        """The coverage as text: one line per fault kind x port with its phases and counts, then
        the kinds x ports no schedule reached."""
        by_pair: dict[tuple[str, str], list[str]] = {}
        for kind, port, ph, n in self.rows():
            by_pair.setdefault((kind, port), []).append(f"{ph} {n}")
        lines = ["coverage (schedules in which each situation occurred; phase = the run's ledger knowledge):",
                 f"  {'fault kind':26s} {'port':14s} phases"]
        for (kind, port), phases in sorted(by_pair.items()):
            lines.append(f"  {kind:26s} {port:14s} {', '.join(phases)}"[:width * 3])
        missing = self.missing(services)
        if missing:
            lines.append(f"not exercised ({len(missing)} fault kind x port): "
                         + ", ".join(f"{k}@{p}" for k, p in missing))
        else:
            lines.append("not exercised: none (every fault kind reached every port it can reach)")
        return "\n".join(lines)
