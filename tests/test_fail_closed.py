"""The gate fails closed: no adapter and no input file can make crashlab pass, hang, crash or
lose results. One test (or one parametrized family) per class of hostile behaviour, in-process
and over the wire; see docs/protocol.md "Limits" and `crashlab --help` for the documented limits."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashlab.world.boundary import MAX_LINE_BYTES, json_copy
from crashlab.cli import main
from crashlab.run.conformance import run_suite
from crashlab.run.drivers import AdapterFault, parse_request
from crashlab.vocab.errors import InvalidScenario, UsageError
from crashlab.scenario import library, load_text, resolve
from crashlab.world.trace import read_jsonl
from support import kinds, run, scenario

HERE = Path(__file__).parent
WIRE = HERE / "data" / "wire" / "hostile.py"
PY = sys.executable
ROOT = HERE.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
T1 = "t1-crash-before-dispatch"


def fault_of(result):
    [fault] = kinds(result, "adapter_fault")
    return fault


def cli(*args, timeout=120, cwd=None):
    """crashlab as a user runs it: a fresh process, with a time limit that turns a hang into a failure."""
    return subprocess.run([PY, "-m", "crashlab", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=cwd or ROOT)


# --------------------------------------------------------------------------- 1. the adapter is contained
@pytest.mark.parametrize("name, words", [
    ("RaisesSystemExit0", "SystemExit"), ("RaisesSystemExit3", "SystemExit"),
    ("RaisesKeyboardInterrupt", "KeyboardInterrupt"), ("RaisesGeneratorExit", "GeneratorExit"),
    ("RaisesCancelledError", "CancelledError"), ("RaisesCustomBaseException", "Custom"),
])
def test_every_base_exception_is_an_adapter_fault_in_process(name, words):
    fault = fault_of(run(scenario(), f"hostile_adapters:{name}"))
    assert fault["fault"] in ("base_exception", "exception") and words in fault["message"]


@pytest.mark.parametrize("name", ["RaisesSystemExit0", "RaisesKeyboardInterrupt", "RaisesCustomBaseException"])
def test_every_base_exception_is_an_adapter_fault_over_the_wire(name):
    fault = fault_of(run(scenario(), f"exec:env PYTHONPATH={HERE}:{ROOT} {PY} -m crashlab.run.wire hostile_adapters:{name}"))
    assert fault["fault"] == "base_exception" and name.removeprefix("Raises")[:6] in fault["message"]


def test_an_adapter_that_exits_while_starting_is_a_fault():
    fault = fault_of(run(scenario(), "hostile_adapters:ExitsWhileStarting"))
    assert fault["fault"] == "exception" and "SystemExit" in fault["message"]


def test_a_pass_from_nothing_is_impossible(tmp_path):
    """SystemExit(0) from the adapter used to end crashlab with exit 0 and nothing written."""
    out = tmp_path / "out"
    proc = cli("conformance", "--adapter", "hostile_adapters:RaisesSystemExit0", "--scenario", T1,
               "--scenario", "t2-commit-before-record", "--out", str(out), "--json", str(out / "r.json"))
    assert proc.returncode == 1, proc.stderr
    assert "verdict: FAIL" in proc.stdout and "Traceback" not in proc.stderr
    results = json.loads((out / "r.json").read_text())
    assert [s["verdict"] for s in results["scenarios"]] == ["fail", "fail"]
    assert len(list(out.glob("*.jsonl"))) == 2


def test_sys_exit_at_import_is_a_usage_error(tmp_path):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    proc = cli("run", T1, "--adapter", "exits_at_import:Adapter", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 3 and "SystemExit" in proc.stderr and "Traceback" not in proc.stderr


def test_a_spec_naming_something_that_is_not_an_adapter_is_a_usage_error(capsys, tmp_path):
    assert main(["run", T1, "--adapter", "hostile_adapters:NOT_AN_ADAPTER", "--out", str(tmp_path)]) == 3
    assert "not an adapter" in capsys.readouterr().err


def test_a_thread_is_a_fault_and_cannot_hold_crashlab_open(tmp_path):
    fault = fault_of(run(scenario(), "hostile_adapters:StartsThread"))
    assert fault["fault"] == "thread"
    started = time.monotonic()
    proc = cli("run", T1, "--adapter", "hostile_adapters:StartsLongThread", "--out", str(tmp_path), timeout=300)
    assert proc.returncode == 1 and "thread" in proc.stdout
    assert time.monotonic() - started < 300  # the 600 s thread did not keep the process alive


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_fork_is_a_fault_and_the_child_never_runs_the_simulation():
    result = run(scenario(), "hostile_adapters:Forks")
    fault = fault_of(result)
    assert fault["fault"] == "forked"
    assert len(kinds(result, "call")) == 1  # the child's calls never reached the world


@pytest.mark.parametrize("name", ["SendsDeepNesting", "SendsHugeInteger", "SendsNaN", "SendsInfinity",
                                  "SendsHugeKey", "SendsLoneSurrogate"])
def test_values_beyond_the_limits_in_process(name):
    result = run(scenario(), f"hostile_adapters:{name}")
    fault = fault_of(result)
    assert fault["fault"] == "not_json" and len(fault["message"]) < 400
    text = result.to_jsonl()
    assert len(text) < 100_000
    for line in text.splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the trace"))


@pytest.mark.parametrize("mode, kind", [
    ("flood", "flood"), ("endless", "line_too_long"), ("huge_line", "line_too_long"),
    ("trickle", "no_reply"), ("close_stdout", "closed_stdout"), ("deep", "not_json"),
    ("big_id", "garbage"), ("nan", "garbage"), ("infinity", "garbage"), ("nested_ok_depth", "not_json"),
    ("surrogate", "not_json"),
])
def test_wire_misbehaviour_is_a_fault_never_a_hang(mode, kind):
    started = time.monotonic()
    # a short reply deadline only where the deadline is what is tested: elsewhere a loaded
    # machine's slow interpreter start must not turn the expected fault into no_reply
    result = run(scenario(), f"exec:{PY} {WIRE} {mode}", reply_timeout_s=1.0 if kind == "no_reply" else 15.0)
    fault = fault_of(result)
    assert fault["fault"] == kind, fault
    assert len(fault["message"]) < 500
    assert time.monotonic() - started < 60


def test_the_adapters_whole_process_group_is_gone_when_its_worker_ends(tmp_path, monkeypatch):
    # process isolation: the adapter writes its child's pid where this test reads it (under namespaces the
    # file system is read-only to it, and its PID namespace ends with it: tests/test_isolation_adapters.py)
    monkeypatch.setenv("CRASHLAB_ISOLATION", "process")
    pid_file = tmp_path / "child.pid"
    result = run(scenario(), f"exec:{PY} {WIRE} fork_child {pid_file}")
    assert fault_of(result)["fault"] == "garbage"
    child = int(pid_file.read_text())
    from crashlab.run.reap import _zombie   # killed and not yet collected (pytest may be its subreaper) is gone
    for _ in range(50):
        if _zombie(child):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the adapter's child {child} is still running")


def test_the_suite_goes_on_after_a_misbehaving_scenario(tmp_path):
    scenarios = [resolve(T1), resolve("t2-commit-before-record")]
    card = run_suite(f"exec:{PY} {WIRE} flood", scenarios, out_dir=tmp_path)
    assert [s.verdict for s in card.scenarios] == ["fail", "fail"] and card.verdict == "fail"
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [f"{T1}.seed{scenarios[0].seed}.jsonl",
                                                                f"t2-commit-before-record.seed{scenarios[1].seed}.jsonl"]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


# --------------------------------------------------------------------------- 2. exit 0 only on a full pass
def test_partial_results_on_interrupt_say_they_are_partial(tmp_path):
    """SIGINT and SIGTERM mid-suite: exit 130/143, no traceback, the finished traces and a partial
    results JSON written, no adapter process left behind."""
    marker = tmp_path / "slow_adapter_marker.py"
    marker.write_text("import sys\nfrom crashlab.run.wire import serve\nsys.exit(serve('crashlab.reference_impl:ReferenceAdapter'))\n")
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        out = tmp_path / f"out{code}"
        proc = subprocess.Popen([PY, "-m", "crashlab", "conformance", "--adapter", f"exec:{PY} {marker}",
                                 "--out", str(out), "--json", str(out / "results.json")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        deadline = time.monotonic() + 120
        while not list(out.glob("*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == code, stderr
        assert "Traceback" not in stderr and "interrupted" in stderr
        results = json.loads((out / "results.json").read_text())
        assert results["partial"]["done"] >= 1 and results["partial"]["planned"] == len(library())
        assert results["verdict"] == "unknown" and len(results["scenarios"]) == results["partial"]["done"]
        for trace in out.glob("*.jsonl"):
            read_jsonl(trace)  # every written trace is whole
        left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
        assert not left, f"adapter processes left running: {left}"


def test_the_verdict_line_is_always_printed(tmp_path, capsys):
    assert main(["conformance", "--adapter", "hostile_adapters:RaisesGeneratorExit", "--scenario", T1,
                 "--out", str(tmp_path)]) == 1
    assert "verdict: FAIL" in capsys.readouterr().out


# --------------------------------------------------------------------------- 3. bad input is a usage error
@pytest.mark.parametrize("option, make, words", [
    ("--out", lambda t: (t / "f").write_text("x") and t / "f", "is a file"),
    ("--json", lambda t: t, "is a folder"),
    ("--json", lambda t: (t / "f").write_text("x") and t / "f" / "r.json", "is a file"),
    ("--report", lambda t: (t / "f").write_text("x") and t / "f", "is a file"),
    ("--json", lambda t: Path("/proc/crashlab-nowhere/r.json"), "cannot create"),
])
def test_unusable_output_paths_are_usage_errors_before_any_run(tmp_path, capsys, option, make, words):
    target = make(tmp_path)
    argv = ["conformance", "--scenario", T1, option, str(target)]
    if option != "--out":
        argv += ["--out", str(tmp_path / "traces")]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert words in err and option in err and "internal" not in err
    assert not list((tmp_path / "traces").glob("*.jsonl")) if (tmp_path / "traces").exists() else True


@pytest.mark.parametrize("seed", ["-1", "9007199254740992", "1e3", "x"])
def test_seeds_outside_the_documented_range_are_usage_errors(seed, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", T1, "--seed", seed])
    assert exit_.value.code == 3 and "--seed" in capsys.readouterr().err


def _edit(lines: list[str], kind: str, **fields) -> list[str]:
    """The trace's lines with every event of ``kind`` given these fields."""
    events = [json.loads(line) for line in lines]
    return [json.dumps({**e, **fields} if e["kind"] == kind else e) for e in events]


