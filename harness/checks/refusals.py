"""Two classification rules read in the direction the older checks did not: a definite refusal
treated as if it were ambiguous, and an absence claimed on a read that was merely lucky.

* AR-08 "Assess the eight traces": "A learner loses points for treating every timeout alike";
  "A timeout definitely before send can resume after revalidation". RETRY-01 holds the
  dangerous direction (an ambiguous outcome retried blind); CLS-03 holds the other: an
  outcome the worker saw definitely refused (nothing happened) is not reconciled as though
  it might have happened.
* AR-08 "Specify semantic idempotency": "Without that support, a negative read may be only
  temporarily negative." A negative read fresh enough to resend under the same key (the key
  collapses a late arrival) is not enough to *claim* absence: that needs the provider's
  late-delivery bound. A run that recorded such a read as PROPOSED and then ended *_NO_EFFECT
  without resending claimed absence on a read that happened to be right.
"""
from __future__ import annotations

from typing import Iterator

from .budgets import duration
from .common import CLAIM, Finding, Invariant, finish_call, inv
from .evidence import absence, resolve
from .index import Dispatch, RunIndex, TraceIndex
from .knowledge import knew
from .values import effect_items, obj

_READ_OPS = frozenset({"lookup", "search", "get_version", "wait_job"})
#: Definite refusals that speak of another request under the key (one in flight, one stored with
#: other parameters, one that exists): reading that other request back is not this rule's business.
_ABOUT_THE_KEY = frozenset({"already_exists", "conflict_in_flight", "intent_mismatch"})


def _definite(d: Dispatch, worker: str, before: int) -> str | None:
    """The code of ``d``'s definite refusal, if ``worker`` saw one before ``before``."""
    r = d.seen_by(worker, before)
    if r is None or r["ok"]:
        return None
    err = obj(r.get("error"))
    code = err.get("code")
    return code if err.get("definite") and code not in _ABOUT_THE_KEY else None


def _reads_key(call: dict, d: Dispatch) -> bool:
    """``call`` is an identifying read of ``d``'s effect."""
    if call["port"] != d.service or call["op"] not in _READ_OPS:
        return False
    args, intent = obj(call.get("args")), d.intent or {}
    if call["op"] == "lookup":
        return d.key is not None and args.get("key") == d.key
    if call["op"] == "search":
        return args.get("incident") == intent.get("incident") and args.get("slot") == intent.get("slot")
    if call["op"] == "get_version":
        return args.get("package") == intent.get("package") and args.get("version") == intent.get("version")
    return False


def _records_absence(call: dict, key) -> bool:
    """``call`` is a ledger append (answered or not) recording ``key`` as not sent."""
    entry = obj(obj(call.get("args")).get("entry"))
    return call["port"] == "ledger" and call["op"] == "append" and entry.get("semantic_key") == key \
        and entry.get("knowledge") in ("PROPOSED", "REJECTED")


def _as_ambiguous(ix: TraceIndex, run: RunIndex, d: Dispatch, code: str) -> tuple[str, int] | None:
    """What ``d``'s worker did after seeing ``d`` refused definitely that only an ambiguous
    outcome calls for, before it sent the key again and before it tried to record the refusal
    (an append of PROPOSED or REJECTED, even one a store refused: a worker that restarts from
    durable state after that has forgotten the refusal on purpose): (what, seq) or None."""
    w = run.workers.get(d.worker)
    answered = d.result["seq"]
    until = min((x.seq for x in run.dispatches if x.seq > d.seq and x.worker == d.worker and x.key == d.key),
                default=None)
    if w is None:
        return None
    for seq in w.calls:
        if seq <= answered or (until is not None and seq >= until):
            continue
        call = run.calls.get(seq)
        if call is None:
            continue
        if _records_absence(call, d.key):
            return None
        if _reads_key(call, d):
            return f"read it back with {call['port']}.{call['op']} #{seq}", seq
    if until is not None:
        return None
    for f in run.finishes:
        if f["seq"] < answered or f["worker"] != d.worker or not f.get("accepted"):
            continue
        listed = dict(effect_items(f.get("effects")))
        if d.key is not None and listed.get(d.key) == "SENT_UNKNOWN":
            return f"finished {f['disposition']} listing {d.key} as SENT_UNKNOWN (#{f['seq']})", f["seq"]
        if CLAIM.get(f["disposition"]) == "unknown" and d.role == "primary" and d.key is not None \
                and run.primary_keys(finish_call(f)) == [d.key]:
            return f"finished {f['disposition']} (#{f['seq']}), the effect unknown", f["seq"]
    return None


