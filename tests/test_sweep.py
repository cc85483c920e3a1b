"""Sweeps at scale: the crash matrix as a command, parallel and sharded runs with identical
results whatever the executor, findings that last, resume, merge and progress."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.run.conformance import run_suite
from crashlab.run.drivers import load_adapter
from crashlab.vocab.errors import UsageError
from crashlab.report.progress import Progress
from crashlab.scenario import resolve
from crashlab.run.sweep import LocalExecutor, Shard, merge, sweep

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
SCENARIOS = ["t1-crash-before-dispatch", "t2-commit-before-record"]


def _tree(folder: Path) -> dict[str, bytes]:
    """Every trace, saved scenario and finding under ``folder`` (its own name replaced by OUT)."""
    return {str(p.relative_to(folder)): p.read_bytes().replace(str(folder).encode(), b"OUT")
            for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in (".jsonl", ".yaml")
            and "journal" not in p.name}


def _json(path: Path, out: Path | None = None) -> dict:
    """A results JSON, with the output folder's name replaced by OUT (trace paths name it)."""
    text = path.read_text()
    return json.loads(text.replace(str(out), "OUT") if out else text)


def test_results_and_traces_are_identical_whatever_the_jobs_and_shards(tmp_path, capsys):
    for command in ("conformance", "sweep"):
        base = ["--adapter", "crashlab.gallery.retries:BlindRetry", "-q", "--scenario", SCENARIOS[1]]
        base += ["--scenario", SCENARIOS[0]] if command == "conformance" else []
        one, many = tmp_path / command / "one", tmp_path / command / "many"
        main([command, *base, "--out", str(one), "--json", str(one / "r.json"), "-j", "1"])
        main([command, *base, "--out", str(many), "--json", str(many / "r.json"), "-j", "2", "--batch", "3"])
        assert _json(one / "r.json", one) == _json(many / "r.json", many)
        assert _tree(one) == _tree(many)
        shards = tmp_path / command / "shards"
        for i in (1, 2, 3):
            main([command, *base, "--out", str(shards), "--json", str(shards / f"s{i}.json"), "--shard", f"{i}/3"])
        assert main(["merge", str(shards / "s3.json"), str(shards / "s1.json"), str(shards / "s2.json"),
                     "--json", str(shards / "merged.json"), "-q"]) == 1
        assert _json(shards / "merged.json", shards) == _json(one / "r.json", one)
        assert {k: v for k, v in _tree(shards).items() if "findings" not in k} == \
            {k: v for k, v in _tree(one).items() if "findings" not in k}


def test_the_dask_executor_gives_the_same_results(tmp_path):
    pytest.importorskip("distributed", reason="the Dask executor needs crashlab[dask]")
    from crashlab.run.sweep import DaskExecutor

    scenarios = [resolve(s) for s in SCENARIOS]
    adapter = load_adapter("crashlab.gallery.retries:BlindRetry")
    local = sweep(adapter, scenarios, executor=LocalExecutor(1), out_dir=tmp_path / "local",
                  shard=Shard(1, 2))
    dask = DaskExecutor(None, jobs=2, batch=8)
    try:
        remote = sweep(adapter, scenarios, executor=dask, out_dir=tmp_path / "dask", shard=Shard(1, 2))
    finally:
        dask.close()
    assert [s.to_json() | {"trace": None, "repro": None} for s in local.scenarios] == \
        [s.to_json() | {"trace": None, "repro": None} for s in remote.scenarios]
    assert (local.total, local.verdict) == (remote.total, remote.verdict)
    assert _tree(tmp_path / "local" / "findings").keys() == _tree(tmp_path / "dask" / "findings").keys()


