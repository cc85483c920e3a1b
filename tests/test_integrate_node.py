"""The Node.js example worker under `crashlab integrate`: a real process with its own SQLite
store (written through the sqlite3 shell), over HTTP on 127.0.0.1, killed with real signals.

The careful worker passes the integration suite, a paused-past-its-lease scenario and the
approval scenarios (the integration-authority suite: it waits for an approval, is woken by it, and
never sends under a revoked one); each planted mistake (`--mistake=NAME`) fails for the rule the
chapter names. Skipped, saying what to install, where node or the sqlite3 shell is missing.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_support import AUTHORITY_SUITE, assert_the_approval_story

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "examples" / "integration" / "node"
WORKER = NODE_DIR / "worker.js"
PAUSED = NODE_DIR / "scenarios" / "paused-past-lease-node.yaml"
MINIMUM = ("EFF-01", "PREP-02", "RETRY-01", "REC-01", "TRUTH-01")

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None,
                       reason="node is not installed: apt-get install nodejs (Node 18 or newer)"),
    pytest.mark.skipif(shutil.which("sqlite3") is None,
                       reason="the sqlite3 shell is not installed: apt-get install sqlite3"),
]


def _leftovers(marker):
    """Processes whose command line names this test's folder (a worker left behind)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and "pytest" not in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def _integrate(tmp_path, args, mistake=None, timeout=240):
    worker = f"node {WORKER} {{url}} {{db}}" + (f" --mistake={mistake}" if mistake else "")
    out, cards = tmp_path / "out", tmp_path / "cards.json"
    proc = subprocess.run(
        [sys.executable, "-m", "crashlab", "integrate", *args, "--worker", worker,
         "--out", str(out), "--json", str(cards)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    assert not _leftovers(str(tmp_path)), _leftovers(str(tmp_path))
    result = json.loads(cards.read_text())["integration"]
    return proc, {card["scenario"]: card for card in result}


def _status(card):
    return {item["id"]: item["status"] for item in card["invariants"]}


def test_the_careful_node_worker_passes_the_suite_and_a_paused_worker(tmp_path):
    proc, cards = _integrate(tmp_path, ["--suite", str(PAUSED)])
    # an inconclusive card says a premise did not happen under this machine's timing (a worker that
    # started after an early-read window closed): that scenario runs once more, and must pass then
    again = [sc for sc, card in cards.items() if card["verdict"] == "inconclusive"]
    assert len(again) <= 2, proc.stdout[-4000:]
    for sc in again:
        rerun, more = _integrate(tmp_path / f"again-{sc}", [str(PAUSED) if sc == "paused-past-lease-node" else sc])
        cards[sc] = more[sc]
    assert proc.returncode == 0 or again, proc.stdout[-4000:]
    assert len(cards) >= 21 and "paused-past-lease-node" in cards
    for scenario, card in cards.items():
        assert card["verdict"] == "pass", (scenario, card)
        status = _status(card)
        for rule in MINIMUM:
            assert status[rule] in ("pass", "not exercised"), (scenario, rule, status[rule])   # never not judgeable


@pytest.mark.parametrize("mistake, scenario, rules", [
    # a blind resend after a 502 on a keyless service: two holds for one intent
    ("blind_retry", "matrix-retry-amplification", {"EFF-01", "RETRY-01"}),
    # SENT_UNKNOWN written only after the answer: the send followed no entry of its own
    ("sent_unknown_after", "matrix-ambiguous-effect", {"PREP-02"}),
])
def test_a_planted_mistake_fails_for_its_rule(tmp_path, mistake, scenario, rules):
    proc, cards = _integrate(tmp_path, [scenario], mistake=mistake, timeout=120)
    assert proc.returncode == 1, proc.stdout[-4000:]
    card = cards[scenario]
    assert card["verdict"] == "fail"
    failed = {rule for rule, status in _status(card).items() if status == "fail"}
    assert rules <= failed, (failed, proc.stdout[-4000:])


def test_without_a_mistake_the_same_scenarios_pass(tmp_path):
    proc, cards = _integrate(tmp_path, ["matrix-retry-amplification", "matrix-ambiguous-effect"], timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {card["verdict"] for card in cards.values()} == {"pass"}


def test_the_careful_node_worker_passes_the_authority_suite(tmp_path):
    proc, cards = _integrate(tmp_path, ["--tag", "integration-authority"])     # the library's: T5 among them
    assert set(AUTHORITY_SUITE) | {"t5-incompatible-deployment"} <= set(cards), proc.stdout[-4000:]
    for scenario, card in cards.items():
        if scenario not in AUTHORITY_SUITE:         # T5: its deployment's story (MIG-01, PIN-01) is tested below
            assert card["verdict"] in ("pass", "inconclusive"), (scenario, card)
            continue
        if card["verdict"] == "inconclusive":     # a premise did not happen under this machine's timing
            _, more = _integrate(tmp_path / f"again-{scenario}", [str(AUTHORITY_SUITE[scenario])])
            card = more[scenario]
        assert card["verdict"] == "pass", (scenario, card)
        assert_the_approval_story(scenario, Path(card["trace"]))
    assert _status(cards["integration-approval-wait"])["AUTH-01"] == "pass"


@pytest.mark.parametrize("scenario", ["integration-approval-wait", "integration-approval-revoked"])
def test_a_node_worker_that_never_asks_the_authority_fails_auth01(tmp_path, scenario):
    proc, cards = _integrate(tmp_path, [str(AUTHORITY_SUITE[scenario])], mistake="no_approval_check", timeout=120)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert cards[scenario]["verdict"] == "fail" and _status(cards[scenario])["AUTH-01"] == "fail", proc.stdout[-4000:]


def test_the_node_worker_compensates_with_its_own_approval_and_its_mistake_fails_auth01(tmp_path):
    """T8's integration form: the release is its own effect (own key, proposal and approval), prepared and recorded
    SENT_UNKNOWN before it leaves; --mistake=release_without_authority releases without it and fails AUTH-01."""
    proc, cards = _integrate(tmp_path / "careful", ["integration-compensation-failure"], timeout=120)
    card = cards["integration-compensation-failure"]
    assert card["verdict"] == "pass", proc.stdout[-4000:]
    assert _status(card)["AUTH-01"] == _status(card)["COMP-01"] == "pass"
    trace = [json.loads(x) for x in Path(card["trace"]).read_text().splitlines()]
    ledger = [e["entry"] for e in trace if e["kind"] == "ledger"]
    release = [e for e in ledger if e["kind"] == "compensation"]
    assert release and release[-1]["knowledge"] == "SENT_UNKNOWN"
    assert "COMPENSATION_PROPOSED" in [e["knowledge"] for e in ledger if e["kind"] == "effect"]
    proc, cards = _integrate(tmp_path / "mistake", ["integration-compensation-failure"],
                             mistake="release_without_authority", timeout=120)
    card = cards["integration-compensation-failure"]
    assert card["verdict"] == "fail" and _status(card)["AUTH-01"] == "fail", proc.stdout[-4000:]


def test_an_unknown_mistake_is_a_usage_error():
    proc = subprocess.run(["node", str(WORKER), "http://127.0.0.1:9", "unused.db", "--mistake=no_such_thing"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "unknown --mistake=no_such_thing" in proc.stderr and "no_approval_check" in proc.stderr


SLOW_CLOCK = ROOT / "examples" / "integration" / "scenarios" / "slow-clock-past-lease.yaml"


def test_the_careful_node_worker_passes_on_a_slow_clock_fenced_by_its_store(tmp_path):
    """Node reads its clock through the C library: libfaketime slows the first worker's clock, and its
    lease, compared and set in the store, still fences it when it resumes."""
    from crashlab.integrate import clocks

    if clocks.library() is None:
        pytest.skip(f"libfaketime is not installed ({clocks.INSTALL}): the scenario skews a worker's clock")
    proc, cards = _integrate(tmp_path, [str(SLOW_CLOCK)])
    card = cards["integration-slow-clock-past-lease"]
    assert card["verdict"] == "pass", proc.stdout[-4000:]
    assert card["clocks"] and card["clocks"][0].startswith("run-82/w1: running at 0.05x real speed"), card


def test_the_node_worker_migrates_or_pins_across_a_deployment_and_its_mistake_fails_mig01(tmp_path):
    """--worker-next: the Node worker as the next code version migrates a schema-1 checkpoint (handoff-2) and pins
    a canonicalization change to the old code (T5); reading the old checkpoint as its own fails MIG-01."""
    scenarios = ["handoff-2-confirmed-schema-change", "t5-incompatible-deployment"]
    careful = f"node {WORKER} {{url}} {{db}}"
    _, cards = _integrate(tmp_path / "careful", [*scenarios, "--worker-next", careful, "--again", "1"])
    for name in scenarios:
        status = {line["id"]: line["status"] for line in cards[name]["invariants"]}
        assert cards[name]["verdict"] == "pass" and status["MIG-01"] == "pass", cards[name]
    _, cards = _integrate(tmp_path / "mistake", [*scenarios, "--worker-next", careful + " --mistake=reads_old_schema",
                                                  "--again", "1"])
    for name in scenarios:
        status = {line["id"]: line["status"] for line in cards[name]["invariants"]}
        assert cards[name]["verdict"] == "fail" and status["MIG-01"] == "fail", cards[name]
