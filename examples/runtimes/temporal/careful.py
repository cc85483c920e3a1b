"""A Temporal worker that follows the adapter table (docs/runtimes/temporal.md).

    crashlab integrate --suite --runtime temporal \\
        --worker 'python3 examples/runtimes/temporal/careful.py' --store 'sqlite:{db}'

The workflow runs the careful integration worker's steps (examples/runtimes/careful_effect.py) as
activities. The ledger lives in the worker's own store, outside Temporal's history, and SENT_UNKNOWN
is appended there before the send, because Temporal records an activity only after it returns. The
activity RetryPolicy is the single retry owner: each attempt sends at most once, with
``retry_owner: caller`` (no proxy re-send) and no client retry; an attempt that finds SENT_UNKNOWN
(attempt > 1, after a crash or an ambiguous answer) reads the key before anything is sent again.
A heartbeat lets Temporal notice a killed worker in seconds rather than at start_to_close.
"""
from __future__ import annotations

import contextvars
import sys
import threading
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
with workflow.unsafe.imports_passed_through():
    import careful_effect  # noqa: E402
    import temporal_common as common  # noqa: E402

HEARTBEAT = timedelta(seconds=2)
#: the single retry owner: Temporal's activity retry policy, bounded by the worker's attempt ceiling
EFFECT_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=2.0,
                           maximum_interval=timedelta(milliseconds=500),
                           maximum_attempts=careful_effect.ATTEMPT_CEILING)
STORE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_interval=timedelta(milliseconds=500))


def _run_step(phase: str) -> str:
    """One careful step, heartbeating from a side thread while it is blocked on the service."""
    stop = threading.Event()
    beat = contextvars.copy_context()
    threading.Thread(target=beat.run, args=(_beat, stop), daemon=True).start()
    try:
        return careful_effect.step(phase)
    except careful_effect.Unresolved as exc:
        raise ApplicationError(str(exc), type="Unresolved") from None
    finally:
        stop.set()


def _beat(stop: threading.Event) -> None:
    while not stop.wait(0.3):
        try:
            activity.heartbeat()
        except Exception:
            return


@activity.defn
def prepare() -> str:
    return _run_step("prepare")


@activity.defn
def effect() -> str:
    return _run_step("effect")


@activity.defn
def give_up() -> str:
    return _run_step("give_up")


@workflow.defn
class Reserve:
    @workflow.run
    async def run(self) -> str:
        opts = dict(start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=HEARTBEAT)
        done = await workflow.execute_activity(prepare, retry_policy=STORE_RETRY, **opts)
        if done:
            return done
        try:
            return await workflow.execute_activity(effect, retry_policy=EFFECT_RETRY, **opts)
        except ActivityError:         # the retry owner's budget is spent: finish with what the ledger proves
            return await workflow.execute_activity(give_up, retry_policy=STORE_RETRY, **opts)


if __name__ == "__main__":
    sys.exit(common.main(Reserve, [prepare, effect, give_up]))
