"""The Go example worker (net/http, database/sql on SQLite) against the sandbox: the careful client
passes the integration suite and the approval scenarios (the integration-authority suite: it waits
for an approval, is woken by it, and never sends under a revoked one); net/http's default client
re-sends a keyed POST on its own when a reused connection is closed after the commit, and crashlab
catches the second retry owner."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate, suite
from crashlab.scenario.loader import load_file, resolve
from runtime_support import AUTHORITY_SUITE, assert_the_approval_story, statuses

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "examples" / "integration" / "go" / "worker.go"
GOPATH = "/usr/share/gocode"
ENABLE = ("needs Go and the SQLite driver: apt-get install golang-go golang-github-mattn-go-sqlite3-dev "
          "(.ci/run installs them)")

pytestmark = [
    pytest.mark.skipif(shutil.which("go") is None, reason=f"no `go` on PATH: {ENABLE}"),
    pytest.mark.skipif(not Path(GOPATH, "src/github.com/mattn/go-sqlite3").is_dir(),
                       reason=f"no github.com/mattn/go-sqlite3 under {GOPATH}: {ENABLE}"),
    pytest.mark.skipif(sys.platform != "linux", reason="process groups: Linux only"),
]


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("go") / "worker"
    env = {**os.environ, "GOPATH": GOPATH, "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": str(tmp_path_factory.mktemp("gocache"))}
    build = subprocess.run(["go", "build", "-tags", "libsqlite3", "-o", str(out), str(SOURCE)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return out


@pytest.mark.parametrize("scenario", [sc.id for sc in suite()])
def test_the_careful_go_worker_passes_the_integration_suite(binary, tmp_path, scenario):
    worker = f"{binary} {{url}} {{db}}"        # its own next code version, as --suite runs it
    outcome = integrate(resolve(scenario), worker=worker, out=tmp_path, worker_next=worker)
    if outcome.card.verdict == "inconclusive":
        # a premise did not happen under this machine's timing (the card names it): run it once more
        outcome = integrate(resolve(scenario), worker=worker, out=tmp_path / "again", worker_next=worker)
    assert outcome.card.verdict == "pass", outcome.card.text()


def test_the_go_worker_compensates_with_its_own_approval_and_its_mistake_fails_auth01(binary, tmp_path):
    """T8's integration form: the release is its own effect (own key, proposal, approval), prepared and recorded
    SENT_UNKNOWN before it leaves; without an approval of its own (-mistake=release_without_authority) AUTH-01 fails."""
    sc = resolve("integration-compensation-failure")
    got = integrate(sc, worker=f"{binary} {{url}} {{db}}", out=tmp_path / "careful")
    if got.card.verdict == "inconclusive":
        got = integrate(sc, worker=f"{binary} {{url}} {{db}}", out=tmp_path / "again")
    assert got.card.verdict == "pass", got.card.text()
    assert statuses(got)["AUTH-01"] == statuses(got)["COMP-01"] == "pass"
    assert got.result.dispositions == {"run-82": "CANCELLED_EFFECT_UNKNOWN"}
    bad = integrate(sc, worker=f"{binary} -mistake=release_without_authority {{url}} {{db}}", out=tmp_path / "bad")
    assert bad.card.verdict == "fail" and statuses(bad)["AUTH-01"] == "fail", bad.card.text()
    assert "reservation.release" in next(l.why for l in bad.card.lines if l.invariant == "AUTH-01")


def test_go_default_client_resends_a_keyed_post_and_is_caught(binary, tmp_path):
    outcome = integrate(resolve("matrix-weak-service"), worker=f"{binary} -client=default {{url}} {{db}}",
                        out=tmp_path)
    failed = {line.invariant for line in outcome.card.lines if line.status == "fail"}
    assert outcome.card.verdict == "fail" and {"EFF-01", "RETRY-03"} <= failed, outcome.card.text()
    # the worker saw one answer (200) while the service committed twice
    assert outcome.result.dispositions == {"run-82": "SUCCEEDED"}


def test_the_go_worker_fences_itself_when_it_resumes_after_a_takeover(binary, tmp_path):
    outcome = integrate(load_file(ROOT / "examples" / "integration" / "scenarios" / "paused-past-lease.yaml"),
                        worker=f"{binary} {{url}} {{db}}", out=tmp_path)
    assert outcome.card.verdict == "pass", outcome.card.text()


def test_the_go_worker_finds_its_own_hold_among_other_actors(binary, tmp_path):
    outcome = integrate(load_file(ROOT / "examples" / "integration" / "scenarios" / "background-traffic.yaml"),
                        worker=f"{binary} {{url}} {{db}}", out=tmp_path)
    assert outcome.card.verdict == "pass", outcome.card.text()


@pytest.mark.parametrize("scenario", list(AUTHORITY_SUITE))
def test_the_careful_go_worker_passes_the_authority_suite(binary, tmp_path, scenario):
    where = AUTHORITY_SUITE[scenario]
    sc = load_file(where) if isinstance(where, Path) else resolve(where)
    assert "integration-authority" in sc.tags
    outcome = integrate(sc, worker=f"{binary} {{url}} {{db}}", out=tmp_path)
    if outcome.card.verdict == "inconclusive":     # a premise did not happen under this machine's timing
        outcome = integrate(sc, worker=f"{binary} {{url}} {{db}}", out=tmp_path / "again")
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert_the_approval_story(scenario, outcome.trace)
    if scenario == "integration-approval-wait":
        assert statuses(outcome)["AUTH-01"] == "pass"


@pytest.mark.parametrize("scenario", ["handoff-2-confirmed-schema-change", "t5-incompatible-deployment"])
def test_the_go_worker_migrates_or_pins_across_a_deployment_and_its_mistake_fails_mig01(binary, tmp_path, scenario):
    """--worker-next: the Go worker as the next code version migrates a schema-1 checkpoint (handoff-2) or pins a
    canonicalization change to the old code (T5); -mistake=reads_old_schema reads the old checkpoint as its own."""
    careful = f"{binary} {{url}} {{db}}"
    outcome = integrate(resolve(scenario), worker=careful, out=tmp_path, worker_next=careful)
    if outcome.card.verdict == "inconclusive":     # a premise did not happen under this machine's timing
        outcome = integrate(resolve(scenario), worker=careful, out=tmp_path / "again", worker_next=careful)
    assert outcome.card.verdict == "pass" and statuses(outcome)["MIG-01"] == "pass", outcome.card.text()
    wrong = integrate(resolve(scenario), worker=careful, out=tmp_path / "mistake",
                      worker_next=f"{binary} -mistake=reads_old_schema {{url}} {{db}}")
    assert wrong.card.verdict == "fail" and statuses(wrong)["MIG-01"] == "fail", wrong.card.text()
