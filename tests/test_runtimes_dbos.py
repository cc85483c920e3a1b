"""DBOS Transact under ``crashlab integrate --runtime dbos``: on the runtime subset, the naive
example (the effect sent from a step that DBOS retries and re-runs on recovery) fails for the
chapter's rules and the careful one (the adapter table of docs/runtimes/dbos.md) passes."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from crashlab.integrate.run import RUNTIME_SUITE, integrate
from crashlab.scenario.loader import resolve
from runtime_support import (AUTHORITY_SUITE, DEPLOY_AND_COMPENSATE, NAIVE_FAILS, ONE_MISTAKE, approval_outcome,
                             assert_one_mistake_fails, assert_the_deployment_story, deploy_outcome, runtime_server,
                             subset_scenario)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "runtimes" / "dbos"
KEYLESS = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only"),
    pytest.mark.skipif(importlib.util.find_spec("dbos") is None,
                       reason="DBOS is not installed: pip install -e '.[dbos]' (DBOS Transact 3.4.0)"),
]



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "dbos", "dbos")


scenario = subset_scenario


def test_the_subset_is_the_documented_one():
    assert set(NAIVE_FAILS) == set(RUNTIME_SUITE)


@pytest.mark.parametrize("name", list(RUNTIME_SUITE))
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, name):
    rt, srv, work = server
    cards = {}
    for example in ("naive", "careful"):
        # the work folder in the command line lets the fixture find any process left behind
        cmd = f"{sys.executable} {EXAMPLES / (example + '.py')} --marker={work}"
        cards[example] = integrate(scenario(name), worker=cmd, out=work / example, runtime=rt, server=srv).card
    failed = {line.invariant for line in cards["naive"].lines if line.status == "fail"}
    assert cards["naive"].verdict == "fail" and NAIVE_FAILS[name] <= failed, cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    # DBOS's own record, beside the card: the workflow, and the steps it recorded
    careful = cards["careful"].runtime
    assert careful.name == "dbos" and careful.version == "3.4.0"
    assert careful.runs[0].summary.startswith("DBOS workflow SUCCESS") and careful.runs[0].commits == 1
    record = Path(careful.runs[0].record).read_text()
    assert '"operation_outputs"' in record and '"dispatch"' in record
    if name.startswith(("crash-4", "t2-")):     # the kill: DBOS recovered the workflow in the next worker
        assert "started 2 time(s)" in careful.runs[0].summary


def test_a_missing_system_database_folder_is_a_clear_error(tmp_path):
    from crashlab.vocab.errors import UsageError
    from crashlab.runtimes import load

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError):
        load("dbos").start(blocker / "runtime")     # a path under a file: not creatable


def test_careful_a_paused_worker_past_its_lease_writes_nothing_and_the_run_resumes(server):
    """The runtime does not fence a paused worker: the worker's own lease does (docs/runtimes/dbos.md)."""
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}"
    outcome = integrate(resolve(str(KEYLESS.parent / "paused-past-lease.yaml")), worker=cmd, out=work / "paused",
                        runtime=rt, server=srv)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert outcome.card.runtime.runs[0].commits == 1


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful example waits as WAITING_HUMAN, its workflow ends, and the woken
    worker runs the run's next workflow, which asks again (a revoked approval: nothing sent)."""
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}"
    got = approval_outcome(rt, srv, cmd, name, work / "approval" / name)
    assert "DBOS workflow SUCCESS" in got.card.runtime.runs[0].summary    # the first workflow ended waiting


@pytest.mark.parametrize("name", list(DEPLOY_AND_COMPENSATE))
def test_careful_pins_or_migrates_on_a_deployment_and_compensates(server, name):
    """T5 and T8: the next code's worker (a new process, whose DBOS.launch() recovers the
    run's pending workflow under the same executor id) migrates the schema-1 checkpoint before the workflow's
    first step runs, or pins the run (PINNED, no workflow touched) and the old code drains it in the run's next
    workflow; a cancellation after the confirmed hold is released with its own approval."""
    rt, srv, work = server
    out = work / "deploy" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_the_deployment_story(name, deploy_outcome(rt, srv, cmd, name, out))


@pytest.mark.parametrize("name", list(ONE_MISTAKE))
def test_one_decision_away_fails_for_the_named_rule(server, name):
    """The next code reading the old checkpoint as its own fails MIG-01; a release sent without its own
    approval fails AUTH-01."""
    rt, srv, work = server
    out = work / "mistake" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_one_mistake_fails(name, deploy_outcome(rt, srv, cmd, name, out, ONE_MISTAKE[name][0]))
