"""The disposition rules: every run ends terminal or durably waiting, the adapter keeps the
port contract, cancellation stops new work and shows in the disposition, a terminal finish
lists every effect truthfully, finish claims are warranted, and terminal is terminal.
"""
from __future__ import annotations

from typing import Iterator

from . import evidence
from .common import CLAIM, RUN_GRAPH, TERMINAL, Finding, Invariant, finish_call, inv, live
from .evidence import absence, presence
from .index import RECORD_FAULTS, WALL_CLOCK_FAULTS, RunIndex, TraceIndex
from .knowledge import knew
from ..vocab.model import SERVICE_OPS
from .values import effect_items

def _disp_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        if run.disposition() is None and run.budget_exhausted is not None and not blocking_faults(run):
            yield run.id, f"the platform gave up restarting after {run.budget_exhausted.get('workers')} workers " \
                          f"without a terminal or waiting disposition", (run.budget_exhausted["seq"],), False


def blocking_faults(run: RunIndex) -> list[dict]:
    return [f for f in run.faults if f.get("fault") not in RECORD_FAULTS and not _unjudgeable(f)]


def _unjudgeable(fault: dict) -> bool:
    return fault.get("fault") in WALL_CLOCK_FAULTS or \
        str(fault.get("message", "")).startswith("cannot start adapter command")


