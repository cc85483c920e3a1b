"""The worker's own store (SQLite) for the independent Temporal worker.

Everything the run knows lives here, outside Temporal's history: the effect ledger, the
checkpoints, the finish, a lease of our own (epoch + real-time expiry) and a private
`aux` table per semantic key (scenario times of the last send, the earliest resend time,
read budget). Every write is fenced by the lease epoch inside the same transaction.
"""
import json
import os
import signal
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (version INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finish (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL,
                                  owner TEXT NOT NULL, expires_real REAL NOT NULL);
CREATE TABLE IF NOT EXISTS aux (skey TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS crashlab_ledger AS SELECT seq, record FROM ledger;
CREATE VIEW IF NOT EXISTS crashlab_checkpoints AS SELECT version, record FROM checkpoints;
CREATE VIEW IF NOT EXISTS crashlab_finish AS SELECT seq, record FROM finish;
"""

_fp_counts = {}


def failpoint(point, boundary):
    """crashlab's failpoint contract (docs/integration.md): SIGKILL at the armed store write."""
    if boundary == "before":
        _fp_counts[point] = _fp_counts.get(point, 0) + 1
    for item in filter(None, os.environ.get("CRASHLAB_FAILPOINT", "").split(",")):
        where, nth, when = item.rsplit(":", 2)
        if where == point and int(nth) == _fp_counts.get(point) and when == boundary:
            os.kill(os.getpid(), signal.SIGKILL)


class Stale(Exception):
    """A newer lease epoch exists: this worker must write and send nothing more."""


class LeaseBusy(Exception):
    def __init__(self, wait_s):
        super().__init__(f"lease held by another live worker for {wait_s:.3f}s")
        self.wait_s = wait_s


class Store:
    def __init__(self, path, epoch, owner, lease_real_s):
        self.path, self.epoch, self.owner, self.lease_real_s = path, epoch, owner, lease_real_s
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    # -- lease -------------------------------------------------------------------------
    def acquire(self):
        """Take or renew the lease. Stale if a newer epoch holds it; LeaseBusy if an older
        holder's lease has not expired yet (it may only be paused)."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT epoch, owner, expires_real FROM lease WHERE id = 1").fetchone()
            if row and row[0] > self.epoch:
                raise Stale(f"lease epoch {row[0]} ({row[1]}) is newer than ours ({self.epoch})")
            if row and row[0] < self.epoch and row[2] > now:
                raise LeaseBusy(row[2] - now)
            self.db.execute("INSERT OR REPLACE INTO lease (id, epoch, owner, expires_real) VALUES (1, ?, ?, ?)",
                            (self.epoch, self.owner, now + self.lease_real_s))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _fence(self):
        row = self.db.execute("SELECT epoch, expires_real FROM lease WHERE id = 1").fetchone()
        if row is None or row[0] != self.epoch:
            raise Stale(f"lease is {row and row[0]}, ours is {self.epoch}")
        # a write also renews our lease
        self.db.execute("UPDATE lease SET expires_real = ? WHERE id = 1", (time.time() + self.lease_real_s,))

    def _write(self, point, sql, args):
        failpoint(point, "before")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._fence()
            self.db.execute(sql, args)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        failpoint(point, "after")

    # -- records -----------------------------------------------------------------------
    def append(self, entry):
        self._write("ledger.append", "INSERT INTO ledger (record) VALUES (?)", (json.dumps(entry, sort_keys=True),))

    def checkpoint(self, cp):
        version = cp["control"]["state_version"]
        failpoint("checkpoints.write", "before")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self._fence()
            latest = self.db.execute("SELECT COALESCE(MAX(version), 0) FROM checkpoints").fetchone()[0]
            if latest != version - 1:
                raise Stale(f"checkpoint version conflict: store at {latest}, writing {version}")
            self.db.execute("INSERT INTO checkpoints (version, record) VALUES (?, ?)",
                            (version, json.dumps(cp, sort_keys=True)))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        failpoint("checkpoints.write", "after")

    def finish(self, rec):
        self._write("run.finish", "INSERT INTO finish (record) VALUES (?)", (json.dumps(rec, sort_keys=True),))

    def set_aux(self, skey, data):
        self._write("aux.write", "INSERT OR REPLACE INTO aux (skey, data) VALUES (?, ?)", (skey, json.dumps(data)))

    def set_meta(self, k, v):
        self.db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (k, json.dumps(v)))

    # -- reads -------------------------------------------------------------------------
    def meta(self, k, default=None):
        row = self.db.execute("SELECT v FROM meta WHERE k = ?", (k,)).fetchone()
        return json.loads(row[0]) if row else default

    def aux(self, skey):
        row = self.db.execute("SELECT data FROM aux WHERE skey = ?", (skey,)).fetchone()
        return json.loads(row[0]) if row else {}

    def latest(self, skey):
        for (rec,) in self.db.execute("SELECT record FROM ledger ORDER BY seq DESC"):
            entry = json.loads(rec)
            if entry["semantic_key"] == skey:
                return entry
        return None

    def last_checkpoint(self):
        row = self.db.execute("SELECT record FROM checkpoints ORDER BY version DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None

    def finished(self):
        row = self.db.execute("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None
