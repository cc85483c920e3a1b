"""Every generated sentence is true of its own trace: the typed facts the operator, service-owner
and packet-summary sentences and the resolved/unresolved line are rendered from
(crashlab.report.claims) are re-derived here from the raw trace events, by a second path that
does not use the fact builder, for every library scenario and every adapter of the gallery
(the reference, every ENTRIES adapter, the independent designs).

For each fact: every cited event number exists, belongs to the run and is of the kind the fact
says; counts are the number of cited events; times are the cited events' scenario-clock times;
keys, ports and operations are the cited events'; lists are in causal (seq) order and complete;
"no deadline"/"deadline X" is the intake's; "resolved" only when no ledger entry is unresolved.
Each sentence cites the event numbers of the facts it was rendered from and shows their times.
The runs are made once per session, in process; the facts and their problems are kept, not the
traces."""
from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from crashlab.checks import check_trace
from crashlab.gallery import ENTRIES
from crashlab.vocab.model import EFFECT_OPS
from crashlab.report.claims import KINDS
from crashlab.report.comms import communications, situation
from crashlab.report.packet import resolution_sentence, summary_sentences
from crashlab.report.values import clock
from crashlab.run.runner import run_scenario
from crashlab.scenario.loader import library

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
INDEPENDENT = tuple(f"crashlab.gallery.independent:{n}" for n in ("Patient", "Brisk", "Conservative"))
ADAPTERS = (REFERENCE, *INDEPENDENT, *dict.fromkeys(e.adapter for e in ENTRIES))
UNRESOLVED = {"SENT_UNKNOWN", "COMPENSATION_PROPOSED"}
RESOLVED = {"SUCCEEDED", "FAILED_NO_EFFECT", "CANCELLED_NO_EFFECT"}


# --------------------------------------------------------------------------- the second path
def _answer(result: dict) -> str:
    """The code of an answer, read here: an error's code; a lookup's record status (or found),
    in_flight or not_found;
    a search's found/not_found; otherwise its status, or ok."""
    if not result["ok"]:
        return (result.get("error") or {}).get("code") or "error"
    value = result.get("value") if isinstance(result.get("value"), dict) else {}
    if "found" in value:
        if not value["found"]:
            return "in_flight" if value.get("in_flight") else "not_found"
        return (value.get("record") or {}).get("status") or "found"
    if "records" in value:
        return "found" if value["records"] else "not_found"
    return value.get("status") or "ok"


def _raw(events: list[dict], run: str) -> dict:
    """What the run's raw events say, by seq, for the checks below."""
    services = set(events[0].get("services") or {})
    calls = [e for e in events if e.get("run") == run and e["lane"] == "port" and e["kind"] == "call"
             and e["port"] in services and e["op"] != "describe"]
    results = {e["call"]: e for e in events if e["lane"] == "port" and e["kind"] == "result"}
    last = {}
    for e in events:
        if e.get("run") == run and e["lane"] == "knowledge" and e["kind"] == "ledger":
            last[e["key"]] = e
    finishes = [e for e in events if e.get("run") == run and e["kind"] == "finish" and e.get("accepted")]
    released = {}
    for e in events:
        if e["lane"] == "remote" and e["kind"] == "released":
            released.setdefault(e["ref"], e)
    return {"calls": calls, "results": results, "released": released,
            "commits": [e for e in events if e.get("run") == run and e["lane"] == "remote" and e["kind"] == "effect"
                        and e.get("cause") != "other_actor"], "last": last, "finish": finishes[-1] if finishes else None,
            "reads": [c for c in calls if c["op"] not in EFFECT_OPS.get(c["port"], ()) and c["seq"] in results],
            "cancels": [e for e in events if e.get("run") == run and e["lane"] == "world" and e["kind"] == "cancel"],
            "intake": next((e for e in events if e.get("run") == run and e["kind"] == "deliver"
                            and e["event"].get("type") == "intake"), None)}