def _good_trace(tmp_path) -> Path:
    assert main(["run", T1, "--out", str(tmp_path)]) == 0
    [trace] = tmp_path.glob("*.jsonl")
    return trace


@pytest.mark.parametrize("tamper, words", [
    (lambda lines: lines[:1], "no end event"),
    (lambda lines: lines[:3] + ['{"seq":3,"t":0,"lane":"port","kind":"call","x":' + "[" * 5000 + "]" * 5000 + "}"]
     + lines[4:], "nested"),
    (lambda lines: [lines[0].replace('"seed":', '"seed":NaN,"was":', 1)] + lines[1:], "not a JSON object"),
    (lambda lines: [lines[0].replace('"seed":', '"seed":' + "9" * 5000 + ',"was":', 1)] + lines[1:],
     "not a JSON object"),
    (lambda lines: [lines[0].replace('"adapter":', '"adapter":7,"was":', 1)] + lines[1:], "'adapter'"),
    (lambda lines: lines[:2] + lines[3:], "seq must count"),
    (lambda lines: lines[:2] + [json.dumps({**json.loads(lines[2]), "t": "soon"})] + lines[3:], "t must be"),
    # the end event and the events before it tell two stories: which is the run's disposition?
    (lambda lines: _edit(lines, "finish", disposition="FAILED_NO_EFFECT"), "the end event says run-82's finished"),
    (lambda lines: _edit(lines, "end", runs={"run-82": {"finished": "FAILED_NO_EFFECT", "waiting": None,
                                                         "workers": 1}}), "the end event says run-82's finished"),
    (lambda lines: _edit(lines, "finish", accepted=False), "the end event says run-82's finished"),
    (lambda lines: _edit(lines, "end", runs={"run-82": {"finished": "SUCCEEDED", "waiting": None, "workers": 5}}),
     "the end event says run-82's workers"),
    (lambda lines: _edit(lines, "end", runs={}), "the end event names the runs"),
])
@pytest.mark.parametrize("command", ["check", "replay", "report"])
def test_malformed_traces_are_usage_errors_for_every_command(tmp_path, capsys, tamper, words, command):
    trace = _good_trace(tmp_path)
    trace.write_text("\n".join(tamper(trace.read_text().splitlines())) + "\n")
    capsys.readouterr()
    argv = [command, str(trace)] + (["--out", str(tmp_path / "report")] if command == "report" else [])
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert words in err and "internal" not in err and len(err) < 3000


