"""What a figure adds to the three timelines to tell the story, read from one trace:

* the adapter's **calls to its services** (sends and reads) with their outcome, drawn as
  arrows between the worker's row and the service's row, like a message-sequence diagram;
* every **inbox delivery**, duplicates marked, each with what the run did with it;
* the **authority** a run held: approvals requested, granted (until their expiry),
  revoked, and the checks that found no live approval;
* the stretches where the ledger's **knowledge disagrees with remote truth** ("that
  mismatch is the lesson").

Pure data (no matplotlib), derived from the trace events only.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..vocab.model import is_dispatch
from .lanes import Lanes

NEVER_MS = 2 ** 62


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One call from a worker to a service, and how it came back."""

    worker: str
    service: str
    op: str
    t: int                    # sent
    seq: int
    back: int | None          # the result's time (None: no result recorded)
    outcome: str              # ok | timeout | refused | unavailable | ... (the error code)
    definite: bool
    delivered: bool           # False: the worker had crashed before it saw the result
    send: bool                # True: a call that may cause an effect; False: a read


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    t: int
    seq: int
    run: str | None
    event_id: str
    type: str
    copy: int                 # 1 for the first delivery of this event id, 2.. for duplicates
    disposition: str          # what the run did with it


@dataclass(frozen=True, slots=True, kw_only=True)
class Authority:
    run: str | None
    kind: str                 # requested | granted | revoked | refused
    t: int
    seq: int
    until: int | None = None  # granted: its expiry (None: never)
    label: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Mismatch:
    key: str
    start: int
    end: int
    kind: str                 # contradicts | lags


@dataclass(frozen=True, slots=True, kw_only=True)
class Story:
    calls: tuple[Call, ...]
    deliveries: tuple[Delivery, ...]
    authority: tuple[Authority, ...]
    mismatches: tuple[Mismatch, ...]


READ_OPS = frozenset({"lookup", "search", "get", "read", "status", "wait", "aggregate", "quantity", "describe",
                      "read_version", "job_status", "by_key"})


def calls(events: list[dict]) -> tuple[Call, ...]:
    services = set((events[0].get("services") or {}).keys()) if events else set()
    results = {ev.get("call"): ev for ev in events if ev.get("lane") == "port" and ev.get("kind") == "result"}
    out = []
    for ev in events:
        if ev.get("lane") != "port" or ev.get("kind") != "call" or ev.get("port") not in services:
            continue
        if ev.get("op") == "describe":
            continue
        res = results.get(ev.get("seq"))
        err = (res or {}).get("error") or {}
        outcome = "ok" if res is not None and res.get("ok") else (str(err.get("code")) if res else "no result")
        op = str(ev.get("op"))
        out.append(Call(worker=str(ev.get("worker")), service=str(ev.get("port")), op=op, t=int(ev.get("t") or 0),
                        seq=int(ev.get("seq") or 0), back=int(res["t"]) if res is not None else None,
                        outcome=outcome, definite=bool(err.get("definite")) if res else False,
                        delivered=res is None or res.get("delivered") is not False,
                        send=is_dispatch(str(ev.get("port")), op) or op not in READ_OPS))
    return tuple(out)


def deliveries(events: list[dict]) -> tuple[Delivery, ...]:
    """Every inbox delivery; what the run did with it: the adapter's own record of the event
    when its checkpoint keeps one, else whether the next checkpoint after the worker read it
    changed the run's state."""
    seen: dict[tuple, int] = {}
    recorded: dict[tuple, str] = {}
    read_at: dict[tuple, tuple[str, int]] = {}
    state_after: list[tuple[int, str | None, str, str]] = []   # (seq, worker, state, previous state)
    calls_by_seq = {ev["seq"]: ev for ev in events if ev.get("kind") == "call"}
    last_state: dict[str, str] = {}
    for ev in events:
        kind = ev.get("kind")
        if kind == "checkpoint":
            run = str(ev.get("run"))
            evidence = ((ev.get("checkpoint") or {}).get("evidence") or {}) if isinstance(ev.get("checkpoint"), dict) \
                else {}
            for rec in evidence.get("events") or () if isinstance(evidence, dict) else ():
                if isinstance(rec, dict) and rec.get("disposition") is not None:
                    recorded[(run, rec.get("seq"))] = str(rec["disposition"])
            state_after.append((ev["seq"], ev.get("worker"), str(ev.get("state")), last_state.get(run, "INTAKE")))
            last_state[run] = str(ev.get("state"))
        elif kind == "result" and ev.get("ok"):
            call = calls_by_seq.get(ev.get("call")) or {}
            if call.get("port") == "inbox":
                for item in (ev.get("value") or {}).get("events") or ():
                    if isinstance(item, dict):
                        read_at.setdefault((str(ev.get("run")), item.get("seq")), (str(ev.get("worker")), ev["seq"]))
    out = []
    for ev in events:
        if ev.get("lane") != "world" or ev.get("kind") != "deliver":
            continue
        body = ev.get("event") if isinstance(ev.get("event"), dict) else {}
        run = ev.get("run")
        key = (run, body.get("event_id"))
        seen[key] = seen.get(key, 0) + 1
        inbox_seq = body.get("seq")
        disposition = recorded.get((str(run), inbox_seq))
        if disposition is None:
            where = read_at.get((str(run), inbox_seq))
            if where is None:
                disposition = "never read"
            else:
                worker, at = where
                nxt = next(((s, st, prev) for s, w, st, prev in state_after if s > at and w == worker), None)
                disposition = ("read; no checkpoint followed" if nxt is None
                               else "no transition" if nxt[1] == nxt[2] else f"→ {nxt[1]}")
        out.append(Delivery(t=int(ev.get("t") or 0), seq=int(ev["seq"]), run=run, event_id=str(body.get("event_id")),
                            type=str(body.get("type")), copy=seen[key], disposition=disposition))
    return tuple(out)


