"""Nothing crashlab starts outlives it: a process that keeps re-forking does not survive the cleanup,
an integration worker's escapes are found (process isolation) or die with its namespace, a worker
in namespaces cannot write crashlab's outputs, and pytest (the plugin) leaves no adapter grandchild.

Every test bounds what it starts: the hostile processes end by themselves after a few seconds, and
each test checks by a marker in their command lines that none is left."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate
from crashlab.run import isolate
from crashlab.scenario.loader import resolve
from crashlab.world.trace import read_jsonl
from runtime_support import alive_with

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REAP = HERE / "data" / "reap"
HYDRA = REAP / "hydra.py"
PY = sys.executable
T1 = "t1-crash-before-dispatch"
LIFETIME_S = 6.0      # how long each hostile process lives, at most
TRIES = 5

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreapers and /proc: Linux only")


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REAP), str(HERE), str(ROOT)]), **extra}


def _namespaces() -> bool:
    from support import default_isolation
    return default_isolation().mode == "namespaces"


needs_namespaces = pytest.mark.skipif(not sys.platform.startswith("linux") or not _namespaces(),
                                      reason="bubblewrap cannot make namespaces here (apt-get install bubblewrap)")


def _gone(marker: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive_with(marker)


# --------------------------------------------------------------------------- a re-forking adapter
def _hostile_runs(tmp_path, kind: str, tries: int, at_once: bool) -> list[tuple[subprocess.Popen, str, Path]]:
    """crashlab runs against an adapter that starts a re-forking process rewriting the results' "fail"
    to "pass" (``at_once``: all started together; otherwise one after the other). Their exit codes
    are checked; returned when they have ended, with each hydra's marker and results file."""
    runs, codes, errors = [], [], []
    for n in range(tries):
        out = tmp_path / f"try{n}"
        out.mkdir()
        marker, target = f"reap-marker-{tmp_path.name}-{kind}-{n}", out / "results.json"
        args = f"{marker} {target} {LIFETIME_S}"
        adapter = f"exec:{PY} {HYDRA} --wire {args}" if kind == "exec" else "reap_adapters:Hydra"
        proc = subprocess.Popen([PY, "-m", "crashlab", "conformance", "--adapter", adapter, "--scenario", T1,
                                 "--out", str(out), "--json", str(target)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=_env(CRASHLAB_ISOLATION="process", CRASHLAB_TEST_REAP=args))
        runs.append((proc, marker, target))
        if not at_once:
            _, err = proc.communicate(timeout=120)
            codes.append(proc.returncode)
            errors.append(err.decode("utf-8", "replace"))
    try:
        for proc, _, _ in runs[len(codes):]:
            _, err = proc.communicate(timeout=120)
            codes.append(proc.returncode)
            errors.append(err.decode("utf-8", "replace"))
    finally:
        for proc, _, _ in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == [1] * tries, errors
    return runs


def _still_failures(runs, started: float) -> None:
    time.sleep(max(0.0, LIFETIME_S + 1.0 - (time.monotonic() - started)))   # past when it would have rewritten
    verdicts = [json.loads(target.read_text())["verdict"] for _, _, target in runs]
    assert verdicts == ["fail"] * len(runs), verdicts
    assert not [m for _, m, _ in runs if alive_with(m)], "a generation of the re-forking process is still running"


@pytest.mark.parametrize("kind", ["exec", "in-process"])
def test_a_reforking_adapter_cannot_rewrite_the_results_after_crashlab_exits(tmp_path, kind):
    """Five crashlab runs at once, each against an adapter that starts a process re-forking every few
    milliseconds (a session of its own each time) and rewriting the results' "fail" to "pass": in
    every try the results stay a failure and no generation of it is left."""
    started = time.monotonic()
    _still_failures(_hostile_runs(tmp_path, kind, TRIES, at_once=True), started)


def test_a_lone_reforking_adapter_is_caught_although_its_generations_outlive_no_listing(tmp_path):
    """The same adapter, one run at a time: alone on the machine its generations live shorter than
    reading a tree that holds forty sleepers and a thousand zombies takes, so a cleanup that reads
    the whole tree before stopping anything never catches it (it flipped 5 runs of 6); one that
    stops each process the moment it is named, newest first, does."""
    started = time.monotonic()
    _still_failures(_hostile_runs(tmp_path, "exec", 3, at_once=False), started)


def test_the_pytest_plugin_leaves_no_adapter_grandchild_behind(tmp_path):
    """A worker that ends itself (os._exit) after its adapter detached a grandchild: pytest is the
    grandchild's subreaper, and crashlab kills it; it never writes after the session."""
    marker = tmp_path / f"orphan-{tmp_path.name}"
    (tmp_path / "test_orphan.py").write_text(textwrap.dedent(f"""
        def test_orphan(crashlab):
            result = crashlab.run({T1!r}, adapter="reap_adapters:Orphan")
            assert result.verdict == "fail"
        """))
    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_orphan.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=_env(CRASHLAB_TEST_REAP=f"{marker} - 3"))
    assert done.returncode == 0, done.stdout + done.stderr
    pid = int(marker.read_text())
    assert _gone(f"orphan-{tmp_path.name}", 0.5)
    try:
        os.kill(pid, 0)
        running = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        running = False
    assert not running, f"the adapter's grandchild {pid} outlived pytest"
    time.sleep(3.5)     # when it would have written
    assert not Path(f"{marker}.late").exists()


