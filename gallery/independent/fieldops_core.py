"""The plumbing of the independent fieldops worker (gallery/independent/fieldops.py):
port calls as a generator, the lease, checkpoints, the ledger, finish and escalation.
Standard library only, so the worker also runs as a standalone script."""
from __future__ import annotations

import hashlib
import json

TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}
INDEFINITE = {"timeout", "server_error"}
NOT_TRANSIENT = {"validation_failed", "permission_denied", "intent_mismatch"}


class PortFailure(Exception):
    """An error reply: ``code``, ``definite``, ``details``."""

    def __init__(self, error: dict):
        super().__init__(error.get("code"))
        self.code = error.get("code")
        self.definite = bool(error.get("definite"))
        self.details = error.get("details") or {}


class Stop(Exception):
    """The worker ends (it finished, or it lost ownership)."""


class Fenced(Stop):
    """The worker lost ownership: another worker holds a newer epoch or version."""


class Reread(Exception):
    """A conditional write lost to a newer version while this worker still holds the lease: reread
    and reclassify (AR-08: "A worker with a lease but a stale expected version rereads and reclassifies")."""


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:24]


class Config:
    def __init__(self, *, lease_ttl_ms=45_000, checkpoints="dense", poll_ms=4_000, reads=12,
                 read_order="lookup-first", conservative=False, attempt_ceiling=3, backoff_ms=1_500,
                 compensate=True, release_read="hold", read_pause_ms=0, early_redispatch=False,
                 chunked_sleeps=False, at_ceiling="wait"):
        # every attempt refused before send and the ceiling spent: wait for a deliberate retry
        # (WAITING_RETRY), or end the logical effect (FAILED_NO_EFFECT; refinement R1 calls both truthful)
        self.at_ceiling = at_ceiling
        # keep the lease short across a long wait: sleep in chunks of half the TTL, renewing between
        self.chunked_sleeps = chunked_sleeps
        # on a service whose key collapses a late arrival, redispatch as soon as a strong read
        # shows the key absent (AR-08: "If absence is authoritative, revalidate and possibly
        # redispatch with the same key"), instead of observing through the late-delivery bound
        self.early_redispatch = early_redispatch
        self.compensate = compensate          # after a cancellation: release a confirmed hold, or keep it
        self.release_read = release_read      # verify a release by the hold's key, or by its own key
        self.read_pause_ms = read_pause_ms    # read an ambiguous send back at once, or after a pause
        self.lease_ttl_ms = lease_ttl_ms
        self.checkpoints = checkpoints
        self.poll_ms = poll_ms
        self.reads = reads
        self.read_order = read_order
        self.conservative = conservative
        self.attempt_ceiling = attempt_ceiling
        self.backoff_ms = backoff_ms




