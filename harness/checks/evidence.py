"""What a worker could know about one dispatch: the warrant rules of the checks.

AR-08 "Evidence interpretation drill": a timeout proves only that the caller stopped
waiting; a refused connection proves nothing about earlier attempts; a read proves
absence only when it is authoritative for that identity, fresh enough and within the
provider's key retention. :func:`resolve` applies these rules to one dispatch, from the
point of view of one worker just before one sequence number (what that worker knew:
knowledge.knew), and says what the worker could honestly conclude and from which events.

Strengths, strongest first:

* ``definite``: the worker saw the dispatch's own answer (an accepted response, or an
  error that certainly did not take effect);
* ``authoritative``: the worker saw an identifying read (lookup by key, search compared on
  every intent field, version read, job status) that settles it;
* ``durable``: the ledger recorded a resolution after the dispatch; a recorded absence
  counts only when that append was itself warranted by what its worker observed
  (:func:`warranted_absence`);
* ``weak``: only a read that cannot settle it (eventually consistent and too early, past
  the key-retention horizon, on a service without a key index, a record whose intent
  differs, a job still running, an ``already_exists`` answer); ``early`` when every such
  read could not settle it *yet* (before the late-delivery bound, or the request still in
  flight): on a service that keeps no keys a resend on it is blind (RETRY-01), since "a
  negative read may be only temporarily negative";
* ``callback``: only a completion callback (evidence for reconciliation, never a warrant);
* ``none``: nothing at all.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .index import Dispatch, Read, RunIndex, TraceIndex
from .knowledge import gap, knew
from .values import matches, obj

SETTLED = frozenset({"definite", "authoritative", "durable"})
ABSENT_KNOWLEDGE = frozenset({"PROPOSED", "REJECTED"})
PRESENT_KNOWLEDGE = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED"})
DEDUP_MODES = frozenset({"semantic", "key_only", "natural_key"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    state: str                  # absent | present | unknown
    strength: str               # definite | authoritative | durable | weak | callback | none
    cites: tuple[int, ...] = ()
    why: str = ""
    early: bool = False         # weak only because it came too early (not settled yet)

    @property
    def settled(self) -> bool:
        return self.strength in SETTLED


NOTHING = Finding(state="unknown", strength="none")


def required_as_of(ix: TraceIndex, run: RunIndex, d: Dispatch, worker: str, before: int, mode: str) -> int:
    """How fresh a negative read by ``worker`` must be to prove that ``d`` had no effect.

    ``redispatch``: fresh enough to see anything ``d`` committed before its answer came
    back; a late arrival is then collapsed by the key (services that deduplicate).
    ``claim`` (and redispatch on a service without deduplication): also past the provider's
    documented bound on late delivery (``max_delivery_delay_ms``) after ``d`` was sent.
    Another worker's request in the fencing gap (knowledge.gap) need only be covered up to
    its worker's lease expiry: no read can see a request that has not left yet."""
    r = d.result
    horizon = r["t"] if r is not None and r["seq"] < before else d.t
    fenced = gap(run, d) if d.worker != worker else None
    if fenced is not None:
        horizon = min(horizon, fenced[1])
    profile = ix.profile(d.service)
    if mode == "claim" or profile.get("idempotency") not in DEDUP_MODES:
        horizon = max(horizon, d.t + int(profile.get("max_delivery_delay_ms") or 0))
    return horizon


