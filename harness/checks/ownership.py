"""The ownership rules: one lease holder acts, stale workers are fenced and stop on evidence
of loss, durable records name their owner, one retry owner retries within its budget, and
every unresolved state has an accountable next owner with a decision packet.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..vocab.model import Knowledge
from .common import CLAIM, TERMINAL, UNRESOLVED, Finding, Invariant, finish_call, inv, live, streams
from .controls import resolve
from .index import Dispatch, RunIndex, TraceIndex
from .knowledge import acted_at, knew
from .values import dig, effect_items, obj, shown

_PACKET_SECTIONS = ("header", "effects", "authority", "compatibility", "budget", "recommended")
#: The identifying reads each service kind offers, given its profile's lookup knob.
_READS = {
    "reservation": lambda p: ({"lookup"} if p.get("lookup") == "by_key" else set())
    | ({"search"} if p.get("lookup") not in (None, "none") else set()),
    "registry": lambda p: {"get_version", "wait_job"},
    "notification": lambda p: set(),
}
_PRESENT = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED"})
_KNOWLEDGE = frozenset(k.value for k in Knowledge)


# --------------------------------------------------------------------------- OWN-01, OWN-02, OWN-03, CKPT-01, FENCE-01
def _own_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for seq, cite, t, worker, what in _writes(run):
            then = knew(run, worker, seq)
            if then.w is None:
                continue
            epoch = then.epoch
            if epoch is None or live(run, epoch, seq, t):
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
        actions += [(finish_call(f), f["seq"], f["t"], f["worker"], f"finished {f['disposition']}")
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
            if not live(run, cp.get("epoch"), cp["seq"], cp["t"]):
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


def _fence_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for d in run.dispatches:
            if not ix.profile(d.service).get("fencing"):
                continue
            epoch = knew(run, d.worker, d.seq).epoch
            if epoch is None:
                continue                     # OWN-02: no lease at all
            fence = d.args.get("fence")
            if fence != epoch or isinstance(fence, bool):
                said = "no fence" if fence is None else f"fence {shown(fence)}"
                yield run.id, f"{d.service}.{d.op} #{d.seq} by {d.worker} carries {said} to a fencing service; " \
                              f"its lease epoch is {epoch}", (d.seq,), False


# --------------------------------------------------------------------------- RETRY-03, RETRY-02, JIT-01
def _same_worker_pairs(run: RunIndex):
    """Consecutive dispatches of one stream by one worker: (previous, next)."""
    for stream in streams(run):
        last: dict[str, Dispatch] = {}
        for d in stream:
            prev = last.get(d.worker)
            if prev is not None:
                yield prev, d
            last[d.worker] = d


def _retry_03(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        by_call: dict = {}
        for ev in run.proxy_retries:
            by_call.setdefault(ev.get("call"), []).append(ev["seq"])
        for call, seqs in by_call.items():
            sent = run.calls.get(call) or {}
            what = f"{sent.get('port')}.{sent.get('op')} #{call}" if sent else f"call #{call}"
            again = ", ".join(f"#{s}" for s in seqs)
            yield run.id, f"two retry owners: a proxy re-sent {what} at {again}, because the call did not " \
                          f"declare retry_owner='caller' (the worker's own retries are the only ones allowed)", \
                (call, *seqs), True
        for prev, d in _same_worker_pairs(run):
            if prev.key != d.key:
                continue
            then = knew(run, d.worker, d.seq)
            if then.appended(d.key, since=prev.seq) or then.backoff_since(prev.seq) or then.read_since(prev.seq):
                continue
            yield run.id, f"two retry owners: {d.worker} re-sent {d.service}.{d.op} under {d.key} at #{d.seq}, " \
                          f"right after #{prev.seq}, with no ledger record, backoff or read in between (a retry " \
                          f"loop below the worker's own)", (prev.seq, d.seq), True


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
            admitted, spent = _retry_admissions(run, d) if d.role == "primary" else (0, None)
            if ceiling is None:
                reported.add(d.key)
                yield run.id, f"{d.key} was sent {n} times (#{d.seq}) but no checkpoint declared " \
                              f"control.budgets.attempt_ceiling", (d.seq,), False
            elif n > max(ceiling, (spent or 0) + admitted):
                reported.add(d.key)
                more = f" and the {admitted} attempt(s) admitted by deliberate retry requests" if admitted else ""
                yield run.id, f"attempt {n} of {d.key} (#{d.seq}) exceeds the declared ceiling {ceiling}{more}", \
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
                          f"backoff (a clock.sleep whose reason starts with \u201cbackoff\u201d)", (prev.seq, d.seq), False


def _retry_admissions(run: RunIndex, d: Dispatch) -> tuple[int, int | None]:
    """How many attempts deliberate retry requests admitted before ``d`` (one per distinct retry event
    id delivered after the run waited WAITING_RETRY), and the ceiling spent when it first waited.
    Seed 002: "an explicit control-plane intent" claims the next attempt for the retained effect; it
    is not a raised budget, so a design may count it on top of the spent ceiling or raise the ceiling
    for it, not both. Whether each admission was used once is EFF-01's (effects.py)."""
    waits = [f["seq"] for f in run.finishes
             if f.get("accepted") and f["disposition"] == "WAITING_RETRY" and f["seq"] < d.seq]
    if not waits:
        return 0, None
    admitted = len({ev["event"].get("event_id") for ev in run.inbox
                    if ev["event"].get("type") == "retry" and waits[0] < ev["seq"] < d.seq})
    return admitted, _ceiling(run, d, before=waits[0])[0]


