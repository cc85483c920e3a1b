"""Pydantic AI on Temporal under ``crashlab integrate --runtime pydantic-ai-temporal``: the naive agent (tools
keyed by the model's tool_call_id, a failure handed back to the model as ModelRetry, Temporal's default retry
policy) fails for the chapter's rules, the careful one (docs/agents/pydantic-ai.md, "Temporal") passes, the
card says which tool call ran as a Temporal activity, its attempts and its activity config, and nothing leaves
127.0.0.1. Two scenarios of the runtime subset here; the five are measured in the docs."""
from __future__ import annotations

import base64
import importlib.metadata
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from runtime_support import (NAIVE_FAILS, assert_a_missing_package_names_the_extra, assert_only_loopback, failed,
                             hook_network, naive_and_careful, runtime_server, subset_scenario)
from runtime_support import AUTHORITY_SUITE, approval_outcome

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents" / "pydantic_ai"
INSTALL = "pip install 'crashlab[pydantic-ai-temporal]'"
HAVE_BIN = (Path(sys.executable).parent / "temporal").exists() or shutil.which("temporal") is not None
HAVE_SDK = importlib.util.find_spec("pydantic_ai") is not None and importlib.util.find_spec("temporalio") is not None

installed = pytest.mark.skipif(not HAVE_SDK, reason=f"Pydantic AI or Temporal's SDK is not installed: {INSTALL}")
served = pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN), reason=f"Pydantic AI or Temporal is not installed: {INSTALL}")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "pydantic-ai-temporal", "pydantic-ai-temporal")


@pytest.fixture
def netlog(tmp_path, monkeypatch, server):
    # Temporal's workers write nothing of the runtime's; under namespaces isolation the hook's log needs a
    # folder every worker may write, as DBOS's state folder is (runtime_support.hook_network)
    _, srv, work = server
    (work / "netlog").mkdir(exist_ok=True)
    monkeypatch.setattr(srv, "writable", (str(work / "netlog"),), raising=False)
    return hook_network(tmp_path, monkeypatch, server=srv, unset=("LOGFIRE_TOKEN", "OPENAI_API_KEY"))


def _payload(value) -> dict:
    return {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="},
                          "data": base64.b64encode(json.dumps(value).encode()).decode()}]}


@pytest.mark.runtime_heavy
@served
def test_the_profile_names_its_versions_and_turns_telemetry_off(server):
    rt, srv, _ = server
    assert rt.tested_version == f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')}"
    assert importlib.metadata.version("temporalio") in rt.title
    assert srv.env["CRASHLAB_RUNTIME"].startswith("127.0.0.1:") and srv.env["OTEL_SDK_DISABLED"] == "true"
    assert srv.env["LOGFIRE_SEND_TO_LOGFIRE"] == "false" and srv.env["CRASHLAB_RUNTIME_NAME"] == "pydantic-ai-temporal"
    settings = " ".join(rt.retry_owner_settings)
    assert "start_to_close_timeout=60 s" in settings and "Agent(retries=1)" in settings
    assert "'temporal': False" in settings and "RetryPolicy" in settings


@pytest.mark.parametrize("name", ["integration-keyless-502", "crash-4-after-commit-before-record"])
@pytest.mark.runtime_heavy
@served
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, netlog, name):
    rt, srv, work = server
    cards = naive_and_careful(rt, srv, work, EXAMPLES, subset_scenario(name), names=("temporal_naive",
                                                                                      "temporal_careful"))
    naive, careful = cards["temporal_naive"], cards["temporal_careful"]
    assert naive.verdict == "fail" and NAIVE_FAILS[name] <= failed(naive), naive.text()
    assert careful.verdict == "pass", careful.text()
    n, c = naive.runtime.runs[0], careful.runtime.runs[0]
    # the card says each tool call ran as a Temporal activity, with its attempts and its activity config
    assert c.summary.startswith("Pydantic AI on Temporal: workflow completed") and c.commits == 1, c.summary
    assert "the model called reserve 1 time(s): call_" in c.summary and "ran as a Temporal activity" in c.summary
    assert "heartbeat_timeout=2s, RetryPolicy(maximum_attempts=10" in c.summary, c.summary
    assert "RetryPolicy(maximum_attempts=unlimited" in n.summary, n.summary
    text = careful.text()
    assert f"runtime record run-82: {c.summary}; the sandbox counted 1 commit(s)" in text
    assert "start_to_close_timeout=60 s" in text and "Agent(retries=1)" in text
    if name.startswith("integration"):       # the 502 went back to the model, which asked again: two holds
        assert n.commits == 2 and "the model called reserve 2 time(s)" in n.summary, n.summary
    else:                                    # the kill: Temporal retried the tool's activity, which resent
        assert "attempt 2 completed (attempt 1 not in the history" in n.summary, n.summary
        assert "attempt 2 completed" in c.summary, c.summary
    record = json.loads(Path(c.record).read_text())["record"]
    assert {r["tool"] for r in record if "tool" in r} == {"reserve"}
    assert_only_loopback(netlog)