def _adapter_fault(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in blocking_faults(run):
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
                continue
            unread = _unread_cancel(ix, run, d)
            if unread is not None:
                delivered, answer = unread
                yield run.id, f"{d.service}.{d.op} #{d.seq} is new work after the cancellation delivered at " \
                              f"#{delivered}: {d.worker} had an answer from the service since (#{answer}) and " \
                              f"did not read its inbox before sending", (delivered, answer, d.seq), False


def _unread_cancel(ix: TraceIndex, run: RunIndex, d) -> tuple[int, int] | None:
    """A cancellation the worker could have read and did not (AR-08: "Cancellation stops new work";
    docs: read the inbox before each send): (its delivery, an answer) when a cancel was in the run's
    inbox before ``d.worker`` received a service's answer, and the worker then sent ``d`` without a
    poll of its inbox since the delivery. A cancel delivered after the worker's last answer (between
    its last read and its send) is the race the chapter accepts ("Where a remote request may already
    have left, the system keeps ambiguity"): never a finding."""
    delivered = run.cancel_delivered(d.seq)
    if delivered is None:
        return None
    by_seq = ix.memo.get("events_by_seq")
    if by_seq is None:
        by_seq = ix.memo["events_by_seq"] = {ev["seq"]: ev for ev in ix.events if isinstance(ev.get("seq"), int)}
    answer = None
    for s in range(delivered + 1, d.seq):
        ev = by_seq.get(s)
        if ev is None or ev.get("worker") != d.worker:
            continue
        if ev.get("kind") == "call" and ev.get("port") == "inbox":
            return None                          # it read its inbox after the delivery
        if ev.get("kind") == "result" and ev.get("delivered") and answer is None:
            call = run.calls.get(ev.get("call")) or {}
            if call.get("port") in SERVICE_OPS:
                answer = s
    return None if answer is None else (delivered, answer)


def _cancel_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        # the run was terminal before its writer could know of any cancellation: a later
        # cancellation records intent but does not rewrite history
        terminal = next((cp for cp in run.checkpoints if cp["state"] in TERMINAL), None)
        settled = terminal is not None and knew(run, terminal["worker"], terminal["seq"]).cancel() is None
        for f in run.finishes:
            disp = f["disposition"]
            if not f.get("accepted") or disp not in TERMINAL:
                continue
            call = finish_call(f)
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
            if not f.get("accepted") or f["disposition"] not in TERMINAL:
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
            claim = CLAIM.get(disp)
            if not f.get("accepted") or claim in (None, "unknown"):
                continue
            then = knew(run, f["worker"], finish_call(f))
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
            if state in TERMINAL:
                terminal_at, terminal_state = cp["seq"], state
        for f in run.finishes:
            if not f.get("accepted"):
                continue
            if terminal_state is not None and f["seq"] > terminal_at and f["disposition"] != terminal_state:
                yield run.id, f"finish {f['disposition']} at #{f['seq']} contradicts the terminal checkpoint " \
                              f"{terminal_state} at #{terminal_at}", (terminal_at, f["seq"]), False
            if f["disposition"] in TERMINAL and (terminal_at is None or f["seq"] < terminal_at):
                terminal_at = f["seq"]
        if terminal_at is None:
            continue
        for e in run.ledger:
            if e["seq"] <= terminal_at or e["knowledge"] == e.get("previous"):
                continue
            then = knew(run, e["worker"], e["seq"])
            epoch = then.epoch
            if (epoch is not None and live(run, epoch, e["seq"], e["t"])) or \
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


# --------------------------------------------------------------------------- the registrations
#: The disposition invariants, in the order the docs list them.
INVARIANTS: tuple[Invariant, ...] = (
    inv("DISP-01", "Every run ends in a terminal disposition or a durable waiting state.", "disposition",
        False, None, _disp_01,
        "A run without an accepted terminal or waiting finish after the platform exhausted its restart "
        "budget (a run still active at the horizon is inconclusive instead).",
        "the restart_budget_exhausted event"),
    inv("ADAPTER-FAULT", "The adapter never raises, hangs or breaks the port contract.", "disposition", False,
        None, _adapter_fault,
        "Every adapter_fault that ends a worker (exception, not_a_port, unhandled_port_error, garbage, died, "
        "step_budget, no_finish, ...). Faults decided by a wall-clock guard (step_timeout, no_reply) or an "
        "adapter command that cannot start make the verdict unknown instead.",
        "the adapter_fault event"),
    inv("CANCEL-01", "No new effect after cancellation was observed.", "disposition", True, None, _cancel_01,
        "No dispatch of the run's operation by a worker that saw a cancel event in a poll before it, "
        "that started after a cancel was already in the durable inbox, or that received a service's answer "
        "after a cancel was delivered and sent without polling its inbox since (a cancel delivered after its "
        "last answer is a race, not a finding). Compensation is allowed.",
        "the cancellation evidence, the dispatch"),
    inv("CANCEL-02", "Cancellation is visible in the disposition.", "disposition", True, None, _cancel_02,
        "A CANCELLED_* finish needs a cancel event received before it; a terminal finish by a worker that "
        "knew of a cancellation must be CANCELLED_*, unless it repeats a terminal checkpoint written by a "
        "worker that did not know of any cancellation when it wrote it (a cancellation that reaches a "
        "terminal run records intent but does not rewrite history).",
        "the cancellation evidence, the finish"),
    inv("DISP-02", "A terminal finish lists every effect with its ledger knowledge.", "disposition", False,
        None, _disp_02,
        "Every semantic key in the run's ledger appears in the terminal finish's effects with the knowledge "
        "the ledger holds at that moment.",
        "the finish"),
    inv("TRUTH-02", "Finish claims are warranted; an unknown effect stays unknown.", "disposition", True,
        "exactly-once claim", _truth_02,
        "A present claim (SUCCEEDED, *_EFFECT_REMAINS) needs the ledger CONFIRMED / COMPENSATION_PROPOSED "
        "or an accepted response / authoritative positive read seen by the finishing worker; without it, an "
        "exactly-once claim. An absent claim (*_NO_EFFECT) needs every attempt of the run's effect settled "
        "absent (ledger COMPENSATED, a ledger REJECTED that was itself warranted, a definite error, an "
        "authoritative negative read past the late-delivery bound): never a ledger entry recorded without "
        "that evidence.",
        "the finish and the unsettled dispatch"),
    inv("TERM-01", "Terminal is terminal; run states move only along the transition table.", "disposition",
        True, None, _term_01,
        "Consecutive accepted checkpoints follow RUN_TRANSITIONS (networkx graph, starting from INTAKE); "
        "nothing is checkpointed after a terminal checkpoint or finish, a finish does not contradict a "
        "terminal checkpoint, and no owner (or worker that knew it was stale) changes ledger knowledge "
        "after the run was terminal. A worker started after the terminal record (the platform wakes one "
        "for every later delivery: a cancellation after success, a late callback, a duplicate) makes no "
        "effect call and reports only the recorded disposition.",
        "the terminal record and the later change"),
)
