"""Pydantic AI on DBOS under ``crashlab integrate --runtime pydantic-ai-dbos``: the naive agent (inline
function tools keyed by the model's tool_call_id, a failure handed back to the model as ModelRetry)
fails for the chapter's rules, the careful one (docs/agents/pydantic-ai.md) passes, the card says
whether each tool ran as a DBOS step or inline, and nothing leaves 127.0.0.1. A few scenarios here;
the whole suite is measured in the docs."""
from __future__ import annotations

import base64
import importlib.metadata
import importlib.util
import json
import pickle
import sys
from pathlib import Path

import pytest

from crashlab.scenario.loader import resolve
from runtime_support import (KEYLESS_502, assert_a_missing_package_names_the_extra, assert_only_loopback, failed,
                             hook_network, naive_and_careful, runtime_server)
from runtime_support import AUTHORITY_SUITE, approval_outcome

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents" / "pydantic_ai"
KEYLESS_AFTER_TOOL = ROOT / "examples" / "agents" / "scenarios" / "keyless-crash-after-tool.yaml"
INSTALL = "pip install 'crashlab[pydantic-ai]'"

installed = pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None
                               or importlib.util.find_spec("dbos") is None,
                               reason=f"Pydantic AI or DBOS is not installed: {INSTALL}")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from runtime_server(tmp_path_factory, "pydantic-ai-dbos", "pydantic-ai")


@pytest.fixture
def netlog(tmp_path, monkeypatch, server):
    return hook_network(tmp_path, monkeypatch, server=server[1], unset=("LOGFIRE_TOKEN", "OPENAI_API_KEY"))


@installed
def test_the_profile_names_its_versions_and_turns_telemetry_off(server):
    rt, srv, _ = server
    assert rt.tested_version == f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')}"
    assert importlib.metadata.version("dbos") in rt.title
    assert srv.env["CRASHLAB_RUNTIME"].startswith("sqlite:///") and srv.env["OTEL_SDK_DISABLED"] == "true"
    assert srv.env["LOGFIRE_SEND_TO_LOGFIRE"] == "false" and srv.env["CRASHLAB_RUNTIME_NAME"] == "pydantic-ai-dbos"
    settings = " ".join(rt.retry_owner_settings)
    assert "Agent(retries=1)" in settings and "retries_allowed=False" in settings and "inline" in settings


@installed
@pytest.mark.parametrize("name,naive_fails", [("integration-keyless-502", {"EFF-01", "RETRY-01"}),
                                               ("crash-4-after-commit-before-record", {"RETRY-01"})])
def test_naive_fails_for_the_chapters_rule_and_careful_passes(server, netlog, name, naive_fails):
    rt, srv, work = server
    cards = naive_and_careful(rt, srv, work, EXAMPLES, resolve(str(KEYLESS_502) if name.startswith("integration")
                                                               else name))
    assert cards["naive"].verdict == "fail" and naive_fails <= failed(cards["naive"]), cards["naive"].text()
    assert cards["careful"].verdict == "pass", cards["careful"].text()
    naive, careful = cards["naive"].runtime.runs[0], cards["careful"].runtime.runs[0]
    # the card says how each tool ran: inline for the naive agent, a DBOS step for the careful one
    assert "reserve" in naive.summary and "ran inline" in naive.summary, naive.summary
    assert "the model called reserve 1 time(s)" in careful.summary and "ran as a DBOS step" in careful.summary
    assert careful.summary.startswith("Pydantic AI on DBOS: workflow SUCCESS") and careful.commits == 1
    text = cards["careful"].text()
    assert f"runtime record run-82: {careful.summary}; the sandbox counted 1 commit(s)" in text
    assert "Agent(retries=1)" in text and "DBOSDurability(model_step_config" in text
    record = json.loads(Path(careful.record).read_text())
    tables = {r["table"] for r in record["record"]}
    assert record["unit"] == careful.unit and tables == {"workflow_status", "operation_outputs", "tool_calls"}
    if name.startswith("integration"):       # the 502 went back to the model, which asked again: two holds
        assert naive.commits == 2 and "the model called reserve 2 time(s)" in naive.summary, naive.summary
    else:                                    # the kill: DBOS replayed the model step and re-ran the tool
        assert "started 2 time(s)" in naive.summary and "the model called reserve 1 time(s)" in naive.summary
    assert_only_loopback(netlog)


