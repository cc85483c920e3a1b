"""What the two Restate examples share. The worker process serves its handlers over HTTP/2 on a
loopback port (the same port for every worker process of a run, kept in a file beside the run's
database, so the server's retries of the run's invocation reach whichever worker process is alive),
registers them with crashlab's Restate server as a deployment, submits the workflow keyed
CRASHLAB_RUNTIME_ID (a restarted worker process joins the same invocation), waits for its
result and exits 0."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

import hypercorn.asyncio
import hypercorn.config
import restate

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"} if data is not None else {})
    try:
        with _NO_PROXY.open(req, timeout=timeout) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text) if text else {}
        except ValueError:
            return exc.code, {"message": text.decode("utf-8", "replace")}


def service_name(base: str) -> str:
    """The workflow's service name, one per run: a Restate service name is served by its latest
    deployment, so two runs' worker processes registering the same name would take each other's
    new invocations."""
    return f"{base}_{hashlib.sha256(os.environ['CRASHLAB_RUNTIME_ID'].encode()).hexdigest()[:12]}"


def _port() -> int:
    """The run's handler port: picked by its first worker process, reused by every later one."""
    path = Path(os.environ["CRASHLAB_DB"] + ".restate-port")
    key = os.environ["CRASHLAB_RUNTIME_ID"]
    saved = path.read_text().split() if path.exists() else []
    if len(saved) == 2 and saved[0] == key:          # a file left by an earlier invocation names another id
        return int(saved[1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path.write_text(f"{key} {port}")
    return port


async def _drive(workflow: restate.Workflow, port: int, stop: asyncio.Event) -> None:
    admin, ingress = os.environ["CRASHLAB_RESTATE_ADMIN"], os.environ["CRASHLAB_RUNTIME"]
    key = os.environ["CRASHLAB_RUNTIME_ID"]
    loop = asyncio.get_running_loop()
    uri = f"http://127.0.0.1:{port}"
    for _ in range(200):       # register (again) once the endpoint answers discovery
        status, body = await loop.run_in_executor(None, _http, "POST", f"{admin}/deployments",
                                                  {"uri": uri, "force": True})
        if status < 300:
            break
        await asyncio.sleep(0.05)
    else:
        raise SystemExit(f"registering {uri} failed: {status} {body}")
    name = workflow.name
    status, body = await loop.run_in_executor(None, _http, "POST", f"{ingress}/{name}/{key}/run/send", None)
    if status >= 300 and status != 409:
        raise SystemExit(f"submitting the workflow failed: {status} {body}")
    status, body = await loop.run_in_executor(None, _http, "GET",
                                              f"{ingress}/restate/workflow/{name}/{key}/attach", None, 60.0)
    print(f"workflow {key}: {status} {body}", flush=True)
    stop.set()


async def serve(workflow: restate.Workflow) -> int:
    app = restate.app(services=[workflow])
    config = hypercorn.config.Config()
    port = _port()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    stop = asyncio.Event()
    driver = asyncio.create_task(_drive(workflow, port, stop))
    await hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait)
    await driver
    return 0


def main(workflow: restate.Workflow) -> int:
    return asyncio.run(serve(workflow))
