"""The worker's own store (SQLite): lease, effect ledger, checkpoints, finish.

Every write is fenced by the lease epoch in the same transaction; crashlab reads the
three views.  A `Stale` exception means a newer worker took the run over.
"""
import json
import os
import signal
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER, owner TEXT);
CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (version INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finish (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE VIEW IF NOT EXISTS crashlab_ledger AS SELECT seq, record FROM ledger;
CREATE VIEW IF NOT EXISTS crashlab_checkpoints AS SELECT version, record FROM checkpoints;
CREATE VIEW IF NOT EXISTS crashlab_finish AS SELECT seq, record FROM finish;
"""

_counts = {}


def failpoint(point, boundary):
    """crashlab's failpoint contract: PORT.OP:NTH:BOUNDARY items, counted per process."""
    if boundary == "before":
        _counts[point] = _counts.get(point, 0) + 1
    for item in filter(None, os.environ.get("CRASHLAB_FAILPOINT", "").split(",")):
        where, nth, when = item.rsplit(":", 2)
        if where == point and int(nth) == _counts.get(point) and when == boundary:
            os.kill(os.getpid(), signal.SIGKILL)


class Stale(Exception):
    """A newer lease epoch exists: this worker must write and send nothing more."""


class Store:
    def __init__(self, path, epoch, owner):
        self.path, self.epoch, self.owner = path, int(epoch), owner
        self.db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        for _ in range(50):
            try:
                self.db.executescript(SCHEMA)
                break
            except sqlite3.OperationalError:
                time.sleep(0.05)

    # -- lease ---------------------------------------------------------------
    def acquire(self):
        with self._tx() as cur:
            row = cur.execute("SELECT epoch FROM lease WHERE id = 1").fetchone()
            if row and row[0] > self.epoch:
                raise Stale(row[0])
            cur.execute("INSERT OR REPLACE INTO lease (id, epoch, owner) VALUES (1, ?, ?)",
                        (self.epoch, self.owner))

    def confirm(self):
        row = self.db.execute("SELECT epoch FROM lease WHERE id = 1").fetchone()
        if not row or row[0] != self.epoch:
            raise Stale(row and row[0])

    class _Tx:
        def __init__(self, db):
            self.db = db

        def __enter__(self):
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, et, ev, tb):
            self.db.execute("ROLLBACK" if et else "COMMIT")
            return False

    def _tx(self):
        return Store._Tx(self.db)

    def _fenced_insert(self, point, sql, args):
        failpoint(point, "before")
        with self._tx() as cur:
            row = cur.execute("SELECT epoch FROM lease WHERE id = 1").fetchone()
            if not row or row[0] != self.epoch:
                raise Stale(row and row[0])
            cur.execute(sql, args)
        failpoint(point, "after")

    # -- ledger --------------------------------------------------------------
    def append(self, entry):
        entry = dict(entry, lease_epoch=self.epoch)
        self._fenced_insert("ledger.append", "INSERT INTO ledger (record) VALUES (?)",
                            (json.dumps(entry, sort_keys=True),))
        return entry

    def latest(self, key):
        last = None
        for (rec,) in self.db.execute("SELECT record FROM ledger ORDER BY seq"):
            r = json.loads(rec)
            if r["semantic_key"] == key:
                last = r
        return last

    def entries(self, key):
        return [json.loads(rec) for (rec,) in self.db.execute("SELECT record FROM ledger ORDER BY seq")
                if json.loads(rec)["semantic_key"] == key]

    # -- checkpoints -----------------------------------------------------------
    def checkpoint(self):
        row = self.db.execute("SELECT version, record FROM checkpoints ORDER BY version DESC LIMIT 1").fetchone()
        return (row[0], json.loads(row[1])) if row else (0, None)

    def write_checkpoint(self, record):
        version, _ = self.checkpoint()
        record["control"]["state_version"] = version + 1
        record["control"]["owner"] = self.owner
        record["control"]["lease_epoch"] = self.epoch
        self._fenced_insert("checkpoints.write", "INSERT INTO checkpoints (version, record) VALUES (?, ?)",
                            (version + 1, json.dumps(record, sort_keys=True)))

    # -- finish and meta -------------------------------------------------------
    def finished(self):
        row = self.db.execute("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None

    def write_finish(self, record):
        record = dict(record, owner=self.owner)
        self._fenced_insert("run.finish", "INSERT INTO finish (record) VALUES (?)",
                            (json.dumps(record, sort_keys=True),))

    def meta(self, k):
        row = self.db.execute("SELECT v FROM meta WHERE k = ?", (k,)).fetchone()
        return row[0] if row else None

    def set_meta(self, k, v):
        with self._tx() as cur:
            cur.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (k, v))
