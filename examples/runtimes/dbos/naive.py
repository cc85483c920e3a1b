"""A DBOS worker written the way DBOS's tutorials write a step: the effect is sent from the step
and DBOS retries the step when it raises. It fails crashlab's integration card on purpose.

    crashlab integrate --runtime dbos keyless-502.yaml t2-commit-before-record \
        --worker 'python3 examples/runtimes/dbos/naive.py'

It keeps the ledger in the store crashlab reads (so the card can judge it), but the retry owner is
DBOS: after a 502, a timeout or a closed connection the step raises and ``retries_allowed`` sends
it again at once, with no read by key (RETRY-01; on a service that keeps no keys, two holds:
EFF-01). After a kill, DBOS recovers the workflow and re-runs the step that had not returned,
again with no read (RETRY-01).
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


@DBOS.step(retries_allowed=True, max_attempts=3, interval_seconds=0.02, backoff_rate=2.0)
@fenced
def reserve() -> str:
    return UNIT.naive_send()          # raises Retryable on a 5xx, a timeout, a closed connection


@DBOS.step()
@fenced
def gave_up(why: str) -> None:
    UNIT.gave_up(why)


@DBOS.step()
@fenced
def conclude() -> str:
    return UNIT.conclude()


@DBOS.workflow()
def reservation() -> str:
    if prepare() == "cancelled":
        return "cancelled"
    try:
        reserve()
    except Exception as exc:          # DBOS's retries are spent
        gave_up(str(exc))
    return conclude()


def main() -> int:
    global UNIT
    UNIT = Unit()
    return serve(UNIT, "crashlab-naive", reservation)


if __name__ == "__main__":
    sys.exit(main())
