"""Namespaces for the processes of exec: and wire: adapters (crashlab.run.isolate): an adapter
that never speaks the protocol and tries to get out of its process instead (tests/escape_attempts.py)
gets nothing, and the results say which isolation the run had. Each test runs crashlab with
``--isolation namespaces`` and is skipped where bubblewrap cannot make namespaces."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import crashlab.run.conformance  # noqa: F401  (loaded once: pytester restores sys.modules between runs)
from crashlab.run import isolate
from support import default_isolation

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
ESCAPE = HERE / "escape_attempts.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
ENV.pop(isolate.ENV, None)
T1 = "t1-crash-before-dispatch"
PTH = Path(sysconfig.get_paths()["purelib"]) / "zz_crashlab_escape.pth"


def _namespaces() -> isolate.Isolation:
    return default_isolation()


needs_namespaces = pytest.mark.skipif(
    _namespaces().mode != "namespaces",
    reason=f"no namespaces here ({_namespaces().detail}); {isolate.INSTALL_HINT}")


def cli(*args, env=None, timeout=180):
    return subprocess.run([PY, "-m", "crashlab", *args], capture_output=True, text=True, timeout=timeout,
                          env={**ENV, **(env or {})}, cwd=ROOT)


def escape(how: str, mode: str, *args: str) -> tuple[str, dict]:
    """The adapter spec and its environment for one attempt, as exec:, over the wire (warm), or as a
    Python adapter named module:attribute (which --isolation namespaces runs as wire: does)."""
    if how == "exec":
        return " ".join(["exec:" + PY, str(ESCAPE), mode, *args]), {}
    return ("wire:" if how == "wire" else "") + "escape_attempts:Escape", {"CRASHLAB_ESCAPE": json.dumps([mode, *args])}


def said(proc, mode: str) -> str:
    """What the adapter said on standard error (``crashlab run -v`` shows it)."""
    found = re.findall(rf"escape {mode}: (.*)", proc.stderr)
    assert found, proc.stderr
    return found[-1]


def running(marker: str) -> list[int]:
    """The pids of every process whose command line names ``marker``."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    with open(f"/proc/{pid}/stat") as st:
                        if st.read().rsplit(")", 1)[1].split()[0] != "Z":
                            out.append(int(pid))
        except OSError:
            continue
    return out


