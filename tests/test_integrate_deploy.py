"""Redeployment for real workers (--worker-next): a scenario's deploy event starts the next code version,
told its versions in CRASHLAB_*_VERSION; an old worker still running is stopped (SIGTERM, then SIGKILL);
a PINNED run is drained by the old command; MIG-01 and PIN-01 are judged on the card.

The plain careful worker migrates a schema-1 checkpoint under schema 2 and pins anything else to the old
code; its ``reads_old_schema`` mistake reads the old checkpoint as its own and fails MIG-01, the rule the
chapter names ("Incompatible deployment: migrate explicitly or stop; never guess how old state maps")."""
from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from crashlab.checks.card import card
from crashlab.cli import main
from crashlab.integrate import deploy
from crashlab.integrate.run import integrate
from crashlab.scenario.loader import load_file, resolve
from crashlab.vocab.results import ScenarioResult, Violation
from runtime_support import careful, out  # noqa: F401 (out: a fixture)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def lines(outcome, status: str) -> set[str]:
    return {line.invariant for line in outcome.card.lines if line.status == status}


def events(outcome) -> list[dict]:
    return [json.loads(x) for x in outcome.trace.read_text().splitlines()]


def _integrate(sc, worker: str, out_dir: Path, worker_next: str | None, **kw):
    """One integration run; an inconclusive run (a loaded machine: the old worker wrote nothing before the
    deployment) is run once more."""
    got = integrate(sc, worker=worker, out=out_dir, worker_next=worker_next, **kw)
    if got.card.verdict == "inconclusive":
        got = integrate(sc, worker=worker, out=out_dir / "again", worker_next=worker_next, **kw)
    return got


def test_t5_the_next_code_pins_the_run_and_the_old_code_drains_it(out):
    got = _integrate(resolve("t5-incompatible-deployment"), careful(out), out, careful(out))
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]
    assert {"MIG-01", "PIN-01"} <= lines(got, "pass")
    trace = events(got)
    redeploy = [e for e in trace if e["kind"] == "redeploy"]
    assert len(redeploy) == 1 and redeploy[0]["runs"] == ["run-82"] and redeploy[0]["env"]["canonicalization_version"] == 2
    starts = [e for e in trace if e["kind"] == "start"]
    # w1 the old code; w2 the next code (its versions); w3 the old code again, pinned
    assert [s["env"]["canonicalization_version"] for s in starts] == [1, 2, 1]
    assert [e["disposition"] for e in trace if e["kind"] == "finish"] == ["WAITING_HUMAN", "PINNED", "SUCCEEDED"]
    pinned = next(e for e in trace if e["kind"] == "finish" and e["disposition"] == "PINNED")
    assert pinned["packet"]["pinned_env"]["canonicalization_version"] == 1
    assert "--worker-next" not in got.result.repro    # its default, the worker, is what ran
    [deployed] = trace[0]["integration"]["deployed"]
    assert deployed.startswith("deploy at 10:05") and deployed.endswith(": canonicalization_version 2, code_version 2")


def test_a_schema_change_is_migrated_and_the_confirmed_effect_replayed(out):
    got = _integrate(resolve("handoff-2-confirmed-schema-change"), careful(out), out, careful(out))
    assert got.card.verdict == "pass", [(l.invariant, l.why) for l in got.card.lines if l.status != "pass"]
    assert "MIG-01" in lines(got, "pass")
    trace = events(got)
    migrating = [e for e in trace if e["kind"] == "checkpoint" and e["state"] == "MIGRATING"]
    assert migrating and migrating[0]["checkpoint"]["migration"]["from"]["schema_version"] == 1
    assert sum(1 for e in trace if e["kind"] == "effect" and e.get("cause") != "other_actor") == 1


@pytest.mark.parametrize("scenario, changed", [("handoff-2-confirmed-schema-change", "schema_version 1 -> 2"),
                                               ("t5-incompatible-deployment", "canonicalization_version 1 -> 2")],
                         ids=["schema", "canonicalization"])
