"""``crashlab export``: a trace in the Chrome Trace Event format (Perfetto, chrome://tracing) and as
OpenTelemetry spans (OTLP/JSON).

No Chrome-trace consumer runs offline here (the ``perfetto`` package's trace processor downloads
its binary when first used), so the Chrome export is checked against a JSON Schema of the format
(written from the Trace Event Format document: the fields each phase requires) and against the
rules a viewer relies on: slices on one thread nest properly, every flow has a start and an end,
each bound to a slice on its thread. The OTLP export is checked by a JSON Schema and, when the
``opentelemetry-proto`` package is installed, parsed with the official protobuf messages.
Each checker is shown catching a document that breaks its rule.
"""
from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import jsonschema
import pytest

from crashlab.cli import main
from crashlab.report.export import chrome_events, export_trace, otel_document
from crashlab.world.trace import read_jsonl

TRACES = Path(__file__).resolve().parent.parent / "traces"
SAMPLES = ["t2-commit-before-record", "t4-approval-wait-crash", "t6-duplicate-input-event",
           "t8-compensation-failure", "matrix-lease-loss", "combined-cancel-after-stale-resume",
           "seed002-duplicate-retry-request", "matrix-conflict-in-flight-second-run"]

_ID = {"type": "integer", "minimum": 0}
_COMMON = {"name": {"type": "string"}, "cat": {"type": "string"}, "ts": {"type": "integer", "minimum": 0},
           "pid": _ID, "tid": _ID, "args": {"type": "object"}}
CHROME_SCHEMA = {
    "type": "object", "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "required": ["ph", "name", "pid", "tid", "args"],
             "properties": {**_COMMON, "ph": {"const": "M"},
                            "name": {"enum": ["process_name", "process_sort_index", "thread_name",
                                              "thread_sort_index"]}},
             "additionalProperties": False},
            {"type": "object", "required": ["ph", "name", "cat", "ts", "dur", "pid", "tid"],
             "properties": {**_COMMON, "ph": {"const": "X"}, "dur": {"type": "integer", "minimum": 0}},
             "additionalProperties": False},
            {"type": "object", "required": ["ph", "name", "ts", "s", "pid", "tid"],
             "properties": {**_COMMON, "ph": {"const": "i"}, "s": {"enum": ["g", "p", "t"]}},
             "additionalProperties": False},
            {"type": "object", "required": ["ph", "id", "name", "cat", "ts", "pid", "tid"],
             "properties": {**_COMMON, "ph": {"enum": ["s", "t", "f"]}, "id": _ID, "bp": {"const": "e"}},
             "additionalProperties": False},
        ]}},
    },
}

_ANY = {"type": "object", "minProperties": 1, "maxProperties": 1,
        "properties": {"stringValue": {"type": "string"}, "boolValue": {"type": "boolean"},
                       "intValue": {"type": "string", "pattern": "^-?[0-9]+$"}, "doubleValue": {"type": "number"}},
        "additionalProperties": False}
_ATTRS = {"type": "array", "items": {"type": "object", "required": ["key", "value"],
                                     "properties": {"key": {"type": "string"}, "value": _ANY},
                                     "additionalProperties": False}}
_NANOS = {"type": "string", "pattern": "^[0-9]+$"}
OTLP_SCHEMA = {
    "type": "object", "required": ["resourceSpans"], "additionalProperties": False,
    "properties": {"resourceSpans": {"type": "array", "items": {
        "type": "object", "required": ["resource", "scopeSpans"],
        "properties": {"resource": {"type": "object", "properties": {"attributes": _ATTRS}},
                       "scopeSpans": {"type": "array", "items": {
                           "type": "object", "required": ["scope", "spans"],
                           "properties": {"scope": {"type": "object", "required": ["name"]},
                                          "spans": {"type": "array", "items": {
                                              "type": "object", "additionalProperties": False,
                                              "required": ["traceId", "spanId", "name", "kind", "startTimeUnixNano",
                                                           "endTimeUnixNano"],
                                              "properties": {
                                                  "traceId": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                                                  "spanId": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
                                                  "parentSpanId": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
                                                  "name": {"type": "string"}, "kind": {"enum": [1, 2, 3, 4, 5]},
                                                  "startTimeUnixNano": _NANOS, "endTimeUnixNano": _NANOS,
                                                  "attributes": _ATTRS,
                                                  "events": {"type": "array", "items": {
                                                      "type": "object", "required": ["timeUnixNano", "name"],
                                                      "properties": {"timeUnixNano": _NANOS, "name": {"type": "string"},
                                                                     "attributes": _ATTRS},
                                                      "additionalProperties": False}},
                                                  "status": {"type": "object", "required": ["code"],
                                                             "properties": {"code": {"enum": [0, 1, 2]},
                                                                            "message": {"type": "string"}}}}}}}}}}}}},
}


