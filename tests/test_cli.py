"""The crashlab command as a user runs it: help, exit codes, errors without tracebacks."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.cli import main

HERE = Path(__file__).parent
SCENARIO = HERE / "data" / "determinism.yaml"


def test_help_of_every_subcommand_is_complete(capsys):
    for argv in (["--help"], ["run", "--help"], ["conformance", "--help"], ["check", "--help"],
                 ["replay", "--help"], ["report", "--help"], ["list", "--help"], ["explore", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "exit codes:" in out and "inconclusive" in out


def test_probe_and_integrate_help_list_their_own_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    out = capsys.readouterr().out
    assert "1  residue" in out and "conformance: 20/20" not in out and "adapter limits" not in out
    with pytest.raises(SystemExit):
        main(["integrate", "--help"])
    out = capsys.readouterr().out
    assert "6  internal error" in out and "every scenario's integration card passed" in out


@pytest.mark.parametrize("spec", ["exec:no-such-adapter-command-x", "exec:/nonexistent/adapter --x"])
def test_an_exec_adapter_that_is_not_there_is_a_usage_error_before_anything_runs(spec, tmp_path, capsys):
    for argv in (["run", "t1-crash-before-dispatch"], ["conformance", "-q"]):
        assert main(argv + ["--adapter", spec, "--out", str(tmp_path / "out")]) == 3
        err = capsys.readouterr().err
        assert "no such command" in err and repr(spec.split()[0][5:]) in err
    assert not list((tmp_path / "out").glob("*.jsonl"))      # refused before any run: no trace


def test_integrate_refuses_an_output_that_is_its_scenario_file_or_a_file_as_out(tmp_path, capsys):
    scenario = tmp_path / "mine.yaml"
    scenario.write_text((HERE.parent / "scenarios" / "t2-commit-before-record.yaml").read_text())
    before = scenario.read_text()
    worker = f"{sys.executable} -c pass"
    assert main(["integrate", str(scenario), "--worker", worker, "--json", str(scenario),
                 "--out", str(tmp_path / "o")]) == 3
    assert "which this command reads" in capsys.readouterr().err
    assert scenario.read_text() == before
    assert main(["integrate", str(scenario), "--worker", worker, "--out", str(scenario)]) == 3
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["integrate", str(scenario), "--worker", worker, "--out", str(tmp_path / "o"),
                 "--json", str(tmp_path / "o" / "cards.jsonl")]) == 3
    assert "inside the --out folder" in capsys.readouterr().err
    assert scenario.read_text() == before and not list((tmp_path / "o").glob("*.jsonl"))


def test_usage_error_exits_3_not_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run"])
    assert exit_.value.code == 3


def test_replay_confirms_and_detects_a_changed_trace(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(["run", str(SCENARIO), "--adapter", "jitter_adapter:Jittery", "--out", str(tmp_path)]) in (0, 1, 2)
    [trace] = tmp_path.glob("*.jsonl")
    capsys.readouterr()
    assert main(["replay", str(trace), "--adapter", "jitter_adapter:Jittery"]) == 0
    assert "identical" in capsys.readouterr().out
    lines = trace.read_text().splitlines()
    lines[5] = lines[5].replace('"t":', '"t":1', 1)
    trace.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(trace), "--trust-adapter"]) == 5
    assert "differs from line 6" in capsys.readouterr().err


def test_run_prints_verdict_trace_and_repro(tmp_path, capsys):
    code = main(["run", "t2-commit-before-record", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "t2-commit-before-record: PASS" in out
    assert "repro: crashlab run t2-commit-before-record --adapter crashlab.reference_impl:ReferenceAdapter --seed" in out
    [trace] = tmp_path.glob("*.jsonl")
    assert main(["check", str(trace)]) == 0


def test_check_rejects_a_file_that_is_not_a_trace(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq": 0}\nnot json\n')
    assert main(["check", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "Traceback" not in err


def test_invalid_scenario_names_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: broken\ntitle: x\nruns:\n  - intent: {tenant: T}\n    colour: blue\n")
    assert main(["run", str(bad), "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "broken.yaml:5" in err and "colour" in err and "Traceback" not in err


def test_unknown_scenario_id_suggests(capsys, tmp_path):
    assert main(["run", "t2-commit-before-recrd", "--out", str(tmp_path)]) == 3
    assert "t2-commit-before-record" in capsys.readouterr().err


def test_list_json_and_conformance_json_schema(tmp_path, capsys):
    assert main(["list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"id", "title", "tags"} <= set(listed[0])
    results = tmp_path / "r.json"
    code = main(["conformance", "--scenario", "t1-crash-before-dispatch", "--scenario", "t6-duplicate-input-event",
                 "--json", str(results), "--out", str(tmp_path / "traces")])
    data = json.loads(results.read_text())
    assert code == {"pass": 0, "fail": 1, "unknown": 2}[data["verdict"]]
    assert data["score"]["max"] == 20
    assert set(data["score"]["categories"]) == {"classification", "ownership", "effect_correctness", "disposition"}
    assert isinstance(data["auto_fail"], list)
    for sc in data["scenarios"]:
        assert {"id", "verdict", "disposition", "violations"} <= set(sc)
        assert sc["verdict"] in ("pass", "fail", "unknown")


def test_list_into_a_closed_pipe_is_quiet():
    proc = subprocess.run(f"{sys.executable} -m crashlab list | head -1", shell=True, capture_output=True,
                          text=True)
    assert proc.stdout.count("\n") == 1 and "Error" not in proc.stderr


def test_with_library_without_scenario_files_is_a_usage_error(capsys, tmp_path):
    """--with-library adds the library to --scenarios FILES; with a filter alone it would be ignored
    while the run looked like one over the library."""
    from crashlab.cli import main

    assert main(["conformance", "--scenario", "t1-crash-before-dispatch", "--with-library", "-q",
                 "--out", str(tmp_path)]) == 3
    assert "--with-library adds the library to --scenarios" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.jsonl"))
