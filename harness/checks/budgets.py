"""Time budgets a run must keep: a short lease, the business deadline carried in every
checkpoint, and a wait that ends with a terminal disposition when that deadline ends.

AR-08: "Do not hold a lease forever. A lease has a short renewal interval, an expiry, and a
monotonic epoch"; the checkpoint's control group carries the deadline ("Carry cancellation,
deadline, attempt, tool, time, and human-wait budgets"; recovery step 6, "Restore budgets,
deadline, and retry counters"); the runbook's last step, "Close with a precise terminal
disposition when the business deadline ends".

**No deadline.** A run whose intake names no business deadline (``deadline: null``) has
none to keep or to close at: the deadline rules do not apply to it, its decision packet says
``deadline: null``, and a durable waiting state (WAITING_OPERATOR, WAITING_HUMAN, ...) is an
honest end for as long as the owner it names takes. A design may still set a deadline of its
own; crashlab judges only the business's.
"""
from __future__ import annotations

from typing import Iterator

from ..vocab.model import WAITING_STATES
from .common import TERMINAL, Finding, Invariant, inv
from .index import TraceIndex
from .values import dig, obj

#: The longest lease a worker may ask for. The chapter leaves the TTL to the design (the shipped
#: designs choose from 5 s to 5 min, and a careful one may hold an hour); a lease of hours is one
#: no replacement outlives while the business waits: "Do not hold a lease forever."
MAX_LEASE_TTL_MS = 3_600_000
#: WAITING_RETRY is not held to the deadline: every attempt was refused before send, nothing is in
#: doubt, and the retained effect waits for a deliberate retry (docs/adapters.md, refinement R2).
_WAITING = frozenset(s.value for s in WAITING_STATES if s.value != "WAITING_RETRY")


def duration(ms: int) -> str:
    """``24 h``, ``90 min``, ``45 s``, ``800 ms``: a duration in its largest whole unit."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms} ms"


def _lease_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for seq, call in sorted(run.calls.items()):
            if call["port"] != "lease" or call["op"] not in ("acquire", "renew"):
                continue
            ttl = obj(call.get("args")).get("ttl_ms")
            if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= MAX_LEASE_TTL_MS:
                continue
            yield run.id, f"{call['worker']} asked for a {duration(ttl)} lease (lease.{call['op']} #{seq}): a lease " \
                          f"is short and renewed (at most {duration(MAX_LEASE_TTL_MS)}), or a crashed owner keeps " \
                          f"the run from any replacement until the lease runs out", (seq,), False
            break


def _dead_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        if run.deadline is None:
            continue
        for cp in run.checkpoints:
            control = obj(dig(cp, "checkpoint", "control"))
            if cp.get("state") == "INTAKE" or cp.get("state") in TERMINAL or not control:
                continue
            held = control.get("deadline")
            if isinstance(held, int) and not isinstance(held, bool) and held <= run.deadline:
                continue
            if held is None:
                what = f"drops the business deadline {ix.fmt(run.deadline)} (control.deadline is null)"
            elif isinstance(held, int) and not isinstance(held, bool):
                what = f"replaces the business deadline {ix.fmt(run.deadline)} with a later one, {ix.fmt(held)}"
            else:
                what = f"holds no usable business deadline (control.deadline should be {ix.fmt(run.deadline)})"
            yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}) {what}: whoever works from it works " \
                          "past the deadline the business set", \
                (cp["seq"],), False
            break


def _dead_01(ix: TraceIndex) -> Iterator[Finding]:
    if ix.end is None:
        return
    horizon = ix.end.get("t")
    for run in ix.runs.values():
        if run.deadline is None or not isinstance(horizon, int) or horizon <= run.deadline:
            continue
        state = run.disposition()
        if state not in _WAITING:
            continue
        last = [f for f in run.finishes if f.get("accepted")]
        cite = (last[-1]["seq"],) if last else ()
        since = f" (since #{last[-1]['seq']})" if last else ""
        yield run.id, f"{run.id} was still {state}{since} at the horizon, {ix.fmt(horizon)}, past its business " \
                      f"deadline {ix.fmt(run.deadline)}: when the deadline ends, close with a precise terminal " \
                      "disposition (wait with wake_at at the deadline)", cite, False


#: Lease and deadline rules of the ownership category (O1, O3).
OWNERSHIP: tuple[Invariant, ...] = (
    inv("LEASE-01", "A lease is short and renewed, never held for hours.", "ownership", False, None, _lease_01,
        f"No lease.acquire or lease.renew asks for a ttl_ms above {MAX_LEASE_TTL_MS} ms "
        f"({duration(MAX_LEASE_TTL_MS)}): a replacement must be able to take over a crashed owner's run "
        "while the business still waits for it.",
        "the lease call"),
    inv("DEAD-02", "Every checkpoint carries the run's business deadline.", "ownership", False, None, _dead_02,
        "For a run whose intake names a business deadline, every accepted checkpoint past INTAKE and short "
        "of a terminal state (a terminal record has no deadline left to keep) holds "
        "control.deadline as a time no later than it (a design may keep an earlier deadline of its own): "
        "null, a later time or no time drops the deadline for whoever recovers the run. A run without a "
        "business deadline is not judged.",
        "the first checkpoint that drops it"),
)
#: The deadline rule of the disposition category (D1).
DISPOSITION: tuple[Invariant, ...] = (
    inv("DEAD-01", "A run waiting past its business deadline closes with a terminal disposition.", "disposition",
        False, None, _dead_01,
        "A run with a business deadline whose disposition at the horizon, later than that deadline, is a "
        "durable waiting state (WAITING_OPERATOR, WAITING_HUMAN, PINNED) never closed: the "
        "runbook's \u201cClose with a precise terminal disposition when the business deadline ends\u201d. A "
        "run without a business deadline may wait for its named owner (docs/invariants.md, \u201cNo "
        "deadline\u201d); WAITING_RETRY after every attempt was refused before send is crashlab's refinement R2 "
        "(docs/adapters.md) and is not held to it.",
        "the finish that began the wait"),
)