def _read_about(ix: TraceIndex, run: RunIndex, read: Read, d: Dispatch, need: int) -> Finding | None:
    """What one read says about ``d``; None when it is not about ``d``'s identity."""
    v, a, op = read.value, read.args, read.op
    profile = ix.profile(d.service)
    if read.service != d.service:
        return None
    if d.role == "compensation":
        if op == "lookup" and d.key is not None and a.get("key") == d.key:
            return _release_by_own_key(ix, read, d, need)
        if op == "lookup":
            records = [v.get("record")] if v.get("found") else []
        elif op == "search":
            records = list(v.get("records") or ())
        else:
            records = []
        for rec in records:
            if isinstance(rec, dict) and rec.get("ref") == d.target:
                if rec.get("status") == "released":
                    return Finding(state="present", strength="authoritative", cites=(read.seq,),
                                   why=f"{op} shows {d.target} released")
                if v.get("as_of", read.t) >= need:
                    return Finding(state="absent", strength="authoritative", cites=(read.seq,),
                                   why=f"{op} shows {d.target} still active")
                return Finding(state="absent", strength="weak", cites=(read.seq,), early=True,
                               why=f"{op} as_of {v.get('as_of')} is older than the release")
        return None
    intent = d.intent or run.intent
    if op == "lookup":
        if a.get("key") != d.key:
            return None
        if v.get("found"):
            rec = v.get("record") or {}
            if matches(rec.get("intent"), intent):
                return Finding(state="present", strength="authoritative", cites=(read.seq,),
                               why=f"lookup found {rec.get('ref')}")
            return Finding(state="present", strength="weak", cites=(read.seq,),
                           why=f"lookup found {rec.get('ref')} but its intent differs")
        return _negative_lookup(ix, read, d, profile, need, "the key", "authoritative negative lookup")
    if op == "search":
        if a.get("incident") != intent.get("incident") or a.get("slot") != intent.get("slot"):
            return None
        records = [r for r in v.get("records") or () if isinstance(r, dict)]
        for rec in records:
            if matches(rec.get("intent"), intent):
                return Finding(state="present", strength="authoritative", cites=(read.seq,),
                               why=f"search found matching {rec.get('ref')}")
        for rec in records:
            if d.key is not None and rec.get("key") == d.key:
                return Finding(state="present", strength="weak", cites=(read.seq,),
                               why=f"search found {rec.get('ref')} under the key with another intent")
        if v.get("as_of", read.t) < need:
            return Finding(state="absent", strength="weak", cites=(read.seq,), early=True,
                           why=f"negative search as_of {ix.fmt(v.get('as_of', read.t))} is too early "
                               f"(needs {ix.fmt(need)})")
        return Finding(state="absent", strength="authoritative", cites=(read.seq,),
                       why="negative search compared on every intent field")
    if op == "get_version":
        if a.get("package") != intent.get("package") or a.get("version") != intent.get("version"):
            return None
        if v.get("found"):
            rec = v.get("record") or {}
            if matches(rec.get("intent"), intent):
                return Finding(state="present", strength="authoritative", cites=(read.seq,),
                               why=f"version read found {rec.get('ref')}")
            # A natural key holds one record, and it is another intent's: this publish has
            # no effect and never can (a late arrival meets already_exists).
            return Finding(state="absent", strength="authoritative", cites=(read.seq,),
                           why=f"the version is {rec.get('ref')} of another intent; a version holds one record")
        if v.get("in_flight"):
            return Finding(state="unknown", strength="weak", cites=(read.seq,), early=True,
                           why="the version is still being published")
        if v.get("as_of", read.t) < need:
            return Finding(state="absent", strength="weak", cites=(read.seq,), early=True,
                           why="negative version read is too early")
        return Finding(state="absent", strength="authoritative", cites=(read.seq,),
                       why="authoritative negative version read")
    if op == "wait_job":
        jobs = _job_ids(run, d)
        if not any(a.get("job_id") == j for j in jobs):
            return None
        if v.get("status") == "succeeded":
            return Finding(state="present", strength="authoritative", cites=(read.seq,),
                           why=f"job {a.get('job_id')} succeeded")
        return Finding(state="unknown", strength="weak", cites=(read.seq,), early=True,
                       why=f"job {a.get('job_id')} still {v.get('status')}")
    return None


def _release_by_own_key(ix: TraceIndex, read: Read, d: Dispatch, need: int) -> Finding:
    """A lookup by a compensation's own key: AR-08 reconciles a compensation with "the same
    prepare, semantic key, ledger, reconciliation, verification, and disposition pattern" as
    the original, so its key is an identifying read of it. Found with a record that releases
    ``d``'s target: the release committed. Not found: absent only where a negative lookup by
    key is authoritative (a key index, within retention, not in flight, fresh enough)."""
    v, op = read.value, read.op
    profile = ix.profile(d.service)
    if v.get("found"):
        rec = v.get("record") or {}
        released = rec.get("intent", {}).get("release") if isinstance(rec.get("intent"), dict) else None
        if rec.get("key") == d.key and (d.target is None or released == d.target):
            return Finding(state="present", strength="authoritative", cites=(read.seq,),
                           why=f"{op} by the release's own key found {rec.get('ref')} releasing {released}")
        return Finding(state="present", strength="weak", cites=(read.seq,),
                       why=f"{op} by the release's key found {rec.get('ref')}, which releases {released}, "
                           f"not {d.target}")
    return _negative_lookup(ix, read, d, profile, need, "the release's key",
                            "authoritative negative lookup by the release's own key")


def _negative_lookup(ix: TraceIndex, read: Read, d: Dispatch, profile: dict, need: int, what: str,
                     proven: str) -> Finding:
    """A lookup that did not find ``what``: unknown while the key is in flight, absent but weak
    without a key index, past the key's retention or before ``need``, else authoritatively absent."""
    v = read.value
    if v.get("in_flight"):
        return Finding(state="unknown", strength="weak", cites=(read.seq,), early=True,
                       why=f"lookup says {what} is still in flight")
    if profile.get("idempotency") not in ("semantic", "key_only") or profile.get("lookup") != "by_key":
        return Finding(state="absent", strength="weak", cites=(read.seq,),
                       why="a lookup on a service without a key index proves nothing")
    retention = profile.get("retention_ms")
    if isinstance(retention, int) and read.call_t - d.t >= retention:
        return Finding(state="absent", strength="weak", cites=(read.seq,),
                       why="the provider's key retention had expired")
    if v.get("as_of", read.t) < need:
        return Finding(state="absent", strength="weak", cites=(read.seq,), early=True,
                       why=f"negative lookup as_of {ix.fmt(v.get('as_of', read.t))} is too early "
                           f"(needs {ix.fmt(need)})")
    return Finding(state="absent", strength="authoritative", cites=(read.seq,), why=proven)


