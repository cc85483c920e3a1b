"""The worker's own store, read, never reported: a few read-only views in crashlab's record shapes.

A worker keeps its state in its own database and exposes three views (docs/integration.md):

    crashlab_checkpoints(version INTEGER, record TEXT)   -- every checkpoint version kept, JSON
    crashlab_ledger(seq INTEGER, record TEXT)            -- the effect ledger in append order, JSON
    crashlab_finish(seq INTEGER, record TEXT)            -- {disposition, effects, next_owner, reason}

The supervisor reads them while the worker is blocked on each service request, after every
kill and at the end; each read returns the rows it had not seen yet. The reader opens the
database read-only with a short busy timeout, so it never blocks the worker for long and never
writes; a view the worker has not created yet reads as empty.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError

VIEWS = {"checkpoints": ("crashlab_checkpoints", "version"), "ledger": ("crashlab_ledger", "seq"),
         "finish": ("crashlab_finish", "seq")}
BUSY_TIMEOUT_MS = 500


@dataclass(slots=True)
class Rows:
    """What a read found that the previous reads had not: (order, record or the raw text)."""

    checkpoints: list = field(default_factory=list)
    ledger: list = field(default_factory=list)
    finish: list = field(default_factory=list)
    problem: str | None = None      # the store could not be read (the reason)


class SqliteStore:
    """One run's SQLite database at ``path``, read incrementally."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.seen = {name: None for name in VIEWS}    # view -> the last order value read
        self.views_found: set[str] = set()

    def read(self) -> Rows:
        out = Rows()
        if not self.path.exists():
            return out
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            out.problem = f"cannot open {self.path}: {exc}"
            return out
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('view', 'table')")}
            for name, (view, order) in VIEWS.items():
                if view not in names:
                    continue
                self.views_found.add(name)
                last = self.seen[name]
                rows = conn.execute(f"SELECT {order}, record FROM {view} WHERE ? IS NULL OR {order} > ? "
                                    f"ORDER BY {order}", (last, last)).fetchall()
                for number, text in rows:
                    try:
                        record = json.loads(text) if isinstance(text, (str, bytes)) else text
                    except ValueError:
                        record = text
                    getattr(out, name).append((number, record))
                    self.seen[name] = number
        except sqlite3.Error as exc:
            out.problem = f"cannot read the views of {self.path}: {exc}"
        finally:
            conn.close()
        return out


def store_path(template: str, *, run: str, out: Path) -> Path:
    """The database of ``run`` from ``--store sqlite:TEMPLATE`` ({db} placeholders are run-specific)."""
    if not template.startswith("sqlite:"):
        raise UsageError(f"--store {template!r}: only sqlite:PATH is supported here",
                         hint="give --store sqlite:{db} (a database per run under the output folder)")
    path = template[len("sqlite:"):]
    if path in ("", "{db}"):
        return out / f"{run}.sqlite"
    return Path(path.replace("{run}", run))
