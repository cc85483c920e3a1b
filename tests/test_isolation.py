"""The trust boundary: adapter code runs in worker processes, crashlab's own process checks the
traces they return and alone decides the verdict, the results and the exit code. One test (or one
parametrized family) per hostile case: in-process Python adapters, wire adapters, the CLI and pytest.
Every test bounds what it starts (small limits, subprocess time limits) and leaves nothing running."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import crashlab.run.conformance  # noqa: F401  (loaded once: pytester restores sys.modules between runs)
from crashlab.run.conformance import run_checked, run_suite
from crashlab.run.jobs import Done, Lost, Pool, descendants
from crashlab.run.runner import Limits
from crashlab.scenario import resolve
from crashlab.run.drivers import load_adapter
from crashlab.run.sweep import Job, LocalExecutor, judge, traced_once

HERE = Path(__file__).parent
ROOT = HERE.parent
WIRE = HERE / "data" / "wire" / "hostile.py"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
T1, T2 = "t1-crash-before-dispatch", "t2-commit-before-record"
BLIND_FAILS = ["crash-4-after-commit-before-record", "matrix-ambiguous-effect"]  # BlindRetry fails both
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="containment is Linux-only")


def cli(*args, timeout=180, cwd=None):
    return subprocess.run([PY, "-m", "crashlab", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=cwd or ROOT)


def suite(adapter, ids, jobs=1, **limits):
    lim = Limits(**limits) if limits else None
    return run_suite(adapter, [resolve(i) for i in ids], executor=LocalExecutor(jobs, limits=lim), limits=lim)


def faults(result):
    return [v.message for v in result.violations if v.invariant == "ADAPTER-FAULT"]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def results(path: Path) -> dict:
    return json.loads(path.read_text())


# --------------------------------------------------------------------------- 1. one trust boundary
@pytest.mark.parametrize("command", ["conformance", "run"])
def test_os_exit_0_in_the_adapter_is_a_failure_not_a_pass(tmp_path, command):
    out = tmp_path / "out"
    if command == "run":
        proc = cli("run", T1, "--adapter", "hostile_adapters:ExitsZero", "--out", str(out))
        assert proc.returncode == 1, proc.stderr
        assert "FAIL" in proc.stdout and "exited with status 0" in proc.stdout
        return
    proc = cli("conformance", "--jobs", "1", "--adapter", "hostile_adapters:ExitsZero", "--scenario", T1,
               "--scenario", T2, "--out", str(out), "--json", str(out / "r.json"))
    assert proc.returncode == 1, proc.stderr
    card = results(out / "r.json")
    assert [s["verdict"] for s in card["scenarios"]] == ["fail", "fail"]
    assert len(list(out.glob("*.jsonl"))) == 2


@pytest.mark.parametrize("adapter", ["AtexitExitsZero", "PatchesChecker", "ClosesStdout"])
def test_exit_hooks_patched_checkers_and_closed_stdout_cannot_pass_a_failing_adapter(tmp_path, adapter):
    args = [x for i in BLIND_FAILS for x in ("--scenario", i)]
    proc = cli("conformance", "--jobs", "1", "--adapter", f"hostile_adapters:{adapter}", *args,
               "--out", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 1, proc.stderr
    assert "verdict: FAIL" in proc.stdout
    assert [s["verdict"] for s in results(tmp_path / "r.json")["scenarios"]] == ["fail", "fail"]


@pytest.mark.parametrize("adapter", ["ExitsZero", "PatchesChecker"])
def test_compare_runs_no_adapter_code_in_crashlabs_process(tmp_path, adapter):
    """compare runs both adapters in workers: an adapter's os._exit(0) or a patched checker cannot
    turn a difference into exit 0."""
    scenario = T1 if adapter == "ExitsZero" else BLIND_FAILS[0]
    proc = cli("compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--adapter",
               f"hostile_adapters:{adapter}", "--scenario", scenario)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 of 1 runs differ" in proc.stdout


@pytest.mark.parametrize("adapter", ["ExitsZero", "PatchesChecker"])
def test_the_hostile_adapters_do_defeat_the_untrusted_in_process_mode(tmp_path, adapter):
    """What the boundary stops is real: inside crashlab's own process these adapters make a failing
    adapter exit 0, which is why --in-process is marked untrusted."""
    scenario = T1 if adapter == "ExitsZero" else BLIND_FAILS[0]
    proc = cli("conformance", "--in-process", "--adapter", f"hostile_adapters:{adapter}", "--scenario", scenario,
               "--out", str(tmp_path))
    # ExitsZero ends crashlab with 0; PatchesChecker's failing scenario passes, and only the rubric
    # points one scenario cannot exercise keep it from 0 (inconclusive)
    assert proc.returncode == (0 if adapter == "ExitsZero" else 2)
    isolated = cli("conformance", "--adapter", f"hostile_adapters:{adapter}", "--scenario", scenario,
                   "--out", str(tmp_path))
    assert isolated.returncode == 1


def test_a_patched_checker_in_the_worker_does_not_patch_crashlabs(tmp_path):
    blind = suite("crashlab.gallery.retries:BlindRetry", BLIND_FAILS)
    patched = suite("hostile_adapters:PatchesChecker", BLIND_FAILS)
    assert [s.verdict for s in patched.scenarios] == [s.verdict for s in blind.scenarios] == ["fail", "fail"]
    assert [len(s.violations) for s in patched.scenarios] == [len(s.violations) for s in blind.scenarios]


def test_a_chdir_in_the_adapter_does_not_move_the_outputs(tmp_path):
    proc = cli("conformance", "--jobs", "1", "--adapter", "hostile_adapters:Chdirs", "--scenario", T1,
               "--out", "out", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert (tmp_path / "r.json").is_file() and list((tmp_path / "out").glob("*.jsonl"))


def test_in_process_mode_is_named_and_marked_untrusted(tmp_path):
    proc = cli("conformance", "--in-process", "--scenario", T1, "--out", str(tmp_path),
               "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 2, proc.stderr   # T1 passes; one scenario leaves rubric points not exercised
    assert "--in-process" in proc.stderr and "untrusted" in proc.stderr
    card = results(tmp_path / "r.json")
    assert "untrusted" in card["untrusted"]
    assert any("untrusted" in n for n in card["scenarios"][0]["notes"])
    isolated = cli("conformance", "--scenario", T1, "--out", str(tmp_path), "--json", str(tmp_path / "i.json"))
    assert isolated.returncode == 2 and "untrusted" not in results(tmp_path / "i.json")


def test_a_worker_reply_that_is_not_a_trace_of_the_job_is_the_adapters_fault():
    sc = resolve(T1)
    job = Job(id=sc.id, base=sc.id, scenario=sc)
    good = run_checked(sc)
    other = traced_once(resolve(T2), load_adapter(None, import_code=False), None).encode()
    for payload in (b"", b"not json\n", b'{"seq":0}\n{"seq":1}\n{"seq":2}\n', other, other[:-100]):
        outcome = judge(job, Done({"seed": sc.seed}, payload), adapter="x:Y", seed=None, out_dir=None, keep="all")
        assert outcome.result.verdict == "fail", payload
        assert any("garbled" in m for m in faults(outcome.result))
    assert good.verdict == "pass"


def test_traces_are_the_same_bytes_in_process_and_in_workers(tmp_path):
    ids = [T1, T2, "combined-cancellation-under-pressure"]
    for name, executor in (("in", LocalExecutor(1, in_process=True)), ("one", LocalExecutor(1)),
                           ("two", LocalExecutor(2))):
        run_suite(None, [resolve(i) for i in ids], executor=executor, out_dir=tmp_path / name)
    for trace in (tmp_path / "in").glob("*.jsonl"):
        assert (tmp_path / "one" / trace.name).read_bytes() == trace.read_bytes()
        assert (tmp_path / "two" / trace.name).read_bytes() == trace.read_bytes()


# --------------------------------------------------------------------------- 2. containment
@pytest.mark.parametrize("adapter", ["BlocksAlarm", "LongNativeCall"])
def test_the_step_timeout_does_not_depend_on_the_adapters_signal_handling(adapter):
    started = time.monotonic()
    card = suite(f"hostile_adapters:{adapter}", [T1], wall_guard_s=0.3, run_wall_s=30)
    [res] = card.scenarios
    assert res.verdict != "pass" and any("step_timeout" in n for n in res.notes)
    assert time.monotonic() - started < 25


def test_a_run_has_a_wall_clock_bound_in_process():
    card = suite("hostile_adapters:SlowForever", [T1], run_wall_s=1.0)
    [res] = card.scenarios
    assert res.verdict == "fail" and any("run_timeout" in m for m in faults(res))


def test_a_slow_loris_wire_adapter_meets_the_runs_bound():
    started = time.monotonic()
    card = suite(f"exec:{PY} {WIRE} loris", [T1], reply_timeout_s=1.0, run_wall_s=2.0)
    [res] = card.scenarios
    assert res.verdict == "fail" and any("run_timeout" in m for m in faults(res))
    assert time.monotonic() - started < 20


@linux
@pytest.mark.parametrize("adapter", ["SignalsCrashlabTerm", "SignalsCrashlabInt", "SignalsCrashlabStop"])
def test_an_in_process_adapter_signalling_crashlab_is_that_scenarios_fault(adapter):
    card = suite(f"hostile_adapters:{adapter}", [T1, T2], jobs=2)
    assert [s.verdict for s in card.scenarios] == ["fail", "fail"]
    assert all(any("SIGSYS" in m for m in faults(s)) for s in card.scenarios)


@linux
@pytest.mark.parametrize("adapter", ["SignalsCrashlabStop", "SignalsCrashlabTerm"])
def test_a_warm_wire_adapter_signalling_its_server_is_that_scenarios_fault(monkeypatch, adapter):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])  # the warm server imports the adapter
    [res] = suite(f"wire:hostile_adapters:{adapter}", [T1]).scenarios
    assert res.verdict == "fail" and any("status -31" in m for m in faults(res))  # SIGSYS


@linux
@pytest.mark.parametrize("mode, words", [("sigstop_parent", "SIGSTOP"), ("sigterm_parent", "SIGTERM"),
                                         ("sigint_parent", None)])
def test_a_wire_adapter_signalling_its_parent_is_that_scenarios_fault(mode, words, monkeypatch):
    monkeypatch.setenv("CRASHLAB_ISOLATION", "process")  # in namespaces its parent is not a worker
    card = suite(f"exec:{PY} {WIRE} {mode}", [T1], reply_timeout_s=1.0, run_wall_s=20)
    [res] = card.scenarios
    assert res.verdict != "pass"
    if words:
        assert any(words in m for m in faults(res)), res.violations


@linux
def test_the_cli_survives_an_adapter_that_signals_it(tmp_path):
    proc = cli("conformance", "--adapter", "hostile_adapters:SignalsCrashlabStop", "--scenario", T1,
               "--out", str(tmp_path), "--json", str(tmp_path / "r.json"), timeout=120)
    assert proc.returncode == 1 and results(tmp_path / "r.json")["verdict"] == "fail"


@linux
def test_a_setsid_grandchild_does_not_outlive_the_run(tmp_path):
    marker = tmp_path / "grandchild"
    proc = cli("run", T1, "--adapter", f"exec:{PY} {WIRE} escape {marker}", "--out", str(tmp_path / "o"),
               "--isolation", "process")  # namespaces: tests/test_isolation_adapters.py
    assert proc.returncode == 1, proc.stderr
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), f"the adapter's grandchild {pid} outlived crashlab"
    time.sleep(3.5)  # when it would have rewritten a file
    assert not Path(str(marker) + ".late").exists()


@linux
def test_kill_9_of_crashlab_leaves_no_worker_or_adapter_running(tmp_path):
    proc = subprocess.Popen([PY, "-m", "crashlab", "conformance", "--jobs", "2", "--adapter",
                             f"exec:{PY} {WIRE} trickle", "--out", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        below: list[int] = []
        while time.monotonic() < deadline:  # two workers, each with its adapter
            below = descendants(proc.pid)
            if len(below) >= 4:
                break
            time.sleep(0.05)
        assert len(below) >= 4, below
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in below if alive(p)]


# --------------------------------------------------------------------------- 3. a pool that survives its workers
def _maybe_die(item):
    if item % 3 == 1:
        os._exit(0)
    if item % 3 == 2:
        os.kill(os.getpid(), signal.SIGSEGV)
    return {"item": item}


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_the_pool_replaces_dead_workers_and_keeps_the_order(jobs):
    replies = list(Pool(jobs).map(_maybe_die, list(range(9))))
    assert [type(r) for r in replies] == [Done, Lost, Lost] * 3
    assert [r.header["item"] for r in replies[::3]] == [0, 3, 6]
    assert "status 0" in replies[1].message and "SIGSEGV" in replies[2].message


@pytest.mark.parametrize("adapter, words", [("ExitsZero", "status 0"), ("NativeCrash", "SIGSEGV"),
                                            ("KillsItsWorker", "SIGKILL")])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_worker_that_dies_is_its_scenarios_fault_and_the_suite_goes_on(tmp_path, adapter, words, jobs):
    ids = [T1, T2, "t6-duplicate-input-event"]
    proc = cli("conformance", "--jobs", jobs, "--adapter", f"hostile_adapters:{adapter}",
               *[x for i in ids for x in ("--scenario", i)], "--out", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 1, proc.stderr
    card = results(tmp_path / "r.json")
    assert [s["id"] for s in card["scenarios"]] == ids
    for s in card["scenarios"]:
        assert s["verdict"] == "fail" and any(words in v["message"] for v in s["violations"])
    assert len(list(tmp_path.glob("*.jsonl"))) == 3
    check = cli("check", str(next(tmp_path.glob("*.jsonl"))))
    assert check.returncode == 1, check.stdout + check.stderr


def test_a_wire_adapter_that_dies_natively_is_a_fault_with_any_jobs(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])  # the warm server imports the adapter
    card = suite("wire:hostile_adapters:NativeCrash", [T1, T2], jobs=2)
    assert [s.verdict for s in card.scenarios] == ["fail", "fail"]
    assert all(any("status -11" in m for m in faults(s)) for s in card.scenarios)  # SIGSEGV


# --------------------------------------------------------------------------- 5. pytest never green on a failure
@pytest.mark.parametrize("adapter, scenario", [
    ("ExitsZero", T1), ("AtexitExitsZero", BLIND_FAILS[0]), ("PatchesChecker", BLIND_FAILS[0]),
    ("ClosesStdout", BLIND_FAILS[0]), ("NativeCrash", T1),
])
def test_pytest_is_never_green_on_a_hostile_adapter(pytester, monkeypatch, adapter, scenario):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    result = pytester.runpytest_subprocess(f"--crashlab-adapter=hostile_adapters:{adapter}",
                                           f"--crashlab-scenario={scenario}", "--crashlab-scenario=" + T2,
                                           "-p", "no:cacheprovider", timeout=240)
    assert result.ret == 1, (result.ret, result.outlines[-5:])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1 and outcomes.get("passed", 0) < 2


def test_an_inconclusive_scenario_fails_pytest_by_default_and_xfails_on_request(pytester):
    pytester.syspathinsert(HERE)
    args = ("--crashlab-adapter=hostile_adapters:Idles", "--crashlab-scenario=combined-cancel-after-stale-resume")
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2)   # the scenario and crashlab::rubric, inconclusive both
    result.stdout.fnmatch_lines(["*inconclusive (verdict unknown)*"])
    result = pytester.runpytest(*args, "--crashlab-inconclusive=xfail")
    result.assert_outcomes(xfailed=2)
    assert result.ret == 0


def test_the_fixture_runs_the_adapter_in_a_worker(pytester):
    pytester.makepyfile(test_mine=textwrap.dedent('''
        def test_exit_is_caught(crashlab):
            result = crashlab.run("t1-crash-before-dispatch", adapter="hostile_adapters:ExitsZero")
            assert result.verdict == "fail"
    '''))
    pytester.syspathinsert(HERE)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def test_an_adapter_whose_import_hangs_is_a_usage_error_within_the_bound(tmp_path, monkeypatch):
    from crashlab.vocab.errors import UsageError

    (tmp_path / "hangs_at_import.py").write_text("import time\ntime.sleep(600)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.monotonic()
    with pytest.raises(UsageError, match="importing the adapter"):
        suite("hangs_at_import:Adapter", [T1], run_wall_s=1.0)
    assert time.monotonic() - started < 30


def test_an_adapter_that_exits_while_imported_is_a_usage_error(tmp_path, monkeypatch):
    from crashlab.vocab.errors import UsageError

    (tmp_path / "exits_at_import_hard.py").write_text("import os\nos._exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError, match="importing the adapter"):
        suite("exits_at_import_hard:Adapter", [T1])
