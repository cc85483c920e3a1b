"""A careful integration worker: standard library and sqlite3 only.

    crashlab integrate t2-commit-before-record \
        --worker 'python3 examples/integration/worker.py {url} {db}' --store 'sqlite:{db}'

It reserves the run's intent on the sandbox's reservation service over real HTTP and keeps its
state in its own SQLite database, which crashlab reads through three views (crashlab_checkpoints,
crashlab_ledger, crashlab_finish). The discipline it follows (AR-08): prepare the effect with a
stable semantic key (PROPOSED) before anything leaves, append SENT_UNKNOWN before every send,
treat every 5xx, timeout and closed connection as ambiguous and resolve it only by an
authoritative read of the key, never resend blind; a definite refusal is final; 429 waits its
Retry-After; 409 waits for the key to settle and reads it.

``--mistake NAME`` plants one mistake, for showing that crashlab catches it:
  blind_retry         resend at once after a 5xx or a closed connection, with no read
  sent_unknown_after  append SENT_UNKNOWN only after the answer (the ledger says PROPOSED while
                      the request is out)
  closed_as_not_sent  take a closed connection as "nothing was sent" and resend without a read
  no_lease            keep no lease: a worker paused past its lease resumes and writes as if it still
                      owned the run
  short_throttle_wait wait a fifth of a 429's Retry-After before sending again
  ignores_cancellation read the inbox and go on: a delivered cancellation never stops a send
  tenantless_key      derive the key from the intent without its tenant and principal
  trusts_early_negative take the first read that finds nothing as proof that nothing was sent, and
                      send again (before the late-delivery bound, or while the reads still lag)
  early_negative_read trust the first empty read: a lookup still in flight, or a search before the
                      late-delivery bound, taken as proof that nothing landed
  callback_confirms   take a completion callback in the inbox as the confirmation of the effect
  attempt_key         derive the key from the intent and the worker's number (the attempt): a
                      restarted worker sends under a key of its own
  resend_after_restart a restarted worker finding SENT_UNKNOWN sends again, with no read
  no_next_owner       finish with the effect unknown naming no next owner
  no_cancel_check     read the inbox once at the start, never again before a send
  no_approval_check   never ask the authority: send without a live approval bound to the proposal
  unrecorded_duplicates ignore a duplicate delivery without recording its disposition (the careful
                      worker lists every duplicate it saw in each later checkpoint's evidence)
  clock_lease         judge the lease by its own clock: it holds until this worker's time.time() passes
                      the expiry it set, and writes and sends unfenced until then (a worker whose clock
                      runs slow resumes from a pause believing its lease still live)
  reads_old_schema    after a deployment, read the old version's checkpoint as this version's own: no
                      migration, no pin, and its checkpoints claim the new versions (MIG-01)
  release_without_authority compensate a cancelled confirmed hold without an approval of the release's own
                      (AUTH-01: the original's authority is not the corrective action's)

Deployments: the worker runs the versions crashlab gives it (CRASHLAB_CODE_VERSION,
CRASHLAB_SCHEMA_VERSION, CRASHLAB_CANONICALIZATION_VERSION, CRASHLAB_POLICY_VERSION,
CRASHLAB_CAPABILITY_VERSION; 1 when absent) and writes them as each checkpoint's contract. Before it
prepares anything it compares them with the run's latest checkpoint (AR-08, "Deployment
compatibility"): the same versions are replayed; a checkpoint schema 1 under schema 2 is migrated
(a MIGRATING checkpoint with its transformation record, no effect, then the run goes on); any other
difference (canonicalization, policy or capability) has no tested migration here, so the run is pinned
to the old code: a PINNED finish naming the old versions (``packet.pinned_env``), after which crashlab
drains the run with the old command (``--worker``), nothing sent by this version.

Compensation (AR-08, "Compensation as forward recovery"): a cancellation found after the hold was confirmed
is answered with a release, where the service offers one (``compensation`` in its profile): a separate
effect with its own key (``rel-...``), its own proposal and its own approval (asked of the authority with
action ``release``: the original's approval is not the corrective action's), a compensation ledger entry
linking the original (which moves to COMPENSATION_PROPOSED), SENT_UNKNOWN before the send, and a lookup
of the original's key to verify it. A verified release makes the original COMPENSATED and the run
CANCELLED_NO_EFFECT; a release that stays unknown ends CANCELLED_EFFECT_UNKNOWN, a refused or denied one
CANCELLED_EFFECT_REMAINS, both naming the operator, and both records are kept.

Approvals: before anything is prepared the worker asks the sandbox's authority whether an approval
bound to the proposal's hash is live. A run with a standing approval (its scenario declares none)
goes on at once; otherwise it requests one and waits durably (WAITING_HUMAN, next owner the
approver): crashlab starts the run's next worker when the approval (or anything else) reaches its
inbox. Before every send it asks again; a revoked approval, or a policy that denies it, ends the
run with nothing sent.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse

# --------------------------------------------------------------------------- failpoint helper
_FAILPOINT_COUNTS: dict = {}


def failpoint(point: str, boundary: str) -> None:
    """Die here (SIGKILL, as a crash would) when CRASHLAB_FAILPOINT names this point, e.g.
    ``ledger.append:2:before`` (the second ledger append of this process, before it commits)."""
    if boundary == "before":
        _FAILPOINT_COUNTS[point] = _FAILPOINT_COUNTS.get(point, 0) + 1
    for item in filter(None, os.environ.get("CRASHLAB_FAILPOINT", "").split(",")):
        where, nth, when = item.rsplit(":", 2)
        if where in (point, point.split(".")[0] + ".*") and int(nth) == _FAILPOINT_COUNTS.get(point) \
                and when == boundary:
            os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- the store
SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (version INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finish (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS crashlab_checkpoints AS SELECT version, record FROM checkpoints;
CREATE VIEW IF NOT EXISTS crashlab_ledger AS SELECT seq, record FROM ledger;
CREATE VIEW IF NOT EXISTS crashlab_finish AS SELECT seq, record FROM finish;
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL,
                                  owner TEXT NOT NULL, expires REAL NOT NULL);
"""