@installed
def test_an_inline_tool_runs_again_after_it_returned_and_a_step_does_not(server):
    """Killed after the booking tool returned (before the notification): recovery re-runs an inline tool,
    a second hold on a service without keys; the same tool as a DBOS step is replayed."""
    rt, srv, work = server
    sc = resolve(str(KEYLESS_AFTER_TOOL))
    inline = naive_and_careful(rt, srv, work / "inline", EXAMPLES, sc, names=("naive",))["naive"]
    stepped = naive_and_careful(rt, srv, work / "step", EXAMPLES, sc, "--tools=step", names=("naive",))["naive"]
    # the sandbox counts the notification too: two holds and a notice inline, one hold and a notice as steps
    assert "EFF-01" in failed(inline) and inline.runtime.runs[0].commits == 3, inline.text()
    assert "ran inline" in inline.runtime.runs[0].summary
    assert stepped.runtime.runs[0].commits == 2 and "EFF-01" not in failed(stepped), stepped.text()
    assert "the model called reserve 1 time(s)" in stepped.runtime.runs[0].summary
    assert "reserve" in stepped.runtime.runs[0].summary and "ran as a DBOS step (1 row(s))" in \
        stepped.runtime.runs[0].summary


class _Boom:
    def __reduce__(self):               # unpickling this would run print(); crashlab must never do it
        return (print, ("the pickle ran",))


@installed
def test_tool_calls_are_read_from_a_step_output_without_running_the_pickle(capsys):
    from crashlab.runtimes.agents_dbos import tool_calls

    output = {"parts": [{"tool_name": "reserve", "args": {"intent": {}}, "tool_call_id": "call_a"},
                        {"tool_name": "notify", "tool_call_id": "call_b"}],
              "fields": {"tool_name", "tool_call_id"}, "boom": _Boom()}
    raw = base64.b64encode(pickle.dumps(output)).decode()
    assert tool_calls(raw, "tool_name", "tool_call_id") == [{"tool": "reserve", "call_id": "call_a"},
                                                            {"tool": "notify", "call_id": "call_b"}]
    assert capsys.readouterr().out == ""
    assert tool_calls("not a pickle", "tool_name", "tool_call_id") == []
    assert tool_calls(raw[:40], "tool_name", "tool_call_id") == []


@installed
def test_the_summary_says_which_tools_ran_inline():
    from crashlab.runtimes.agents_dbos import summary
    from crashlab.runtimes.pydantic_ai_dbos import FRAMEWORK

    rows = [{"table": "workflow_status", "status": "SUCCESS", "recovery_attempts": 2},
            {"table": "operation_outputs", "function_name": "booker__model.request"},
            {"table": "operation_outputs", "function_name": "notify"},
            {"table": "tool_calls", "tool": "reserve", "call_id": "call_a"},
            {"table": "tool_calls", "tool": "notify", "call_id": "call_b"}]
    line = summary(rows, FRAMEWORK)
    assert line.startswith("Pydantic AI on DBOS: workflow SUCCESS, started 2 time(s); 1 model step(s) recorded")
    assert "the model called reserve 1 time(s) (call_a), ran inline" in line
    assert "the model called notify 1 time(s) (call_b), ran as a DBOS step (1 row(s))" in line
    assert summary([], FRAMEWORK).startswith("DBOS has no workflow under this id")


def test_a_missing_framework_is_a_usage_error_naming_the_extra(monkeypatch):
    assert_a_missing_package_names_the_extra(monkeypatch, "pydantic_ai", "pydantic-ai-dbos", INSTALL)


@pytest.mark.parametrize("name", list(AUTHORITY_SUITE))
def test_careful_asks_the_authority_waits_and_is_woken(server, name):
    """The approval scenarios: the careful booking tool asks the authority and the run's workflow ends
    WAITING_HUMAN; the woken worker runs the run's next workflow, whose tool asks again (a revoked approval:
    nothing sent)."""
    rt, srv, work = server
    approval_outcome(rt, srv, f"{sys.executable} {EXAMPLES / 'careful.py'} --marker={work}", name,
                     work / "approval" / name)
