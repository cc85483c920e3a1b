"""An integration trace tells crashlab's own acts apart from the worker's: the failpoints it armed and
where one fired, its lease grants, its takeovers and the handover that followed; ``show``, the
report's lanes and the exports draw them as crashlab's; its repro line re-runs it as it was run."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.cli.args import parser
from crashlab.integrate.command import fired_failpoint
from crashlab.run.repro import header_options, repro_line
from crashlab.integrate.run import integrate
from crashlab.report.export import chrome_events, otel_document
from crashlab.report.lanes import lanes
from crashlab.scenario.loader import load_file, resolve
from crashlab.world.trace import read_jsonl
from runtime_support import no_leftovers

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "integration" / "worker.py"
PAUSED = ROOT / "examples" / "integration" / "scenarios" / "paused-past-lease.yaml"
T2 = ROOT / "traces" / "t2-commit-before-record.jsonl"

linux = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real integration runs, made once: a store failpoint that fires (crash point 5: after the
    third ledger append) and a paused worker replaced by a takeover (a handover, then its resume)."""
    if sys.platform != "linux":
        pytest.skip("process groups and /proc: Linux only")
    out = tmp_path_factory.mktemp("truth")
    worker = f"{sys.executable} {WORKER} {{url}} {{db}} --out-marker={out}"
    crash = integrate(resolve("crash-5-after-record-before-checkpoint"), worker=worker, out=out)
    paused = integrate(load_file(PAUSED), worker=worker, out=out)
    yield {"crash": crash, "paused": paused}
    no_leftovers(str(out))


def show(trace: Path, capsys, *extra: str) -> list[str]:
    assert main(["show", str(trace), *extra]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if re.match(r"^(>>|\s)\s*\d+\s", line)]


# --------------------------------------------------------------------------- the supervisor's events
@linux
def test_the_trace_names_the_failpoint_crashlab_armed_and_where_it_fired(runs):
    events = read_jsonl(runs["crash"].trace)
    armed = [e for e in events if e["kind"] == "failpoint"]
    assert [(e["lane"], e["worker"], e["failpoint"]) for e in armed] == [("fault", "run-82/w1", "ledger.append:3:after")]
    assert isinstance(armed[0]["rule_line"], int)
    first_call = next(e["seq"] for e in events if e["kind"] == "call" and e["worker"] == "run-82/w1")
    assert armed[0]["seq"] < first_call                 # armed as the worker started, before it did anything
    crash = next(e for e in events if e["kind"] == "crash")
    assert crash["failpoint"] == "ledger.append:3:after" and crash["boundary"] == "after"
    third = [e for e in events if e["kind"] == "ledger" and e["worker"] == "run-82/w1"][2]
    assert third["seq"] < crash["seq"]                  # it fired after the third append reached the store


def test_the_fired_failpoint_is_the_one_the_rows_written_reach():
    calls = [{"kind": "call", "worker": "r/w1", "port": "ledger", "op": "append"}] * 2 + [
        {"kind": "call", "worker": "r/w2", "port": "ledger", "op": "append"}]
    armed = ["checkpoints.write:2:before", "ledger.append:3:before", "ledger.append:2:after"]
    assert fired_failpoint(calls, "r/w1", armed) == "ledger.append:3:before"   # two rows: before the third
    assert fired_failpoint(calls, "r/w1", armed[2:]) == "ledger.append:2:after"
    assert fired_failpoint([], "r/w1", ["ledger.append:2:after", "checkpoints.write:1:before"]) == "checkpoints.write:1:before"
    assert fired_failpoint(calls, "r/w1", ["run.*:1:after"]) == "run.*:1:after"     # none tells: the first


@linux
def test_a_resume_after_a_handover_names_the_worker_that_took_the_run(runs):
    events = read_jsonl(runs["paused"].trace)
    resume = next(e for e in events if e["kind"] == "resume")
    assert resume["handover"] == "taken" and resume["by"] == "run-82/w2"
    took = next(e["seq"] for e in events if e["kind"] == "takeover")
    assert took < next(e["seq"] for e in events if e["kind"] == "start" and e["worker"] == "run-82/w2")