def fact_problems(f, by_seq: dict, raw: dict) -> list[str]:
    out = []
    evs = [by_seq.get(s) for s in f.seqs]
    if f.kind == "resolution" and not f.seqs:
        # nothing to cite: a run with no ledger entry and no accepted finish is not resolved
        return [] if not f.flag and not raw["last"] and raw["finish"] is None else ["resolution: cites nothing"]
    if not f.seqs or any(e is None for e in evs):
        return [f"{f.kind}: cites an event the trace lacks: {f.seqs}"]
    # in causal order: a read's answers by their calls (a zombie's answer may come late)
    order = [by_seq[s].get("call") for s in f.seqs] if f.kind == "reads" else list(f.seqs)
    if len(set(f.seqs)) != len(f.seqs) or None in order or order != sorted(order):
        out.append(f"{f.kind}: cited events out of order {f.seqs}")
    # a record's release may be another actor's (the remote fact's second event)
    if any(e.get("run") != f.run for e in (evs[:1] if f.kind == "remote" else evs)):
        out.append(f"{f.kind}: cites another run's event")
    first = evs[0]
    if f.kind == "ledger":
        e = first
        entry = e.get("entry") or {}
        if (e["lane"], e["kind"]) != ("knowledge", "ledger") or e["key"] != f.key or e["knowledge"] != f.code:
            out.append(f"ledger {f.key}: #{e['seq']} is not its append of {f.code}")
        elif raw["last"].get(f.key) is not e:
            out.append(f"ledger {f.key}: #{e['seq']} is not the key's last append")
        if f.ref != entry.get("remote_ref") or f.role != ("compensation" if entry.get("kind") == "compensation"
                                                          else "effect"):
            out.append(f"ledger {f.key}: ref/role differ from #{e['seq']}")
    elif f.kind == "reads":
        for e in evs:
            call = by_seq.get(e.get("call"))
            if (e["lane"], e["kind"]) != ("port", "result") or call is None:
                out.append(f"reads: #{e['seq']} is not a read's answer")
                continue
            if (call["port"], call["op"], call["args"].get("key")) != (f.port, f.op, f.key) \
                    or call["op"] in EFFECT_OPS.get(call["port"], ()):
                out.append(f"reads: #{e['seq']} answers {call['port']}.{call['op']} of {call['args'].get('key')}, "
                           f"not {f.port}.{f.op} of {f.key}")
            if _answer(e) != f.code:
                out.append(f"reads: #{e['seq']} answered {_answer(e)}, not {f.code}")
        if (f.count, f.first, f.last) != (len(evs), evs[0]["t"], evs[-1]["t"]):
            out.append(f"reads: count/first/last {(f.count, f.first, f.last)} are not the cited events'")
    elif f.kind == "requests":
        for e in evs:
            r = raw["results"].get(e["seq"])
            if (e["lane"], e["kind"], e["port"], e["op"]) != ("port", "call", f.port, f.op):
                out.append(f"requests: #{e['seq']} is not a call of {f.port}.{f.op}")
            elif (_answer(r) if r is not None else "no_answer") != f.code:
                out.append(f"requests: #{e['seq']} was not answered {f.code}")
            elif (None if r is None or r["ok"] else bool((r.get("error") or {}).get("definite"))) != f.flag:
                out.append(f"requests: #{e['seq']} was not answered with definite={f.flag}")
        if (f.count, f.first, f.last) != (len(evs), evs[0]["t"], evs[-1]["t"]):
            out.append(f"requests: count/first/last {(f.count, f.first, f.last)} are not the cited calls'")
    elif f.kind == "cancellation":
        if first is not (raw["cancels"] or [None])[0] or f.first != first["t"]:
            out.append(f"cancellation: #{first['seq']} is not the run's first cancellation at {f.first}")
    elif f.kind == "deadline":
        if first is not raw["intake"] or first["event"]["payload"].get("deadline") != f.at:
            out.append(f"deadline: {f.at} is not the intake's (#{first['seq']})")
    elif f.kind == "packet_deadline":
        budget = (first.get("packet") or {}).get("budget") if first["kind"] == "escalation" else None
        if not isinstance(budget, dict) or budget.get("deadline") != f.at:
            out.append(f"packet_deadline: escalation #{first['seq']} does not give {f.at}")
    elif f.kind == "disposition":
        if first is not raw["finish"] or first["disposition"] != f.code:
            out.append(f"disposition: #{first['seq']} is not the accepted finish {f.code}")
    elif f.kind == "owner":
        named = first.get("next_owner") if first["kind"] == "finish" else (first.get("packet") or {}).get("next_owner")
        if first["kind"] not in ("finish", "escalation") or named != f.name:
            out.append(f"owner: #{first['seq']} does not name {f.name}")
    elif f.kind == "action":
        rec = (first.get("packet") or {}).get("recommended") or {} if first["kind"] == "escalation" else {}
        query = rec.get("query") if isinstance(rec.get("query"), str) else ""
        if rec.get("action") != f.code or rec.get("semantic_key") != f.key \
                or (f.port is not None and not query.startswith(f"{f.port}.{f.op}")):
            out.append(f"action: escalation #{first['seq']} does not recommend {f.code} of {f.key}")
        said = "; ".join(rec[k] for k in ("proposal", "requires") if isinstance(rec.get(k), str))
        if f.name != (said or None):
            out.append(f"action: {f.name!r} are not the packet's words {said!r}")
    elif f.kind == "authority":
        auth = (first.get("packet") or {}).get("authority") if first["kind"] == "escalation" else None
        if not isinstance(auth, dict) or auth.get("live") is not f.flag:
            out.append(f"authority: escalation #{first['seq']} does not say live={f.flag}")
    elif f.kind == "remote":
        commit = first
        if (commit["lane"], commit["kind"], commit["ref"], commit.get("key"), commit["t"]) != \
                ("remote", "effect", f.ref, f.key, f.first) or commit.get("cause") == "other_actor":
            out.append(f"remote {f.ref}: #{commit['seq']} is not the run's commit of it at {f.first}")
        gone = raw["released"].get(f.ref)
        if f.code != ("released" if gone else "held") or (gone is not None and (
                f.seqs[1:] != (gone["seq"],) or f.last != gone["t"]
                or f.name != ("another actor" if gone.get("cause") == "other_actor" else "this run"))):
            out.append(f"remote {f.ref}: says {f.code} at {f.last} by {f.name}; the trace: {gone and gone['seq']}")
    elif f.kind == "resolution":
        want = [e["seq"] for e in raw["last"].values()] + ([raw["finish"]["seq"]] if raw["finish"] else [])
        if sorted(f.seqs) != sorted(want):
            out.append(f"resolution: cites {f.seqs}, not every key's last append and the finish {want}")
        open_ = {k for k, e in raw["last"].items() if e["knowledge"] in UNRESOLVED}
        resolved = raw["finish"] is not None and raw["finish"]["disposition"] in RESOLVED and not open_
        if f.flag is not resolved or set(f.keys) != open_:
            out.append(f"resolution: says resolved={f.flag} open={f.keys}; the ledger: {sorted(open_)}")
    return out


