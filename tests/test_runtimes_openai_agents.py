"""The OpenAI Agents SDK on DBOS under ``crashlab integrate --runtime openai-agents-dbos``: the naive agent
(inline function tools keyed by the model's call_id, a failure turned into a message the model answers
by calling the tool again) fails for the chapter's rules, the careful one (docs/agents/openai-agents.md)
passes, the card says whether each tool ran as a DBOS step or inline, and nothing leaves 127.0.0.1.
A few scenarios here; the whole suite is measured in the docs."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

from crashlab.scenario.loader import resolve
from runtime_support import (KEYLESS_502, assert_a_missing_package_names_the_extra, assert_only_loopback, failed,
                             hook_network, naive_and_careful, runtime_server)
from runtime_support import AUTHORITY_SUITE, approval_outcome

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents" / "openai_agents"
KEYLESS_AFTER_TOOL = ROOT / "examples" / "agents" / "scenarios" / "keyless-crash-after-tool.yaml"
INSTALL = "pip install 'crashlab[openai-agents]'"

installed = pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                                   for m in ("agents", "dbos_openai_agents", "dbos")),
                               reason=f"the OpenAI Agents SDK or its DBOS runner is not installed: {INSTALL}")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "openai-agents-dbos", "openai-agents")


@pytest.fixture
def netlog(tmp_path, monkeypatch, server):
    return hook_network(tmp_path, monkeypatch, server=server[1],
                        unset=("OPENAI_API_KEY", "OPENAI_AGENTS_DISABLE_TRACING"))


@installed
def test_the_profile_names_its_versions_and_turns_tracing_off(server):
    rt, srv, _ = server
    assert rt.tested_version == f"openai-agents {importlib.metadata.version('openai-agents')}"
    assert importlib.metadata.version("dbos-openai-agents") in rt.title
    assert importlib.metadata.version("dbos") in rt.title
    assert srv.env["OPENAI_AGENTS_DISABLE_TRACING"] == "1" and srv.env["CRASHLAB_RUNTIME_NAME"] == "openai-agents-dbos"
    settings = " ".join(rt.retry_owner_settings)
    assert "failure_error_function" in settings and "max_turns=10" in settings and "_model_call_step" in settings


@installed
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, netlog):
    rt, srv, work = server
    cards = naive_and_careful(rt, srv, work, EXAMPLES, resolve(str(KEYLESS_502)))
    assert cards["naive"].verdict == "fail" and {"EFF-01", "RETRY-01"} <= failed(cards["naive"]), cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    naive, careful = cards["naive"].runtime.runs[0], cards["careful"].runtime.runs[0]
    # the error went back to the model as a message, and it asked again under a new call_id: two holds
    assert naive.commits == 2 and "the model called reserve 2 time(s)" in naive.summary, naive.summary
    assert "ran inline" in naive.summary
    assert careful.summary.startswith("OpenAI Agents SDK on DBOS: workflow SUCCESS") and careful.commits == 1
    assert "the model called reserve 1 time(s)" in careful.summary
    assert "ran as a DBOS step (1 row(s))" in careful.summary
    assert "failure_error_function" in cards["careful"].text()
    assert_only_loopback(netlog)


@installed
def test_a_kill_after_the_commit_reruns_the_inline_tool_with_the_same_call_id(server):
    """DBOS replays the recorded model step, so the call id (the naive key) is the same: one commit on a
    keyed service, yet a blind resend (RETRY-01); the careful agent reads by key first."""
    rt, srv, work = server
    cards = naive_and_careful(rt, srv, work, EXAMPLES, resolve("t2-commit-before-record"))
    assert "RETRY-01" in failed(cards["naive"]), cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    naive = cards["naive"].runtime.runs[0]
    assert "started 2 time(s)" in naive.summary and "the model called reserve 1 time(s)" in naive.summary
    assert naive.commits == 1


@installed
def test_the_summary_reads_the_sdks_model_steps():
    from crashlab.runtimes.agents_dbos import summary
    from crashlab.runtimes.openai_agents_dbos import FRAMEWORK

    rows = [{"table": "workflow_status", "status": "PENDING", "recovery_attempts": 1},
            {"table": "operation_outputs", "function_name": "_model_call_step"},
            {"table": "tool_calls", "tool": "reserve", "call_id": "call_a"}]
    line = summary(rows, FRAMEWORK)
    assert line.startswith("OpenAI Agents SDK on DBOS: workflow PENDING, started 1 time(s); 1 model step(s)")
    assert "the model called reserve 1 time(s) (call_a), has no step row yet (inline, or a step cut by a kill" in line
    done = summary([{**rows[0], "status": "SUCCESS"}, *rows[1:]], FRAMEWORK)
    assert "the model called reserve 1 time(s) (call_a), ran inline (no DBOS step" in done


def test_a_missing_framework_is_a_usage_error_naming_the_extra(monkeypatch):
    assert_a_missing_package_names_the_extra(monkeypatch, "agents", "openai-agents-dbos", INSTALL)


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful booking tool asks the authority and the run's workflow ends
    WAITING_HUMAN; the woken worker runs the run's next workflow, whose tool asks again (a revoked approval:
    nothing sent)."""
    rt, srv, work = server
    approval_outcome(rt, srv, f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}", name,
                     work / "approval" / name)