# --------------------------------------------------------------------------- the readers
@linux
def test_show_draws_crashlabs_acts_as_crashlabs(runs, capsys):
    lines = show(runs["crash"].trace, capsys)
    who = {line: line.split()[3] for line in lines}
    grants = [line for line in lines if "lease epoch" in line]
    assert len(grants) == 2 and all(who[g] == "crashlab" and "granted by crashlab" in g for g in grants), grants
    armed = next(line for line in lines if "failpoint ledger.append:3:after armed by crashlab" in line)
    fired = next(line for line in lines if "crash at failpoint ledger.append:3:after" in line)
    assert who[armed] == who[fired] == "crashlab" and "run-82/w1:" in armed and "run-82/w1:" in fired
    # the worker's own records stay the worker's
    assert all(who[line] == "run-82/w1" for line in lines if "checkpoint v1 " in line)
    assert any("armed by crashlab" in line for line in show(runs["crash"].trace, capsys, "--worker", "w1"))
    paused = show(runs["paused"].trace, capsys)
    takeover = next(line for line in paused if "takeover of run-82/w1" in line)
    assert takeover.split()[3] == "crashlab"
    assert any("resume (call #" in line and "after the handover: run-82/w2 had taken the run over" in line
               for line in paused)
    assert any("worker stop (stale: a replacement had taken over)" in line for line in paused)


@linux
def test_the_lanes_mark_the_replaced_worker_the_grants_and_crashlabs_markers(runs):
    data = lanes(read_jsonl(runs["paused"].trace))
    workers = {w.name: w for r in data.runs for w in r.workers}
    assert workers["run-82/w1"].end_kind == "replaced" and workers["run-82/w2"].end_kind == "finished"
    assert all(w.granted for w in workers.values())
    assert {m.kind for m in data.markers if m.actor == "crashlab"} >= {"pause", "takeover", "resume"}
    crash = lanes(read_jsonl(runs["crash"].trace))
    w1 = next(w for r in crash.runs for w in r.workers if w.name == "run-82/w1")
    assert [(m.kind, m.label, m.actor) for m in w1.marks if m.kind == "failpoint"] == [
        ("failpoint", "ledger.append:3:after", "crashlab")]
    assert any(m.label == "crash (failpoint ledger.append:3:after)" for m in crash.markers)


@linux
def test_the_exports_name_a_replaced_worker_and_draw_inbox_deliveries_and_grants(runs):
    events = read_jsonl(runs["paused"].trace)
    doc = chrome_events(events)["traceEvents"]
    slices = {e["name"] for e in doc if e.get("ph") == "X" and e.get("cat") == "worker"}
    assert slices == {"run-82/w1 (replaced)", "run-82/w2 (finished)"}
    delivered = [e for e in events if e["kind"] == "deliver"]
    inbox = [e for e in doc if e.get("ph") == "i" and e.get("cat") == "inbox"]
    assert delivered and sorted(e["args"]["seq"] for e in inbox) == [e["seq"] for e in delivered]
    grants = [e for e in doc if e.get("ph") == "i" and e.get("cat") == "crashlab"]
    assert [g["name"] for g in grants] == ["lease epoch 1 granted by crashlab", "lease epoch 2 granted by crashlab"]
    assert all(g["args"]["actor"] == "crashlab" for g in grants)
    takeover = next(e for e in doc if e.get("ph") == "i" and e.get("cat") == "takeover")
    assert takeover["args"]["actor"] == "crashlab"
    spans = otel_document(events)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    w1 = next(s for s in spans if s["name"] == "worker run-82/w1")
    assert {"key": "crashlab.end", "value": {"stringValue": "replaced"}} in w1["attributes"]
    names = [ev["name"] for s in spans for ev in s["events"]]
    assert sum(n.startswith("inbox delivery ") for n in names) == len(delivered)
    assert names.count("lease epoch 1 granted by crashlab") == 1


def test_every_inbox_delivery_of_a_late_callback_is_an_instant():
    events = read_jsonl(ROOT / "traces" / "t7-late-callback.jsonl")
    delivered = [e["seq"] for e in events if e["kind"] == "deliver"]
    doc = chrome_events(events)["traceEvents"]
    assert any(e["event"]["type"] == "callback" for e in events if e["kind"] == "deliver")
    assert sorted(e["args"]["seq"] for e in doc if e.get("cat") == "inbox") == delivered
    spans = otel_document(events)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert any(ev["name"].startswith("inbox delivery callback") for s in spans for ev in s["events"])


# --------------------------------------------------------------------------- show --around
def test_show_around_a_result_or_a_quiet_call_shows_and_marks_it(capsys):
    events = read_jsonl(T2)
    result = next(e for e in events if e["kind"] == "result" and e["call"] in {
        c["seq"] for c in events if c["kind"] == "call" and c["port"] == "reservation"})
    lines = show(T2, capsys, "--around", str(result["seq"]), "--context", "2")
    marked = [line for line in lines if line.startswith(">>")]
    assert len(marked) == 1 and marked[0][2:].split()[0] == str(result["call"])   # its call's line holds it
    quiet = next(e for e in events if e["kind"] == "call" and e["port"] == "clock")
    lines = show(T2, capsys, "--around", str(quiet["seq"]), "--context", "2")
    marked = [line for line in lines if line.startswith(">>")]
    assert len(marked) == 1 and marked[0][2:].split()[0] == str(quiet["seq"]) and ".now()" in marked[0]