@installed
def test_tool_calls_and_activities_are_read_from_the_payloads():
    from crashlab.runtimes.pydantic_ai_temporal import annotate

    model = {"eventType": "EVENT_TYPE_ACTIVITY_TASK_COMPLETED", "activityTaskCompletedEventAttributes": {
        "scheduledEventId": "7", "result": _payload({"parts": [
            {"part_kind": "tool-call", "tool_name": "reserve", "tool_call_id": "call_a"},
            {"part_kind": "text", "content": "thinking"}]})}}
    tool = {"eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "activityTaskScheduledEventAttributes": {
        "input": _payload({"name": "reserve", "tool_args": {}, "serialized_run_context": {"tool_call_id": "call_a"}})}}
    assert annotate(model) == {"scheduled": 7, "tool_calls": [{"tool": "reserve", "call_id": "call_a"}]}
    assert annotate(tool) == {"tool": "reserve", "call_id": "call_a"}
    garbled = {"activityTaskScheduledEventAttributes": {"input": {"payloads": [{"data": "not base64 json!"}]}}}
    assert annotate(garbled) == {}


@installed
def test_the_summary_says_which_calls_ran_as_activities_and_which_ran_in_the_workflow():
    from crashlab.runtimes.pydantic_ai_temporal import summary

    rows = [{"event": "WORKFLOW_EXECUTION_STARTED", "event_id": 1},
            {"event": "ACTIVITY_TASK_COMPLETED", "event_id": 9, "scheduled": 7,
             "tool_calls": [{"tool": "reserve", "call_id": "call_a"}, {"tool": "notify", "call_id": "call_b"}]},
            {"event": "ACTIVITY_TASK_SCHEDULED", "event_id": 10, "tool": "reserve", "call_id": "call_a",
             "startToCloseTimeout": "60s", "heartbeatTimeout": "0s", "retry_policy": {"initialInterval": "1s", "backoffCoefficient": 2.0,
                                                            "maximumInterval": "100s"}},
            {"event": "ACTIVITY_TASK_STARTED", "event_id": 11, "scheduled": 10, "attempt": 3,
             "failure": "activity StartToClose timeout"},
            {"event": "ACTIVITY_TASK_COMPLETED", "event_id": 12, "scheduled": 10},
            {"event": "WORKFLOW_EXECUTION_COMPLETED", "event_id": 13}]
    line = summary(rows)
    assert line.startswith("Pydantic AI on Temporal: workflow completed; 1 model request(s) recorded")
    assert ("the model called reserve 1 time(s): call_a ran as a Temporal activity, attempt 3 completed "
            "(attempts 1..2 not in the history, the last: activity StartToClose timeout)") in line
    assert "the model called notify 1 time(s): call_b ran in the workflow (no activity" in line
    assert ("tool activities scheduled with start_to_close_timeout=60s, heartbeat_timeout=none, "
            "RetryPolicy(maximum_attempts=unlimited, initial_interval=1s") in line
    assert summary([]).startswith("Temporal has no workflow under this id")
    assert summary([{"error": "RPCError: not found"}]) == "Temporal history not read: RPCError: not found"


def test_a_missing_framework_is_a_usage_error_naming_the_extra(monkeypatch):
    assert_a_missing_package_names_the_extra(monkeypatch, "pydantic_ai", "pydantic-ai-temporal", INSTALL)


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful booking tool asks the authority and the run's workflow ends
    WAITING_HUMAN; the woken worker runs the run's next workflow, whose tool asks again (a revoked approval:
    nothing sent)."""
    rt, srv, work = server
    approval_outcome(rt, srv, f"{sys.executable} {EXAMPLES / 'temporal_careful.py'} --marker={work}", name,
                     work / "approval" / name)
