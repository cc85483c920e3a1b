"""What a worker knew: the one view the checks judge a worker by.

The checks have one principle: a worker is judged by what it could have known at the moment
it acted: what was delivered to it before that moment, and the durable records it could
read. What happened elsewhere in the meantime does not count, and what it wrote down is no
evidence by itself. ``knew(run, worker, at)`` is that view: what ``worker`` of ``run`` had
observed before seq ``at``.

* **sends and answers**: its latest send of a key (:meth:`Knew.last_send`), the result of a
  dispatch, if it saw it (:meth:`Knew.result`, :meth:`Knew.outcome`);
* **reads**: its delivered identifying reads (:meth:`Knew.reads`, :meth:`Knew.read_since`),
  its backoff sleeps (:meth:`Knew.backoff_since`), its completion callbacks
  (:meth:`Knew.callbacks`);
* **ledger**: the durable ledger as it stood (:meth:`Knew.ledger`, :meth:`Knew.latest_entry`,
  :meth:`Knew.entries`) and its own appends (:meth:`Knew.appended`);
* **checkpoints**: the checkpoints it loaded (:meth:`Knew.loads`);
* **lease**: the epoch it held (:attr:`Knew.epoch`), the evidence it saw of losing it
  (:meth:`Knew.stale_evidence`), whether its call right before confirmed it
  (:meth:`Knew.confirmed_just_before`);
* **inbox**: the cancellation it knew of (:meth:`Knew.cancel`).

A send is judged at :func:`sending`: before the send, or, for a stale worker that confirmed
its ownership and stalled in front of the send (the fencing gap), before that confirmation.
:func:`gap` says what other workers can know of such a send, :func:`acted_at` when a worker
last knew the time. evidence.py applies the warrant rules to one dispatch through this view.

Adding an invariant: the contract
---------------------------------
1. **The truth it compares with.** Its ``computed`` text says what it holds an act or a
   claim against: the remote lane (what the services really did, at the horizon), a
   transition table of crashlab.vocab.model, or the content a record must carry.
2. **The warrant it demands.** An act or a claim is judged on what its worker saw, asked
   through this view (and evidence.resolve / presence / absence for one dispatch): never on
   what happened after that seq or in another worker, and never on what the worker wrote
   down. A ledger entry is evidence only when evidence.warranted_absence finds that its
   worker saw what it recorded.
3. **The test that shows it catches its violation.** A trace (hand-made with
   tests/data/checks/checks_traces.py, or a gallery mistake on a library scenario) that the
   rule flags, shown undetected with that rule alone switched off (``without(monkeypatch,
   id)`` in tests/test_rules.py), so that removing the rule fails a test. The id joins
   HAND_MADE or MISTAKES in tests/test_checks.py, where
   ``test_every_invariant_has_a_test_that_catches_it`` holds every registered id to it.

Register it with ``inv(...)`` in the module of its rubric category (classification.py,
ownership.py, effects.py, disposition.py; EXP-* in expectations.py), in the order the docs
list it, give it a rubric point (rubric.py) and regenerate the docs (``python tools/docgen.py``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterator

from .index import Dispatch, Read, RunIndex, TraceIndex, WorkerInfo
from .values import obj

#: ``knew(run, worker, EVER)``: everything the worker observed in the whole trace.
EVER = sys.maxsize


@dataclass(frozen=True, slots=True)
class Knew:
    """What ``worker`` of ``run`` had observed before seq ``at``; ``w`` is its index (None for
    a worker that never started: it observed nothing, and has no lease to ask about)."""

    run: RunIndex
    worker: str
    at: int
    w: WorkerInfo | None

    # ---------------------------------------------------------------- its sends and their answers
    def last_send(self, key: Any) -> int:
        """Its latest dispatch under ``key`` (a seq), -1 when it sent none."""
        return max((d.seq for d in self.run.dispatches if d.seq < self.at and d.worker == self.worker
                    and d.key == key), default=-1)

    def result(self, d: Dispatch) -> dict | None:
        """The result of ``d``, if this worker saw it."""
        return d.seen_by(self.worker, self.at)

    def outcome(self, d: Dispatch) -> str:
        """What became of ``d`` as far as this worker could tell, in words."""
        r = d.result
        if r is None:
            return "never answered"
        if r["seq"] > self.at:
            return "still in flight"
        if not r["delivered"]:
            return "answer lost in a crash"
        if r["ok"]:
            return "accepted" if r["worker"] == self.worker else f"accepted, seen only by {r['worker']}"
        err = r.get("error") or {}
        tail = "" if r["worker"] == self.worker else f", seen only by {r['worker']}"
        return f"{err.get('code')}, {'definite' if err.get('definite') else 'indefinite'}{tail}"

    # ---------------------------------------------------------------- reads, sleeps, callbacks
    def reads(self, after: int = -1) -> Iterator[Read]:
        """Its identifying reads answered before ``at`` whose call came after seq ``after``."""
        if self.w is None:
            return
        for read in self.w.reads:
            if read.seq >= self.at:
                break
            if read.call_seq > after:
                yield read

    def read_since(self, lo: int) -> bool:
        """It called an identifying read (answered) between ``lo`` and ``at``."""
        return self.w is not None and any(lo < r.call_seq < self.at for r in self.w.reads)

    def backoff_since(self, lo: int) -> bool:
        """It slept with a reason 'backoff ...' between ``lo`` and ``at``."""
        return self.w is not None and any(lo < s < self.at and reason.startswith("backoff")
                                          for s, _, reason in self.w.sleeps)

    def callbacks(self, key: Any, after: int) -> Iterator[int]:
        """Seqs of the polls that showed it a completion callback for ``key`` after ``after``."""
        if self.w is None:
            return
        for s, k in self.w.callbacks:
            if s >= self.at:
                break
            if k == key and s > after:
                yield s

    # ---------------------------------------------------------------- the ledger
    def ledger(self, key: Any) -> str | None:
        """The durable ledger's knowledge of ``key``: what any reader of it would learn."""
        return self.run.knowledge_before(key, self.at)

    def latest_entry(self, key: Any) -> dict:
        """The ledger's latest entry for ``key`` (there must be one)."""
        return [e for e in self.run.ledger_by_key[key] if e["seq"] < self.at][-1]

    def entries(self, key: Any, since: int) -> Iterator[dict]:
        """The ledger's entries for ``key`` appended between ``since`` and ``at``."""
        for e in self.run.ledger_by_key.get(key, ()):
            if e["seq"] >= self.at:
                break
            if e["seq"] > since:
                yield e

    def appended(self, key: Any, since: int, knowledge: str | None = None) -> bool:
        """It appended an entry for ``key`` (of ``knowledge``, when given) to the ledger between
        ``since`` and ``at``."""
        return any(since < e["seq"] < self.at and e["worker"] == self.worker
                   and (knowledge is None or e["knowledge"] == knowledge)
                   for e in self.run.ledger_by_key.get(key, ()))

    # ---------------------------------------------------------------- checkpoints
    def loads(self) -> list[tuple[int, Any, dict | None]]:
        """(seq, version, contract) of every checkpoint it loaded."""
        return [load for load in self.w.loads if load[0] < self.at] if self.w is not None else []

    # ---------------------------------------------------------------- the lease
    @property
    def epoch(self) -> int | None:
        """The epoch of the latest lease it acquired (None: it never acquired one)."""
        return self.w.epoch_at(self.at)[0] if self.w is not None else None

    def stale_evidence(self) -> int | None:
        """The first evidence of lost ownership it saw since its latest acquisition, or None."""
        return self.w.stale_evidence(self.at)

    def previous_call(self) -> int | None:
        """Its call right before ``at``."""
        return self.w.previous_call(self.at)

    def confirmed_just_before(self) -> bool:
        """Its call right before ``at`` confirmed its ownership (a lease grant or renewal, a
        checkpoint compare-and-set or a ledger append under its epoch): the only window left is
        one a stall can hit, which only a fencing service closes."""
        prev = self.w.previous_call(self.at)
        return prev is not None and prev in self.run.confirmed

    # ---------------------------------------------------------------- the inbox
    def cancel(self) -> int | None:
        """Seq of the evidence that it knew of a cancellation: a poll it saw, or a cancel
        already in the durable inbox when it started. None otherwise."""
        for s, who in self.run.cancels_seen:
            if s < self.at and who == self.worker:
                return s
        if self.w is not None:
            for ev in self.run.inbox:
                if ev["seq"] >= self.w.start_seq:
                    break
                if ev["event"].get("type") == "cancel":
                    return ev["seq"]
        return None