def test_a_next_version_that_reads_the_old_checkpoint_as_its_own_fails_mig01(out, scenario, changed):
    got = _integrate(resolve(scenario), careful(out), out, careful(out, "--mistake=reads_old_schema"))
    assert got.card.verdict == "fail"
    why = next(l.why for l in got.card.lines if l.invariant == "MIG-01")
    assert "MIG-01" in lines(got, "fail") and changed in why and "without migrating, pinning or stopping" in why
    next_code = careful(out, "--mistake=reads_old_schema")
    assert f"--worker-next {shlex.quote(next_code)}" in got.result.repro     # the repro line runs the same code again


@pytest.mark.parametrize("given", [None, "python3 next.py {url} {db}"], ids=["default", "named"])
def test_worker_next_defaults_to_the_worker_command_on_the_command_line(monkeypatch, given):
    """`crashlab integrate` always carries out a deployment: without --worker-next the next code version is the
    --worker command (a worker learns its version from CRASHLAB_CODE_VERSION), so T5 can be in --suite."""
    import crashlab.integrate.run as run_module

    seen = []

    def stop(sc, **kw):
        seen.append(kw["worker_next"])
        raise KeyboardInterrupt       # no worker runs: the arguments are all this test needs
    monkeypatch.setattr(run_module, "integrate", stop)
    argv = ["integrate", "t5-incompatible-deployment", "--worker", "python3 w.py {url} {db}"]
    assert main(argv + (["--worker-next", given] if given else [])) == 130
    assert seen == [given or "python3 w.py {url} {db}"]


def test_without_worker_next_a_deployment_is_inconclusive_naming_the_option(out):
    """integrate() itself (the library call) carries out no deployment without a next command."""
    got = integrate(resolve("t5-incompatible-deployment"), worker=careful(out), out=out)
    assert got.card.verdict == "inconclusive"
    assert any("--worker-next" in r and "deploy at 10:05" in r for r in got.card.reasons)
    assert {"MIG-01", "PIN-01"} <= lines(got, "not judgeable")
    assert not [e for e in events(got) if e["kind"] == "redeploy"]


HANGING = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)     # an old worker that ignores the deployment's SIGTERM
time.sleep(600)
"""

DEPLOY_WHILE_RUNNING = """
id: deploy-while-running
title: "A deployment while the old worker runs"
description: The old worker is still running at the deployment; it is stopped and the next code finishes.
tags: [deployment]
seed: 1
clock: {origin: "10:00", horizon: "10:30"}
services:
  reservation: {}
runs:
  - id: run-82
    intent: {tenant: T-1, incident: I-82, part: P-204, slot: S-19, technician: TECH-4, quantity: 1, principal: U-7}
    approval: {mode: none}
events:
  - {at: "10:05", type: deploy, code_version: 2}     # 3 s of real time: the old worker has ignored SIGTERM by then
