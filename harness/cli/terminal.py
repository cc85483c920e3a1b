"""What crashlab prints, made safe to print.

Adapter-controlled strings (semantic keys, messages, reasons, the adapter's stderr) reach the
terminal through the scorecard, ``run``, ``check``, ``show`` and ``diff``. A control character
in them could move the cursor, erase a line and draw a fake ``verdict: PASS``; ``printable``
shows every one of them as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``) instead.

``guarded`` wraps standard output for one command: everything written is made printable, and
a reader that went away (``crashlab conformance ... | head -c 0``: EPIPE) or a closed
descriptor only loses the text: the command goes on, writes its files and exits with its
verdict, never 0 for a failure.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from typing import Iterator, TextIO

#: Every C0 control but newline and tab, DEL, the C1 controls, and the Unicode format characters
#: that reorder or hide text (bidirectional overrides and isolates, line and paragraph separators).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character shown as a visible escape (newlines and tabs kept)."""
    text = str(text)
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def refusal(exc) -> int:
    """An error printed whole, every line of it (``report`` and ``merge`` refusing results that their
    traces contradict name every scenario; other errors are clipped to a screen); its exit code."""
    print(f"crashlab: error: {printable(exc.message)}", file=sys.stderr)
    return exc.exit_code


#: errno values of a standard output nobody reads any more
_GONE = frozenset({errno.EPIPE, errno.EBADF})


class Guarded:
    """A text stream that escapes what is written to it (``escape``) and survives its reader:
    after EPIPE or EBADF, further output goes nowhere (``lost`` says it happened)."""

    def __init__(self, stream: TextIO, *, escape: bool) -> None:
        self._stream = stream
        self._escape = escape
        self.lost = False

    def write(self, text: str) -> int:
        if self.lost:
            return len(text)
        try:
            return self._stream.write(printable(text) if self._escape else text)
        except OSError as exc:
            self._gone(exc)
            return len(text)

    def flush(self) -> None:
        if self.lost:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            self._gone(exc)

    def _gone(self, exc: OSError) -> None:
        if exc.errno not in _GONE:
            raise exc
        self.lost = True
        # Whatever is left in the stream's buffer would fail again at exit (and turn the exit
        # status into 120): point the descriptor at /dev/null so that the last flush succeeds.
        with contextlib.suppress(OSError, AttributeError, ValueError):
            fd = self._stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Standard output escaped and guarded, standard error guarded (not escaped: the progress
    bar draws with control characters; its adapter strings go through ``printable``)."""
    old_out, old_err = sys.stdout, sys.stderr
    if old_out is not None and not isinstance(old_out, Guarded):
        sys.stdout = Guarded(old_out, escape=True)
    if old_err is not None and not isinstance(old_err, Guarded):
        sys.stderr = Guarded(old_err, escape=False)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, Guarded):
                stream.flush()
        sys.stdout, sys.stderr = old_out, old_err