def _ceiling(run: RunIndex, d: Dispatch, before: int | None = None):
    before = d.seq if before is None else before
    for cp in reversed(run.checkpoints):
        if cp["seq"] > before:
            continue
        budgets = (obj(dig(cp, "checkpoint", "control"))).get("budgets") or {}
        c = budgets.get("attempt_ceiling") if isinstance(budgets, dict) else None
        if isinstance(c, dict):
            c = c.get(d.key)
        if isinstance(c, int) and not isinstance(c, bool):
            return c, cp["seq"]
    return None, None


def _jit_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        draws: dict[str, list[int]] = {}
        for seq, call in run.calls.items():
            if call["port"] == "random" and call["op"] == "draw":
                draws.setdefault(call["worker"], []).append(seq)
        services = set(ix.header.get("services") or ())
        for w in run.workers.values():
            previous = w.start_seq
            mine = draws.get(w.name, [])
            # one backoff is the wait between two service calls, however many chunks it is slept in
            # (a worker that keeps its lease renews between them): one draw covers all of them
            tried = [s for s in w.calls if run.calls[s]["port"] in services]
            judged = None           # the first chunk of the backoff being slept
            for seq, _ms, reason in w.sleeps:
                if not reason.lower().startswith("backoff"):
                    continue
                since = max((s for s in tried if s < seq), default=w.start_seq)
                if judged is not None and judged > since:
                    previous = seq
                    continue
                judged = seq
                if not any(previous < s < seq for s in mine):
                    yield run.id, f"backoff sleep #{seq} by {w.name} (\u201c{reason}\u201d) draws no jitter from " \
                                  f"random.draw since {'its start' if previous == w.start_seq else f'#{previous}'}", \
                        (seq,), False
                previous = seq


