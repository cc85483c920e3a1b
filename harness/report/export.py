"""A trace in the formats other viewers read: ``crashlab export --format chrome|otel TRACE -o FILE``.

* **chrome**: the Chrome Trace Event format (JSON object form), which Perfetto
  (ui.perfetto.dev) and chrome://tracing open. The three timelines are three processes
  (``run state``, ``remote effects``, ``knowledge``); each run's checkpoint row, each worker,
  each service, each record a service holds and each ledger key is a thread; every port call
  is a slice on its worker's thread (from the call to its answer), each checkpoint state,
  record and knowledge state a slice on its own row; a worker's slice is named by how it ended
  (finished, replaced, crash, adapter_fault, alive); faults, crashes, pauses, cancellations,
  deployments, deadlines and the transport's ground truth are instants, and so are the inbox
  deliveries (on each run's ``inbox`` row) and an integration supervisor's lease grants; crashlab's
  own acts carry ``actor: crashlab``; a flow arrow leads from each call to the remote effect
  (commit or release) it caused.
* **otel**: OpenTelemetry spans as OTLP/JSON (an ``ExportTraceServiceRequest``): one span for
  the scenario, one per run, one per worker, one per port call (kind CLIENT, status ERROR for
  an error answer) and one per record a service holds (kind SERVER, a child of the call that
  made it). Checkpoints, ledger appends, faults, world events and inbox deliveries are span
  events (crashlab's own acts with ``crashlab.actor``). Times are
  the scenario clock as Unix nanoseconds: ``(origin_ms + t) * 10**6``, so an adapter that stamps
  its own spans from ``clock.now`` the same way lines up with crashlab's.

Both are read from the trace alone (nothing is re-run), are deterministic (the same trace gives
the same bytes) and use simulated time: one trace millisecond is one millisecond in the viewer.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..vocab.errors import UsageError
from ..vocab.files import atomic_write_text, check_output_file
from ..world.trace import read_jsonl
from .lanes import CRASHLAB, lanes as extract_lanes

FORMATS = ("chrome", "otel")
PROCESSES = ("run state", "remote effects", "knowledge")
#: Port calls that only read the harness's own clock, randomness or an empty inbox: exported like
#: every other call (they are what the adapter did), under their own category.
QUIET_PORTS = frozenset({"clock", "random"})
MAX_ARG_CHARS = 600


def _clip_value(value: Any) -> Any:
    """A call's arguments or answer as an event argument: as written when short, else the first
    MAX_ARG_CHARS characters of its JSON (the trace holds it whole)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value if len(text) <= MAX_ARG_CHARS else text[:MAX_ARG_CHARS] + "… (clipped; the trace holds it whole)"


class _Calls:
    """The port calls of a trace with their results, by worker, in order."""

    def __init__(self, events: list[dict]) -> None:
        results = {e.get("call"): e for e in events if e.get("lane") == "port" and e.get("kind") == "result"}
        self.items: list[tuple[dict, dict | None]] = [
            (e, results.get(e["seq"])) for e in events if e.get("lane") == "port" and e.get("kind") == "call"]
        self.by_seq = {call["seq"]: (call, res) for call, res in self.items}


def _outcome(res: dict | None) -> str:
    if res is None:
        return "no result"
    if res.get("ok"):
        return "ok"
    err = res.get("error") if isinstance(res.get("error"), dict) else {}
    return str(err.get("code") or "error") + ("" if err.get("definite") else " (indefinite)")


def _effect_name(kind: str, ev: dict) -> str:
    if kind == "released":
        return f"release of {ev.get('ref')}" + (f" ({ev.get('release_ref')})" if ev.get("release_ref") else "")
    return f"{ev.get('op') or kind} {ev.get('ref') or ''}".strip()


def _grants(events: list[dict]) -> list[dict]:
    """The lease grants an integration supervisor made (``granted_by``): crashlab's acts, not a worker's calls."""
    return [e for e in events if e.get("kind") == "lease" and e.get("granted_by")]


def _grant_name(ev: dict) -> str:
    return f"lease epoch {ev.get('epoch')} granted by crashlab"


