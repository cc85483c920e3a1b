"""Adapter specs, the floor under drivers, warm and wire: import a Python adapter named
``module:attribute``, and the limits an adapter's process starts under.

Kept light on purpose: the wire shim (``python -m crashlab.run.wire``) and the warm server import
this, not the drivers, so a Python adapter's worker process starts without crashlab's
subprocess machinery.
"""
from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any, Callable

from ..vocab.errors import Interrupted, UsageError, clip


def import_path() -> str:
    """``PYTHONPATH`` for a fresh interpreter that imports an adapter (the warm server): the folders
    this process finds modules in that a new interpreter would not (pytest's rootdir, a test folder a
    conftest added, ``PYTHONPATH`` itself, the current directory), before any already set, so that a
    Python adapter imports in its own process as it would in crashlab's worker processes."""
    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    extra = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if any(path == p or path.startswith(p + os.sep) for p in own) or not os.path.isdir(path):
            continue
        if path not in extra:
            extra.append(path)
    before = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(extra + ([before] if before else []))


def import_adapter(spec: str) -> Callable:
    """The factory named by a Python adapter SPEC (``module:attribute``): a class with a
    ``run(ports)`` method, an instance of one, or a function returning one. Errors are one
    line naming what was not found."""
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"--adapter {spec!r}: no module named {module_name!r} "
                             "(is it installed or in the current directory?)") from None
        raise UsageError(f"--adapter {spec!r}: importing {module_name!r} failed: {exc}") from None
    except Interrupted:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code at import time, whatever it raises (even exit)
        raise UsageError(f"--adapter {spec!r}: importing {module_name!r} raised "
                         f"{type(exc).__name__}: {clip(str(exc))}") from None
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except Interrupted:
            raise
        except BaseException:  # noqa: BLE001 - a missing attribute, or a property that raises
            raise UsageError(f"--adapter {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(target, type):
        if not callable(getattr(target, "run", None)):
            raise UsageError(f"--adapter {spec!r}: {attr} has no run(ports) method")
        factory = target
    elif callable(getattr(target, "run", None)):
        factory = (lambda obj=target: obj)
    elif callable(target):
        factory = target
    else:
        raise UsageError(f"--adapter {spec!r}: {attr} is a {type(target).__name__}, not an adapter: name a class "
                         "with an async run(ports) method, an instance of one, or a function returning one")
    return factory


def limit_child(memory_mb: int):
    """Runs in the adapter's process before exec: an address-space limit, and death with crashlab."""
    def limit() -> None:
        if memory_mb > 0:
            try:
                import resource
                size = memory_mb << 20
                resource.setrlimit(resource.RLIMIT_AS, (size, size))
            except (ImportError, ValueError, OSError):
                pass
        try:  # Linux: the adapter receives SIGKILL if crashlab itself dies
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return limit


def named_as(outer: str, inner: str, load: Callable[[], Any]) -> Any:
    """``load()`` of the adapter ``inner`` that ``outer`` wraps (``wire:module:attribute``), its errors
    naming ``outer``: the spec the user gave, not the part crashlab read first."""
    try:
        return load()
    except UsageError as exc:
        raise UsageError(exc.message.replace(f"--adapter {inner!r}", f"--adapter {outer!r}"), hint=exc.hint) from None
