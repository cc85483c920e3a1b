"""One verdict per integration trace: `crashlab check`, `crashlab report`'s loading path,
crashlab.check_trace and the integration card agree on every trace `crashlab integrate` writes;
and a card calls a rule exercised only when the run gave it something to judge."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from crashlab.checks.verdict import check_trace
from crashlab.cli import main
from crashlab.run.conformance import recheck_saved
from crashlab.checks.exercised import coverage
from crashlab.integrate.run import integrate
from crashlab.report.html import catalogue, scenario_page
from crashlab.report.view import Item
from crashlab.scenario.loader import resolve
from crashlab.world.trace import read_jsonl
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent
FIELD = "integration"      # the header field with the card's inputs
EXIT = {"pass": 0, "fail": 1, "inconclusive": 2}
AS_RESULT = {"pass": "pass", "fail": "fail", "inconclusive": "unknown"}

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def script(out: Path, name: str, body: str) -> str:
    path = out / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path} {{url}} {{db}} --out-marker={out}"


def lines(card) -> dict:
    return {line.invariant: line for line in card.lines}


def same_verdict_everywhere(outcome, capsys) -> None:
    """The card ``integrate`` printed, ``crashlab check``, the report's loading path and check_trace
    give the trace one verdict and one exit code."""
    card = outcome.card
    events = read_jsonl(outcome.trace)
    assert check_trace(events).verdict == AS_RESULT[card.verdict]
    assert recheck_saved(events, outcome.trace).verdict == AS_RESULT[card.verdict]     # `crashlab report`
    capsys.readouterr()
    assert main(["check", str(outcome.trace)]) == EXIT[card.verdict] == card.exit_code
    printed = capsys.readouterr().out
    assert f"{card.scenario}: integration verdict {card.verdict.upper()}" in printed
    assert main(["show", str(outcome.trace)]) == 0
    assert f"integration verdict: {card.verdict.upper()} (crashlab check" in capsys.readouterr().out
    # a rule the card could not judge is never a failure on the result, only a note
    failing = {line.invariant for line in card.lines if line.status == "fail"}
    assert {v.invariant for v in check_trace(events).violations} == failing
    from crashlab.checks.card import judged

    assert isinstance(events[0].get(FIELD), dict)          # the card's inputs are in the header
    assert judged(events).verdict == card.verdict and judged(events).lines == card.lines
    # the report page's coverage of the trace is the card's, rule by rule
    cov = coverage(check_trace(events), read_jsonl(outcome.trace), [i for i, _ in catalogue()])
    by = {s: {line.invariant for line in card.lines if line.status == s}
          for s in ("pass", "fail", "not exercised", "not judgeable")}
    assert (set(cov.held), set(cov.violated), set(cov.not_exercised), set(cov.not_judgeable)) == \
        (by["pass"], by["fail"], by["not exercised"], by["not judgeable"])


def test_the_careful_worker_on_fieldops_no_key_lookup_passes_for_check_too(out, capsys):
    outcome = integrate(resolve("fieldops-no-key-lookup"), worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert lines(outcome.card)["OWN-04"].status == "pass"     # judged on the finish row's next_owner
    same_verdict_everywhere(outcome, capsys)
    result = check_trace(read_jsonl(outcome.trace))
    # the escalation half of OWN-04 (the operator port) is a note, never a failure
    assert any(n.startswith("OWN-04 pass on an integration run") for n in result.notes)
    # no intake deadline in this scenario: nothing for the deadline rules to judge
    assert lines(outcome.card)["DEAD-01"].status == "not exercised"
    assert lines(outcome.card)["DEAD-02"].status == "not exercised"


def test_a_planted_mistake_fails_alike_on_the_card_and_in_check(out, capsys):
    outcome = integrate(resolve("matrix-ambiguous-effect"), worker=careful(out, "--mistake=sent_unknown_after"),
                        out=out)
    assert outcome.card.verdict == "fail"
    same_verdict_everywhere(outcome, capsys)


def test_a_worker_that_exits_without_finishing_passes_no_end_rule(out, capsys):
    worker = script(out, "dies", """\
        import sys
        sys.exit(1)
    """)
    outcome = integrate(resolve("t2-commit-before-record"), worker=worker, out=out)
    card = lines(outcome.card)
    assert outcome.card.verdict == "fail" and card["ADAPTER-FAULT"].status == "fail"
    assert card["DISP-01"].status == "not exercised" and "no accepted finish" in card["DISP-01"].why
    assert all(line.status != "pass" for i, line in card.items() if i.startswith("EXP-"))
    same_verdict_everywhere(outcome, capsys)
    # the report page of the same trace says the same
    events = read_jsonl(outcome.trace)
    result = recheck_saved(events, outcome.trace)
    cov = coverage(result, events, [i for i, _ in catalogue()])
    assert "DISP-01" in cov.not_exercised and "DISP-01" not in cov.held
    page = scenario_page(Item(result=result, events=events, name="t2"))
    held = page.split("invariants exercised and held", 1)[1].split("</details>", 1)[0]
    assert "DISP-01" not in held and "LEASE-01" not in held


def test_a_run_cut_by_the_wall_clock_is_inconclusive_in_check_too(out, capsys):
    worker = script(out, "hangs", """\
        import time
        time.sleep(60)
    """)
    outcome = integrate(resolve("t2-commit-before-record"), worker=worker, out=out, wall_limit_s=1.5)
    assert outcome.card.verdict == "inconclusive", outcome.card.text()
    same_verdict_everywhere(outcome, capsys)


def test_t7_the_late_callback_delivered_through_the_inbox_exercises_late01(out, capsys):
    outcome = integrate(resolve("t7-late-callback"), worker=careful(out), out=out)
    events = read_jsonl(outcome.trace)
    assert any(e.get("kind") == "deliver" and (e.get("event") or {}).get("type") == "callback" for e in events)
    assert lines(outcome.card)["LATE-01"].status == "pass", outcome.card.text()
    same_verdict_everywhere(outcome, capsys)


def test_an_older_integration_trace_without_the_card_inputs_is_never_a_pass(out, capsys):
    outcome = integrate(resolve("fieldops-no-key-lookup"), worker=careful(out), out=out)
    older = out / "older.jsonl"
    rows = outcome.trace.read_text().splitlines()
    head = json.loads(rows[0])
    del head[FIELD]
    older.write_text("\n".join([json.dumps(head)] + rows[1:]) + "\n")
    events = read_jsonl(older)
    from crashlab.checks.card import judged

    assert check_trace(events).verdict == "unknown" and judged(events).verdict == "inconclusive"
    capsys.readouterr()
    assert main(["check", str(older)]) == 2
    assert "before crashlab recorded the integration card's inputs" in capsys.readouterr().out


def test_a_malformed_card_input_is_a_one_line_error_naming_the_field(out, capsys):
    outcome = integrate(resolve("fieldops-no-key-lookup"), worker=careful(out), out=out)
    bad = out / "bad.jsonl"
    rows = outcome.trace.read_text().splitlines()
    head = json.loads(rows[0])
    head[FIELD]["views"] = "ledger"
    bad.write_text("\n".join([json.dumps(head)] + rows[1:]) + "\n")
    capsys.readouterr()
    assert main(["check", str(bad)]) == 3
    err = capsys.readouterr().err
    assert f"{bad}: the trace header's integration.views is not a list of strings" in err and "Traceback" not in err
