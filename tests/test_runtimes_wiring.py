"""``crashlab integrate --runtime NAME``: the wiring every runtime profile relies on, shown with a
fake runtime (no runtime package needed): one server per invocation, stopped on every way out;
``{runtime}``/``{runtime_id}`` and the environment; the same unit-of-work id for every worker of a
run, another for every run; the runtime's record written per run and shown on the card."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crashlab.vocab.errors import UsageError
from crashlab.integrate.run import integrate
from crashlab.runtimes import RUNTIMES, load
from crashlab.scenario.loader import resolve
from runtime_support import alive_with, no_leftovers

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "integration" / "worker.py"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")

FAKE = '''
import os
from pathlib import Path
from crashlab.vocab.errors import UsageError
from crashlab.runtimes import Runtime


class Fake:
    def __init__(self, work):
        self.work = Path(work)
        if os.environ.get("FAKE_RUNTIME_FAIL"):
            raise UsageError("fake-server did not start: bind: address in use", hint="apt-get install fake-server")
        self.env = {"CRASHLAB_RUNTIME": str(self.work / "state"), "FAKE_RUNTIME_TOKEN": "t-1"}
        self.writable = (str(self.work),)     # its workers write here (the recorder's seen.jsonl), as DBOS's do
        (self.work / "events").open("a").write("started\\n")

    def record(self, run):
        return [{"unit": run, "attempts": 2}]

    def summary(self, record):
        return f"fake record: unit {record[0]['unit']} attempted {record[0]['attempts']} times"

    def stop(self):
        (self.work / "events").open("a").write("stopped\\n")


RUNTIME = Runtime(name="fake", title="Fake runtime", extra="fake", tested_version="1.2.3",
                  retry_owner_settings=("fake.retries", "fake.redelivery"), start=Fake)
'''

RECORDER = '''
import json, os, sys
# into the runtime's folder: the one a worker may write beside its store and TMPDIR (the runtime's writable)
with open(os.path.join(os.path.dirname(os.environ["CRASHLAB_RUNTIME"]), "seen.jsonl"), "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1:], "id": os.environ.get("CRASHLAB_RUNTIME_ID"),
                         "runtime": os.environ.get("CRASHLAB_RUNTIME"), "token": os.environ.get("FAKE_RUNTIME_TOKEN"),
                         "run": os.environ.get("CRASHLAB_RUN"), "worker": os.environ.get("CRASHLAB_WORKER")}) + "\\n")
os.execv(sys.executable, [sys.executable, %r, sys.argv[1], sys.argv[2]])
''' % str(WORKER)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    (tmp_path / "fake_runtime.py").write_text(FAKE)
    (tmp_path / "ghost_runtime.py").write_text("import crashlab_absent_package_xyz\n")
    (tmp_path / "recorder.py").write_text(RECORDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(RUNTIMES, "fake", "fake_runtime")
    monkeypatch.setitem(RUNTIMES, "ghost", "ghost_runtime")
    yield tmp_path
    no_leftovers(str(tmp_path))


def worker_cmd(tmp: Path) -> str:
    return f"{sys.executable} {tmp / 'recorder.py'} {{url}} {{db}} {{runtime}} {{runtime_id}}"


def seen(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "seen.jsonl").read_text().splitlines()]


def test_every_worker_gets_the_server_env_and_one_unit_id_per_run(fake):
    rt = load("fake")
    server = rt.start(fake)
    try:
        kill = integrate(resolve("t2-commit-before-record"), worker=worker_cmd(fake), out=fake / "o",
                         runtime=rt, server=server)
        two = integrate(resolve("matrix-conflict-in-flight-second-run"), worker=worker_cmd(fake), out=fake / "o",
                        runtime=rt, server=server)
    finally:
        server.stop()
    assert kill.card.verdict == "pass" and two.card.verdict == "pass"
    # the repro line re-runs it under the runtime: without --runtime the worker has no CRASHLAB_RUNTIME
    import shlex

    from crashlab.cli.args import parser
    args = parser().parse_args(shlex.split(kill.result.repro)[1:])
    assert args.command == "integrate" and args.runtime == "fake" and args.worker == worker_cmd(fake)
    rows = seen(fake)
    t2 = [r for r in rows if r["id"].startswith("t2-commit-before-record.run-82.")]
    assert len(t2) == 2 and len({r["id"] for r in t2}) == 1, "a restart must resume the same unit of work"
    assert {r["worker"] for r in t2} == {"run-82/w1", "run-82/w2"}
    pair = [r for r in rows if r["id"].startswith("matrix-conflict-in-flight-second-run.")]
    assert {r["run"] for r in pair} == {"run-82", "run-82b"} and len({r["id"] for r in pair}) == 2
    for r in rows:      # {runtime} and {runtime_id} expand to the environment's values
        assert r["argv"][2:] == [str(fake / "state"), r["id"]] and r["runtime"] == str(fake / "state")
        assert r["token"] == "t-1"
    # the record: written per run, summarized on the card beside the sandbox's count of commits
    record = json.loads((fake / "o" / "t2-commit-before-record" / "runtime-record.run-82.json").read_text())
    assert record["unit"] == t2[0]["id"] and record["version"] == "1.2.3" and record["record"][0]["attempts"] == 2
    text = kill.card.text()
    assert "runtime: Fake runtime 1.2.3; retry-owner settings: fake.retries, fake.redelivery" in text
    assert f"runtime record run-82: fake record: unit {t2[0]['id']} attempted 2 times; the sandbox counted 1 " \
           "commit(s)" in text
    assert kill.card.to_json()["runtime"]["runs"][0]["commits"] == 1


def test_without_runtime_the_runtime_placeholders_are_refused(fake):
    with pytest.raises(UsageError, match=r"unknown placeholder \{runtime\}.*only with --runtime"):
        integrate(resolve("matrix-throttling"), worker=worker_cmd(fake), out=fake / "o")


def test_cli_starts_one_server_and_stops_it_even_when_a_scenario_errs(fake, capsys):
    from crashlab.cli import main

    out = fake / "o"
    assert main(["integrate", "matrix-throttling", "t2-commit-before-record", "--runtime", "fake",
                 "--worker", worker_cmd(fake), "--out", str(out), "--json", str(fake / "cards.json")]) == 0
    assert "runtime record run-82: fake record" in capsys.readouterr().out
    events = (out / "runtime-fake" / "events").read_text().split()
    assert events == ["started", "stopped"]               # one server for two scenarios
    cards = json.loads((fake / "cards.json").read_text())["integration"]
    assert all(c["runtime"]["name"] == "fake" for c in cards)
    # a scenario that errs (a worker command that cannot start) still stops the server
    assert main(["integrate", "matrix-throttling", "--runtime", "fake", "--worker", "./no-such-worker {url}",
                 "--out", str(out)]) != 0
    assert (out / "runtime-fake" / "events").read_text().split() == ["started", "stopped"] * 2


def test_cli_names_what_is_wrong_with_the_runtime(fake, capsys, monkeypatch):
    from crashlab.cli import main

    assert main(["integrate", "matrix-throttling", "--runtime", "nope", "--worker", worker_cmd(fake)]) != 0
    err = capsys.readouterr().err
    assert "unknown runtime 'nope'" in err and "celery" in err and "dbos" in err and "Traceback" not in err
    assert main(["integrate", "matrix-throttling", "--runtime", "ghost", "--worker", worker_cmd(fake)]) != 0
    err = capsys.readouterr().err
    assert "needs the package 'crashlab_absent_package_xyz'" in err and "pip install 'crashlab[ghost]'" in err
    monkeypatch.setenv("FAKE_RUNTIME_FAIL", "1")
    assert main(["integrate", "matrix-throttling", "--runtime", "fake", "--worker", worker_cmd(fake),
                 "--out", str(fake / "o")]) != 0
    err = capsys.readouterr().err
    assert "fake-server did not start: bind: address in use" in err and "apt-get install fake-server" in err
    assert "Traceback" not in err
    monkeypatch.delenv("FAKE_RUNTIME_FAIL")
    (fake / "a-file").write_text("")
    assert main(["integrate", "matrix-throttling", "--runtime", "fake", "--worker", worker_cmd(fake),
                 "--out", str(fake / "a-file" / "o")]) == 3
    err = capsys.readouterr().err
    assert "a-file/o: cannot create the folder" in err and "Traceback" not in err


def test_sigterm_stops_the_server_and_every_worker(fake):
    slow = fake / "slow.py"
    slow.write_text("import time\nwhile True: time.sleep(1)\n")
    launcher = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(fake)!r})
        from crashlab.runtimes import RUNTIMES
        RUNTIMES["fake"] = "fake_runtime"
        from crashlab.cli import entry
        sys.argv = ["crashlab"] + sys.argv[1:]
        entry()
    """)
    proc = subprocess.Popen([sys.executable, "-c", launcher, "integrate", "matrix-throttling", "--runtime", "fake",
                             "--worker", f"{sys.executable} {slow} {{runtime_id}}", "--out", str(fake / "o")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        unit = "matrix-throttling.run-"          # only the worker's expanded command line holds its unit id
        while not alive_with(unit) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(unit), "the worker never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert (fake / "o" / "runtime-fake" / "events").read_text().split() == ["started", "stopped"]
    assert not alive_with("matrix-throttling.run-")


def test_every_runtime_profile_names_an_extra_never_a_core_dependency():
    text = (ROOT / "pyproject.toml").read_text()
    core = text.split("[project.optional-dependencies]")[0]
    for name in ("dbos", "celery", "pydantic-ai", "pydantic-ai-temporal", "openai-agents", "openai-agents-temporal"):
        assert f'\n{name} = ["' in text, f"the extra {name!r} is missing from pyproject.toml"
        assert name not in core.split("dependencies")[-1], f"{name} must not be a core dependency"
