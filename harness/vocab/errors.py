"""One error hierarchy, split by whose fault it is.

Every error carries the context needed to reproduce it (seed, step, state) where
that context exists, and renders as a single line suitable for a terminal.
"""
from __future__ import annotations

import errno


class CrashlabError(Exception):
    """Root of every error crashlab raises on purpose."""

    exit_code = 3

    def __init__(self, message: str, *, seed: int | None = None, step: int | None = None,
                 state: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.seed = seed
        self.step = step
        self.state = state
        self.hint = hint

    def __str__(self) -> str:
        parts = [self.message]
        ctx = [f"{k}={v}" for k, v in (("seed", self.seed), ("step", self.step), ("state", self.state))
               if v is not None]
        if ctx:
            parts.append("(" + ", ".join(ctx) + ")")
        if self.hint:
            parts.append("- " + self.hint)
        return " ".join(parts)


class UsageError(CrashlabError):
    """The command line or an argument is wrong (bad --adapter SPEC, missing file)."""

    exit_code = 3


class InvalidScenario(CrashlabError):
    """A scenario file is malformed; the message names file, line and field."""

    exit_code = 3

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None, **kw) -> None:
        loc = ":".join(str(p) for p in (file, line) if p is not None)
        where = f"{loc}: " if loc else ""
        at = f"field '{field}': " if field else ""
        super().__init__(f"{where}{at}{message}", **kw)
        self.file, self.line, self.field = file, line, field


class OutputChanged(CrashlabError):
    """A file crashlab wrote was replaced, changed or turned into a symbolic link before crashlab
    reported it (another process of the same user did it): nothing is reported as written."""

    exit_code = 3


class PlantedCode(CrashlabError):
    """A ``.pth`` file or a ``sitecustomize``/``usercustomize`` module in a site directory that no
    installed distribution lists: code that runs in every Python process before crashlab does."""

    exit_code = 3


class AdapterProtocolError(CrashlabError):
    """The adapter broke the port contract (garbage on the wire, an await on a non-port, ...).

    Raised inside the drivers and turned into a recorded adapter fault: it becomes a
    verdict about the adapter, never a harness crash.
    """

    exit_code = 1


class ConformanceFailure(CrashlabError, AssertionError):
    """A conformance run found invariant violations (what the pytest plugin reports)."""

    exit_code = 1


class NondeterminismDetected(CrashlabError):
    """The same seed produced a different trace (the determinism self-check)."""

    exit_code = 5


class ResourcesExhausted(CrashlabError):
    """The machine ran out of room while crashlab wrote or opened files: a full disk or quota
    (ENOSPC, EDQUOT), a file-size limit (EFBIG), no free file descriptors (EMFILE, ENFILE).
    Not the user's usage error and not a verdict: the message names what could not be written,
    and no verdict is claimed."""

    exit_code = 4

    #: the errno values that mean it (an OSError with one of these becomes this error)
    ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EMFILE", "ENFILE")
                       if hasattr(errno, n))

    @classmethod
    def matches(cls, exc: BaseException) -> bool:
        return isinstance(exc, OSError) and exc.errno in cls.ERRNOS


class InternalError(CrashlabError):
    """A bug in crashlab itself: please report it with the repro command."""

    exit_code = 6


class Interrupted(BaseException):
    """The user stopped crashlab (SIGINT, SIGTERM). A BaseException, like KeyboardInterrupt,
    so that no adapter's ``except Exception`` swallows it; the CLI writes what is finished
    and exits 128 + the signal number."""

    #: the first signal received in this command, if any (an adapter that swallows the exception
    #: cannot make crashlab forget it: the drivers check this after every adapter step)
    requested: int | None = None

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def clip(text: object, limit: int = 120) -> str:
    """A value quoted in a message: at most ``limit`` characters, saying how long it was if cut."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"
