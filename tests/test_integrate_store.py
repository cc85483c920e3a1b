"""Integration runs judged in the scenario's own units, and stores that never collide or lose a file:
a throttle's retry-after compared on the scenario clock, database names that fit PostgreSQL's 63 bytes
and differ per suite, and an input file never deleted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from crashlab.vocab.errors import UsageError
from crashlab.integrate.run import integrate
from crashlab.integrate.store import open_store, plan_stores
from crashlab.scenario.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "integration" / "worker.py"


def careful(mistake: str = "") -> str:
    return f"{sys.executable} {WORKER} {{url}} {{db}} {mistake}".strip()


@pytest.fixture()
def long_throttle(tmp_path):
    """matrix-throttling with one 180 s retry-after: 1.8 s of real time at scale 100, so a worker that
    waits a fifth of it resends about 36 s of scenario time later, whatever the machine's load."""
    data = yaml.safe_load((ROOT / "scenarios" / "matrix-throttling.yaml").read_text())
    data.update(id="long-throttle", faults=[{"match": {"port": "reservation", "op": "reserve"},
                                             "fault": "throttled", "delay": "180s", "times": 1}])
    path = tmp_path / "long-throttle.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_file(path)


def _failing(outcome) -> set[str]:
    return {line.invariant for line in outcome.card.lines if line.status == "fail"}


def test_a_resend_before_the_retry_after_in_scenario_time_fails_cls02(long_throttle, tmp_path):
    outcome = integrate(long_throttle, worker=careful("--mistake=short_throttle_wait"), out=tmp_path / "o")
    assert "CLS-02" in _failing(outcome), outcome.card.text()
    events = [json.loads(line) for line in outcome.trace.read_text().splitlines()]
    results = [e for e in events if e.get("kind") == "result" and not e.get("ok")]
    assert results[0]["error"]["details"]["retry_after_ms"] == 180_000    # the trace keeps scenario time


def test_a_resend_after_the_retry_after_keeps_cls02(long_throttle, tmp_path):
    outcome = integrate(long_throttle, worker=careful(), out=tmp_path / "o")
    assert "CLS-02" not in _failing(outcome), outcome.card.text()
    assert outcome.card.verdict == "pass", outcome.card.text()


# --------------------------------------------------------------------------- stores that never collide
def test_postgres_names_fit_63_bytes_and_stay_distinct(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/psql")
    long_id = "a-scenario-of-a-team-with-a-rather-long-identifier-that-goes-on"
    names = set()
    for run in ("run-1", "run-2"):
        for template in ("postgresql://u@127.0.0.1:5432/{db}", "postgresql://u@127.0.0.1:5432/teamA_prefix_{db}"):
            st = open_store(template, scenario=long_id, run=run, out=tmp_path / long_id)
            name = st.url.rsplit("/", 1)[1]
            assert len(name.encode()) <= 63 and name not in names
            names.add(name)
    # two suites on one server (two output folders) never share a database
    one = open_store("postgresql://u@127.0.0.1/{db}", scenario="t2", run="run-1", out=tmp_path / "a")
    two = open_store("postgresql://u@127.0.0.1/{db}", scenario="t2", run="run-1", out=tmp_path / "b")
    assert one.url != two.url


@pytest.mark.parametrize("template, said", [
    ("postgresql://u@127.0.0.1/" + "p" * 50 + "_{db}", "leaves"),
    ('postgresql://u@127.0.0.1/a"b_{db}', "letters, digits and _"),
])
def test_postgres_prefixes_that_cannot_work_are_refused(tmp_path, monkeypatch, template, said):
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/psql")
    with pytest.raises(UsageError, match=said):
        open_store(template, scenario="t2", run="run-1", out=tmp_path)


def test_an_input_file_is_never_deleted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    with pytest.raises(UsageError, match="crashlab did not make it"):
        plan_stores("sqlite:notes.txt", [("t2", "run-1", tmp_path / "out" / "t2")])
    st = open_store("sqlite:notes.txt", scenario="t2", run="run-1", out=tmp_path / "out" / "t2")
    with pytest.raises(UsageError):
        st.reset()
    assert notes.read_text() == "my notes"


def test_a_store_crashlab_made_outside_its_folder_is_reset_on_the_next_run(tmp_path):
    path = tmp_path / "stores" / "t2-run-1.db"
    st = open_store(f"sqlite:{tmp_path}/stores/{{scenario}}-{{run}}.db", scenario="t2", run="run-1",
                    out=tmp_path / "out" / "t2")
    st.reset()
    path.write_text("the worker's database")        # the worker made it during its run
    plan_stores(f"sqlite:{tmp_path}/stores/{{scenario}}-{{run}}.db", [("t2", "run-1", tmp_path / "out" / "t2")])
    st.reset()
    assert not path.exists()


def test_runs_that_would_share_one_store_are_refused(tmp_path):
    with pytest.raises(UsageError, match="would share one store"):
        plan_stores(f"sqlite:{tmp_path}/one.db", [("t2", "run-1", tmp_path / "t2"), ("t3", "run-1", tmp_path / "t3")])
    with pytest.raises(UsageError, match="would share one store"):
        plan_stores(f"sqlite:{tmp_path}/{{run}}.db", [("t2", "run-1", tmp_path / "t2"), ("t3", "run-1", tmp_path / "t3")])
    plan_stores(f"sqlite:{tmp_path}/{{scenario}}-{{run}}.db", [("t2", "run-1", tmp_path / "t2"),
                                                                ("t3", "run-1", tmp_path / "t3")])
    plan_stores("sqlite:{db}", [("t2", "run-1", tmp_path / "t2"), ("t3", "run-1", tmp_path / "t3")])


def test_integrate_refuses_an_input_store_before_any_worker_runs(tmp_path, monkeypatch, capsys):
    from crashlab.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep me")
    code = main(["integrate", "matrix-throttling", "--worker", careful(), "--store", "sqlite:notes.txt",
                 "--out", str(tmp_path / "o")])
    assert code == 3 and (tmp_path / "notes.txt").read_text() == "keep me"
    assert "notes.txt" in capsys.readouterr().err
    assert not list((tmp_path / "o").rglob("*.jsonl"))


# --------------------------------------------------------------------------- a cancellation read and ignored
def test_a_worker_that_reads_a_cancellation_and_sends_anyway_fails_cancel01(tmp_path):
    from crashlab.scenario.loader import resolve

    outcome = integrate(resolve("matrix-cancel-after-refused-send"), worker=careful("--mistake=ignores_cancellation"),
                        out=tmp_path / "o")
    assert {"CANCEL-01", "CANCEL-02"} <= _failing(outcome), outcome.card.text()
    careful_outcome = integrate(resolve("matrix-cancel-after-refused-send"), worker=careful(), out=tmp_path / "c")
    assert not {"CANCEL-01", "CANCEL-02"} & _failing(careful_outcome), careful_outcome.card.text()


def test_a_key_without_tenant_and_principal_is_caught_in_the_suite(tmp_path):
    from crashlab.scenario.loader import resolve

    outcome = integrate(resolve("matrix-cross-tenant-key-collision"), worker=careful("--mistake=tenantless_key"),
                        out=tmp_path / "o")
    assert "KEY-02" in _failing(outcome), outcome.card.text()
