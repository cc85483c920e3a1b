"""Invariants for rules the chapter and docs/adapters.md state about one record or one call:
the decision packet's content, the fence a send carries, the SENT_UNKNOWN entry of every
attempt, seeded backoff jitter, a duplicate event's disposition and a pin's versions.

Each check reads the trace index (index.py) and yields findings ``(run, message, events,
auto_fail)`` like the checks of invariants.py, where they are registered.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..model import Knowledge
from .index import RunIndex, TraceIndex, dig, effect_items, matches, obj
from .knowledge import EVER, answered_ok, knew, polls_seen

Finding = tuple

#: The identifying reads each service kind offers, given its profile's lookup knob.
_READS = {
    "reservation": lambda p: ({"lookup"} if p.get("lookup") == "by_key" else set())
    | ({"search"} if p.get("lookup") not in (None, "none") else set()),
    "registry": lambda p: {"get_version", "wait_job"},
    "notification": lambda p: set(),
}
_UNRESOLVED = frozenset({"SENT_UNKNOWN", "COMPENSATION_PROPOSED"})
_PRESENT = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED"})
#: The checkpoint contract versions whose change makes old state incompatible with new code
#: (AR-08 "Deployment compatibility": proposal hashing, capability semantics, authority
#: checks, transition meaning, effect identity). policy_version and capability_version are
#: optional in a checkpoint; where a contract omits one, it is not compared.
CONTRACT = ("schema_version", "canonicalization_version", "policy_version", "capability_version")
_CORE = ("schema_version", "canonicalization_version")
_KNOWLEDGE = frozenset(k.value for k in Knowledge)


def reads_of(ix: TraceIndex, service: str) -> set[str]:
    """The identifying reads a service of the trace offers (by its declared profile)."""
    profile = ix.profile(service)
    if not profile and service not in (ix.header.get("services") or {}):
        return set()
    return set(_READS.get(service, lambda p: set())(profile))


# --------------------------------------------------------------------------- PKT-01
def _query(rec: dict) -> tuple[str, str] | None:
    q = rec.get("query")
    if not isinstance(q, str) or "." not in q:
        return None
    service, _, rest = q.partition(".")
    return service.strip(), rest.split("(")[0].strip()


def packet_problems(ix: TraceIndex, run: RunIndex, packet: Any, before: int) -> list[str]:
    """What a decision packet escalated just before seq ``before`` fails to say."""
    if not isinstance(packet, dict):
        return ["is not an object"]
    problems = []
    owner = packet.get("next_owner")
    if not (isinstance(owner, str) and owner.strip()):
        problems.append("names no accountable owner (next_owner)")
    listed: dict = {}
    for key, knowledge in effect_items(packet.get("effects")):
        listed.setdefault(key, knowledge)
    held = {key: run.knowledge_before(key, before) for key in run.ledger_keys_before(before)}
    for key, knowledge in held.items():
        if key not in listed:
            problems.append(f"omits {key} ({knowledge} in the ledger)")
        elif listed[key] != knowledge:
            problems.append(f"lists {key} as {listed[key]} while the ledger holds {knowledge}")
    for key, knowledge in listed.items():
        if key not in held and knowledge in _KNOWLEDGE:  # an intent not yet prepared may be named, not graded
            problems.append(f"lists {key} as {knowledge}, but the ledger does not hold it")
    if "deadline" not in obj(packet.get("budget")):
        problems.append("gives no deadline in its budget panel (null when there is none)")
    rec = packet.get("recommended")
    action = rec.get("action") if isinstance(rec, dict) else None
    if not isinstance(action, str):
        problems.append("recommends no action")
        return problems
    unresolved = [k for k, v in held.items() if v in _UNRESOLVED]
    if action == "RECONCILE":
        q = _query(rec)
        if q is None:
            problems.append("recommends RECONCILE without naming the authoritative query")
        elif q[1] not in reads_of(ix, q[0]):
            problems.append(f"recommends {rec.get('query')}, a read {q[0]} does not offer "
                            f"(it offers {', '.join(sorted(reads_of(ix, q[0]))) or 'no identifying read'})")
        if not unresolved:
            problems.append("recommends RECONCILE while the ledger holds nothing unresolved")
    elif action == "COMPENSATE":
        if not any(v in _PRESENT for v in held.values()):
            problems.append("recommends COMPENSATE while the ledger holds no confirmed effect")
        elif ix.profile(run.service).get("compensation") is False:
            problems.append(f"recommends COMPENSATE on {run.service}, which cannot release")
    elif action == "STOP" and "effect" not in rec:
        problems.append("recommends STOP without saying whether an effect remains or is unknown")
    return problems


def pkt_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for esc in run.escalations:
            before = esc["call"] if isinstance(esc.get("call"), int) else esc["seq"]
            problems = packet_problems(ix, run, esc.get("packet"), before)
            if problems:
                yield run.id, f"the decision packet at #{esc['seq']} {'; '.join(problems)}", (esc["seq"],), False


# --------------------------------------------------------------------------- FENCE-01
def fence_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if not ix.profile(d.service).get("fencing"):
                continue
            epoch = knew(run, d.worker, d.seq).epoch
            if epoch is None:
                continue                     # OWN-02: no lease at all
            fence = d.args.get("fence")
            if fence != epoch or isinstance(fence, bool):
                said = "no fence" if fence is None else f"fence {fence!r}"
                yield run.id, f"{d.service}.{d.op} #{d.seq} by {d.worker} carries {said} to a fencing service; " \
                              f"its lease epoch is {epoch}", (d.seq,), False


# --------------------------------------------------------------------------- PREP-02
def prep_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        last_send: dict = {}
        for d in run.dispatches:
            if d.key is None:
                continue                     # PREP-01
            # the worker's own previous send of the key: a stalled worker's entry, written before
            # another worker's send, still covers its own attempt
            since = last_send.get((d.worker, d.key), -1)
            last_send[(d.worker, d.key)] = d.seq
            entries = run.ledger_by_key.get(d.key)
            if not entries or entries[0]["seq"] > d.seq:
                continue                     # PREP-01: no entry at all
            own = [e for e in entries if since < e["seq"] < d.seq and e["worker"] == d.worker
                   and e["knowledge"] == "SENT_UNKNOWN"]
            if not own:
                what = "its first attempt" if since < 0 else f"the attempt after #{since}"
                yield run.id, f"{d.service}.{d.op} #{d.seq} under {d.key} ({what}) follows no SENT_UNKNOWN " \
                              f"entry of its own by {d.worker}", (d.seq,), False


# --------------------------------------------------------------------------- JIT-01
def jit_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        draws: dict[str, list[int]] = {}
        for seq, call in run.calls.items():
            if call["port"] == "random" and call["op"] == "draw":
                draws.setdefault(call["worker"], []).append(seq)
        for w in run.workers.values():
            previous = w.start_seq
            mine = draws.get(w.name, [])
            for seq, _ms, reason in w.sleeps:
                if not reason.lower().startswith("backoff"):
                    continue
                if not any(previous < s < seq for s in mine):
                    yield run.id, f"backoff sleep #{seq} by {w.name} ({reason!r}) draws no jitter from " \
                                  f"random.draw since {'its start' if previous == w.start_seq else f'#{previous}'}", \
                        (seq,), False
                previous = seq


# --------------------------------------------------------------------------- EVT-02
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


def evt_02(ix: TraceIndex) -> Iterator[Finding]:
    seen_by = polls_seen(ix)
    for run in ix.runs.values():
        for first, dup in _duplicates(run):
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


# --------------------------------------------------------------------------- PIN-01
def pin_01(ix: TraceIndex) -> Iterator[Finding]:
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
                names = ", ".join(f"{k} {pinned.get(k)!r} (the checkpoint has {contract[k]!r})" for k in wrong)
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


# --------------------------------------------------------------------------- KEY-03
def _conflicting(read, keys: set, intents: list) -> Any:
    """The key of a record this read returned under one of ``keys`` whose parameters differ
    from every intent of the run (the same key with another intent), or None."""
    value = obj(read.value)
    records = value.get("records") if isinstance(value.get("records"), list) else \
        [value.get("record")] if value.get("found") else []
    for rec in records:
        rec = obj(rec)
        key = rec.get("key")
        if isinstance(key, str) and key in keys and isinstance(rec.get("intent"), dict) and \
                not any(matches(rec["intent"], i) for i in intents):
            return key
    return None


def key_03(ix: TraceIndex) -> Iterator[Finding]:
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