def list_problems(facts, raw: dict) -> list[str]:
    """Lists in causal order and complete: ledger facts by their appends, reads and requests by
    their calls, and as many as the trace holds."""
    out = []
    ledger = [f.seqs[0] for f in facts.ledger]
    if ledger != sorted(ledger) or {f.key for f in facts.ledger} != set(raw["last"]):
        out.append("ledger facts out of order or incomplete")
    read_calls = [raw["results_by_seq"][s]["call"] for f in facts.reads for s in f.seqs]
    if read_calls != [c["seq"] for c in raw["reads"]]:
        out.append("reads are not every answered read, in the order sent")
    if [s for f in facts.requests for s in f.seqs] != [c["seq"] for c in raw["calls"]]:
        out.append("requests are not every service call, in the order sent")
    firsts = list({e["ref"]: e["seq"] for e in reversed(raw["commits"])}.values())
    if sorted(f.seqs[0] for f in facts.remote) != sorted(firsts):
        out.append("remote facts are not every record the run committed")
    return out


def sentence_problems(sentences, origin: int) -> list[str]:
    """A sentence cites the event numbers of the facts it was rendered from and shows their times."""
    out = []
    for s in sentences:
        for f in s.facts:
            if f.kind == "resolution":
                continue
            lo, hi = min(f.seqs), max(f.seqs)
            if not re.search(rf"#{lo}\b", s.text) or not re.search(rf"#{hi}\b", s.text):
                out.append(f"{s.text!r} does not cite #{lo}..#{hi} of its {f.kind} fact")
            for t in (f.first, f.last, f.at):
                if t is not None and clock(t, origin) not in s.text:
                    out.append(f"{s.text!r} does not show {clock(t, origin)} of its {f.kind} fact")
        m = re.match(r"Reads \((\d+),", s.text)
        if m and int(m[1]) != sum(f.count for f in s.facts):
            out.append(f"{s.text!r}: the count is not its reads'")
    return out


def hindsight_problems(s, origin: int) -> list[str]:
    """The hindsight note (crashlab's ground truth) cites the commit of every record it names."""
    out = []
    text = " ".join(s.hindsight)
    for f in s.facts.remote:
        if f.ref in text and not re.search(rf"{re.escape(f.ref)} [^;]*#{f.seqs[0]}\b", text):
            out.append(f"hindsight {text!r} names {f.ref} without citing #{f.seqs[0]}")
    return out


