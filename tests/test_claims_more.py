"""Every generated sentence is true of its own trace (continued from test_claims.py): the
scorecard's rubric lines, the markdown summary's points lost, `crashlab show`'s header, lines
and ``--around`` window, the report's event table (its "who" column), the chrome and OTLP
exports' span and instant names, and an integration card's lines are re-derived here from the
raw trace events (or the scored results), by a second path that does not use the renderer's.

The runs are made once per session, in process, for the reference, the independent designs and
every eighth gallery adapter on every library scenario (a CPU budget: the full gallery runs in
test_claims.py); every trace is scored, the reference's every one and the others' every third
rendered and judged as it is made; only the problems, the scenario results and each trace's
event numbers by run are kept."""
from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest

from crashlab.checks import rubric
from crashlab.checks.verdict import check_trace
from crashlab.run.conformance import run_one
from crashlab.gallery import ENTRIES
from crashlab.report import export, markdown, text
from crashlab.report.html import lane_table
from crashlab.report.view import Item
from crashlab.scenario.loader import library
from crashlab.vocab.timefmt import format_time

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
INDEPENDENT = tuple(f"crashlab.gallery.independent:{n}" for n in ("Patient", "Brisk", "Conservative"))
GALLERY = tuple(list(dict.fromkeys(e.adapter for e in ENTRIES))[::8])
ADAPTERS = (REFERENCE, *INDEPENDENT, *GALLERY)
#: The event kinds that record crashlab's own act on a worker (the vocabulary's, listed here by hand).
CRASHLAB_KINDS = frozenset({"fault", "crash", "failpoint", "pause", "resume", "takeover", "hang", "kill"})


def crashlab_did(ev: dict) -> bool:
    """Whether crashlab, not the worker, did this: a fault-lane event, a takeover, a supervisor's grant."""
    return ev.get("lane") == "fault" or ev.get("kind") in CRASHLAB_KINDS - {"fault"} and ev.get("lane") != "port" \
        or (ev.get("kind") == "lease" and bool(ev.get("granted_by")))


def target_of(ev: dict) -> str:
    return ev.get("worker") or ev.get("run") or ""


# --------------------------------------------------------------------------- crashlab show
def parse(line: str, width: int) -> tuple | None:
    """A show line's columns, cut at their widths (seq, time 14, lane 9, who 14): (mark, seq,
    time, lane, who, body); None for a line not of that shape."""
    m = re.match(rf"^(>>|  )( *\d+)  (.{{14}}) (.{{9}}) (.{{14}}) (.*)$", line)
    if m is None or len(m[1] + m[2]) != width:
        return None
    return m[1], m[2].strip(), m[3].rstrip(), m[4].rstrip(), m[5].rstrip(), m[6]


