"""Approvals for real workers: the sandbox's authority port, a durable wait woken by a delivery, and
AUTH-01 judged on an integration trace (the integration-authority scenarios, with the plain worker).

The plain careful worker asks the authority before preparing and before every send; its
``no_approval_check`` mistake never asks, and AUTH-01 (the rule the chapter names: "Approval binds a
proposal hash") catches it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate
from crashlab.scenario.loader import library, load_file, resolve
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "examples" / "integration" / "scenarios"
WAIT = SCENARIOS / "approval-wait.yaml"
REVOKED = SCENARIOS / "approval-revoked.yaml"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def lines(outcome, status: str) -> set[str]:
    return {line.invariant for line in outcome.card.lines if line.status == status}


def _integrate(sc, worker: str, out_dir: Path):
    """One integration run; an inconclusive careful run (a loaded machine) is run once more."""
    got = integrate(sc, worker=worker, out=out_dir)
    if got.card.verdict == "inconclusive":
        got = integrate(sc, worker=worker, out=out_dir / "again")
    return got


def test_the_authority_scenarios_are_tagged_for_their_own_suite():
    tagged = {sc.id for sc in library() if "integration-authority" in sc.tags}
    assert {"t4-approval-wait-crash", "t5-incompatible-deployment", "integration-approval-wait",
            "integration-approval-revoked"} <= tagged
    assert all("integration-authority" in load_file(p).tags for p in (WAIT, REVOKED))
    # in the default suite too: --suite runs them (the example paths link to the library's files)
    suite = {sc.id for sc in library() if "integration" in sc.tags}
    assert tagged <= suite and "integration-compensation-failure" in suite
    assert WAIT.resolve() == ROOT / "scenarios" / "integration-approval-wait.yaml" and load_file(WAIT).id in suite


def test_a_waiting_run_is_woken_by_its_approval_and_sends_once_under_it(out):
    got = _integrate(load_file(WAIT), careful(out), out)
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]
    assert "AUTH-01" in lines(got, "pass")
    trace = [json.loads(x) for x in got.trace.read_text().splitlines()]
    finishes = [e["disposition"] for e in trace if e["kind"] == "finish"]
    assert finishes[0] == "WAITING_HUMAN" and finishes[-1] == "SUCCEEDED"
    granted = next(e["seq"] for e in trace if e["kind"] == "approval_granted")
    woken = [e for e in trace if e["kind"] == "start" and e["seq"] > granted]
    assert woken and woken[0]["number"] == 2          # the delivery woke the run: its second worker


def test_a_revoked_approval_is_not_revived_by_the_checkpoint(out):
    got = _integrate(load_file(REVOKED), careful(out), out)
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]
    trace = [json.loads(x) for x in got.trace.read_text().splitlines()]
    assert [e["disposition"] for e in trace if e["kind"] == "finish"][-1] == "FAILED_NO_EFFECT"
    assert not [e for e in trace if e["kind"] == "call" and e.get("op") == "reserve"]


def test_t4_restores_the_wait_and_invents_no_approval(out):
    got = _integrate(resolve("t4-approval-wait-crash"), careful(out), out)
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]


@pytest.mark.parametrize("path", [WAIT, REVOKED], ids=["wait", "revoked"])
def test_a_worker_that_never_asks_the_authority_fails_auth01(out, path):
    got = integrate(load_file(path), worker=careful(out, "--mistake=no_approval_check"), out=out)
    assert got.card.verdict == "fail"
    assert "AUTH-01" in lines(got, "fail")