def knew(run: RunIndex, worker: str, at: int) -> Knew:
    """What ``worker`` of ``run`` had observed before seq ``at``."""
    return Knew(run, worker, at, run.workers.get(worker))


def stalled_send(run: RunIndex, d: Dispatch) -> bool:
    """``d`` was sent by a worker whose lease was no longer live, that had confirmed its
    ownership right before the send and observed nothing since: the fencing gap. Nobody
    else could know of such a send until a read shows its effect."""
    found = run.stalled.get(d.seq)
    if found is None:
        k = knew(run, d.worker, d.seq)
        epoch = k.epoch
        found = run.stalled[d.seq] = (
            epoch is not None and not run.live(epoch, d.seq, d.t) and k.stale_evidence() is None
            and k.confirmed_just_before())
    return found


def sending(run: RunIndex, d: Dispatch) -> Knew:
    """What ``d``'s worker knew when it sent ``d``: what was there before ``d``, except for a
    stale worker that confirmed its ownership right before the send and stalled in between
    (observing nothing): what it knew is what was there before that confirmation."""
    if stalled_send(run, d):
        return knew(run, d.worker, run.workers[d.worker].previous_call(d.seq))
    return knew(run, d.worker, d.seq)


def gap(run: RunIndex, d: Dispatch) -> tuple[int, int] | None:
    """For a request in the fencing gap, what another worker's reconciliation can cover:
    (the seq after which its reads count, the time its negative read must reach), that is
    the sender's last ownership confirmation and its lease's expiry. A request sent by a
    stale worker right after such a confirmation (stalled_send), or called under a live
    lease but stalled in front of the send until that lease lapsed, may leave at any later
    moment: no read can see it before it does. None for any other request."""
    w = run.workers.get(d.worker)
    epoch = w.epoch_at(d.seq)[0] if w is not None else None
    if epoch is None:
        return None
    if stalled_send(run, d):
        after = w.previous_call(d.seq)
    else:
        resumed = run.resumes.get(d.seq) if d.seq in run.paused_calls else None
        if resumed is None or run.live(epoch, *resumed):
            return None
        after = d.seq
    expiry = run.expiry(epoch, after + 1)
    return None if expiry is None else (after, expiry)


