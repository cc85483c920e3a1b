"""What every runtime example reads from the environment crashlab gives a worker under ``--runtime``."""
from __future__ import annotations

import os
import sys


def need(name: str) -> str:
    """The variable ``name`` crashlab sets for a worker under ``crashlab integrate --runtime NAME``; a clear
    one-line error (exit 2, no traceback) when the worker was started without it."""
    value = os.environ.get(name)
    if not value:
        print(f"error: {name} is not set: this worker runs under a durable runtime; start it with "
              "crashlab integrate SCENARIO --runtime NAME --worker ... (as its repro line says)", file=sys.stderr)
        raise SystemExit(2)
    return value