def test_a_trace_edited_into_a_shape_the_checks_cannot_read_is_a_usage_error(tmp_path, capsys):
    trace = _good_trace(tmp_path)
    lines = trace.read_text().splitlines()
    for i, line in enumerate(lines):
        event = json.loads(line)
        if event["kind"] == "result":
            event["value"] = [1, 2, 3] if event.get("value") is not None else "junk"
            event["error"] = 5
            lines[i] = json.dumps(event)
    trace.write_text("\n".join(lines) + "\n")
    code = main(["check", str(trace)])
    assert code in (1, 3) and "internal" not in capsys.readouterr().err


YAML_BOMB = """id: bomb
title: bomb
runs: [{id: run-1, intent: {tenant: T, incident: I, part: P, slot: S, technician: X, quantity: 1, principal: U}}]
events:
  - {at: "10:01", type: callback, run: run-1, payload: &p9 [&p8 [&p7 [&p6 [&p5 [&p4 [&p3 [&p2 [&p1 [x, x, x, x, x, x, x, x, x, x]]]]]]]]]}
"""


@pytest.mark.parametrize("text, words", [
    ("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                                                for p, c in zip("abcdefg", "bcdefgh")), "alias"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nest"),
    ("a: " + "[" * 60 + "]" * 60 + "\n", "nested deeper"),
    ("# " + "x" * (2 << 20) + "\n", "larger than"),
])
def test_yaml_bombs_are_refused_before_they_expand(tmp_path, capsys, text, words):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert main(["run", str(path), "--out", str(tmp_path)]) == 3
    assert words in capsys.readouterr().err