def _job_ids(run: RunIndex, d: Dispatch) -> set:
    out = set()
    for other in run.dispatches:
        r = other.result
        if other.key == d.key and r is not None and r["ok"] and isinstance(r.get("value"), dict):
            job = r["value"].get("job_id")
            if isinstance(job, str):
                out.add(job)
    return out


def resolve(ix: TraceIndex, run: RunIndex, d: Dispatch, worker: str, before: int,
            mode: str = "redispatch") -> Finding:
    """What ``worker`` could know, just before seq ``before``, of what became of ``d``."""
    then = knew(run, worker, before)
    r = then.result(d)
    answer = None                   # an answer that settles nothing until a read does
    if r is not None:
        if r["ok"]:
            value = r.get("value") or {}
            rec_intent = value.get("intent") if isinstance(value, dict) else None
            if rec_intent is not None and d.role != "compensation" and not matches(rec_intent, d.intent):
                return Finding(state="present", strength="weak", cites=(r["seq"],),
                               why="the response names a record with another intent")
            return Finding(state="present", strength="definite", cites=(r["seq"],),
                           why="accepted response")
        err = r.get("error") or {}
        if err.get("definite") and not _closed_socket(ix, err):
            code = err.get("code")
            if code != "already_exists":
                return Finding(state="absent", strength="definite", cites=(r["seq"],),
                               why=f"definite error {code}")
            answer = Finding(state="present", strength="weak", cites=(r["seq"],),
                             why="already_exists does not say whose record exists")
    own = r["seq"] if r is not None else (d.result["seq"] if d.result is not None
                                          and d.result["seq"] < before else d.seq)
    fenced = gap(run, d) if d.worker != worker else None
    if fenced is not None:
        own = min(own, fenced[0])         # reads since the sender's last confirmation count
    need = required_as_of(ix, run, d, worker, before, mode)
    best_auth = best_weak = None
    early = True                    # every weak read so far could only not settle it yet
    for read in then.reads(after=own):
        f = _read_about(ix, run, read, d, need)
        if f is None:
            continue
        if f.strength == "authoritative":
            # the latest authoritative read, except that a read which found the record is not
            # outvoted by a later one that missed it: a record seen exists, a miss may be stale
            # ("do not majority-vote"), whatever order the reads were made in
            if best_auth is None or best_auth.state != "present" or f.state == "present":
                best_auth = f
        else:
            best_weak, early = f, early and f.early
    if best_auth is not None:
        return best_auth
    durable = None
    if d.key is not None:
        for e in then.entries(d.key, since=fenced[0] if fenced is not None else d.seq):
            k = e["knowledge"]
            if k in ABSENT_KNOWLEDGE and warranted_absence(ix, run, e):
                durable = Finding(state="absent", strength="durable", cites=(e["seq"],),
                                  why=f"the ledger recorded {k}")
            elif k in PRESENT_KNOWLEDGE:
                durable = Finding(state="present", strength="durable", cites=(e["seq"],),
                                  why=f"the ledger recorded {k}")
    if durable is not None:
        return durable
    if best_weak is not None:
        return replace(best_weak, early=early)
    if answer is not None:
        return answer
    callback = next(then.callbacks(d.key, after=d.seq), None) if d.key is not None else None
    if callback is not None:
        # says what the worker had seen, not why it moved: a callback is all it had, never a warrant
        return Finding(state="present", strength="callback", cites=(callback,),
                       why=f"no answer that settles it and no identifying read; all it had seen is a completion "
                           f"callback (inbox poll #{callback}), which is not a warrant")
    return NOTHING


def temporarily_negative(ix: TraceIndex, d: Dispatch, f: Finding) -> bool:
    """Whether the weak finding ``f`` about ``d`` is the chapter's temporarily negative read: every
    read since the ambiguity could not settle it *yet* (before the late-delivery bound, or the
    request still in flight), on a service that keeps no idempotency keys, so nothing collapses a
    late arrival. AR-08: "Without that support, a negative read may be only temporarily negative";
    a resend on it repeats an ambiguous non-idempotent effect as blindly as one with no read."""
    return f.strength == "weak" and f.early and f.state != "present" \
        and ix.profile(d.service).get("idempotency") not in DEDUP_MODES