def user_problems(sentences, s) -> list[str]:
    """A user sentence shows no event numbers, but rests on facts of its run (checked above):
    one about the effect on the ledger's entries of the run's own operation, one about the
    release on its compensation entries, one about a cancellation on it, and one that names
    who owns the check on the owner fact (whose name it shows)."""
    out = []
    every = set(s.facts.all()) | ({s.denial} if s.denial is not None else set())
    for x in sentences:
        kinds = {f.kind for f in x.facts}
        if set(x.facts) - every:
            out.append(f"user: {x.text!r} rests on a fact of no run")
        absent = {c.asserts for c in x.claims if c.about != "cancellation"} <= {"absent", "pending"}
        if {c.about for c in x.claims} & {"effect", "records", "release"} and "ledger" not in kinds \
                and not (absent and kinds & {"disposition", "resolution"}):
            out.append(f"user: {x.text!r} claims about the effect without a ledger fact")
        if any(c.about == "cancellation" for c in x.claims) and "cancellation" not in kinds:
            out.append(f"user: {x.text!r} claims a cancellation without its fact")
        if "owns the check" in x.text and not x.text.startswith("Nobody") and "owner" not in kinds:
            out.append(f"user: {x.text!r} names an owner without the owner fact")
    return out


def judge(events: list[dict]) -> tuple[Counter, list[str]]:
    """Every run of one trace: the kinds of fact seen, and every problem."""
    by_seq = {e["seq"]: e for e in events}
    origin = int(events[0].get("origin_ms") or 0)
    seen, problems = Counter(), []
    runs = [r["id"] for r in events[0].get("runs") or ()]
    for run in runs:
        finishes = [e for e in events if e.get("run") == run and e["kind"] == "finish" and e.get("accepted")]
        escalations = [e for e in events if e.get("run") == run and e["kind"] == "escalation"]
        disposition = finishes[-1]["disposition"] if finishes else None
        s = situation(run, disposition, escalations[-1]["packet"] if escalations else None, events, origin)
        raw = _raw(events, run)
        raw["results_by_seq"] = by_seq
        for f in s.facts.all():
            seen[f.kind] += 1
            problems += [f"{run}: {p}" for p in fact_problems(f, by_seq, raw)]
        problems += [f"{run}: {p}" for p in list_problems(s.facts, raw)]
        comms = communications(s)
        sentences = [*comms["operator"], *comms["service owner"], *summary_sentences(s), resolution_sentence(s)]
        problems += [f"{run}: {p}" for p in sentence_problems(sentences, origin)]
        problems += [f"{run}: {p}" for p in user_problems(comms["user"], s)]
        problems += [f"{run}: {p}" for p in hindsight_problems(s, origin)]
        if s.facts.resolution.flag:
            seen["resolved"] += 1
        elif disposition in RESOLVED:
            seen["resolved disposition, unresolved ledger"] += 1
        if s.facts.deadline is not None and s.facts.deadline.at is None:
            seen["no deadline"] += 1
        if s.facts.packet_deadline is not None and s.facts.deadline is not None \
                and s.facts.packet_deadline.at != s.facts.deadline.at:
            seen["packet deadline not the intake's"] += 1
    return seen, problems


def why_problems(events: list[dict], violations) -> list[str]:
    """A check's message cites only events the trace holds, names a deadline only for a run
    that has one, and a completion callback only where one was delivered to the run."""
    seqs = {e["seq"] for e in events if "seq" in e}
    deadlines = {e["run"]: e["event"]["payload"].get("deadline") for e in events
                 if e["kind"] == "deliver" and e["event"].get("type") == "intake"}
    callbacks = {e["run"] for e in events if e["kind"] == "deliver" and e["event"].get("type") == "callback"}
    out = []
    for v in violations:
        cited = {int(n) for n in re.findall(r"#(\d+)\b", v.message)}
        if cited - seqs or set(v.events) - seqs:
            out.append(f"{v.invariant}: {v.message!r} cites events the trace lacks")
        if re.search(r"\bthe deadline \d", v.message) and v.run is not None and deadlines.get(v.run) is None:
            out.append(f"{v.invariant}: {v.message!r} names a deadline the run has not")
        if "completion callback" in v.message and v.run is not None and v.run not in callbacks:
            out.append(f"{v.invariant}: {v.message!r} names a callback never delivered to the run")
    return out


# --------------------------------------------------------------------------- one session of runs
@pytest.fixture(scope="session")
def judged():
    """Every adapter on every library scenario, once, in process: (kinds seen, problems, seconds)."""
    start = time.perf_counter()
    seen, problems = Counter(), []
    scenarios = library()
    for adapter in ADAPTERS:
        for sc in scenarios:
            result = run_scenario(sc, adapter, None)
            s, p = judge(result.events)
            violations = check_trace(result.events).violations
            seen += s + Counter(f"why {v.invariant}" for v in violations)
            problems += [f"{adapter} {sc.id}: {x}" for x in p + why_problems(result.events, violations)]
    return seen, problems, time.perf_counter() - start