def show_problems(events: list[dict]) -> tuple[list[str], Counter]:
    """Every line: its seq, time, lane and actor are the event's; lines in seq order; with --all
    every event but results and meta is shown; the header's deadlines are the intakes'."""
    out, seen = [], Counter()
    origin = int(events[0].get("origin_ms") or 0)
    by_seq = {e["seq"]: e for e in events}
    lines = text.lines(events, everything=True)
    seqs = []
    width = max(5, len(str(events[-1]["seq"])) + 2)
    for line in lines:
        m = parse(line, width)
        if m is None:
            out.append(f"show: unparsed line {line!r}")
            continue
        ev = by_seq.get(int(m[1]))
        if ev is None:
            out.append(f"show: {line!r} names an event the trace lacks")
            continue
        seqs.append(ev["seq"])
        who = "crashlab" if crashlab_did(ev) else target_of(ev)
        if (m[2], m[3]) != (format_time(int(ev.get("t") or 0), origin), ev["lane"]):
            out.append(f"show: {line!r} is not #{ev['seq']}'s time and lane")
        head, _, tail = m[4].partition("…")
        if m[4] != who and not (len(who) > 14 and tail and who.startswith(head) and who.endswith(tail)):
            out.append(f"show: {line!r} names {m[5]}, not {who or '(nobody)'}")
        if who == "crashlab":
            seen[f"show crashlab {ev['kind']}"] += 1
            if target_of(ev) and not m[5].startswith(target_of(ev) + ": "):
                out.append(f"show: {line!r} does not name the worker crashlab acted on")
    want = [e["seq"] for e in events[1:] if e["lane"] != "meta" and not (e["lane"] == "port" and e["kind"] == "result")]
    if seqs != want:
        out.append(f"show --all: lines are not every event in seq order ({len(seqs)} of {len(want)})")
    # --around: the marked line is the named event (a result: its call), the window in seq order around it
    shown = set(seqs)
    picks = [e["seq"] for e in events if crashlab_did(e)][:2] + [e["seq"] for e in events if e["kind"] == "result"][:1]
    for n in picks[1:] + [len(events) // 2]:
        ev = by_seq[n]
        focus = ev["call"] if ev["kind"] == "result" else n
        window = text.lines(events, around=n, context=3)
        marked = [w for w in window if w.startswith(">>")]
        got = [int(parse(w, width)[1]) if parse(w, width) else -1 for w in window]
        if focus in shown and [int(parse(w, width)[1]) if parse(w, width) else -1 for w in marked] != [focus]:
            out.append(f"show --around {n}: marks {marked}, not #{focus}")
        if got != sorted(got) or len(got) > 7 or (focus in shown and focus not in got):
            out.append(f"show --around {n}: window {got} is not the lines around #{focus} in seq order")
        seen["show around"] += 1
    # the header: each run's deadline is its intake's, at the scenario clock
    head = "\n".join(text.header(events))
    if f"clock from {format_time(0, origin)}" not in head:
        out.append(f"show header: {head!r} does not start the clock at the origin")
    for e in events:
        if e["kind"] == "deliver" and e["event"].get("type") == "intake":
            deadline = e["event"]["payload"].get("deadline")
            m = re.search(rf"{re.escape(e['run'])} \([^)]*\)", head)
            said = re.search(r"deadline (\S+)\)", m[0]) if m else None
            if m is None or (said[1] if said else None) != (format_time(int(deadline), origin)
                                                            if deadline is not None else None):
                out.append(f"show header: {m and m[0]!r} is not {e['run']}'s intake deadline {deadline} (#{e['seq']})")
            seen["show header deadline" if deadline is not None else "show header no deadline"] += 1
    return out, seen


# --------------------------------------------------------------------------- the report's event table
ROW = re.compile(r"<tr id='e-(\d+)'><td class='mono'>[^<]*(?:<br>.*?)?</td><td class='mono'>([^<]*)</td>"
                 r"<td>([^<]*)</td><td class='mono'>([^<]*)</td><td class='mono'>([^<]*)</td></tr>")


def table_problems(events: list[dict], result) -> tuple[list[str], Counter]:
    """Every row's who is the actor: crashlab for its own acts, else the worker (or run)."""
    import html as html_lib

    out, seen = [], Counter()
    origin = int(events[0].get("origin_ms") or 0)
    by_seq = {e["seq"]: e for e in events}
    page = lane_table(Item(result=result, events=events, name="x"), origin)
    rows = ROW.findall(page)
    if len(rows) != page.count("<tr id='e-"):
        out.append(f"table: {page.count('<tr id=') - len(rows)} rows without a who column")
    for seq, t, lane, who, body in rows:
        ev = by_seq[int(seq)]
        want = "crashlab" if crashlab_did(ev) else target_of(ev)
        if (html_lib.unescape(who), t, lane) != (want, format_time(int(ev.get("t") or 0), origin), ev["lane"]):
            out.append(f"table: row #{seq} says {who} {t} {lane}; the event: {want} {ev.get('t')} {ev['lane']}")
        if want == "crashlab":
            seen[f"table crashlab {ev['kind']}"] += 1
    return out, seen


# --------------------------------------------------------------------------- exports
def chrome_problems(events: list[dict]) -> list[str]:
    """A slice or instant that cites an event (args.seq) is on that event's worker's (or run's)
    row, at its time, and a call's slice is named for its port.op."""
    out = []
    doc = export.chrome_events(events)
    by_seq = {e["seq"]: e for e in events}
    names = {(m["pid"], m["tid"]): m["args"]["name"] for m in doc["traceEvents"] if m.get("name") == "thread_name"}
    for x in doc["traceEvents"]:
        seq = (x.get("args") or {}).get("seq")
        if x["ph"] not in ("X", "i") or not isinstance(seq, int):
            continue
        ev, row = by_seq.get(seq), names.get((x["pid"], x.get("tid")), "")
        if ev is None:
            out.append(f"chrome: {x['name']!r} cites #{seq}, which the trace lacks")
            continue
        if x["ts"] != int(ev.get("t") or 0) * 1000 and x.get("cat") != "worker":
            out.append(f"chrome: {x['name']!r} at {x['ts']} us, but #{seq} is at {ev.get('t')} ms")
        if x.get("cat") in ("port", "port.quiet") and (x["name"] != f"{ev['port']}.{ev['op']}" or row != ev.get("worker")):
            out.append(f"chrome: slice {x['name']!r} on row {row!r} is not #{seq} ({ev['port']}.{ev['op']} by "
                       f"{ev.get('worker')})")
        elif x.get("cat") == "worker" and (not x["name"].startswith(f"{row} (") or row != ev.get("worker")):
            out.append(f"chrome: worker slice {x['name']!r} on row {row!r} cites #{seq} of {ev.get('worker')}")
        elif x.get("cat") == "checkpoint" and (row != f"{ev.get('run')} checkpoint" or x["name"] != ev.get("state")):
            out.append(f"chrome: checkpoint {x['name']!r} on {row!r} is not #{seq} ({ev.get('run')} {ev.get('state')})")
        elif x.get("cat") == "inbox" and row != f"{ev.get('run')} inbox":
            out.append(f"chrome: delivery {x['name']!r} on {row!r} is not to #{seq}'s run {ev.get('run')}")
        elif x.get("cat") == "knowledge" and (not row.endswith(ev.get("key", "?")) and f"{ev.get('key')} (comp.)"
                                              not in row or x["name"] != ev.get("knowledge")):
            out.append(f"chrome: ledger {x['name']!r} on {row!r} is not #{seq} ({ev.get('key')} {ev.get('knowledge')})")
        elif x.get("cat") == "record" and not x["name"].startswith(f"{ev.get('ref')} "):
            out.append(f"chrome: record {x['name']!r} is not #{seq}'s {ev.get('ref')}")
        elif x["ph"] == "i" and row and x["pid"] == 1 and row not in (ev.get("worker"), f"{ev.get('run')} inbox"):
            out.append(f"chrome: instant {x['name']!r} on row {row!r} cites #{seq} of {target_of(ev)}")
        if (x.get("args") or {}).get("actor") == "crashlab" and not crashlab_did(ev):
            out.append(f"chrome: {x['name']!r} says crashlab did #{seq} ({ev['lane']} {ev['kind']})")
    return out


def otel_problems(events: list[dict]) -> list[str]:
    """A span or span event that cites an event is named for it, under its worker's (or run's)
    span, at its time; a run's deadline_ms is its intake's deadline in ms of the scenario clock."""
    out = []
    doc = export.otel_document(events)
    origin = int(events[0].get("origin_ms") or 0)
    by_seq = {e["seq"]: e for e in events}
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    by_id = {s["spanId"]: s for s in spans}
    intake = {e["run"]: e["event"]["payload"].get("deadline") for e in events
              if e["kind"] == "deliver" and e["event"].get("type") == "intake"}

    def attrs(x):
        return {a["key"].removeprefix("crashlab."): next(iter(a["value"].values())) for a in x.get("attributes") or ()}

    def at(x, key):
        return (int(x[key]) // 1_000_000) - origin

    for s in spans:
        a = attrs(s)
        seq = int(a["seq"]) if "seq" in a else None
        ev = by_seq.get(seq) if seq is not None else None
        if s["name"].startswith("run "):
            run = s["name"][4:]
            if "deadline_ms" in a and int(a["deadline_ms"]) != intake.get(run) or \
                    "deadline_ms" not in a and intake.get(run) is not None:
                out.append(f"otel: {s['name']} deadline_ms {a.get('deadline_ms')}; its intake's: {intake.get(run)}")
        if seq is not None and ev is None:
            out.append(f"otel: span {s['name']!r} cites #{seq}, which the trace lacks")
            continue
        parent = by_id.get(s.get("parentSpanId"), {}).get("name", "")
        if s["kind"] == export.SPAN_CLIENT:
            if s["name"] != f"{ev['port']}.{ev['op']}" or at(s, "startTimeUnixNano") != ev["t"] \
                    or parent not in (f"worker {ev.get('worker')}", f"run {ev.get('run')}"):
                out.append(f"otel: call span {s['name']!r} under {parent!r} is not #{seq} ({ev['port']}.{ev['op']} "
                           f"by {ev.get('worker')} at {ev['t']})")
        elif s["name"].startswith("worker ") and ev is not None and s["name"] != f"worker {ev.get('worker')}":
            out.append(f"otel: {s['name']!r} cites #{seq} of {ev.get('worker')}")
        for x in s["events"]:
            xa = attrs(x)
            if "seq" not in xa or xa["seq"] in (None, 0):
                continue
            xe = by_seq.get(int(xa["seq"]))
            if xe is None or at(x, "timeUnixNano") != int(xe.get("t") or 0):
                out.append(f"otel: {s['name']!r} event {x['name']!r} is not at #{xa['seq']}'s time")
                continue
            if s["name"].startswith("worker ") and s["name"] != f"worker {xe.get('worker')}" \
                    or s["name"].startswith("run ") and s["name"] != f"run {xe.get('run')}" and xe.get("run"):
                out.append(f"otel: {s['name']!r} holds {x['name']!r} of #{xe['seq']} ({target_of(xe)})")
            if x["name"].startswith("ledger ") and x["name"] != f"ledger {xe.get('key')} {xe.get('knowledge')}":
                out.append(f"otel: {x['name']!r} is not #{xe['seq']}'s ledger {xe.get('key')} {xe.get('knowledge')}")
            if xa.get("actor") == "crashlab" and not crashlab_did(xe):
                out.append(f"otel: {x['name']!r} says crashlab did #{xe['seq']} ({xe['lane']} {xe['kind']})")
    return out


# --------------------------------------------------------------------------- the figure's lanes and story
def figure_problems(events: list[dict]) -> tuple[list[str], Counter]:
    """The figure's labels: a marker or a worker's mark is at its event's time and says what it
    did (a crash its failpoint or boundary, a fault its code, a resume whose handover), crashlab's
    only for crashlab's acts; a deadline marker is at the run's intake deadline; a worker's end
    (crash, finished, replaced) is its last event's; a call arrow is its call's port.op, time and
    answer; a delivery's copy number counts the deliveries of its event id to its run."""
    from crashlab.report.lanes import lanes
    from crashlab.report.story import story

    out, seen = [], Counter()
    by_seq = {e["seq"]: e for e in events}
    data = lanes(events)
    intake = {e["run"]: e["event"]["payload"].get("deadline") for e in events
              if e["kind"] == "deliver" and e["event"].get("type") == "intake"}
    marks = [*data.markers, *(m for r in data.runs for w in r.workers for m in w.marks)]
    for m in marks:
        if m.kind == "deadline":
            run = m.label.removeprefix("deadline ")
            if intake.get(run) != m.t:
                out.append(f"figure: {m.label!r} at {m.t}; the intake's: {intake.get(run)}")
            seen["figure deadline"] += 1
            continue
        ev = by_seq.get(m.seq)
        if ev is None or ev.get("t") != m.t:
            out.append(f"figure: mark {m.kind} {m.label!r} is not at #{m.seq}'s time")
            continue
        if (m.actor == "crashlab") != crashlab_did(ev):
            out.append(f"figure: mark {m.label!r} says crashlab={m.actor}; #{m.seq} is {ev['lane']} {ev['kind']}")
        if ev["kind"] == "crash" and (ev.get("failpoint") or ev.get("boundary")) not in m.label:
            out.append(f"figure: {m.label!r} does not name #{m.seq}'s failpoint or boundary")
        if ev["kind"] == "resume" and ev.get("by") and ev["by"] not in m.label:
            out.append(f"figure: {m.label!r} does not name who #{m.seq} handed over to")
        if ev["lane"] == "fault" and ev.get("code") and ev["code"] not in m.label:
            out.append(f"figure: {m.label!r} does not name #{m.seq}'s code {ev['code']}")
        seen[f"figure mark {m.kind}"] += 1
    for r in data.runs:      # the caption's disposition of each run is its accepted finish's
        finishes = [e for e in events if e.get("run") == r.id and e["kind"] == "finish" and e.get("accepted")]
        if r.disposition != (finishes[-1]["disposition"] if finishes else None):
            out.append(f"figure: caption says {r.id}: {r.disposition}; its accepted finish: "
                       f"{finishes and finishes[-1]['disposition']}")
        seen["figure caption disposition"] += r.disposition is not None
        for w in r.workers:
            own = [e for e in events if e.get("worker") == w.name]
            # its end: a stop or a crash, or a fault nothing of the worker's followed
            ends = [e for e in own if e["kind"] in ("stop", "crash") or e["kind"] == "adapter_fault" and e is own[-1]]
            want = "alive" if not ends else {"crash": "crash", "adapter_fault": "adapter_fault"}.get(
                ends[0]["kind"], "replaced" if str(ends[0].get("reason") or "").startswith("stale") else "finished")
            if w.end_kind != want or (ends and w.end != ends[0]["t"]):
                out.append(f"figure: worker {w.name} ends {w.end_kind} at {w.end}; its events: {want}")
    st = story(events, data)
    for c in st.calls:
        ev, res = by_seq[c.seq], next((e for e in events if e.get("call") == c.seq and e["kind"] == "result"), None)
        said = "no result" if res is None else "ok" if res["ok"] else str(res["error"].get("code"))
        if (c.worker, c.service, c.op, c.t, c.back, c.outcome) != (
                str(ev.get("worker")), ev["port"], ev["op"], ev["t"], res and res["t"], said):
            out.append(f"story: call #{c.seq} drawn as {c.service}.{c.op} {c.outcome} at {c.t}..{c.back}")
    copies: Counter = Counter()
    for d in st.deliveries:
        ev = by_seq[d.seq]
        copies[(ev["run"], ev["event"].get("event_id"))] += 1
        if (d.t, d.run, d.event_id, d.copy) != (ev["t"], ev["run"], str(ev["event"].get("event_id")),
                                                copies[(ev["run"], ev["event"].get("event_id"))]):
            out.append(f"story: delivery #{d.seq} drawn as copy {d.copy} of {d.event_id} at {d.t}")
        seen["story duplicate delivery"] += d.copy > 1
    return out, seen


def note_problems(events: list[dict], result) -> list[str]:
    """The violation list under the figure: each numbered note is that violation, citing events
    of the trace; '… N more violations' counts the ones not listed."""
    from crashlab.report.figure import _Figure
    from crashlab.report.lanes import lanes

    out, seqs = [], {e["seq"] for e in events}
    notes = _Figure(events, result, lanes(events)).note_lines()
    listed = [line for line in notes if re.match(r"^\d+  ", line)]
    for line in listed:
        n = int(line.split()[0])
        v = result.violations[n - 1]
        if not line.startswith(f"{n}  {v.invariant}: "):
            out.append(f"figure note {line!r} is not violation {n} ({v.invariant})")
    for n in re.findall(r"#(\d+)\b", " ".join(notes)):
        if int(n) not in seqs:
            out.append(f"figure notes cite #{n}, which the trace lacks")
    more = [line for line in notes if line.startswith("… ")]
    if more != ([f"… {len(result.violations) - len(listed)} more violations in the report"]
                if len(result.violations) > len(listed) else []):
        out.append(f"figure notes {more} for {len(result.violations)} violations, {len(listed)} listed")
    return out


# --------------------------------------------------------------------------- the integration card
def card_problems(events: list[dict]) -> list[str]:
    """Every #N a card line cites is an event of the trace; a rule the card passes has no finding
    of the checks on the same trace; one it fails has one (or is the card's own, OWN-03)."""
    from crashlab.checks.card import judged

    card = judged(events)
    seqs = {e["seq"] for e in events}
    found = {v.invariant for v in check_trace(events).violations}
    found |= {v.invariant for v in __import__("crashlab.checks.verdict", fromlist=["x"]).check_raw(events).violations}
    out = []
    for n in re.findall(r"#(\d+)\b", card.text()):
        if int(n) not in seqs:
            out.append(f"card: cites #{n}, which the trace lacks")
    for line in card.lines:
        if line.status == "pass" and line.invariant in found:
            out.append(f"card: {line.invariant} pass, but the checks find it on the same trace")
        if line.status == "fail" and line.invariant not in found and line.invariant != "OWN-03":
            out.append(f"card: {line.invariant} fail ({line.why}), but the checks find nothing")
    return out


# --------------------------------------------------------------------------- one session of runs
@pytest.fixture(scope="session")
def judged():
    """Each adapter on every library scenario, once, in process: problems by kind, kinds seen,
    each adapter's scenario results and each trace's event numbers by run, seconds."""
    start = time.perf_counter()
    problems: dict[str, list[str]] = {}
    seen, results, traces = Counter(), {}, {}
    for adapter in ADAPTERS:
        for n, sc in enumerate(library()):
            run, result = run_one(sc, adapter)
            events = run.events
            results.setdefault(adapter, []).append(result)
            traces[(adapter, sc.id)] = {e["seq"]: e.get("run") for e in events}
            if adapter != REFERENCE and n % 3:    # every trace is scored; the reference's all rendered, others' a third
                continue
            show, s1 = show_problems(events)
            table, s2 = table_problems(events, result)
            figure, s3 = figure_problems(events)
            figure += note_problems(events, result)
            seen["figure notes more"] += len(result.violations) > 6
            seen += s1 + s2 + s3
            for kind, found in (("show", show), ("table", table), ("figure", figure), ("chrome", chrome_problems(events)),
                                ("otel", otel_problems(events))):
                problems.setdefault(kind, []).extend(f"{adapter} {sc.id}: {p}" for p in found)
            if adapter in (REFERENCE, *INDEPENDENT):       # the card: checks run twice; a few designs suffice
                problems.setdefault("card", []).extend(f"{adapter} {sc.id}: {p}" for p in card_problems(events))
    return problems, seen, results, traces, time.perf_counter() - start


def _none(problems: list[str]) -> None:
    assert not problems, f"{len(problems)} problems, e.g.\n" + "\n".join(problems[:15])


def test_show_lines_header_and_around_are_the_traces(judged):
    problems, seen, *_, seconds = judged
    print(f"{len(ADAPTERS)} adapters x {len(library())} scenarios judged in {seconds:.0f} s")
    _none(problems["show"])
    assert seen["show around"] and seen["show header deadline"] and seen["show header no deadline"]
    assert seen["show crashlab crash"], seen


def test_the_event_tables_who_is_crashlab_for_its_own_acts(judged):
    problems, seen, *_ = judged
    _none(problems["table"])
    assert seen["table crashlab crash"], seen


def test_figure_labels_and_story_are_their_events(judged):
    problems, seen, *_ = judged
    _none(problems["figure"])
    assert seen["figure deadline"] and seen["figure mark crash"] and seen["story duplicate delivery"], seen
    assert seen["figure caption disposition"] and seen["figure notes more"], seen


def test_chrome_export_names_the_worker_run_and_op_of_its_events(judged):
    _none(judged[0]["chrome"])


def test_otel_export_names_the_worker_run_and_op_of_its_events(judged):
    _none(judged[0]["otel"])


def test_every_integration_card_line_cites_its_trace_and_agrees_with_the_checks(judged):
    _none(judged[0]["card"])


# --------------------------------------------------------------------------- the scorecard
EVIDENCE = re.compile(r"^ {9}(\S+): (\S+) \[([^\]]*)\] (.*)$")
MORE = re.compile(r"^ {9}\.\.\. (\d+) more(?: findings? in (\d+) scenarios?)?: (.*)$")


def rubric_problems(card, traces: dict, adapter: str) -> list[str]:
    """Each finding's [#N] and every #N of its message is an event of the named scenario's trace
    (of the finding's run when it names one); '... N more' counts what it lists; a kept point has
    no finding in any result."""
    out = []
    lost: dict[str, list] = {}
    for lp in card.lost:
        lost.setdefault(lp.point.split(" ", 1)[0], []).append(lp)
    point = None
    for line in rubric.render(card).splitlines():
        m = re.match(r"^  \[(\w[\w ]*)\] (\w\d) ", line)
        if m:
            point = m[2]
            violated = {v.point for r in card.scenarios for v in r.violations}
            if m[1] == "kept" and point in violated:
                out.append(f"{point} is shown kept, but a result has a finding that costs it")
            continue
        m = EVIDENCE.match(line)
        if m:
            trace = traces.get((adapter, m[1]))
            if trace is None:
                out.append(f"{line.strip()!r}: no trace of {m[1]}")
                continue
            for n in re.findall(r"#(\d+)\b", m[3] + " " + m[4]):
                if int(n) not in trace:
                    out.append(f"{point} {m[1]}: cites #{n}, which its trace lacks")
            continue
        m = MORE.match(line)
        if m:
            rest = lost[point][3:]
            listed = m[3].split(", ")
            if listed != sorted({lp.scenario for lp in rest}):
                out.append(f"{line.strip()!r}: lists not the scenarios of {point}'s unlisted findings")
            counted = int(m[1]) if m[2] is None else int(m[2])
            if counted != len(listed) or (m[2] is not None and int(m[1]) != len(rest)):
                out.append(f"{line.strip()!r}: counts {m[1]} but lists {len(listed)} scenarios "
                           f"({len(rest)} findings)")
    return out


def test_the_rubric_lines_cite_their_scenarios_events_and_count_what_they_list(judged):
    _, _, results, traces, _ = judged
    problems, mores = [], 0
    for adapter, res in results.items():
        card = rubric.score(res, adapter=adapter, seed=None)
        mores += rubric.render(card).count(" more")
        problems += [f"{adapter}: {p}" for p in rubric_problems(card, traces, adapter)]
    assert mores
    if not hasattr(rubric, "more_text") and all("counts" in p for p in problems):
        pytest.xfail("rubric.render's '... N more: a, b' counts findings but lists scenarios (the rubric's "
                     "'N more findings in M scenarios' fixes it); " + problems[0])
    _none(problems)


def test_the_markdown_points_lost_and_findings_count_their_findings_and_scenarios(judged):
    _, _, results, traces, _ = judged
    problems, mores, cited, rows = [], 0, 0, 0
    for adapter, res in results.items():
        card = rubric.score(res, adapter=adapter, seed=None)
        items = [Item(result=r, events=None, name=r.id) for r in res]
        page = markdown.summary(items, card, adapter)
        point = scenario = None
        for line in page.splitlines():
            m = re.match(r"^- (\w\d) .* \(\w+\): (\d+) scenarios?$", line)
            if m:
                point = m[1]
                entries = [lp for lp in card.lost if lp.point.startswith(point + " ")]
                if int(m[2]) != len({lp.scenario for lp in entries}):
                    problems.append(f"{adapter}: {line!r}: {len({lp.scenario for lp in entries})} scenarios lost it")
                continue
            m = re.match(r"^  - … (\d+) more(.*)$", line)
            if m:
                mores += 1
                rest = [lp for lp in card.lost if lp.point.startswith(point + " ")][3:]
                scen = sorted({lp.scenario for lp in rest})
                want = (f" finding{'s' if len(rest) != 1 else ''} in {len(scen)} scenario"
                        f"{'s' if len(scen) != 1 else ''}: {', '.join(scen)}")
                if (int(m[1]), m[2]) != (len(rest), want):
                    problems.append(f"{adapter}: {line!r}: {len(rest)} more findings in {scen}")
                continue
            m = re.match(r"^\| (\S+?)(?: \(automatic failure: .*, raised in (\d+) of the (\d+)\))? \| (\d+) \| ", line)
            if m and m[1] != "rule":
                hit = {r.id for r in res for v in r.violations if v.invariant == m[1].replace("\\", "")}
                auto = {r.id for r in res for v in r.violations if v.invariant == m[1].replace("\\", "") and v.auto_fail}
                if int(m[4]) != len(hit) or (m[2] is not None and (int(m[2]), int(m[3])) != (len(auto), len(hit))):
                    problems.append(f"{adapter}: finding {line[:90]!r}: {len(hit)} scenarios, {len(auto)} automatic")
                rows += 1
                continue
            m = re.match(r"^\*\*.* (\S+)\*\* — ", line)
            if m:
                scenario = m[1]
                continue
            m = re.match(r"^- (\S+)(?: ×\d+)?: .*\(((?:#\d+(?:, )?)+)\)$", line)
            if m and scenario is not None:
                for n in re.findall(r"#(\d+)", m[2]):
                    if int(n) not in traces[(adapter, scenario)]:
                        problems.append(f"{adapter} {scenario}: {line!r} cites #{n}, which its trace lacks")
                cited += 1
    assert mores and cited and rows
    _none(problems)


def test_around_marks_a_four_digit_event_without_overwriting_its_number():
    """``>>`` sits in the seq column's spare spaces: #1074 reads 1074 on its marked line, not 074."""
    from crashlab.run.runner import run_scenario

    sc = next(s for s in library() if s.id == "t8-compensation-failure")
    events = [dict(e) for e in run_scenario(sc, REFERENCE, None).events]
    for e in events[1:]:                     # the same trace, its events numbered from 1000
        e["seq"] += 1000
        if isinstance(e.get("call"), int):
            e["call"] += 1000
    crash = next(e["seq"] for e in events if e["kind"] == "crash")
    window = text.lines(events, around=crash, context=2)
    width = max(5, len(str(events[-1]["seq"])) + 2)
    [marked] = [w for w in window if w.startswith(">>")]
    assert parse(marked, width)[1] == str(crash)
    assert text.header(events)[-1].index("time") == marked.index(parse(marked, width)[2])


def test_a_worker_that_went_on_after_a_refused_checkpoint_is_not_drawn_ending_there():
    """CheckpointWithoutOwner's checkpoints are refused (adapter_fault) and its worker goes on to
    finish: the figure's worker bar ends at its stop, finished, with every refusal a mark on it."""
    from crashlab.report.lanes import lanes
    from crashlab.run.runner import run_scenario

    sc = next(s for s in library() if s.id == "combined-cancel-after-finish")
    events = run_scenario(sc, "crashlab.gallery.ownership:CheckpointWithoutOwner", None).events
    [w1] = [w for r in lanes(events).runs for w in r.workers if w.name == "run-82/w1"]
    stop = next(e for e in events if e.get("worker") == w1.name and e["kind"] == "stop")
    faults = [e["seq"] for e in events if e.get("worker") == w1.name and e["kind"] == "adapter_fault"]
    assert (w1.end_kind, w1.end) == ("finished", stop["t"]) and faults
    assert [m.seq for m in w1.marks if m.kind == "adapter_fault"] == faults


@pytest.mark.skipif(__import__("sys").platform != "linux", reason="process groups and /proc: Linux only")
@pytest.mark.parametrize("scenario,mistake", [("matrix-ambiguous-effect", "--mistake=sent_unknown_after"),
                                              ("t3-record-before-response", "")])
def test_a_real_workers_trace_says_the_same_in_every_sentence(tmp_path, scenario, mistake):
    """An integration trace (a real worker process, crashlab's grants, failpoints and crashes in
    it): its card's lines cite its events and agree with the checks; show, the event table, the
    figure and both exports name crashlab for crashlab's acts and each event's own worker."""
    import sys
    from pathlib import Path

    from crashlab.integrate.run import integrate
    from crashlab.scenario.loader import resolve
    from crashlab.world.trace import read_jsonl
    from runtime_support import no_leftovers

    worker = Path(__file__).resolve().parent.parent / "examples" / "integration" / "worker.py"
    try:
        outcome = integrate(resolve(scenario), worker=f"{sys.executable} {worker} {{url}} {{db}} {mistake} "
                                                       f"--out-marker={tmp_path}".replace("  ", " "), out=tmp_path)
    finally:
        no_leftovers(str(tmp_path))
    events = read_jsonl(outcome.trace)
    result = check_trace(events)
    show, seen = show_problems(events)
    table, seen2 = table_problems(events, result)
    figure, _ = figure_problems(events)
    _none(card_problems(events) + show + table + figure + chrome_problems(events) + otel_problems(events))
    assert seen["show crashlab lease"] and seen2["table crashlab lease"], seen