# --------------------------------------------------------------------------- integration workers
ESCAPER = """
import os, sqlite3, sys, time
url, db, marker = sys.argv[1:4]
conn = sqlite3.connect(db)
conn.execute("CREATE TABLE mine (x)")
conn.commit()
conn.close()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:    # an empty environment: no CRASHLAB_SESSION to be found by
        os.execve(sys.executable, [sys.executable, "-c", LATE, db, marker], {{}})
    os._exit(0)
time.sleep(0.5)
sys.exit(0)
"""
LATE = ("import sqlite3, sys, time; time.sleep(2); db = sqlite3.connect(sys.argv[1]); "
        "db.execute('CREATE TABLE late (x)'); db.commit()")


def _escaper(out: Path, marker: str) -> str:
    path = out / "escaper.py"
    path.write_text(f"LATE = {LATE!r}\n" + ESCAPER.format())
    return f"{PY} {path} {{url}} {{db}} {marker}"


def _store_digest(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("stores/**/*")) if p.is_file()}


@pytest.mark.parametrize("mode", ["process", pytest.param("namespaces", marks=needs_namespaces)])
def test_an_integration_worker_that_clears_its_environment_and_escapes_cannot_touch_the_store(tmp_path, mode,
                                                                                               monkeypatch):
    monkeypatch.setenv(isolate.ENV, mode)
    marker = f"escapee-{tmp_path.name}-{mode}"
    out = tmp_path / "out"
    outcome = integrate(resolve("matrix-throttling"), worker=_escaper(tmp_path, marker), out=out, wall_limit_s=30)
    forked = [e for e in read_jsonl(outcome.trace) if e.get("kind") == "adapter_fault" and e.get("fault") == "forked"]
    if mode == "process":
        assert forked and "outside its process group" in forked[0]["message"], forked
    else:
        assert not forked     # nothing escapes a namespace: the escapee died with it
    assert _gone(marker, 1.0)
    before = _store_digest(out)
    assert before, "the run has no store"
    assert all("/stores/" in f"/{name}" for name in before)
    time.sleep(3)       # when it would have written
    assert _store_digest(out) == before


@needs_namespaces
def test_a_worker_in_namespaces_cannot_write_crashlabs_output_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(isolate.ENV, "namespaces")
    out = tmp_path / "out"
    worker = tmp_path / "writer.py"
    worker.write_text(textwrap.dedent(f"""
        import os, sys, tempfile
        for target in [{str(out / 'planted.txt')!r}, {str(out / 'matrix-throttling.jsonl')!r},
                       os.path.join(os.path.dirname(sys.argv[2]), "mine.txt"),
                       os.path.join(tempfile.gettempdir(), "scratch.txt")]:
            try:
                with open(target, "w") as fh:
                    fh.write("x")
                print("WROTE", target)
            except OSError as exc:
                print("REFUSED", target, exc.strerror)
        """))
    integrate(resolve("matrix-throttling"), worker=f"{PY} {worker} {{url}} {{db}}", out=out, wall_limit_s=30)
    log = "".join(p.read_text() for p in (out / "matrix-throttling").glob("*.log"))
    assert not (out / "planted.txt").exists()
    assert f"REFUSED {out / 'planted.txt'} Read-only file system" in log, log
    assert "WROTE" in log and log.count("WROTE") == 2, log          # its store's folder and its TMPDIR
    assert f"REFUSED {out / 'matrix-throttling.jsonl'}" in log