def callback_only(run: RunIndex, key, worker: str, before: int) -> int | None:
    """The inbox poll (its seq) at which ``worker`` saw a completion callback of its run that names
    no key, after the first dispatch of ``key`` and before ``before``; None when it saw none. Such a
    callback is about the run's effect, whichever key it was sent under: a CONFIRMED with no other
    evidence that follows it is the callback advancing state (LATE-01)."""
    sent = next((d.seq for d in run.dispatches if d.key == key and d.seq < before), None)
    if sent is None:
        return None
    return next(knew(run, worker, before).callbacks(None, after=sent), None)


#: transport refusals a real worker meets as a closed connection, which over a real socket cannot be
#: told from one closed after sending (docs/integration.md, "HTTP mapping"): on an integration trace
#: they prove nothing was sent only to the simulator, never to the worker
SOCKET_INDISTINCT = ("refused", "timeout_before_send")


def _closed_socket(ix: TraceIndex, err: dict) -> bool:
    """Whether ``err`` is one of SOCKET_INDISTINCT in an integration trace (its header's adapter is
    ``integrate:`` and the worker command): AR-08, "For TIMEOUT_BEFORE_SEND, the transport must prove
    that no bytes could have been accepted", and the worker's transport proved nothing."""
    return err.get("code") in SOCKET_INDISTINCT and str(ix.header.get("adapter", "")).startswith("integrate:")


def warranted_absence(ix: TraceIndex, run: RunIndex, e: dict) -> bool:
    """Whether the ledger append ``e`` (PROPOSED or REJECTED) rested on what its worker had
    observed: every earlier dispatch of its key settled absent (a definite error, an
    authoritative read). What an adapter wrote down is never evidence by itself: an entry
    recorded after an indefinite answer settles nothing for anyone."""
    memo = ix.memo.setdefault("absence_warrant", {})
    found = memo.get(e["seq"])
    if found is None:
        before = e.get("call") if isinstance(e.get("call"), int) else e["seq"]
        mode = "claim" if e["knowledge"] == "REJECTED" else "redispatch"
        found = memo[e["seq"]] = absence(ix, run, e["key"], e["worker"], before, mode)[0]
    return found


def presence(ix: TraceIndex, run: RunIndex, key, worker: str, before: int) -> Finding:
    """The best evidence ``worker`` had before ``before`` that an effect under ``key`` exists."""
    best = NOTHING
    sent = [d for d in run.dispatches if d.seq < before and d.key == key]
    # an identifying read of the prepared key finds the effect of its intent even when none of
    # this run's own sends made it (another run of the same intent sent that key)
    prepared = _prepared(run, key, before)
    for d in sent + ([prepared] if prepared is not None else []):
        f = resolve(ix, run, d, worker, before, "claim")
        if f.state == "present" and _rank(f) > _rank(best):
            best = f
        elif f.state != "present" and f.strength in ("weak", "callback") and best.strength == "none":
            best = Finding(state="unknown", strength=f.strength, cites=f.cites, why=f.why)
    return best


def _prepared(run: RunIndex, key, before: int) -> Dispatch | None:
    """The run's effect entry for ``key`` as if it were a dispatch at its first append: what a
    read of the key is about when the run never sent it."""
    entries = run.ledger_by_key.get(key)
    if not entries or entries[0]["seq"] >= before:
        return None
    first = entries[0]
    entry = obj(first.get("entry"))
    if entry.get("kind") != "effect":
        return None
    intent = entry.get("intent")
    service, op = entry.get("service"), entry.get("operation")
    return Dispatch(seq=first["seq"], t=first["t"], worker=first["worker"],
                    service=service if isinstance(service, str) else run.service,
                    op=op if isinstance(op, str) else run.operation, key=key,
                    intent=intent if isinstance(intent, dict) else dict(run.intent), args={},
                    role="primary" if op == run.operation else "secondary")


def absence(ix: TraceIndex, run: RunIndex, key, worker: str, before: int,
            mode: str = "claim") -> tuple[bool, Finding | None]:
    """Whether every dispatch under ``key`` before ``before`` is settled as absent for
    ``worker``; when not, the finding for the first that is not."""
    for d in run.dispatches:
        if d.seq >= before:
            break
        if d.key != key:
            continue
        f = resolve(ix, run, d, worker, before, mode)
        if not (f.state == "absent" and f.settled):
            return False, Finding(state=f.state, strength=f.strength, cites=(d.seq, *f.cites),
                                  why=f.why or "no evidence")
    return True, None


_RANKS = {"definite": 5, "authoritative": 4, "durable": 3, "weak": 2, "callback": 1, "none": 0}


def _rank(f: Finding) -> int:
    return _RANKS[f.strength]