def _delivery_name(ev: dict) -> str:
    data = ev.get("event") if isinstance(ev.get("event"), dict) else {}
    return f"inbox delivery {data.get('type')} {data.get('event_id')}".strip()


# --------------------------------------------------------------------------- chrome
class _Threads:
    """Thread ids per (process, row name), numbered in order of first use; their metadata."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, str], int] = {}

    def __call__(self, pid: int, name: str) -> int:
        key = (pid, name)
        if key not in self.ids:
            self.ids[key] = len(self.ids) + 1
        return self.ids[key]

    def metadata(self) -> list[dict]:
        out: list[dict] = []
        for pid, name in enumerate(PROCESSES, 1):
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for (pid, name), tid in self.ids.items():
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        return out


def _us(t_ms: int) -> int:
    return int(t_ms) * 1000


def chrome_events(events: list[dict]) -> dict:
    """The trace as a Chrome Trace Event document (``{"traceEvents": [...], ...}``)."""
    head = events[0]
    data = extract_lanes(events)
    end = max(data.end, max((int(e.get("t") or 0) for e in events), default=0))
    tid = _Threads()
    out: list[dict] = []
    RUN, REMOTE, KNOW = 1, 2, 3

    def slice_(pid, row, name, cat, start, stop, args):
        out.append({"ph": "X", "name": name, "cat": cat, "ts": _us(start), "dur": _us(max(0, stop - start)),
                    "pid": pid, "tid": tid(pid, row), "args": args})

    def instant(pid, row, name, cat, t, args, scope="t"):
        ev = {"ph": "i", "name": name, "cat": cat, "ts": _us(t), "s": scope, "args": args}
        if scope == "g":
            ev.update(pid=pid, tid=0)
        else:
            ev.update(pid=pid, tid=tid(pid, row))
        out.append(ev)

    # run state: checkpoint states per run, then each worker's life with its calls inside it
    worker_end: dict[str, int] = {}
    for run in data.runs:
        row = f"{run.id} checkpoint"
        for s in run.states:
            slice_(RUN, row, s.label, "checkpoint", s.start, s.end if s.end is not None else end,
                   {"seq": s.seq, "version": s.version, "epoch": s.epoch})
        for w in run.workers:
            stop = w.end if w.end is not None else end
            worker_end[w.name] = stop
            slice_(RUN, w.name, f"{w.name} ({w.end_kind})", "worker", w.start, stop,
                   {"seq": w.seq, "end": w.end_kind, "leases": [list(x) for x in w.leases]})
            for m in w.marks:
                instant(RUN, w.name, f"{m.kind} {m.label}".strip(), m.kind, m.t,
                        {"seq": m.seq, "accepted": m.ok, **({"actor": m.actor} if m.actor else {})})
    # crashlab's own acts on a worker that the lanes keep as spans: an integration supervisor's lease grants
    for ev in _grants(events):
        if (RUN, str(ev.get("worker"))) in tid.ids:
            instant(RUN, str(ev.get("worker")), _grant_name(ev), "crashlab", int(ev.get("t") or 0),
                    {"seq": ev["seq"], "actor": CRASHLAB, "epoch": ev.get("epoch")})
    # inbox deliveries (input events, a late callback among them): instants on each run's inbox row
    for ev in events:
        if ev.get("lane") == "world" and ev.get("kind") == "deliver":
            instant(RUN, f"{ev.get('run')} inbox", _delivery_name(ev), "inbox", int(ev.get("t") or 0),
                    {"seq": ev["seq"], "event": _clip_value(ev.get("event"))})
    calls = _Calls(events)
    call_slot: dict[int, tuple[int, int, int]] = {}      # call seq -> (pid, tid, ts) of its slice
    by_worker: dict[str, list[tuple[dict, dict | None]]] = {}
    for call, res in calls.items:
        by_worker.setdefault(str(call.get("worker")), []).append((call, res))
    for worker, items in by_worker.items():
        limit = worker_end.get(worker, end)
        for i, (call, res) in enumerate(items):
            t = int(call.get("t") or 0)
            back = int(res["t"]) if res is not None else limit
            nxt = int(items[i + 1][0].get("t") or 0) if i + 1 < len(items) else limit
            stop = max(t, min(back, nxt, max(limit, t)))   # properly nested inside the worker's slice
            port, op = str(call.get("port")), str(call.get("op"))
            args = {"seq": call["seq"], "args": _clip_value(call.get("args")), "outcome": _outcome(res)}
            if res is not None:
                args["answer_seq"] = res["seq"]
                args["answer"] = _clip_value(res.get("value") if res.get("ok") else res.get("error"))
                if back != stop:
                    args["answer_at_ms"] = back
                if res.get("delivered") is False:
                    args["delivered"] = False
            slice_(RUN, worker, f"{port}.{op}", "port" if port not in QUIET_PORTS else "port.quiet", t, stop, args)
            call_slot[call["seq"]] = (RUN, tid(RUN, worker), _us(t))
    # remote effects: records as bars, the transport's ground truth as instants, flows from the calls
    by_seq = {e["seq"]: e for e in events}
    rows: dict[tuple[str, str], str] = {}
    for e in data.effects:
        label = f"{e.ref} = release of {e.compensates}" if e.compensates else f"{e.service} {e.ref}"
        if e.cause == "other_actor":
            label = f"other actors ({e.service})"
        rows[(e.service, e.ref)] = label
        stop = e.released if e.released is not None else end
        ev = by_seq.get(e.seq, {})
        slice_(REMOTE, label, f"{e.ref} held" if e.cause != "other_actor" else f"{e.ref} (other actor)", "record",
               e.start, max(stop, e.start), {"seq": e.seq, "key": e.key, "cause": e.cause, "run": e.run,
                                             "released_seq": e.released_seq})
    flow = 0
    for ev in events:
        if ev.get("lane") != "remote":
            continue
        kind, t = ev["kind"], int(ev.get("t") or 0)
        service = str(ev.get("service") or "")
        if kind == "effect":
            row = rows.get((service, str(ev.get("ref"))), f"{service} (service)")
        elif kind == "released":
            row = rows.get((service, str(ev.get("ref"))), f"{service} (service)")
            instant(REMOTE, row, _effect_name(kind, ev), "release", t, {"seq": ev["seq"], "key": ev.get("key")})
        else:
            row = f"{service} (service)"
            instant(REMOTE, row, kind.replace("_", " "), "transport", t,
                    {"seq": ev["seq"], "op": ev.get("op"), "call": ev.get("call")})
        source = call_slot.get(ev.get("call")) if kind in ("effect", "released") else None
        if source is not None:
            flow += 1
            pid, th, ts = source
            name = _effect_name(kind, ev)
            out.append({"ph": "s", "id": flow, "name": name, "cat": "effect", "ts": ts, "pid": pid, "tid": th})
            out.append({"ph": "f", "bp": "e", "id": flow, "name": name, "cat": "effect", "ts": _us(t), "pid": REMOTE,
                        "tid": tid(REMOTE, row)})
    # knowledge: one row per ledger key
    many = len(data.runs) > 1
    for k in data.knowledge:
        row = (f"{k.run}: " if many and k.run else "") + k.key + (" (comp.)" if k.kind == "compensation" else "")
        for s in k.states:
            slice_(KNOW, row, s.label, "knowledge", s.start, s.end if s.end is not None else end,
                   {"seq": s.seq, "epoch": s.epoch, "run": k.run})
        for m in k.stale:
            instant(KNOW, row, "append under a stale epoch", "stale", m.t, {"seq": m.seq, "epoch": m.label})
    # faults and world events: on the worker's row when they name one, else across the whole trace
    for m in data.markers:
        ev = by_seq.get(m.seq) if m.seq else None
        worker = (ev or {}).get("worker")
        if worker and (RUN, worker) in tid.ids:
            instant(RUN, worker, m.label or m.kind, m.kind, m.t, {"seq": m.seq, **({"actor": m.actor} if m.actor else {})})
        else:
            instant(RUN, "", m.label or m.kind, m.kind, m.t,
                    {"seq": m.seq or None, **({"actor": m.actor} if m.actor else {})}, scope="g")
    other = {"scenario": head.get("scenario"), "title": head.get("title"), "seed": head.get("seed"),
             "adapter": head.get("adapter"), "origin_ms": head.get("origin_ms"), "crashlab": head.get("harness"),
             "clock": "simulated milliseconds since the scenario origin (ts is in microseconds)"}
    return {"traceEvents": tid.metadata() + out, "displayTimeUnit": "ms", "otherData": other}


# --------------------------------------------------------------------------- otel
def _hex(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def _attr(key: str, value: Any) -> dict:
    if isinstance(value, bool):
        v: dict = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, str):
        v = {"stringValue": value}
    else:
        v = {"stringValue": json.dumps(value, sort_keys=True, ensure_ascii=False)[:MAX_ARG_CHARS]}
    return {"key": key, "value": v}


def _attrs(**kw: Any) -> list[dict]:
    return [_attr(f"crashlab.{k}", v) for k, v in kw.items() if v is not None]


SPAN_INTERNAL, SPAN_SERVER, SPAN_CLIENT = 1, 2, 3
STATUS_OK, STATUS_ERROR = 1, 2


def otel_document(events: list[dict]) -> dict:
    """The trace as an OTLP/JSON ExportTraceServiceRequest."""
    head = events[0]
    origin = int(head.get("origin_ms") or 0)
    data = extract_lanes(events)
    end = max(data.end, max((int(e.get("t") or 0) for e in events), default=0))
    ident = f"{head.get('scenario')}|{head.get('seed')}|{head.get('adapter')}"
    trace_id = _hex(ident, 32)

    def ns(t: int) -> str:
        return str((origin + int(t)) * 1_000_000)

    def span_id(name: str) -> str:
        return _hex(f"{ident}|{name}", 16)

    spans: list[dict] = []
    span_events: dict[str, list[dict]] = {}

    def span(sid, parent, name, kind, start, stop, attrs, status=None):
        s = {"traceId": trace_id, "spanId": sid, "name": name, "kind": kind, "startTimeUnixNano": ns(start),
             "endTimeUnixNano": ns(max(start, stop)), "attributes": attrs, "events": span_events.setdefault(sid, [])}
        if parent:
            s["parentSpanId"] = parent
        if status is not None:
            s["status"] = status
        spans.append(s)
        return sid

    def event(sid, name, t, attrs):
        span_events.setdefault(sid, []).append({"timeUnixNano": ns(t), "name": name, "attributes": attrs})

    root = span(span_id("scenario"), None, f"scenario {head.get('scenario')}", SPAN_INTERNAL, 0, end,
                _attrs(scenario=head.get("scenario"), seed=head.get("seed"), adapter=head.get("adapter")))
    run_span, worker_span = {}, {}
    for run in data.runs:
        run_span[run.id] = span(span_id(f"run {run.id}"), root, f"run {run.id}", SPAN_INTERNAL, data.start, end,
                                _attrs(run=run.id, disposition=run.disposition, deadline_ms=run.deadline))
        for s in run.states:
            event(run_span[run.id], f"checkpoint {s.label}", s.start, _attrs(seq=s.seq, version=s.version,
                                                                              epoch=s.epoch))
        for w in run.workers:
            worker_span[w.name] = span(span_id(f"worker {w.name}"), run_span[run.id], f"worker {w.name}",
                                       SPAN_INTERNAL, w.start, w.end if w.end is not None else end,
                                       _attrs(worker=w.name, end=w.end_kind, seq=w.seq),
                                       {"code": STATUS_ERROR, "message": w.end_kind}
                                       if w.end_kind in ("crash", "adapter_fault") else None)
            for m in w.marks:
                event(worker_span[w.name], f"{m.kind} {m.label}".strip(), m.t,
                      _attrs(seq=m.seq, accepted=m.ok, actor=m.actor or None))
    for ev in _grants(events):
        sid = worker_span.get(str(ev.get("worker")))
        if sid is not None:
            event(sid, _grant_name(ev), int(ev.get("t") or 0), _attrs(seq=ev["seq"], actor=CRASHLAB, epoch=ev.get("epoch")))
    for ev in events:
        if ev.get("lane") == "world" and ev.get("kind") == "deliver":
            event(run_span.get(str(ev.get("run")), root), _delivery_name(ev), int(ev.get("t") or 0),
                  _attrs(seq=ev["seq"], event=ev.get("event")))
    for k in data.knowledge:
        sid = run_span.get(k.run or "", root)
        for s in k.states:
            event(sid, f"ledger {k.key} {s.label}", s.start, _attrs(seq=s.seq, key=k.key, knowledge=s.label,
                                                                     kind=k.kind, epoch=s.epoch))
    calls = _Calls(events)
    call_span: dict[int, str] = {}
    for call, res in calls.items:
        worker = str(call.get("worker"))
        parent = worker_span.get(worker) or run_span.get(str(call.get("run")), root)
        t = int(call.get("t") or 0)
        back = int(res["t"]) if res is not None else t
        port, op = str(call.get("port")), str(call.get("op"))
        outcome = _outcome(res)
        status = None if res is None else ({"code": STATUS_OK} if res.get("ok")
                                           else {"code": STATUS_ERROR, "message": outcome})
        call_span[call["seq"]] = span(span_id(f"call {call['seq']}"), parent, f"{port}.{op}", SPAN_CLIENT, t, back,
                                      _attrs(seq=call["seq"], port=port, op=op, worker=worker, outcome=outcome,
                                             delivered=None if res is None else res.get("delivered") is not False,
                                             args=call.get("args")), status)
    by_seq = {e["seq"]: e for e in events}
    for e in data.effects:
        ev = by_seq.get(e.seq, {})
        parent = call_span.get(ev.get("call")) or run_span.get(e.run or "", root)
        span(span_id(f"record {e.seq}"), parent, f"{e.service} {e.ref} held", SPAN_SERVER, e.start,
             e.released if e.released is not None else end,
             _attrs(seq=e.seq, service=e.service, ref=e.ref, key=e.key, cause=e.cause, released_seq=e.released_seq))
    for ev in events:
        if ev.get("lane") == "remote" and ev["kind"] != "effect":
            sid = call_span.get(ev.get("call")) or run_span.get(str(ev.get("run")), root)
            event(sid, _effect_name(ev["kind"], ev) if ev["kind"] == "released" else ev["kind"].replace("_", " "),
                  int(ev.get("t") or 0), _attrs(seq=ev["seq"], service=ev.get("service"), key=ev.get("key")))
    for m in data.markers:
        ev = by_seq.get(m.seq, {}) if m.seq else {}
        sid = worker_span.get(str(ev.get("worker"))) or run_span.get(str(ev.get("run")), root)
        event(sid, m.label or m.kind, m.t, _attrs(seq=m.seq or None, kind=m.kind, actor=m.actor or None))
    for events_of in span_events.values():
        events_of.sort(key=lambda x: int(x["timeUnixNano"]))
    resource = [_attr("service.name", "crashlab"), *_attrs(scenario=head.get("scenario"), seed=head.get("seed"),
                                                             adapter=head.get("adapter"), origin_ms=origin)]
    return {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": {"name": "crashlab", "version": str(head.get("harness"))},
                                               "spans": spans}]}]}


# --------------------------------------------------------------------------- the command
def export_trace(trace: str | Path, fmt: str) -> str:
    """The trace at ``trace`` in format ``fmt`` (chrome or otel), as JSON text. A file that is
    not a crashlab trace or an unknown format is a usage error naming it."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: unknown export format; choose one of {', '.join(FORMATS)}")
    events = read_jsonl(trace)
    doc = chrome_events(events) if fmt == "chrome" else otel_document(events)
    if fmt == "chrome":
        body = ",\n".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in doc["traceEvents"])
        rest = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"}, ensure_ascii=False,
                          separators=(",", ":"))
        return '{"traceEvents":[\n' + body + "\n]," + rest[1:] + "\n"
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"


def cmd_export(args) -> int:
    import sys

    out = check_output_file(args.output, "-o") if args.output and args.output != "-" else None
    if out is not None and Path(args.trace).exists() and out.resolve() == Path(args.trace).resolve():
        raise UsageError(f"-o {out}: is the trace this command reads; give another path")
    text = export_trace(args.trace, args.format)
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text)
        print(f"wrote {out} ({args.format}: "
              + ("open it in ui.perfetto.dev or chrome://tracing" if args.format == "chrome"
                 else "OTLP/JSON, post it to a collector's /v1/traces") + ")", file=sys.stderr)
    return 0