"""


def test_an_old_worker_that_ignores_sigterm_is_killed_after_the_grace_and_the_next_code_runs(out):
    hanging = out / "hanging.py"
    hanging.write_text(HANGING)
    path = out / "deploy-while-running.yaml"
    path.write_text(textwrap.dedent(DEPLOY_WHILE_RUNNING))
    got = integrate(load_file(path), worker=f"{sys.executable} {hanging} --out-marker={out}", out=out,
                    worker_next=careful(out))
    trace = events(got)
    redeploy = next(e for e in trace if e["kind"] == "redeploy")
    assert redeploy["stopping"] == ["run-82/w1"]
    stop = next(e for e in trace if e["kind"] == "stop" and e["worker"] == "run-82/w1")
    assert "stopped by the deployment" in stop["reason"] and "killed (SIGKILL)" in stop["reason"]
    assert stop["t"] - redeploy["t"] >= deploy.GRACE_MS          # it ignored SIGTERM: killed after the grace
    starts = [e for e in trace if e["kind"] == "start"]
    assert [s["env"]["code_version"] for s in starts] == [1, 2]
    assert [e["disposition"] for e in trace if e["kind"] == "finish"] == ["SUCCEEDED"]
    assert not [e for e in trace if e["kind"] == "adapter_fault"]      # a deployment's stop is no fault of the worker


def test_an_old_worker_that_honours_sigterm_stops_at_a_safe_point(out):
    path = out / "deploy-while-running.yaml"     # at time scale 10: the deployment 3 s in, a grace of 3 s
    path.write_text(textwrap.dedent(DEPLOY_WHILE_RUNNING).replace('at: "10:05"', 'at: "10:00:30"'))
    slow = out / "slow.py"                    # the careful worker, 1 s before each request: alive at the deployment
    slow.write_text(f"import sys, time\nsys.path.insert(0, {str(Path(careful(out).split()[1]).parent)!r})\n"
                    "import worker\n_call = worker.Client.call\n"
                    "def call(self, *a, **k):\n    time.sleep(1.0)\n    return _call(self, *a, **k)\n"
                    "worker.Client.call = call\nsys.exit(worker.main(sys.argv[1:]))\n")
    got = integrate(load_file(path), worker=f"{sys.executable} {slow} {{url}} {{db}} --out-marker={out}", out=out,
                    worker_next=careful(out), time_scale=10)
    trace = events(got)
    stop = next(e for e in trace if e["kind"] == "stop" and e["worker"] == "run-82/w1")
    assert "it ended after SIGTERM" in stop["reason"], stop
    log = (out / "deploy-while-running" / "run-82.w1.log").read_text()
    assert "stopped by SIGTERM (a deployment) before a request" in log
    assert [e["disposition"] for e in trace if e["kind"] == "finish"] == ["SUCCEEDED"]     # the next code's


def test_a_worker_is_told_its_versions():
    assert deploy.version_env({"code_version": 2, "schema_version": 3, "other": 1}) == {
        "CRASHLAB_CODE_VERSION": "2", "CRASHLAB_SCHEMA_VERSION": "3"}


def test_a_deployment_that_met_no_old_checkpoint_did_not_happen():
    redeploy = {"kind": "redeploy", "run": None, "env": {"schema_version": 2}}
    old = {"kind": "checkpoint", "run": "r", "checkpoint": {"contract": {"schema_version": 1}}}
    new = {"kind": "start", "run": "r", "env": {"schema_version": 2}}
    assert deploy.unmet_migration(None, [redeploy, new]) and "did not happen" in deploy.unmet_migration(None, [redeploy, new])[0]
    assert deploy.unmet_migration(None, [old, redeploy, new]) == []
    assert deploy.unmet_migration(None, [new]) == []          # nothing was redeployed: nothing to meet
    code_only = {**redeploy, "env": {"code_version": 2}}
    assert deploy.unmet_migration(None, [code_only, new]) == []   # no contract version changed: nothing to migrate


def test_mig01_and_pin01_are_judged_only_once_a_deployment_was_carried_out():
    miss = Violation(invariant="MIG-01", message="run-82/w2 runs incompatible code", events=(1,))
    result = ScenarioResult(id="x", title="x", verdict="fail", dispositions={}, violations=(miss,), notes=(), seed=0,
                            repro="", trace=None, tags=())
    views = {"ledger", "checkpoints", "finish"}
    spared = card(result, views=views)
    assert next(l for l in spared.lines if l.invariant == "MIG-01").status == "not judgeable"
    judged = card(result, views=views, deployed=["deploy at 10:05: code_version 2"])
    assert next(l for l in judged.lines if l.invariant == "MIG-01").status == "fail" and judged.verdict == "fail"


def test_a_bad_worker_next_is_a_usage_error_naming_the_option(capsys):
    assert main(["integrate", "t5-incompatible-deployment", "--worker", sys.executable,
                 "--worker-next", f"{sys.executable} {{nope}}"]) == 3
    assert "--worker-next: unknown placeholder {nope}" in capsys.readouterr().err
