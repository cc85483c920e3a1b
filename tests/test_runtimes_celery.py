"""Celery with Redis under ``crashlab integrate --runtime celery``: on the runtime subset, the naive
example (``autoretry_for`` and a redelivered task resending with no read) fails for the chapter's
rules and the careful one (the adapter table of docs/runtimes/celery.md) passes. crashlab's own
redis-server listens on 127.0.0.1 only and is gone after the run, like every worker."""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from crashlab.vocab.errors import UsageError
from crashlab.integrate.run import RUNTIME_SUITE, integrate
from crashlab.scenario.loader import resolve
from runtime_support import (AUTHORITY_SUITE, DEPLOY_AND_COMPENSATE, NAIVE_FAILS, ONE_MISTAKE, alive_with,
                             approval_outcome, assert_one_mistake_fails, assert_the_deployment_story, deploy_outcome,
                             no_leftovers, subset_scenario)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "runtimes" / "celery"
KEYLESS = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only"),
    pytest.mark.skipif(importlib.util.find_spec("celery") is None or importlib.util.find_spec("redis") is None,
                       reason="Celery is not installed: pip install -e '.[celery]' (Celery 5.7.0 with redis)"),
]
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="Debian's redis-server is not installed: apt-get install redis-server")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from crashlab.runtimes import load

    if shutil.which("redis-server") is None:
        pytest.skip("Debian's redis-server is not installed: apt-get install redis-server")
    rt = load("celery")
    work = tmp_path_factory.mktemp("celery")
    srv = rt.start(work / "runtime")
    assert srv.url.startswith("redis://127.0.0.1:") and _listening(srv.port)
    yield rt, srv, work
    srv.stop()
    srv.stop()                                       # safe twice
    assert srv.proc.poll() is not None and not _listening(srv.port), "redis-server outlived the run"
    assert not (work / "runtime" / "dump.rdb").exists()
    no_leftovers(str(work))


scenario = subset_scenario


def test_the_subset_is_the_documented_one():
    assert set(NAIVE_FAILS) == set(RUNTIME_SUITE)


@needs_redis
@pytest.mark.parametrize("name", list(RUNTIME_SUITE))
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, name):
    rt, srv, work = server
    cards = {}
    for example in ("naive", "careful"):
        cmd = f"{sys.executable} {EXAMPLES / (example + '.py')} --marker={work}"
        cards[example] = integrate(scenario(name), worker=cmd, out=work / example, runtime=rt, server=srv).card
    failed = {line.invariant for line in cards["naive"].lines if line.status == "fail"}
    assert cards["naive"].verdict == "fail" and NAIVE_FAILS[name] <= failed, cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    careful = cards["careful"].runtime
    assert careful.name == "celery" and careful.version == "5.7.0" and "task_acks_late" in careful.settings
    assert careful.runs[0].summary.startswith("Celery task SUCCESS") and careful.runs[0].commits == 1
    naive = cards["naive"].runtime.runs[0]
    if name == "integration-keyless-502":            # Celery's own record shows its retry; the sandbox, both commits
        assert "after 1 retry(ies)" in naive.summary and naive.commits == 2


def test_missing_redis_server_names_the_install_command(tmp_path, monkeypatch):
    from crashlab.runtimes import celery as profile

    monkeypatch.setattr(profile.shutil, "which", lambda name: None)
    with pytest.raises(UsageError) as err:
        profile.RUNTIME.start(tmp_path)
    assert "redis-server" in str(err.value) and "apt-get install redis-server" in str(err.value.hint)


def test_a_server_that_fails_to_start_shows_its_log_tail(tmp_path, monkeypatch):
    from crashlab.runtimes import celery as profile

    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --logfile ] && echo 'FATAL: bind: Address "
                    "already in use' > \"$2\"; shift; done\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(profile.shutil, "which", lambda name: str(fake))
    with pytest.raises(UsageError) as err:
        profile.RUNTIME.start(tmp_path / "work")
    assert "FATAL: bind: Address already in use" in str(err.value)
    assert "apt-get install redis-server" in str(err.value.hint) and os.path.exists(tmp_path / "work" / "redis.log")


