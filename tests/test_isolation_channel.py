"""The channel between crashlab and its workers, the files it writes, and the code its process loads,
against a hostile process of the same user: a reply forged into a worker's result pipe is refused
(and the run is never a pass), a trace swapped after it was written is never reported, and planted
code in a site directory stops the next run. Everything runs with CRASHLAB_ISOLATION=process (no
namespaces), bounded in time, leaving nothing running."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashlab.run import frames
from crashlab.run.jobs import Done, Lost, Pool
from crashlab.run.sweep import Job, judge
from crashlab.scenario import resolve
from crashlab.vocab.errors import OutputChanged
from crashlab.vocab.files import atomic_write_text, check_written

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
FORGER = HERE / "data" / "wire" / "forges_reply.py"
SWAPPER = HERE / "data" / "wire" / "swaps_traces.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]), "CRASHLAB_ISOLATION": "process"}
T1, T2 = "t1-crash-before-dispatch", "t2-commit-before-record"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux-only")
SETPRIV = shutil.which("setpriv")


@pytest.fixture(autouse=True)
def _process_isolation(monkeypatch):
    monkeypatch.setenv("CRASHLAB_ISOLATION", "process")


def cli(*args, timeout=180, prefix=(), env=None):
    return subprocess.run([*prefix, PY, "-m", "crashlab", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or ENV, cwd=ROOT)


# --------------------------------------------------------------------------- forged replies
def _forged_run(tmp_path, command, prefix=()):
    out = tmp_path / "out"
    adapter = f"exec:{PY} {FORGER}"
    if command == "run":
        return cli("run", T1, "--adapter", adapter, "--out", str(out), prefix=prefix), out
    return cli("conformance", "--jobs", "1", "--adapter", adapter, "--scenario", T1, "--out", str(out),
               "--json", str(tmp_path / "r.json"), prefix=prefix), out


@linux
@pytest.mark.parametrize("command", ["run", "conformance"])
def test_a_reply_forged_into_the_workers_pipe_is_refused_and_never_a_pass(tmp_path, command):
    """The adapter never speaks: it writes a passing trace of its scenario into its worker's result
    pipe through /proc. Unsigned, it is the scenario's `forged` fault (before: a pass, exit 0)."""
    proc, out = _forged_run(tmp_path, command)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-800:], proc.stderr[-800:])
    if command == "run":
        assert "FAIL" in proc.stdout and "forged" in proc.stdout, proc.stdout
        return
    card = json.loads((tmp_path / "r.json").read_text())
    [scenario] = card["scenarios"]
    assert scenario["verdict"] == "fail"
    assert any("forged" in v["message"] for v in scenario["violations"]), scenario["violations"]
    assert card["verdict"] != "pass"


@linux
@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs setpriv, as root, to drop capabilities")
def test_without_capabilities_an_exec_adapter_cannot_even_open_its_workers_pipes(tmp_path):
    """Capabilities dropped (the attacker's position): the worker of an exec: adapter is not dumpable,
    so /proc/PPID/fd cannot be opened at all (before: the worker made itself dumpable)."""
    prefix = (SETPRIV, "--inh-caps=-all", "--bounding-set=-all")
    proc, _ = _forged_run(tmp_path, "run", prefix)
    assert proc.returncode == 1, (proc.stdout[-800:], proc.stderr[-800:])
    assert "forged replies written: 0" in proc.stderr, proc.stderr


