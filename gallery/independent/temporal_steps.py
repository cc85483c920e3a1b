"""One step of the run, as one Temporal activity invocation does it.

The store is the truth; each call reloads it, does the next thing (at most one send), and
says what the workflow should do next: `continue`, `wait` (real seconds), `done` or `stale`.
The workflow is the single retry owner; this module never loops around a send.
"""
import hashlib
import json
import os
import time

from temporal_http import Client
from temporal_store import LeaseBusy, Stale, Store

LEASE_SCN_MS = 30_000          # our own lease: 30 s of scenario time, renewed by every write
ATTEMPT_CEILING = 5            # sends per semantic key
READ_BUDGET = 40               # reconciliation reads per semantic key before the operator owns it
TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}
NOT_EXECUTED = {"throttled", "unavailable", "server_error", "conflict_in_flight"}
REFUSED = {"validation_failed", "bad_request", "permission_denied", "not_found", "already_exists"}


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def sha(obj, n=24):
    return hashlib.sha256(canon(obj).encode()).hexdigest()[:n]


def result(status, wait_s=0.0, note=""):
    return {"status": status, "wait_s": round(max(0.0, wait_s), 4), "note": note}


class Run:
    def __init__(self):
        self.url = os.environ["CRASHLAB_URL"]
        self.worker = os.environ.get("CRASHLAB_WORKER", "worker")
        self.epoch = int(os.environ.get("CRASHLAB_EPOCH", "1"))
        self.run_id = os.environ.get("CRASHLAB_RUN", "run")
        self.http = Client(self.url)
        self.store = None
        self.scale = None

    # -- clock (scenario ms, from the services' own timestamps) -----------------------------
    def observe(self, scn_ms):
        if scn_ms is None or self.scale is None:
            return
        clock = self.store.meta("clock")
        if clock is None or scn_ms > self._now(clock):
            self.store.set_meta("clock", [scn_ms, time.time()])

    def _now(self, clock):
        return clock[0] + (time.time() - clock[1]) * 1000.0 * self.scale

    def now(self):
        clock = self.store.meta("clock")
        return int(self._now(clock)) if clock else 0

    def real_s(self, scn_ms):
        return scn_ms / 1000.0 / self.scale

    # -- setup -------------------------------------------------------------------------
    def open(self):
        if self.store is None:
            self.store = Store(os.environ["CRASHLAB_DB"], self.epoch, self.worker, 0.3)
            self.scale = self.store.meta("scale")
        return self.store

    def profile(self, service):
        prof = self.store.meta("profile:" + service)
        if prof is None:
            out = self.http.request("GET", "/" + service)
            if out.kind != "ok":
                return None
            prof = out.body
            self.store.set_meta("profile:" + service, prof)
        self.scale = float(prof.get("time_scale") or 100)
        self.store.set_meta("scale", self.scale)
        self.store.lease_real_s = self.real_s(LEASE_SCN_MS)
        return prof

    def scn(self, prof, field):
        """A profile duration in scenario ms (describe answers them divided by the time scale)."""
        value = prof.get(field)
        return None if value is None else float(value) * self.scale

    def inbox(self):
        out = self.http.request("GET", "/inbox", query={"after_seq": 0})
        if out.kind != "ok":
            return None
        events = out.body.get("events", [])
        for ev in events:
            self.observe(ev.get("at"))
        return events

    # -- the step ------------------------------------------------------------------------
    def step(self):
        self.open()
        events = self.inbox()
        if events is None:
            return result("wait", 0.05, "inbox unreadable")
        intake = next((e for e in events if e.get("type") == "intake"), None)
        if intake is None:
            return result("wait", 0.05, "no intake yet")
        self.intake = intake["payload"]
        self.events = events
        self.cancel = next((e for e in events if e.get("type") == "cancel"), None)
        self.service = self.intake.get("service", "reservation")
        self.operation = self.intake.get("operation", "reserve")
        if self.profile(self.service) is None:
            return result("wait", 0.05, "describe unavailable")
        try:
            self.store.acquire()
        except LeaseBusy as busy:
            return result("wait", busy.wait_s + 0.01, str(busy))
        if self.store.finished():
            return result("done", note="finish already written")
        self._identity()
        cp = self.store.last_checkpoint()
        state = cp["control"]["state"] if cp else None
        if state in TERMINAL:
            return self._finish_from(cp)
        if state is None:
            if self.cancel:
                return self.terminal("CANCELLED_NO_EFFECT", "cancelled before anything was prepared")
            self.write_cp("VALIDATED")
            return result("continue")
        if state == "VALIDATED":
            if self.cancel:
                return self.terminal("CANCELLED_NO_EFFECT", "cancelled before anything was prepared")
            self.write_cp("PROPOSED")
            return result("continue")
        if state == "PROPOSED":
            if self.store.latest(self.key) is None:
                if self.cancel:
                    return self.terminal("CANCELLED_NO_EFFECT", "cancelled before anything was prepared")
                self.store.append(self.entry(self.key, "PROPOSED", note="prepared before the first dispatch"))
            self.write_cp("EFFECT_PREPARED")
            return result("continue")
        if state in ("EFFECT_PREPARED", "RECONCILING"):
            from temporal_effect import effect_phase
            return effect_phase(self)
        if state == "EFFECT_CONFIRMED":
            if self.cancel:
                return self.terminal("CANCELLED_EFFECT_REMAINS", "cancelled after the hold was made; "
                                     "the hold stays until an operator decides on a release",
                                     next_owner="operator", action="COMPENSATE")
            if self.intake.get("notify"):
                self.write_cp("NOTIFYING")
                return result("continue")
            return self.terminal("SUCCEEDED", "the hold is recorded with its reference")
        if state == "NOTIFYING":
            from temporal_effect import notify_phase
            return notify_phase(self)
        return self.terminal("FAILED_EFFECT_UNKNOWN", f"unexpected state {state}", next_owner="operator")

    # -- identity, records -------------------------------------------------------------
    def _identity(self):
        intent = dict(self.intake["intent"])
        self.proposal_hash = sha({"service": self.service, "operation": self.operation, "intent": intent}, 16)
        self.intent = dict(intent, proposal_hash=self.proposal_hash)
        self.key = f"{self.service}.{self.operation}.v1:" + sha(intent)
        self.msg_key = "notification.send.v1:" + sha({"about": self.key, "to": intent.get("principal")})
        self.msg_intent = {"to": intent.get("principal"), "tenant": intent.get("tenant"),
                           "incident": intent.get("incident"), "about": self.key,
                           "message": f"Part {intent.get('part')} is reserved for incident "
                                      f"{intent.get('incident')}, slot {intent.get('slot')}."}

    def entry(self, key, knowledge, attempts=None, **extra):
        is_msg = key == self.msg_key
        intent = self.msg_intent if is_msg else self.intent
        prev = self.store.latest(key)
        e = {"semantic_key": key, "kind": "effect",
             "service": "notification" if is_msg else self.service,
             "operation": "send" if is_msg else self.operation, "run_id": self.run_id,
             "intent": intent, "intent_fingerprint": sha(intent, 64), "canonicalization_version": 1,
             "knowledge": knowledge,
             "attempts": attempts if attempts is not None else (prev["attempts"] if prev else []),
             "lease_epoch": self.epoch, "proposal_hash": self.proposal_hash,
             "remote_ref": prev.get("remote_ref") if prev else None}
        e.update({k: v for k, v in extra.items() if v is not None})
        return e

    def effects(self):
        keys, out = [], []
        for (rec,) in self.store.db.execute("SELECT record FROM ledger ORDER BY seq"):
            k = json.loads(rec)["semantic_key"]
            if k not in keys:
                keys.append(k)
        for k in keys:
            e = self.store.latest(k)
            out.append({"semantic_key": k, "knowledge": e["knowledge"], "remote_ref": e.get("remote_ref")})
        return out

    def write_cp(self, state):
        cp = self.store.last_checkpoint()
        version = (cp["control"]["state_version"] if cp else 0) + 1
        used = len((self.store.latest(self.key) or {}).get("attempts", []))
        cancel = {}
        if self.cancel:
            cancel = {"requested": True, "seq": self.cancel.get("seq"), "at": self.cancel.get("at"),
                      "event_id": self.cancel.get("event_id")}
        self.store.checkpoint({
            "identity": {"run_id": self.run_id, "task_id": f"{self.service}.{self.operation}",
                         "tenant": self.intent.get("tenant", ""), "principal": self.intent.get("principal", "")},
            "control": {"state": state, "state_version": version, "owner": self.worker,
                        "lease_epoch": self.epoch,
                        "event_sequence": max([e.get("seq", 0) for e in self.events] or [0]),
                        "cancellation": cancel, "deadline": self.intake.get("deadline"),
                        "budgets": {"attempt_ceiling": ATTEMPT_CEILING, "attempts_used": used,
                                    "read_budget": READ_BUDGET}},
            "contract": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
            "evidence": {"proposal_hash": self.proposal_hash},
            "effects": [{"semantic_key": e["semantic_key"], "knowledge": e["knowledge"]} for e in self.effects()],
        })

    def packet(self, state, next_owner, action):
        prof = self.store.meta("profile:" + self.service) or {}
        lookup = prof.get("lookup", "none")
        rec = {"action": action}
        if action == "RECONCILE":
            rec["query"] = f"{self.service}.lookup(key)" if lookup == "by_key" else f"{self.service}.search(incident, slot)"
            rec["expected"] = ["found", "absent", "unavailable"]
        if action == "STOP":
            unknown = any(e["knowledge"] == "SENT_UNKNOWN" for e in self.effects())
            rec["effect"] = "unknown" if unknown else "remains"
        cp = self.store.last_checkpoint() or {"control": {"state_version": 0}}
        effects = []
        for e in self.effects():
            full = self.store.latest(e["semantic_key"])
            effects.append({"semantic_key": e["semantic_key"], "knowledge": e["knowledge"],
                            "attempts": len(full.get("attempts", [])), "remote_ref": full.get("remote_ref"),
                            "reconciliation": [r.get("summary", "") for r in full.get("reconciliation", [])],
                            "last_observation": (full.get("observations") or [{}])[-1].get("outcome")})
        return {"header": {"run_id": self.run_id, "tenant": self.intent.get("tenant"),
                           "goal": f"{self.operation} {self.intent.get('part')} for {self.intent.get('incident')}",
                           "consequence": "inventory hold", "state": state,
                           "state_version": cp["control"]["state_version"], "owner": self.worker,
                           "lease_epoch": self.epoch,
                           "cancellation": {"requested": bool(self.cancel),
                                            "event_id": (self.cancel or {}).get("event_id")}},
                "effects": effects,
                "authority": {"principal": self.intent.get("principal")},
                "compatibility": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
                "budget": {"deadline": self.intake.get("deadline"), "attempts_remaining":
                           max(0, ATTEMPT_CEILING - len((self.store.latest(self.key) or {}).get("attempts", [])))},
                "recommended": rec,
                "alternatives": [{"action": "STOP", "effect": rec.get("effect", "unknown")}] if action != "STOP" else [],
                "next_owner": next_owner}

    def terminal(self, disposition, reason, next_owner=None, action=None):
        self.store.set_meta("pending_finish", {"reason": reason, "next_owner": next_owner, "action": action})
        self.write_cp(disposition)
        return self._finish_from(self.store.last_checkpoint(), reason, next_owner, action)

    def _finish_from(self, cp, reason="", next_owner=None, action=None):
        disposition = cp["control"]["state"]
        pending = self.store.meta("pending_finish") or {}
        reason = reason or pending.get("reason", "")
        next_owner = next_owner or pending.get("next_owner")
        action = action or pending.get("action")
        rec = {"disposition": disposition, "owner": self.worker, "reason": reason,
               "effects": [{"semantic_key": e["semantic_key"], "knowledge": e["knowledge"]} for e in self.effects()],
               "next_owner": next_owner, "packet": None, "wake_at": None}
        if next_owner:
            rec["packet"] = self.packet(disposition, next_owner, action or "STOP")
        self.store.finish(rec)
        return result("done", note=disposition)


def run_step(run):
    """The activity body: Stale ends this worker's part; everything else is an answer."""
    try:
        return run.step()
    except Stale as exc:
        return result("stale", note=str(exc))
