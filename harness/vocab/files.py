"""Output files: written atomically, and output paths checked before any work starts.

Every file crashlab writes (traces, results JSON, reports) goes to a temporary file in the
same folder and is renamed into place, so a reader never sees half a file, even when the
run is interrupted. A path the user gives that cannot be written is a usage error naming
the path and the reason, raised before the first scenario runs.

The temporary file is created exclusively and never through a symbolic link (``O_EXCL``,
``O_NOFOLLOW``), and what was written is remembered (its inode, size and hash, in memory):
:func:`check_written` refuses (:class:`OutputChanged`, exit 3) a file that another process replaced,
changed or turned into a symbolic link before crashlab reports it.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import CrashlabError, OutputChanged, ResourcesExhausted, UsageError

#: Each file written by atomic_writer in this process: its absolute path -> (device, inode, size, hash).
WRITTEN: dict[str, tuple[int, int, int, bytes]] = {}


class _Hashed:
    """A file being written, with a running hash and size of the bytes written to it."""

    def __init__(self, fh: IO, binary: bool) -> None:
        self._fh, self._binary = fh, binary
        self.hash, self.size = hashlib.blake2b(digest_size=32), 0

    def write(self, data) -> int:
        raw = data if self._binary else data.encode("utf-8")
        self.hash.update(raw)
        self.size += len(raw)
        return self._fh.write(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._fh, name)


@contextlib.contextmanager
def atomic_writer(path: Path, *, binary: bool = False) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename. The
    file gets the mode any program's new file gets (0666 less the umask). A full disk or no free
    file descriptors is ResourcesExhausted (exit 4), any other failure a usage error naming the path."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # mkstemp opens O_CREAT | O_EXCL | O_NOFOLLOW: a new file of its own, never through a link
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _write_error(path, exc, "cannot write here") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())   # mkstemp makes 0600 whatever the umask says
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                         {"encoding": "utf-8", "newline": "\n"})) as fh:
            hashed = _Hashed(fh, binary)
            yield hashed
            fh.flush()
            made = os.fstat(fh.fileno())
        os.replace(tmp, path)
        WRITTEN[os.path.abspath(path)] = (made.st_dev, made.st_ino, hashed.size, hashed.hash.digest())
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


def check_written(paths: Iterable[str | Path | None]) -> None:
    """Before crashlab reports these files: each that this process wrote (atomic_writer) must still
    be the regular file it wrote, same inode, size and content; OutputChanged names the first that
    is not. Paths it did not write (None, or a trace of an earlier run) are not checked."""
    for given in paths:
        if given is None:
            continue
        path = os.path.abspath(given)
        known = WRITTEN.get(path)
        if known is None:
            continue
        problem = _changed(path, known)
        if problem:
            raise OutputChanged(f"{path}: {problem} after crashlab wrote it; another process changed crashlab's "
                                "output, so nothing is reported as written",
                                hint="find what else writes there (an adapter's process?), delete the file and run "
                                     "the command again")


def written_in(*folders: str | Path | None) -> list[str]:
    """The files this process wrote (and still keeps as written) inside these folders."""
    roots = [os.path.join(os.path.abspath(f), "") for f in folders if f is not None]
    return [p for p in WRITTEN if any(p.startswith(root) for root in roots)]


def forget(path: str | Path) -> None:
    """A file crashlab goes on appending to (a journal) is no longer checked as written."""
    WRITTEN.pop(os.path.abspath(path), None)


def _changed(path: str, known: tuple[int, int, int, bytes]) -> str:
    dev, ino, size, digest = known
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"is gone ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return "was replaced by a symbolic link"
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (dev, ino):
        return "was replaced by another file"
    if st.st_size != size:
        return "was changed (its size differs)"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        return f"cannot be read back ({exc.strerror or exc})"
    try:
        if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (dev, ino):
            return "was replaced by another file"
        hashed = hashlib.blake2b(digest_size=32)
        while chunk := os.read(fd, 1 << 20):
            hashed.update(chunk)
    finally:
        os.close(fd)
    return "" if hashed.digest() == digest else "was changed (its content differs)"


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