@linux
def test_the_plugin_refuses_a_forged_reply(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    result = pytester.runpytest_subprocess(f"--crashlab-adapter=exec:{PY} {FORGER}", f"--crashlab-scenario={T1}",
                                           "-p", "no:cacheprovider", timeout=240)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0, result.outlines[-10:]   # the scenario and the rubric fail
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*forged*"])


# --------------------------------------------------------------------------- the frames themselves
KEY = b"k" * 32


def _frame(seq: int, head: bytes = b'{"i":0,"value":1}', payload: bytes = b"trace", key: bytes = KEY,
           pid: int = 42) -> bytes:
    out = io.BytesIO()
    signer = frames.Signer(out, key, pid)
    signer.seq = seq
    signer.write(head, payload)
    return out.getvalue()


def test_a_signed_frame_is_taken_and_a_flipped_byte_replay_or_reorder_is_refused():
    buf = bytearray(_frame(0) + _frame(1, payload=b"second"))
    assert frames.take(buf, KEY, 0, 42) == (b'{"i":0,"value":1}', b"trace")
    assert frames.take(buf, KEY, 1, 42) == (b'{"i":0,"value":1}', b"second") and not buf
    for forged, seq, pid in [(_frame(0), 1, 42),                    # replayed: the reply number is past
                             (_frame(2), 1, 42),                    # reordered: one skipped
                             (_frame(0, pid=43), 0, 42),            # another worker's reply
                             (_frame(0, key=b"x" * 32), 0, 42)]:    # another key
        with pytest.raises(frames.Forged):
            frames.take(bytearray(forged), KEY, seq, pid)
    for at in range(len(_frame(0))):
        flipped = bytearray(_frame(0))
        flipped[at] ^= 0x01
        try:
            taken = frames.take(flipped, KEY, 0, 42)
        except (frames.Forged, frames.TooLarge):
            continue
        assert taken is None   # a length made longer: it waits for bytes that never come (the run's bound)


_POOL: list[Pool] = []


def _pipes(pid, mode: int) -> dict[str, int]:
    """The pipes process ``pid`` holds open for reading (O_RDONLY) or writing (O_WRONLY): link -> fd."""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{name}")
            with open(f"/proc/{pid}/fdinfo/{name}") as fh:
                flags = int(next(line for line in fh if line.startswith("flags:")).split()[1], 8)
        except OSError:
            continue
        if link.startswith("pipe:") and flags & 3 == mode:
            found[link] = int(name)
    return found


def _pipe_to_parent() -> int:
    """In a worker: its result pipe (the pipe it writes that its parent reads)."""
    [fd] = [fd for link, fd in _pipes("self", os.O_WRONLY).items() if link in _pipes(os.getppid(), os.O_RDONLY)]
    return fd


def _tampers(item):
    """In a worker: 'replay' writes again the reply this worker already sent for item 0 (reply 1, after
    its set-up's reply 0); 'flip' writes its own reply with one byte changed; both then return normally."""
    index, what = item
    if what in ("replay", "flip"):
        key = _POOL[0]._key
        head = json.dumps({"i": 0 if what == "replay" else index, "value": "evil"}).encode()
        frame = bytearray(_frame(1 if what == "replay" else 2, head, b"", key, os.getpid()))
        if what == "flip":
            frame[-3] ^= 0x01
        os.write(_pipe_to_parent(), bytes(frame))
    return {"item": what}


@linux
def test_the_pool_refuses_a_replayed_or_flipped_reply_and_goes_on():
    items = [(0, "first"), (1, "replay"), (2, "after"), (3, "flip"), (4, "last")]
    pool = Pool(1, run_limit_s=30)
    _POOL[:] = [pool]
    got = list(pool.map(_tampers, items))
    assert [type(r) for r in got] == [Done, Lost, Done, Lost, Done], got
    assert got[1].kind == got[3].kind == "forged"
    assert [r.header["item"] for r in got if isinstance(r, Done)] == ["first", "after", "last"]


# --------------------------------------------------------------------------- provenance of a trace
def _trace(scenario_id=T1, seed=None, edit=None) -> bytes:
    from crashlab.run.runner import run_scenario

    events = run_scenario(resolve(scenario_id), "crashlab.reference_impl:ReferenceAdapter", seed).events
    if edit:
        events = edit([dict(e) for e in events])
    return b"".join(json.dumps(e, sort_keys=True).encode() + b"\n" for e in events)


@pytest.mark.parametrize("edit, seed, words", [
    (None, 7, "not the seed 7"),
    (lambda ev: ev[:-1] + [dict(ev[0], seq=len(ev) - 1, t=ev[-2]["t"]), dict(ev[-1], seq=len(ev))],
     None, "more than one header or end"),
    (lambda ev: [dict(e, run="r-elsewhere") if e.get("run") else e for e in ev], None, "not this scenario's"),
    (lambda ev: [dict(ev[0], runs=[])] + ev[1:], None, "other runs"),
])
def test_a_trace_of_another_run_is_garbled(edit, seed, words):
    job = Job(id=T1, base=T1, scenario=resolve(T1))
    payload = _trace(edit=edit)
    outcome = judge(job, Done({"seed": 0}, payload), adapter="crashlab.reference_impl:ReferenceAdapter", seed=seed,
                    out_dir=None, keep="none")
    faults = [v.message for v in outcome.result.violations if v.invariant == "ADAPTER-FAULT"]
    assert outcome.result.verdict != "pass"
    assert any("garbled" in m and words in m for m in faults), faults


def test_a_trace_of_this_run_is_taken():
    job = Job(id=T1, base=T1, scenario=resolve(T1))
    outcome = judge(job, Done({"seed": 0}, _trace()), adapter="crashlab.reference_impl:ReferenceAdapter", seed=None,
                    out_dir=None, keep="none")
    assert outcome.result.verdict == "pass", outcome.result.violations


# --------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("swap", ["symlink", "other file", "same size", "removed"])
def test_an_output_changed_after_it_was_written_is_refused_naming_it(tmp_path, swap):
    path = tmp_path / "t.jsonl"
    atomic_write_text(path, "one\n")
    check_written([path])
    decoy = tmp_path / "decoy"
    decoy.write_text("passing trace\n")
    if swap == "symlink":
        path.unlink()
        path.symlink_to(decoy)
    elif swap == "other file":
        os.replace(decoy, path)
    elif swap == "same size":
        with open(path, "r+") as fh:   # the same inode, rewritten in place
            fh.write("two\n")
    else:
        path.unlink()
    with pytest.raises(OutputChanged, match=str(path)):
        check_written([path])


def test_a_file_is_never_written_through_a_symlink_planted_at_its_temporary_name(tmp_path, monkeypatch):
    import tempfile

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    names = iter(["planted"] * 3 + ["fresh"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / ".out.jsonl.planted.tmp").symlink_to(victim)
    atomic_write_text(tmp_path / "out.jsonl", "new\n")
    assert victim.read_text() == "keep me\n" and (tmp_path / "out.jsonl").read_text() == "new\n"
    check_written([tmp_path / "out.jsonl"])


@linux
def test_a_trace_swapped_for_a_symlink_during_the_suite_is_never_reported(tmp_path):
    """The second run's adapter replaces the first run's trace by a symbolic link: crashlab names the
    path and exits 3, and writes no results (before: the results listed the swapped file, exit 1)."""
    out, decoy = tmp_path / "out", tmp_path / "decoy.jsonl"
    decoy.write_text("{}\n")
    env = {**ENV, "SWAP_TO": str(decoy)}
    proc = cli("conformance", "--jobs", "1", "--adapter", f"exec:{PY} {SWAPPER}", "--scenario", T1, "--scenario",
               T2, "--out", str(out), "--json", str(tmp_path / "r.json"), env=env)
    assert proc.returncode == 3, (proc.returncode, proc.stdout[-500:], proc.stderr[-800:])
    assert "replaced by a symbolic link" in proc.stderr and str(out) in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- planted code
@linux
def test_a_pth_file_planted_in_a_site_dir_is_refused_by_the_next_run(tmp_path):
    """A throwaway environment that reaches this one's packages through one .pth accepted on purpose
    (CRASHLAB_ALLOW_SITE_FILE); a .pth planted beside it is refused by the next run, named, exit 3."""
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                               text=True, check=True, timeout=60).stdout.strip())
    ours = next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "orjson").exists())
    dev = site / "dev-packages.pth"
    dev.write_text(f"import site; site.addsitedir({ours!r})\n")
    env = {**ENV, "CRASHLAB_ALLOW_SITE_FILE": str(dev)}

    def crashlab(*args):
        return subprocess.run([str(py), "-m", "crashlab", *args], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp_path)

    before = crashlab("list")
    assert before.returncode == 0, before.stderr
    planted = site / "zz-verdict.pth"
    planted.write_text("import os; os.environ['PLANTED'] = '1'\n")
    after = crashlab("list")
    assert after.returncode == 3, (after.returncode, after.stderr)
    assert str(planted) in after.stderr and "rm -r" in after.stderr and "CRASHLAB_ALLOW_SITE_FILE" in after.stderr
    assert str(dev) not in after.stderr
    hook = site / "sitecustomize.py"
    planted.unlink()
    hook.write_text("")
    assert crashlab("list").returncode == 3
    hook.unlink()
    assert crashlab("list").returncode == 0



