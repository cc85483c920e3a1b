"""Output files: written atomically, and output paths checked before any work starts.

Every file crashlab writes (traces, results JSON, reports) goes to a temporary file in the
same folder and is renamed into place, so a reader never sees half a file, even when the
run is interrupted. A path the user gives that cannot be written is a usage error naming
the path and the reason, raised before the first scenario runs.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .errors import CrashlabError, ResourcesExhausted, UsageError


@contextlib.contextmanager
def atomic_writer(path: Path, *, binary: bool = False) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename. The
    file gets the mode any program's new file gets (0666 less the umask). A full disk or no free
    file descriptors is ResourcesExhausted (exit 4), any other failure a usage error naming the path."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _write_error(path, exc, "cannot write here") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())   # mkstemp makes 0600 whatever the umask says
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                         {"encoding": "utf-8", "newline": "\n"})) as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise _write_error(path, exc, "cannot write") from None
    except BaseException:
        _discard(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)   # the only portable way to read it is to set it
    os.umask(mask)
    return mask


def _write_error(path: Path, exc: OSError, what: str) -> CrashlabError:
    reason = exc.strerror or str(exc)
    if ResourcesExhausted.matches(exc):
        return ResourcesExhausted(f"{path}: not written: {reason}",
                                  hint="free disk space or file descriptors (ulimit -n) and run the command again")
    return UsageError(f"{path}: {what}: {reason}")


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


# --------------------------------------------------------------------------- a command's outputs, planned
#: The suffixes crashlab writes into each kind of output folder: an output file inside such a folder
#: with one of them could overwrite one of those files, or be overwritten by one.
FOLDER_WRITES = {"traces": (".jsonl", ".yaml", ".yml"), "findings": (".yaml", ".yml", ".jsonl"),
                 "report": (".html", ".md", ".png")}


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _same(a: Path, b: Path) -> bool:
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)   # hard links
    except OSError:
        return False


def plan_outputs(outputs: list[tuple[str, str | Path, str | None]],
                 inputs: list[tuple[str, str | Path]]) -> dict[str, Path]:
    """Every output path of a command, absolute, checked before anything runs.

    ``outputs`` is (option, path, folder kind or None for a file), ``inputs`` is (what, path)
    for every file the command reads. The paths come back absolute (keyed by option), so a
    change of working directory later (by an adapter) cannot move them. Refused with a usage
    error: an output file that is one of the inputs, two outputs naming one path, and an output
    file inside an output folder where crashlab writes files of its kind (FOLDER_WRITES)."""
    given = [(opt, Path(os.path.abspath(p)), kind) for opt, p, kind in outputs if p is not None]
    sources = [(what, Path(p)) for what, p in inputs if Path(p).is_file()]
    for i, (opt, path, kind) in enumerate(given):
        for other, other_path, other_kind in given[:i]:
            if _same(path, other_path) and not (kind and other_kind):
                raise UsageError(f"{opt} {path}: is also {other} {other_path}; give each output its own path")
        if kind is not None:
            continue
        for what, src in sources:
            if _same(path, src):
                raise UsageError(f"{opt} {path}: is {what} {src}, which this command reads; writing it would "
                                 "destroy it. Give another path")
        for other, folder, other_kind in given:
            suffixes = FOLDER_WRITES.get(other_kind or "", ())
            if path.suffix.lower() in suffixes and _real(path).is_relative_to(_real(folder)):
                raise UsageError(f"{opt} {path}: inside the {other} folder {folder}, where crashlab writes its own "
                                 f"{'/'.join(suffixes)} files (one could overwrite it, or it one of them); give "
                                 f"another name (such as {path.with_suffix('.json').name}) or another folder")
    return {opt: path for opt, path, _ in given}


def folder_inputs(path: str | Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The file itself, or the files of a folder with these suffixes (what a command reads)."""
    path = Path(path)
    if path.is_dir():
        try:
            return [p for p in path.iterdir() if p.suffix in suffixes and p.is_file()]
        except OSError:
            return []
    return [path]


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file name derived from a scenario id that cannot escape the output folder."""
    name = _SAFE.sub("_", text).strip("._") or "scenario"
    return name[:100]


def trace_path(out_dir: Path, scenario, seed: int) -> Path:
    """Where a run of ``scenario`` (anything with an ``id``) with ``seed`` saves its trace."""
    return out_dir / f"{safe_name(scenario.id)}.seed{seed}.jsonl"
