"""An independent careful worker for `crashlab integrate --runtime restate`.

One Restate workflow per run (its own service name, derived from the run's runtime id, so
runs never share a deployment), whose `run` handler makes three kinds of `ctx.run`:
`prepare` (store writes only), `effect` (one send at most per attempt, the only retry
owner: RunOptions max_attempts = the attempt ceiling) and `finish`.  The ledger, the
lease and the checkpoints live in the worker's own SQLite store (restate_store.py).

    python3 restate_worker.py
"""
import asyncio
import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import restate  # noqa: E402
from restate import RunOptions, TerminalError  # noqa: E402

from restate_steps import ATTEMPT_CEILING, Retry, Steps  # noqa: E402
from restate_store import Stale, Store  # noqa: E402

ENV = os.environ
RID = ENV["CRASHLAB_RUNTIME_ID"]
SVC = "Hold" + hashlib.sha256(RID.encode()).hexdigest()[:12]


def log(*a):
    print(time.strftime("%H:%M:%S"), ENV.get("CRASHLAB_WORKER"), *a, flush=True)


def stale_exit(why):
    log("stale, stopping:", why)
    os._exit(0)


store = Store(ENV["CRASHLAB_DB"], ENV.get("CRASHLAB_EPOCH", "1"), ENV.get("CRASHLAB_WORKER", ""))
steps = Steps(store, ENV["CRASHLAB_URL"])
wf = restate.Workflow(SVC, inactivity_timeout=timedelta(seconds=2), abort_timeout=timedelta(seconds=1))


async def in_thread(fn, *args):
    try:
        return await asyncio.to_thread(fn, *args)
    except Stale as exc:
        stale_exit(exc)


@wf.main()
async def run(ctx: restate.WorkflowContext, req: dict) -> str:
    async def prepare():
        return await in_thread(steps.prepare)

    async def effect():
        try:
            return await in_thread(steps.effect)
        except Retry as exc:
            raise RuntimeError("attempt ended without proof: %s" % exc) from None

    p = await ctx.run_typed("prepare", prepare, RunOptions(max_attempts=20, initial_retry_interval=timedelta(milliseconds=50),
                                                            max_retry_interval=timedelta(milliseconds=500)))
    if p["stage"] == "done":
        return "done"
    outcome = p.get("outcome")
    if p["stage"] == "effect":
        try:
            e = await ctx.run_typed("effect", effect, RunOptions(
                max_attempts=ATTEMPT_CEILING, initial_retry_interval=timedelta(milliseconds=50),
                max_retry_interval=timedelta(milliseconds=500)))
            outcome = e["outcome"]
        except TerminalError:
            outcome = "given_up"

    async def finish():
        return await in_thread(steps.finish, outcome)

    await ctx.run_typed("finish", finish, RunOptions(max_attempts=20))
    done.set()
    return "done"


done = threading.Event()


def admin(method, path, body=None):
    req = urllib.request.Request(ENV["CRASHLAB_RESTATE_ADMIN"].rstrip("/") + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
        return json.loads(raw) if raw else {}


def ingress(method, path, body=None, timeout=600):
    req = urllib.request.Request(ENV["CRASHLAB_RUNTIME"].rstrip("/") + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def point_deployment(port):
    """The run's first process registers the deployment; later ones move it to themselves."""
    uri = "http://127.0.0.1:%d" % port
    dep = store.meta("deployment")
    if dep:
        admin("PATCH", "/deployments/" + dep, {"uri": uri})
        log("moved deployment", dep, "to", uri)
        return
    ans = admin("POST", "/deployments", {"uri": uri})
    store.set_meta("deployment", ans["id"])
    log("registered deployment", ans["id"], uri)


def drive():
    """Submit the workflow (a restarted process joins it) and wait for its end."""
    for _ in range(100):
        try:
            ingress("POST", "/%s/%s/run/send" % (SVC, RID), {})
            break
        except urllib.error.HTTPError as exc:
            if exc.code in (409,):
                break
            time.sleep(0.1)
        except OSError:
            time.sleep(0.1)
    while not done.is_set():
        try:
            ingress("GET", "/restate/workflow/%s/%s/attach" % (SVC, RID), timeout=60)
            break
        except (OSError, urllib.error.HTTPError) as exc:
            log("attach:", exc)
            time.sleep(0.2)
    done.set()


async def main():
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    try:
        store.acquire()
    except Stale as exc:
        stale_exit(exc)
    if store.finished():
        log("run already finished")
        return
    port = free_port()
    cfg = Config()
    cfg.bind = ["127.0.0.1:%d" % port]
    cfg.loglevel = "WARNING"
    stop = asyncio.Event()
    server = asyncio.create_task(serve(restate.app([wf]), cfg, shutdown_trigger=stop.wait))
    await asyncio.sleep(0.05)
    await asyncio.to_thread(point_deployment, port)
    threading.Thread(target=drive, daemon=True).start()
    while not done.is_set():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    stop.set()
    try:
        await asyncio.wait_for(server, 2)
    except Exception:
        pass


if __name__ == "__main__":
    asyncio.run(main())
    os._exit(0)
