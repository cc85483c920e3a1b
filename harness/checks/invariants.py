"""The invariants: generic oracles over the three timelines.

Each invariant is computed from the trace alone, with no per-scenario expectation: ground
truth is the remote lane, what the adapter asserted is the knowledge lane (ledger) and
the run lane (checkpoints, finishes), and what it observed is every port result
delivered to one of its workers. A check yields findings ``(run, message, events,
auto_fail)``; ``events`` are the trace sequence numbers it cites as evidence.

docs/invariants.md is generated from this module (``python tools/docgen.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import networkx as nx

from ..model import (DISPOSITION_EFFECT_CLAIM, KNOWLEDGE_EVIDENCE, KNOWLEDGE_TRANSITIONS,
                     RUN_TRANSITIONS, TERMINAL_STATES, UNRESOLVED_KNOWLEDGE, RunState)
from . import evidence, records
from .evidence import PRESENT_KNOWLEDGE, absence, presence, resolve
from .knowledge import EVER, acted_at, knew, sending, stalled_send
from .index import (COMPENSATION_OPS, RECORD_FAULTS, WALL_CLOCK_FAULTS, Dispatch, RunIndex, TraceIndex,
                    dig, effect_items, effect_keys, hashable, identity, matches, obj)

Finding = tuple  # (run id | None, message, events tuple, auto_fail bool)

CATEGORIES = ("classification", "ownership", "effect_correctness", "disposition")

# --------------------------------------------------------------------------- the tables as graphs
_NONE = "(none)"


def _graph(table, none_label: str | None = None, self_loops: Iterable = ()) -> nx.DiGraph:
    g = nx.DiGraph()
    for src, dsts in table.items():
        u = none_label if src is None else getattr(src, "value", src)
        g.add_node(u)
        for dst in dsts:
            g.add_edge(u, getattr(dst, "value", dst))
    for s in self_loops:
        g.add_edge(s, s)
    return g


#: RUN_TRANSITIONS as a graph; every non-terminal state may be rewritten to itself.
RUN_GRAPH = _graph(RUN_TRANSITIONS, self_loops=[s.value for s in RunState if s not in TERMINAL_STATES])
#: KNOWLEDGE_TRANSITIONS as a graph; ``(none)`` is "no entry yet".
KNOWLEDGE_GRAPH = _graph(KNOWLEDGE_TRANSITIONS, none_label=_NONE)
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
_UNRESOLVED = frozenset(k.value for k in UNRESOLVED_KNOWLEDGE)
_CLAIM = {s.value: c for s, c in DISPOSITION_EFFECT_CLAIM.items()}
_NEEDS = {(getattr(a, "value", a), b.value): text for (a, b), text in KNOWLEDGE_EVIDENCE.items()}
_KEPT_AFTER_CONFIRM = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED", "SENT_UNKNOWN"})
_NON_RETRYABLE = frozenset({"validation_failed", "permission_denied", "intent_mismatch", "already_exists"})
_PACKET_SECTIONS = ("header", "effects", "authority", "compatibility", "budget", "recommended")
_STOP_STATES = frozenset({"MIGRATING", "PINNED", "WAITING_OPERATOR"}) | _TERMINAL
_CONTRACT_FIELDS = records.CONTRACT


@dataclass(frozen=True, slots=True, kw_only=True)
class Invariant:
    """One check: a stable id, a one-line statement, its rubric category, whether it is a
    safety property (a correct design never fails it), the automatic-failure reason it can
    raise, and the function that computes it."""

    id: str
    statement: str
    category: str
    safety: bool
    auto_fail: str | None
    check: Callable[[TraceIndex], Iterable[Finding]]
    computed: str = ""      # how it is computed, for docs/invariants.md
    evidence: str = ""      # what a violation cites

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.id}: unknown category {self.category!r}")


# --------------------------------------------------------------------------- helpers
def _finish_call(f: dict) -> int:
    """The seq of the finish call: evidence must precede it."""
    return f.get("call") if isinstance(f.get("call"), int) else f["seq"]


def _is_compensation(port, op) -> bool:
    return op in COMPENSATION_OPS.get(port, ())


def _unfenced(ix: TraceIndex) -> dict[int, str]:
    """Commits by a stale worker that had observed nothing (seq -> worker): a zombie that
    stalled between its last ownership check and the send, or sent without knowing it had
    been replaced. Only a service with fencing tokens can stop those, so they do not make
    the new owner's honest claims false (a note records them); OWN-01 blames the zombie
    when it had evidence."""
    found = ix.memo.get("unfenced")
    if found is not None:
        return found
    found = {}
    for ev in ix.effects:
        call = ix.calls.get(ev.get("call"))
        run = ix.runs.get(call.get("run")) if call is not None else None
        sent = knew(run, call["worker"], call["seq"]) if run is not None else None
        if sent is None or sent.w is None:
            continue
        epoch = sent.epoch
        if epoch is None or sent.stale_evidence() is not None:
            continue
        stale_call = not _live(run, epoch, call["seq"], call["t"])
        stalled = call["seq"] in run.paused_calls and not _live(run, epoch, ev["seq"], ev["t"])
        if (stale_call and sent.confirmed_just_before()) or (stalled and not stale_call):
            found[ev["seq"]] = sent.worker
            ix.memo.setdefault("notes", []).append(
                f"{ev.get('ref')} (#{ev['seq']}) was committed by {sent.worker}, a stale worker that had observed "
                "nothing: only a service with fencing can stop that; it is not held against later claims")
    ix.memo["unfenced"] = found
    return found


def _own_effects(ix: TraceIndex, run: RunIndex) -> list[dict]:
    """Commits of the run's operation caused by the run itself (late arrivals and proxy
    retries included): what an absence claim is about."""
    return [ev for ev in run.effects if ix.origin(ev) == (run.service, run.operation)]


def _held_effects(ix: TraceIndex, run: RunIndex) -> list[dict]:
    """Commits a presence claim may rest on: the run's own, or a commit of its intent under a
    key the run sent or prepared (the service holds one record for that key: another run's
    identical intent may have sent it first)."""
    keys = set(run.primary_keys(len(ix.events) + 1))
    return [ev for ev in ix.forward_effects(run.service, run.operation, run.intents)
            if ev.get("run") == run.id or ev.get("key") in keys]


def _live(run: RunIndex, epoch, seq: int, t: int) -> bool:
    return run.live(epoch, seq, t)


def _streams(run: RunIndex) -> list[list[Dispatch]]:
    """Dispatches that repeat one effect: the same target (compensation) or the same key or
    business intent (everything else), in seq order."""
    groups: list[list[Dispatch]] = []
    index: dict = {}
    for d in run.dispatches:
        if d.role == "compensation":
            ids = [("target", d.service, d.target)]
        else:
            ids = [("intent", d.service, d.op, identity(d.intent))]
            if d.key is not None:
                ids.append(("key", d.service, d.op, d.key))
        found = next((index[i] for i in ids if i in index), None)
        if found is None:
            found = len(groups)
            groups.append([])
        groups[found].append(d)
        for i in ids:
            index.setdefault(i, found)
    return groups


def _same_worker_pairs(run: RunIndex):
    """Consecutive dispatches of one stream by one worker: (previous, next)."""
    for stream in _streams(run):
        last: dict[str, Dispatch] = {}
        for d in stream:
            prev = last.get(d.worker)
            if prev is not None:
                yield prev, d
            last[d.worker] = d


def _between(seqs, lo: int, hi: int) -> bool:
    return any(lo < s < hi for s in seqs)


# --------------------------------------------------------------------------- classification
def _truth(ix: TraceIndex) -> Iterator[Finding]:
    """TRUTH-01: claims against ground truth at the horizon."""
    for run in ix.runs.values():
        seen: set = set()
        for e in run.ledger:
            k, prev = e["knowledge"], e.get("previous")
            if k == prev or k not in ("CONFIRMED", "REJECTED", "COMPENSATED") or (e["key"], k) in seen:
                continue
            seen.add((e["key"], k))
            false = _claim_false(ix, run, e["key"], k, obj(e.get("entry")))
            if false:
                yield run.id, f"ledger says {e['key']} {k} at #{e['seq']}, but {false}", \
                    (e["seq"], *_truth_cites(ix, run, e["key"])), False
        zombie = _unfenced(ix)
        holdings = _held_effects(ix, run)
        active = [ev for ev in _own_effects(ix, run) if ev["ref"] not in ix.released_refs
                  and ev["seq"] not in zombie]
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            claim = _CLAIM.get(f["disposition"])
            # a presence claim stays true of its moment: a release after it (another run's
            # compensation of the shared effect) does not make the record false
            held = [ev for ev in holdings if ev["ref"] not in ix.released_refs
                    or ix.released_refs[ev["ref"]]["seq"] > f["seq"]]
            if claim == "present" and not held:
                gone = [ix.released_refs[ev["ref"]] for ev in holdings if ev["ref"] in ix.released_refs]
                if gone:
                    by = ", ".join(f"{g['ref']} by {g.get('run') or 'another actor'} at #{g['seq']}" for g in gone[:2])
                    yield run.id, f"{f['disposition']} at #{f['seq']} claims the effect remains, but it had " \
                                  f"been released ({by})", (*(g["seq"] for g in gone[:2]), f["seq"]), False
                else:
                    yield run.id, f"{f['disposition']} at #{f['seq']} claims the effect remains, but no " \
                                  f"effect of this run remains at the horizon", (f["seq"],), False
            elif claim == "absent" and active:
                refs = ", ".join(ev["ref"] for ev in active)
                yield run.id, f"{f['disposition']} at #{f['seq']} claims no effect, but {refs} " \
                              f"exists at the horizon", (f["seq"], *(ev["seq"] for ev in active)), False
            entries = {}
            for e in run.ledger:
                if e["seq"] < f["seq"]:
                    entries[e["key"]] = obj(e.get("entry"))
            for key, k in effect_items(f.get("effects")):
                if k not in ("CONFIRMED", "REJECTED", "COMPENSATED") or (key, k) in seen:
                    continue
                seen.add((key, k))
                false = _claim_false(ix, run, key, k, obj(entries.get(key)))
                if false:
                    yield run.id, f"finish at #{f['seq']} lists {key} {k}, but {false}", (f["seq"],), False


def _key_effects(ix: TraceIndex, run: RunIndex, key) -> list[dict]:
    """Commits under ``key`` that are this run's: caused by it, or of its intent (the service
    answered the run with an earlier record); a colliding key of another intent is not it."""
    return [ev for ev in ix.effects if ev.get("key") == key and not _is_compensation(*ix.origin(ev))
            and (ev.get("run") == run.id or any(matches(ev.get("intent"), i) for i in run.intents))]


def _truth_cites(ix: TraceIndex, run: RunIndex, key) -> tuple[int, ...]:
    return tuple(ev["seq"] for ev in _key_effects(ix, run, key))[:3]


def _claim_false(ix: TraceIndex, run: RunIndex, key, k: str, entry: dict) -> str:
    """Why the claim ``key`` is ``k`` is false at the horizon ('' when it is true)."""
    if entry.get("kind") == "compensation":
        done = [ev for ev in run.released if ev.get("key") == key]
        if k == "CONFIRMED" and not done:
            return "no release under that key ever took effect"
        if k == "REJECTED" and done:
            return f"the release {done[0].get('release_ref')} took effect"
        return ""
    effects = _key_effects(ix, run, key)
    ref = entry.get("remote_ref")
    if k == "CONFIRMED":
        if isinstance(ref, str) and ref:
            rec = ix.effects_by_ref.get(ref)
            if rec is None:
                return f"no record {ref} exists"
            reference = run.intent if entry.get("operation", run.operation) == run.operation \
                else entry.get("intent")
            if not matches(rec.get("intent"), reference):
                return f"{ref} is a record of another intent ({_diff(rec.get('intent'), reference)})"
            return ""
        return "" if effects else "no effect under that key ever took effect"
    if k == "REJECTED":
        zombie = _unfenced(ix)
        effects = [ev for ev in effects if ev["seq"] not in zombie and ev.get("run") == run.id]
        if effects:
            return f"{effects[0]['ref']} took effect under that key"
        return ""
    if k == "COMPENSATED":
        if not any(ev["ref"] in ix.released_refs for ev in effects):
            return "the original effect was never released"
    return ""


def _diff(a, b) -> str:
    if not isinstance(a, dict) or not isinstance(b, dict):
        return "no intent"
    fields = [f"{k}={a.get(k)!r}, not {v!r}" for k, v in b.items() if k != "proposal_hash" and a.get(k) != v]
    return "; ".join(fields[:3])


def _evid_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for e in run.ledger:
            k = e["knowledge"]
            if k == e.get("previous") or k not in ("CONFIRMED", "REJECTED", "COMPENSATED"):
                continue
            entry = obj(e.get("entry"))
            named = any(isinstance(entry.get(f), list) and entry.get(f)
                        for f in ("evidence", "reconciliation", "observations"))
            missing = [] if named else ["the evidence it rests on"]
            if k == "CONFIRMED" and entry.get("kind") == "effect" and not entry.get("remote_ref"):
                missing.append("the remote reference")
            if missing:
                yield run.id, f"{e['key']} {k} at #{e['seq']} does not name {' or '.join(missing)}", \
                    (e["seq"],), False


def _retry_01(ix: TraceIndex) -> Iterator[Finding]:
    """RETRY-01 (no evidence at all) and REC-01 (only a non-authoritative read) for redispatch."""
    yield from _redispatch(ix, want="blind")


def _redispatch(ix: TraceIndex, want: str) -> Iterator[Finding]:
    for run in ix.runs.values():
        for stream in _streams(run):
            for i, d in enumerate(stream):
                sent = sending(run, d)
                for prev in stream[:i]:
                    if prev.seq >= sent.at:
                        break                       # sent while d's worker stalled: it could not know
                    f = resolve(ix, run, prev, sent.worker, sent.at, "redispatch")
                    if f.state == "present" and f.settled:
                        break                       # EFF-02's business
                    if f.state == "absent" and f.settled:
                        continue
                    kind = "weak" if f.strength == "weak" else "blind"
                    if kind == want:
                        outcome = knew(run, d.worker, d.seq).outcome(prev)
                        if kind == "blind":
                            yield run.id, f"{d.service}.{d.op} #{d.seq} by {d.worker} repeats #{prev.seq} " \
                                          f"({outcome}) without an authoritative read showing absence", \
                                (prev.seq, d.seq, *f.cites), True
                        else:
                            yield run.id, f"{d.service}.{d.op} #{d.seq} repeats #{prev.seq} ({outcome}) on " \
                                          f"evidence that cannot prove absence: {f.why}", \
                                (prev.seq, *f.cites, d.seq), False
                    break


def _cls_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for i, d in enumerate(run.dispatches):
            r = d.result
            if r is None or not r["delivered"] or r["ok"]:
                continue
            code = (r.get("error") or {}).get("code")
            if code not in _NON_RETRYABLE:
                continue
            # the refusal binds the worker that saw it, and every worker once that worker recorded the
            # key in the ledger after it; a replacement that never learnt of it may reconcile and send
            again = next((x for x in run.dispatches[i + 1:] if x.key == d.key and x.service == d.service
                          and x.op == d.op and (x.worker == r["worker"] or knew(
                              run, r["worker"], sending(run, x).at).appended(d.key, since=r["seq"]))),
                         None)
            if again is not None:
                yield run.id, f"{code} at #{r['seq']} is not transient, yet {d.key} was sent again at " \
                              f"#{again.seq}", (r["seq"], again.seq), False


def _cls_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for i, d in enumerate(run.dispatches):
            r = d.result
            if r is None or not r["delivered"] or r["ok"]:
                continue
            err = r.get("error") or {}
            if err.get("code") != "throttled":
                continue
            after = (err.get("details") or {}).get("retry_after_ms") or 0
            # the next send by the worker that saw the answer, or by any worker once that worker
            # recorded the key in the ledger after it (a replacement that never learnt of it cannot)
            nxt = next((x for x in run.dispatches[i + 1:] if x.key == d.key and x.op == d.op
                        and x.seq > r["seq"] and (x.worker == r["worker"] or knew(
                            run, r["worker"], sending(run, x).at).appended(d.key, since=r["seq"]))), None)
            if nxt is not None and nxt.t < r["t"] + after:
                yield run.id, f"throttled at #{r['seq']} asked to wait {after} ms; {d.key} was re-sent " \
                              f"after {nxt.t - r['t']} ms (#{nxt.seq})", (r["seq"], nxt.seq), False


def _auth_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        principal = run.intent.get("principal")
        if principal is None:
            continue
        for d in run.dispatches:
            if d.role == "secondary":
                continue
            p = d.intent.get("principal")
            if p is not None and p != principal:
                yield run.id, f"{d.service}.{d.op} #{d.seq} acts as {p!r}, not the run's principal " \
                              f"{principal!r}", (d.seq,), False


def _mig_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        cps = run.checkpoints
        bad: dict[int, Finding] = {}
        # Migration issues no effect: nothing is dispatched while a MIGRATING checkpoint is latest.
        for i, cp in enumerate(cps):
            if cp["state"] != "MIGRATING":
                continue
            record = dig(cp, "checkpoint", "migration")
            if not (isinstance(record, dict) and "from" in record and "to" in record):
                bad[cp["seq"]] = (run.id, f"MIGRATING checkpoint v{cp['version']} (#{cp['seq']}) has no "
                                          f"migration record (from, to, changes)", (cp["seq"],), False)
            done = next((c["seq"] for c in cps[i + 1:] if c["state"] != "MIGRATING"), None)
            for d in run.dispatches:
                if d.seq > cp["seq"] and (done is None or d.seq < done):
                    bad[d.seq] = (run.id, f"{d.service}.{d.op} #{d.seq} dispatched during the migration "
                                          f"started at #{cp['seq']}", (cp["seq"], d.seq), False)
        by_version = {cp["version"]: cp["seq"] for cp in cps}
        # A worker whose code differs from the contract of the checkpoint it works from (the
        # latest at its start, or the latest it loaded since) migrates, pins or stops first.
        for w in run.workers.values():
            base = None
            for cp in cps:
                if cp["seq"] > w.start_seq:
                    break
                base = cp
            view = obj(dig(base, "checkpoint", "contract")) if base is not None else None
            view_seq = base["seq"] if base is not None else None
            steps = [(s, "load", (version, contract)) for s, version, contract in knew(run, w.name, EVER).loads()]
            steps += [(cp["seq"], "checkpoint", cp) for cp in cps if cp["seq"] > w.start_seq]
            steps += [(d.seq, "dispatch", d) for d in run.dispatches if d.worker == w.name]
            steps.sort(key=lambda step: step[0])
            migrating = completed = wrote = False
            for seq, kind, item in steps:
                if kind == "load":
                    view, view_seq = item[1], by_version.get(hashable(item[0]), seq)
                    continue
                changed = [f for f in _CONTRACT_FIELDS if view is not None and f in w.env and f in view
                           and view.get(f) != w.env.get(f)]
                if kind == "checkpoint":
                    if item["worker"] != w.name:
                        if migrating and item["state"] != "MIGRATING":
                            completed = True
                        continue
                    if item["state"] == "MIGRATING":
                        migrating = True
                    elif migrating:
                        completed = True
                    elif changed and not wrote and item["state"] not in _STOP_STATES:
                        wrote = True
                        what = ", ".join(f"{f} {view.get(f)} -> {w.env.get(f)}" for f in changed)
                        bad.setdefault(seq, (run.id, f"{w.name} runs incompatible code ({what}) and wrote "
                                                     f"{item['state']} at #{seq} without migrating, pinning or "
                                                     f"stopping", (view_seq, seq), False))
                elif changed and not completed:
                    what = ", ".join(f"{f} {view.get(f)} -> {w.env.get(f)}" for f in changed)
                    bad.setdefault(seq, (run.id, f"{w.name} runs incompatible code ({what}) and dispatched "
                                                 f"#{seq} before a completed migration", (view_seq, seq), False))
        for seq in sorted(bad):
            yield bad[seq]


# --------------------------------------------------------------------------- knowledge
def _ledger_moves(ix: TraceIndex) -> Iterator[tuple[str, Finding]]:
    """Every ledger append judged once: (invariant id, finding)."""
    for run in ix.runs.values():
        comp_by_orig: dict = {}
        for key, entries in run.ledger_by_key.items():
            entry = obj(entries[0].get("entry"))
            if entry.get("kind") == "compensation":
                comp_by_orig.setdefault(hashable(entry.get("compensates")), []).append(key)
        for e in run.ledger:
            prev, k, key = e.get("previous"), e["knowledge"], e["key"]
            entry = obj(e.get("entry"))
            u = _NONE if prev is None else prev
            before = e.get("call") if isinstance(e.get("call"), int) else e["seq"]
            if not KNOWLEDGE_GRAPH.has_edge(u, k):
                if prev in PRESENT_KNOWLEDGE and entry.get("kind") != "compensation":
                    yield "COMP-01", (run.id, f"the original effect {key} was rewritten {prev} -> {k} at "
                                              f"#{e['seq']}", (e["seq"],), True)
                else:
                    yield "KNOW-01", (run.id, f"{key}: {u} -> {k} at #{e['seq']} is not a legal knowledge "
                                              f"transition", (e["seq"],), False)
                continue
            need = _NEEDS.get((prev, k))
            if need is None:
                if k == "COMPENSATION_PROPOSED" and prev != k and not comp_by_orig.get(key):
                    yield "COMP-01", (run.id, f"{key} moved to COMPENSATION_PROPOSED at #{e['seq']} but no "
                                              f"compensation entry (kind compensation, compensates {key}) exists",
                                      (e["seq"],), False)
                continue
            w = e["worker"]
            if prev == "COMPENSATION_PROPOSED":
                want = "CONFIRMED" if k == "COMPENSATED" else "REJECTED"
                now = knew(run, w, e["seq"])
                ok = any(now.ledger(c) == want for c in comp_by_orig.get(key, ()))
                if not ok:
                    yield "KNOW-02", (run.id, f"{key} {prev} -> {k} at #{e['seq']} needs {need}",
                                      (e["seq"],), False)
                continue
            if k == "CONFIRMED":
                f = presence(ix, run, key, w, before)
                if f.state == "present" and f.settled:
                    if f.strength == "authoritative" or f.strength == "definite" or f.strength == "durable":
                        continue
                inv, auto = _unwarranted_inv(f)
                yield inv, (run.id, f"{key} {prev} -> CONFIRMED at #{e['seq']} without {need}"
                                    + (f": {f.why}" if f.why else " (no response, no read)"),
                            (e["seq"], *f.cites), auto and inv == "KNOW-02")
                continue
            mode = "claim" if k == "REJECTED" else "redispatch"
            ok, f = absence(ix, run, key, w, before, mode)
            if ok:
                continue
            inv, _ = _unwarranted_inv(f)
            hint = " (a deadline passing is not evidence)" if prev == "SENT_UNKNOWN" and inv == "KNOW-02" else ""
            yield inv, (run.id, f"{key} {prev} -> {k} at #{e['seq']} without {need}: dispatch "
                                f"#{f.cites[0]} {f.why or 'has no such evidence'}{hint}",
                        (e["seq"], *f.cites), False)


def _unwarranted_inv(f) -> tuple[str, bool]:
    if f.strength == "weak":
        return "REC-01", False
    if f.strength == "callback":
        return "LATE-01", False
    return "KNOW-02", True


def _moves(inv_id: str):
    def check(ix: TraceIndex) -> Iterator[Finding]:
        for inv, finding in _ledger_moves_cached(ix):
            if inv == inv_id:
                yield finding
    check.__name__ = f"_moves_{inv_id}"
    return check


def _ledger_moves_cached(ix: TraceIndex) -> list:
    moves = ix.memo.get("moves")
    if moves is None:
        moves = ix.memo["moves"] = list(_ledger_moves(ix))
    return moves


def _rec_01(ix: TraceIndex) -> Iterator[Finding]:
    yield from _moves("REC-01")(ix)
    yield from _redispatch(ix, want="weak")


# --------------------------------------------------------------------------- ownership
def _own_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for seq, cite, t, worker, what in _writes(run):
            then = knew(run, worker, seq)
            if then.w is None:
                continue
            epoch = then.epoch
            if epoch is None or _live(run, epoch, seq, t):
                continue
            ev = then.stale_evidence()
            if ev is not None:
                yield run.id, f"{worker} (epoch {epoch}) {what} at #{cite} after #{ev} showed it no longer " \
                              f"owns the run", (ev, cite), False
            elif seq in run.dispatch_at and not then.confirmed_just_before():
                prev = then.previous_call()
                yield run.id, f"{worker} (epoch {epoch}) {what} at #{cite} after its lease was lost, without " \
                              f"confirming ownership right before the send", \
                    tuple(s for s in (prev, cite) if s is not None), False


def _writes(run: RunIndex):
    """Every effect-bearing action: dispatches and knowledge-changing ledger appends, as
    (seq of the call, seq to cite, t, worker, what)."""
    out = [(d.seq, d.seq, d.t, d.worker, f"dispatched {d.service}.{d.op}") for d in run.dispatches]
    for e in run.ledger:
        if e["knowledge"] != e.get("previous"):
            call = e.get("call") if isinstance(e.get("call"), int) else e["seq"]
            out.append((call, e["seq"], e["t"], e["worker"], f"moved {e['key']} to {e['knowledge']}"))
    out.sort()
    return out


def _own_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        actions = list(_writes(run))
        actions += [(_finish_call(f), f["seq"], f["t"], f["worker"], f"finished {f['disposition']}")
                    for f in run.finishes if f.get("accepted")]
        reported: set = set()
        for seq, cite, _t, worker, what in sorted(actions):
            then = knew(run, worker, seq)
            if then.w is None or worker in reported:
                continue
            if then.epoch is None:
                reported.add(worker)
                yield run.id, f"{worker} {what} at #{cite} without ever acquiring the lease", (cite,), False


def _own_03(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        last_sv = None
        for cp in run.checkpoints:
            control = obj(dig(cp, "checkpoint", "control"))
            if control.get("lease_epoch") != cp.get("epoch"):
                yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}) names lease epoch " \
                              f"{control.get('lease_epoch')} but was written under epoch {cp.get('epoch')}", \
                    (cp["seq"],), False
            if not _live(run, cp.get("epoch"), cp["seq"], cp["t"]):
                yield run.id, f"the store accepted checkpoint v{cp['version']} (#{cp['seq']}) from epoch " \
                              f"{cp.get('epoch')}, which was not the live lease", (cp["seq"],), False
            sv = cp.get("state_version")
            if isinstance(last_sv, int) and isinstance(sv, int) and sv <= last_sv:
                yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}) has state_version {sv}, not above " \
                              f"the previous {last_sv}", (cp["seq"],), False
            last_sv = sv if isinstance(sv, int) else last_sv
        for e in run.ledger:
            then = knew(run, e["worker"], e["seq"])
            if then.w is None:
                continue
            epoch = then.epoch
            if epoch is not None and e.get("epoch") != epoch:
                yield run.id, f"ledger entry {e['key']} (#{e['seq']}) names lease epoch {e.get('epoch')} but " \
                              f"{then.worker} holds epoch {epoch}", (e["seq"],), False


def _ckpt_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.faults:
            if f.get("fault") != "invalid_checkpoint":
                continue
            problems = [p for p in f.get("problems") or () if isinstance(p, str)]
            core = [p for p in problems if p.startswith(("control.state_version", "control.owner",
                                                         "control:", "record:"))]
            text = "; ".join(core or problems)[:200]
            if core:
                yield run.id, f"checkpoint without version or owner at #{f['seq']}: {text}", (f["seq"],), True
            else:
                yield run.id, f"checkpoint rejected by the schema at #{f['seq']}: {text}", (f["seq"],), False


def _retry_03(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        by_call: dict = {}
        for ev in run.proxy_retries:
            by_call.setdefault(ev.get("call"), []).append(ev["seq"])
        for call, seqs in by_call.items():
            yield run.id, f"a proxy re-sent call #{call} {len(seqs)} time(s): the call did not declare " \
                          f"retry_owner='caller'", (call, *seqs), True
        for prev, d in _same_worker_pairs(run):
            if prev.key != d.key:
                continue
            then = knew(run, d.worker, d.seq)
            if then.appended(d.key, since=prev.seq) or then.backoff_since(prev.seq) or then.read_since(prev.seq):
                continue
            yield run.id, f"{d.worker} re-sent {d.key} at #{d.seq} right after #{prev.seq} with no ledger " \
                          f"record, backoff or read in between: an inner retry loop", (prev.seq, d.seq), True


def _retry_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        counts: dict = {}
        reported: set = set()
        for d in run.dispatches:
            if d.role == "compensation" and d.key is None:
                continue
            n = counts[d.key] = counts.get(d.key, 0) + 1
            if run.deadline is not None and d.role != "compensation" and acted_at(run, d)[1] >= run.deadline:
                yield run.id, f"{d.service}.{d.op} #{d.seq} at {ix.fmt(d.t)} is past the run's deadline " \
                              f"{ix.fmt(run.deadline)}", (d.seq,), False
            if n < 2 or d.key in reported:
                continue
            ceiling, cp_seq = _ceiling(run, d)
            if ceiling is None:
                reported.add(d.key)
                yield run.id, f"{d.key} was sent {n} times (#{d.seq}) but no checkpoint declared " \
                              f"control.budgets.attempt_ceiling", (d.seq,), False
            elif n > ceiling:
                reported.add(d.key)
                yield run.id, f"attempt {n} of {d.key} (#{d.seq}) exceeds the declared ceiling {ceiling}", \
                    (cp_seq, d.seq), False
        for prev, d in _same_worker_pairs(run):
            if prev.key != d.key:
                continue
            then = knew(run, d.worker, d.seq)
            if then.backoff_since(prev.seq) or then.read_since(prev.seq):
                continue
            if not then.appended(d.key, since=prev.seq):
                continue                         # RETRY-03 reports it as an inner retry
            yield run.id, f"{d.worker} re-sent {d.key} at #{d.seq} after #{prev.seq} without a recorded " \
                          f"backoff (clock.sleep reason 'backoff ...')", (prev.seq, d.seq), False


def _ceiling(run: RunIndex, d: Dispatch):
    for cp in reversed(run.checkpoints):
        if cp["seq"] > d.seq:
            continue
        budgets = (obj(dig(cp, "checkpoint", "control"))).get("budgets") or {}
        c = budgets.get("attempt_ceiling") if isinstance(budgets, dict) else None
        if isinstance(c, dict):
            c = c.get(d.key)
        if isinstance(c, int) and not isinstance(c, bool):
            return c, cp["seq"]
    return None, None


def _own_04(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            disp = f["disposition"]
            listed = [k for _, k in effect_items(f.get("effects"))]
            why = None
            if _CLAIM.get(disp) == "unknown" or disp == "WAITING_OPERATOR":
                why = disp
            elif any(k in _UNRESOLVED for k in listed):
                why = "an unresolved effect in its list"
            elif disp in _TERMINAL:
                open_keys = [k for k in run.ledger_keys_before(f["seq"])
                             if run.knowledge_before(k, f["seq"]) in _UNRESOLVED]
                failed = [k for k in run.ledger_keys_before(f["seq"])
                          if obj(run.ledger_by_key[k][0].get("entry")).get("kind") == "compensation"
                          and run.knowledge_before(k, f["seq"]) == "REJECTED"]
                if open_keys:
                    why = f"{open_keys[0]} unresolved in the ledger"
                elif failed:
                    why = f"the compensation {failed[0]} failed definitely"
            if why is None:
                continue
            owner = f.get("next_owner")
            if not (isinstance(owner, str) and owner.strip()):
                yield run.id, f"finish {disp} at #{f['seq']} ({why}) names no next_owner", (f["seq"],), False
            esc = [e for e in run.escalations if e["seq"] < f["seq"]]
            if not esc:
                yield run.id, f"finish {disp} at #{f['seq']} ({why}) was not escalated with a decision packet", \
                    (f["seq"],), False
                continue
            packet = esc[-1].get("packet") or {}
            missing = [s for s in _PACKET_SECTIONS if not isinstance(packet, dict) or s not in packet]
            if missing:
                yield run.id, f"the decision packet at #{esc[-1]['seq']} lacks {', '.join(missing)}", \
                    (esc[-1]["seq"], f["seq"]), False


# --------------------------------------------------------------------------- effect correctness
def _prep_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.key is None:
                yield run.id, f"{d.service}.{d.op} #{d.seq} carries no semantic key", (d.seq,), False
                continue
            entries = run.ledger_by_key.get(d.key)
            if not entries or entries[0]["seq"] > d.seq:
                yield run.id, f"{d.service}.{d.op} #{d.seq} under {d.key} was sent before any ledger entry " \
                              f"for that key", (d.seq,), False


def _key_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        groups: dict = {}
        for d in run.dispatches:
            if d.role == "compensation":
                continue
            groups.setdefault((d.service, d.op, identity(d.intent)), []).append(d)
        for ds in groups.values():
            firsts: dict = {}
            for d in ds:
                firsts.setdefault(d.key, d)
            if len(firsts) > 1:
                keys = ", ".join(str(k) for k in firsts)
                yield run.id, f"one {ds[0].op} intent was sent under {len(firsts)} keys ({keys})", \
                    tuple(d.seq for d in firsts.values()), False


def _key_02(ix: TraceIndex) -> Iterator[Finding]:
    sent: dict = {}
    recorded: dict = {}
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.key is None:
                continue
            full = identity({**d.intent, "_ph": d.intent.get("proposal_hash")})
            first = sent.setdefault((d.service, d.key), (full, d, run.id))
            if first[0] != full:
                yield run.id, f"key {d.key} was sent with a changed intent at #{d.seq} (first with another " \
                              f"intent at #{first[1].seq}{'' if first[2] == run.id else ' in ' + first[2]})", \
                    (first[1].seq, d.seq), False
                sent[(d.service, d.key)] = (full, d, run.id)
        for e in run.ledger:
            entry = obj(e.get("entry"))
            b = identity(entry.get("intent"))
            first = recorded.setdefault(e["key"], (b, e, run.id))
            if first[0] != b:
                yield run.id, f"ledger key {e['key']} recorded with a changed intent at #{e['seq']} (first at " \
                              f"#{first[1]['seq']})", (first[1]["seq"], e["seq"]), False
                recorded[e["key"]] = (b, e, run.id)


def _eff_01(ix: TraceIndex) -> Iterator[Finding]:
    groups: dict = {}
    zombie = _unfenced(ix)
    for ev in ix.effects:                       # across runs: a second run is no excuse
        port, op = ix.origin(ev)
        if _is_compensation(port, op) or ev["seq"] in zombie:
            continue
        service = ev.get("service")
        if ev.get("cause") == "duplicate_delivery" and ix.profile(service).get("idempotency") == "none":
            continue                            # the transport's duplicate; no client can prevent it
        groups.setdefault((service, op, identity(ev.get("intent"))), []).append(ev)
    for evs in groups.values():
        if len(evs) > 1:
            refs = ", ".join(f"{e['ref']} ({e.get('cause')}, {e.get('run')})" for e in evs)
            yield evs[1].get("run"), f"{len(evs)} effects for one business intent: {refs}", \
                tuple(e["seq"] for e in evs), False


def _eff_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for stream in _streams(run):
            for i, d in enumerate(stream):
                sent = sending(run, d)
                known = sent.ledger(d.key) if d.key is not None else None
                if known in PRESENT_KNOWLEDGE:
                    e = next(x for x in run.ledger_by_key[d.key] if x["knowledge"] == known)
                    yield run.id, f"{d.key} was {known} in the ledger (#{e['seq']}), yet sent again at " \
                                  f"#{d.seq}", (e["seq"], d.seq), False
                    continue
                for prev in stream[:i]:
                    if prev.seq >= sent.at:
                        break
                    f = resolve(ix, run, prev, sent.worker, sent.at, "redispatch")
                    if f.state == "present" and f.settled:
                        yield run.id, f"{d.worker} knew #{prev.seq} took effect ({f.why}), yet sent it again " \
                                      f"at #{d.seq}", (prev.seq, *f.cites, d.seq), False
                        break


def _evt_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        releases: dict = {}
        for ev in run.released:
            releases.setdefault(ev.get("ref"), []).append(ev["seq"])
        reported = set()
        for ref, seqs in releases.items():
            if len(seqs) > 1:
                reported.add(ref)
                yield run.id, f"{ref} was released {len(seqs)} times: one cancellation, several compensations", \
                    tuple(seqs), False
        keys_by_target: dict = {}
        for d in run.dispatches:
            if d.role == "compensation" and d.target not in reported:
                keys_by_target.setdefault(d.target, {}).setdefault(d.key, d.seq)
        for target, keys in keys_by_target.items():
            if len(keys) > 1:
                yield run.id, f"{len(keys)} compensation keys for {target} ({', '.join(map(str, keys))})", \
                    tuple(keys.values()), False
        comp: dict = {}
        for key, entries in run.ledger_by_key.items():
            entry = obj(entries[0].get("entry"))
            if entry.get("kind") == "compensation":
                comp.setdefault(hashable(entry.get("compensates")), []).append((key, entries[0]["seq"]))
        for orig, keys in comp.items():
            if len(keys) > 1 and not keys_by_target:
                yield run.id, f"{len(keys)} compensation entries for {orig}: " \
                              f"{', '.join(k for k, _ in keys)}", tuple(s for _, s in keys), False
        yield from _retry_admissions(run)


def _retry_admissions(run: RunIndex) -> Iterator[Finding]:
    """After WAITING_RETRY every attempt is an admission that needs a retry request of its own
    (a distinct event id), except the redo of an admitted attempt whose outcome was unknown."""
    waits = [f["seq"] for f in run.finishes if f.get("accepted") and f["disposition"] == "WAITING_RETRY"]
    if not waits:
        return
    # a send in the fencing gap is a zombie's, not an admitted attempt
    primary = [d for d in run.dispatches if d.role == "primary" and not stalled_send(run, d)]
    requests = [(ev["seq"], ev["event"].get("event_id")) for ev in run.inbox if ev["event"].get("type") == "retry"]
    used = 0
    for k, start in enumerate(waits):
        stop = waits[k + 1] if k + 1 < len(waits) else None
        period = [d for d in primary if d.seq > start and (stop is None or d.seq < stop)]
        for i, d in enumerate(period):      # waiting again with no attempt (a restarted worker) admits nothing
            if i:
                r = period[i - 1].result
                if not (r is not None and r["delivered"] and not r["ok"] and (r.get("error") or {}).get("definite")):
                    continue                # the admitted attempt redone after an unknown outcome
            ids = {rid for seq, rid in requests if seq < d.seq}
            if len(ids) > used:
                used += 1
                continue
            if i == 0:
                yield run.id, f"attempt #{d.seq} after WAITING_RETRY #{start} has no retry request of its own " \
                              f"({len(ids)} distinct retry event(s) for {used + 1} admission(s))", (start, d.seq), False
            else:
                yield run.id, f"one retry request admitted two attempts (#{period[i - 1].seq} failed definitely, " \
                              f"#{d.seq} tried again)", (period[i - 1].seq, d.seq), False
            break


def _auth_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.role == "secondary" or (d.role == "primary" and run.approval == "none"):
                continue
            phash = d.intent.get("proposal_hash", d.args.get("proposal_hash"))
            bound = [a for a in run.approvals if a["seq"] < d.seq and a.get("proposal_hash") == phash
                     and a.get("action") == d.op]
            if not bound:
                yield run.id, f"{d.service}.{d.op} #{d.seq} has no approval bound to proposal hash {phash!r}", \
                    (d.seq,), False
                continue
            reasons = []
            seq, t = acted_at(run, d)
            for a in reversed(bound):
                if a.get("expires_at", 0) <= t:
                    reasons.append((a["seq"], f"approval {a.get('approval_id')} expired at {ix.fmt(a['expires_at'])}"))
                elif _between(run.revokes, a["seq"], seq):
                    reasons.append((a["seq"], f"approval {a.get('approval_id')} was revoked"))
                elif _between(run.capability_changes, a["seq"], seq):
                    reasons.append((a["seq"], f"the capability version changed after approval "
                                              f"{a.get('approval_id')}"))
                else:
                    reasons = []
                    break
            if reasons:
                seq, why = reasons[0]
                yield run.id, f"{d.service}.{d.op} #{d.seq} without a live approval: {why}", (seq, d.seq), False


def _comp_01(ix: TraceIndex) -> Iterator[Finding]:
    yield from _moves("COMP-01")(ix)
    for run in ix.runs.values():
        originals = {k for k, es in run.ledger_by_key.items() if dig(es[0], "entry", "kind") == "effect"}
        originals |= {d.key for d in run.dispatches if d.role != "compensation" and d.key is not None}
        for d in run.dispatches:
            if d.role == "compensation" and (d.key is None or d.key in originals):
                yield run.id, f"release #{d.seq} reuses the original effect's key {d.key}: compensation " \
                              f"is a separate effect with its own key", (d.seq,), True
        for key, entries in run.ledger_by_key.items():
            entry = obj(entries[0].get("entry"))
            if entry.get("kind") == "compensation" and hashable(entry.get("compensates")) not in run.ledger_by_key:
                yield run.id, f"compensation entry {key} (#{entries[0]['seq']}) does not link the effect it " \
                              f"compensates", (entries[0]["seq"],), False
        records = [(cp["seq"], dig(cp, "checkpoint", "effects"), f"checkpoint v{cp['version']}")
                   for cp in run.checkpoints]
        records += [(f["seq"], f.get("effects"), f"finish {f['disposition']}")
                    for f in run.finishes if f.get("accepted")]
        for seq, items, what in records:
            for key, k in effect_items(items):
                if key not in run.ledger_by_key:
                    continue
                known = run.knowledge_before(key, seq)
                if known in PRESENT_KNOWLEDGE and k not in _KEPT_AFTER_CONFIRM:
                    yield run.id, f"{what} (#{seq}) reports the effect {key} as {k} although the ledger " \
                                  f"has it {known}", (seq,), True


def _hist_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.faults:
            if f.get("fault") == "invalid_effect_entry":
                text = "; ".join(p for p in f.get("problems") or () if isinstance(p, str))[:200]
                yield run.id, f"effect entry rejected by the schema at #{f['seq']}: {text}", (f["seq"],), False
        prev = None
        for cp in run.checkpoints:
            keys = set(effect_keys(dig(cp, "checkpoint", "effects")))
            if prev is not None:
                for key in effect_keys(dig(prev, "checkpoint", "effects")):
                    if key not in keys and run.knowledge_before(key, cp["seq"]) in _UNRESOLVED:
                        yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}) dropped the unresolved " \
                                      f"effect {key} that v{prev['version']} carried", (prev["seq"], cp["seq"]), False
            prev = cp


# --------------------------------------------------------------------------- disposition
def _disp_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        if run.disposition() is None and run.budget_exhausted is not None and not _blocking_faults(run):
            yield run.id, f"the platform gave up restarting after {run.budget_exhausted.get('workers')} workers " \
                          f"without a terminal or waiting disposition", (run.budget_exhausted["seq"],), False


def _blocking_faults(run: RunIndex) -> list[dict]:
    return [f for f in run.faults if f.get("fault") not in RECORD_FAULTS and not _unjudgeable(f)]


def _unjudgeable(fault: dict) -> bool:
    return fault.get("fault") in WALL_CLOCK_FAULTS or \
        str(fault.get("message", "")).startswith("cannot start adapter command")


def _adapter_fault(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in _blocking_faults(run):
            yield run.id, f"{f.get('worker')}: {f.get('fault')}: {str(f.get('message', ''))[:160]}", \
                (f["seq"],), False


def _cancel_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.role != "primary":
                continue
            seen = knew(run, d.worker, d.seq).cancel()
            if seen is not None:
                yield run.id, f"{d.service}.{d.op} #{d.seq} is new work after the cancellation known at #{seen}", \
                    (seen, d.seq), False


def _cancel_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        # the run was terminal before its writer could know of any cancellation: a later
        # cancellation records intent but does not rewrite history
        terminal = next((cp for cp in run.checkpoints if cp["state"] in _TERMINAL), None)
        settled = terminal is not None and knew(run, terminal["worker"], terminal["seq"]).cancel() is None
        for f in run.finishes:
            disp = f["disposition"]
            if not f.get("accepted") or disp not in _TERMINAL:
                continue
            call = _finish_call(f)
            if disp.startswith("CANCELLED_"):
                if run.cancel_delivered(call) is None:
                    yield run.id, f"{disp} at #{f['seq']} but no cancellation was ever received", (f["seq"],), False
            else:
                seen = knew(run, f["worker"], call).cancel()
                if settled and terminal["seq"] < call and terminal["state"] == disp:
                    continue
                if seen is not None:
                    yield run.id, f"{disp} at #{f['seq']} hides the cancellation known at #{seen}", \
                        (seen, f["seq"]), False


def _disp_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            if not f.get("accepted") or f["disposition"] not in _TERMINAL:
                continue
            listed = dict(effect_items(f.get("effects")))
            problems = []
            for key in run.ledger_keys_before(f["seq"]):
                known = run.knowledge_before(key, f["seq"])
                if key not in listed:
                    problems.append(f"{key} ({known}) is missing")
                elif listed[key] != known:
                    problems.append(f"{key} is listed {listed[key]}, the ledger says {known}")
            if problems:
                yield run.id, f"finish {f['disposition']} at #{f['seq']}: {'; '.join(problems[:3])}", \
                    (f["seq"],), False


def _truth_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            disp = f["disposition"]
            claim = _CLAIM.get(disp)
            if not f.get("accepted") or claim in (None, "unknown"):
                continue
            then = knew(run, f["worker"], _finish_call(f))
            keys = run.primary_keys(then.at)
            if claim == "present":
                if any(then.ledger(k) in ("CONFIRMED", "COMPENSATION_PROPOSED") for k in keys):
                    continue
                best = None
                for k in keys:
                    p = presence(ix, run, k, then.worker, then.at)
                    if p.state == "present" and p.settled:
                        best = p
                        break
                if best is None:
                    yield run.id, f"{disp} at #{f['seq']} claims the effect exists without a confirmed ledger " \
                                  f"entry or an authoritative observation: an exactly-once claim", (f["seq"],), True
                continue
            for k in keys:
                held = then.ledger(k)
                if held == "COMPENSATED" or (held == "REJECTED" and evidence.warranted_absence(
                        ix, run, then.latest_entry(k))):
                    continue        # a recorded absence counts only when that record was warranted
                ok, why = absence(ix, run, k, then.worker, then.at, "claim")
                if not ok:
                    yield run.id, f"{disp} at #{f['seq']} claims no effect, but dispatch #{why.cites[0]} of {k} " \
                                  f"is unresolved ({why.why or 'no evidence of absence'})", \
                        (why.cites[0], f["seq"]), False
                    break


def _term_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        prev = "INTAKE"
        terminal_at = None
        terminal_state = None
        for cp in run.checkpoints:
            state = cp["state"]
            if terminal_at is not None:
                yield run.id, f"checkpoint {state} at #{cp['seq']} after the terminal record at #{terminal_at}", \
                    (terminal_at, cp["seq"]), False
                break
            if not RUN_GRAPH.has_edge(prev, state):
                yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}): {prev} -> {state} is not a legal " \
                              f"run-state transition", (cp["seq"],), False
            prev = state
            if state in _TERMINAL:
                terminal_at, terminal_state = cp["seq"], state
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            if terminal_state is not None and f["seq"] > terminal_at and f["disposition"] != terminal_state:
                yield run.id, f"finish {f['disposition']} at #{f['seq']} contradicts the terminal checkpoint " \
                              f"{terminal_state} at #{terminal_at}", (terminal_at, f["seq"]), False
            if f["disposition"] in _TERMINAL and (terminal_at is None or f["seq"] < terminal_at):
                terminal_at = f["seq"]
        if terminal_at is None:
            continue
        for e in run.ledger:
            if e["seq"] <= terminal_at or e["knowledge"] == e.get("previous"):
                continue
            then = knew(run, e["worker"], e["seq"])
            epoch = then.epoch
            if (epoch is not None and _live(run, epoch, e["seq"], e["t"])) or \
                    (then.w is not None and then.stale_evidence() is not None):
                yield run.id, f"{e['key']} moved to {e['knowledge']} at #{e['seq']} after the run was terminal " \
                              f"(#{terminal_at})", (terminal_at, e["seq"]), False
                break
        # A worker started after the terminal record (woken by a later event: a cancellation,
        # a callback, a duplicate) may only replay it: no effect call, no other disposition.
        recorded = terminal_state or next((f["disposition"] for f in run.finishes if f["seq"] == terminal_at), None)
        late = {w.name for w in run.workers.values() if w.start_seq > terminal_at}
        for d in run.dispatches:
            if d.worker in late:
                yield run.id, f"{d.worker} started after the run was terminal ({recorded} at #{terminal_at}) and " \
                              f"sent {d.service}.{d.op} at #{d.seq}: an event after terminal records intent and " \
                              f"rewrites no history", (terminal_at, d.seq), False
                break
        for f in run.finishes:
            if f["worker"] in late and f["disposition"] != recorded:
                yield run.id, f"{f['worker']} started after the run was terminal ({recorded} at #{terminal_at}) " \
                              f"and reported {f['disposition']} at #{f['seq']}", (terminal_at, f["seq"]), False
                break


# --------------------------------------------------------------------------- expectations
def _exp_disposition(ix: TraceIndex) -> Iterator[Finding]:
    allowed = (ix.header.get("expect") or {}).get("dispositions")
    if not allowed:
        return
    for run in ix.runs.values():
        disp = run.disposition()
        if disp is not None and disp not in allowed:
            last = [f["seq"] for f in run.finishes if f.get("accepted")]
            yield run.id, f"disposition {disp} is not one the scenario allows ({', '.join(allowed)})", \
                tuple(last[-1:]), False


def _exp_effects(ix: TraceIndex) -> Iterator[Finding]:
    want = (ix.header.get("expect") or {}).get("remote_effects")
    if want is None:
        return
    forward = {(run.service, run.operation) for run in ix.runs.values()}
    per_run: dict = {rid: [] for rid in ix.runs}
    total = []
    for ev in ix.effects:
        if ix.origin(ev) in forward:
            total.append(ev["seq"])
            per_run.setdefault(ev.get("run"), []).append(ev["seq"])
    if isinstance(want, bool):
        return
    if isinstance(want, int):
        if len(total) != want:
            yield None, f"{len(total)} remote effect(s) committed; the scenario expects {want}", tuple(total), False
    elif isinstance(want, dict):
        lo, hi = want.get("min"), want.get("max")
        if lo is not None or hi is not None:
            if (lo is not None and len(total) < lo) or (hi is not None and len(total) > hi):
                yield None, f"{len(total)} remote effect(s) committed; the scenario expects between " \
                            f"{lo if lo is not None else 0} and {hi if hi is not None else 'any'}", tuple(total), False
        for rid, n in want.items():
            if rid in per_run and isinstance(n, int) and len(per_run[rid]) != n:
                yield rid, f"{len(per_run[rid])} remote effect(s) committed by {rid}; the scenario expects {n}", \
                    tuple(per_run[rid]), False


def _evidence_items(ix: TraceIndex, ev: dict) -> tuple[str, ...]:
    """The expect.evidence items one trace event is an instance of."""
    kind = ev["kind"]
    if kind == "result" and ev.get("delivered"):
        call = ix.calls.get(ev.get("call"))
        if call is not None:
            return kind, f"{call['port']}.{call['op']}"
    elif kind == "ledger":
        return kind, f"ledger:{ev['knowledge']}"
    elif kind == "checkpoint":
        return kind, f"checkpoint:{ev['state']}"
    elif kind == "finish" and ev.get("accepted"):
        return kind, f"finish:{ev['disposition']}"
    return (kind,)


def _exp_absent(ix: TraceIndex) -> Iterator[Finding]:
    banned = {item for item in (ix.header.get("expect") or {}).get("absent") or () if isinstance(item, str)}
    if not banned:
        return
    for ev in ix.events:
        for item in _evidence_items(ix, ev):
            if item in banned:
                banned.discard(item)
                yield ev.get("run"), f"the scenario forbids evidence {item!r}, which appears at #{ev['seq']}", \
                    (ev["seq"],), False


def _exp_disposition_at(ix: TraceIndex) -> Iterator[Finding]:
    want = (ix.header.get("expect") or {}).get("disposition_at")
    if not isinstance(want, dict) or not want.get("dispositions"):
        return
    at, allowed = want.get("at_ms"), want["dispositions"]
    for run in ix.runs.values():
        held = [f for f in run.finishes if f.get("accepted") and f["t"] <= at]
        if not held:
            yield run.id, f"no disposition was recorded by {ix.fmt(at)}; the scenario expects one of " \
                          f"{', '.join(allowed)}", (), False
        elif held[-1]["disposition"] not in allowed:
            yield run.id, f"the disposition recorded at {ix.fmt(at)} was {held[-1]['disposition']}, not one of " \
                          f"{', '.join(allowed)}", (held[-1]["seq"],), False


def _exp_evidence(ix: TraceIndex) -> Iterator[Finding]:
    wanted = (ix.header.get("expect") or {}).get("evidence")
    if not wanted:
        return
    missing = {item for item in wanted if isinstance(item, str)}
    for ev in ix.events:
        if not missing:
            break
        missing.difference_update(_evidence_items(ix, ev))
    for item in wanted:
        if item in missing:
            missing.discard(item)
            yield None, f"the scenario requires evidence {item!r}, which the trace does not contain", (), False


# --------------------------------------------------------------------------- the tables
def _inv(id, statement, category, safety, auto_fail, check, computed, evidence) -> Invariant:
    return Invariant(id=id, statement=statement, category=category, safety=safety, auto_fail=auto_fail,
                     check=check, computed=computed, evidence=evidence)


INVARIANTS: tuple[Invariant, ...] = (
    # classification
    _inv("TRUTH-01", "Every claim is true against ground truth at the horizon.", "classification", True, None,
         _truth,
         "Each ledger move into CONFIRMED / REJECTED / COMPENSATED, each accepted finish's effect claim "
         "(DISPOSITION_EFFECT_CLAIM: present / absent) and each CONFIRMED / REJECTED / COMPENSATED item of "
         "its effects list is compared with the remote lane at the end of the trace: CONFIRMED needs a "
         "commit under the key (or the named remote_ref, whose intent must match the run's on every "
         "business field); REJECTED needs no commit under the key, ever, late arrivals included; "
         "COMPENSATED needs a release of the original; an absence claim is false when an effect of the "
         "run's operation caused by the run remains unreleased, a presence claim when none of its own or of "
         "its intent under a key it sent or prepared remains unreleased at the time of the claim (other "
         "actors never count; a later release by another run does not rewrite a true record).",
         "the claim (ledger or finish event) and the remote commits that contradict it"),
    _inv("EVID-01", "A resolved ledger entry names its evidence, and a confirmation its remote reference.",
         "classification", False, None, _evid_01,
         "Every ledger append that moves a key into CONFIRMED, REJECTED or COMPENSATED must carry a "
         "non-empty evidence, reconciliation or observations list; a CONFIRMED effect entry also a "
         "remote_ref.",
         "the ledger append"),
    _inv("RETRY-01", "No blind retry after an ambiguous outcome.", "classification", True,
         "blind ambiguous retry", _retry_01,
         "For every dispatch, each earlier dispatch of the same effect (same key or same business intent; "
         "for a release, the same target) must be settled for the dispatching worker: its own answer was "
         "an accepted response or a definite error, the ledger recorded PROPOSED/REJECTED after it, or the "
         "worker saw an authoritative negative read after it. A retry with no read at all after a timeout, "
         "a 5xx, a lost answer or a SENT_UNKNOWN entry found on recovery is blind. Another worker's request in "
         "the fencing gap (sent right after an ownership confirmation by a worker whose lease then lapsed, "
         "or stalled in front of its send until its lease lapsed) is settled for others by a reconciliation "
         "since that worker's last confirmation that reaches its lease expiry: no read can see a request "
         "that has not left. Such a stalled send is itself judged on what its worker knew before that "
         "confirmation.",
         "the ambiguous dispatch, the retry"),
    _inv("CLS-01", "Validation, permission, changed-intent and already-exists refusals are not retried.",
         "classification", False, None, _cls_01,
         "After a delivered validation_failed, permission_denied, intent_mismatch or already_exists answer "
         "to a dispatch, no later dispatch under the same key by the worker that saw it, nor by any worker "
         "once that worker recorded the key in the ledger after the refusal (a replacement that never "
         "learnt of it may reconcile and send again).",
         "the refusal, the retry"),
    _inv("CLS-02", "Throttling is honoured: a throttled effect is retried only after its retry-after.",
         "classification", False, None, _cls_02,
         "After a delivered throttled answer with retry_after_ms, the next dispatch under the key by the "
         "worker that saw it, or by any later worker once that worker recorded the key in the ledger after "
         "the answer (a restarted worker inherits the recorded retry-after), starts at least that long "
         "after the answer.",
         "the throttled answer, the early retry"),
    _inv("AUTH-02", "A permission denial is not answered with another credential.", "classification", True,
         None, _auth_02,
         "Every effect or compensation dispatch acts as the run's principal (intent.principal equals the "
         "principal of the run's intent).",
         "the dispatch"),
    _inv("MIG-01", "An incompatible checkpoint is migrated, pinned or stopped before any effect; migration "
         "issues no effect.", "classification", True, None, _mig_01,
         "A worker whose env (schema_version, canonicalization_version, and policy_version or "
         "capability_version where the checkpoint's contract names them: a code change that alters "
         "proposal hashing, capability semantics or authority checks changes one of these) differs from the contract of the "
         "checkpoint it works from (the latest at its start, or the latest it has loaded since: one that "
         "another worker already migrated is compatible) may write only MIGRATING, PINNED, "
         "WAITING_OPERATOR or terminal checkpoints until it wrote MIGRATING, and dispatches nothing before "
         "a non-MIGRATING checkpoint follows its MIGRATING one (best-effort deserialization is a "
         "violation). No dispatch while a "
         "MIGRATING checkpoint is the latest; a MIGRATING checkpoint carries a migration record (from, to).",
         "the checkpoint the worker started from, the offending checkpoint or dispatch"),
    _inv("PIN-01", "A pin names the old versions it pins and keeps them.", "classification", True, None,
         records.pin_01,
         "An accepted PINNED finish carries packet.pinned_env with the schema_version and "
         "canonicalization_version of the checkpoint the run is pinned at (the latest before the finish), "
         "and no later checkpoint of the run changes them before a MIGRATING one.",
         "the checkpoint and the finish, or the finish and the checkpoint that changed the versions"),
    _inv("KNOW-01", "Knowledge moves only along the ledger's transition table.", "classification", True, None,
         _moves("KNOW-01"),
         "Each ledger append's (previous, knowledge) pair must be an edge of KNOWLEDGE_TRANSITIONS, held as "
         "a networkx graph (a first entry must be PROPOSED). Moves out of a confirmed original are "
         "judged by COMP-01.",
         "the ledger append"),
    _inv("KNOW-02", "Knowledge is never upgraded without the evidence the transition requires.",
         "classification", True, "exactly-once claim", _moves("KNOW-02"),
         "Each move named in KNOWLEDGE_EVIDENCE is checked against what the appending worker had observed "
         "(or the durable ledger): CONFIRMED needs an accepted response or an authoritative positive read "
         "(of a key the run prepared but never sent, too: another run of the same intent may have sent it); "
         "REJECTED needs every attempt settled absent (definite error, or an authoritative negative read "
         "fresh enough and past the documented late-delivery bound; for another worker's request in the "
         "fencing gap, reaching that worker's lease expiry); SENT_UNKNOWN -> PROPOSED needs every attempt settled absent; COMPENSATED / back to CONFIRMED need the compensation entry CONFIRMED / "
         "REJECTED. A deadline passing is not evidence. A CONFIRMED with no evidence at all is an "
         "exactly-once claim (automatic failure).",
         "the ledger append and the dispatch left unsettled"),
    _inv("LATE-01", "A late callback is evidence only.", "classification", True, None, _moves("LATE-01"),
         "A knowledge upgrade whose only support is a completion callback seen in the inbox (callbacks are "
         "not authoritative reads) is a violation.",
         "the ledger append and the poll that delivered the callback"),
    # ownership
    _inv("OWN-02", "Only a lease holder dispatches, moves knowledge or finishes.", "ownership", True, None,
         _own_02,
         "Every dispatch, knowledge-changing ledger append and accepted finish comes from a worker that "
         "acquired the lease before it.",
         "the first such action of each lease-less worker"),
    _inv("OWN-03", "Durable records name their true owner epoch, and versions only advance.", "ownership", True,
         None, _own_03,
         "Each accepted checkpoint's control.lease_epoch equals the epoch it was written under, that epoch "
         "was the live lease (the store's own fencing), and control.state_version strictly increases; each "
         "ledger entry's lease_epoch is its writer's epoch.",
         "the checkpoint or ledger append"),
    _inv("CKPT-01", "Every checkpoint carries a version and an owner.", "ownership", True,
         "checkpoint without version or owner", _ckpt_01,
         "Every invalid_checkpoint fault is a violation; one whose problems name control.state_version or "
         "control.owner (or no control group at all) is an automatic failure.",
         "the adapter_fault event"),
    _inv("OWN-01", "Stale workers are fenced: confirm ownership right before a send, stop on evidence of loss.",
         "ownership",
         True, None, _own_01,
         "A dispatch or knowledge-changing ledger append by a worker whose epoch is not the live lease, after "
         "that worker had observed evidence of losing it since its last acquisition (a stale_epoch, "
         "lease_held or fenced error; a clock reading past its known lease expiry; a lease read or a loaded "
         "checkpoint naming a newer epoch); and a dispatch by such a worker whose call right before the send "
         "was not a successful ownership confirmation (lease acquire/renew, checkpoint write, ledger append: "
         "both stores fence by epoch). A worker that "
         "confirmed ownership and stalled in the send itself is not counted, and its commit is not held "
         "against the new owner's claims (a note records it): only a service with fencing can stop it. "
         "The ledger and the checkpoint store fence stale epochs themselves (ledger_rejected, "
         "checkpoint_rejected), so in a crashlab trace what a stale worker can still do is send.",
         "the evidence of lost ownership, the action"),
    _inv("FENCE-01", "A fencing service receives the sender's current lease epoch as its fence.", "ownership",
         True, None, records.fence_01,
         "Every effect or compensation dispatch to a service whose profile declares fencing: true carries "
         "args.fence equal to the lease epoch its worker last acquired (no fence, a constant or an inherited "
         "epoch is a violation even when the service's own fencing happens to stop the write).",
         "the dispatch"),
    _inv("RETRY-03", "One retry owner: no inner client retry, no proxy retry.", "ownership", True,
         "two retry owners", _retry_03,
         "A proxy_retry on the remote lane (the call did not declare retry_owner='caller'), or one worker "
         "sending the same key twice in a row with no ledger record, no backoff sleep and no read in between "
         "(a retry loop below the worker's own).",
         "the call and the proxy retries, or the two dispatches"),
    _inv("RETRY-02", "Attempts stay within the declared ceiling and deadline, with backoff recorded.",
         "ownership", False, None, _retry_02,
         "A second attempt under a key needs control.budgets.attempt_ceiling declared in a checkpoint "
         "before it, and the count never exceeds it; no effect dispatch at or after the run's deadline (a "
         "worker that stalled after it last read the clock is judged at that reading); "
         "one worker's consecutive attempts of a key are separated by clock.sleep(reason 'backoff ...') or "
         "a read (a new worker counts as the separation).",
         "the dispatch and the checkpoint with the ceiling"),
    _inv("JIT-01", "Every backoff draws its jitter from random.draw.", "ownership", False, None, records.jit_01,
         "Each clock.sleep whose reason starts with 'backoff' follows a random.draw by the same worker "
         "since its previous backoff sleep (or its start): one draw per backoff, so the jitter is seeded "
         "and recorded.",
         "the backoff sleep"),
    _inv("OWN-04", "Every unresolved state names an accountable next owner and escalates a decision packet.",
         "ownership", False, None, _own_04,
         "An accepted finish that is *_EFFECT_UNKNOWN or WAITING_OPERATOR, lists an unresolved effect, "
         "ends terminal while the ledger holds an unresolved key, or ends terminal after a compensation "
         "failed definitely (its entry REJECTED: AR-08 trace 8, mark effects remaining and escalate), must "
         "name next_owner and follow an "
         "operator.escalate whose packet has header, effects, authority, compatibility, budget and "
         "recommended.",
         "the finish and the escalation"),
    # effect correctness
    _inv("PKT-01", "A decision packet names its owner, the ledger's effects, the deadline and a legal action.",
         "ownership", False, None, records.pkt_01,
         "Every operator.escalate packet names next_owner; its effects list holds every key of the run's "
         "ledger with the knowledge the ledger held at that moment, and nothing else; its budget panel has a "
         "deadline (null when there is none); recommended.action is given, and is legal from the recorded "
         "state: RECONCILE names as query an identifying read the service offers (lookup needs lookup "
         "by_key, search a lookup other than none, get_version / wait_job a registry) and needs an "
         "unresolved key; COMPENSATE needs a confirmed effect on a service that can release; STOP says "
         "whether an effect remains or is unknown.",
         "the escalation"),
    _inv("PREP-01", "Prepare before dispatch: every effect call follows a ledger entry for its key.",
         "effect_correctness", True, None, _prep_01,
         "Every dispatch carries a semantic key that has a ledger entry appended before the call.",
         "the dispatch"),
    _inv("PREP-02", "Every send follows its own SENT_UNKNOWN entry.", "effect_correctness", True, None,
         records.prep_02,
         "Every dispatch under a key follows a SENT_UNKNOWN ledger append of that key by the dispatching "
         "worker, made after that worker's previous dispatch of the key: each attempt, not only the first, is "
         "recorded as possibly sent before it leaves.",
         "the dispatch"),
    _inv("KEY-01", "One stable key per intent across attempts and workers.", "effect_correctness", True, None,
         _key_01,
         "All non-compensation dispatches of one business intent in a run use the same key (a key derived "
         "from an attempt number or a timestamp shows up as differing keys).",
         "the first dispatch under each key"),
    _inv("EFF-01", "No duplicate effect for one business intent.", "effect_correctness", True, None, _eff_01,
         "More than one commit on the remote lane caused by the runs (adapter, proxy retry, late arrival) "
         "for one business intent (every field but the proposal hash) is a violation, across runs too: a "
         "resubmitted intent in a second run is no excuse. A duplicate delivery by the transport to a "
         "service without idempotency is the transport's, not the adapter's.",
         "the commits"),
    _inv("EFF-02", "No redispatch of an effect already known to exist.", "effect_correctness", True, None,
         _eff_02,
         "No dispatch under a key the ledger already holds CONFIRMED / COMPENSATION_PROPOSED / COMPENSATED, or "
         "after the dispatching worker saw an accepted response or a positive read for an earlier attempt "
         "(a response is replayed from the ledger, never regenerated by repeating the effect). A stale "
         "worker that confirmed ownership right before the send and stalled is judged on what existed "
         "before that confirmation.",
         "the evidence of the effect, the redispatch"),
    _inv("EVT-01", "A duplicate event causes one transition.", "effect_correctness", True, None, _evt_01,
         "One original is released at most once and gets at most one compensation key; after WAITING_RETRY, "
         "each admitted attempt needs its own retry request (distinct event id) and one request admits one "
         "attempt: every attempt after a WAITING_RETRY is an admission that needs one more distinct retry "
         "request delivered before it, except the redo of an admitted attempt whose outcome was unknown. "
         "Waiting again with no attempt in between (a restarted worker) admits nothing, and a send in the "
         "fencing gap (a zombie's) is no attempt of the owner's.",
         "the releases, compensation dispatches or retry admissions"),
    _inv("EVT-02", "A duplicate event gets an auditable disposition and causes no transition.",
         "effect_correctness", False, None, records.evt_02,
         "For every event id delivered more than once, once a worker's poll returned the later delivery: "
         "some accepted checkpoint written after that poll records its disposition in evidence (an object "
         "naming the event_id, or keyed by it, that holds the duplicate's inbox seq); and the worker that "
         "saw a duplicate intake neither validates it again (a VALIDATED checkpoint once the run was past "
         "it, resumption from MIGRATING / PINNED / WAITING_OPERATOR excepted) nor requests approval again "
         "for a proposal hash whose request it made and saw accepted is still unanswered.",
         "the duplicate delivery, the poll, and the checkpoint or the second transition"),
    _inv("KEY-02", "A key never carries a changed intent.", "effect_correctness", True, None, _key_02,
         "No key is sent with two different intents (proposal hash included), in one run or across runs "
         "(a key that omits a field such as the tenant collides), and no ledger key is recorded with two "
         "business intents.",
         "the first use and the changed use"),
    _inv("KEY-03", "A key found bound to other parameters is an integrity error: stop and escalate.",
         "effect_correctness", False, None, records.key_03,
         "After a delivered read returned a record under a key the run sent whose parameters differ from "
         "the run's intent on a business field (the same key with another intent), the worker that read it "
         "sends nothing more under that key, and an operator.escalate precedes the run's next accepted "
         "finish.",
         "the read and the later send, or the read and the finish"),
    _inv("AUTH-01", "No effect without a live approval bound to its proposal hash.", "effect_correctness",
         True, None, _auth_01,
         "At each effect or compensation dispatch (runs with approval mode none excepted for their own "
         "operation) an approval_granted for the dispatch's proposal hash and operation exists, unexpired at "
         "dispatch time, not revoked and with no capability change since (a worker that stalled after it last "
         "read the clock is judged at that reading: the stall, not the worker, made it late).",
         "the approval and the dispatch"),
    _inv("REC-01", "Ambiguity is resolved only by an authoritative read that identifies the effect.",
         "effect_correctness", True, None, _rec_01,
         "A knowledge move or a retry whose only support is a read that cannot settle it: eventually "
         "consistent and older than the send, before the documented late-delivery bound, past the "
         "provider's key retention, a lookup on a service without a key index, a record whose intent differs "
         "on some field, a job still running, an already_exists answer.",
         "the ledger append or retry and the read"),
    _inv("COMP-01", "Compensation is a separate effect; the original is never rewritten.",
         "effect_correctness", True, "compensation as rollback", _comp_01,
         "A confirmed original's ledger history never moves back (CONFIRMED -> REJECTED / PROPOSED ...); no "
         "checkpoint or finish reports it as never having happened; a release uses its own key; compensation "
         "entries link the effect they compensate, and an original moves to COMPENSATION_PROPOSED only "
         "with such an entry.",
         "the rewriting append, record or release"),
    _inv("HIST-01", "Effect history is preserved.", "effect_correctness", True, None, _hist_01,
         "Every effect entry satisfies the ledger schema, and no checkpoint drops an unresolved effect key "
         "that the previous checkpoint carried.",
         "the adapter_fault or the two checkpoints"),
    # disposition
    _inv("DISP-01", "Every run ends in a terminal disposition or a durable waiting state.", "disposition",
         False, None, _disp_01,
         "A run without an accepted terminal or waiting finish after the platform exhausted its restart "
         "budget (a run still active at the horizon is inconclusive instead).",
         "the restart_budget_exhausted event"),
    _inv("ADAPTER-FAULT", "The adapter never raises, hangs or breaks the port contract.", "disposition", False,
         None, _adapter_fault,
         "Every adapter_fault that ends a worker (exception, not_a_port, unhandled_port_error, garbage, died, "
         "step_budget, no_finish, ...). Faults decided by a wall-clock guard (step_timeout, no_reply) or an "
         "adapter command that cannot start make the verdict unknown instead.",
         "the adapter_fault event"),
    _inv("CANCEL-01", "No new effect after cancellation was observed.", "disposition", True, None, _cancel_01,
         "No dispatch of the run's operation by a worker that saw a cancel event in a poll before it, or "
         "that started after a cancel was already in the durable inbox. Compensation is allowed.",
         "the cancellation evidence, the dispatch"),
    _inv("CANCEL-02", "Cancellation is visible in the disposition.", "disposition", True, None, _cancel_02,
         "A CANCELLED_* finish needs a cancel event received before it; a terminal finish by a worker that "
         "knew of a cancellation must be CANCELLED_*, unless it repeats a terminal checkpoint written by a "
         "worker that did not know of any cancellation when it wrote it (a cancellation that reaches a "
         "terminal run records intent but does not rewrite history).",
         "the cancellation evidence, the finish"),
    _inv("DISP-02", "A terminal finish lists every effect with its ledger knowledge.", "disposition", False,
         None, _disp_02,
         "Every semantic key in the run's ledger appears in the terminal finish's effects with the knowledge "
         "the ledger holds at that moment.",
         "the finish"),
    _inv("TRUTH-02", "Finish claims are warranted; an unknown effect stays unknown.", "disposition", True,
         "exactly-once claim", _truth_02,
         "A present claim (SUCCEEDED, *_EFFECT_REMAINS) needs the ledger CONFIRMED / COMPENSATION_PROPOSED "
         "or an accepted response / authoritative positive read seen by the finishing worker; without it, an "
         "exactly-once claim. An absent claim (*_NO_EFFECT) needs every attempt of the run's effect settled "
         "absent (ledger COMPENSATED, a ledger REJECTED that was itself warranted, a definite error, an "
         "authoritative negative read past the late-delivery bound): never a ledger entry recorded without "
         "that evidence.",
         "the finish and the unsettled dispatch"),
    _inv("TERM-01", "Terminal is terminal; run states move only along the transition table.", "disposition",
         True, None, _term_01,
         "Consecutive accepted checkpoints follow RUN_TRANSITIONS (networkx graph, starting from INTAKE); "
         "nothing is checkpointed after a terminal checkpoint or finish, a finish does not contradict a "
         "terminal checkpoint, and no owner (or worker that knew it was stale) changes ledger knowledge "
         "after the run was terminal. A worker started after the terminal record (the platform wakes one "
         "for every later delivery: a cancellation after success, a late callback, a duplicate) makes no "
         "effect call and reports only the recorded disposition.",
         "the terminal record and the later change"),
)

#: Scenario expectations (the header's ``expect``): extra assertions on top of the invariants.
EXPECTATIONS: tuple[Invariant, ...] = (
    _inv("EXP-DISPOSITION", "The run ends in a disposition the scenario allows.", "disposition", False, None,
         _exp_disposition,
         "expect.dispositions lists the allowed final dispositions (terminal or waiting); a run that has "
         "one outside the list is a violation (a run with none is inconclusive).",
         "the last accepted finish"),
    _inv("EXP-EFFECTS", "The services hold the number of effects the scenario expects.", "effect_correctness",
         False, None, _exp_effects,
         "expect.remote_effects counts commits of each run's own operation caused by the runs (other actors "
         "excluded, releases excluded): an integer for the total, {min, max}, or {run id: n}.",
         "the commits"),
    _inv("EXP-EVIDENCE", "The trace contains the evidence the scenario requires.", "classification", False,
         None, _exp_evidence,
         "expect.evidence lists items that must occur: 'port.op' (a delivered call, e.g. "
         "'reservation.lookup'), 'ledger:KNOWLEDGE', 'checkpoint:STATE', 'finish:DISPOSITION', or an "
         "event kind (e.g. 'escalation', 'late_arrival').",
         "none (the evidence is what is missing)"),
    _inv("EXP-ABSENT", "The trace holds none of the evidence the scenario forbids.", "classification", False,
         None, _exp_absent,
         "expect.absent lists items (the expect.evidence grammar) that must not occur, e.g. "
         "'reservation.release' or 'released'; the first occurrence of each is a violation.",
         "the forbidden event"),
    _inv("EXP-DISPOSITION-AT", "The disposition recorded at a named time is one the scenario allows.",
         "disposition", False, None, _exp_disposition_at,
         "expect.disposition_at {at, dispositions}: each run's latest accepted finish at or before that "
         "time (a terminal record stays historically accurate for what was known then) must be one of the "
         "dispositions; none by then is a violation.",
         "the finish in force at that time"),
)

BY_ID: dict[str, Invariant] = {inv.id: inv for inv in INVARIANTS + EXPECTATIONS}