def test_show_prints_every_call_a_shown_line_cites():
    from crashlab.report.text import lines

    events = read_jsonl(T2)
    quiet = next(e for e in events if e["kind"] == "call" and e["port"] == "clock")
    fault = {"seq": events[-1]["seq"] + 1, "t": quiet["t"], "lane": "fault", "kind": "fault", "worker": quiet["worker"],
             "run": quiet["run"], "call": quiet["seq"], "fault": "timeout", "code": None, "rule_line": None}
    shown_lines = lines(events[:-1] + [fault, events[-1]])
    shown = {int(line.split()[0]) for line in shown_lines}
    cited = {int(n) for line in shown_lines for n in re.findall(r"call #(\d+)", line)}
    assert quiet["seq"] in cited and cited <= shown, cited - shown      # a clock read a fault names is printed
    assert not any(".now()" in line for line in lines(events))          # and one nothing names is not


# --------------------------------------------------------------------------- the repro line
def _parsed(line: str):
    words = shlex.split(line)
    assert words[0] == "crashlab"
    return parser().parse_args(words[1:])


def test_the_repro_line_names_runtime_and_every_option_that_changes_the_run():
    head = {"scenario": "t2-commit-before-record", "source": "t2-commit-before-record",
            "adapter": "integrate:python3 careful.py {url} {db} {runtime} {runtime_id}",
            "integration": header_options(runtime="dbos", store="postgresql://me:s3cret@127.0.0.1:5432/{db}",
                                          time_scale=50.0, wall_limit_s=30.0, handover_wait_s=15.0)}
    line = repro_line(head)
    args = _parsed(line)
    assert args.command == "integrate" and args.runtime == "dbos" and args.scenarios == ["t2-commit-before-record"]
    assert args.worker == "python3 careful.py {url} {db} {runtime} {runtime_id}"
    assert args.time_scale == 50.0 and args.store == "postgresql://me:PASSWORD@127.0.0.1:5432/{db}"
    assert "s3cret" not in line and "--wall-limit" not in line and "--handover-wait" not in line
    plain = dict(head, integration=header_options(runtime=None, store="sqlite:{db}", time_scale=100.0,
                                                  wall_limit_s=30.0, handover_wait_s=15.0))
    args = _parsed(repro_line(plain))
    assert args.runtime is None and args.store == "sqlite:{db}" and "--runtime" not in repro_line(plain)
    older = {k: v for k, v in head.items() if k != "integration"}    # a trace written before the field
    assert _parsed(repro_line(older)).worker == head["adapter"][len("integrate:"):]
    assert repro_line(head, worker='"$CRASHLAB_ADAPTER"').endswith('--worker "$CRASHLAB_ADAPTER"')


@linux
def test_the_repro_line_of_an_integration_trace_parses_everywhere_it_is_printed(runs, capsys):
    from crashlab.report.view import Item, repro, repro_parts

    outcome = runs["crash"]
    args = _parsed(outcome.result.repro)       # integrate's own result: crashlab integrate, never crashlab run
    assert args.command == "integrate" and args.runtime is None
    assert args.worker.startswith(f"{sys.executable} {WORKER} {{url}} {{db}}")
    assert main(["check", str(outcome.trace)]) == 0
    printed = next(line for line in capsys.readouterr().out.splitlines() if "repro: " in line).split("repro: ", 1)[1]
    assert printed == outcome.result.repro
    item = Item(result=outcome.result, events=read_jsonl(outcome.trace), name="crash-5")
    assert repro(item) == outcome.result.repro
    assert repro(Item(result=outcome.result, events=None, name="crash-5")) == outcome.result.repro
    assert repro_parts(Item(result=outcome.result, events=None, name="crash-5"))[:2] == (
        "crash-5-after-record-before-checkpoint", read_jsonl(outcome.trace)[0]["adapter"])
    head = read_jsonl(outcome.trace)[0]
    assert head["integration"]["runtime"] is None and head["integration"]["time_scale"] == 100.0


def test_a_runtime_worker_started_without_its_environment_is_a_one_line_usage_error(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CRASHLAB_RUNTIME")}
    code = "import common; common.runtime_id()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "examples" / "runtimes", env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "CRASHLAB_RUNTIME_ID is not set" in done.stderr and "--runtime NAME" in done.stderr
    assert json.dumps(done.stderr.strip()).count("\\n") == 0      # one line