@needs_namespaces
@pytest.mark.parametrize("how", ["exec", "wire", "python"])
def test_a_reply_forged_into_crashlabs_pipes_never_reaches_it(tmp_path, how):
    # Under --isolation process the same adapter opens pipes of crashlab's through /proc (its
    # forged reply is then refused, replies being signed); in namespaces it finds none.
    spec, env = escape(how, "forge", T1)
    proc = cli("run", T1, "--adapter", spec, "--out", str(tmp_path), "-v", "--isolation", "namespaces", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{T1}: FAIL" in proc.stdout
    assert said(proc, "forge") == "wrote the forged reply into 0 pipe(s) of crashlab's processes"


@needs_namespaces
@pytest.mark.parametrize("how", ["exec", "wire", "python"])
def test_the_virtualenv_and_the_output_folders_are_read_only_to_an_adapter(tmp_path, how):
    out, elsewhere = tmp_path / "out", tmp_path / "results"
    out.mkdir(), elsewhere.mkdir()
    planted = [out / "planted", elsewhere / "planted"]
    spec, env = escape(how, "write", *map(str, planted))
    try:
        proc = cli("conformance", "--adapter", spec, "--scenario", T1, "--out", str(out), "--json",
                   str(elsewhere / "r.json"), "-j", "1", "--isolation", "namespaces", env=env)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert not PTH.exists() and not any(p.exists() for p in planted)
        run = cli("run", T1, "--adapter", spec, "--out", str(out), "-v", "--isolation", "namespaces", env=env)
        words = said(run, "write").split("; ")
        assert words[0] == f"refused {PTH}: Read-only file system"
        assert words[1:3] == [f"refused {p}: Read-only file system" for p in planted]
        scratch = re.fullmatch(r"wrote (/\S*crashlab-adapter-\S+)/scratch", words[3])  # its own TMPDIR
        assert scratch, words
        assert not Path(scratch[1]).exists()   # removed afterwards
        assert not PTH.exists() and not any(p.exists() for p in planted)
    finally:
        PTH.unlink(missing_ok=True)


@needs_namespaces
@pytest.mark.parametrize("how", ["exec", "wire"])
def test_an_adapter_cannot_reach_a_port_on_127_0_0_1(tmp_path, how):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        spec, env = escape(how, "connect", str(server.getsockname()[1]))
        proc = cli("run", T1, "--adapter", spec, "--out", str(tmp_path), "-v", "--isolation", "namespaces",
                   env=env)
        assert said(proc, "connect").startswith("could not connect: [Errno 111]"), proc.stderr
        with pytest.raises(BlockingIOError):
            server.accept()   # nothing ever knocked
    assert proc.returncode == 1


@needs_namespaces
@pytest.mark.parametrize("how", ["exec", "wire"])
def test_a_setsid_grandchild_is_gone_with_crashlab_and_never_writes(tmp_path, how):
    marker = tmp_path / f"late-{how}"
    spec, env = escape(how, "linger", str(marker))
    proc = cli("run", T1, "--adapter", spec, "--out", str(tmp_path / "o"), "-v", "--isolation", "namespaces",
               env=env)
    assert proc.returncode == 1 and said(proc, "linger").startswith("grandchild pid ")
    assert running(str(marker)) == []   # no process of the adapter's is left, by pid
    time.sleep(3.5)                     # when it would have written
    assert not marker.exists()


@needs_namespaces
def test_the_reference_adapter_passes_over_exec_in_namespaces_and_the_results_say_so(tmp_path):
    spec = f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"
    proc = cli("conformance", "--adapter", spec, "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json"),
               "-j", "2", "--isolation", "namespaces", timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["isolation"]["mode"] == "namespaces" and data["isolation"]["detail"].startswith("bubblewrap")
    assert f"isolation: namespaces ({data['isolation']['detail']})" in proc.stdout.splitlines()[:3]
    assert "20/20" in proc.stdout


@needs_namespaces
def test_a_python_adapter_runs_in_namespaces_by_default_and_crashlabs_own_in_workers(tmp_path):
    """module:attribute runs over the wire in namespaces under auto and namespaces alike (its results say
    so, under the name it was given, with the verdict it has in worker processes); crashlab's own adapter
    runs in crashlab's worker processes under auto, and its results say so; --in-process cannot have
    namespaces."""
    (tmp_path / "mine.py").write_text("from crashlab.reference_impl import ReferenceAdapter as Adapter\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), ENV["PYTHONPATH"]])}
    found = {}
    for mode, spec in (("namespaces", "mine:Adapter"), ("auto", "mine:Adapter"), ("process", "mine:Adapter"),
                       ("own", "crashlab.reference_impl:ReferenceAdapter")):
        proc = cli("conformance", "--adapter", spec, "--tag", "T2", "--out", str(tmp_path / mode), "--json",
                   str(tmp_path / f"{mode}.json"), *(("--isolation", mode) if mode != "own" else ()), env=env)
        found[mode] = json.loads((tmp_path / f"{mode}.json").read_text())
        assert found[mode]["adapter"] == spec, proc.stderr
    assert found["namespaces"]["isolation"]["mode"] == found["auto"]["isolation"]["mode"] == "namespaces"
    assert found["process"]["isolation"]["mode"] == "process"
    assert found["own"]["isolation"] == {"mode": "process", "detail": isolate.OWN_ADAPTER}
    for mode in ("auto", "process", "own"):
        assert found["namespaces"]["score"] == found[mode]["score"]
        assert [s["verdict"] for s in found["namespaces"]["scenarios"]] == [s["verdict"] for s in found[mode]["scenarios"]]
    refused = cli("run", T1, "--in-process", "--isolation", "namespaces", "--out", str(tmp_path / "x"))
    assert refused.returncode == 3 and "--in-process runs the adapter inside crashlab's own process" in refused.stderr


SWAPS_IN_REFERENCE = """
import crashlab.run.drivers as drivers
from crashlab.reference_impl import ReferenceAdapter

_init = drivers.InProcessChannel.__init__


def _swapped(self, factory, *args, **kwargs):   # whatever adapter crashlab's worker drives, it drives the reference
    _init(self, ReferenceAdapter, *args, **kwargs)


drivers.InProcessChannel.__init__ = _swapped


class Adapter:
    async def run(self, ports):   # does nothing: never prepares, never sends, never finishes
        return None
"""


@needs_namespaces
def test_a_python_adapter_that_rewrites_crashlab_in_its_process_forges_no_pass_by_default(tmp_path):
    """Imported into crashlab's worker process (--isolation process), an adapter can replace the code that
    drives it and write a passing trace it never earned; under the default it runs in namespaces, a
    process of its own whose rewrites reach nothing of crashlab's, and fails as it deserves."""
    (tmp_path / "swaps_in_reference.py").write_text(SWAPS_IN_REFERENCE)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), ENV["PYTHONPATH"]])}
    args = ("run", T1, "--adapter", "swaps_in_reference:Adapter", "--out", str(tmp_path / "o"))
    forged = cli(*args, "--isolation", "process", env=env)
    assert forged.returncode == 0 and f"{T1}: PASS" in forged.stdout, forged.stdout + forged.stderr
    default = cli(*args, env=env)
    assert default.returncode == 1 and f"{T1}: FAIL" in default.stdout, default.stdout + default.stderr


