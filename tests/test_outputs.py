"""Outputs the user asked for, or a clear failure; and bounds on what an adapter can make crashlab
print or keep. One test per hostile case: an adapter that changes directory, outputs that name an
input or another output, a full disk and exhausted descriptors, a reader that goes away, the
umask, control characters in printed strings, a trace that grows without end."""
from __future__ import annotations

import errno
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.cli.terminal import printable
from crashlab.world.trace import MAX_READ_BYTES, MAX_TRACE_BYTES, jsonl, read_jsonl
from support import kinds, run, scenario

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
T1 = "t1-crash-before-dispatch"
LIBRARY_T1 = ROOT / "scenarios" / f"{T1}.yaml"
FAILS = "crashlab.gallery.retries:BlindRetry"   # a known-bad adapter: every scenario it runs fails
WIRE = f"exec:env PYTHONPATH={HERE}:{ROOT} {PY} -m crashlab.run.wire"


def cli(*args, cwd, timeout=300, preexec=None, shell=None):
    """crashlab in a fresh process, as a user (or a CI runner's shell) runs it."""
    command = shell if shell is not None else [PY, "-m", "crashlab", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=cwd,
                          preexec_fn=preexec, shell=shell is not None,
                          executable="/bin/bash" if shell is not None else None)


def traces(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


# --------------------------------------------------------------------------- paths resolved before anything runs
def test_an_adapter_that_changes_directory_cannot_move_the_outputs(tmp_path, monkeypatch):
    """Relative --out and --json land where the user ran crashlab, whatever the adapter's chdir."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CRASHLAB_TEST_CHDIR", str(elsewhere))
    code = main(["conformance", "--adapter", "hostile_outputs:ChangesDirectory", "--scenario", T1,
                 "--out", "out", "--json", "results.json", "--jobs", "1", "-q"])
    assert code == 1
    assert (work / "results.json").is_file() and len(traces(work / "out")) == 1
    assert not (elsewhere / "results.json").exists() and not (elsewhere / "out").exists()
    [result] = json.loads((work / "results.json").read_text())["scenarios"]
    assert Path(result["trace"]).is_absolute() and Path(result["trace"]).is_file()


def test_run_resolves_out_before_the_adapter_runs(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRASHLAB_TEST_CHDIR", str(elsewhere))
    assert main(["run", T1, "--adapter", "hostile_outputs:ChangesDirectory", "--out", "out"]) == 1
    assert len(traces(tmp_path / "out")) == 1 and not (elsewhere / "out").exists()


# --------------------------------------------------------------------------- an output that is an input or another output
def test_json_naming_the_scenario_file_is_refused_before_anything_runs(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text(LIBRARY_T1.read_text().replace(f"id: {T1}", "id: mine"))
    before = mine.read_bytes()
    code = main(["conformance", "--scenarios", str(mine), "--json", str(mine), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 3 and "--json" in err and "mine.yaml" in err and "reads" in err
    assert mine.read_bytes() == before and not traces(tmp_path / "out")


def test_json_naming_a_scenario_in_a_scenario_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "mine.yaml").write_text(LIBRARY_T1.read_text().replace(f"id: {T1}", "id: mine"))
    code = main(["sweep", "--scenarios", str(folder), "--json", str(folder / "mine.yaml"),
                 "--out", str(tmp_path / "out")])
    assert code == 3 and "mine.yaml" in capsys.readouterr().err


def test_json_naming_a_trace_that_will_be_written_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    trace = out / f"{T1}.seed101.jsonl"
    code = main(["conformance", "--scenario", T1, "--out", str(out), "--json", str(trace)])
    err = capsys.readouterr().err
    assert code == 3 and "--out folder" in err and "such as" in err
    assert not traces(out)   # nothing ran
    # results JSON beside the traces, under its own name, is fine
    assert main(["conformance", "--scenario", T1, "--out", str(out), "--json", str(out / "results.json"),
                 "-q"]) == 2   # one scenario passes; the rubric points it does not exercise leave it inconclusive
    assert (out / "results.json").is_file() and len(traces(out)) == 1


def test_merge_json_naming_one_of_its_inputs_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["conformance", "--scenario", T1, "--out", str(out), "--json", str(tmp_path / "a.json"), "-q"]) == 2
    before = (tmp_path / "a.json").read_bytes()
    assert main(["merge", str(tmp_path / "a.json"), "--json", str(tmp_path / "a.json")]) == 3
    assert "reads" in capsys.readouterr().err and (tmp_path / "a.json").read_bytes() == before


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    same = tmp_path / "x.yaml"
    code = main(["explore", "--examples", "1", "--save", str(same), "--json", str(same),
                 "--findings", str(tmp_path / "f")])
    assert code == 3 and "--save" in capsys.readouterr().err and not same.exists()


def test_a_symlink_to_the_scenario_is_the_scenario(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text(LIBRARY_T1.read_text().replace(f"id: {T1}", "id: mine"))
    (tmp_path / "link.json").symlink_to(mine)
    assert main(["conformance", "--scenarios", str(mine), "--json", str(tmp_path / "link.json")]) == 3
    assert "reads" in capsys.readouterr().err


# --------------------------------------------------------------------------- a full disk, no descriptors: exit 4
def _fail_replace(monkeypatch, code: int, suffix: str) -> None:
    real = os.replace

    def replace(src, dst, *a, **kw):
        if str(dst).endswith(suffix):
            raise OSError(code, os.strerror(code))
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.EDQUOT])
def test_a_full_disk_while_writing_traces_is_exit_4_with_nothing_claimed(tmp_path, monkeypatch, capsys, code):
    _fail_replace(monkeypatch, code, ".jsonl")
    rc = main(["conformance", "--adapter", FAILS, "--scenario", T1, "--out", str(tmp_path / "out"),
               "--json", str(tmp_path / "r.json"), "--jobs", "1"])
    out, err = capsys.readouterr()
    assert rc == 4, err
    assert os.strerror(code) in err and ".jsonl" in err and "no verdict is claimed" in err
    assert "verdict:" not in out and not (tmp_path / "r.json").exists()


def test_a_full_disk_while_writing_the_results_is_exit_4_before_any_scorecard(tmp_path, monkeypatch, capsys):
    _fail_replace(monkeypatch, errno.ENOSPC, "r.json")
    rc = main(["conformance", "--scenario", T1, "--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert rc == 4 and "r.json: not written: No space left on device" in err
    assert "verdict:" not in out and "results:" not in out


def test_a_file_size_limit_in_a_real_process_is_exit_4(tmp_path):
    """RLIMIT_FSIZE: the kernel refuses the write (EFBIG) part way through the suite."""
    limit = 64 * 1024

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    proc = cli("conformance", "--adapter", FAILS, "--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json"),
               "--jobs", "1", "-q", cwd=tmp_path, preexec=small_files)
    assert proc.returncode == 4, proc.stderr
    assert "File too large" in proc.stderr and "no verdict is claimed" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.json").exists()


def test_an_adapter_that_exhausts_descriptors_is_never_a_usage_error(tmp_path):
    """The in-process adapter opens files until none is left, then finishes: crashlab either
    records the fault and scores the adapter, or stops with exit 4; never 3, never 0."""
    def few_descriptors():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    proc = cli("conformance", "--adapter", "hostile_outputs:HoardsDescriptors", "--scenario", T1,
               "--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json"), "--jobs", "1",
               cwd=tmp_path, preexec=few_descriptors)
    assert proc.returncode in (1, 2, 4), proc.stderr
    assert "Traceback" not in proc.stderr and "usage" not in proc.stderr
    if proc.returncode == 4:
        assert "Too many open files" in proc.stderr and "no verdict is claimed" in proc.stderr
    else:
        assert json.loads((tmp_path / "r.json").read_text())["verdict"] != "pass"


# --------------------------------------------------------------------------- a reader that goes away
def test_a_closed_stdout_keeps_the_failing_exit_status_and_the_results(tmp_path):
    """`crashlab conformance ... | head -c 0` under pipefail: the failure's exit status, and the
    results JSON written."""
    command = (f"set -o pipefail; {PY} -m crashlab conformance --adapter {FAILS} --scenario {T1} "
               f"--out {tmp_path / 'out'} --json {tmp_path / 'r.json'} --jobs 1 | head -c 0")
    proc = cli(cwd=tmp_path, shell=command)
    assert proc.returncode == 1, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "fail"
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_a_closed_stdout_after_a_pass_is_still_0(tmp_path):
    # the whole library: a pass needs every rubric point exercised
    command = (f"set -o pipefail; {PY} -m crashlab conformance --out {tmp_path / 'out'} "
               f"--json {tmp_path / 'r.json'} --jobs 1 | head -c 0")
    proc = cli(cwd=tmp_path, shell=command)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.json").is_file() and "Exception ignored" not in proc.stderr


def test_a_reader_of_list_that_stops_early_is_no_error(tmp_path):
    proc = cli(cwd=tmp_path, shell=f"set -o pipefail; {PY} -m crashlab list | head -n 1")
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1 and proc.stderr == ""


def test_a_check_that_fails_keeps_its_exit_status_when_the_reader_goes_away(tmp_path):
    assert main(["run", T1, "--adapter", FAILS, "--out", str(tmp_path)]) == 1
    [trace] = traces(tmp_path)
    proc = cli(cwd=tmp_path, shell=f"set -o pipefail; {PY} -m crashlab check {trace} | head -c 0")
    assert proc.returncode == 1, proc.stderr


# --------------------------------------------------------------------------- the umask
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        assert main(["conformance", "--scenario", T1, "--out", str(tmp_path / "out"),
                     "--json", str(tmp_path / "r.json"), "-q"]) == 2   # inconclusive: a subset
    finally:
        os.umask(old)
    for path in [tmp_path / "r.json", *traces(tmp_path / "out")]:
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


# --------------------------------------------------------------------------- control characters are shown, not obeyed
CONTROLS = ("\x1b", "\r", "\x00", "\x07", "\u202e")


def _clean(text: str) -> None:
    for c in CONTROLS:
        assert c not in text, f"raw {c!r} reached the terminal"


def test_printable_shows_every_control_character():
    assert printable("a\x1b[2Kb\rc\x00\x07\x7f\x9b\u202e\u2066d\ne\tf") == \
        "a\\x1b[2Kb\\x0dc\\x00\\x07\\x7f\\x9b\\u202e\\u2066d\ne\tf"
    assert printable("plain → ≠ text") == "plain → ≠ text"


@pytest.fixture(scope="module")
def fake_verdict_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake")
    assert main(["run", T1, "--adapter", "hostile_outputs:DrawsFakeVerdict", "--out", str(out)]) == 1
    assert main(["run", T1, "--out", str(out / "ref")]) == 0
    [trace] = traces(out)
    assert "\\u001b" in trace.read_text() or "\x1b" in trace.read_text()
    return trace, traces(out / "ref")[0]


@pytest.mark.parametrize("command", [
    lambda t, ref: ["check", str(t)], lambda t, ref: ["show", str(t)], lambda t, ref: ["show", str(t), "--all"],
    lambda t, ref: ["diff", str(ref), str(t)], lambda t, ref: ["diff", str(t), str(ref), "--width", "400"],
])
def test_saved_trace_commands_escape_adapter_strings(fake_verdict_trace, capsys, command):
    main(command(*fake_verdict_trace))
    out, err = capsys.readouterr()
    _clean(out)
    _clean(err)
    assert "\\x1b" in out, out


def test_run_and_the_scorecard_escape_adapter_strings(tmp_path, capsys):
    assert main(["run", T1, "--adapter", "hostile_outputs:DrawsFakeVerdict", "--out", str(tmp_path / "a")]) == 1
    out = capsys.readouterr().out
    _clean(out)
    assert "\\x1b" in out
    assert main(["conformance", "--adapter", "hostile_outputs:DrawsFakeVerdict", "--scenario", T1,
                 "--out", str(tmp_path / "b"), "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    _clean(out)
    lines = out.splitlines()
    assert "verdict: FAIL" in lines and not any(line.startswith("verdict: PASS") for line in lines)


def test_an_error_message_quoting_adapter_text_is_escaped(capsys):
    assert main(["run", T1, "--adapter", "no_such_module_\x1b[2K:X"]) == 3
    err = capsys.readouterr().err
    _clean(err)
    assert "\\x1b[2K" in err


def test_an_argument_error_is_escaped(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["list", "--tag", "x", "--no-such-\x1b[2K"])
    err = capsys.readouterr().err
    assert exit_.value.code == 3 and "\\x1b[2K" in err
    _clean(err)


# --------------------------------------------------------------------------- the trace is bounded
def test_a_trace_that_grows_past_the_bound_is_an_adapter_fault_in_process():
    result = run(scenario(), "hostile_outputs:GrowsTrace")
    [fault] = kinds(result, "adapter_fault")
    assert fault["fault"] == "trace_too_large" and "8 MiB" in fault["message"]
    size = len(result.to_jsonl().encode())
    assert MAX_TRACE_BYTES <= size < MAX_TRACE_BYTES + 2 * 2**20   # the last result and the fault past it


def test_a_trace_that_grows_past_the_bound_is_an_adapter_fault_over_the_wire():
    result = run(scenario(), f"{WIRE} hostile_outputs:GrowsTrace")
    [fault] = kinds(result, "adapter_fault")
    assert fault["fault"] == "trace_too_large"
    assert len(result.to_jsonl().encode()) < MAX_TRACE_BYTES + 2 * 2**20


def test_a_run_that_hits_the_event_bound_is_an_adapter_fault(monkeypatch):
    import crashlab.world.trace
    monkeypatch.setattr(crashlab.world.trace, "MAX_TRACE_EVENTS", 12)
    [fault] = kinds(run(scenario(), "support:Script"), "adapter_fault")
    assert fault["fault"] == "trace_too_large" and "12 events" in fault["message"]


def test_the_library_is_far_below_the_bound():
    """The bound never touches an honest run: the largest library trace is a small share of it."""
    from crashlab.scenario import library
    largest = max(len(run(s, "crashlab.reference_impl:ReferenceAdapter").to_jsonl()) for s in library()[:20])
    assert largest < MAX_TRACE_BYTES / 8


def test_check_refuses_a_trace_larger_than_crashlab_writes(tmp_path, capsys):
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.truncate(MAX_READ_BYTES + 1)
    assert main(["check", str(big)]) == 3
    assert "more than any trace crashlab writes" in capsys.readouterr().err


def test_check_reads_a_trace_line_by_line(tmp_path):
    """Split at newlines only: a line separator inside a string is no line break (a whole-file
    splitlines() cut such an event in two)."""
    result = run(scenario(), "hostile_outputs:SeparatesLines")
    path = tmp_path / "t.jsonl"
    path.write_text(result.to_jsonl(), encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")
    assert read_jsonl(path) == json.loads(json.dumps(result.events))


def test_jsonl_is_what_the_bound_counts():
    result = run(scenario(), "support:Script")
    assert result.world.trace.size == len(jsonl(result.events).encode())


def test_the_bound_counts_the_trace_as_it_grows():
    """The size is counted when asked, the events since the last count at once: at every point it
    is the length of the trace lines written so far, whatever was asked in between."""
    from crashlab.vocab import events
    from crashlab.world.trace import Trace

    trace, counts = Trace(lambda: 5), []
    for i in range(7):
        trace.emit(events.OtherActorRejected, code="x" * i + "\u00e9")
        if i % 3 == 0:
            counts.append((trace.size, len(jsonl(trace.events).encode())))
    counts.append((trace.size, len(jsonl(trace.events).encode())))
    assert all(size == written for size, written in counts) and counts[-1][0] > counts[0][0]
