"""A DBOS worker that follows the adapter table (docs/runtimes/dbos.md).

    crashlab integrate --runtime dbos keyless-502.yaml t2-commit-before-record \
        --worker 'python3 examples/runtimes/dbos/careful.py'

- The ledger lives in the worker's own store (the views crashlab reads), outside DBOS's step
  table: PROPOSED is recorded by the prepare step, SENT_UNKNOWN right before each send.
- One retry owner: the adapter. The dispatch step has ``retries_allowed=False``; an ambiguous
  answer (a 5xx, a timeout, a closed connection) is resolved inside the step by a read by key,
  never by sending again blind.
- Commit-before-return: DBOS records a step only once it returns, so a kill after the service
  committed re-runs the whole dispatch step on recovery. The step starts by reading the ledger:
  a key left in SENT_UNKNOWN is resolved by a read by key before anything is sent again.
- The workflow id is crashlab's CRASHLAB_RUNTIME_ID and the executor id too, so a restarted
  worker recovers its own run's workflow and nothing else.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Unit  # noqa: E402
from common_dbos import fenced, serve  # noqa: E402
from dbos import DBOS  # noqa: E402

UNIT: Unit


@DBOS.step()
@fenced
def prepare() -> str:
    return UNIT.prepare()


@DBOS.step(retries_allowed=False)      # the adapter is the one retry owner
@fenced
def dispatch() -> str:
    return UNIT.careful_dispatch()     # SENT_UNKNOWN left by a dead attempt: read by key first


@DBOS.step()
@fenced
def conclude() -> str:
    return UNIT.conclude()


@DBOS.workflow(max_recovery_attempts=12)
def reservation() -> str:
    if prepare() == "cancelled":
        return "cancelled"
    dispatch()
    return conclude()


def main() -> int:
    global UNIT
    UNIT = Unit()
    return serve(UNIT, "crashlab-careful", reservation)


if __name__ == "__main__":
    sys.exit(main())
