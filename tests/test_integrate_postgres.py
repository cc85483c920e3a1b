"""The PostgreSQL store: a throwaway server on 127.0.0.1 (track_commit_timestamp on), the example worker
writing through psql, crashlab reading its views and ordering the writes of one batch by commit time."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate
from crashlab.scenario.loader import resolve

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "integration" / "worker.py"
ENABLE = "needs PostgreSQL 15's server and client: apt-get install postgresql postgresql-client"


def _bin() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    return Path(found).parent if found else None


BIN = _bin()
pytestmark = [pytest.mark.skipif(BIN is None or shutil.which("psql") is None, reason=f"no initdb or psql: {ENABLE}"),
              pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:     # initdb refuses root: run the server as the postgres user
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if os.geteuid() == 0 and subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
        pytest.skip(f"running as root and there is no postgres user: {ENABLE}")
    # not under pytest's own temporary folder: the server user must be able to reach it
    home = Path(tempfile.mkdtemp(prefix="crashlab-pg-"))
    os.chmod(home, 0o777)
    data = home / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(_as_server_user([str(BIN / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres"]),
                   check=True, capture_output=True, timeout=120)
    subprocess.run(_as_server_user([str(BIN / "pg_ctl"), "-D", str(data), "-l", str(home / "log"), "-w", "-o",
                                    f"-c listen_addresses=127.0.0.1 -p {port} -k {home} -c track_commit_timestamp=on "
                                    "-c fsync=off", "start"]),
                   check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/{{db}}"
    finally:
        subprocess.run(_as_server_user([str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def test_the_careful_worker_passes_on_postgresql_and_writes_are_ordered_by_commit_time(server, tmp_path):
    from crashlab.world.trace import read_jsonl

    outcome = integrate(resolve("t2-commit-before-record"), worker=f"{sys.executable} {WORKER} {{url}} {{db}}",
                        out=tmp_path, store=server)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    order = [e.get("state") or e.get("knowledge") for e in events if e["kind"] in ("checkpoint", "ledger")]
    # the worker writes VALIDATED, PROPOSED, APPROVED, then the PROPOSED entry, then EFFECT_PREPARED: all in
    # one batch (no request in between), ordered by their commit timestamps rather than view by view
    assert order[:5] == ["VALIDATED", "PROPOSED", "APPROVED", "PROPOSED", "EFFECT_PREPARED"]


def test_a_planted_mistake_fails_on_postgresql_too(server, tmp_path):
    outcome = integrate(resolve("matrix-ambiguous-effect"),
                        worker=f"{sys.executable} {WORKER} {{url}} {{db}} --mistake=sent_unknown_after",
                        out=tmp_path, store=server)
    assert {l.invariant for l in outcome.card.lines if l.status == "fail"} == {"PREP-02"}, outcome.card.text()
