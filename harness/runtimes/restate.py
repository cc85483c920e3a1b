"""Restate under ``crashlab integrate --runtime restate``.

crashlab starts ``restate-server`` from the npm package ``@restatedev/restate-server-linux-x64``,
installed into a project-local folder (never globally, never downloaded at run time):

    npm install --prefix .runtimes/npm @restatedev/restate-server-linux-x64@1.7.12

It looks for the binary at ``$CRASHLAB_RESTATE_SERVER``, then under ``.runtimes/npm`` in the
current folder, then on PATH. The server listens on free 127.0.0.1 ports (ingress, admin, node),
keeps its data in crashlab's work folder, sends no telemetry (``disable-telemetry``,
``DO_NOT_TRACK``; the outbound proxy points at a closed loopback port so its release check cannot
leave the machine), and its default invocation retry policy is scaled down for scaled time.

Every worker gets ``{runtime}`` = the ingress URL (``CRASHLAB_RUNTIME``) and the admin URL
(``CRASHLAB_RESTATE_ADMIN``); it serves its handlers, registers them as a deployment and submits
the workflow keyed ``{runtime_id}``. The runtime's own record of a run is its introspection
(the admin API's SQL over ``sys_invocation`` and ``sys_journal``): the invocation's status and
retry count, and one row per journal entry (each ``ctx.run`` and whether it completed).
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import restate                          # noqa: F401  (the extra must be installed to use this profile)

from ..vocab.errors import UsageError
from . import Runtime
from .local_server import LocalProcess, free_ports

VERSION = "restate-sdk 1.2.0, restate-server 1.7.12 (npm @restatedev/restate-server-linux-x64)"
NPM_PACKAGE = "@restatedev/restate-server-linux-x64@1.7.12"
LOCAL_PREFIX = Path(".runtimes/npm")
INSTALL = f"npm install --prefix {LOCAL_PREFIX} {NPM_PACKAGE}"
#: the server's default invocation retry policy, scaled for crashlab's scaled time
RETRY_POLICY = {"initial-interval": "50ms", "exponentiation-factor": 2.0, "max-interval": "500ms",
                "max-attempts": 200, "on-max-attempts": "pause"}
_BIN = Path("node_modules/@restatedev/restate-server-linux-x64/bin/restate-server")


def server_binary() -> str:
    for candidate in (os.environ.get("CRASHLAB_RESTATE_SERVER"), str(LOCAL_PREFIX / _BIN),
                      str(Path(__file__).resolve().parents[2] / LOCAL_PREFIX / _BIN)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(Path(candidate).resolve())
    found = shutil.which("restate-server")
    if found:
        return found
    raise UsageError("the Restate runtime needs restate-server from npm, installed into a project-local folder",
                     hint=f"{INSTALL}   (or set CRASHLAB_RESTATE_SERVER to the binary)")


def _toml(value) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def config(node: int, admin: int, ingress: int) -> str:
    lines = ["disable-telemetry = true", "default-num-partitions = 1", 'log-filter = "warn"',
             f'bind-address = "127.0.0.1:{node}"', f'advertised-address = "http://127.0.0.1:{node}/"',
             "", "[default-retry-policy]"]
    lines += [f"{k} = {_toml(v)}" for k, v in RETRY_POLICY.items()]
    lines += ["", "[admin]", f'bind-address = "127.0.0.1:{admin}"', "", "[ingress]",
              f'bind-address = "127.0.0.1:{ingress}"', ""]
    return "\n".join(lines)


def _http(method: str, url: str, body: dict | None = None, timeout: float = 5.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json", "accept": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))     # loopback: never a proxy
    with opener.open(req, timeout=timeout) as resp:
        text = resp.read()
    return json.loads(text) if text else {}


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class RestateServer:
    """``restate-server`` on free loopback ports, its data in ``work``."""

    def __init__(self, work: Path) -> None:
        node, admin, ingress = free_ports(3)
        work = Path(work).resolve()
        binary = server_binary()
        self.admin = f"http://127.0.0.1:{admin}"
        self.ingress = f"http://127.0.0.1:{ingress}"
        self.process = LocalProcess("the Restate server", [
            binary, "--config-file", "config.toml", "--base-dir", str(work / "data"), "--listen-mode", "tcp",
            "--no-logo", "--node-name", "crashlab"], work,
            env={"DO_NOT_TRACK": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                 "NO_PROXY": "127.0.0.1,localhost"},
            files={"config.toml": config(node, admin, ingress)})
        self.start_s = self.process.wait_ready(self._ready)
        self.env = {"CRASHLAB_RUNTIME": self.ingress, "CRASHLAB_RESTATE_ADMIN": self.admin}

    def _ready(self) -> bool:
        _http("GET", f"{self.admin}/health", timeout=1)
        _http("GET", f"{self.ingress}/restate/health", timeout=1)
        return True

    def query(self, sql: str) -> list[dict]:
        return list(_http("POST", f"{self.admin}/query", {"query": sql}, timeout=10).get("rows", []))

    def record(self, run: str) -> list[dict]:
        rows = []
        for inv in self.query("SELECT id, target, status, retry_count, last_failure, last_failure_error_code, "
                              "pinned_deployment_id, journal_size, completion_result, completion_failure "
                              f"FROM sys_invocation WHERE target_service_key = {_sql_str(run)} ORDER BY created_at"):
            rows.append({"row": "invocation", **inv})
            for entry in self.query("SELECT index, entry_type, name, completed, raw IS NOT NULL AS has_raw "
                                    f"FROM sys_journal WHERE id = {_sql_str(inv['id'])} ORDER BY index"):
                rows.append({"row": "journal", "invocation": inv["id"], **entry})
        return rows

    @staticmethod
    def summary(rows: list[dict]) -> str:
        if rows and "error" in rows[0]:
            return f"Restate introspection not read: {rows[0]['error']}"
        invs = [r for r in rows if r.get("row") == "invocation"]
        if not invs:
            return "Restate introspection: no invocation for this run"
        parts = []
        for inv in invs:
            journal = [r for r in rows if r.get("row") == "journal" and r.get("invocation") == inv["id"]]
            notified = {int(r.get("index", -1)) for r in journal if str(r.get("entry_type")) == "Notification: Run"}
            runs = [f"{r.get('name') or '?'}" + ("" if int(r.get("index", -1)) + 1 in notified else " (no result)")
                    for r in journal if str(r.get("entry_type")) == "Command: Run"]
            retries = f", {inv['retry_count']} retries of the invocation" if inv.get("retry_count") else ""
            parts.append(f"invocation {inv.get('status')}{retries}; journal: ctx.run {', '.join(runs) or 'none'}, "
                         "each once")
        return "Restate introspection: " + "; ".join(parts) + " (a ctx.run cut by a crash is not in the journal)"

    def stop(self) -> None:
        self.process.stop()


RUNTIME = Runtime(
    name="restate",
    title="Restate (Python SDK, restate-server)",
    extra="restate",
    tested_version=VERSION,
    retry_owner_settings=(
        "invocation retry policy (server default-retry-policy, or the service's invocation_retry_policy: "
        "initial_interval, max_interval, max_attempts, on_max_attempts)",
        "ctx.run RunOptions (max_attempts, initial_retry_interval, max_retry_interval, max_retry_duration)",
        "inactivity_timeout / abort_timeout (when a silent handler is retried)",
    ),
    start=RestateServer,
)