def test_process_isolation_and_python_adapters_are_named_as_such(tmp_path):
    proc = cli("conformance", "--scenario", T1, "--out", str(tmp_path), "--json", str(tmp_path / "r.json"),
               "-j", "1", "--isolation", "process")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["isolation"]["mode"] == "process", proc.stderr
    assert "isolation: process only (" in proc.stdout
    spec = f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"
    proc = cli("conformance", "--adapter", spec, "--scenario", T1, "--out", str(tmp_path), "--json",
               str(tmp_path / "p.json"), "-j", "1", "--isolation", "process")
    assert json.loads((tmp_path / "p.json").read_text())["isolation"] == {
        "mode": "process", "detail": "CRASHLAB_ISOLATION=process"}, proc.stderr


@pytest.mark.parametrize("command", [
    ["conformance", "--scenario", T1, "--out", "{tmp}"], ["run", T1, "--out", "{tmp}"],
    ["sweep", "--scenario", T1, "--out", "{tmp}"], ["replay", "{tmp}/t.jsonl"],
    ["compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--adapter",
     "crashlab.reference_impl:ReferenceAdapter", "--scenario", T1],
    ["workshop", "check", "t1"]], ids=lambda c: c[0])
def test_namespaces_without_bubblewrap_is_a_usage_error_naming_it(tmp_path, command):
    proc = cli(*[part.replace("{tmp}", str(tmp_path)) for part in command], "--isolation", "namespaces",
               env={"PATH": str(tmp_path)})   # no bwrap on it
    assert proc.returncode == 3, proc.stderr
    assert "bubblewrap" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())   # nothing ran, nothing was written


def test_auto_without_namespaces_says_so_once_on_stderr(tmp_path, monkeypatch, capsys):
    from crashlab.cli import main

    monkeypatch.delenv(isolate.ENV, raising=False)
    monkeypatch.setattr(isolate, "_probe", lambda: (False, "bwrap not found; " + isolate.INSTALL_HINT))
    spec = f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"
    code = main(["conformance", "--adapter", spec, "--scenario", T1, "--scenario", "t2-commit-before-record",
                 "--out", str(tmp_path), "--json", str(tmp_path / "r.json"), "-j", "1"])
    err = capsys.readouterr().err
    assert code == 2, err   # a subset: inconclusive
    assert err.count("crashlab: isolation: process only, no namespaces for adapter processes: bwrap not found") == 1
    assert json.loads((tmp_path / "r.json").read_text())["isolation"]["mode"] == "process"


def test_results_from_before_the_field_still_load_and_render(tmp_path):
    from crashlab.checks.rubric import scorecard_from_json
    from crashlab.report.index import index_page
    from crashlab.report.scorecard import format_scorecard

    proc = cli("conformance", "--scenario", T1, "--out", str(tmp_path), "--json", str(tmp_path / "r.json"),
               "-j", "1", "--isolation", "process")
    data = json.loads((tmp_path / "r.json").read_text())
    assert "isolation" in data, proc.stderr
    card = scorecard_from_json(data)
    assert "isolation: process only (CRASHLAB_ISOLATION=process)" in format_scorecard(card)
    assert 'id="isolation"' in index_page([], card, adapter=card.adapter, notes=[])
    del data["isolation"]
    old = scorecard_from_json(data)
    assert "isolation:" not in format_scorecard(old)
    assert 'id="isolation"' not in index_page([], old, adapter=old.adapter, notes=[])


def test_the_pytest_plugin_names_the_isolation_and_takes_it_from_the_ini(pytester):
    before = os.environ.get(isolate.ENV)
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                f"--crashlab-scenario={T1}", "--crashlab-isolation=process", "--co")
    result.stdout.fnmatch_lines(["crashlab: adapter crashlab.reference_impl:ReferenceAdapter, seed per scenario",
                                 "crashlab: isolation: process only (CRASHLAB_ISOLATION=process)"])
    pytester.makeini("[pytest]\ncrashlab_isolation = process\n")
    spec = f"exec:{PY} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter"
    result = pytester.runpytest(f"--crashlab-adapter={spec}", f"--crashlab-scenario={T1}", "--co")
    result.stdout.fnmatch_lines(["crashlab: isolation: process only (CRASHLAB_ISOLATION=process)"])
    assert os.environ.get(isolate.ENV) == before   # the session's setting is put back


