"""LangGraph under ``crashlab integrate --runtime langgraph``: on the runtime subset, the naive agent
(a booking tool keyed by the model's tool_call_id, recovery by the framework's checkpointer only,
errors turned into messages the model answers by calling the tool again) fails for the chapter's
rules and the careful one (docs/agents/langgraph.md) passes; nothing leaves 127.0.0.1."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from crashlab.integrate.run import RUNTIME_SUITE, integrate
from crashlab.scenario.loader import resolve
from runtime_support import (AUTHORITY_SUITE, DEPLOY_AND_COMPENSATE, NAIVE_FAILS, ONE_MISTAKE, approval_outcome,
                             assert_one_mistake_fails, assert_only_loopback, assert_the_deployment_story,
                             deploy_outcome, hook_network, runtime_server, subset_scenario)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents" / "langgraph"
KEYLESS = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only"),
    pytest.mark.skipif(importlib.util.find_spec("langgraph") is None
                       or importlib.util.find_spec("langgraph.checkpoint.sqlite") is None,
                       reason="LangGraph is not installed: pip install 'crashlab[langgraph]'"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "langgraph", "langgraph")


@pytest.fixture
def netlog(tmp_path, monkeypatch, server):
    return hook_network(tmp_path, monkeypatch, server=server[1],
                        unset=("LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGCHAIN_API_KEY", "LANGSMITH_API_KEY"))


scenario = subset_scenario


def test_the_subset_is_the_documented_one():
    assert set(NAIVE_FAILS) == set(RUNTIME_SUITE)


def test_the_workers_environment_turns_tracing_off_and_names_the_checkpoint_file(server):
    rt, srv, _ = server
    assert srv.env["LANGCHAIN_TRACING_V2"] == "false" and srv.env["LANGSMITH_TRACING"] == "false"
    assert srv.env["CRASHLAB_RUNTIME"].endswith("langgraph-checkpoints.sqlite")
    assert rt.tested_version == importlib.metadata.version("langgraph")


@pytest.mark.parametrize("name", list(RUNTIME_SUITE))
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, netlog, name):
    rt, srv, work = server
    cards = {}
    for example in ("naive", "careful"):
        # the work folder in the command line lets the fixture find any process left behind
        cmd = f"{sys.executable} {EXAMPLES / (example + '.py')} --marker={work}"
        cards[example] = integrate(scenario(name), worker=cmd, out=work / example, runtime=rt, server=srv).card
    failed = {line.invariant for line in cards["naive"].lines if line.status == "fail"}
    assert cards["naive"].verdict == "fail" and NAIVE_FAILS[name] <= failed, cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    # LangGraph's own record beside the card, and the settings that make it a retry owner
    careful = cards["careful"].runtime
    assert careful.name == "langgraph" and careful.runs[0].commits == 1
    assert careful.runs[0].summary.startswith("LangGraph thread finished"), careful.runs[0].summary
    assert "the model called reserve 1 time(s)" in careful.runs[0].summary
    text = cards["careful"].text()
    assert "RetryPolicy" in text and "handle_tool_errors" in text and 'durability="async"' in text
    assert f"runtime record run-82: {careful.runs[0].summary}; the sandbox counted 1 commit(s)" in text
    record = json.loads(Path(careful.runs[0].record).read_text())
    assert record["unit"] == careful.runs[0].unit and {r["table"] for r in record["record"]} == {"checkpoints",
                                                                                                  "writes"}
    # no network: every worker process reached only for 127.0.0.1 (and the hook did see it do so)
    assert_only_loopback(netlog)


def test_the_framework_state_stays_out_of_the_workers_store_and_each_invocation_has_its_own_thread(server):
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}"
    first, second = (integrate(resolve("t2-commit-before-record"), worker=cmd, out=work / f"again{i}", runtime=rt,
                               server=srv).card for i in (1, 2))
    assert first.verdict == second.verdict == "pass", second.text()
    assert first.runtime.runs[0].unit != second.runtime.runs[0].unit       # {run} is run-82 in both
    # the second invocation ran its own thread from the start: it did not resume the first, finished one
    assert "the model called reserve 1 time(s)" in second.runtime.runs[0].summary
    assert second.runtime.runs[0].commits == 1
    store = sqlite3.connect(work / "again2" / "t2-commit-before-record" / "stores" / "run-82" / "run-82.sqlite")
    tables = {r[0] for r in store.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "writes" not in tables and [c[1] for c in store.execute("PRAGMA table_info(checkpoints)")] == \
        ["version", "record"]
    framework = sqlite3.connect(srv.env["CRASHLAB_RUNTIME"])
    threads = {r[0] for r in framework.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert {first.runtime.runs[0].unit, second.runtime.runs[0].unit} <= threads


def test_a_retry_policy_resends_inside_one_task_and_langgraphs_record_shows_one_call(server):
    """A RetryPolicy on the tools node is a retry owner crashlab cannot see in the framework's record:
    one reserve call and one answer there, two commits in the sandbox's log."""
    rt, srv, work = server
    cmd = f"{sys.executable} {EXAMPLES / 'naive.py'} --retry=policy --marker={work}"
    card = integrate(resolve(str(KEYLESS)), worker=cmd, out=work / "policy", runtime=rt, server=srv).card
    failed = {line.invariant for line in card.lines if line.status == "fail"}
    assert {"EFF-01", "RETRY-01"} <= failed, card.text()
    run = card.runtime.runs[0]
    assert run.commits == 2 and "the model called reserve 1 time(s)" in run.summary, run.summary


