"""Compensation for real workers (T8): the careful Python worker answers a cancellation found after its hold
was confirmed with a release that is a separate effect (its own key, proposal and approval from the sandbox's
authority port), prepared and recorded SENT_UNKNOWN before it leaves; when the release's answer is lost and the
verification reads fail, both records survive and the run ends CANCELLED_EFFECT_UNKNOWN, naming the operator.

Its ``release_without_authority`` mistake releases without an approval of the release's own and fails AUTH-01,
the rule the chapter names ("Do not infer corrective authority from original permission")."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate
from crashlab.scenario.loader import load_file, resolve
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent
T8 = ROOT / "examples" / "integration" / "scenarios" / "compensation-failure.yaml"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def status(outcome) -> dict[str, str]:
    return {line.invariant: line.status for line in outcome.card.lines}


def _integrate(sc, worker: str, out_dir: Path):
    got = integrate(sc, worker=worker, out=out_dir)
    if got.card.verdict == "inconclusive":          # a loaded machine: once more
        got = integrate(sc, worker=worker, out=out_dir / "again")
    return got


def test_t8_the_release_is_its_own_effect_and_both_records_survive(out):
    got = _integrate(load_file(T8), careful(out), out)
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]
    assert status(got)["AUTH-01"] == status(got)["COMP-01"] == "pass"
    trace = [json.loads(x) for x in got.trace.read_text().splitlines()]
    ledger = [e["entry"] for e in trace if e["kind"] == "ledger"]
    release = [e for e in ledger if e["kind"] == "compensation"]
    original = [e for e in ledger if e["kind"] == "effect" and e["operation"] == "reserve"]
    assert release and release[0]["compensates"] == original[0]["semantic_key"] != release[0]["semantic_key"]
    assert [e["knowledge"] for e in original] == ["PROPOSED", "SENT_UNKNOWN", "CONFIRMED", "COMPENSATION_PROPOSED"]
    assert release[-1]["knowledge"] == "SENT_UNKNOWN"
    finish = [e for e in trace if e["kind"] == "finish"][-1]
    assert (finish["disposition"], finish["next_owner"]) == ("CANCELLED_EFFECT_UNKNOWN", "operator")
    sends = [e for e in trace if e["kind"] == "call" and e.get("op") == "release"]
    asked = [e for e in trace if e["kind"] == "call" and e.get("op") == "request" and e["args"].get("action") == "release"]
    assert len(sends) == 1 and asked and asked[0]["seq"] < sends[0]["seq"]   # its own approval, asked before


def test_a_release_without_its_own_approval_fails_auth01(out):
    got = integrate(load_file(T8), worker=careful(out, "--mistake=release_without_authority"), out=out)
    assert got.card.verdict == "fail" and status(got)["AUTH-01"] == "fail", got.card.text()
    assert "reservation.release" in next(l.why for l in got.card.lines if l.invariant == "AUTH-01")


def test_the_library_t8_fails_no_rule_for_the_careful_worker(out):
    """The library's T8 also fails searches, aggregate reads and lookups of a SENT_UNKNOWN key, which a worker that
    reads by key never makes: its card is inconclusive for those rules, never a failure."""
    got = integrate(resolve("t8-compensation-failure"), worker=careful(out), out=out)
    assert not [l.invariant for l in got.card.lines if l.status == "fail"], got.card.text()
    assert status(got)["COMP-01"] == status(got)["AUTH-01"] == "pass"
