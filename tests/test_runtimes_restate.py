"""Restate under ``crashlab integrate --runtime restate``: the server is crashlab's (from a
project-local npm folder, no telemetry), the naive example fails for the chapter's rules and the
careful one passes, and the introspection is read beside the card. Skipped, naming the install
commands, where Restate is not installed."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_support import (DEPLOY_AND_COMPENSATE, ONE_MISTAKE, assert_one_mistake_fails,
                             assert_the_deployment_story, deploy_outcome,
                             KEYLESS_502, KEYLESS_CRASH, ROOT, assert_handed_over_before_the_stale_worker_resumed, closed,
                             AUTHORITY_SUITE, approval_outcome, example, independent, no_leftovers, statuses)

PIP = "pip install 'crashlab[restate]'"
NPM = "npm install --prefix .runtimes/npm @restatedev/restate-server-linux-x64@1.7.12"
HAVE_SDK = importlib.util.find_spec("restate") is not None and importlib.util.find_spec("hypercorn") is not None


def _have_server() -> bool:
    if not HAVE_SDK:
        return False
    from crashlab.vocab.errors import UsageError
    from crashlab.runtimes.restate import server_binary
    try:
        server_binary()
    except UsageError:
        return False
    return True


HAVE_ALL = _have_server()
REASON = f"Restate is not installed: {PIP}, then {NPM} (in the repository's folder)"
needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=f"Restate's SDK is not installed: {PIP}")
if sys.platform != "linux":
    pytestmark = pytest.mark.skip(reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not HAVE_ALL:
        pytest.skip(REASON)
    from crashlab.runtimes import load
    runtime = load("restate")
    srv = runtime.start(tmp_path_factory.mktemp("restate") / "server")
    yield runtime, srv
    srv.stop()


def _integrate(server, scenario, worker_name: str, out: Path, command: str | None = None):
    from crashlab.integrate.run import integrate
    from crashlab.scenario.loader import load_file, resolve
    runtime, srv = server
    sc = load_file(scenario) if isinstance(scenario, Path) else resolve(scenario)
    outcome = integrate(sc, worker=command or example("restate", worker_name, out), out=out, runtime=runtime,
                        server=srv)
    no_leftovers(f"--out-marker={out}")
    return outcome


@pytest.mark.parametrize("scenario", ["crash-4-after-commit-before-record", KEYLESS_502, KEYLESS_CRASH,
                                      "matrix-conflict-in-flight-second-run"],
                         ids=["kill-after-commit", "keyless-502", "keyless-kill-after-commit", "two-runs-at-once"])
@pytest.mark.runtime_heavy
def test_careful_example_passes(server, scenario, tmp_path):
    outcome = _integrate(server, scenario, "careful", tmp_path)
    assert outcome.card.verdict == "pass", outcome.card.text()
    services = []
    for path in tmp_path.glob("*/runtime-record.*.json"):     # each run its own invocation, served by its own worker
        record = json.loads(path.read_text())["record"]
        assert [r["status"] for r in record if r["row"] == "invocation"] == ["completed"]
        assert [r["name"] for r in record if r.get("entry_type") == "Command: Run"] == ["prepare", "effect"]
        services += [r["target"].split("/")[0] for r in record if r["row"] == "invocation"]
    # one service name per run: with a shared name, the latest registered worker would take the other run's work
    assert services and len(set(services)) == len(services)


@pytest.mark.runtime_heavy
def test_a_stalled_run_is_handed_to_the_next_worker_before_the_stale_one_resumes(server, tmp_path):
    # its deployment moved to the replacement's process, the stalled attempt aborted after the service's inactivity and abort timeouts
    assert_handed_over_before_the_stale_worker_resumed(_integrate(server, "matrix-lease-loss", "careful", tmp_path))


@pytest.mark.parametrize("scenario", ["crash-4-after-commit-before-record", "matrix-lease-loss"])
@pytest.mark.runtime_heavy
def test_a_design_written_from_the_docs_alone_passes(server, scenario, tmp_path):
    # gallery/independent/restate_worker.py: its own handler split, retry options and store, its own lease
    outcome = _integrate(server, scenario, "", tmp_path, command=independent("restate", tmp_path))
    assert outcome.card.verdict == "pass", outcome.card.text()


@pytest.mark.runtime_heavy
def test_naive_example_fails_for_the_chapters_rules(server, tmp_path):
    keyed = _integrate(server, "crash-4-after-commit-before-record", "naive", tmp_path / "keyed")
    rules = statuses(keyed)
    assert keyed.card.verdict == "fail"
    assert rules["RETRY-01"] == "fail" and rules["EFF-01"] == "pass"      # re-run blind; the key saved it
    keyless = _integrate(server, KEYLESS_CRASH, "naive", tmp_path / "keyless")
    rules = statuses(keyless)
    assert rules["EFF-01"] == "fail" and rules["RETRY-01"] == "fail"     # two holds on a keyless service
    assert any("2 commit(s)" in line and "ctx.run reserve, each once" in line for line in keyless.card.runtime.text())


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not HAVE_ALL, reason=REASON)
def test_cli_starts_one_server_and_leaves_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "crash-4-after-commit-before-record",
                           "--runtime", "restate", "--worker", example("restate", "careful", tmp_path),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runtime: Restate" in done.stdout and "journal: ctx.run prepare, effect" in done.stdout
    no_leftovers(str(tmp_path))                      # the server's data folder is under the output folder
    assert not (tmp_path / "runtime-restate").exists()


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not HAVE_ALL, reason=REASON)
def test_server_stop_closes_its_ports_and_sends_nothing_out(tmp_path):
    from crashlab.runtimes.restate import RUNTIME
    srv = RUNTIME.start(tmp_path / "server")
    config = (tmp_path / "server" / "config.toml").read_text()
    assert "disable-telemetry = true" in config and "0.0.0.0" not in config
    ports = [int(u.rsplit(":", 1)[1]) for u in (srv.env["CRASHLAB_RUNTIME"], srv.env["CRASHLAB_RESTATE_ADMIN"])]
    assert not any(closed(p) for p in ports)
    srv.stop()
    srv.stop()                                       # safe twice
    assert all(closed(p) for p in ports) and not (tmp_path / "server").exists()
    no_leftovers(str(tmp_path))


@needs_sdk
def test_missing_server_names_the_npm_install(monkeypatch, tmp_path):
    from crashlab.vocab.errors import UsageError
    from crashlab.runtimes import restate
    monkeypatch.delenv("CRASHLAB_RESTATE_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(restate, "LOCAL_PREFIX", Path("nowhere"))
    with pytest.raises(UsageError) as info:
        restate.server_binary()
    assert "npm install --prefix" in str(info.value) and "@1.7.12" in str(info.value)


@needs_sdk
def test_summary_names_each_ctx_run_and_the_unfinished_one():
    from crashlab.runtimes.restate import RestateServer
    rows = [{"row": "invocation", "id": "inv_1", "status": "completed", "retry_count": 2},
            {"row": "journal", "invocation": "inv_1", "index": 1, "entry_type": "Command: Run", "name": "reserve"},
            {"row": "journal", "invocation": "inv_1", "index": 2, "entry_type": "Notification: Run"},
            {"row": "journal", "invocation": "inv_1", "index": 3, "entry_type": "Command: Run", "name": "notify"}]
    assert RestateServer.summary(rows) == ("Restate introspection: invocation completed, 2 retries of the "
                                           "invocation; journal: ctx.run reserve, notify (no result), each once "
                                           "(a ctx.run cut by a crash is not in the journal)")
    assert RestateServer.summary([]) == "Restate introspection: no invocation for this run"


@pytest.mark.runtime_heavy
@pytest.mark.skipif(not HAVE_ALL, reason=REASON)
def test_a_sigkill_of_crashlab_takes_the_server_and_the_workers_with_it(tmp_path):
    import signal
    import time
    proc = subprocess.Popen([sys.executable, "-m", "crashlab", "integrate", "fieldops-worked-recovery",
                             "--runtime", "restate", "--worker", example("restate", "careful", tmp_path),
                             "--out", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("fieldops-worked-recovery/*.w1.log")) and time.monotonic() < deadline:
            time.sleep(0.05)                             # the server is up and the first worker started
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    no_leftovers(str(tmp_path))                      # restate-server's data folder is under the output folder


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
@pytest.mark.runtime_heavy
def test_careful_asks_the_authority_waits_and_is_woken(server, name, tmp_path):
    """The approval scenarios: the careful example's prepare step asks the authority and ends the workflow
    WAITING_HUMAN; the woken worker starts the run's next workflow, which asks again, and again right before
    the send (a revoked approval: nothing sent)."""
    runtime, srv = server
    approval_outcome(runtime, srv, example("restate", "careful", tmp_path), name, tmp_path)
    no_leftovers(f"--out-marker={tmp_path}")


@pytest.mark.parametrize("name", list(DEPLOY_AND_COMPENSATE))
@pytest.mark.runtime_heavy
def test_careful_pins_or_migrates_on_a_deployment_and_compensates(server, name, tmp_path):
    """T5 and T8: the next code's worker process takes the run's deployment (its URI
    moved there) and the invocation's next attempt runs its step, which migrates the schema-1 checkpoint, or
    ends the invocation PINNED and the old code drains the run in its next workflow; a cancellation after the
    confirmed hold is released with its own approval."""
    runtime, srv = server
    cmd = example("restate", "careful", tmp_path)
    assert_the_deployment_story(name, deploy_outcome(runtime, srv, cmd, name, tmp_path))


@pytest.mark.parametrize("name", list(ONE_MISTAKE))
@pytest.mark.runtime_heavy
def test_one_decision_away_fails_for_the_named_rule(server, name, tmp_path):
    """The next code reading the old checkpoint as its own fails MIG-01; a release sent without its own
    approval fails AUTH-01."""
    runtime, srv = server
    cmd = example("restate", "careful", tmp_path)
    assert_one_mistake_fails(name, deploy_outcome(runtime, srv, cmd, name, tmp_path, ONE_MISTAKE[name][0]))