class Base:
    """One worker of one run: its state and the calls every step uses."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.version = 0
        self.state = "INTAKE"
        self.epoch = None
        self.seen = 0
        self.rereads = 0
        self.event_ids: set = set()
        self.admitted: list = []
        self.cancel = None
        self.retries: list = []
        self.inbox_record: dict = {}
        self.observations: list = []
        self.claimable = True           # the last negative read was past the late-delivery bound
        self.early_absence = False      # the PROPOSED in the ledger rests on an earlier one

    # ------------------------------------------------------------------ absence: resend or claim
    def claim_due(self):
        """Whether the run must claim an outcome now rather than resend (it was cancelled, or its
        deadline passed): a negative read good enough to resend under the same key is not enough."""
        if self.cancel:
            return True
        return self.deadline is not None and (yield from self.now()) >= self.deadline

    def recheck_absence(self):
        """Before claiming no effect on a PROPOSED recorded from a read taken before the
        late-delivery bound, read again past the bound (the late arrival may still land)."""
        if self.early_absence:
            self.early_absence = False
            yield from self.reconcile()

    # ------------------------------------------------------------------ plumbing
    def call(self, port, op, **args):
        value = yield (port, op, args)
        return value

    def now(self):
        return (yield from self.call("clock", "now"))["now"]

    def poll(self):
        events = (yield from self.call("inbox", "poll", after_seq=self.seen))["events"]
        for ev in events:
            self.seen = max(self.seen, ev["seq"])
            if ev["event_id"] in self.event_ids:
                # the same event again: no transition; its disposition goes into the next checkpoint
                seen = self.inbox_record[ev["event_id"]]
                if ev["seq"] != seen["seq"] and all(d["seq"] != ev["seq"] for d in seen["duplicates"]):
                    seen["duplicates"].append({"seq": ev["seq"],
                                               "disposition": f"duplicate of inbox seq {seen['seq']}: ignored"})
                continue
            self.event_ids.add(ev["event_id"])
            self.inbox_record[ev["event_id"]] = {"seq": ev["seq"], "type": ev["type"], "disposition": "applied",
                                                 "duplicates": []}
            if ev["type"] == "intake" and not hasattr(self, "intake"):
                self.intake = ev["payload"]
            elif ev["type"] == "cancel" and self.cancel is None:
                self.cancel = {"requested": True, "at": ev["at"], "event_id": ev["event_id"]}
            elif ev["type"] == "retry":
                self.retries.append(ev["event_id"])
        return events

    def checkpoint(self, state, **control):
        """Write the next checkpoint (compare-and-set on version and epoch)."""
        if self.cfg.checkpoints == "boundaries" and state in self.BETWEEN_BOUNDARIES:
            return
        doc = {"identity": {"run_id": self.run_id, "task_id": self.op, "tenant": str(self.intent.get("tenant", "")),
                            "principal": str(self.intent.get("principal", ""))},
               "control": {"state": state, "state_version": self.version + 1, "owner": self.worker,
                           "lease_epoch": self.epoch, "event_sequence": self.seen,
                           "cancellation": self.cancel or {"requested": False}, "deadline": self.deadline,
                           "budgets": {"attempt_ceiling": self.ceiling, "attempts_used": self.attempts_used,
                                       "admitted_retries": list(self.admitted), **control}},
               "contract": {k: self.env[k] for k in ("schema_version", "code_version", "canonicalization_version")},
               "evidence": {"proposal_hash": self.phash, "events": self.event_dispositions()},
               "effects": [{"semantic_key": k, "knowledge": e["knowledge"]} for k, e in self.latest.items()]}
        try:
            self.version = (yield from self.call("checkpoints", "write", checkpoint=doc,
                                                 expected_version=self.version, lease_epoch=self.epoch))["version"]
        except PortFailure as exc:
            if exc.code == "version_conflict" and self.rereads < 3:
                lease = yield from self.call("lease", "read")
                if lease.get("epoch") == self.epoch and lease.get("owner") == self.worker:
                    self.rereads += 1
                    raise Reread(exc.code) from None
            if exc.code in ("version_conflict", "stale_epoch"):
                raise Fenced(exc.code)
            raise
        self.state = state

    def event_dispositions(self) -> dict:
        """Every inbox event id this worker has seen with its disposition; a duplicate delivery is
        listed under its event id with its own inbox seq (docs/adapters.md, Duplicate events)."""
        return {eid: {"seq": r["seq"], "type": r["type"], "disposition": r["disposition"],
                      "duplicates": [dict(d) for d in r["duplicates"]]}
                for eid, r in self.inbox_record.items()}

    def advance(self, *states, dense_only=()):
        for s in states:
            if s in dense_only and self.cfg.checkpoints != "dense":
                continue
            if s != self.state:
                yield from self.checkpoint(s)

    #: "boundaries" checkpoints only at AR-08's responsibility boundaries: validated intake,
    #: frozen proposal, before effect, reconciled effect, durable wait, terminal disposition.
    BETWEEN_BOUNDARIES = frozenset({"APPROVED", "EFFECT_IN_FLIGHT", "RECONCILING", "NOTIFYING"})

    def record(self, knowledge, **extra):
        entry = {"semantic_key": self.key, "kind": "effect", "service": self.service, "operation": self.op,
                 "run_id": self.run_id, "intent": self.sent_intent, "intent_fingerprint": _digest(self.sent_intent),
                 "canonicalization_version": self.env["canonicalization_version"], "knowledge": knowledge,
                 "attempts": list(self.attempt_log), "lease_epoch": self.epoch, "proposal_hash": self.phash,
                 "remote_ref": self.ref, "evidence": [extra.pop("note", knowledge)] + self.readings[-3:],
                 "observations": list(self.observations), **extra}
        yield from self.append(entry)
        self.knowledge = knowledge

    def append(self, entry):
        try:
            yield from self.call("ledger", "append", entry=entry)
        except PortFailure as exc:
            if exc.code == "stale_epoch":
                raise Fenced(exc.code)
            raise
        self.latest[entry["semantic_key"]] = entry

    def finish(self, disposition, *, next_owner=None, reason="", escalate=False, wake_at=None, recommended=None):
        if escalate:
            yield from self.escalate(disposition, next_owner or "operator", reason, recommended)
        if disposition in TERMINAL or disposition in ("WAITING_OPERATOR", "WAITING_RETRY"):
            if self.state != disposition:
                yield from self.checkpoint(disposition)
        effects = [{"semantic_key": k, "knowledge": e["knowledge"], "service": e["service"], "kind": e["kind"],
                    "remote_ref": e.get("remote_ref")} for k, e in self.latest.items()]
        yield from self.call("run", "finish", disposition=disposition, effects=effects, next_owner=next_owner,
                             reason=reason, packet=None, wake_at=wake_at)
        raise Stop(disposition)

    def escalate(self, disposition, owner, reason, recommended=None, more=()):
        """The decision packet of AR-08 "Operate the recovery system": every key of the run's
        ledger with the knowledge the ledger holds now (read back right before escalating),
        the deadline, and an action that is legal from that recorded state."""
        try:
            for e in (yield from self.call("ledger", "by_run"))["entries"]:
                self.latest[e["semantic_key"]] = e
        except PortFailure:
            pass                                  # the entries this worker appended or loaded
        now = yield from self.now()
        effects = []
        for k, e in self.latest.items():
            obs = e.get("observations") or []
            effects.append({"semantic_key": k, "kind": e.get("kind"), "service": e.get("service"),
                            "attempts": len(e.get("attempts") or []),
                            "last_observation": (obs[-1].get("outcome") if obs else None) or reason,
                            "remote_ref": e.get("remote_ref"),
                            "reconciliation": list(e.get("reconciliation") or []) + (
                                self.readings[-5:] if k == self.key else []),
                            "knowledge": e["knowledge"]})
        action, alternatives = recommended or self.recommend(disposition)
        alternatives = list(alternatives) + list(more)
        packet = {"header": {"run_id": self.run_id, "tenant": self.intent.get("tenant"),
                             "goal": f"{self.op} {self.intent}", "consequence": self.op, "state": self.state,
                             "state_version": self.version, "owner": self.worker, "lease_epoch": self.epoch,
                             "cancellation": self.cancel or {"requested": False}},
                  "effects": effects,
                  "authority": {"principal": self.intent.get("principal"), "approval": self.approval_id},
                  "compatibility": dict(self.env),
                  "budget": {"deadline": self.deadline, "attempts_remaining":
                             max(0, self.ceiling - self.attempts_used),
                             "time_remaining_ms": None if self.deadline is None else max(0, self.deadline - now)},
                  "recommended": action,
                  "alternatives": alternatives,
                  "reason": reason,
                  "next_owner": owner}
        yield from self.call("operator", "escalate", packet=packet)

    def identifying_read(self, service):
        """The identifying read ``service`` offers by its ``describe()`` profile, or None."""
        p = getattr(self, "profile", None) or {}
        if service == "registry":
            return "registry.get_version(package, version)"
        if service != "reservation" or self.service != "reservation":
            return None
        if p.get("lookup") == "by_key":
            return "reservation.lookup(key)"
        if p.get("lookup") not in (None, "none"):
            return "reservation.search(incident, slot)"
        return None

    def recommend(self, disposition):
        """(recommended, alternatives), legal from what the ledger records now."""
        held = {k: e["knowledge"] for k, e in self.latest.items()}
        unresolved = [k for k, v in held.items() if v in ("SENT_UNKNOWN", "COMPENSATION_PROPOSED")]
        if unresolved:
            service = self.latest[unresolved[0]].get("service")
            query = self.identifying_read(service)
            if query:
                return ({"action": "RECONCILE", "query": query, "semantic_key": unresolved[0],
                         "expected": ["found", "absent", "unavailable"]},
                        [{"action": "STOP", "effect": "unknown"}])
            return ({"action": "STOP", "effect": "unknown", "semantic_key": unresolved[0],
                     "reason": f"{service} offers no identifying read"},
                    [{"action": "VERIFY", "requires": f"independent verification by the {service} owner"}])
        present = [k for k, v in held.items() if v == "CONFIRMED"]
        can_release = (getattr(self, "profile", None) or {}).get("compensation") is not False
        if present and self.cancel and can_release:
            return ({"action": "COMPENSATE", "proposal": f"release of {present[0]}",
                     "authority": "a coordinator's release approval"},
                    [{"action": "STOP", "effect": "remains"}])
        if present:
            return ({"action": "STOP", "effect": "remains"}, [{"action": "NEW_REQUEST",
                                                                "requires": "the effect's owner decides"}])
        if disposition == "WAITING_RETRY":
            return ({"action": "STOP", "effect": "none", "until": "a deliberate retry request"},
                    [{"action": "RETRY", "requires": "one explicit retry request per attempt"}])
        return ({"action": "STOP", "effect": "none"}, [])

    def acquire(self):
        while True:
            try:
                lease = yield from self.call("lease", "acquire", ttl_ms=self.cfg.lease_ttl_ms)
                self.epoch, self.expires = lease["epoch"], lease["expires_at"]
                return
            except PortFailure as exc:
                if exc.code != "lease_held":
                    raise
                now = yield from self.now()
                wait = max(1, int(exc.details.get("expires_at", now + 1000)) - now + 1)
                yield from self.call("clock", "sleep", ms=wait, reason="lease held by another worker")

    def sleep(self, ms, reason):
        """Wait ``ms``, holding the lease across the wait: one renewal long enough for it, or (chunked)
        a renewal of the usual TTL before every chunk of half the TTL."""
        if self.cfg.chunked_sleeps:
            chunk = max(1, self.cfg.lease_ttl_ms // 2)
            while ms > 0:
                yield from self.renew(self.cfg.lease_ttl_ms)
                yield from self.call("clock", "sleep", ms=min(chunk, ms), reason=reason)
                ms -= chunk
            return
        yield from self.renew(max(self.cfg.lease_ttl_ms, ms + self.cfg.lease_ttl_ms // 2))
        yield from self.call("clock", "sleep", ms=ms, reason=reason)

    def call_ttl(self) -> int:
        """A lease that outlives the service's declared client timeout: the send cannot outlast it."""
        return max(self.cfg.lease_ttl_ms, int(self.profile.get("timeout_ms") or 0) + self.cfg.lease_ttl_ms)

    def renew(self, ttl_ms=None):
        try:
            lease = yield from self.call("lease", "renew", epoch=self.epoch, ttl_ms=ttl_ms or self.cfg.lease_ttl_ms)
            self.expires = lease["expires_at"]
        except PortFailure as exc:
            if exc.code in ("stale_epoch", "lease_held"):
                raise Fenced(exc.code)
            raise

    def _matches(self, record):
        got = dict((record or {}).get("intent") or {})
        return all(got.get(k) == v for k, v in self.sent_intent.items())

    # ------------------------------------------------------------------ verifying and notifying
    def verify_recorded(self):
        """An earlier worker recorded CONFIRMED: verify the effect with the authoritative read before
        replaying its result (crash point 5). The ledger proves what was recorded, not current
        remote state: a read that shows the effect gone, or another intent under the key, is
        contradictory evidence, escalated under a named owner. A read that cannot answer leaves
        the recorded confirmation as the best evidence there is."""
        seen = yield from self.read_recorded()
        if seen in ("present", "unavailable", "none"):
            return
        yield from self.poll()
        why = f"the ledger records {self.key} CONFIRMED (ref {self.ref}), the authoritative read says {seen}"
        yield from self.advance("RECONCILING")
        yield from self.finish("CANCELLED_EFFECT_UNKNOWN" if self.cancel else "FAILED_EFFECT_UNKNOWN",
                               next_owner="operator", escalate=True, reason=why,
                               recommended=({"action": "STOP", "effect": "unknown", "semantic_key": self.key,
                                             "reason": "the ledger and the service disagree"},
                                            [{"action": "VERIFY", "requires": "the service owner names the "
                                                                              "authoritative record"}]))

    def read_recorded(self):
        """present / released / absent / mismatch from the authoritative read of a recorded effect,
        or unavailable / none (no identifying read)."""
        p = self.profile
        now = yield from self.now()
        try:
            if self.service == "registry":
                got = yield from self.call("registry", "get_version", package=self.intent.get("package"),
                                           version=self.intent.get("version"))
                self.readings.append({"at": now, "read": "get_version", "found": got.get("found"), "verify": True})
                if not got.get("found"):
                    weak = got.get("in_flight") or got.get("consistency", "strong") != "strong"
                    return "unavailable" if weak else "absent"
                return "present" if self._matches(got.get("record")) else "mismatch"
            if self.service != "reservation":
                return "none"
            if p.get("lookup") == "by_key" and now - (self.attempt_log[0]["at"] if self.attempt_log else now) \
                    < int(p.get("retention_ms") or 0):
                got = yield from self.call(self.service, "lookup", key=self.key)
                records = [got["record"]] if got.get("found") else []
                read = "lookup"
            elif p.get("lookup") not in (None, "none"):
                got = yield from self.call(self.service, "search", incident=self.intent.get("incident"),
                                           slot=self.intent.get("slot"))
                records = [r for r in got.get("records") or [] if not self.ref or r.get("ref") == self.ref]
                read = "search"
            else:
                return "none"
        except PortFailure as exc:
            self.readings.append({"at": now, "error": exc.code, "verify": True})
            return "unavailable"
        record = next((r for r in records if self._matches(r)), None)
        self.readings.append({"at": now, "read": read, "records": len(records), "verify": True,
                              "status": (record or {}).get("status"), "as_of": got.get("as_of")})
        if record is None:
            if records:
                return "mismatch"
            strong = got.get("consistency", "strong") == "strong"
            return "absent" if strong else "unavailable"
        if record.get("status") == "released":
            return "released"
        self.ref = record.get("ref") or self.ref
        return "present"

    def notify(self):
        key = f"notify:{self.key}"
        intent = {"to": self.intent.get("principal"), "message": f"{self.op} confirmed", "ref": self.ref,
                  "tenant": self.intent.get("tenant"), "proposal_hash": self.phash}
        entries = (yield from self.call("ledger", "read", semantic_key=key))["entries"]
        known = entries[-1]["knowledge"] if entries else None
        if known in ("CONFIRMED", "REJECTED"):
            return
        if known == "SENT_UNKNOWN":
            # sent by an earlier worker, its answer never seen, and no read by key: a second
            # send needs a duplicate-message policy; DELIVERY_UNKNOWN goes to a named operator
            yield from self.unresolved_delivery()
        yield from self.advance("NOTIFYING")
        base = {"semantic_key": key, "kind": "effect", "service": "notification", "operation": "send",
                "run_id": self.run_id, "intent": intent, "intent_fingerprint": _digest(intent),
                "canonicalization_version": self.env["canonicalization_version"], "attempts": [],
                "lease_epoch": self.epoch, "proposal_hash": self.phash}
        if known is None:
            yield from self.append({**base, "knowledge": "PROPOSED"})
        yield from self.renew(self.call_ttl())
        now = yield from self.now()
        attempt = [{"n": 1, "at": now, "worker": self.worker, "epoch": self.epoch}]
        yield from self.append({**base, "knowledge": "SENT_UNKNOWN", "attempts": attempt})
        try:
            sent = yield from self.call("notification", "send", key=key, intent=intent, retry_owner="caller")
            yield from self.append({**base, "knowledge": "CONFIRMED", "attempts": attempt,
                                    "remote_ref": sent.get("message_id"), "evidence": ["accepted response"]})
        except PortFailure as exc:
            if exc.definite:
                yield from self.append({**base, "knowledge": "REJECTED", "attempts": attempt,
                                        "evidence": [f"{exc.code}: definite"]})
            else:
                yield from self.unresolved_delivery()

    def unresolved_delivery(self):
        yield from self.finish("SUCCEEDED", next_owner="operator", escalate=True,
                               reason="reserved; the notification's delivery is unknown (DELIVERY_UNKNOWN)")