def acted_at(run: RunIndex, d: Dispatch) -> tuple[int, int]:
    """(seq, t) at which to judge whether ``d`` was in time: the send itself, or, when its
    worker stalled after it last read the clock, that reading (it checked and was on time;
    the stall, which no worker can rule out between a check and a send, made it late)."""
    w = run.workers.get(d.worker)
    if w is None:
        return d.seq, d.t
    last = None
    for seq, now in w.clock_reads:
        if seq >= d.seq:
            break
        last = (seq, now)
    if last is not None and any(last[0] < s < d.seq for s in w.stalls):
        return last
    return d.seq, d.t


# ------------------------------------------------------------------------------ across the trace
def polls_seen(ix: TraceIndex) -> dict:
    """(run, inbox seq) -> [(poll result seq, worker)]: who saw each inbox event, in every
    delivered poll answer."""
    found = ix.memo.get("polled")
    if found is not None:
        return found
    found = {}
    for ev in ix.events:
        if ev.get("lane") != "port" or ev.get("kind") != "result" or not ev.get("delivered") or not ev.get("ok"):
            continue
        call = ix.calls.get(ev.get("call"))
        if call is None or call["port"] != "inbox" or call["op"] != "poll":
            continue
        for item in obj(ev.get("value")).get("events") or ():
            if isinstance(item, dict):
                found.setdefault((ev.get("run"), item.get("seq")), []).append((ev["seq"], ev["worker"]))
    ix.memo["polled"] = found
    return found


def answered_ok(ix: TraceIndex) -> set:
    """Call seqs whose successful answer reached the calling worker."""
    found = ix.memo.get("seen_ok")
    if found is None:
        found = ix.memo["seen_ok"] = {ev["call"] for ev in ix.events if ev.get("lane") == "port"
                                      and ev.get("kind") == "result" and ev.get("ok") and ev.get("delivered")}
    return found