def test_the_plugin_refuses_planted_code(pytester, monkeypatch, tmp_path):
    import crashlab.vocab.planted as planted

    site = tmp_path / "site"
    site.mkdir()
    (site / "zz-verdict.pth").write_text("import os\n")
    monkeypatch.setattr(planted, "site_dirs", lambda: [str(site)])
    refused = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                 f"--crashlab-scenario={T1}", "-p", "no:cacheprovider")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*{site / 'zz-verdict.pth'}*"])
    pytester.makepyfile(test_own="def test_own(crashlab):\n    crashlab.check('" + T1 + "')\n")
    failed = pytester.runpytest("-p", "no:cacheprovider")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*zz-verdict.pth*"])


def test_a_site_file_older_than_crashlabs_installation_is_the_environments_own(tmp_path, monkeypatch):
    """A hook that was there before crashlab was installed (a machine's certificate .pth, say) is not
    planted by a run; one that appeared after it is."""
    import crashlab.vocab.planted as planted

    site = tmp_path / "site"
    site.mkdir()
    (site / "machine-certificates.pth").write_text("import os\n")
    monkeypatch.setattr(planted, "installed_at", lambda: time.time() + 60)   # installed after the file
    assert planted.planted([str(site)]) == []
    monkeypatch.setattr(planted, "installed_at", lambda: time.time() - 60)   # installed before it
    assert planted.planted([str(site)]) == [str(site / "machine-certificates.pth")]
