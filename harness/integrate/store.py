"""The worker's own store, read, never reported: a few read-only views in crashlab's record shapes.

A worker keeps its state in its own database and exposes three views (docs/integration.md):

    crashlab_checkpoints(version, record [, committed_at])   -- every checkpoint version kept, JSON
    crashlab_ledger(seq, record [, committed_at])            -- the effect ledger in append order, JSON
    crashlab_finish(seq, record [, committed_at])            -- {disposition, effects, next_owner, reason}

The supervisor reads them while the worker is blocked on each service request, after every kill
and at the end; each read returns the rows it had not seen yet, as ``(view, number, record)`` in
the order they were written: by their ``committed_at`` where every new row has one (PostgreSQL's
``pg_xact_commit_timestamp(xmin)`` with ``track_commit_timestamp = on``), else ledger rows, then
checkpoints, then the finish. A view the worker has not created yet reads as empty.

* ``sqlite:PATH`` (the embedded default): opened read-only with a short busy timeout, so the
  reader never writes and never blocks the worker for long.
* ``postgresql://USER@127.0.0.1:PORT/{db}``: one database per run, created empty by the
  supervisor; read through ``psql`` (no driver needed), on loopback or a local socket only.

Stores never collide and never cost a file: :func:`plan_stores` refuses, before any worker runs,
two runs that would share one store, and an existing file crashlab did not make. A PostgreSQL
database name carries a hash of the run's output folder, scenario and run, so it fits the server's
63 bytes whatever the scenario's id, and two suites on one server (other ``--out`` folders, or a
prefix in the URL: ``.../teamA_{db}``) never drop each other's databases.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..vocab.errors import UsageError

VIEWS = {"ledger": ("crashlab_ledger", "seq"), "checkpoints": ("crashlab_checkpoints", "version"),
         "finish": ("crashlab_finish", "seq")}
BUSY_TIMEOUT_MS = 500
PSQL_TIMEOUT_S = 10
PG_NAME_BYTES = 63            # PostgreSQL cuts longer identifiers (NAMEDATALEN - 1)
MARK = ".crashlab-store"      # beside a store crashlab made outside its output folder: it may delete that file


@dataclass(slots=True)
class Rows:
    """What a read found that the previous reads had not: (view, order number, record or raw text)."""

    items: list = field(default_factory=list)
    problem: str | None = None      # the store could not be read (the reason)


def _record(text):
    try:
        return json.loads(text) if isinstance(text, (str, bytes)) else text
    except ValueError:
        return text


def _ordered(found: dict[str, list]) -> list:
    """Rows of every view in written order: by commit stamp where all have one, else view by view."""
    rows = [(view, n, rec, stamp) for view in VIEWS for n, rec, stamp in found.get(view, ())]
    if rows and all(stamp is not None for *_, stamp in rows):
        rows.sort(key=lambda r: (r[3], list(VIEWS).index(r[0]), r[1]))
    return [(view, n, rec) for view, n, rec, _ in rows]


class SqliteStore:
    """One run's SQLite database at ``path``, read incrementally."""

    def __init__(self, path: str | Path, *, home: Path | None = None) -> None:
        self.path = Path(path)
        self.home = home           # the output folder: a file inside it is crashlab's to delete
        self.seen = {name: None for name in VIEWS}    # view -> the last order value read
        self.views_found: set[str] = set()

    @property
    def worker_db(self) -> str:
        return str(self.path)

    @property
    def folders(self) -> tuple[str, ...]:
        """What the worker may write under namespaces isolation: the folder holding the database
        (SQLite writes its journal beside it)."""
        return (str(self.path.parent),)

    @property
    def mark(self) -> Path:
        return self.path.with_name(self.path.name + MARK)

    def _ours(self) -> bool:
        """Whether crashlab made the file at ``path`` (inside its output folder, or marked by it)."""
        if self.home is not None and self.path.resolve().is_relative_to(Path(self.home).resolve()):
            return True
        return self.mark.is_file()

    def check(self, flag: str = "--store") -> None:
        """UsageError when resetting would delete a file crashlab did not make."""
        if (self.path.exists() or self.path.is_symlink()) and not self._ours():
            raise UsageError(f"{flag} sqlite:{self.path}: the file exists and crashlab did not make it; every run starts "
                             "from an empty store and crashlab never deletes a file it did not make",
                             hint="move the file away, or give sqlite:{db} (one database per run in the output folder)")
        if self.path.is_dir():
            raise UsageError(f"{flag} sqlite:{self.path}: is a folder", hint="give a file path, or sqlite:{db}")

    def reset(self) -> None:
        """Every integration run starts from an empty store; a file crashlab did not make is refused."""
        self.check()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()
            for extra in ("-wal", "-shm", "-journal"):      # SQLite's side files of the deleted database
                side = self.path.with_name(self.path.name + extra)
                if side.is_file():
                    side.unlink()
        if self.home is None or not self.path.resolve().is_relative_to(Path(self.home).resolve()):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.mark.write_text(f"{self.path.name} was made for a crashlab integration run; crashlab deletes it "
                                 "before its next run there\n", encoding="utf-8")

    def read(self) -> Rows:
        out = Rows()
        if not self.path.exists():
            return out
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            out.problem = f"cannot open {self.path}: {exc}"
            return out
        found: dict[str, list] = {}
        problems = []
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('view', 'table')")}
            for name, (view, order) in VIEWS.items():
                if view not in names:
                    continue
                last = self.seen[name]
                try:   # one unreadable view (a renamed column) leaves the others readable, and says why
                    rows = conn.execute(f"SELECT {order}, record FROM {view} WHERE ? IS NULL OR {order} > ? "
                                        f"ORDER BY {order}", (last, last)).fetchall()
                except sqlite3.Error as exc:
                    problems.append(f"the view {view} of {self.path} cannot be read: {exc} (docs/integration.md, "
                                    f"\"The store views\": it needs the columns {order} and record)")
                    continue
                self.views_found.add(name)
                found[name] = [(number, _record(text), None) for number, text in rows]
                if rows:
                    self.seen[name] = rows[-1][0]
        except sqlite3.Error as exc:
            problems.append(f"cannot read the views of {self.path}: {exc}")
        finally:
            conn.close()
        if problems:
            out.problem = "; ".join(problems)
        out.items = _ordered(found)
        return out