def test_huge_values_are_clipped_in_messages(tmp_path, capsys):
    assert main(["conformance", "--scenario", "x" * (1 << 20), "--out", str(tmp_path)]) == 3
    assert len(capsys.readouterr().err) < 3000


# --------------------------------------------------------------------------- 4. nothing shared runs by itself
def test_replay_never_runs_the_adapter_a_received_trace_names(tmp_path, capsys):
    trace = _good_trace(tmp_path)
    planted = tmp_path / "planted"
    lines = trace.read_text().splitlines()
    head = json.loads(lines[0])
    head["adapter"] = f"exec:touch {planted}"
    trace.write_text("\n".join([json.dumps(head, sort_keys=True, separators=(",", ":"))] + lines[1:]) + "\n")
    assert main(["replay", str(trace)]) == 3
    err = capsys.readouterr().err
    assert "--adapter" in err and f"touch {planted}" in err and "--trust-adapter" in err
    assert not planted.exists()
    assert main(["report", str(trace), "--out", str(tmp_path / "r")]) in (0, 1)
    assert not planted.exists()


def test_replay_of_the_reference_adapters_own_trace_needs_no_flag(tmp_path, capsys):
    assert main(["replay", str(_good_trace(tmp_path))]) == 0


# --------------------------------------------------------------------------- fuzz
_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                    max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300),
                 _JSONISH.map(lambda v: json.dumps(v).encode()),
                 st.fixed_dictionaries({"id": st.integers() | st.text(max_size=5) | st.none(),
                                        "port": st.sampled_from(["run", "clock", "ledger", "x"]),
                                        "op": st.text(max_size=8), "args": _JSONISH})
                 .map(lambda v: json.dumps(v).encode())))
def test_fuzz_request_lines_are_a_call_or_a_fault(line):
    try:
        _, call = parse_request(line)
    except AdapterFault as fault:
        assert fault.kind and len(fault.message) < 500
        return
    assert json_copy(call.args) == call.args  # whatever passes is within the limits
    assert len(json.dumps(call.args, allow_nan=False)) <= MAX_LINE_BYTES


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400) | st.sampled_from([YAML_BOMB, "- &a [*a]", "a: !!python/object:os.system x",
                                                 "a: *missing", "{{{{", "id: [x", "\t- x"]))
def test_fuzz_the_scenario_loader_gives_a_scenario_or_a_clear_error(text):
    try:
        load_text(text, file="fuzz.yaml")
    except InvalidScenario as exc:
        assert str(exc).startswith("fuzz.yaml") and "\n" not in str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=80) | _JSONISH.map(lambda v: json.dumps(v).encode()), max_size=5))
def test_fuzz_traces_are_read_or_refused_clearly(tmp_path, lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        read_jsonl(path)
    except UsageError as exc:
        assert str(fuzz_name := path) in str(exc) or str(fuzz_name) in str(exc)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=1, max_size=200).filter(lambda b: b"\n" not in b)
                | st.just(b'{"id":1,"port":"run","op":"info","args":{}}'), min_size=1, max_size=4))
def test_fuzz_a_wire_adapter_writing_garbage_never_passes_and_never_crashes_crashlab(tmp_path, lines):
    script = tmp_path / "lines.bin"
    script.write_bytes(b"\n".join(lines))
    proc = cli("run", T1, "--adapter", f"exec:{PY} {WIRE} lines {script}", "--out", str(tmp_path / "o"),
               timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


_ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
                    | st.sampled_from(["k\ud800", 2**63, -(2**63), 2**64, 10**30]),
                    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_ANY)
def test_the_fast_boundary_copy_decides_exactly_as_the_careful_one(value):
    from crashlab.world.boundary import adapter_value

    def outcome(fn):
        try:
            return ("ok", json.dumps(fn(value), sort_keys=True))
        except TypeError as exc:
            return ("refused", str(exc))
    assert outcome(adapter_value) == outcome(json_copy)
