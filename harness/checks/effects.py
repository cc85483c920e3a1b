"""The effect-correctness rules: prepare before sending, one stable key per intent that never
changes its intent, no duplicate effect and no redispatch of a known one, a duplicate event
causes one transition, no effect without a live approval, ambiguity resolved only by an
authoritative read, compensation as a separate effect, and effect history preserved.
"""
from __future__ import annotations

from typing import Any, Iterator

from .classification import moves, redispatch
from .common import UNRESOLVED, Finding, Invariant, inv, is_compensation, streams, unfenced
from .evidence import PRESENT_KNOWLEDGE, resolve
from .index import Dispatch, RunIndex, TraceIndex
from .knowledge import EVER, acted_at, answered_ok, knew, polls_seen, sending, stalled_send
from .values import dig, effect_items, effect_keys, hashable, identity, matches, obj, read_records, shown

_KEPT_AFTER_CONFIRM = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED", "SENT_UNKNOWN"})


# --------------------------------------------------------------------------- PREP-01, PREP-02, KEY-01, KEY-02, KEY-03
def _unprepared(run: RunIndex, d: Dispatch) -> bool:
    """``d`` was sent before the ledger held any entry for its key."""
    entries = run.ledger_by_key.get(d.key)
    return not entries or entries[0]["seq"] > d.seq


def _prep_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.key is None:
                yield run.id, f"{d.service}.{d.op} #{d.seq} carries no semantic key", (d.seq,), False
            elif _unprepared(run, d):
                yield run.id, f"{d.service}.{d.op} #{d.seq} under {d.key} was sent before any ledger entry " \
                              f"for that key", (d.seq,), False


def _prep_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.key is None or _unprepared(run, d):
                continue                     # PREP-01: no key, or no entry at all
            # since the worker's own previous send of the key: a stalled worker's entry, written
            # before another worker's send, still covers its own attempt
            then = knew(run, d.worker, d.seq)
            since = then.last_send(d.key)
            if not then.appended(d.key, since, "SENT_UNKNOWN"):
                what = "its first attempt" if since < 0 else f"the attempt after #{since}"
                yield run.id, f"{d.service}.{d.op} #{d.seq} under {d.key} ({what}) follows no SENT_UNKNOWN " \
                              f"entry of its own by {d.worker}", (d.seq,), False


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
    # across runs: two runs of one business intent (the same proposal) are one semantic effect, so
    # they share its key ("Another random key does not make a duplicate business intent safe")
    across: dict = {}
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.role != "compensation" and d.key is not None:
                group = across.setdefault((d.service, d.op, identity(d.intent), d.intent.get("proposal_hash")), {})
                group.setdefault(run.id, d)
    for (_, op, _, _), by_run in across.items():
        firsts = list(by_run.values())
        if len({d.key for d in firsts}) > 1:
            runs = ", ".join(f"{rid} {d.key}" for rid, d in by_run.items())
            yield list(by_run)[-1], f"one {op} intent was sent by {len(by_run)} runs under different keys " \
                                    f"({runs})", tuple(d.seq for d in firsts), False


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


def _conflicting(read, keys: set, intents: list) -> Any:
    """The key of a record this read returned under one of ``keys`` whose parameters differ
    from every intent of the run (the same key with another intent), or None."""
    for rec in read_records(read.value):
        key = rec.get("key")
        if isinstance(key, str) and key in keys and isinstance(rec.get("intent"), dict) and \
                not any(matches(rec["intent"], i) for i in intents):
            return key
    return None


def _key_03(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        keys = {d.key for d in run.dispatches if d.role == "primary" and isinstance(d.key, str)}
        if not keys:
            continue
        for w in run.workers.values():
            for read in knew(run, w.name, EVER).reads():
                key = _conflicting(read, keys, run.intents or [run.intent])
                if key is None:
                    continue
                again = next((d for d in run.dispatches if d.worker == w.name and d.key == key
                              and d.seq > read.seq), None)
                if again is not None:
                    yield run.id, f"{w.name} read a record under {key} with other parameters at #{read.seq} " \
                                  f"(an integrity error) and sent the key again at #{again.seq}", \
                        (read.seq, again.seq), False
                    return
                done = next((f for f in run.finishes if f.get("accepted") and f["seq"] > read.seq), None)
                if done is not None and not any(read.seq < e["seq"] < done["seq"] for e in run.escalations):
                    yield run.id, f"{w.name} read a record under {key} with other parameters at #{read.seq} " \
                                  f"(an integrity error) and the run reported {done['disposition']} at " \
                                  f"#{done['seq']} without escalating it", (read.seq, done["seq"]), False
                    return


# --------------------------------------------------------------------------- EFF-01, EFF-02
def _eff_01(ix: TraceIndex) -> Iterator[Finding]:
    groups: dict = {}
    zombie = unfenced(ix)
    for ev in ix.effects:                       # across runs: a second run is no excuse
        port, op = ix.origin(ev)
        if is_compensation(port, op) or ev["seq"] in zombie:
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
        for stream in streams(run):
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


# --------------------------------------------------------------------------- EVT-01, EVT-02
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


def _records(value: Any, event_id: str, seq: int) -> bool:
    """Whether a checkpoint's evidence holds a disposition naming ``event_id`` and inbox seq ``seq``."""
    if isinstance(value, dict):
        if value.get("event_id") == event_id and _holds(value, seq):
            return True
        if event_id in value and _holds(value[event_id], seq):
            return True
        return any(_records(v, event_id, seq) for v in value.values())
    if isinstance(value, list):
        return any(_records(v, event_id, seq) for v in value)
    return False


def _holds(value: Any, seq: int) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value == seq
    if isinstance(value, dict):
        return any(_holds(v, seq) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, seq) for v in value)
    return False