def authority(events: list[dict]) -> tuple[Authority, ...]:
    """Approvals requested, granted (until expiry), revoked, and checks that found none live.
    Empty for a run that only ever held a standing approval."""
    calls_by_seq = {ev["seq"]: ev for ev in events if ev.get("kind") == "call"}
    out = []
    for ev in events:
        kind, lane, t = ev.get("kind"), ev.get("lane"), int(ev.get("t") or 0)
        if lane == "run" and kind == "approval_requested":
            out.append(Authority(run=ev.get("run"), kind="requested", t=t, seq=ev["seq"],
                                 label=str(ev.get("request_id") or "")))
        elif lane == "world" and kind == "approval_granted":
            until = ev.get("expires_at")
            out.append(Authority(run=ev.get("run"), kind="granted", t=t, seq=ev["seq"],
                                 until=None if until is None or until >= NEVER_MS else int(until),
                                 label=str(ev.get("approval_id") or "")))
        elif lane == "world" and kind in ("revoke", "capability_change"):
            out.append(Authority(run=ev.get("run"), kind="revoked", t=t, seq=ev["seq"],
                                 label="revoked" if kind == "revoke" else "capability changed"))
        elif lane == "port" and kind == "result" and ev.get("ok"):
            call = calls_by_seq.get(ev.get("call")) or {}
            value = ev.get("value") if isinstance(ev.get("value"), dict) else {}
            if call.get("port") == "authority" and value.get("live") is False:
                out.append(Authority(run=ev.get("run"), kind="refused", t=t, seq=ev["seq"],
                                     label=str(value.get("reason") or "not live")))
    return tuple(out)


def mismatches(data: Lanes) -> tuple[Mismatch, ...]:
    """Per ledger key, the stretches where its knowledge disagrees with what the services
    really hold under that key: *contradicts* (CONFIRMED with no record; PROPOSED, REJECTED
    or COMPENSATED while a record stands) or *lags* (SENT_UNKNOWN while the service already
    knows). Compensation keys compare with the release records they name."""
    out = []
    for lane in data.knowledge:
        records = [e for e in data.effects if e.key == lane.key and e.cause != "other_actor"]
        if lane.kind == "compensation":
            spans = [(e.start, None) for e in records]
        else:
            spans = [(e.start, e.released) for e in records if not e.compensates]

        def present(t: int) -> bool:
            return any(a <= t and (b is None or t < b) for a, b in spans)

        cuts = sorted({s.start for s in lane.states} | {a for a, _ in spans} | {b for _, b in spans if b is not None})
        end = max([s.end or data.end for s in lane.states] + [data.end])
        for i, a in enumerate(cuts):
            b = cuts[i + 1] if i + 1 < len(cuts) else end
            if b <= a:
                continue
            state = next((s.label for s in reversed(lane.states) if s.start <= a), None)
            if state is None:
                continue
            kind = _disagreement(state, present(a), any(x <= a for x, _ in spans), lane.kind == "compensation")
            if kind is None:
                continue
            if out and out[-1].key == lane.key and out[-1].kind == kind and out[-1].end == a:
                out[-1] = Mismatch(key=lane.key, start=out[-1].start, end=b, kind=kind)
            else:
                out.append(Mismatch(key=lane.key, start=a, end=b, kind=kind))
    return tuple(out)


def _disagreement(state: str, present: bool, ever: bool, compensation: bool) -> str | None:
    """How a knowledge state compares with the service's record at one moment: None (they
    agree, or the knowledge is honestly unknown before anything happened), "lags" or
    "contradicts". For a compensation key, the record is the release."""
    if state == "SENT_UNKNOWN":
        return "lags" if present or (ever and not compensation) else None
    if state in ("PROPOSED", "REJECTED"):
        return "contradicts" if present else None
    if state in ("CONFIRMED", "COMPENSATED") and compensation:
        return None if present else "contradicts"
    if state == "CONFIRMED":
        return None if ever else "contradicts"
    if state == "COMPENSATION_PROPOSED":
        return "lags" if ever and not present else None
    if state == "COMPENSATED":
        return "contradicts" if present else None
    return None


def story(events: list[dict], data: Lanes) -> Story:
    return Story(calls=calls(events), deliveries=deliveries(events), authority=authority(events),
                 mismatches=mismatches(data))