def _cls_03(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.result is None:
                continue
            code = _definite(d, d.worker, d.result["seq"] + 1)
            if code is None:
                continue
            # every attempt of the key so far was refused definitely, as this worker saw: nothing can exist
            earlier = [x for x in run.dispatches if x.seq < d.seq and x.key == d.key and x.service == d.service]
            if any(_definite(x, d.worker, d.result["seq"] + 1) is None for x in earlier):
                continue
            found = _as_ambiguous(ix, run, d, code)
            if found is None:
                continue
            what, seq = found
            yield run.id, f"{d.service}.{d.op} #{d.seq} was refused definitely ({code}, #{d.result['seq']}): " \
                          f"the request never took effect, yet {d.worker} {what} as if the outcome were ambiguous", \
                (d.seq, d.result["seq"], seq), False


def _bottom(ix: TraceIndex, run: RunIndex, d: Dispatch, worker: str, before: int):
    """What a claim of absence about ``d`` by ``worker`` before ``before`` finally rests on:
    the ledger records are followed back (each was judged warranted when written) to the
    evidence under the first of them. -> (finding, the ledger entries followed)."""
    f = resolve(ix, run, d, worker, before, "claim")
    chain: list = []
    while f.strength == "durable" and f.cites:
        e = next((x for x in run.ledger_by_key.get(d.key, ()) if x["seq"] == f.cites[0]), None)
        if e is None or e["knowledge"] not in ("PROPOSED", "REJECTED"):
            break
        chain.append(e)
        at = e.get("call") if isinstance(e.get("call"), int) else e["seq"]
        f = resolve(ix, run, d, e["worker"], at, "claim")
    return f, chain


def _rec_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            if not f.get("accepted") or CLAIM.get(f["disposition"]) != "absent":
                continue
            then = knew(run, f["worker"], finish_call(f))
            for k in run.primary_keys(then.at):
                if then.ledger(k) not in ("PROPOSED", "REJECTED") \
                        or not absence(ix, run, k, then.worker, then.at, "claim")[0]:
                    continue                        # TRUTH-02 judges a claim it does not warrant at all
                for d in run.dispatches:
                    if d.seq >= then.at or d.key != k:
                        continue
                    under, chain = _bottom(ix, run, d, then.worker, then.at)
                    if not chain or (under.state == "absent" and under.settled):
                        continue
                    first = chain[-1]
                    why = under.why or "no read at all"
                    bound = ix.profile(d.service).get("max_delivery_delay_ms")
                    late = f"{duration(bound)} after send #{d.seq}" if isinstance(bound, int) else f"after send #{d.seq}"
                    yield run.id, f"{f['disposition']} at #{f['seq']} claims no effect of {k} on the " \
                                  f"{first['knowledge']} recorded at #{first['seq']}, which rested on evidence too " \
                                  f"weak for a claim: {why}. That allows a resend under the same key, not a claim " \
                                  f"of absence before the late-delivery bound ({late}): the claim was right by luck", \
                        (d.seq, *under.cites, first["seq"], f["seq"]), False
                    break


#: Classification (C3) and reconciliation (E4) rules.
CLASSIFICATION: tuple[Invariant, ...] = (
    inv("CLS-03", "A definite refusal is not reconciled as if it were ambiguous.", "classification", False, None,
        _cls_03,
        "After a worker saw a dispatch refused definitely (a definite error other than one about another "
        "request under the key: already_exists, conflict_in_flight, intent_mismatch), with "
        "every earlier attempt of that key refused definitely too, it does not read the effect back by its "
        "identity (lookup by the key, search on the intent, version read) before sending the key again, "
        "nor, when it never sends it again, finish with the key listed SENT_UNKNOWN or the run's only "
        "effect unknown: nothing took effect, so there is nothing to reconcile. A worker that tried to "
        "record the refusal first (a ledger append of PROPOSED or REJECTED for the key, even one a store "
        "refused) classified it; what it does after restarting from durable state is not judged here.",
        "the dispatch, its refusal and the read or finish"),
)
EFFECTS: tuple[Invariant, ...] = (
    inv("REC-02", "An absence claim rests on a read past the late-delivery bound, not a lucky early one.",
        "effect_correctness", True, None, _rec_02,
        "An accepted *_NO_EFFECT finish whose effect key the ledger holds PROPOSED or REJECTED needs every "
        "send of that key to be settled absent by evidence good enough for a claim, the ledger's records "
        "followed back to the evidence under them (a PROPOSED recorded as the correction before a redispatch "
        "under the same key, and a REJECTED written on top of it, rest on what that first record saw): a "
        "definite refusal, or a negative read past the provider's max_delivery_delay_ms after the send. A "
        "read fresh enough only to resend (the key collapses a late arrival) is not: the late arrival may "
        "still land, and when it did not the claim was right by luck.",
        "the early read, the PROPOSED entry and the finish"),
)