def test_a_checkpoint_folder_that_cannot_be_made_is_a_clear_error(tmp_path):
    from crashlab.vocab.errors import UsageError
    from crashlab.runtimes import load

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="LangGraph's checkpoint database"):
        load("langgraph").start(blocker / "runtime")


def test_the_summary_names_a_tool_call_asked_again_under_a_new_id():
    from crashlab.runtimes.langgraph import summary

    ask = [{"type": "human", "content": "{}"}]
    rows = [{"table": "checkpoints", "step": 1, "messages": ask + [
                {"type": "ai", "content": "", "tool_calls": [{"name": "reserve", "id": "call_a"}]}]},
            {"table": "checkpoints", "step": 3, "messages": ask + [
                {"type": "ai", "content": "", "tool_calls": [{"name": "reserve", "id": "call_b"}]},
                {"type": "tool", "content": "CONFIRMED", "tool_call_id": "call_b"},
                {"type": "ai", "content": "done"}]}]
    line = summary(rows)
    assert line.startswith("LangGraph thread finished: 2 checkpoint(s) up to step 3")
    assert "the model called reserve 2 time(s) (call_a, call_b), 1 answer(s) recorded" in line
    assert summary([]).startswith("LangGraph has no checkpoint")


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful booking tool asks the authority and the thread ends WAITING_HUMAN;
    the woken worker runs the run's next thread, whose tool asks again (a revoked approval: nothing sent)."""
    rt, srv, work = server
    approval_outcome(rt, srv, f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}", name,
                     work / "approval" / name)


@pytest.mark.parametrize("name", ["t5-incompatible-deployment", "integration-compensation-failure"])
def test_careful_agent_pins_on_a_deployment_and_compensates(server, name):
    """T5 and T8 for an agent: the next code's worker checks the checkpoint's versions in ``Unit.begin`` before
    the graph resumes and pins the run, which the old code drains in its next thread; a cancellation after
    the confirmed hold is released with its own approval."""
    rt, srv, work = server
    out = work / "deploy" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_the_deployment_story(name, deploy_outcome(rt, srv, cmd, name, out))


def test_careful_agent_one_decision_away_fails_mig01(server):
    """The next code reading the old checkpoint as its own fails MIG-01."""
    rt, srv, work = server
    name = "handoff-2-confirmed-schema-change"
    out = work / "mistake" / name
    cmd = f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={out}"
    assert_one_mistake_fails(name, deploy_outcome(rt, srv, cmd, name, out, ONE_MISTAKE[name][0]))
