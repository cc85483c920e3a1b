"""What the two Temporal examples share: connect to crashlab's dev server, start or join the run's
workflow (its id is CRASHLAB_RUNTIME_ID, so a restarted worker process resumes the same workflow),
run a Temporal worker on a task queue of the same name until the workflow ends, then exit 0. A workflow
that ends with the run waiting (WAITING_HUMAN: an approval was requested) is over; the worker crashlab
starts when the run is woken starts the run's next workflow, ``CRASHLAB_RUNTIME_ID.woken-N``
(``crashlab_env.unit_id``), on the same task queue."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import MappingProxyType

from crashlab_env import need, unit_id
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker

#: one outstanding poll per task kind: a worker stopped (SIGSTOP) past its lease keeps its long polls open,
#: and each poll it holds takes one task the server hands out (an activity attempt lost until it times out)
ONE_POLL = MappingProxyType(dict(workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=1),
                                 activity_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=1)))


async def serve(workflow_cls, activities: list, args: Sequence = (), plugins: Sequence = (),
                worker_options: Mapping = ONE_POLL) -> int:
    """``args``: the workflow's arguments; ``plugins``: the client's (and so the worker's) Temporal plugins;
    ``worker_options``: more of ``Worker``'s keyword arguments (default: one poll per task kind)."""
    client = await Client.connect(need("CRASHLAB_RUNTIME"), plugins=list(plugins),
                                  namespace=os.environ.get("CRASHLAB_TEMPORAL_NAMESPACE", "default"))
    run_id, wf_id = need("CRASHLAB_RUNTIME_ID"), unit_id()     # the task queue; the run's current workflow
    with ThreadPoolExecutor(max_workers=4) as pool:
        # max_cached_workflows=0: no sticky queue, so a killed worker's workflow task is not held for it;
        # the workflows only call activities, so they run without the SDK's import sandbox
        async with Worker(client, task_queue=run_id, workflows=[workflow_cls], activities=activities,
                          activity_executor=pool, max_cached_workflows=0,
                          workflow_runner=UnsandboxedWorkflowRunner(), **worker_options):
            try:
                handle = await client.start_workflow(
                    workflow_cls.run, args=list(args), id=wf_id, task_queue=run_id, task_timeout=timedelta(seconds=2),
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
            except WorkflowAlreadyStartedError:          # finished by an earlier worker process
                handle = client.get_workflow_handle(wf_id)
            try:
                await handle.result()
            except WorkflowFailureError as exc:
                print(f"workflow failed: {exc.cause}", flush=True)
    return 0


def main(workflow_cls, activities: list, args: Sequence = (), plugins: Sequence = (),
         worker_options: Mapping = ONE_POLL) -> int:
    return asyncio.run(serve(workflow_cls, activities, args, plugins, worker_options))