def _duplicates(run: RunIndex) -> list[tuple[dict, dict]]:
    """(first delivery, later delivery) of every event id delivered more than once."""
    first: dict = {}
    out = []
    for ev in run.inbox:
        event = ev["event"]
        eid = event.get("event_id")
        if eid in first:
            out.append((first[eid], ev))
        else:
            first[eid] = ev
    return out


def _evt_02(ix: TraceIndex) -> Iterator[Finding]:
    seen_by = None
    for run in ix.runs.values():
        for first, dup in _duplicates(run):
            if seen_by is None:  # a walk over the whole trace: only when some event came twice
                seen_by = polls_seen(ix)
            event = dup["event"]
            eid, inbox_seq = event.get("event_id"), event.get("seq")
            polls = seen_by.get((run.id, inbox_seq), [])
            if not polls:
                continue                     # nobody saw it: nothing to dispose of
            poll_seq, worker = polls[0]
            later = [cp for cp in run.checkpoints if cp["seq"] > poll_seq]
            if later and not any(_records(dig(cp, "checkpoint", "evidence"), eid, inbox_seq) for cp in later):
                yield run.id, f"the duplicate delivery of {eid} (inbox seq {inbox_seq}, #{dup['seq']}) seen at " \
                              f"#{poll_seq} has no recorded disposition in any later checkpoint", \
                    (dup["seq"], poll_seq, later[-1]["seq"]), False
            yield from _second_transition(ix, run, first, dup, poll_seq, worker)


def _second_transition(ix: TraceIndex, run: RunIndex, first: dict, dup: dict, poll_seq: int,
                       worker: str) -> Iterator[Finding]:
    """A duplicate causes no transition: no second validation (a return to VALIDATED once the
    run was past it) and no second approval request while the first, which the same worker
    made and saw accepted, is still unanswered (a replacement that never learnt of a request
    may ask again)."""
    etype = dup["event"].get("type")
    if etype != "intake":
        return
    past, prev_state = False, None
    for cp in run.checkpoints:
        state = cp.get("state")
        if cp["seq"] < poll_seq:
            past = past or state not in (None, "INTAKE", "VALIDATED")
            prev_state = state
            continue
        if cp.get("worker") == worker and state == "VALIDATED" and past \
                and prev_state not in ("MIGRATING", "PINNED", "WAITING_OPERATOR"):
            yield run.id, f"{worker} validated the intake again at #{cp['seq']} after its duplicate " \
                          f"delivery (#{dup['seq']}): a duplicate causes no transition", \
                (dup["seq"], cp["seq"]), False
            return
        prev_state = state
        past = past or state not in (None, "INTAKE", "VALIDATED")
    requests: dict = {}
    seen = answered_ok(ix)
    for seq, call in sorted(run.calls.items()):
        if call["port"] != "authority" or call["op"] != "request" or call["worker"] != worker:
            continue
        args = obj(call.get("args"))
        ident = (args.get("proposal_hash"), args.get("action"))
        earlier = requests.get(ident)
        if seq in seen:
            requests[ident] = seq
        if earlier is None or seq < poll_seq:
            continue
        answered = any(earlier < ev["seq"] < seq and ev["event"].get("type") == "approval"
                       and obj(ev["event"].get("payload")).get("proposal_hash") == ident[0] for ev in run.inbox)
        if not answered:
            yield run.id, f"{worker} asked for approval of {ident[0]} again at #{seq} after the duplicate " \
                          f"delivery (#{dup['seq']}), while the request at #{earlier} was unanswered", \
                (dup["seq"], earlier, seq), False
            return


# --------------------------------------------------------------------------- AUTH-01, REC-01, COMP-01, HIST-01
def _between(seqs, lo: int, hi: int) -> bool:
    return any(lo < s < hi for s in seqs)


