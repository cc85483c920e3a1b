"""A Temporal worker written the way Temporal's tutorials write an activity: the reservation is sent
from inside the activity, any failure is raised, and Temporal's default retry policy runs the
activity again: after a crash (start_to_close_timeout), after a 502 or a closed connection.

    crashlab integrate crash-4-after-commit-before-record --runtime temporal \\
        --worker 'python3 examples/runtimes/temporal/naive.py' --store 'sqlite:{db}'

It keeps the same ledger as the careful worker (SENT_UNKNOWN before every send), so crashlab can
read it; what it lacks is the read by key before a retried attempt sends again. Temporal records
the activity as completed only after it returns: an attempt killed after the service committed
leaves no trace in the history, and the next attempt sends again. On a service without keys that
is a second hold (EFF-01); on any service it is a resend without an authoritative read (RETRY-01).
"""
from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
with workflow.unsafe.imports_passed_through():
    import careful_effect  # noqa: E402
    import temporal_common as common  # noqa: E402


@activity.defn
def reserve() -> str:
    try:
        return careful_effect.step("naive")
    except careful_effect.Unresolved as exc:
        raise RuntimeError(str(exc)) from None      # the tutorial's way: raise, and Temporal retries


@workflow.defn
class Reserve:
    @workflow.run
    async def run(self) -> str:
        # the tutorial's call: a start_to_close timeout and Temporal's default retry policy
        return await workflow.execute_activity(reserve, start_to_close_timeout=timedelta(seconds=5))


if __name__ == "__main__":
    sys.exit(common.main(Reserve, [reserve]))