def test_every_fact_of_every_run_is_true_of_its_trace(judged):
    seen, problems, seconds = judged
    assert not problems, f"{len(problems)} problems, e.g.\n" + "\n".join(problems[:20])


def test_every_fact_kind_and_both_resolutions_are_exercised(judged):
    seen, _, seconds = judged
    print(f"{len(ADAPTERS)} adapters x {len(library())} scenarios judged in {seconds:.0f} s")
    assert set(KINDS) <= set(seen), set(KINDS) - set(seen)
    for case in ("resolved", "resolved disposition, unresolved ledger", "no deadline",
                 "packet deadline not the intake's", "why KNOW-02", "why LATE-01"):
        assert seen[case], case


# --------------------------------------------------------------------------- the measured cases
def _trace(scenario: str, adapter: str = REFERENCE) -> list[dict]:
    sc = next(s for s in library() if s.id == scenario)
    return run_scenario(sc, adapter, None).events


def _texts(events, run="run-82"):
    escalations = [e for e in events if e.get("run") == run and e["kind"] == "escalation"]
    finishes = [e for e in events if e.get("run") == run and e["kind"] == "finish" and e.get("accepted")]
    s = situation(run, finishes[-1]["disposition"] if finishes else None,
                  escalations[-1]["packet"] if escalations else None, events, int(events[0].get("origin_ms") or 0))
    return s, communications(s)


def test_t8_operator_message_names_the_reads_of_the_reservation_key_and_the_action_key():
    events = _trace("t8-compensation-failure")
    s, comms = _texts(events)
    operator = " ".join(x.text for x in comms["operator"])
    reserve = next(f.key for f in s.facts.ledger if f.role == "effect")
    lookups = [e for e in events if e["kind"] == "call" and e.get("op") == "lookup"]
    assert lookups and {e["args"]["key"] for e in lookups} == {reserve}
    assert f"Reads ({len(lookups)}, in the order sent): reservation.lookup of {reserve}" in operator
    assert "unavailable ×33, 10:01:06" in operator
    assert f"read reservation.lookup for {reserve}" in operator


def test_the_service_owner_list_is_in_send_order():
    events = _trace("t8-compensation-failure")
    _, comms = _texts(events)
    requests = next(x for x in comms["service owner"] if x.text.startswith("Requests"))
    calls = [s for f in requests.facts for s in f.seqs]
    assert calls == sorted(calls) and len(requests.facts) >= 3


def test_a_success_with_an_unknown_notification_is_not_resolved():
    s, _ = _texts(_trace("notify-crash-delivery-unknown"))
    line = resolution_sentence(s).text
    assert "nothing to decide" not in line and "SENT_UNKNOWN" in line and "unresolved" in line


def test_a_success_with_an_unknown_notification_tells_the_user_who_owns_the_check():
    s, comms = _texts(_trace("notify-crash-delivery-unknown"))
    user = [x.text for x in comms["user"]]
    assert user == ["Your inventory hold is in place.", "We could not confirm whether the message about it was sent.",
                    "An operator now owns the check. Please do not place the request again yourself; we will "
                    "tell you the outcome."]
    [sent] = comms["user"][1].facts
    assert (sent.kind, sent.op, sent.code) == ("ledger", "send", "SENT_UNKNOWN")


def test_a_packet_summary_without_a_deadline_says_there_is_none():
    s, _ = _texts(_trace("fieldops-no-key-lookup"))
    summary = " ".join(x.text for x in summary_sentences(s))
    assert "Deadline: none; the intake names none (#1)." in summary and "10:30" not in summary


def test_a_packet_whose_deadline_is_not_the_intakes_is_shown_so():
    s, _ = _texts(_trace("fieldops-no-key-lookup", "crashlab.gallery.unenforced:DeadlineDropped"))
    summary = " ".join(x.text for x in summary_sentences(s))
    assert "Deadline: none; the intake names none (#1)." in summary
    assert "The packet gives the deadline 10:30; the intake's is none" in summary


def test_a_converted_duration_loses_its_unit_and_a_missing_deadline_reads_none():
    from crashlab.report.packet import packet_html

    page = packet_html({"budget": {"deadline": None, "time_remaining_ms": 1_796_750, "retry_after_ms": 250}}, 0)
    assert "<dt>time_remaining</dt><dd>1796.75 s</dd>" in page
    assert "<dt>retry_after_ms</dt><dd>250 ms</dd>" in page
    assert "<dt>deadline</dt><dd>none</dd>" in page and "time_remaining_ms</dt><dd>1796" not in page