_LOOPBACK = {"127.0.0.1", "localhost", "::1", ""}


class PostgresStore:
    """One run's PostgreSQL database, read incrementally through ``psql``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen = {name: None for name in VIEWS}
        self.views_found: set[str] = set()
        self.stamped: dict[str, bool] = {}     # view -> it has a committed_at column

    @property
    def worker_db(self) -> str:
        return self.url

    @property
    def folders(self) -> tuple[str, ...]:
        return ()          # the server's, reached over 127.0.0.1

    def _psql(self, sql: str, url: str | None = None) -> str:
        done = subprocess.run(["psql", url or self.url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                              capture_output=True, text=True, timeout=PSQL_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "psql failed")
        return done.stdout

    def reset(self) -> None:
        """Drop and create the run's database (through the server's ``postgres`` database)."""
        parts = urlsplit(self.url)
        name = parts.path.lstrip("/")
        admin = urlunsplit(parts._replace(path="/postgres"))
        try:
            self._psql(f'DROP DATABASE IF EXISTS "{name}"', admin)
            self._psql(f'CREATE DATABASE "{name}"', admin)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(f"--store {self.url}: cannot create the run's database: {exc}",
                             hint="give a PostgreSQL server on 127.0.0.1 whose user may create databases") from None

    def read(self) -> Rows:
        out = Rows()
        try:
            if len(self.views_found) < len(VIEWS):
                listed = self._psql("SELECT table_name || ':' || string_agg(column_name, ',') FROM "
                                    "information_schema.columns WHERE table_name LIKE 'crashlab\\_%' "
                                    "GROUP BY table_name")
                for line in listed.splitlines():
                    table, _, columns = line.partition(":")
                    for name, (view, _) in VIEWS.items():
                        if table == view:
                            self.views_found.add(name)
                            self.stamped[name] = "committed_at" in columns.split(",")
            parts = []
            for name, (view, order) in VIEWS.items():
                if name not in self.views_found:
                    continue
                stamp = "extract(epoch FROM committed_at)" if self.stamped.get(name) else "NULL"
                last = self.seen[name]
                where = f"WHERE {order} > {int(last)}" if last is not None else ""
                parts.append(f"'{name}', (SELECT coalesce(json_agg(json_build_array({order}, record, {stamp}) "
                             f"ORDER BY {order}), '[]') FROM {view} {where})")
            if not parts:
                return out
            found_json = json.loads(self._psql(f"SELECT json_build_object({', '.join(parts)})") or "{}")
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            out.problem = f"cannot read the views of {self.url}: {exc}"
            return out
        found: dict[str, list] = {}
        for name, rows in found_json.items():
            found[name] = [(number, _record(text), stamp) for number, text, stamp in rows]
            if rows:
                self.seen[name] = rows[-1][0]
        out.items = _ordered(found)
        return out


def _pg_name(template_path: str, *, scenario: str, run: str, out: Path) -> str:
    """The run's database name: ``crashlab_<hash>_<scenario>_<run>``, cut to fit PostgreSQL's 63 bytes
    with the rest of the URL's path; the hash (of the output folder, scenario and run) keeps every
    run's name its own whatever is cut."""
    digest = hashlib.sha256(f"{Path(out).resolve()}\0{scenario}\0{run}".encode()).hexdigest()[:10]
    fixed = template_path.lstrip("/").replace("{db}", "")
    if not re.fullmatch(r"[A-Za-z0-9_]*", fixed):
        raise UsageError(f"--store: the database name around {{db}} ({template_path.lstrip('/')!r}) may hold only "
                         "letters, digits and _", hint="e.g. postgresql://USER@127.0.0.1:PORT/teamA_{db}")
    budget = PG_NAME_BYTES - len(fixed)
    head = f"crashlab_{digest}"
    if budget < len(head):
        raise UsageError(f"--store: the database name around {{db}} ({template_path.lstrip('/')!r}) leaves "
                         f"{max(budget, 0)} of PostgreSQL's {PG_NAME_BYTES} bytes; crashlab needs {len(head)}",
                         hint="shorten the prefix")
    slug = re.sub(r"[^a-z0-9_]", "_", f"_{scenario}_{run}".lower())
    return (head + slug)[:budget]