def _auth_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if d.role == "secondary" or (d.role == "primary" and run.approval == "none"):
                continue
            phash = d.intent.get("proposal_hash", d.args.get("proposal_hash"))
            bound = [a for a in run.approvals if a["seq"] < d.seq and a.get("proposal_hash") == phash
                     and a.get("action") == d.op]
            if not bound:
                yield run.id, f"{d.service}.{d.op} #{d.seq} has no approval bound to proposal hash {shown(phash)}", \
                    (d.seq,), False
                continue
            carried = _carried_over_policy(ix, run, d, phash)
            if carried is not None:
                yield run.id, carried[1], (carried[0], d.seq), False
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


def _policy(env: Any) -> Any:
    return obj(env).get("policy_version")


def _carried_over_policy(ix: TraceIndex, run: RunIndex, d: Dispatch, phash: Any) -> tuple[int, str] | None:
    """A dispatch under approvals asked only by workers of another policy version than the sender's:
    AR-08 names policy version among the fields to compare before every attempt ("If intent changed,
    close the old attempt and create a new proposal"), and a migration must preserve authority checks.
    Pinned old code (the same policy version) may use the original approval; a trace without approval
    requests, or workers without a declared policy version, says nothing here."""
    sender = run.workers.get(d.worker)
    mine = _policy(sender.env) if sender is not None else None
    if mine is None:
        return None
    asked = [ev for ev in ix.events if ev.get("kind") == "approval_requested" and ev.get("run") == run.id
             and ev["seq"] < d.seq and ev.get("proposal_hash") == phash and ev.get("action") == d.op]
    if not asked:
        return None
    # judged where the design binds its proposal to a policy version (its checkpoint's contract names
    # one when the approval was asked), as MIG-01 judges a policy change only where the contract names it
    frozen = [cp for cp in run.checkpoints if cp["seq"] < asked[0]["seq"]]
    if not frozen or _policy(dig(frozen[-1], "checkpoint", "contract")) is None:
        return None
    policies = []
    for ev in asked:
        w = run.workers.get(ev.get("worker"))
        policy = _policy(w.env) if w is not None else None
        if policy is None or policy == mine:
            return None
        policies.append(policy)
    return asked[-1]["seq"], (f"{d.service}.{d.op} #{d.seq} by {d.worker} (policy version {mine}) under the "
                              f"approval asked at #{asked[-1]['seq']} for proposal {shown(phash)} under policy "
                              f"version {policies[-1]}: a policy change makes a new proposal with its own "
                              "approval (or pin the old code); migration does not carry authority over")


def _rec_01(ix: TraceIndex) -> Iterator[Finding]:
    yield from moves("REC-01")(ix)
    yield from redispatch(ix, want="weak")


def _comp_01(ix: TraceIndex) -> Iterator[Finding]:
    yield from moves("COMP-01")(ix)
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
                    if key not in keys and run.knowledge_before(key, cp["seq"]) in UNRESOLVED:
                        yield run.id, f"checkpoint v{cp['version']} (#{cp['seq']}) dropped the unresolved " \
                                      f"effect {key} that v{prev['version']} carried", (prev["seq"], cp["seq"]), False
            prev = cp


