"""The integration card's premises: a scenario whose premise did not happen (a fault rule that met no
request, an armed failpoint that never fired, an early-read window that closed before the worker's
first read) is inconclusive, never a pass; the rules the store views and the sandbox's log can
judge are judged (OWN-04 on the finish row, FENCE-01 on the worker's ledger, T6's expectations);
and a rule the card cannot judge shows what the checks would have charged."""
from __future__ import annotations

import copy
import html
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crashlab.checks.card import judged
from crashlab.integrate.run import integrate
from crashlab.report.html import scenario_page
from crashlab.report.view import Item
from crashlab.checks.verdict import check_trace
from crashlab.scenario.loader import from_dict, load_file, resolve
from crashlab.world.trace import read_jsonl
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def finish_only(out: Path, disposition: str) -> str:
    """A worker that never calls a service: it creates the views and writes one finish row."""
    path = out / "finish_only.py"
    path.write_text(textwrap.dedent("""\
        import json, sqlite3, sys
        db = sqlite3.connect(sys.argv[2], isolation_level=None)
        for view in ("checkpoints", "ledger", "finish"):
            db.execute(f"CREATE TABLE IF NOT EXISTS {view}_t (seq INTEGER PRIMARY KEY, record TEXT NOT NULL)")
            db.execute(f"CREATE VIEW IF NOT EXISTS crashlab_{view} AS SELECT seq{' AS version' if view == 'checkpoints' else ''}, record FROM {view}_t")
        db.execute("INSERT INTO finish_t (record) VALUES (?)", (json.dumps(
            {"disposition": sys.argv[3], "effects": [], "next_owner": None, "reason": "nothing done"}),))
    """))
    return f"{sys.executable} {path} {{url}} {{db}} {disposition} --out-marker={out}"


def lines(card) -> dict:
    return {line.invariant: line for line in card.lines}


# --------------------------------------------------------------------------- OWN-04, FENCE-01: judged
def test_a_finish_that_hands_an_unresolved_effect_to_nobody_fails_own_04(out):
    outcome = integrate(resolve("matrix-weak-service"), worker=finish_only(out, "FAILED_EFFECT_UNKNOWN"), out=out)
    line = lines(outcome.card)["OWN-04"]
    assert outcome.card.verdict == "fail" and line.status == "fail", outcome.card.text()
    assert "names no next_owner" in line.why
    assert "OWN-04" in {v.invariant for v in check_trace(read_jsonl(outcome.trace)).violations}


def test_the_careful_worker_naming_the_operator_passes_own_04_on_the_finish_row(out):
    outcome = integrate(resolve("matrix-weak-service"), worker=careful(out), out=out)
    line = lines(outcome.card)["OWN-04"]
    assert outcome.card.verdict == "pass" and line.status == "pass", outcome.card.text()
    assert "judged on the finish row" in line.why
    # the escalation half, which a real worker never makes, is a note on the result, never a failure
    notes = check_trace(read_jsonl(outcome.trace)).notes
    assert any(n.startswith("OWN-04 pass on an integration run") and "not escalated" in n for n in notes)


