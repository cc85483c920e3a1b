"""Planted code: ``.pth`` files and ``sitecustomize``/``usercustomize`` modules no installed package lists.

Python runs every ``.pth`` file of a site directory (its ``import`` lines) and imports
``sitecustomize`` and ``usercustomize`` in every interpreter it starts, before any program's own
code. A process of the same user that can write into the environment (an adapter, in ``process``
isolation) can plant one there, and then change the verdict of every later crashlab run. crashlab's
command (and its pytest plugin, when it runs crashlab tests) refuses to run (:class:`PlantedCode`,
exit 3) while a site directory holds such a file that no installed distribution's ``RECORD`` (or
``installed-files.txt``) lists, and names each with the way to remove it.

A planted file has already run by the time crashlab can look for it: this check refuses the run
*after* the one whose adapter planted it, and every run from then on, until the file is removed.
Only a file that appeared after crashlab was installed counts (its inode's change time, which no
process can set back, is later than that of crashlab's own ``RECORD``): what was in the environment
before is the environment's own (a machine's certificate hook, say). Reinstalling crashlab after a
poisoning therefore accepts what was planted before it: look for unlisted files before installing.
``CRASHLAB_ALLOW_SITE_FILE`` names files to accept deliberately (absolute paths, separated by
``os.pathsep``), such as a ``.pth`` of one's own development setup.
"""
from __future__ import annotations

import os
import sys

from .errors import PlantedCode

ENV = "CRASHLAB_ALLOW_SITE_FILE"
_HOOKS = ("sitecustomize", "usercustomize")


def _is_hook(name: str) -> bool:
    return name.endswith(".pth") or name in _HOOKS or name.startswith(tuple(h + "." for h in _HOOKS))


def site_dirs() -> list[str]:
    """The directories whose ``.pth`` files this interpreter ran, or whose hooks it could import."""
    import site

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs += [p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")]
    seen, out = set(), []
    for d in dirs:
        real = os.path.realpath(d)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            out.append(real)
    return out


def _listed(names: list[str], base) -> set[str]:
    return {os.path.realpath(base(n)) for n in names if _is_hook(n.rsplit("/", 1)[-1])}


def _recorded_beside(folder: str) -> set[str]:
    """The hooks the RECORDs (and installed-files.txt) of the distributions in ``folder`` list: the
    quick look, enough for every file pip installed there."""
    import glob

    known: set[str] = set()
    for record in glob.glob(os.path.join(glob.escape(folder), "*.dist-info", "RECORD")):
        try:
            with open(record, encoding="utf-8") as fh:
                lines = [line for line in fh.read().splitlines() if ".pth" in line or "customize" in line]
            known |= _listed([_first(line) for line in lines], lambda n: os.path.join(folder, n))
        except (OSError, UnicodeDecodeError):
            continue
    return known


def _recorded() -> set[str]:
    """Every hook some installed distribution lists (importlib.metadata: every kind of install)."""
    import importlib.metadata

    known: set[str] = set()
    for dist in importlib.metadata.distributions():
        record = dist.read_text("RECORD")
        names = [_first(line) for line in record.splitlines()] if record is not None else \
            [str(f) for f in dist.files or ()]
        known |= _listed(names, lambda n, dist=dist: str(dist.locate_file(n)))
    return known


def _first(line: str) -> str:
    if not line.startswith('"'):
        return line.split(",", 1)[0]
    import csv

    return next(csv.reader([line]), [""])[0]


def installed_at() -> float | None:
    """The change time of crashlab's own installation record in the site directories (None: not
    installed there, run from a source tree)."""
    import glob

    times = []
    for folder in site_dirs():
        for record in glob.glob(os.path.join(glob.escape(folder), "crashlab-*.dist-info", "RECORD")):
            try:
                times.append(os.stat(record).st_ctime)
            except OSError:
                continue
    return max(times) if times else None


def _since(path: str, since: float | None) -> bool:
    try:
        return since is None or os.lstat(path).st_ctime > since
    except OSError:
        return False


def planted(dirs: list[str] | None = None) -> list[str]:
    """The unlisted ``.pth`` files and site hooks in ``dirs`` (default: :func:`site_dirs`) that appeared
    after crashlab was installed, less those ``CRASHLAB_ALLOW_SITE_FILE`` accepts."""
    allowed = {os.path.realpath(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p.strip()}
    found: list[str] = []
    since = installed_at()
    for folder in site_dirs() if dirs is None else dirs:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        hooks = [os.path.join(folder, n) for n in names if _is_hook(n)]
        hooks = [p for p in hooks if os.path.realpath(p) not in allowed and _since(p, since)]
        if hooks:
            known = _recorded_beside(folder)
            found += [p for p in hooks if os.path.realpath(p) not in known]
    if found:   # not listed beside them: look at every installed distribution before refusing
        known = _recorded()
        found = [p for p in found if os.path.realpath(p) not in known]
    return found


def refuse_planted(dirs: list[str] | None = None) -> None:
    """PlantedCode naming every unlisted ``.pth`` file and site hook, and how to remove it."""
    found = planted(dirs)
    if not found:
        return
    lines = "; ".join(f"{p} (remove it: rm -r {_quote(p)})" for p in found)
    raise PlantedCode(
        f"code no installed package lists would run in every Python process of this environment, before "
        f"crashlab's own: {lines}. An adapter run without namespaces can write there; no verdict of this "
        f"environment can be trusted while it is there",
        hint=f"remove each file; if you put one there on purpose, name it in {ENV} (paths separated by "
             f"{os.pathsep!r}), or install it as part of a package")


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)
