"""Figures drawn once: a report written again into the same folder keeps every figure whose
inputs did not change.

Runs are deterministic, so a suite run again with the same adapter writes the same traces, and
drawing their figures (matplotlib: nearly all of a report's time) would give the same bytes. A
figure is keyed by a digest of everything it is drawn from: the trace's events, the scenario's
result (verdict, violations, notes; not where its trace was saved), the view (``linear``,
``window``, ``slides``, ``no_answers``), and the drawing code itself (crashlab's version, the
source of crashlab.report and of the modules beside it, matplotlib's and Pillow's versions).
``figures/digests.json`` keeps the digest of each figure in the folder. A figure whose digest
is unchanged and whose PNG is still there is read back instead of drawn; anything else is
drawn, and its entry is dropped from ``digests.json`` before drawing starts, so an interrupted
report never leaves a figure claimed by a digest it was not drawn from.
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import orjson

from ..vocab.files import atomic_write_text

MANIFEST = "digests.json"


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """What the drawing code is: crashlab's version, crashlab.report's source, matplotlib and Pillow."""
    import matplotlib
    import PIL

    from ..rules.ruleset import package_version

    h = hashlib.sha256(f"{package_version()}|{matplotlib.__version__}|{PIL.__version__}".encode())
    here = Path(__file__).parent      # crashlab.report, and the modules of crashlab it draws with
    for path in sorted(here.glob("*.py")) + sorted(here.parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def digest(item, no_answers: bool, view: tuple) -> str:
    """The digest of everything ``item``'s figure is drawn from (``view``: linear, window, slides)."""
    result = {k: v for k, v in item.result.to_json().items() if k != "trace"}
    h = hashlib.sha256(_code_digest().encode())
    h.update(_canonical([result, no_answers, repr(view)]))
    h.update(_canonical(item.events))
    return h.hexdigest()


def _canonical(value) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):    # an integer beyond 64 bits in an edited trace
        return json.dumps(value, sort_keys=True, default=repr).encode()


class FigureCache:
    """The digests of the figures in one report's ``figures/`` folder."""

    def __init__(self, fig_dir: Path) -> None:
        self.fig_dir = fig_dir
        try:
            known = json.loads((fig_dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        self.known: dict[str, str] = {k: v for k, v in known.items() if isinstance(v, str)} \
            if isinstance(known, dict) else {}

    def kept(self, name: str, key: str) -> bytes | None:
        """The PNG already drawn for ``name`` from inputs with digest ``key``, or None."""
        if self.known.get(name) != key:
            return None
        try:
            return (self.fig_dir / f"{name}.png").read_bytes()
        except OSError:
            return None

    def forget(self, names) -> None:
        """Drop the entries of figures about to be drawn (written at once)."""
        for name in names:
            self.known.pop(name, None)
        self.save()

    def remember(self, keys: dict[str, str]) -> None:
        self.known.update(keys)
        self.save()

    def save(self) -> None:
        atomic_write_text(self.fig_dir / MANIFEST, json.dumps(self.known, indent=0, sort_keys=True) + "\n")