def chrome_problems(doc: dict) -> list[str]:
    """What a viewer would reject or misdraw: partially overlapping slices on one thread, a flow
    without both ends, a flow end that no slice on its thread encloses, an unnamed process."""
    problems = []
    events = doc["traceEvents"]
    slices: dict[tuple, list[tuple[int, int]]] = {}
    for e in events:
        if e["ph"] == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for thread, spans in slices.items():
        stack: list[int] = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= a:
                stack.pop()
            if stack and b > stack[-1]:
                problems.append(f"thread {thread}: slice {a}..{b} overlaps its parent ending at {stack[-1]}")
            stack.append(b)
    ends: dict[int, dict[str, dict]] = {}
    for e in events:
        if e["ph"] in "sf":
            ends.setdefault(e["id"], {})[e["ph"]] = e
    for fid, pair in ends.items():
        if set(pair) != {"s", "f"}:
            problems.append(f"flow {fid} lacks its {'start' if 's' not in pair else 'end'}")
            continue
        if pair["s"]["ts"] > pair["f"]["ts"]:
            problems.append(f"flow {fid} ends before it starts")
        for e in pair.values():
            if not any(a <= e["ts"] <= b for a, b in slices.get((e["pid"], e["tid"]), ())):
                problems.append(f"flow {fid}: no slice on its thread encloses {e['ph']} at {e['ts']}")
    named = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    problems += [f"process {pid} has no name" for pid in sorted({e["pid"] for e in events} - named)]
    return problems


def load(name: str) -> list[dict]:
    return read_jsonl(TRACES / f"{name}.jsonl")


@pytest.mark.parametrize("name", SAMPLES)
def test_the_chrome_export_is_a_well_formed_trace_event_document(name):
    doc = json.loads(export_trace(TRACES / f"{name}.jsonl", "chrome"))
    jsonschema.validate(doc, CHROME_SCHEMA)
    assert chrome_problems(doc) == []
    procs = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert procs == ["run state", "remote effects", "knowledge"]


def test_the_checkers_catch_what_a_viewer_rejects():
    doc = chrome_events(load("t8-compensation-failure"))
    bad = copy.deepcopy(doc)
    x = [e for e in bad["traceEvents"] if e["ph"] == "X" and e["cat"] == "port" and e["dur"] > 0][-1]
    x["dur"] += 10**12                                  # runs past the worker that made it
    assert any("overlaps its parent" in p for p in chrome_problems(bad))
    bad = copy.deepcopy(doc)
    bad["traceEvents"] = [e for e in bad["traceEvents"] if e["ph"] != "f"]
    assert any("lacks its end" in p for p in chrome_problems(bad))
    bad = copy.deepcopy(doc)
    next(e for e in bad["traceEvents"] if e["ph"] == "X")["ts"] = "0"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, CHROME_SCHEMA)
    bad = otel_document(load("t8-compensation-failure"))
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = 36000000000000   # int, not string
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, OTLP_SCHEMA)


