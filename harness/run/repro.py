"""The repro line of an integration trace: the ``crashlab integrate`` command that runs it again.

An integration run is a real worker in real time, which no seed replays: its repro is the
scenario, the worker command (the trace's adapter, ``integrate:CMD``) and every option that
changes what the worker meets, read from the header's ``integration`` field, which the
supervisor writes (``header_options``): ``--runtime`` (a runtime worker run without it has no
``CRASHLAB_RUNTIME`` and cannot start), ``--store``, ``--time-scale``, ``--wall-limit`` and
``--handover-wait`` when not at their defaults, and ``--worker-next`` when a next code version was given. This module imports nothing heavy: the report
and ``crashlab check`` read it.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

#: The adapter name an integration trace carries: "integrate:" and the worker command.
INTEGRATE = "integrate:"
#: ``crashlab integrate``'s defaults (crashlab.integrate.supervisor): an option at its default is left out.
DEFAULT_STORE = "sqlite:{db}"
DEFAULTS = {"time_scale": 100.0, "wall_limit_s": 30.0, "handover_wait_s": 15.0}
#: header key -> the option that sets it, in the order the repro line names them
OPTIONS = (("runtime", "--runtime"), ("store", "--store"), ("time_scale", "--time-scale"),
           ("wall_limit_s", "--wall-limit"), ("handover_wait_s", "--handover-wait"), ("worker_next", "--worker-next"))


def _no_password(url: str) -> str:
    """A store URL without its password (``user:secret@`` becomes ``user:PASSWORD@``): a trace is shared."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://[^:/@]+):[^@/]*@", r"\1:PASSWORD@", url)


def header_options(*, runtime: str | None, store: str, time_scale: float, wall_limit_s: float,
                   handover_wait_s: float, worker_next: str | None = None) -> dict:
    """The header's ``integration`` field: the options a repro line repeats."""
    return {"runtime": runtime, "store": _no_password(store), "time_scale": time_scale,
            "wall_limit_s": wall_limit_s, "handover_wait_s": handover_wait_s,
            **({"worker_next": worker_next} if worker_next else {})}


def option_words(options: Mapping[str, Any] | None) -> list[str]:
    """The options of ``options`` (a header's ``integration`` field) that are not at their defaults, as argv words."""
    words: list[str] = []
    for key, flag in OPTIONS:
        value = (options or {}).get(key)
        if value is None or value == "" or (key == "store" and value == DEFAULT_STORE) or value == DEFAULTS.get(key):
            continue
        words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return words


def is_integration(adapter: object) -> bool:
    return isinstance(adapter, str) and adapter.startswith(INTEGRATE)


def repro_line(head: Mapping[str, Any], *, worker: str | None = None) -> str:
    """The shell-quoted ``crashlab integrate`` command of an integration trace's header; ``worker``
    (already shell text, e.g. ``"$CRASHLAB_ADAPTER"``) stands in for the trace's worker command."""
    source = str(head.get("source") or head.get("scenario"))
    command = shlex.quote(str(head.get("adapter"))[len(INTEGRATE):]) if worker is None else worker
    options = head.get("integration") if isinstance(head.get("integration"), Mapping) else None
    if options is not None and options.get("worker_next") == str(head.get("adapter"))[len(INTEGRATE):]:
        options = {k: v for k, v in options.items() if k != "worker_next"}    # its default: the worker itself
    return f"{shlex.join(['crashlab', 'integrate', source, *option_words(options)])} --worker {command}"