# --------------------------------------------------------------------------- the registrations
#: The effect-correctness invariants, in the order the docs list them.
INVARIANTS: tuple[Invariant, ...] = (
    inv("PREP-01", "Prepare before dispatch: every effect call follows a ledger entry for its key.",
        "effect_correctness", True, None, _prep_01,
        "Every dispatch carries a semantic key that has a ledger entry appended before the call.",
        "the dispatch"),
    inv("PREP-02", "Every send follows its own SENT_UNKNOWN entry.", "effect_correctness", True, None,
        _prep_02,
        "Every dispatch under a key follows a SENT_UNKNOWN ledger append of that key by the dispatching "
        "worker, made after that worker's previous dispatch of the key: each attempt, not only the first, is "
        "recorded as possibly sent before it leaves.",
        "the dispatch"),
    inv("KEY-01", "One stable key per intent across attempts and workers.", "effect_correctness", True, None,
        _key_01,
        "All non-compensation dispatches of one business intent in a run use the same key (a key derived "
        "from an attempt number or a timestamp shows up as differing keys), and so do the runs that carry "
        "one business intent with the same proposal hash (a key minted per run shows up across them).",
        "the first dispatch under each key"),
    inv("EFF-01", "No duplicate effect for one business intent.", "effect_correctness", True, None, _eff_01,
        "More than one commit on the remote lane caused by the runs (adapter, proxy retry, late arrival) "
        "for one business intent (every field but the proposal hash) is a violation, across runs too: a "
        "resubmitted intent in a second run is no excuse. A duplicate delivery by the transport to a "
        "service without idempotency is the transport's, not the adapter's.",
        "the commits"),
    inv("EFF-02", "No redispatch of an effect already known to exist.", "effect_correctness", True, None,
        _eff_02,
        "No dispatch under a key the ledger already holds CONFIRMED / COMPENSATION_PROPOSED / COMPENSATED, or "
        "after the dispatching worker saw an accepted response or a positive read for an earlier attempt "
        "(a response is replayed from the ledger, never regenerated by repeating the effect). A stale "
        "worker that confirmed ownership right before the send and stalled is judged on what existed "
        "before that confirmation.",
        "the evidence of the effect, the redispatch"),
    inv("EVT-01", "A duplicate event causes one transition.", "effect_correctness", True, None, _evt_01,
        "One original is released at most once and gets at most one compensation key; after WAITING_RETRY, "
        "each admitted attempt needs its own retry request (distinct event id) and one request admits one "
        "attempt: every attempt after a WAITING_RETRY is an admission that needs one more distinct retry "
        "request delivered before it, except the redo of an admitted attempt whose outcome was unknown. "
        "Waiting again with no attempt in between (a restarted worker) admits nothing, and a send in the "
        "fencing gap (a zombie's) is no attempt of the owner's.",
        "the releases, compensation dispatches or retry admissions"),
    inv("EVT-02", "A duplicate event gets an auditable disposition and causes no transition.",
        "effect_correctness", False, None, _evt_02,
        "For every event id delivered more than once, once a worker's poll returned the later delivery: "
        "some accepted checkpoint written after that poll records its disposition in evidence (an object "
        "naming the event_id, or keyed by it, that holds the duplicate's inbox seq); and the worker that "
        "saw a duplicate intake neither validates it again (a VALIDATED checkpoint once the run was past "
        "it, resumption from MIGRATING / PINNED / WAITING_OPERATOR excepted) nor requests approval again "
        "for a proposal hash whose request it made and saw accepted is still unanswered.",
        "the duplicate delivery, the poll, and the checkpoint or the second transition"),
    inv("KEY-02", "A key never carries a changed intent.", "effect_correctness", True, None, _key_02,
        "No key is sent with two different intents (proposal hash included), in one run or across runs "
        "(a key that omits a field such as the tenant collides), and no ledger key is recorded with two "
        "business intents.",
        "the first use and the changed use"),
    inv("KEY-03", "A key found bound to other parameters is an integrity error: stop and escalate.",
        "effect_correctness", False, None, _key_03,
        "After a delivered read returned a record under a key the run sent whose parameters differ from "
        "the run's intent on a business field (the same key with another intent), the worker that read it "
        "sends nothing more under that key, and an operator.escalate precedes the run's next accepted "
        "finish.",
        "the read and the later send, or the read and the finish"),
    inv("AUTH-01", "No effect without a live approval bound to its proposal hash.", "effect_correctness",
        True, None, _auth_01,
        "At each effect or compensation dispatch (runs with approval mode none excepted for their own "
        "operation) an approval_granted for the dispatch's proposal hash and operation exists, unexpired at "
        "dispatch time, not revoked and with no capability change since (a worker that stalled after it last "
        "read the clock is judged at that reading: the stall, not the worker, made it late); and where the "
        "run's checkpoint named contract.policy_version when the approval was asked, one approval request "
        "for that proposal hash came from a worker of the sender's policy version (run.info env): a policy "
        "change makes a new proposal, and a migrated run never dispatches under the approval asked under "
        "the old policy (pinned old code may).",
        "the approval and the dispatch"),
    inv("REC-01", "Ambiguity is resolved only by an authoritative read that identifies the effect.",
        "effect_correctness", True, None, _rec_01,
        "A knowledge move or a retry whose only support is a read that cannot settle it: eventually "
        "consistent and older than the send, before the documented late-delivery bound, past the "
        "provider's key retention, a lookup on a service without a key index, a record whose intent differs "
        "on some field, a job still running, an already_exists answer.",
        "the ledger append or retry and the read"),
    inv("COMP-01", "Compensation is a separate effect; the original is never rewritten.",
        "effect_correctness", True, "compensation as rollback", _comp_01,
        "A confirmed original's ledger history never moves back (CONFIRMED -> REJECTED / PROPOSED ...); no "
        "checkpoint or finish reports it as never having happened; a release uses its own key; compensation "
        "entries link the effect they compensate, and an original moves to COMPENSATION_PROPOSED only "
        "with such an entry.",
        "the rewriting append, record or release"),
    inv("HIST-01", "Effect history is preserved.", "effect_correctness", True, None, _hist_01,
        "Every effect entry satisfies the ledger schema, and no checkpoint drops an unresolved effect key "
        "that the previous checkpoint carried.",
        "the adapter_fault or the two checkpoints"),
)
