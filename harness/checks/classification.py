"""The classification rules: a claim is true and warranted, an ambiguous outcome is never
retried blind, refusals and throttling are honoured, incompatible state is migrated or
pinned, and knowledge moves only along its table with the evidence each move needs.

The ledger's moves are judged once (:func:`moves`), for KNOW-01, KNOW-02 and LATE-01 here and
for COMP-01 and REC-01 (effects.py); so is redispatch (:func:`redispatch`), for RETRY-01 here
and REC-01.
"""
from __future__ import annotations

from typing import Iterator

from ..vocab.model import KNOWLEDGE_EVIDENCE
from .common import (CLAIM, KNOWLEDGE_GRAPH, NO_ENTRY, TERMINAL, Finding, Invariant, inv, is_compensation, streams,
                     unfenced)
from .evidence import Finding as Warrant
from .evidence import PRESENT_KNOWLEDGE, absence, callback_only, presence, resolve, temporarily_negative
from .index import Dispatch, RunIndex, TraceIndex
from .knowledge import EVER, knew, sending
from .values import dig, effect_items, hashable, matches, obj, read_records, shown

_NEEDS = {(getattr(a, "value", a), b.value): text for (a, b), text in KNOWLEDGE_EVIDENCE.items()}
_NON_RETRYABLE = frozenset({"validation_failed", "permission_denied", "intent_mismatch", "already_exists"})
#: The checkpoint contract versions whose change makes old state incompatible with new code
#: (AR-08 "Deployment compatibility": proposal hashing, capability semantics, authority
#: checks, transition meaning, effect identity). policy_version and capability_version are
#: optional in a checkpoint; where a contract omits one, it is not compared.
CONTRACT = ("schema_version", "canonicalization_version", "policy_version", "capability_version")
_CORE = ("schema_version", "canonicalization_version")
_STOP_STATES = frozenset({"MIGRATING", "PINNED", "WAITING_OPERATOR"}) | TERMINAL


# --------------------------------------------------------------------------- TRUTH-01, EVID-01
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
        zombie = unfenced(ix)
        holdings = _held_effects(ix, run)
        active = [ev for ev in _own_effects(ix, run) if ev["ref"] not in ix.released_refs
                  and ev["seq"] not in zombie]
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            claim = CLAIM.get(f["disposition"])
            # a presence claim stays true of its moment: a release after it (another run's
            # compensation of the shared effect) does not make the record false; nor does another
            # run's release after this run last saw the effect in place (it could not know)
            held = [ev for ev in holdings if ev["ref"] not in ix.released_refs
                    or ix.released_refs[ev["ref"]]["seq"] > f["seq"]
                    or _released_unseen(run, ix.released_refs[ev["ref"]], f["seq"])]
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


def _released_unseen(run: RunIndex, release: dict, before: int) -> bool:
    """Whether another run released ``release['ref']`` after the latest moment this run saw it in
    place (the as_of of a delivered positive read, or an accepted response) before seq ``before``,
    and no read of this run before then showed it released."""
    if release.get("run") in (None, run.id):
        return False
    ref, seen = release.get("ref"), None
    for w in run.workers.values():
        for r in w.reads:
            if r.seq >= before:
                continue
            mine = [x for x in read_records(r.value) if x.get("ref") == ref]
            if not mine:
                continue
            as_of = obj(r.value).get("as_of")
            at = as_of if isinstance(as_of, int) and not isinstance(as_of, bool) else r.t
            if any(x.get("status") == "released" for x in mine):
                return False                  # it saw the release before its claim
            seen = at if seen is None else max(seen, at)
    for d in run.dispatches:
        res = d.result
        if res is not None and res.get("delivered") and res["seq"] < before and \
                obj(res.get("value")).get("ref") == ref:
            seen = res["t"] if seen is None else max(seen, res["t"])
    # a read that showed it in place as of the release's own millisecond saw the state before it
    return seen is not None and release["t"] >= seen


