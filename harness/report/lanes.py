"""The data a figure draws, read from one trace.

Three timelines per scenario (AR-08 "Readers should draw three timelines"): the run lane
(checkpoint states and versions, workers with their lease epochs), the remote lane (what
the services really did) and the knowledge lane (ledger knowledge per semantic key), plus
the vertical markers (faults, crashes, pauses, cancellations, deployments, deadlines).
The lanes themselves come from :func:`crashlab.checks.timelines`, the same extraction the
invariants read.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Who a trace names as acting when the act was crashlab's own: its injected faults, crashes, pauses and resumes
#: (the fault lane), its failpoints, its takeovers and, in an integration trace, its lease grants.
CRASHLAB = "crashlab"


def actor(ev: dict) -> str | None:
    """``crashlab`` for an event that records crashlab's own action (what it did to a worker, not what a worker
    did): every fault-lane event (fault, crash, pause, resume, failpoint), a takeover, and a lease with
    ``granted_by`` (an integration supervisor's grant, which no worker asked for); None for the rest."""
    kind = ev.get("kind")
    if ev.get("lane") == "fault" or kind == "takeover" or (kind == "lease" and ev.get("granted_by")):
        return CRASHLAB
    return None


#: World events drawn as vertical markers (``deliver`` and approvals are inbox traffic).
WORLD_MARKERS = ("cancel", "deploy", "revoke", "capability_change", "approve", "deny", "callback",
                 "operator_answer", "retry", "event")


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    start: int
    end: int | None          # None: still in this state when the trace ends
    label: str               # state / knowledge
    seq: int
    version: int | None = None
    epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    t: int
    seq: int
    kind: str
    label: str = ""
    ok: bool = True
    actor: str = ""          # "crashlab": crashlab's own action (``actor``), drawn as such


@dataclass(frozen=True, slots=True, kw_only=True)
class Worker:
    name: str
    run: str
    start: int
    end: int | None           # None: alive at the end of the trace
    end_kind: str             # finished | replaced | crash | adapter_fault | alive
    seq: int
    pauses: tuple[tuple[int, int | None], ...] = ()
    leases: tuple[tuple[int, int, int], ...] = ()   # (from, until, epoch)
    granted: bool = False     # its leases are crashlab's grants (an integration supervisor's), not its own calls
    marks: tuple[Mark, ...] = ()                     # lease, rejected write, finish, escalation


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLane:
    id: str
    states: tuple[Segment, ...]
    workers: tuple[Worker, ...]
    deadline: int | None
    disposition: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """One record a service holds: a bar from commit to release (or the end)."""

    ref: str
    service: str
    key: str | None
    cause: str
    run: str | None          # None: another actor's
    start: int
    seq: int
    released: int | None = None
    released_seq: int | None = None
    compensates: str | None = None    # for a release record: the ref it released


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLane:
    key: str
    run: str | None
    kind: str                    # effect | compensation
    states: tuple[Segment, ...]
    stale: tuple[Mark, ...] = ()  # appends under a lease epoch that was not the live one


@dataclass(frozen=True, slots=True, kw_only=True)
class Lanes:
    runs: tuple[RunLane, ...]
    effects: tuple[Effect, ...]
    transport: tuple[Mark, ...]      # kind, label = service
    knowledge: tuple[KeyLane, ...]
    markers: tuple[Mark, ...]        # vertical markers across every lane
    start: int
    end: int                         # last meaningful time (not the horizon)


def lanes(events: list[dict]) -> Lanes:
    """The figure's data for one trace (header first): the three timelines come from
    :func:`crashlab.checks.timelines`; the workers' lifetimes, escalations, refused writes and
    the vertical markers (faults, crashes, pauses, world events, deadlines) are added here."""
    from ..checks import timelines  # local: the checks import networkx

    tl = timelines(events)
    workers: dict[str, dict] = {}
    marks: dict[str, list[Mark]] = {}
    markers: list[Mark] = []
    last = 0
    last_of = {ev["worker"]: ev.get("seq", 0) for ev in events if ev.get("worker")}   # each worker's last event
    for ev in events:
        lane, kind, t, seq = ev.get("lane"), ev.get("kind"), ev.get("t", 0), ev.get("seq", 0)
        if lane in ("meta", "port") or (lane == "world" and kind in ("deliver", "approval_granted")):
            continue
        last = max(last, t)
        wname = ev.get("worker")
        w = workers.get(wname) if wname else None
        if lane == "run" and wname:
            if kind == "checkpoint_rejected":
                marks.setdefault(wname, []).append(Mark(t=t, seq=seq, kind="rejected", ok=False,
                                                        label=str(ev.get("reason"))))
            elif kind == "escalation":
                marks.setdefault(wname, []).append(Mark(t=t, seq=seq, kind="escalation",
                                                        label=str(ev.get("ticket"))))
            elif kind == "approval_requested":
                marks.setdefault(wname, []).append(Mark(t=t, seq=seq, kind="approval",
                                                        label=str(ev.get("request_id"))))
        elif lane == "worker":
            if kind == "start":
                workers[wname] = {"name": wname, "run": ev.get("run"), "start": t, "end": None,
                                  "end_kind": "alive", "seq": seq, "pauses": []}
            elif kind in ("stop", "adapter_fault") and w is not None and w["end"] is None:
                if kind == "adapter_fault":
                    marks.setdefault(wname, []).append(Mark(t=t, seq=seq, kind="adapter_fault", ok=False,
                                                            label=str(ev.get("fault"))))
                # a fault the worker went on after (a refused checkpoint) is a mark on it, not its end;
                # a stale worker a replacement had taken over is stopped by crashlab: replaced, not finished
                if kind == "stop" or seq == last_of.get(wname):
                    replaced = kind == "stop" and str(ev.get("reason") or "").startswith("stale")
                    w["end"] = t
                    w["end_kind"] = "replaced" if replaced else "finished" if kind == "stop" else "adapter_fault"
            elif kind == "takeover":
                markers.append(Mark(t=t, seq=seq, kind="takeover", label=f"takeover of {ev.get('stale')}",
                                    actor=CRASHLAB))
            elif kind == "restart_budget_exhausted":
                markers.append(Mark(t=t, seq=seq, kind="adapter_fault", label="restart budget exhausted"))
        elif lane == "fault":
            if kind == "crash":
                if w is not None:
                    w["end"], w["end_kind"] = t, "crash"
                where = f"failpoint {ev['failpoint']}" if ev.get("failpoint") else ev.get("boundary")
                markers.append(Mark(t=t, seq=seq, kind="crash", label=f"crash ({where})", actor=CRASHLAB))
            elif kind == "pause":
                if w is not None:
                    w["pauses"].append([t, None])
                markers.append(Mark(t=t, seq=seq, kind="pause", label="pause", actor=CRASHLAB))
            elif kind == "resume":
                if w is not None and w["pauses"] and w["pauses"][-1][1] is None:
                    w["pauses"][-1][1] = t
                by = f" after the handover to {ev['by']}" if ev.get("by") else (
                    " (handover missed)" if ev.get("handover") == "missed" else "")
                markers.append(Mark(t=t, seq=seq, kind="resume", label="resume" + by, actor=CRASHLAB))
            elif kind == "failpoint":
                marks.setdefault(str(wname), []).append(Mark(t=t, seq=seq, kind="failpoint", actor=CRASHLAB,
                                                             label=str(ev.get("failpoint"))))
            else:
                label = str(ev.get("fault") or kind) + (f":{ev['code']}" if ev.get("code") else "")
                markers.append(Mark(t=t, seq=seq, kind="fault", label=label, actor=CRASHLAB))
        elif lane == "world" and kind in WORLD_MARKERS:
            data = ev.get("data") if isinstance(ev.get("data"), dict) else {}
            label = kind if kind != "event" else str(data.get("kind", "event"))
            if kind == "deploy":
                label = ("deploy " + ", ".join(f"{k}={v}" for k, v in sorted(data.items()))).strip()
            markers.append(Mark(t=t, seq=seq, kind=kind if kind in ("cancel", "deploy") else "world",
                                label=label))
    granted = {ev.get("owner") for ev in events if ev.get("kind") == "lease" and ev.get("granted_by")}
    runs, effects, transport, knowledge = [], [], [], []
    owner = {p.seq: r.run for r in tl.runs for p in r.remote}
    remote_points = [p for r in tl.runs for p in r.remote] + list(tl.other_actors)
    released = {(p.service, p.key): p for p in remote_points if p.kind == "released"}
    released_ref = {(p.service, p.ref): p for p in remote_points if p.kind == "released"}
    for p in sorted(remote_points, key=lambda p: p.seq):
        if p.kind == "effect":
            rel = released_ref.get((p.service, p.ref))
            corrects = released.get((p.service, p.key)) if p.key is not None else None
            effects.append(Effect(ref=str(p.ref), service=str(p.service or ""), key=p.key,
                                  cause=p.cause or "adapter", run=owner.get(p.seq), start=p.t, seq=p.seq,
                                  released=rel.t if rel else None, released_seq=rel.seq if rel else None,
                                  compensates=corrects.ref if corrects is not None and corrects.ref != p.ref
                                  else None))
        elif p.kind != "released":
            transport.append(Mark(t=p.t, seq=p.seq, kind=p.kind, label=str(p.service or "")))
    for r in tl.runs:
        if r.deadline is not None:
            markers.append(Mark(t=r.deadline, seq=0, kind="deadline", label=f"deadline {r.run}"))
            last = max(last, r.deadline)
        states = tuple(Segment(start=p.t, end=r.run_state[i + 1].t if i + 1 < len(r.run_state) else None,
                               label=p.state, seq=p.seq, version=p.version, epoch=p.epoch)
                       for i, p in enumerate(r.run_state))
        ws = []
        for w in workers.values():
            if w["run"] != r.run:
                continue
            own = sorted([Mark(t=f.t, seq=f.seq, label=f.disposition, ok=f.accepted,
                               kind="finish" if f.accepted else "finish_stale" if f.stale else "finish_after_end")
                          for f in r.finishes if f.worker == w["name"]] + marks.get(w["name"], []),
                         key=lambda m: m.seq)
            ws.append(Worker(name=w["name"], run=r.run, start=w["start"], end=w["end"],
                             end_kind=w["end_kind"], seq=w["seq"],
                             pauses=tuple((a, b) for a, b in w["pauses"]),
                             leases=_leases([p for p in r.leases if p.owner == w["name"]]), marks=own,
                             granted=w["name"] in granted))
        runs.append(RunLane(id=r.run, states=states, workers=tuple(ws), deadline=r.deadline,
                            disposition=r.disposition))
        for k in r.knowledge:
            pts = k.points
            knowledge.append(KeyLane(
                key=k.key, run=r.run, kind=k.kind or "effect",
                states=tuple(Segment(start=p.t, end=pts[i + 1].t if i + 1 < len(pts) else None,
                                     label=p.knowledge, seq=p.seq, epoch=p.epoch) for i, p in enumerate(pts)),
                stale=tuple(Mark(t=p.t, seq=p.seq, kind="stale_append", ok=False,
                                 label=f"epoch {p.epoch} (live {p.live_epoch})")
                            for p in pts if p.epoch != p.live_epoch)))
    starts = [r.get("start") or 0 for r in events[0].get("runs", []) if isinstance(r, dict)]
    return Lanes(runs=tuple(runs), effects=tuple(effects), transport=tuple(transport),
                 knowledge=tuple(knowledge), markers=tuple(sorted(markers, key=lambda m: (m.t, m.seq))),
                 start=min(starts or [0]), end=last)


def _leases(points) -> tuple[tuple[int, int, int], ...]:
    """One (from, until, epoch) span per epoch: renewals extend it."""
    spans: list[tuple[int, int, int]] = []
    for p in points:
        if p.op == "renew" and spans and spans[-1][2] == p.epoch:
            spans[-1] = (spans[-1][0], p.expires_at, p.epoch)
        else:
            spans.append((p.t, p.expires_at, p.epoch))
    return tuple(spans)