def test_the_chrome_export_shows_calls_faults_and_a_flow_from_each_send_to_its_effect():
    events = load("t8-compensation-failure")
    doc = chrome_events(events)
    te = doc["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in te if e["name"] == "thread_name"}
    calls = [e for e in te if e["ph"] == "X" and e["cat"].startswith("port")]
    assert len(calls) == sum(1 for e in events if e["kind"] == "call")
    assert {threads[(e["pid"], e["tid"])] for e in calls} == {"run-82/w1", "run-82/w2"}
    faults = [e for e in te if e["ph"] == "i" and e["cat"] in ("fault", "crash")]
    assert len(faults) == sum(1 for e in events if e["lane"] == "fault")
    # every commit and release the services made because of a call is the end of a flow from that call
    caused = [e for e in events if e["lane"] == "remote" and e["kind"] in ("effect", "released") and e.get("call")]
    starts = {e["id"]: e for e in te if e["ph"] == "s"}
    finishes = [e for e in te if e["ph"] == "f"]
    assert len(finishes) == len(caused) == 3
    by_ts = {e["ts"]: e for e in calls}
    for cause, f in zip(caused, finishes):
        call = next(e for e in events if e["seq"] == cause["call"])
        assert by_ts[starts[f["id"]]["ts"]]["args"]["seq"] <= call["seq"]
        assert f["ts"] == cause["t"] * 1000 and threads[(f["pid"], f["tid"])] in ("reservation R-1",
                                                                                  "X-2 = release of R-1")
    knowledge = [e["name"] for e in te if e["ph"] == "X" and e["cat"] == "knowledge"]
    assert "COMPENSATION_PROPOSED" in knowledge and "SENT_UNKNOWN" in knowledge


def test_the_export_is_deterministic_and_on_the_scenario_clock():
    path = TRACES / "t2-commit-before-record.jsonl"
    assert export_trace(path, "chrome") == export_trace(path, "chrome")
    assert export_trace(path, "otel") == export_trace(path, "otel")
    events = read_jsonl(path)
    origin = events[0]["origin_ms"]
    spans = otel_document(events)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    call = next(e for e in events if e["kind"] == "call" and e["port"] == "reservation")
    span = next(s for s in spans if any(a["key"] == "crashlab.seq" and a["value"] == {"intValue": str(call["seq"])}
                                        for a in s["attributes"]) and s["kind"] == 3)
    assert span["name"] == f"reservation.{call['op']}"
    assert int(span["startTimeUnixNano"]) == (origin + call["t"]) * 10**6


@pytest.mark.parametrize("name", SAMPLES[:4])
def test_the_otel_export_is_otlp_json(name):
    doc = otel_document(load(name))
    jsonschema.validate(doc, OTLP_SCHEMA)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ids = {s["spanId"] for s in spans}
    assert len(ids) == len(spans)
    assert all(s.get("parentSpanId", next(iter(ids))) in ids for s in spans)
    assert len({s["traceId"] for s in spans}) == 1
    assert all(int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) for s in spans)


def test_the_otel_export_parses_as_the_official_protobuf_message():
    pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = otel_document(load("t8-compensation-failure"))
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:   # OTLP/JSON ids are hex; protobuf JSON base64
        for field in ("traceId", "spanId", "parentSpanId"):
            if field in span:
                span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    message = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())
    spans = message.resource_spans[0].scope_spans[0].spans
    assert len(spans[0].trace_id) == 16 and len(spans[0].span_id) == 8
    assert any(s.status.code == 2 for s in spans)            # error answers are ERROR spans
    with pytest.raises(json_format.ParseError):
        json_format.Parse(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"start": 1}]}]}]}),
                          ExportTraceServiceRequest())


def test_the_command_writes_the_file_and_refuses_bad_input(tmp_path, capsys):
    trace = TRACES / "t2-commit-before-record.jsonl"
    out = tmp_path / "t2.json"
    assert main(["export", "--format", "chrome", str(trace), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]
    assert main(["export", "--format", "otel", str(trace)]) == 0
    assert json.loads(capsys.readouterr().out)["resourceSpans"]
    assert main(["export", "--format", "svg", str(trace), "-o", str(out)]) == 3
    assert "--format svg: unknown export format; choose one of chrome, otel" in capsys.readouterr().err
    notrace = tmp_path / "notes.jsonl"
    notrace.write_text('{"hello": 1}\n')
    assert main(["export", "--format", "chrome", str(notrace), "-o", str(tmp_path / "x.json")]) == 3
    err = capsys.readouterr().err
    assert f"{notrace}:1: not a crashlab trace event" in err and "Traceback" not in err
    assert main(["export", "--format", "chrome", str(trace), "-o", str(trace)]) == 3
    assert "is the trace this command reads" in capsys.readouterr().err