# --------------------------------------------------------------------------- OWN-04, PKT-01
def _own_04(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            disp = f["disposition"]
            listed = [k for _, k in effect_items(f.get("effects"))]
            why = None
            if CLAIM.get(disp) == "unknown" or disp == "WAITING_OPERATOR":
                why = disp
            elif any(k in UNRESOLVED for k in listed):
                why = "an unresolved effect in its list"
            elif disp in TERMINAL:
                open_keys = [k for k in run.ledger_keys_before(f["seq"])
                             if run.knowledge_before(k, f["seq"]) in UNRESOLVED]
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


def reads_of(ix: TraceIndex, service: str) -> set[str]:
    """The identifying reads a service of the trace offers (by its declared profile)."""
    profile = ix.profile(service)
    if not profile and service not in (ix.header.get("services") or {}):
        return set()
    return set(_READS.get(service, lambda p: set())(profile))


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
    unresolved = [k for k, v in held.items() if v in UNRESOLVED]
    found = resolve(rec)
    controls = set(found.controls) if found is not None else set()
    if "reconciliation_read" in controls:
        q = _query(rec)
        if q is None:
            problems.append(f"recommends {action} without naming the authoritative query")
        elif q[1] not in reads_of(ix, q[0]):
            problems.append(f"recommends {rec.get('query')}, a read {q[0]} does not offer "
                            f"(it offers {', '.join(sorted(reads_of(ix, q[0]))) or 'no identifying read'})")
        if not unresolved:
            problems.append(f"recommends {action} while the ledger holds nothing unresolved")
    elif "approve_corrective_proposal" in controls:
        if not any(v in _PRESENT for v in held.values()):
            problems.append(f"recommends {action} while the ledger holds no confirmed effect")
        elif ix.profile(run.service).get("compensation") is False:
            problems.append(f"recommends {action} on {run.service}, which cannot release")
    elif controls & {"cancel_new_work", "close_unresolved"}:
        if "effect" not in rec:
            problems.append(f"recommends {action} without saying whether an effect remains or is unknown")
        else:
            problems.extend(_stop_effect_problems(action, rec.get("effect"), held))
    return problems


#: What a STOP's ``effect`` may say, by the claim it makes (docs/adapters.md, "A STOP's effect").
STOP_EFFECT_WORDS: dict[str, str] = {
    "none": "absent", "absent": "absent", "no_effect": "absent", "nothing": "absent",
    "remains": "present", "present": "present", "kept": "present",
    "unknown": "unknown", "unresolved": "unknown",
}


def _stop_effect_problems(action: str, effect: Any, held: dict[str, str]) -> list[str]:
    """A STOP's ``effect`` against the ledger: "none" only where nothing may have been sent,
    "remains" only where an effect is confirmed; "unknown" is never a false reassurance."""
    word = effect.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(effect, str) else None
    claim = STOP_EFFECT_WORDS.get(word) if word else None
    if claim is None:
        return [f"recommends {action} with effect \u201c{shown(effect)}\u201d, which says neither none, remains nor unknown"]
    sent = sorted(k for k, v in held.items() if v in UNRESOLVED or v in _PRESENT)
    if claim == "absent" and sent:
        return [f"recommends {action} with effect \u201c{shown(effect)}\u201d while the ledger holds "
                + ", ".join(f"{k} {held[k]}" for k in sent)]
    if claim == "present" and not any(v in _PRESENT for v in held.values()):
        return [f"recommends {action} with effect \u201c{shown(effect)}\u201d while the ledger holds no confirmed effect"]
    return []


def _pkt_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for esc in run.escalations:
            before = esc["call"] if isinstance(esc.get("call"), int) else esc["seq"]
            problems = packet_problems(ix, run, esc.get("packet"), before)
            if problems:
                yield run.id, f"the decision packet at #{esc['seq']} {'; '.join(problems)}", (esc["seq"],), False


# --------------------------------------------------------------------------- the registrations
#: The ownership invariants, in the order the docs list them.
INVARIANTS: tuple[Invariant, ...] = (
    inv("OWN-02", "Only a lease holder dispatches, moves knowledge or finishes.", "ownership", True, None,
        _own_02,
        "Every dispatch, knowledge-changing ledger append and accepted finish comes from a worker that "
        "acquired the lease before it.",
        "the first such action of each lease-less worker"),
    inv("OWN-03", "Durable records name their true owner epoch, and versions only advance.", "ownership", True,
        None, _own_03,
        "Each accepted checkpoint's control.lease_epoch equals the epoch it was written under, that epoch "
        "was the live lease (the store's own fencing), and control.state_version strictly increases; each "
        "ledger entry's lease_epoch is its writer's epoch.",
        "the checkpoint or ledger append"),
    inv("CKPT-01", "Every checkpoint carries a version and an owner.", "ownership", True,
        "checkpoint without version or owner", _ckpt_01,
        "Every invalid_checkpoint fault is a violation; one whose problems name control.state_version or "
        "control.owner (or no control group at all) is an automatic failure.",
        "the adapter_fault event"),
    inv("OWN-01", "Stale workers are fenced: confirm ownership right before a send, stop on evidence of loss.",
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
    inv("FENCE-01", "A fencing service receives the sender's current lease epoch as its fence.", "ownership",
        True, None, _fence_01,
        "Every effect or compensation dispatch to a service whose profile declares fencing: true carries "
        "args.fence equal to the lease epoch its worker last acquired (no fence, a constant or an inherited "
        "epoch is a violation even when the service's own fencing happens to stop the write).",
        "the dispatch"),
    inv("RETRY-03", "One retry owner: no inner client retry, no proxy retry.", "ownership", True,
        "two retry owners", _retry_03,
        "A proxy_retry on the remote lane (the call did not declare retry_owner='caller'), or one worker "
        "sending the same key twice in a row with no ledger record, no backoff sleep and no read in between "
        "(a retry loop below the worker's own).",
        "the call and the proxy retries, or the two dispatches"),
    inv("RETRY-02", "Attempts stay within the declared ceiling and deadline, with backoff recorded.",
        "ownership", False, None, _retry_02,
        "A second attempt under a key needs control.budgets.attempt_ceiling declared in a checkpoint "
        "before it, and the count never exceeds it, or the ceiling spent when the run first waited "
        "WAITING_RETRY plus one attempt per deliberate retry request since (a distinct retry event id: seed "
        "002's explicit retry admits one more attempt, with or without a raised ceiling, not both); no effect dispatch at or after the run's deadline (a "
        "worker that stalled after it last read the clock is judged at that reading); "
        "one worker's consecutive attempts of a key are separated by clock.sleep(reason 'backoff ...') or "
        "a read (a new worker counts as the separation).",
        "the dispatch and the checkpoint with the ceiling"),
    inv("JIT-01", "Every backoff draws its jitter from random.draw.", "ownership", False, None, _jit_01,
        "Each clock.sleep whose reason starts with 'backoff' follows a random.draw by the same worker "
        "since its previous backoff sleep (or its start): one draw per backoff, so the jitter is seeded "
        "and recorded. A backoff slept in several chunks (the worker renews its lease in between) is one "
        "backoff: a chunk with no service call since a covered backoff sleep needs no draw of its own.",
        "the backoff sleep"),
    inv("OWN-04", "Every unresolved state names an accountable next owner and escalates a decision packet.",
        "ownership", False, None, _own_04,
        "An accepted finish that is *_EFFECT_UNKNOWN or WAITING_OPERATOR, lists an unresolved effect, "
        "ends terminal while the ledger holds an unresolved key, or ends terminal after a compensation "
        "failed definitely (its entry REJECTED: AR-08 trace 8, mark effects remaining and escalate), must "
        "name next_owner and follow an "
        "operator.escalate whose packet has header, effects, authority, compatibility, budget and "
        "recommended.",
        "the finish and the escalation"),
    inv("PKT-01", "A decision packet names its owner, the ledger's effects, the deadline and a legal action.",
        "ownership", False, None, _pkt_01,
        "Every operator.escalate packet names next_owner; its effects list holds every key of the run's "
        "ledger with the knowledge the ledger held at that moment, and nothing else; its budget panel has a "
        "deadline (null when there is none); recommended.action is given, and is legal from the recorded "
        "state, judged by the control it is (a common name or recommended.control, docs/adapters.md): "
        "RECONCILE (a reconciliation read) names as query an identifying read the service offers (lookup needs lookup "
        "by_key, search a lookup other than none, get_version / wait_job a registry) and needs an "
        "unresolved key; COMPENSATE (a corrective proposal) needs a confirmed effect on a service that can "
        "release; STOP (cancel new work, close with an unresolved disposition) says in effect whether an "
        "effect remains or is unknown, in agreement with the ledger: none (absent) only while no key is "
        "SENT_UNKNOWN, CONFIRMED or COMPENSATION_PROPOSED, remains (present) only while a key is CONFIRMED "
        "or COMPENSATION_PROPOSED, unknown always.",
        "the escalation"),
)