def test_every_distinct_failure_is_a_finding_whose_repro_runs_as_pasted(tmp_path, capsys):
    assert main(["sweep", "--adapter", "crashlab.gallery.retries:BlindRetry", "--scenario", SCENARIOS[1], "-q",
                 "--out", str(tmp_path)]) == 1
    index = [json.loads(line) for line in (tmp_path / "findings" / "index.jsonl").read_text().splitlines()]
    assert index and len({(f["base"], tuple(f["invariants"])) for f in index}) == len(index)
    first = index[0]
    assert Path(first["file"]).is_file() and f"# repro: {first['repro']}" in Path(first["file"]).read_text()
    proc = subprocess.run(first["repro"] + f" --out {tmp_path / 'again'}", shell=True, capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PATH": f"{Path(PY).parent}:{os.environ['PATH']}"})
    assert proc.returncode == 1 and first["invariants"][0] in proc.stdout


def test_a_sweep_resumes_where_it_was_interrupted(tmp_path):
    scenarios = [resolve(s) for s in SCENARIOS]
    adapter = load_adapter("crashlab.reference_impl:ReferenceAdapter")
    full = sweep(adapter, scenarios, out_dir=tmp_path / "full")
    out = tmp_path / "cut"
    sweep(adapter, scenarios, out_dir=out)
    journal = out / "sweep.journal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:10]) + "\n" + lines[10][:20])  # as if killed mid-write
    progress = Progress(0, "sweep", quiet=True)
    resumed = sweep(adapter, scenarios, out_dir=out, resume=True, progress=progress)
    assert resumed.to_json() == full.to_json() | {"findings": str(out / "findings")}
    assert progress.done == len(full.scenarios)  # 9 from the journal, the rest run again
    with pytest.raises(UsageError, match="journal of another sweep"):
        sweep(adapter, scenarios[:1], out_dir=out, resume=True)


def test_a_sweep_killed_mid_write_and_resumed_twice_gives_the_uninterrupted_results(tmp_path):
    """SIGKILL can land after a run's journal line and before its finding, or in the middle of a
    line: the resumed sweep's results and findings are the uninterrupted sweep's, however often it
    is resumed."""
    scenarios = [resolve("t2-commit-before-record")]
    adapter = load_adapter("crashlab.gallery.retries:BlindRetry")
    full = sweep(adapter, scenarios, out_dir=tmp_path / "full")
    out = tmp_path / "cut"
    sweep(adapter, scenarios, out_dir=out)
    journal, index = out / "sweep.journal.jsonl", out / "findings" / "index.jsonl"
    lines = journal.read_text().splitlines()
    findings = index.read_text().splitlines()
    done = [json.loads(line)["id"] for line in lines[1:41]]
    keep = [f for f in findings if json.loads(f)["id"] in done][:-1]     # the last finding was never written
    for f in findings:
        if f not in keep:
            Path(json.loads(f)["file"]).unlink()
    index.write_text("".join(f + "\n" for f in keep) + '{"id": "torn')
    journal.write_text("\n".join(lines[:41]) + "\n" + lines[41][:30])
    for _ in range(2):
        resumed = sweep(adapter, scenarios, out_dir=out, resume=True)
        same = json.dumps(full.to_json(), sort_keys=True).replace(str(tmp_path / "full"), str(out))
        assert json.dumps(resumed.to_json(), sort_keys=True) == same
        assert all(json.loads(line) for line in journal.read_text().splitlines())
        got = [json.loads(f) for f in index.read_text().splitlines()]
        want = [json.loads(f) for f in (tmp_path / "full" / "findings" / "index.jsonl").read_text().splitlines()]
        assert [(g["id"], g["invariants"], Path(g["file"]).name) for g in got] == \
            [(w["id"], w["invariants"], Path(w["file"]).name) for w in want]


def test_ctrl_c_on_a_sweep_keeps_the_journal_and_says_how_to_resume(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([PY, "-m", "crashlab", "sweep", "--scenario", SCENARIOS[1], "--out", str(out), "-j", "1", "--json",
                             str(out / "r.json"), "--adapter", f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    journal = out / "sweep.journal.jsonl"
    deadline = time.monotonic() + 120
    while (not journal.exists() or len(journal.read_text().splitlines()) < 3) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "--resume" in err
    assert _json(out / "r.json")["partial"]["done"] >= 2


def test_an_interrupt_swallowed_where_it_landed_still_stops_the_sweep(tmp_path, monkeypatch, capsys):
    """A signal handler's exception raised inside a finalizer (a closing pipe, say) is swallowed by
    Python; crashlab still stops at the next step, keeps the journal and never exits 0."""
    import crashlab.run.sweep as sweep_module
    from crashlab.vocab.errors import Interrupted

    real_add, seen = sweep_module.Journal.add, []

    def add(self, result):
        real_add(self, result)
        seen.append(result.id)
        if len(seen) == 2:
            Interrupted.requested = signal.SIGINT      # the handler ran, its exception went nowhere

    monkeypatch.setattr(sweep_module.Journal, "add", add)
    out = tmp_path / "out"
    code = main(["sweep", "-q", "--scenario", SCENARIOS[0], "--out", str(out), "-j", "1", "--json", str(out / "r.json"),
                 "--adapter", f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"])
    err = capsys.readouterr().err
    assert code == 130 and "--resume" in err and len(seen) == 2
    assert _json(out / "r.json")["partial"]["done"] == 2


def test_an_interrupt_swallowed_after_the_last_run_still_exits_130(monkeypatch, capsys):
    import crashlab.cli as cli
    from crashlab.vocab.errors import Interrupted

    def run_then_swallow(args):
        Interrupted.requested = signal.SIGTERM
        return 0

    monkeypatch.setitem(cli.COMMANDS, "list", run_then_swallow)
    assert main(["list"]) == 128 + signal.SIGTERM
    assert "interrupted by SIGTERM" in capsys.readouterr().err


def test_merge_refuses_shards_that_do_not_make_one_run(tmp_path):
    for i in (1, 2):
        main(["conformance", "-q", "--scenario", SCENARIOS[0], "--scenario", SCENARIOS[1], "--out", str(tmp_path),
              "--json", str(tmp_path / f"s{i}.json"), "--shard", f"{i}/3"])
    with pytest.raises(UsageError, match="shard\\(s\\) 3 of 3 missing"):
        merge([tmp_path / "s1.json", tmp_path / "s2.json"])
    with pytest.raises(UsageError, match="also"):
        merge([tmp_path / "s1.json", tmp_path / "s1.json"])
    main(["conformance", "-q", "--scenario", SCENARIOS[0], "--out", str(tmp_path), "--json", str(tmp_path / "all.json")])
    with pytest.raises(UsageError, match="not the results of a shard"):
        merge([tmp_path / "all.json"])


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "2"])
def test_bad_shards_are_usage_errors(text, capsys, tmp_path):
    assert main(["conformance", "--shard", text, "--out", str(tmp_path)]) == 3
    assert "--shard" in capsys.readouterr().err


def test_progress_is_a_periodic_line_when_not_a_terminal(monkeypatch):
    stream = io.StringIO()
    progress = Progress(4, "sweep", stream=stream)
    monkeypatch.setattr("crashlab.report.progress.STATUS_EVERY_S", 0.0)
    for failed in (False, True, False):
        progress.update(failed=failed)
    lines = stream.getvalue().splitlines()
    assert lines and lines[-1].startswith("crashlab: sweep: 3/4 (75 %)") and "1 failing" in lines[-1]
    quiet = io.StringIO()
    Progress(4, "sweep", stream=quiet, quiet=True).update()
    assert quiet.getvalue() == ""


def test_run_suite_with_a_pool_matches_the_inline_run(tmp_path):
    scenarios = [resolve(s) for s in SCENARIOS]
    inline = run_suite(None, scenarios, out_dir=tmp_path / "a")
    pooled = run_suite(None, scenarios, out_dir=tmp_path / "b", executor=LocalExecutor(2, batch=1))
    assert [s.to_json() | {"trace": None} for s in inline.scenarios] == \
        [s.to_json() | {"trace": None} for s in pooled.scenarios]
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


# --------------------------------------------------------------------------- explore
def _explore(tmp_path, name, *extra):
    out = tmp_path / name
    code = main(["explore", "--adapter", "blind_resend:BlindResend", "--base", "matrix-timeout-before-send",
                 "--base", "t1-crash-before-dispatch", "--examples", "120", "--seed", "5", "-q",
                 "--findings", str(out), "--json", str(out / "r.json"), *extra])
    return code, json.loads((out / "r.json").read_text()), out


def test_explore_finds_the_same_failures_whatever_the_jobs_and_shards(tmp_path, capsys):
    sys.path.insert(0, str(HERE / "data" / "checks"))
    code1, one, out1 = _explore(tmp_path, "one", "-j", "1")
    code2, two, _ = _explore(tmp_path, "two", "-j", "2")
    assert code1 == code2 == 1 and one == two
    assert any(c["failure"] is not None for c in one["chunks"])
    index = [json.loads(line) for line in (out1 / "index.jsonl").read_text().splitlines()]
    assert index and all(Path(f["file"]).is_file() and f["invariants"] for f in index)
    assert any("RETRY-01" in f["invariants"] for f in index)
    assert len({(f["base"], tuple(f["invariants"])) for f in index}) == len(index)  # distinct failures only
    parts = []
    for i in (1, 2):
        _, part, out = _explore(tmp_path, f"shard{i}", "--shard", f"{i}/2")
        parts.append(out / "r.json")
    assert main(["merge", str(parts[1]), str(parts[0]), "--json", str(tmp_path / "merged.json")]) == 1
    assert json.loads((tmp_path / "merged.json").read_text()) == one


def test_explore_resumes_from_its_journal(tmp_path, capsys):
    sys.path.insert(0, str(HERE / "data" / "checks"))
    _, full, out = _explore(tmp_path, "f")
    journal = out / "explore.journal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n")           # as if interrupted after one chunk
    _, resumed, _ = _explore(tmp_path, "f", "--resume")
    assert resumed == full
    with pytest.raises(SystemExit):
        main(["explore", "--examples", "0", "--findings", str(out)])
    assert main(["explore", "--adapter", "blind_resend:BlindResend", "--base", "t1-crash-before-dispatch",
                 "--examples", "120", "--seed", "6", "-q", "--findings", str(out), "--resume"]) == 3