def test_fence_01_is_judged_on_the_worker_ledger(out):
    outcome = integrate(resolve("matrix-lease-loss"), worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert lines(outcome.card)["FENCE-01"].status == "pass"
    events = read_jsonl(outcome.trace)
    sends = [e for e in events if e.get("kind") == "call" and e.get("op") == "reserve"
             and (e.get("args") or {}).get("fence") is not None]
    assert sends
    sends[-1]["args"].pop("fence")          # the same run, its last send without its fence
    card = judged(copy.deepcopy(events))
    line = lines(card)["FENCE-01"]
    assert card.verdict == "fail" and line.status == "fail", card.text()
    assert f"#{sends[-1]['seq']}" in line.why and "carries no fence" in line.why and "names lease epoch" in line.why


# --------------------------------------------------------------------------- premises that did not happen
def test_a_worker_that_ignores_its_failpoint_is_inconclusive_naming_it(out):
    worker = f"env -u CRASHLAB_FAILPOINT {careful(out)}"
    for scenario, spec in (("crash-2-after-prepare-before-send", "ledger.append:2:before"),
                           ("t3-record-before-response", "run.finish:1:before")):
        outcome = integrate(resolve(scenario), worker=worker, out=out / scenario)
        assert outcome.card.verdict == "inconclusive", outcome.card.text()
        assert any(spec in r and "never fired" in r for r in outcome.card.reasons), outcome.card.reasons
        assert outcome.result.verdict == "unknown"


def test_one_fault_rule_that_met_no_request_is_inconclusive_though_another_fired(out):
    intent = {"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1", "technician": "X", "quantity": 1,
              "principal": "U-1"}
    sc = from_dict({"id": "two-rules", "title": "two rules, one never met", "seed": 1,
                    "clock": {"origin": "10:00", "horizon": "10:10"}, "services": {"reservation": {}},
                    "runs": [{"id": "run-1", "approval": {"mode": "none"}, "intent": intent}],
                    "faults": [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": "lost_response"},
                               {"match": {"port": "reservation", "op": "reserve", "nth": 7}, "fault": "throttled"}]})
    outcome = integrate(sc, worker=careful(out), out=out)
    assert outcome.card.verdict == "inconclusive", outcome.card.text()
    assert [r for r in outcome.card.reasons if "did not happen" in r] == [
        "the fault rule, throttled on reservation.reserve #7 did not happen: it met no request, so the run never "
        "reached what the scenario tests"]


def test_a_worker_that_never_calls_the_service_fails_t6(out):
    outcome = integrate(resolve("t6-duplicate-input-event"), worker=finish_only(out, "FAILED_NO_EFFECT"), out=out)
    card = lines(outcome.card)
    assert outcome.card.verdict == "fail", outcome.card.text()
    assert card["EXP-DISPOSITION"].status == "fail" and card["EXP-EFFECTS"].status == "fail"
    assert "0 remote effect(s)" in card["EXP-EFFECTS"].why


def test_an_early_read_window_that_closed_before_the_first_read_is_inconclusive(out):
    outcome = integrate(resolve("matrix-late-arrival-search-only"), worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    assert not [r for r in judged(events).reasons if "early-read window" in r]
    landed = next(e["t"] for e in events if e.get("kind") == "effect")
    first = next(e for e in events if e.get("kind") == "call" and e.get("op") == "search")
    late = copy.deepcopy(events)                   # the same run on a slower machine: read after the landing
    for e in late:
        if e.get("kind") == "result" and e.get("call") == first["seq"]:
            e["t"] = landed + 1
    card = judged(late)
    assert card.verdict == "inconclusive", card.text()
    assert any("early-read window" in r and f"#{first['seq']}" in r for r in card.reasons)


def test_a_worker_trusting_one_early_negative_read_never_passes_under_load(out):
    burners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        for scenario in ("matrix-late-arrival-search-only", "matrix-eventual-consistency-lag"):
            outcome = integrate(resolve(scenario), worker=careful(out, "--mistake=trusts_early_negative"),
                                out=out / scenario)
            card = outcome.card
            assert card.verdict != "pass", card.text()
            if card.verdict == "fail":
                assert lines(card)["REC-01"].status == "fail", card.text()
            else:
                assert any("early-read window" in r for r in card.reasons), card.text()
    finally:
        for b in burners:
            b.kill()
            b.wait()


# --------------------------------------------------------------------------- EVT-02, judged
@pytest.mark.parametrize("scenario", ["t6-duplicate-input-event", "matrix-duplicate-callback"])
def test_a_duplicate_seen_and_never_recorded_fails_evt02_and_the_careful_worker_records_it(out, scenario):
    """The sandbox delivers each duplicate and sees the poll that returned it; the worker's checkpoints
    say what became of it. The careful worker lists every duplicate in its later checkpoints' evidence."""
    careful_run = integrate(resolve(scenario), worker=careful(out / "careful"), out=out / "careful")
    # matrix-duplicate-callback's callback is on the clock: a run that missed its fault rule is inconclusive
    assert careful_run.card.verdict in ("pass", "inconclusive"), careful_run.card.text()
    assert lines(careful_run.card)["EVT-02"].status == "pass", careful_run.card.text()
    silent = integrate(resolve(scenario), worker=careful(out / "silent", "--mistake=unrecorded_duplicates"),
                       out=out / "silent")
    line = lines(silent.card)["EVT-02"]
    assert silent.card.verdict == "fail" and line.status == "fail", silent.card.text()
    assert "has no recorded disposition" in line.why


# --------------------------------------------------------------------------- the finding, shown
def test_a_not_judgeable_line_shows_what_the_checks_would_have_charged(out):
    # the careful worker waits out a 429's Retry-After in its own process: no clock.sleep record
    outcome = integrate(load_file(ROOT / "examples" / "integration" / "scenarios" / "long-throttle.yaml"),
                        worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    line = lines(outcome.card)["RETRY-02"]
    assert line.status == "not judgeable" and "without a recorded backoff" in line.finding
    text = outcome.card.text()
    assert f"not judgeable: RETRY-02: {line.why}; the checks would have charged: {line.finding}" in text
    as_json = {i["id"]: i for i in outcome.card.to_json()["invariants"]}
    assert as_json["RETRY-02"]["finding"] == line.finding
    assert as_json["LEASE-01"]["finding"] is None and "finding" not in as_json["EFF-01"]
    events = read_jsonl(outcome.trace)
    page = scenario_page(Item(result=check_trace(events), events=events, name="long-throttle"))
    unjudged = page.split("invariants not judgeable on an integration run", 1)[1].split("</details>", 1)[0]
    assert "the checks would have charged" in unjudged
    assert html.escape(line.finding) in unjudged


def test_the_docs_table_lists_every_rule_the_card_cannot_judge_and_no_other():
    from crashlab.checks.card import NOT_JUDGEABLE, OWN_JUDGED

    doc = (ROOT / "docs" / "integration.md").read_text()
    table = doc.split("<!-- the not-judgeable table -->", 1)[1].split("\n\n", 1)[0]
    rows = [row for row in table.strip().splitlines()[2:] if row.startswith("|")]
    listed = {rule.strip() for row in rows for rule in row.split("|")[1].split(",")}
    assert listed == set(NOT_JUDGEABLE) - OWN_JUDGED
    assert not {"OWN-04", "FENCE-01", "EVT-01", "EVT-02"} & set(NOT_JUDGEABLE)
