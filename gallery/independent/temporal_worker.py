"""An independent crashlab worker under Temporal (temporalio Python SDK).

Design:
- The workflow (`CalibRun`, id and task queue = CRASHLAB_RUNTIME_ID) is the ONLY retry owner.
  It loops over one activity, `advance`, which reloads the worker's own store, does the next
  step (at most one send) and says continue / wait N s / done / stale. Waits are durable
  workflow timers. The activity's RetryPolicy allows ONE attempt: a crashed or timed-out
  attempt comes back to the workflow as an ActivityError and the workflow schedules the next
  `advance`, which starts by reading the store (SENT_UNKNOWN there means: read before resend).
- Everything the run knows is in its own SQLite store, outside Temporal's history
  (temporal_store.py): ledger, checkpoints, finish, a lease fenced by CRASHLAB_EPOCH.
- Heartbeats every 100 ms during a step; heartbeat_timeout 1 s hands a killed or stopped
  worker's step to the next worker process; our lease, not Temporal, fences the stale one.

Usage: python3 temporal_worker.py   (everything comes from the CRASHLAB_* environment)
"""
import asyncio
import os
import sys
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from temporalio import activity, workflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy  # noqa: E402
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

MAX_STEPS = 200
HEARTBEAT_TIMEOUT = timedelta(seconds=1)
START_TO_CLOSE = timedelta(seconds=25)
ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)


@workflow.defn(name="CalibRun")
class CalibRun:
    @workflow.run
    async def run(self) -> str:
        failures = 0
        for _ in range(MAX_STEPS):
            try:
                out = await workflow.execute_activity(
                    "advance", start_to_close_timeout=START_TO_CLOSE,
                    heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=ONE_ATTEMPT)
            except ActivityError:
                # the worker died or stalled mid-step: the store knows what was done; the next
                # step reads it (and reads the service before any resend)
                failures += 1
                await workflow.sleep(0.05)
                continue
            status = out.get("status")
            if status == "done":
                return out.get("note", "done")
            if status == "wait":
                await workflow.sleep(max(0.01, float(out.get("wait_s", 0.05))))
            elif status == "stale":
                await workflow.sleep(0.05)
        return "gave up: step budget spent (the store's ledger says what is unresolved)"


_STALE = asyncio.Event()


def _make_activity():
    from temporal_steps import Run, run_step

    state = {"run": None}

    @activity.defn(name="advance")
    async def advance() -> dict:
        if state["run"] is None:
            state["run"] = Run()
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(None, run_step, state["run"])
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.1)
            if done:
                break
            activity.heartbeat()
        out = task.result()
        if out["status"] == "stale":
            _STALE.set()
        return out

    return advance


async def main():
    rid = os.environ["CRASHLAB_RUNTIME_ID"]
    client = await Client.connect(os.environ["CRASHLAB_RUNTIME"])
    advance = _make_activity()
    import concurrent.futures
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    worker = Worker(client, task_queue=rid, workflows=[CalibRun], activities=[advance],
                    activity_executor=pool, max_concurrent_activities=1,
                    max_cached_workflows=0)
    async with worker:
        try:
            handle = await client.start_workflow(
                "CalibRun", id=rid, task_queue=rid,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                task_timeout=timedelta(seconds=2))
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(rid)
        result_task = asyncio.ensure_future(handle.result())
        stale_task = asyncio.ensure_future(_STALE.wait())
        done, _ = await asyncio.wait({result_task, stale_task}, return_when=asyncio.FIRST_COMPLETED)
        if result_task in done:
            print("workflow result:", result_task.result(), flush=True)
        else:
            print("a newer worker holds the run; this one stops", flush=True)
            result_task.cancel()


if __name__ == "__main__":
    asyncio.run(main())
