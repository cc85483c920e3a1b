"""What the two Restate examples share. Each worker process serves its handlers over HTTP/2 on a
loopback port of its own and makes the run's deployment point at it: the run's first worker process
registers the deployment, every later one updates that deployment's URI (the admin API's
``PATCH /deployments/{id}``), so the server's next attempt of the run's invocation, which stays
pinned to its deployment, reaches the newest worker process, as a load balancer would send it to a
live instance while a stalled one still holds its connection. It then submits the workflow keyed
CRASHLAB_RUNTIME_ID (a restarted worker process joins the same invocation), waits for its result
and exits 0. A workflow that ends with the run waiting (WAITING_HUMAN: an approval was requested) is
over; the worker crashlab starts when the run is woken submits the run's next workflow, keyed
``CRASHLAB_RUNTIME_ID.woken-N`` (``crashlab_env.unit_id``), to the same service."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
from datetime import timedelta
import urllib.error
import urllib.request

import hypercorn.asyncio
import hypercorn.config
import restate
from crashlab_env import need, unit_id

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


#: when the server gives up on a silent attempt (a stalled or stopped worker process) and retries the
#: invocation where the deployment now points: longer than any one step takes here, short against a
#: stall. An attempt it gives up on may still be running its step: the store's lease fences it.
#: Measured with restate-server 1.7.12: the next attempt starts about 5 s after the abort timeout
#: (the server drains the stalled response stream first), so a stall is handed over in about 8 s.
INACTIVITY_TIMEOUT = timedelta(seconds=2)
ABORT_TIMEOUT = timedelta(seconds=1)


def reserve_workflow(base: str) -> restate.Workflow:
    """The run's workflow service, with the timeouts that hand a stalled attempt to a live worker."""
    return restate.Workflow(service_name(base), inactivity_timeout=INACTIVITY_TIMEOUT, abort_timeout=ABORT_TIMEOUT)


def service_name(base: str) -> str:
    """The workflow's service name, one per run: a Restate service name is served by its latest
    deployment, so two runs' worker processes registering the same name would take each other's
    new invocations."""
    return f"{base}_{hashlib.sha256(need('CRASHLAB_RUNTIME_ID').encode()).hexdigest()[:12]}"


def _port() -> int:
    """A free loopback port for this worker process's handlers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _deployment_of(admin: str, service: str) -> str | None:
    """The id of the deployment that serves ``service`` (this run's), if one is registered."""
    status, body = _http("GET", f"{admin}/deployments")
    if status >= 300:
        raise SystemExit(f"listing the deployments failed: {status} {body}")
    for deployment in body.get("deployments", []):
        if any(svc.get("name") == service for svc in deployment.get("services", [])):
            return deployment["id"]
    return None


def _point_the_deployment_here(admin: str, service: str, uri: str) -> tuple[int, dict]:
    """Register the run's deployment at ``uri``, or move the registered one here: an invocation is
    pinned to its deployment, so a new deployment would not receive the run's next attempt."""
    found = _deployment_of(admin, service)
    if found is None:
        return _http("POST", f"{admin}/deployments", {"uri": uri})
    return _http("PATCH", f"{admin}/deployments/{found}", {"uri": uri})


async def _drive(workflow: restate.Workflow, port: int, stop: asyncio.Event) -> None:
    admin, ingress = need("CRASHLAB_RESTATE_ADMIN"), need("CRASHLAB_RUNTIME")
    key = unit_id()            # the run's workflow, or its next one once a woken worker runs it
    loop = asyncio.get_running_loop()
    uri = f"http://127.0.0.1:{port}"
    name = workflow.name
    for _ in range(200):       # once this process's endpoint answers the server's discovery
        status, body = await loop.run_in_executor(None, _point_the_deployment_here, admin, name, uri)
        if status < 300:
            break
        await asyncio.sleep(0.05)
    else:
        raise SystemExit(f"pointing the deployment at {uri} failed: {status} {body}")
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
    config.graceful_timeout = 0.2      # at the end, a stale attempt's open stream does not hold the exit
    stop = asyncio.Event()
    driver = asyncio.create_task(_drive(workflow, port, stop))
    await hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait)
    await driver
    return 0


def main(workflow: restate.Workflow) -> int:
    return asyncio.run(serve(workflow))
