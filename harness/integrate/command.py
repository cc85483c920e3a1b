"""The worker command's process side, for the integration supervisor: its placeholders, checked
before anything starts; its death with crashlab's thread; and which armed store failpoint a
worker that killed itself met."""
from __future__ import annotations

import shlex
import shutil
import string
from collections.abc import Iterable

from ..vocab.errors import UsageError


def check_placeholders(argv: list[str], *, runtime: bool, flag: str = "--worker") -> None:
    """Refuse, before anything starts, a --worker whose braces are not the worker's placeholders."""
    allowed = ("url", "db", "worker", "run") + (("runtime", "runtime_id") if runtime else ())
    names = ", ".join("{" + name + "}" for name in allowed)
    for part in argv:
        try:
            fields = [name for _, name, spec, conv in string.Formatter().parse(part) if name is not None]
        except ValueError:
            raise UsageError(f"{flag}: a lone brace in {part!r}", hint=f"write a literal brace twice ({{{{ or }}}}); "
                             f"the placeholders are {names}") from None
        for name in fields:
            if name not in allowed:
                extra = "" if runtime or name not in ("runtime", "runtime_id") else " (only with --runtime)"
                raise UsageError(f"{flag}: unknown placeholder {{{name}}} in {part!r}{extra}",
                                 hint=f"the placeholders are {names}; write a literal brace twice")


def fired_failpoint(events: Iterable[dict], worker: str, armed: list[str]) -> str:
    """Of the failpoints ``armed`` for ``worker`` (``port.op:nth:boundary``), the one it met when it killed
    itself: the store rows it wrote (the trace's calls that stand for them) say how far it got, ``after`` the
    nth row or ``before`` it; the first armed when the rows tell none apart."""
    counts: dict[tuple[str, str], int] = {}
    for ev in events:
        if ev.get("kind") == "call" and ev.get("worker") == worker:
            key = (str(ev.get("port")), str(ev.get("op")))
            counts[key] = counts.get(key, 0) + 1
    for spec in armed:
        where, nth, boundary = spec.rsplit(":", 2)
        port, _, op = where.partition(".")
        done = sum(n for (p, o), n in counts.items() if p == port and op in ("*", o))
        if done == (int(nth) if boundary == "after" else int(nth) - 1):
            return spec
    return armed[0]


def parse_worker(command: str, flag: str = "--worker", *, runtime: bool = False) -> list[str]:
    """A worker command split as a shell would (no shell runs it), checked before anything starts:
    a program that exists, and only the worker's placeholders."""
    if not command.strip():
        raise UsageError(f"{flag} needs a command, e.g. {flag} 'python3 worker.py {{url}} {{db}}'")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"{flag} {command!r}: {exc}") from None
    program = argv[0]
    if "{" not in program and shutil.which(program) is None:
        raise UsageError(f"{flag}: cannot run {program!r}: no such command (not on PATH, not an executable)",
                         hint=f"give a command on PATH or a path to an executable, e.g. {flag} "
                              "'python3 worker.py {url} {db}'")
    check_placeholders(argv, runtime=runtime, flag=flag)
    return argv