@needs_redis
def test_careful_a_paused_worker_past_its_lease_writes_nothing_and_the_run_resumes(server):
    """The runtime does not fence a paused worker: the worker's own lease does (docs/runtimes/celery.md)."""
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}"
    outcome = integrate(resolve(str(KEYLESS.parent / "paused-past-lease.yaml")), worker=cmd, out=work / "paused",
                        runtime=rt, server=srv)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert outcome.card.runtime.runs[0].commits == 1


@needs_redis
def test_cli_starts_redis_once_on_loopback_and_leaves_no_port_behind(tmp_path, capsys):
    import re

    from crashlab.cli import main

    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={tmp_path}"
    assert main(["integrate", str(KEYLESS), "--runtime", "celery", "--worker", cmd, "--out", str(tmp_path / "o")]) == 0
    assert "runtime record run-82: Celery task SUCCESS" in capsys.readouterr().out
    log = (tmp_path / "o" / "runtime-celery" / "redis.log").read_text()
    port = int(re.search(r"port=(\d+)", log).group(1))
    assert not _listening(port), "crashlab's redis-server still listens after the run"
    assert not list((tmp_path / "o" / "runtime-celery").glob("dump.rdb"))
    assert not alive_with(str(tmp_path))


@needs_redis
def test_a_sigkill_of_crashlab_takes_its_redis_server_along(tmp_path):
    import re
    import subprocess

    slow = tmp_path / "slow.py"
    slow.write_text("import time\nwhile True: time.sleep(1)\n")
    proc = subprocess.Popen([sys.executable, "-m", "crashlab", "integrate", "matrix-throttling", "--runtime", "celery",
                             "--worker", f"{sys.executable} {slow}", "--out", str(tmp_path / "o")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "o" / "runtime-celery" / "redis.log"
    try:
        deadline = time.monotonic() + 30
        while not alive_with(str(slow)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(str(slow)), "the worker never started"
        port = int(re.search(r"port=(\d+)", log.read_text()).group(1))
        assert _listening(port)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while (_listening(port) or alive_with(str(slow))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _listening(port), "redis-server outlived a SIGKILL of crashlab"
    assert not alive_with(str(slow))


@needs_redis
@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful task waits as WAITING_HUMAN and is acknowledged; the woken worker
    publishes the run's next task, which asks again (a revoked approval: nothing sent)."""
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}"
    got = approval_outcome(rt, srv, cmd, name, work / "approval" / name)
    assert "the broker still holds 0 waiting, 0 unacked" in got.card.runtime.runs[0].summary


@needs_redis
@pytest.mark.parametrize("name", list(DEPLOY_AND_COMPENSATE))
def test_careful_pins_or_migrates_on_a_deployment_and_compensates(server, name):
    """T5 and T8: the task the stopped old worker left unacknowledged is re-delivered to the next code's
    worker, which migrates the schema-1 checkpoint before anything is sent, or pins the run (PINNED) and the old
    code's worker drains it with the run's next task; a cancellation after the confirmed hold is released with
    its own approval."""
    rt, srv, work = server
    out = work / "deploy" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_the_deployment_story(name, deploy_outcome(rt, srv, cmd, name, out))


@needs_redis
@pytest.mark.parametrize("name", list(ONE_MISTAKE))
def test_one_decision_away_fails_for_the_named_rule(server, name):
    """The next code reading the old checkpoint as its own fails MIG-01; a release sent without its own
    approval fails AUTH-01."""
    rt, srv, work = server
    out = work / "mistake" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_one_mistake_fails(name, deploy_outcome(rt, srv, cmd, name, out, ONE_MISTAKE[name][0]))