def sqlite_db(out: Path, run: str) -> Path:
    """``sqlite:{db}``: the run's database, in a folder of its own that holds no crashlab output (the
    one folder a worker may write under namespaces isolation, beside its temporary folder)."""
    return Path(out) / "stores" / run / f"{run}.sqlite"


def open_store(template: str, *, scenario: str, run: str, out: Path) -> SqliteStore | PostgresStore:
    """The store of ``run`` from ``--store``: ``sqlite:{db}`` (a database per run, ``out/stores/RUN/``),
    ``sqlite:PATH`` ({scenario} and {run} replaced), or ``postgresql://USER@127.0.0.1:PORT/{db}``."""
    if template.startswith("sqlite:"):
        path = template[len("sqlite:"):]
        if path in ("", "{db}"):
            return SqliteStore(sqlite_db(out, run), home=out)
        path = path.replace("{scenario}", scenario).replace("{run}", run).replace("{db}", str(sqlite_db(out, run)))
        return SqliteStore(Path(path), home=out)
    if template.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(template)
        if (parts.hostname or "") not in _LOOPBACK:
            raise UsageError(f"--store {template}: the database must be on 127.0.0.1 (or a local socket); "
                             "an integration run sends nothing off this machine")
        if shutil.which("psql") is None:
            raise UsageError("--store postgresql://...: crashlab reads the views with psql, which is not on PATH",
                             hint="install the PostgreSQL client (Debian: postgresql-client)")
        if "{db}" not in parts.path:
            raise UsageError(f"--store {template}: put {{db}} where the database name goes "
                             "(postgresql://USER@127.0.0.1:PORT/{db}): each run gets its own, created empty")
        name = _pg_name(parts.path, scenario=scenario, run=run, out=out)
        return PostgresStore(template.replace("{db}", name))
    raise UsageError(f"--store {template!r}: give sqlite:{{db}} or postgresql://USER@127.0.0.1:PORT/{{db}}")


def plan_stores(template: str, runs: list[tuple[str, str, Path]]) -> None:
    """Before any worker runs: every (scenario, run, output folder) gets a store of its own, and no
    existing file crashlab did not make would be deleted. UsageError (exit 3) otherwise."""
    owner: dict[str, tuple[str, str]] = {}
    for scenario, run, out in runs:
        st = open_store(template, scenario=scenario, run=run, out=out)
        where = st.worker_db if isinstance(st, PostgresStore) else str(Path(st.worker_db).resolve())
        if where in owner and owner[where] != (scenario, run):
            first = "/".join(owner[where])
            raise UsageError(f"--store {template}: {first} and {scenario}/{run} would share one store ({st.worker_db}); "
                             "every run needs its own",
                             hint="put {scenario} and {run} in the path, or give sqlite:{db}")
        owner[where] = (scenario, run)
        if isinstance(st, SqliteStore):
            st.check()
