"""Output files: written atomically, and output paths checked before any work starts.

Every file crashlab writes (traces, results JSON, reports) goes to a temporary file in the
same folder and is renamed into place, so a reader never sees half a file, even when the
run is interrupted. A path the user gives that cannot be written is a usage error naming
the path and the reason, raised before the first scenario runs.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .errors import UsageError


@contextlib.contextmanager
def atomic_writer(path: Path, *, binary: bool = False) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write here: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                         {"encoding": "utf-8", "newline": "\n"})) as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path, binary=True) as fh:
        fh.write(data)


def check_output_dir(path: str | Path, option: str) -> Path:
    """A folder crashlab may write into (created if missing), or a usage error saying why not."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is a file, not a folder; give a folder path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot create the folder: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the folder is not writable")
    return path


def check_output_file(path: str | Path, option: str) -> Path:
    """A file path crashlab may (re)write, or a usage error saying why not."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file path such as {path / 'results.json'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file is not writable")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is a file, not a folder")
    check_output_dir(parent, option)
    return path