@needs_namespaces
def test_the_pytest_plugin_runs_exec_adapters_in_namespaces(pytester, monkeypatch):
    monkeypatch.delenv(isolate.ENV, raising=False)
    pytester.makeini("[pytest]\ncrashlab_isolation = namespaces\n")
    spec = f"exec:{PY} {ESCAPE} forge {T1}"
    result = pytester.runpytest(f"--crashlab-adapter={spec}", f"--crashlab-scenario={T1}")
    result.stdout.fnmatch_lines(["crashlab: isolation: namespaces (bubblewrap*"])
    result.assert_outcomes(failed=2)   # the scenario, and the rubric over it


@needs_namespaces
def test_the_pytest_plugin_runs_a_python_adapter_in_namespaces_by_default(pytester, monkeypatch):
    """The adapter that swaps the reference in for itself inside crashlab's worker: under the plugin's
    default it is a process of its own in namespaces, and fails; its module is found on the test
    session's own import path (pytest's rootdir), as in worker processes."""
    monkeypatch.delenv(isolate.ENV, raising=False)
    pytester.makepyfile(swaps_in_reference=SWAPS_IN_REFERENCE)
    result = pytester.runpytest("--crashlab-adapter=swaps_in_reference:Adapter", f"--crashlab-scenario={T1}")
    result.stdout.fnmatch_lines(["crashlab: isolation: namespaces (bubblewrap*"])
    result.assert_outcomes(failed=2)   # the scenario, and the rubric over it
    result = pytester.runpytest("--crashlab-adapter=swaps_in_reference:Adapter", f"--crashlab-scenario={T1}",
                                "--crashlab-isolation=process")
    result.assert_outcomes(passed=1, failed=1)   # the forged pass; the rubric over one scenario is inconclusive


@needs_namespaces
def test_a_python_adapter_on_a_folder_a_conftest_adds_to_the_path_runs_in_namespaces(pytester, monkeypatch):
    """An adapter module that only a conftest's sys.path entry makes importable (not the current folder):
    its import check and its run in namespaces find it, as worker processes would."""
    monkeypatch.delenv(isolate.ENV, raising=False)
    pytester.makeconftest("import pathlib, sys\nsys.path.insert(0, str(pathlib.Path(__file__).parent / 'sub'))\n")
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "only_on_the_path.py").write_text(
        "from crashlab.reference_impl import ReferenceAdapter as Adapter\n")
    result = pytester.runpytest("--crashlab-adapter=only_on_the_path:Adapter", f"--crashlab-scenario={T1}")
    result.stdout.fnmatch_lines(["crashlab: isolation: namespaces (bubblewrap*"])
    result.assert_outcomes(passed=1, failed=1)   # the scenario; the rubric over one scenario is inconclusive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_temporary_folders_of_a_crashlab_killed_with_sigkill_are_removed_by_the_next(tmp_path):
    dead = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    orphan = Path(isolate.tempfile.gettempdir()) / f"crashlab-isolation-{dead}-test"
    (orphan / "crashlab-adapter-x").mkdir(parents=True)
    ours = Path(isolate.tempfile.gettempdir()) / f"crashlab-isolation-{os.getpid()}-test"
    ours.mkdir()
    try:
        proc = cli("conformance", "--scenario", T1, "--out", str(tmp_path), "-j", "1", "--isolation", "process")
        assert proc.returncode in (1, 2), proc.stderr
        assert not orphan.exists() and ours.exists()   # a live process's folder is left alone
    finally:
        isolate.shutil.rmtree(orphan, ignore_errors=True)
        ours.rmdir()


@needs_namespaces
def test_under_namespaces_a_python_adapters_module_is_imported_only_in_them(tmp_path):
    """Its import-time code never runs in crashlab's processes (a write it makes then is refused), and a
    module that does not import is still a usage error naming it, for module:attribute and wire: alike."""
    planted = tmp_path / "planted-at-import"
    (tmp_path / "import_writes.py").write_text(
        f"try:\n    open({str(planted)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
        "from crashlab.reference_impl import ReferenceAdapter as Adapter\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), ENV["PYTHONPATH"]])}
    proc = cli("run", T1, "--adapter", "import_writes:Adapter", "--out", str(tmp_path / "o"), "--isolation",
               "namespaces", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not planted.exists()
    for spec in ("nosuch_module:X", "wire:nosuch_module:X"):
        proc = cli("run", T1, "--adapter", spec, "--out", str(tmp_path / "o"), "--isolation", "namespaces")
        assert proc.returncode == 3 and "no module named 'nosuch_module'" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and f"--adapter {spec!r}:" in proc.stderr   # as the user gave it