@needs_namespaces
def test_kill_9_of_crashlab_leaves_no_grandchild_of_a_worker_in_namespaces(tmp_path):
    marker = f"grandchild-{tmp_path.name}"
    worker = tmp_path / "detacher.py"
    worker.write_text(textwrap.dedent(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)", {marker!r}], {{}})
            os._exit(0)
        time.sleep(60)
        """))
    proc = subprocess.Popen([PY, "-m", "crashlab", "integrate", "matrix-throttling", "--worker", f"{PY} {worker}",
                             "--out", str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env(CRASHLAB_ISOLATION="namespaces"))
    try:
        deadline = time.monotonic() + 30
        while not alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(marker), "the worker's grandchild never started"
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert _gone(marker, 5.0), "the worker's grandchild outlived a SIGKILL of crashlab"


@needs_namespaces
def test_a_pause_stops_the_worker_inside_its_namespace_and_a_resume_continues_it(tmp_path, monkeypatch):
    """The worker's process group under namespaces is bubblewrap's; the pause must stop the worker
    itself, inside: while paused, the worker's own process is stopped (state T), and it finishes."""
    import threading

    from crashlab.scenario.loader import from_dict
    from runtime_support import careful

    monkeypatch.setenv(isolate.ENV, "namespaces")
    out = tmp_path / "out"
    sc = from_dict({"id": "pause-inside", "title": "a pause at the reserve", "seed": 1,
                    "clock": {"origin": "10:00", "horizon": "10:30"}, "services": {"reservation": {}},
                    "runs": [{"id": "run-1", "approval": {"mode": "none"},
                              "intent": {"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1",
                                         "technician": "X", "quantity": 1, "principal": "U-1"}}],
                    "pauses": [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "before",
                                "resume_after": "3m", "restart_after": "20m"}]})
    states: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in alive_with(f"--out-marker={out}"):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if not cmd[0].endswith(b"bwrap"):
                    states.add(state)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        outcome = integrate(sc, worker=careful(out), out=out)
    finally:
        done.set()
        watcher.join(5)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert "T" in states, states          # the worker itself was stopped, inside its namespace


def test_the_integration_card_says_which_isolation_its_worker_had(tmp_path, monkeypatch):
    from crashlab.run import isolate

    root = Path(__file__).resolve().parent.parent
    worker = f"{sys.executable} {root / 'examples' / 'integration' / 'worker.py'} {{url}} {{db}}"
    done = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "t1-crash-before-dispatch", "--worker", worker,
                           "--out", str(tmp_path / "out"), "--json", str(tmp_path / "cards.json"),
                           "--isolation", "process"], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 2), done.stderr
    assert "isolation: process (CRASHLAB_ISOLATION=process)" in done.stdout
    header = json.loads((tmp_path / "out" / "t1-crash-before-dispatch.jsonl").read_text().splitlines()[0])
    assert header["integration"]["isolation"] == {"mode": "process", "detail": "CRASHLAB_ISOLATION=process"}
    cards = json.loads((tmp_path / "cards.json").read_text())
    card = cards[0] if isinstance(cards, list) else next(iter(cards.get("cards", cards.values())))
    assert "isolation" in json.dumps(card)
    monkeypatch.setenv(isolate.ENV, "auto")
    if isolate.current().mode == "namespaces":
        again = subprocess.run([sys.executable, "-m", "crashlab", "integrate", "t1-crash-before-dispatch", "--worker",
                                worker, "--out", str(tmp_path / "ns")], capture_output=True, text=True, timeout=300)
        assert "isolation: namespaces (bubblewrap" in again.stdout, again.stdout[-800:]
