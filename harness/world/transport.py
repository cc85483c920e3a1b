"""What the transport does to one service call under one fault rule, as data.

One implementation of the transport-fault semantics, read by two interpreters: the simulated
transport (world.py, on simpy) and the HTTP sandbox (crashlab.sandbox, on sockets). ``plan()``
answers a tuple of steps; an interpreter runs them in order:

    Wait(span)            time passes: the network (``one_way``, ``round_trip``, a proxy's
                          ``latency``), the caller's timeout (``timeout``, ``timeout_rest``) or a
                          job's wait (``job``). The world waits every span in simulated time; the
                          sandbox's network is real, so it holds the connection only for the
                          caller's timeout and a job's wait.
    Admit()               the request reaches the service: a key still executing meets 409.
    Commit(cause, ...)    the service executes the request; a refusal is the answer (``raise``),
                          ignored (``ignore``: a proxy's re-send) or recorded (``record``: a late
                          or duplicate delivery, as late_rejected).
    Callback()            the service's completion callback for what it just carried out (one per
                          new commit, none for a replay: services.callback_delay).
    Emit(event, fields)   a remote-lane event (server error, lost response, proxy retry, ...).
    Later(delay, steps)   steps that happen ``delay`` ms from now, after the answer (a late
                          arrival holds its key in flight until it lands; a duplicate delivery).
    Answer()              the committed result is the answer.
    Fail(code, ...)       an answer with an error status (429, 502, 503, ...).
    Close(code, ...)      no answer: the connection closes (the caller sees ``code``).

Nothing here reads a clock: durations are named, and each interpreter measures them (the world
with its seeded jitter, the sandbox with the scaled real clock). Other actors' background traffic
on a service (``background_ms``) is here too, drawn from a named stream of the scenario's seed, so
the simulator and the sandbox send the same requests at the same scenario times.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..vocab import events
from ..vocab.events import Event
from ..vocab.model import EFFECT_OPS

#: the spans a Wait names; the world measures each, the sandbox holds only the caller's ones
SPANS = ("one_way", "round_trip", "timeout", "timeout_rest", "latency", "job")
#: the spans the sandbox holds a connection for (the others are its real network)
HELD_SPANS = frozenset({"timeout", "timeout_rest", "job"})


@dataclass(frozen=True, slots=True)
class Wait:
    span: str


@dataclass(frozen=True, slots=True)
class Admit:
    pass


@dataclass(frozen=True, slots=True)
class Commit:
    cause: str = "adapter"
    on_refusal: str = "raise"        # raise | ignore | record
    stale_ms: int = 0                # answered by a replica missing this much of the recent commits


@dataclass(frozen=True, slots=True)
class Callback:
    pass


@dataclass(frozen=True, slots=True)
class Emit:
    event: type[Event]
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Later:
    delay_ms: int
    steps: tuple
    holds_key: bool = False          # the key stays in flight until the steps run


@dataclass(frozen=True, slots=True)
class Answer:
    pass


@dataclass(frozen=True, slots=True)
class Fail:
    code: str
    message: str
    status: int | None = None        # None: the code's status (sandbox.httpmap.STATUS)
    details: dict | None = None


@dataclass(frozen=True, slots=True)
class Close:
    code: str
    message: str


_ROUND_TRIP_ERRORS = ("unavailable", "error")


def plan(service: str, kind: str, profile: dict, op: str, args: dict, fault: Any = None) -> tuple:
    """The steps of one call of ``op`` on ``service`` (a service of ``kind`` with ``profile``),
    under ``fault`` (the matched fault rule, or None)."""
    fk = fault.fault if fault is not None else None
    timeout = profile["timeout_ms"]
    if op == "wait_job":
        return (Wait("job"), Commit(), Answer())
    no_answer = Close("timeout", f"{service}: no response within {timeout} ms")
    if fk == "refused":
        return (Close("refused", f"{service}: connection refused"),)
    if fk == "timeout_before_send":
        return (Wait("timeout"), Close("timeout_before_send", f"{service}: connect timed out; nothing was sent"))
    if fk == "throttled":
        retry_after = fault.delay_ms if fault.delay_ms is not None else 1000
        return (Wait("round_trip"), Fail("throttled", f"{service}: 429 too many requests",
                                         details={"retry_after_ms": retry_after}))
    if fk in _ROUND_TRIP_ERRORS:
        code = fault.code or "unavailable"
        return (Wait("round_trip"), Fail(code, f"{service}.{op}: injected {code}"))
    if fk == "drop_request":
        return (Wait("timeout"), Emit(events.Dropped), no_answer)
    if fk == "late_arrival":
        delay = fault.delay_ms if fault.delay_ms is not None else timeout + 1000
        land = (Emit(events.LateArrival, {"delay_ms": delay}), Commit(on_refusal="record"), Callback())
        return (Later(delay, land, holds_key=True), Wait("timeout"), no_answer)

    steps: list = [Wait("one_way"), Admit()]     # the request travels to the service
    if fk == "stale_read":
        # another endpoint answers from a replica that misses the recent commits, and says it is
        # fresh: two identifying reads can disagree about a real commit
        stale = fault.delay_ms if fault.delay_ms is not None else 600_000
        return (*steps, Commit(stale_ms=stale), Wait("one_way"), Answer())
    if fk == "server_error_before":
        return (*steps, Emit(events.ServerError, {"committed": False}), *_proxy(kind, profile, op, args),
                Wait("one_way"), Fail("server_error", f"{service}: 503 service unavailable", status=503))
    steps.append(Commit())
    if fk == "duplicate_delivery":
        delay = fault.delay_ms if fault.delay_ms is not None else 5
        steps.append(Later(delay, (Emit(events.DuplicateDelivery), Commit("duplicate_delivery", "record"),
                                   Callback())))
    # the service carried the request out: its completion callback goes out whatever becomes
    # of the response
    steps.append(Callback())
    if fk == "server_error_after":
        return (*steps, Emit(events.ServerError, {"committed": True}), *_proxy(kind, profile, op, args),
                Wait("one_way"), Fail("server_error", f"{service}: 502 bad gateway", status=502))
    if fk == "lost_response":
        return (*steps, Wait("timeout_rest"), Emit(events.ResponseLost), no_answer)
    return (*steps, Wait("one_way"), Answer())


def _proxy(kind: str, profile: dict, op: str, args: dict) -> tuple:
    """A proxy between caller and service that re-sends on 5xx by itself, unless the caller
    declares it owns retries (``retry_owner: "caller"`` in the request)."""
    if op not in EFFECT_OPS[kind] or args.get("retry_owner") == "caller":
        return ()
    out: list = []
    for attempt in range(profile["proxy_retries"]):
        out += [Wait("latency"), Emit(events.ProxyRetry, {"attempt": attempt + 1}),
                Commit("proxy_retry", "ignore"), Callback()]
    return tuple(out)


# --------------------------------------------------------------------------- other actors
def named_stream(seed: int, name: str) -> random.Random:
    """The random stream ``name`` of a seed: independent of every other name's."""
    material = hashlib.sha256(f"crashlab:{seed}:{name}".encode()).digest()
    return random.Random(int.from_bytes(material[:8], "big"))


def background(stream: random.Random, mean_ms: int, parts: list[str]) -> Iterator[tuple[int, dict]]:
    """Other actors' reservations on a service, forever: (ms after the previous one, reserve args).
    Holds on the runs' parts under other incidents, so aggregate reads are genuinely ambiguous."""
    n = 0
    while True:
        gap = 1 + stream.randint(mean_ms // 2, mean_ms + mean_ms // 2)
        n += 1
        intent = {"tenant": "T-OTHER", "incident": f"I-BG-{n}", "part": stream.choice(parts),
                  "slot": f"S-BG-{stream.randint(1, 99)}", "technician": "TECH-OTHER", "quantity": 1,
                  "principal": "U-OTHER"}
        yield gap, {"key": f"background-{n}", "intent": intent}


def background_parts(runs, service: str) -> list[str]:
    """The parts other actors reserve on ``service``: the runs' own parts there (or P-1)."""
    return sorted({str(r.intent.get("part")) for r in runs
                   if r.service == service and r.intent.get("part")}) or ["P-1"]