def _key_effects(ix: TraceIndex, run: RunIndex, key) -> list[dict]:
    """Commits under ``key`` that are this run's: caused by it, or of its intent (the service
    answered the run with an earlier record); a colliding key of another intent is not it."""
    return [ev for ev in ix.effects if ev.get("key") == key and not is_compensation(*ix.origin(ev))
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
        zombie = unfenced(ix)
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
    fields = [f"{k}={shown(a.get(k))}, not {shown(v)}" for k, v in b.items() if k != "proposal_hash" and a.get(k) != v]
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


# --------------------------------------------------------------------------- RETRY-01, CLS-01, CLS-02, AUTH-02
def _retry_01(ix: TraceIndex) -> Iterator[Finding]:
    """RETRY-01 (no evidence at all) and REC-01 (only a non-authoritative read) for redispatch."""
    yield from redispatch(ix, want="blind")


def redispatch(ix: TraceIndex, want: str) -> Iterator[Finding]:
    for run in ix.runs.values():
        for stream in streams(run):
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
                    early = kind == "weak" and temporarily_negative(ix, prev, f)
                    if want == kind or (early and want == "blind"):
                        outcome = knew(run, d.worker, d.seq).outcome(prev)
                        if want == "blind":
                            yield run.id, f"{d.service}.{d.op} #{d.seq} by {d.worker} repeats #{prev.seq} " \
                                          f"({outcome}) without an authoritative read showing absence" + \
                                (f" on a service that keeps no idempotency keys, where a negative read may be only "
                                 f"temporarily negative: {f.why}" if early else ""), (prev.seq, d.seq, *f.cites), True
                        else:
                            yield run.id, f"{d.service}.{d.op} #{d.seq} repeats #{prev.seq} ({outcome}) on " \
                                          f"evidence that cannot prove absence: {f.why}", \
                                (prev.seq, *f.cites, d.seq), False
                    break


def _refused(run: RunIndex) -> Iterator[tuple[int, Dispatch, dict, dict]]:
    """(index, dispatch, answer, error) of every dispatch whose worker saw an error answer."""
    for i, d in enumerate(run.dispatches):
        r = d.result
        if r is not None and r["delivered"] and not r["ok"]:
            yield i, d, r, r.get("error") or {}


def _bound(run: RunIndex, r: dict, x: Dispatch) -> bool:
    """Whether the answer ``r`` binds the sender of ``x`` (a later send of its key): it is the
    worker that saw the answer, or that worker recorded the key in the ledger after it, before
    ``x``'s worker knew. A replacement that never learnt of the answer is not bound by it."""
    return x.worker == r["worker"] or knew(run, r["worker"], sending(run, x).at).appended(x.key, since=r["seq"])


def _cls_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for i, d, r, err in _refused(run):
            code = err.get("code")
            if code not in _NON_RETRYABLE:
                continue
            again = next((x for x in run.dispatches[i + 1:] if x.key == d.key and x.service == d.service
                          and x.op == d.op and _bound(run, r, x)), None)
            if again is not None:
                yield run.id, f"{code} at #{r['seq']} is not transient, yet {d.key} was sent again at " \
                              f"#{again.seq}", (r["seq"], again.seq), False


def _cls_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for i, d, r, err in _refused(run):
            if err.get("code") != "throttled":
                continue
            after = (err.get("details") or {}).get("retry_after_ms") or 0
            nxt = next((x for x in run.dispatches[i + 1:] if x.key == d.key and x.op == d.op
                        and x.seq > r["seq"] and _bound(run, r, x)), None)
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
                yield run.id, f"{d.service}.{d.op} #{d.seq} acts as {shown(p)}, not the run's principal " \
                              f"{shown(principal)}", (d.seq,), False


# --------------------------------------------------------------------------- MIG-01, PIN-01
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
                changed = [f for f in CONTRACT if view is not None and f in w.env and f in view
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


def _pin_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            if not f.get("accepted") or f.get("disposition") != "PINNED":
                continue
            before = f["call"] if isinstance(f.get("call"), int) else f["seq"]
            cps = [cp for cp in run.checkpoints if cp["seq"] < before]
            if not cps:
                continue
            contract = obj(dig(cps[-1], "checkpoint", "contract"))
            pinned = obj(obj(f.get("packet")).get("pinned_env"))
            w = run.workers.get(f.get("worker"))
            env = w.env if w is not None else {}
            # the core versions always; a policy or capability version where this code's differs
            named = [k for k in CONTRACT if k in contract and (k in _CORE or k in pinned or
                                                               (k in env and env[k] != contract[k]))]
            wrong = [k for k in named if pinned.get(k) != contract[k]]
            if wrong:
                names = ", ".join(f"{k} {shown(pinned.get(k))} (the checkpoint has {shown(contract[k])})" for k in wrong)
                yield run.id, f"the PINNED finish at #{f['seq']} does not name the old versions it pins: {names}", \
                    (cps[-1]["seq"], f["seq"]), False
                continue
            for cp in run.checkpoints:
                if cp["seq"] <= f["seq"]:
                    continue
                if cp.get("state") == "MIGRATING":
                    break
                now = obj(dig(cp, "checkpoint", "contract"))
                moved = [k for k in named if k in now and now[k] != pinned.get(k)]
                if moved:
                    yield run.id, f"checkpoint #{cp['seq']} of the pinned run changed {', '.join(moved)} without " \
                                  f"a migration", (f["seq"], cp["seq"]), False
                    break


# --------------------------------------------------------------------------- KNOW-01, KNOW-02, LATE-01
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
            u = NO_ENTRY if prev is None else prev
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
                if f.strength == "none":
                    f = _aggregate_only(run, key, w, before) or f
                rule, auto = _unwarranted_inv(f)
                yield rule, (run.id, f"{key} {prev} -> CONFIRMED at #{e['seq']} without {need}"
                                     + (f": {f.why}" if f.why else " (no response, no read)"),
                             (e["seq"], *f.cites), auto and rule == "KNOW-02")
                # a callback naming no key is about the run's effect: with nothing else, it advanced state
                cb = callback_only(run, key, w, before) if f.strength == "none" else None
                if cb is not None:
                    yield "LATE-01", (run.id, f"{key} {prev} -> CONFIRMED at #{e['seq']} rests on nothing but the "
                                              f"completion callback (naming no key) seen at #{cb}: the callback "
                                              f"advanced state", (e["seq"], cb), False)
                continue
            mode = "claim" if k == "REJECTED" else "redispatch"
            ok, f = absence(ix, run, key, w, before, mode)
            if ok:
                continue
            rule, _ = _unwarranted_inv(f)
            # the hint names a deadline only where the run has one and it had passed at the move
            hint = (f" (the deadline {ix.fmt(run.deadline)} had passed; a deadline passing is not evidence)"
                    if prev == "SENT_UNKNOWN" and rule == "KNOW-02" and run.deadline is not None
                    and e["t"] >= run.deadline else "")
            yield rule, (run.id, f"{key} {prev} -> {k} at #{e['seq']} without {need}: dispatch "
                                 f"#{f.cites[0]} {f.why or 'has no such evidence'}{hint}",
                         (e["seq"], *f.cites), False)


def _aggregate_only(run: RunIndex, key, worker: str, before: int):
    """A weak finding when ``worker`` read an aggregate (a stock level) of the key's service after
    the key's first dispatch and before ``before``: a read, but one that identifies no effect
    (AR-08: "A generic search is not automatically authoritative"), so the upgrade is charged to
    reconciliation (REC-01), not taken for a claim made with no read at all. None otherwise."""
    sent = [d for d in run.dispatches if d.key == key and d.seq < before]
    w = run.workers.get(worker)
    if not sent or w is None:
        return None
    for s in w.calls:
        call = run.calls[s]
        if sent[0].seq < s < before and call["op"] == "aggregate" and call["port"] == sent[0].service:
            return Warrant(state="unknown", strength="weak", cites=(s,),
                           why=f"an aggregate read (#{s}) identifies no effect")
    return None


def _unwarranted_inv(f) -> tuple[str, bool]:
    if f.strength == "weak":
        return "REC-01", False
    if f.strength == "callback":
        return "LATE-01", False
    return "KNOW-02", True


def moves(inv_id: str):
    def check(ix: TraceIndex) -> Iterator[Finding]:
        for rule, finding in _ledger_moves_cached(ix):
            if rule == inv_id:
                yield finding
    check.__name__ = f"_moves_{inv_id}"
    return check


def _ledger_moves_cached(ix: TraceIndex) -> list:
    found = ix.memo.get("moves")
    if found is None:
        found = ix.memo["moves"] = list(_ledger_moves(ix))
    return found


# --------------------------------------------------------------------------- the registrations
#: The classification invariants, in the order the docs list them.
INVARIANTS: tuple[Invariant, ...] = (
    inv("TRUTH-01", "Every claim is true against ground truth at the horizon.", "classification", True, None,
        _truth,
        "Each ledger move into CONFIRMED / REJECTED / COMPENSATED, each accepted finish's effect claim "
        "(DISPOSITION_EFFECT_CLAIM: present / absent) and each CONFIRMED / REJECTED / COMPENSATED item of "
        "its effects list is compared with the remote lane at the end of the trace: CONFIRMED needs a "
        "commit under the key (or the named remote_ref, whose intent must match the run's on every "
        "business field); REJECTED needs no commit under the key, ever, late arrivals included; "
        "COMPENSATED needs a release of the original; an absence claim is false when an effect of the "
        "run's operation caused by the run remains unreleased, a presence claim when none of its own or of "
        "its intent under a key it sent or prepared remains unreleased at the time of the claim (other "
        "actors never count; a later release by another run does not rewrite a true record, nor does "
        "another run's release after the claimant last saw the effect in place, by the as_of of its read or "
        "its accepted response, when no read of its own showed the release).",
        "the claim (ledger or finish event) and the remote commits that contradict it"),
    inv("EVID-01", "A resolved ledger entry names its evidence, and a confirmation its remote reference.",
        "classification", False, None, _evid_01,
        "Every ledger append that moves a key into CONFIRMED, REJECTED or COMPENSATED must carry a "
        "non-empty evidence, reconciliation or observations list; a CONFIRMED effect entry also a "
        "remote_ref.",
        "the ledger append"),
    inv("RETRY-01", "No blind retry after an ambiguous outcome.", "classification", True,
        "blind ambiguous retry", _retry_01,
        "For every dispatch, each earlier dispatch of the same effect (same key or same business intent; "
        "for a release, the same target) must be settled for the dispatching worker: its own answer was "
        "an accepted response or a definite error, the ledger recorded PROPOSED/REJECTED after it, or the "
        "worker saw an authoritative negative read after it. A retry with no read at all after a timeout, a 5xx, "
        "a lost answer or a SENT_UNKNOWN entry found on recovery is blind; so, on a service that keeps no "
        "idempotency keys, is one whose only reads since could not prove absence yet (a negative read before the "
        "late-delivery bound, a lookup or job still in flight: 'a negative read may be only temporarily negative'). "
        "Another worker's request in the fencing gap (sent right after an ownership confirmation by a worker whose lease then lapsed, "
        "or stalled in front of its send until its lease lapsed) is settled for others by a reconciliation "
        "since that worker's last confirmation that reaches its lease expiry: no read can see a request "
        "that has not left. Such a stalled send is itself judged on what its worker knew before that "
        "confirmation.",
        "the ambiguous dispatch, the retry"),
    inv("CLS-01", "Validation, permission, changed-intent and already-exists refusals are not retried.",
        "classification", False, None, _cls_01,
        "After a delivered validation_failed, permission_denied, intent_mismatch or already_exists answer "
        "to a dispatch, no later dispatch under the same key by the worker that saw it, nor by any worker "
        "once that worker recorded the key in the ledger after the refusal (a replacement that never "
        "learnt of it may reconcile and send again).",
        "the refusal, the retry"),
    inv("CLS-02", "Throttling is honoured: a throttled effect is retried only after its retry-after.",
        "classification", False, None, _cls_02,
        "After a delivered throttled answer with retry_after_ms, the next dispatch under the key by the "
        "worker that saw it, or by any later worker once that worker recorded the key in the ledger after "
        "the answer (a restarted worker inherits the recorded retry-after), starts at least that long "
        "after the answer.",
        "the throttled answer, the early retry"),
    inv("AUTH-02", "A permission denial is not answered with another credential.", "classification", True,
        None, _auth_02,
        "Every effect or compensation dispatch acts as the run's principal (intent.principal equals the "
        "principal of the run's intent).",
        "the dispatch"),
    inv("MIG-01", "An incompatible checkpoint is migrated, pinned or stopped before any effect; migration "
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
    inv("PIN-01", "A pin names the old versions it pins and keeps them.", "classification", True, None,
        _pin_01,
        "An accepted PINNED finish carries packet.pinned_env with the schema_version and "
        "canonicalization_version of the checkpoint the run is pinned at (the latest before the finish), "
        "and no later checkpoint of the run changes them before a MIGRATING one.",
        "the checkpoint and the finish, or the finish and the checkpoint that changed the versions"),
    inv("KNOW-01", "Knowledge moves only along the ledger's transition table.", "classification", True, None,
        moves("KNOW-01"),
        "Each ledger append's (previous, knowledge) pair must be an edge of KNOWLEDGE_TRANSITIONS, held as "
        "a networkx graph (a first entry must be PROPOSED). Moves out of a confirmed original are "
        "judged by COMP-01.",
        "the ledger append"),
    inv("KNOW-02", "Knowledge is never upgraded without the evidence the transition requires.",
        "classification", True, "exactly-once claim", moves("KNOW-02"),
        "Each move named in KNOWLEDGE_EVIDENCE is checked against what the appending worker had observed "
        "(or the durable ledger): CONFIRMED needs an accepted response or an authoritative positive read "
        "(of a key the run prepared but never sent, too: another run of the same intent may have sent it); "
        "REJECTED needs every attempt settled absent (definite error, or an authoritative negative read "
        "fresh enough and past the documented late-delivery bound; for another worker's request in the "
        "fencing gap, reaching that worker's lease expiry); SENT_UNKNOWN -> PROPOSED needs every attempt settled absent; COMPENSATED / back to CONFIRMED need the compensation entry CONFIRMED / "
        "REJECTED. A deadline passing is not evidence. A CONFIRMED with no evidence at all is an "
        "exactly-once claim (automatic failure).",
        "the ledger append and the dispatch left unsettled"),
    inv("LATE-01", "A late callback is evidence only.", "classification", True, None, moves("LATE-01"),
        "A knowledge upgrade whose only support is a completion callback seen in the inbox (callbacks are "
        "not authoritative reads) is a violation; so is a CONFIRMED with no evidence at all after the worker "
        "saw a callback of its run that names no key (the callback advanced state; KNOW-02 charges the same "
        "move as an exactly-once claim).",
        "the ledger append and the poll that delivered the callback"),
)
