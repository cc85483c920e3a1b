"""The three timelines of AR-08, as a frozen value built from one trace.

Per run: the **run-state** lane (every accepted checkpoint version with its state, owner,
epoch and writer, plus lease grants and finishes), the **remote** lane (what the services
really did: commits, releases, late arrivals, transport ground truth, each with its cause)
and the **knowledge** lane (the ledger's knowledge per semantic key). Commits by other
actors belong to no run and are kept apart.
"""
from __future__ import annotations

from dataclasses import dataclass

from .index import TraceIndex, build

#: Remote-lane kinds that are records of effects rather than transport observations.
RECORD_KINDS = frozenset({"effect", "released"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePoint:
    t: int
    seq: int
    version: int
    state: str
    owner: str | None
    epoch: int | None
    worker: str | None
    state_version: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasePoint:
    t: int
    seq: int
    op: str              # acquire | renew | release
    epoch: int
    owner: str
    expires_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishPoint:
    t: int
    seq: int
    disposition: str
    accepted: bool
    worker: str | None
    next_owner: str | None
    stale: bool = False     # refused for a lost lease (else, if refused: the run had already ended)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotePoint:
    t: int
    seq: int
    kind: str            # effect | released | late_arrival | response_lost | proxy_retry | ...
    service: str | None
    ref: str | None
    key: str | None
    cause: str | None    # adapter | proxy_retry | duplicate_delivery | other_actor | None
    call: int | None     # seq of the port call that caused it


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgePoint:
    t: int
    seq: int
    knowledge: str
    previous: str | None
    worker: str | None
    epoch: int | None
    live_epoch: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLane:
    key: str
    kind: str | None             # effect | compensation
    compensates: str | None
    points: tuple[KnowledgePoint, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTimeline:
    run: str
    deadline: int | None
    disposition: str | None
    run_state: tuple[StatePoint, ...]
    leases: tuple[LeasePoint, ...]
    finishes: tuple[FinishPoint, ...]
    remote: tuple[RemotePoint, ...]
    knowledge: tuple[KeyLane, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timelines:
    scenario: str | None
    origin_ms: int
    horizon_ms: int | None
    runs: tuple[RunTimeline, ...]
    other_actors: tuple[RemotePoint, ...] = ()

    def run(self, run_id: str) -> RunTimeline:
        for r in self.runs:
            if r.run == run_id:
                return r
        raise KeyError(run_id)


def _remote(ev: dict) -> RemotePoint:
    return RemotePoint(t=ev["t"], seq=ev["seq"], kind=ev["kind"], service=ev.get("service"),
                       ref=ev.get("ref"), key=ev.get("key"), cause=ev.get("cause"), call=ev.get("call"))


def from_index(ix: TraceIndex) -> Timelines:
    runs = []
    for run in ix.runs.values():
        states = tuple(StatePoint(t=cp["t"], seq=cp["seq"], version=cp["version"], state=cp["state"],
                                  owner=cp.get("owner"), epoch=cp.get("epoch"), worker=cp.get("worker"),
                                  state_version=cp.get("state_version")) for cp in run.checkpoints)
        leases = tuple(LeasePoint(t=e["t"], seq=e["seq"], op=e.get("op", ""), epoch=e["epoch"],
                                  owner=e.get("owner", ""), expires_at=e["expires_at"]) for e in run.leases)
        finishes = tuple(FinishPoint(t=f["t"], seq=f["seq"], disposition=f["disposition"],
                                     accepted=bool(f.get("accepted")), worker=f.get("worker"),
                                     next_owner=f.get("next_owner"), stale=bool(f.get("stale")))
                         for f in run.finishes)
        lanes = []
        for key, entries in run.ledger_by_key.items():
            entry = entries[0].get("entry") or {}
            lanes.append(KeyLane(key=key, kind=entry.get("kind"), compensates=entry.get("compensates"),
                                 points=tuple(KnowledgePoint(t=e["t"], seq=e["seq"], knowledge=e["knowledge"],
                                                             previous=e.get("previous"), worker=e.get("worker"),
                                                             epoch=e.get("epoch"),
                                                             live_epoch=e.get("live_epoch"))
                                              for e in entries)))
        runs.append(RunTimeline(run=run.id, deadline=run.deadline, disposition=run.disposition(),
                                run_state=states, leases=leases, finishes=finishes,
                                remote=tuple(_remote(ev) for ev in run.remote), knowledge=tuple(lanes)))
    return Timelines(scenario=ix.header.get("scenario"), origin_ms=ix.header.get("origin_ms") or 0,
                     horizon_ms=ix.header.get("horizon_ms"), runs=tuple(runs),
                     other_actors=tuple(_remote(ev) for ev in ix.other_actor))


def timelines(events: list[dict]) -> Timelines:
    """The three timelines of a trace (a list of event dicts, header first)."""
    return from_index(build(events))