class Stale(Exception):
    """A newer worker holds the run's lease: this one stops, writing and sending nothing more."""


class Terminated(Stale):
    """A deployment stopped this worker (SIGTERM): it stops at its next safe point, before any request
    leaves, with every store write it began committed."""


_TERM: list[int] = []        # SIGTERM came: stop before the next request (Client.call)


def terminate_at_safe_point() -> None:
    """SIGTERM (a deployment stopping the old code) sets a flag; the worker stops at its next request."""
    signal.signal(signal.SIGTERM, lambda signum, frame: _TERM.append(signum))


class Store:
    """The worker's SQLite store. Every write is fenced by the lease epoch in the same transaction:
    a paused worker that resumes after a newer one took over writes nothing."""

    clock_lease = False        # the clock_lease mistake: the lease is live while this worker's clock says so
    held_until = 0.0           # that mistake's expiry, on this worker's own clock

    def by_clock(self) -> bool:
        """The clock_lease mistake: True (go on, unfenced) while the worker's own clock says the lease
        holds; Stale once it says it expired."""
        if not self.clock_lease:
            return False
        if time.time() > self.held_until:
            raise Stale("the lease expired by this worker's clock")
        return True

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=10, isolation_level=None)
        self.db.executescript(SCHEMA)
        self.epoch: int | None = None       # None: no lease kept (the no_lease mistake)
        self.ttl = 0.3

    def acquire(self, epoch: int, owner: str, ttl: float) -> None:
        """Take the run's lease once the previous holder's has expired (a crashed or paused holder
        keeps it until then); a newer epoch there already means this worker is stale."""
        self.ttl = ttl
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute("SELECT epoch, expires FROM lease WHERE id = 1").fetchone()
            if row is not None and row[0] > epoch:
                self.db.execute("ROLLBACK")
                raise Stale(f"epoch {row[0]} holds the run")
            if row is None or row[0] == epoch or row[1] < time.time():
                self.db.execute("INSERT OR REPLACE INTO lease VALUES (1, ?, ?, ?)", (epoch, owner, time.time() + ttl))
                self.db.execute("COMMIT")
                self.epoch = epoch
                return
            self.db.execute("ROLLBACK")
            time.sleep(0.01)
        raise Stale("the previous holder's lease never expired")

    def own(self) -> None:
        """Confirm (and renew) the lease right before a send; Stale when a newer worker took it."""
        if self.epoch is None or self.by_clock():
            self.held_until = time.time() + self.ttl
            return
        done = self.db.execute("UPDATE lease SET expires = ? WHERE id = 1 AND epoch = ?",
                               (time.time() + self.ttl, self.epoch))
        if done.rowcount != 1:
            raise Stale("a newer worker holds the run")

    def release(self, epoch: int) -> None:
        """Give the lease up (a pinned run's old-code worker takes it at once)."""
        self.db.execute("DELETE FROM lease WHERE id = 1 AND epoch = ?", (epoch,))

    def _write(self, point: str, sql: str, record: dict) -> None:
        failpoint(point, "before")
        text = json.dumps(record, sort_keys=True)
        if self.epoch is None or self.by_clock():
            self.db.execute(sql, (text,))
        else:   # fenced: the row lands only while this worker's epoch holds the lease
            self.db.execute("BEGIN IMMEDIATE")
            done = self.db.execute(sql.replace("VALUES (?)", "SELECT ? WHERE (SELECT epoch FROM lease WHERE id = 1) = ?"),
                                   (text, self.epoch))
            self.db.execute("COMMIT")
            if done.rowcount != 1:
                raise Stale("a newer worker holds the run")
        failpoint(point, "after")

    def checkpoint(self) -> dict | None:
        row = self.db.execute("SELECT record FROM checkpoints ORDER BY version DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None

    def write_checkpoint(self, record: dict) -> None:
        self._write("checkpoints.write", "INSERT INTO checkpoints (record) VALUES (?)", record)

    def entries(self, key: str) -> list[dict]:
        rows = self.db.execute("SELECT record FROM ledger ORDER BY seq").fetchall()
        return [e for e in (json.loads(r[0]) for r in rows) if e["semantic_key"] == key]

    def append(self, entry: dict) -> None:
        self._write("ledger.append", "INSERT INTO ledger (record) VALUES (?)", entry)

    def finished(self) -> bool:
        """The run ended (a terminal finish row; a durable wait is woken by a new worker)."""
        row = self.db.execute("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").fetchone()
        return row is not None and json.loads(row[0]).get("disposition") in TERMINAL

    def finish(self, record: dict) -> None:
        self._write("run.finish", "INSERT INTO finish (record) VALUES (?)", record)


class PsqlStore(Store):
    """The same store on PostgreSQL (a ``postgresql://`` {db}), through the psql client: no driver
    needed. The views carry each row's commit timestamp where the server tracks them, so crashlab
    orders the writes it reads in one batch as they were committed."""

    TABLES = """
    CREATE TABLE IF NOT EXISTS checkpoints (version BIGSERIAL PRIMARY KEY, record TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS ledger (seq BIGSERIAL PRIMARY KEY, record TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS finish (seq BIGSERIAL PRIMARY KEY, record TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL,
                                      owner TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL);
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.epoch: int | None = None
        self.ttl = 0.3
        stamp = ", pg_xact_commit_timestamp(xmin) AS committed_at" \
            if self.sql("SHOW track_commit_timestamp").strip() == "on" else ""
        self.sql(self.TABLES + "".join(
            f"CREATE OR REPLACE VIEW crashlab_{t} AS SELECT {k}, record{stamp} FROM {t};\n"
            for t, k in (("checkpoints", "version"), ("ledger", "seq"), ("finish", "seq"))))

    def sql(self, text: str, **values: str) -> str:
        argv = ["psql", self.url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        for name, value in values.items():
            argv += ["-v", f"{name}={value}"]
        done = subprocess.run(argv + ["-f", "-"], input=text, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise SystemExit(f"store: {done.stderr.strip()}")
        return done.stdout

    def acquire(self, epoch: int, owner: str, ttl: float) -> None:
        self.ttl = ttl
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = self.sql("INSERT INTO lease VALUES (1, :epoch, :'owner', :expires) ON CONFLICT (id) DO UPDATE "
                           "SET epoch = excluded.epoch, owner = excluded.owner, expires = excluded.expires "
                           "WHERE lease.epoch = excluded.epoch OR (lease.expires < :now AND lease.epoch < excluded.epoch) "
                           "RETURNING epoch;", epoch=str(epoch), owner=owner, expires=repr(time.time() + ttl),
                           now=repr(time.time()))
            if got.strip():
                self.epoch = epoch
                return
            held = self.sql("SELECT epoch FROM lease WHERE id = 1;").strip()
            if held and int(held) > epoch:
                raise Stale(f"epoch {held} holds the run")
            time.sleep(0.01)
        raise Stale("the previous holder's lease never expired")

    def release(self, epoch: int) -> None:
        self.sql("DELETE FROM lease WHERE id = 1 AND epoch = :epoch;", epoch=str(epoch))

    def own(self) -> None:
        if self.by_clock():
            self.held_until = time.time() + self.ttl
        elif self.epoch is not None and not self.sql(
                "UPDATE lease SET expires = :expires WHERE id = 1 AND epoch = :epoch RETURNING epoch;",
                expires=repr(time.time() + self.ttl), epoch=str(self.epoch)).strip():
            raise Stale("a newer worker holds the run")

    def _write(self, point: str, sql: str, record: dict) -> None:
        failpoint(point, "before")
        text = json.dumps(record, sort_keys=True)
        if self.epoch is None or self.by_clock():
            self.sql(sql.replace("?", ":'rec'") + ";", rec=text)
        elif not self.sql(sql.replace("VALUES (?)", "SELECT :'rec' WHERE (SELECT epoch FROM lease WHERE id = 1) = "
                                                    ":epoch RETURNING 1") + ";", rec=text, epoch=str(self.epoch)).strip():
            raise Stale("a newer worker holds the run")
        failpoint(point, "after")

    def checkpoint(self) -> dict | None:
        row = self.sql("SELECT record FROM checkpoints ORDER BY version DESC LIMIT 1").strip()
        return json.loads(row) if row else None

    def entries(self, key: str) -> list[dict]:
        rows = self.sql("SELECT record FROM ledger ORDER BY seq").splitlines()
        return [e for e in (json.loads(r) for r in rows if r) if e["semantic_key"] == key]

    def finished(self) -> bool:
        last = self.sql("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").strip()
        return bool(last) and json.loads(last).get("disposition") in TERMINAL


# --------------------------------------------------------------------------- the service client
class Ambiguous(Exception):
    """The request may have been executed: a 5xx, a timeout or a closed connection."""


class Closed(Ambiguous):
    """The connection closed with no answer."""


class Client:
    def __init__(self, base: str) -> None:
        parts = urllib.parse.urlsplit(base)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path

    def call(self, method: str, path: str, body: dict | None = None, key: str | None = None,
             timeout: float = 5.0) -> tuple[int, dict, dict]:
        if _TERM:
            raise Terminated("stopped by SIGTERM (a deployment) before a request")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)   # one connection per call
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            conn.request(method, self.prefix + path, json.dumps(body) if body is not None else None, headers)
            resp = conn.getresponse()
            data = json.loads(resp.read() or b"null")
            return resp.status, data, {k.lower(): v for k, v in resp.getheaders()}
        except (http.client.RemoteDisconnected, ConnectionError, http.client.IncompleteRead) as exc:
            raise Closed(str(exc)) from None
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            raise Ambiguous(str(exc)) from None
        finally:
            conn.close()


# --------------------------------------------------------------------------- the worker
TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}
ATTEMPT_CEILING = 5
MISTAKES = ("blind_retry", "sent_unknown_after", "closed_as_not_sent", "no_lease", "short_throttle_wait",
            "ignores_cancellation", "tenantless_key", "trusts_early_negative")
MISTAKES += ("early_negative_read", "callback_confirms", "attempt_key", "resend_after_restart", "no_next_owner",
             "no_cancel_check", "no_approval_check", "unrecorded_duplicates", "clock_lease", "reads_old_schema",
             "release_without_authority")
#: The versions crashlab gives a worker (CRASHLAB_<NAME>), written as each checkpoint's contract.
VERSIONS = ("code_version", "schema_version", "canonicalization_version", "policy_version", "capability_version")
#: The contract versions whose change can make an old checkpoint mean something else (the code version cannot).
CONTRACT = VERSIONS[1:]
#: (version, from, to) -> what the tested migration changes: the only one this worker has.
MIGRATIONS = {("schema_version", 1, 2): "contract.schema_version: 1 -> 2 (the same fields; the evidence "
                                        "and effects kept as they were)"}
LEASE_TTL_MS = 30_000     # scenario time; the sandbox's describe gives the time scale


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Worker:
    def __init__(self, url: str, db: str, mistake: str | None) -> None:
        self.client = Client(url)
        self.store = PsqlStore(db) if db.startswith(("postgresql://", "postgres://")) else Store(db)
        self.mistake = mistake
        self.worker = os.environ.get("CRASHLAB_WORKER", "worker")
        self.epoch = int(os.environ.get("CRASHLAB_EPOCH", "1"))
        self.run_id = os.environ.get("CRASHLAB_RUN", "run")
        self.duplicates: list[dict] = []     # every later delivery of an event id already seen
        self.versions = {k: int(os.environ.get(f"CRASHLAB_{k.upper()}") or 1) for k in VERSIONS}
        self.contract = dict(self.versions)  # the versions this worker's checkpoints are written under

    # -- records ------------------------------------------------------------------------
    def write(self, state: str, knowledge: str | None = None, migration: dict | None = None) -> None:
        """A new checkpoint version in ``state``, listing every effect with its current knowledge."""
        last = self.store.checkpoint()
        version = (last["control"]["state_version"] if last else 0) + 1
        effects = self.effects()
        self.store.write_checkpoint({
            "identity": {"run_id": self.run_id, "task_id": f"task-{self.run_id}",
                         "tenant": self.intent.get("tenant", ""), "principal": self.intent.get("principal", "")},
            "control": {"state": state, "state_version": version, "owner": self.worker,
                        "lease_epoch": self.epoch, "event_sequence": self.seen, "cancellation": {},
                        "deadline": getattr(self, "deadline", None), "budgets": {"attempt_ceiling": ATTEMPT_CEILING}},
            "contract": dict(self.contract),
            "evidence": {"proposal_hash": getattr(self, "phash", None),
                         **({"duplicates": self.duplicates} if self.duplicates else {})},
            "effects": effects, **({"migration": migration} if migration else {})})
        if migration:
            self.contract = {**self.contract, **migration["to"], "code_version": self.versions["code_version"]}
        self.state = state

    def append(self, knowledge: str, notice: bool = False, release: bool = False, **extra) -> None:
        """A ledger entry for the reservation (or, ``notice``, for the user notification; ``release``, for the
        compensation that releases the hold)."""
        key, intent = (self.notice_key, self.notice_intent) if notice else (self.key, self.intent)
        if release:
            key, intent = self.release_key, self.release_intent
        entries = self.store.entries(key)
        attempts = list(entries[-1]["attempts"]) if entries else []
        if knowledge == "SENT_UNKNOWN":
            attempts.append({"n": len(attempts) + 1, "at": time.time()})
        if release:
            extra.setdefault("compensates", self.key)
        self.store.append({"semantic_key": key, "kind": "compensation" if release else "effect",
                           "service": "notification" if notice else "reservation",
                           "operation": "send" if notice else ("release" if release else "reserve"),
                           "run_id": self.run_id, "intent": intent,
                           "intent_fingerprint": hashlib.sha256(canonical(intent).encode()).hexdigest()[:16],
                           "canonicalization_version": self.contract["canonicalization_version"],
                           "knowledge": knowledge, "attempts": attempts,
                           "lease_epoch": self.epoch, **extra})
        if notice:
            self.notice = knowledge
        elif release:
            self.release = knowledge
        else:
            self.knowledge = knowledge

    def finish(self, disposition: str, reason: str, next_owner: str | None = None, **extra) -> None:
        if self.mistake == "no_next_owner":
            next_owner = None
        self.write(disposition, self.knowledge)
        self.store.finish({"disposition": disposition, "reason": reason, "next_owner": next_owner,
                           "effects": self.effects(), **extra})

    # -- inbox --------------------------------------------------------------------------
    def poll(self) -> list[dict]:
        status, data, _ = self.client.call("GET", f"/inbox?after_seq=0")
        events = data.get("events", []) if status == 200 else []
        self.seen = max([e["seq"] for e in events] or [0])
        # a duplicate delivery causes no transition; its disposition goes in every later checkpoint's evidence
        first: set = set()
        for e in events:
            if e.get("event_id") in first and all(d["seq"] != e["seq"] for d in self.duplicates) \
                    and self.mistake != "unrecorded_duplicates":
                self.duplicates.append({"event_id": e["event_id"], "seq": e["seq"],
                                        "disposition": "duplicate: no transition"})
            first.add(e.get("event_id"))
        return events

    # -- the run ------------------------------------------------------------------------
    def begin(self) -> int | None:
        """Read the intake, the profile and the store, and take the lease: an exit status when there
        is nothing left to do (0: already finished; 3: no intake), None to go on."""
        if self.store.finished():
            return 0
        deadline = time.monotonic() + 10
        while True:
            events = self.poll()
            intake = next((e for e in events if e["type"] == "intake"), None)
            if intake is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if intake is None:
            print("no intake event arrived", file=sys.stderr)
            return 3
        _, self.profile, _ = self.client.call("GET", "/reservation")
        if self.mistake != "no_lease":     # one owner at a time: wait for a crashed or paused holder's lease
            self.store.acquire(self.epoch, self.worker, LEASE_TTL_MS / 1000 / self.profile.get("time_scale", 1))
            self.store.clock_lease, self.store.held_until = self.mistake == "clock_lease", time.time() + self.store.ttl
        self.intent = intake["payload"]["intent"]
        self.deadline = intake["payload"].get("deadline")      # the business deadline, kept in every checkpoint
        scoped = self.intent if self.mistake != "tenantless_key" else \
            {k: v for k, v in self.intent.items() if k not in ("tenant", "principal")}
        if self.mistake == "attempt_key":
            scoped = {**scoped, "attempt": self.epoch}
        self.key = "rsv-" + hashlib.sha256(canonical(scoped).encode()).hexdigest()[:20]
        self.phash = "sha256:" + hashlib.sha256(canonical({"action": "reserve", "intent": self.intent}).encode()).hexdigest()
        self.notify_user = bool(intake["payload"].get("notify"))
        self.notice_key = "msg-" + self.key[4:]          # the notification: its own identity
        self.notice_intent = {"tenant": self.intent.get("tenant"), "to": self.intent.get("technician"),
                              "message": f"part {self.intent.get('part')} reserved for {self.intent.get('incident')}"}
        notices = self.store.entries(self.notice_key)
        self.notice = notices[-1]["knowledge"] if notices else None
        self.release_key = "rel-" + self.key[4:]           # the compensation: its own identity, proposal and approval
        self.release_intent = {"tenant": self.intent.get("tenant"), "principal": self.intent.get("principal"),
                               "releases": self.key}
        self.release_hash = "sha256:" + hashlib.sha256(canonical({"action": "release",
                                                                  "intent": self.release_intent}).encode()).hexdigest()
        releases = self.store.entries(self.release_key)
        self.release = releases[-1]["knowledge"] if releases else None
        entries = self.store.entries(self.key)
        self.knowledge = entries[-1]["knowledge"] if entries else None
        last = self.store.checkpoint()
        self.state = last["control"]["state"] if last else "INTAKE"
        if self.state in TERMINAL:       # decided, but the finish row was lost in a crash
            owner = {"CANCELLED_EFFECT_REMAINS": "requester", "FAILED_EFFECT_UNKNOWN": "operator",
                     "CANCELLED_EFFECT_UNKNOWN": "operator", "FAILED_EFFECT_REMAINS": "operator"}.get(self.state)
            self.store.finish({"disposition": self.state, "reason": "recorded before a crash",
                               "next_owner": "operator" if self.notice == "SENT_UNKNOWN" else owner,
                               "effects": self.effects()})
            return 0
        return self.compatible(last)

    # -- deployments --------------------------------------------------------------------
    def compatible(self, last: dict | None) -> int | None:
        """The run's checkpoint against this code's versions, before anything is prepared or sent: None to
        go on (the same versions, or a tested migration done), 0 when the run is pinned to the old code."""
        if last is None or self.mistake == "reads_old_schema":
            return None
        old = {k: last.get("contract", {}).get(k, self.versions[k]) for k in VERSIONS}
        differing = [k for k in CONTRACT if old[k] != self.versions[k]]
        if not differing:
            return None
        if all((k, old[k], self.versions[k]) in MIGRATIONS for k in differing):
            previous = self.state
            self.write("MIGRATING", migration={
                "from": {k: old[k] for k in CONTRACT}, "to": {k: self.versions[k] for k in CONTRACT},
                "previous_version": last["control"]["state_version"], "previous_state": previous,
                "changes": [MIGRATIONS[(k, old[k], self.versions[k])] for k in differing],
                "kept": ["approval binding (not refreshed)", "unresolved effects", "semantic keys", "cancellation"]})
            self.write(previous)          # the pre-migration state, now under this code's contract
            return None
        what = ", ".join(f"{k} {old[k]} -> {self.versions[k]}" for k in differing)
        self.contract = old               # the run stays under the old versions: its checkpoint says so
        self.finish("PINNED", f"no tested migration for {what}: pinned to the old code, nothing done by this one",
                    next_owner="platform", owner=self.worker,
                    packet={"pinned_env": {k: old[k] for k in VERSIONS}, "from": dict(self.versions)})
        self.store.release(self.epoch)    # the pinned worker takes the run at once
        return 0

    def main(self) -> int:
        status = self.begin()
        if status is not None:
            return status
        if self.knowledge is None:
            if self.cancelled():
                self.finish("CANCELLED_NO_EFFECT", "cancelled before anything was prepared")
                return 0
            order = ["INTAKE", "VALIDATED", "PROPOSED"]
            for state in order[order.index(self.state) + 1:] if self.state in order else ():
                self.write(state)
            if not self.approved():
                return 0
            self.append("PROPOSED", note="prepared before any send")
            self.write("EFFECT_PREPARED", "PROPOSED")
        if self.knowledge == "SENT_UNKNOWN":
            if self.mistake == "resend_after_restart":
                self.knowledge = "PROPOSED"
            else:
                self.reconcile()
        if self.knowledge == "PROPOSED":
            self.dispatch()
        if self.knowledge == "CONFIRMED" and self.state not in TERMINAL:
            self.conclude_confirmed()
        if self.knowledge == "COMPENSATION_PROPOSED" and self.state not in TERMINAL:
            self.compensate()             # a restart while compensating
        return 0

    def conclude_confirmed(self) -> None:
        """The hold is confirmed: record it, then finish (cancelled: it remains; else notify, succeed)."""
        if self.state not in ("EFFECT_CONFIRMED", "NOTIFYING"):   # a restart while notifying stays there
            self.write("EFFECT_CONFIRMED", "CONFIRMED")
        if self.cancelled():
            if self.profile.get("compensation"):
                self.compensate()
            else:
                self.finish("CANCELLED_EFFECT_REMAINS", "cancelled after the hold was confirmed; it remains",
                            next_owner="requester")
        else:
            if self.notify_user:
                self.send_notice()
            self.finish("SUCCEEDED", "the hold is confirmed by the service",
                        next_owner="operator" if self.notice == "SENT_UNKNOWN" else None)

    def send_notice(self) -> None:
        """The user notification, a separate effect: prepared, SENT_UNKNOWN before its one send. The
        service has no read by key, so a notification whose outcome is unknown stays unknown (never
        re-sent, never reported delivered)."""
        if self.notice is None:
            self.append("PROPOSED", notice=True, note="the notification, prepared")
            self.write("NOTIFYING")
        if self.notice != "PROPOSED":
            return
        if self.state != "NOTIFYING":
            self.write("NOTIFYING")
        self.append("SENT_UNKNOWN", notice=True, note="about to send")
        self.store.own()
        try:
            status, data, _ = self.client.call("POST", "/notification/send",
                                               {"intent": self.notice_intent, "retry_owner": "caller"},
                                               key=self.notice_key)
        except Ambiguous:
            return
        if status == 200:
            self.append("CONFIRMED", notice=True, remote_ref=data.get("message_id") or data.get("ref"),
                        evidence=["send answered 200"])
        elif status < 500 and status != 429:
            self.append("REJECTED", notice=True, evidence=[f"definite refusal: HTTP {status}"])

    # -- compensation -------------------------------------------------------------------
    def compensate(self) -> None:
        """Release the confirmed hold the cancellation no longer wants: a separate effect with its own key, proposal
        and approval, prepared and recorded before it is sent, verified by a read of the original's key."""
        ref = next((e["remote_ref"] for e in reversed(self.store.entries(self.key)) if e.get("remote_ref")), None)
        if self.release is None:
            if not self.release_authorized():
                return
            self.append("PROPOSED", release=True, compensates=self.key, note="the release, prepared")
            self.append("COMPENSATION_PROPOSED", note=f"compensation {self.release_key} proposed")
        if self.state != "COMPENSATING":
            self.write("COMPENSATING")
        for _ in range(ATTEMPT_CEILING):
            if self.release == "PROPOSED":
                if self.mistake != "release_without_authority" and not self.authority("release").get("live"):
                    return self.released("REJECTED", "the release's approval is no longer live; nothing was sent")
                self.append("SENT_UNKNOWN", release=True, note="about to send the release")
                self.store.own()
                try:
                    status, data, _ = self.client.call(
                        "POST", "/reservation/release", {"ref": ref, "retry_owner": "caller",
                                                         "proposal_hash": self.release_hash}, key=self.release_key)
                except Ambiguous:
                    status, data = None, {}
                if status is not None and status < 500 and status not in (200, 429):
                    return self.released("REJECTED", f"the release was refused: HTTP {status}")
            verdict = self.verify_release()
            if verdict == "released":
                return self.released("CONFIRMED", "the original's record reads released")
            if verdict == "held":           # authoritatively not released: the release did not land
                self.append("PROPOSED", release=True, reconciliation=[{"query": "lookup", "found": True}],
                            evidence=["the original's record still reads active: the release did not land"])
                continue
            return self.finish("CANCELLED_EFFECT_UNKNOWN", "the release's outcome is unknown: the original's record "
                               "could not be read", next_owner="operator")
        self.released("REJECTED", "the release never landed within the attempt ceiling")

    def release_authorized(self) -> bool:
        """An approval of the release's own (action release), asked for when there is none; False when the
        run has finished (denied: the hold remains)."""
        if self.mistake == "release_without_authority":
            return True
        answer = self.authority("release")
        for _ in range(200):
            if answer.get("live") or str(answer.get("reason")) == "denied by policy":
                break
            self.client.call("POST", "/authority/request", {"proposal_hash": self.release_hash, "action": "release"})
            time.sleep(0.01)
            answer = self.authority("release")
        if answer.get("live"):
            return True
        self.finish("CANCELLED_EFFECT_REMAINS", f"cancelled after the hold was confirmed; no authority to release it "
                    f"({answer.get('reason')}): it remains", next_owner="operator")
        return False

    def verify_release(self) -> str:
        """The original's record by its key: released, held, or unknown (every read failed)."""
        for _ in range(200):
            try:
                status, data, _ = self.client.call("GET", "/reservation/lookup?" + urllib.parse.urlencode(
                    {"key": self.key}))
            except Ambiguous:
                status, data = None, {}
            if status == 200 and data.get("found") and not data.get("in_flight"):
                return "released" if data["record"].get("status") == "released" else "held"
            time.sleep(0.01)
        return "unknown"

    def released(self, knowledge: str, why: str) -> None:
        """The release settled: the compensation entry, then the original (COMPENSATED, or back to CONFIRMED
        when the release certainly failed), then the run's disposition."""
        self.append(knowledge, release=True, evidence=[why])
        if knowledge == "CONFIRMED":
            self.append("COMPENSATED", evidence=[f"released by {self.release_key}"])
            self.finish("CANCELLED_NO_EFFECT", "cancelled; the hold was released and the release verified")
        else:
            self.append("CONFIRMED", evidence=[f"the release {self.release_key} failed: {why}"])
            self.finish("CANCELLED_EFFECT_REMAINS", f"cancelled; the hold remains ({why})", next_owner="operator")

    # -- authority ----------------------------------------------------------------------
    def authority(self, action: str = "reserve") -> dict:
        """The authority's answer for this proposal, or the release's (anything but a 200 is not live)."""
        phash = self.release_hash if action == "release" else self.phash
        query = urllib.parse.urlencode({"proposal_hash": phash, "action": action})
        try:
            status, data, _ = self.client.call("GET", f"/authority/check?{query}")
        except (Ambiguous, Closed) as exc:
            return {"live": False, "reason": f"no answer: {exc}"}
        return data if status == 200 else {"live": False, "reason": f"HTTP {status}"}

    def approved(self) -> bool:
        """A live approval bound to the proposal: True to go on (APPROVED written). Otherwise the run
        ends or waits durably and False is returned: revoked or denied ends it with nothing sent;
        none yet (or expired, or of an old capability version) asks for one and waits for it."""
        if self.mistake == "no_approval_check":
            self.write("APPROVED")
            return True
        answer = self.authority()
        if answer.get("live"):
            self.write("APPROVED")
            return True
        reason = str(answer.get("reason"))
        if reason in ("revoked", "denied by policy"):
            self.finish("FAILED_NO_EFFECT", f"no authority for the proposal ({reason}); nothing was sent",
                        next_owner="approver")
            return False
        self.client.call("POST", "/authority/request", {"proposal_hash": self.phash, "action": "reserve"})
        self.finish("WAITING_HUMAN", f"waiting for an approval of the proposal ({reason})", next_owner="approver")
        return False

    def effects(self) -> list:
        return [{"key": k, "knowledge": v} for k, v in ((self.key, self.knowledge),
                                                         (getattr(self, "notice_key", None), getattr(self, "notice", None)),
                                                         (getattr(self, "release_key", None), getattr(self, "release", None)))
                if v]

    def cancelled(self) -> bool:
        events = self.poll()              # read even by the mistake: the cancellation was delivered
        return self.mistake != "ignores_cancellation" and any(e["type"] == "cancel" for e in events)

    def dispatch(self) -> None:
        attempts = 0
        while self.knowledge == "PROPOSED":
            if self.mistake != "no_cancel_check" and self.cancelled():       # checked right before every send
                self.append("REJECTED", evidence=["cancelled; no attempt left the worker since the last "
                                                  "authoritative absence"])
                self.finish("CANCELLED_NO_EFFECT", "cancelled before the send")
                return
            if self.mistake != "no_approval_check" and not self.authority().get("live"):   # right before every send
                self.append("REJECTED", evidence=["the approval is no longer live; nothing left the worker since "
                                                  "the last authoritative absence"])
                self.finish("FAILED_NO_EFFECT", "the approval is no longer live; nothing was sent",
                            next_owner="approver")
                return
            attempts += 1
            if attempts > ATTEMPT_CEILING:
                self.append("REJECTED", evidence=["every attempt was refused before execution"])
                self.finish("FAILED_NO_EFFECT", "attempt ceiling reached")
                return
            if self.mistake != "sent_unknown_after":
                self.append("SENT_UNKNOWN", note="about to send")
            if self.state != "EFFECT_IN_FLIGHT":
                self.write("EFFECT_IN_FLIGHT", self.knowledge)
            self.send()

    def send(self) -> None:
        self.store.own()             # still the owner, right before the send
        try:
            # retry_owner: this worker owns retries; a proxy in between must not re-send on its own
            # proposal_hash: the proposal this send carries out, the one the approval is bound to
            body = {"intent": self.intent, "retry_owner": "caller", "proposal_hash": self.phash}
            if self.profile.get("fencing"):          # the service checks the lease epoch as a fencing token
                body["fence"] = self.epoch
            status, data, headers = self.client.call("POST", "/reservation/reserve", body, key=self.key)
        except Closed as exc:
            if self.mistake == "sent_unknown_after":
                self.append("SENT_UNKNOWN", note="recorded after the answer")
            if self.mistake == "closed_as_not_sent":
                self.append("PROPOSED", note=f"connection closed ({exc}): taken as not sent")
                return
            return self.ambiguous(f"connection closed: {exc}")
        except Ambiguous as exc:
            if self.mistake == "sent_unknown_after":
                self.append("SENT_UNKNOWN", note="recorded after the answer")
            return self.ambiguous(f"no answer: {exc}")
        if self.mistake == "sent_unknown_after":
            self.append("SENT_UNKNOWN", note="recorded after the answer")
        if status == 200:
            self.append("CONFIRMED", remote_ref=data["ref"], evidence=[f"reserve answered 200 with {data['ref']}"],
                        observations=[{"outcome": "accepted", "status": 200}])
            self.write("EFFECT_CONFIRMED", "CONFIRMED")
            return
        code = (data.get("error") or {}).get("code")
        if status == 429:
            wait_ms = int(headers.get("retry-after-ms") or 1000 * int(headers.get("retry-after") or 1))
            time.sleep(wait_ms / (5000 if self.mistake == "short_throttle_wait" else 1000))
            self.append("PROPOSED", evidence=["429: throttled before execution (definite)"])
            return
        if status == 409 and code == "conflict_in_flight":
            return self.reconcile()
        if code == "fenced":                         # a newer worker's epoch reached the service first
            raise Stale("the service fenced this worker's epoch")
        if status >= 500:
            return self.ambiguous(f"HTTP {status} ({code})")
        self.append("REJECTED", evidence=[f"definite refusal: HTTP {status} {code}"])
        self.finish("FAILED_NO_EFFECT", f"the service refused the request: {code}")

    def ambiguous(self, why: str) -> None:
        if self.mistake == "blind_retry":
            self.append("PROPOSED", note=f"{why}: resent at once")
            return
        self.reconcile()

    def reconcile(self) -> None:
        """Resolve SENT_UNKNOWN by an authoritative read: the key (lookup), or the incident and slot
        compared on every intent field (search, only conclusive past the late-delivery bound)."""
        lookup = self.profile.get("lookup")
        if lookup not in ("by_key", "by_incident_slot"):
            self.finish("FAILED_EFFECT_UNKNOWN", "the service offers no authoritative read: the effect may exist",
                        next_owner="operator")
            return
        if self.mistake == "callback_confirms":
            done = [e for e in self.poll() if e["type"] == "callback" and e["payload"].get("status") == "succeeded"]
            if done:
                self.append("CONFIRMED", remote_ref=done[0]["payload"].get("ref"),
                            evidence=[f"completion callback {done[0]['event_id']} says succeeded"])
                return
        sent = max([a.get("at", 0) for a in self.store.entries(self.key)[-1]["attempts"]] or [0])
        bound_s = self.profile.get("max_delivery_delay_ms", 0) / 1000
        for _ in range(500):
            try:
                if lookup == "by_key":
                    status, data, _ = self.client.call("GET", "/reservation/lookup?" + urllib.parse.urlencode(
                        {"key": self.key}))
                else:
                    status, data, _ = self.client.call("GET", "/reservation/search?" + urllib.parse.urlencode(
                        {"incident": self.intent["incident"], "slot": self.intent["slot"]}))
            except Ambiguous:
                time.sleep(0.01)
                continue
            if status != 200:
                time.sleep(0.01)
                continue
            if lookup == "by_key":
                found = [data["record"]] if data.get("found") else []
                settled = not data.get("in_flight")
                if found and found[0].get("intent") != self.intent:   # our key, someone else's parameters
                    self.finish("FAILED_EFFECT_UNKNOWN", f"the record under our key {found[0].get('ref')} holds other "
                                "parameters: it is not our effect, and ours may still exist", next_owner="operator")
                    return
            else:
                found = [r for r in data.get("records", []) if r.get("intent") == self.intent]
                settled = time.time() - sent > bound_s       # nothing can land any more
            if found:
                self.append("CONFIRMED", remote_ref=found[0]["ref"],
                            reconciliation=[{"query": lookup, "as_of": data.get("as_of"), "found": True}],
                            evidence=[f"{lookup} read found {found[0]['ref']}"])
                return
            if self.mistake == "trusts_early_negative":     # one negative read, whatever it could settle
                self.append("PROPOSED", reconciliation=[{"query": lookup, "as_of": data.get("as_of"),
                                                         "found": False}],
                            evidence=[f"{lookup} read found nothing: taken as not sent"])
                return
            if self.mistake == "early_negative_read":     # the first empty answer taken as final
                settled, data["consistency"] = True, "strong"
            if settled and data.get("consistency") == "strong":
                self.append("PROPOSED", reconciliation=[{"query": lookup, "as_of": data.get("as_of"),
                                                         "found": False}],
                            evidence=[f"authoritative absence: {lookup} read found nothing that can still land"])
                return
            time.sleep(0.01)
        self.finish("FAILED_EFFECT_UNKNOWN", "the effect stayed unresolved", next_owner="operator")


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]           # other --options are ignored
    mistakes = [a.split("=", 1)[1] for a in argv if a.startswith("--mistake=")]
    if len(args) != 2 or any(m not in MISTAKES for m in mistakes):
        print(f"usage: worker.py URL DB [--mistake={'|'.join(MISTAKES)}]", file=sys.stderr)
        return 2
    terminate_at_safe_point()
    try:
        return Worker(args[0], args[1], mistakes[0] if mistakes else None).main()
    except Stale as exc:       # a newer worker owns the run (this one was paused past its lease), or SIGTERM
        print(f"stopping: {exc}", file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
