"""The run's steps, each reloading the store: prepare, one effect attempt, give up, finish.

Restate's `ctx.run` wraps each step; the store (not the journal) is the ledger.  An
effect attempt sends at most once, and only after SENT_UNKNOWN is durable and, when the
ledger already says SENT_UNKNOWN, only after a read by key proved the effect absent.
"""
import hashlib
import json
import os
import time

from restate_http import Client, Closed
from restate_store import Stale

ATTEMPT_CEILING = 5
READ_PATIENCE_S = 6.0          # real seconds an attempt keeps re-reading (reads only, no send)
VERSIONS = {"schema_version": 1, "code_version": 1, "canonicalization_version": 1}


TERMINAL = ("SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN")


class Retry(Exception):
    """This attempt ended without proof: let ctx.run's RunOptions schedule the next one."""


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def h(obj, n=24):
    return hashlib.sha256(canon(obj).encode()).hexdigest()[:n]


class Steps:
    def __init__(self, store, url):
        self.store, self.http = store, Client(url)
        self.epoch = store.epoch
        self.sent_end = None

    # -- inbox and profile -------------------------------------------------------
    def inbox(self):
        for _ in range(400):
            try:
                ans = self.http.get("/inbox", after_seq=0)
                if ans.status == 200:
                    evs = ans.body.get("events", [])
                    if any(e["type"] == "intake" for e in evs):
                        return evs
            except Closed:
                pass
            time.sleep(0.05)
        raise Retry("no intake")

    def load(self):
        evs = self.inbox()
        intake = next(e for e in evs if e["type"] == "intake")
        p = intake["payload"]
        self.payload, self.events = p, evs
        self.intent = dict(p["intent"])
        self.service, self.op = p.get("service", "reservation"), p.get("operation", "reserve")
        self.proposal_hash = h({"intent": self.intent, "op": self.op}, 16)
        self.sent_intent = dict(self.intent, proposal_hash=self.proposal_hash)
        self.key = "fieldops.%s.v1:%s" % (self.op, h(self.intent, 32))
        self.msg_key = "msg-" + h({"about": self.key}, 24)
        cancels = [e for e in evs if e["type"] == "cancel"]
        self.cancel = {"seq": cancels[0]["seq"], "at": cancels[0]["at"]} if cancels else {}
        self.event_seq = max(e["seq"] for e in evs)
        prof = self.http.get("/" + self.service)
        self.profile = prof.body if prof.status == 200 else {}
        self.scale = float(self.profile.get("time_scale", 100) or 100)

    def prof_ms(self, name):
        """A profile duration in scenario ms (describe answers real ms)."""
        v = self.profile.get(name) or 0
        return float(v) * self.scale

    # -- records -----------------------------------------------------------------
    def entry(self, key, knowledge, base=None, **extra):
        prev = self.store.latest(key) or base or {}
        e = {"semantic_key": key, "kind": "effect", "run_id": os.environ.get("CRASHLAB_RUN", ""),
             "canonicalization_version": 1, "attempts": list(prev.get("attempts", [])),
             "observations": list(prev.get("observations", [])),
             "reconciliation": list(prev.get("reconciliation", [])),
             "remote_ref": prev.get("remote_ref")}
        if key == self.msg_key:
            e.update(service="notification", operation="send", intent=self.msg_intent(),
                     proposal_hash=self.proposal_hash)
        else:
            e.update(service=self.service, operation=self.op, intent=self.sent_intent,
                     proposal_hash=self.proposal_hash)
        e["intent_fingerprint"] = h(e["intent"], 32)
        e["knowledge"] = knowledge
        for k, v in extra.items():
            if k in ("attempt", "observation", "read"):
                e[{"attempt": "attempts", "observation": "observations", "read": "reconciliation"}[k]].append(v)
            else:
                e[k] = v
        return self.store.append(e)

    def msg_intent(self):
        return {"to": self.intent.get("principal"), "template": "reservation-status",
                "incident": self.intent.get("incident"), "tenant": self.intent.get("tenant")}

    def checkpoint(self, state):
        _, cur = self.store.checkpoint()
        if cur and cur["control"]["state"] == state and cur["control"].get("cancellation") == self.cancel:
            return
        effects = []
        for k in (self.key, self.msg_key):
            last = self.store.latest(k)
            if last:
                effects.append({"key": k, "knowledge": last["knowledge"]})
        self.store.write_checkpoint({
            "identity": {"run_id": os.environ.get("CRASHLAB_RUN", ""), "task_id": self.key,
                         "tenant": self.intent.get("tenant", ""), "principal": self.intent.get("principal", "")},
            "control": {"state": state, "state_version": 0, "owner": "", "lease_epoch": self.epoch,
                        "event_sequence": self.event_seq, "cancellation": self.cancel,
                        "deadline": self.payload.get("deadline"),
                        "budgets": {"attempt_ceiling": ATTEMPT_CEILING}},
            "contract": dict(VERSIONS), "evidence": {"proposal_hash": self.proposal_hash},
            "effects": effects})

    def state(self):
        _, cur = self.store.checkpoint()
        return cur["control"]["state"] if cur else None

    # -- step 1: prepare -----------------------------------------------------------
    def prepare(self):
        self.load()
        if self.store.finished():
            return {"stage": "done"}
        if self.store.latest(self.key) is None:
            if self.cancel:
                self.checkpoint("VALIDATED")
                return {"stage": "finish", "outcome": "cancelled_before"}
            for s in ("VALIDATED", "PROPOSED", "EFFECT_PREPARED"):
                if self.state() in (None, "VALIDATED", "PROPOSED") and self.state() != s:
                    self.checkpoint(s)
            self.entry(self.key, "PROPOSED")
        return {"stage": "effect"}

    # -- reads ---------------------------------------------------------------------
    def matches(self, rec_intent):
        return all(rec_intent.get(k) == v for k, v in self.sent_intent.items())

    def read(self):
        """One authoritative read of our key: ('found', ref, rec) / ('absent', as_of) /
        ('mismatch',) / ('wait',) / ('none',) when the service has no such read."""
        lookup = self.profile.get("lookup", "by_key")
        try:
            if lookup in ("by_key", None):
                ans = self.http.get("/%s/lookup" % self.service, key=self.key)
                if ans.status != 200:
                    return ("wait",)
                b = ans.body
                rec = {"query": "lookup", "key": self.key, "as_of": b.get("as_of"),
                       "consistency": b.get("consistency"), "found": b.get("found"),
                       "in_flight": b.get("in_flight")}
                if b.get("found"):
                    r = b.get("record") or {}
                    if not self.matches(r.get("intent") or {}):
                        return ("mismatch", rec)
                    return ("found", r.get("ref"), rec)
                if b.get("in_flight"):
                    return ("wait",)
                return ("absent", b.get("as_of"), rec)
            if lookup in ("by_incident_slot", "search"):
                ans = self.http.get("/%s/search" % self.service, incident=self.intent.get("incident"),
                                    slot=self.intent.get("slot"))
                if ans.status != 200:
                    return ("wait",)
                b = ans.body
                rec = {"query": "search", "as_of": b.get("as_of"), "consistency": b.get("consistency")}
                for r in b.get("records", []):
                    if self.matches(r.get("intent") or {}):
                        return ("found", r.get("ref"), rec)
                return ("absent", b.get("as_of"), rec)
        except Closed:
            return ("wait",)
        return ("none",)

    def settled_absent(self, as_of, last):
        """Absence proves nothing until the read is past the send's end plus the bounds."""
        end = (last.get("attempts") or [{}])[-1].get("ended_at") or self.sent_end
        if end is None or as_of is None:
            return False
        bound = self.prof_ms("max_delivery_delay_ms")
        if self.profile.get("consistency") == "eventual":
            bound += self.prof_ms("lag_ms")
        return as_of > end + bound

    def reconcile(self, last, after_conflict=False):
        """Read by key until it decides, within READ_PATIENCE_S. Returns the new knowledge."""
        if self.sent_end is None:
            self.http.get("/" + self.service)
            self.sent_end = self.http.last_now
        give_up = time.monotonic() + READ_PATIENCE_S
        while True:
            r = self.read()
            if r[0] == "none":
                return "unknown"
            if r[0] == "mismatch":
                self.entry(self.key, "SENT_UNKNOWN", read=r[1], note="read found other parameters under the key")
                return "integrity"
            if r[0] == "found":
                self.entry(self.key, "CONFIRMED", read=r[2], remote_ref=r[1])
                return "CONFIRMED"
            if r[0] == "absent" and after_conflict:
                return "PROPOSED"
            if r[0] == "absent" and self.settled_absent(r[1], last):
                self.entry(self.key, "PROPOSED", read=r[2], note="authoritative absence past the delivery bound")
                return "PROPOSED"
            if time.monotonic() > give_up:
                raise Retry("read did not settle")
            time.sleep(0.05)

    # -- step 2: one effect attempt ------------------------------------------------
    def effect(self):
        self.load()
        self.store.confirm()
        last = self.store.latest(self.key)
        if last["knowledge"] == "SENT_UNKNOWN":
            k = self.reconcile(last)
            if k in ("unknown", "integrity"):
                return {"outcome": k}
            last = self.store.latest(self.key)
        if last["knowledge"] == "REJECTED":
            return {"outcome": "rejected"}
        if last["knowledge"] != "CONFIRMED":
            out = self.send_effect(last)
            if out:
                return out
        if self.payload.get("notify"):
            return self.notify()
        return {"outcome": "confirmed"}

    def send_effect(self, last):
        if self.cancel:
            return {"outcome": "cancelled_before"}
        deadline = self.payload.get("deadline")
        if deadline is not None and self.http.last_now is not None and self.http.last_now >= deadline:
            return {"outcome": "deadline"}
        n = len(last.get("attempts", []))
        if n >= ATTEMPT_CEILING:
            return {"outcome": "exhausted"}
        self.store.confirm()
        self.entry(self.key, "SENT_UNKNOWN", attempt={"n": n + 1, "at": self.http.last_now, "epoch": self.epoch})
        body = {"intent": self.sent_intent, "retry_owner": "caller"}
        if self.profile.get("fencing"):
            body["fence"] = self.epoch
        try:
            ans = self.http.post("/%s/%s" % (self.service, self.op), body, key=self.key)
        except Closed as exc:
            self.http.get("/" + self.service)
            self.sent_end = self.http.last_now
            self.entry(self.key, "SENT_UNKNOWN", observation={"outcome": "closed", "definite": False,
                                                               "at": self.sent_end, "detail": str(exc)[:80]})
            raise Retry("closed")
        if ans.status == 200:
            b = ans.body
            if not self.matches(b.get("intent") or self.sent_intent):
                return {"outcome": "integrity"}
            self.entry(self.key, "CONFIRMED", remote_ref=b.get("ref"),
                       observation={"outcome": "ok", "status": 200, "at": ans.now})
            return None
        err = ans.error
        obs = {"outcome": err.get("code"), "status": ans.status, "definite": ans.definite, "at": ans.now}
        self.sent_end = ans.now
        if ans.status == 412:
            raise Stale("fenced by the service")
        if ans.status == 422:
            self.entry(self.key, "REJECTED", observation=obs, note="the key holds other parameters")
            return {"outcome": "integrity_rejected"}
        if ans.definite and ans.status in (400, 403, 404):
            self.entry(self.key, "REJECTED", observation=obs)
            return {"outcome": "rejected"}
        if ans.definite:
            self.entry(self.key, "PROPOSED", observation=obs)
            if ans.status == 429:
                time.sleep(float(ans.headers.get("retry-after-ms", 100)) / 1000.0)
            if ans.status == 409:
                # the key is in flight elsewhere: wait for it and read by key
                if self.reconcile(self.store.latest(self.key), after_conflict=True) == "CONFIRMED":
                    return None
            raise Retry(err.get("code"))
        self.entry(self.key, "SENT_UNKNOWN", observation=obs)
        raise Retry(err.get("code") or str(ans.status))

    def notify(self):
        if self.state() in ("EFFECT_PREPARED", "EFFECT_IN_FLIGHT", "RECONCILING"):
            self.checkpoint("EFFECT_CONFIRMED")
        last = self.store.latest(self.msg_key)
        if last and last["knowledge"] == "CONFIRMED":
            return {"outcome": "confirmed"}
        if last and last["knowledge"] == "SENT_UNKNOWN":
            return {"outcome": "notify_unknown"}
        if last is None:
            self.entry(self.msg_key, "PROPOSED")
        if self.state() == "EFFECT_CONFIRMED":
            self.checkpoint("NOTIFYING")
        self.store.confirm()
        self.entry(self.msg_key, "SENT_UNKNOWN", attempt={"n": 1, "at": self.http.last_now, "epoch": self.epoch})
        try:
            ans = self.http.post("/notification/send", {"intent": self.msg_intent(), "retry_owner": "caller"},
                                 key=self.msg_key)
        except Closed:
            return {"outcome": "notify_unknown"}
        if ans.status == 200:
            self.entry(self.msg_key, "CONFIRMED", remote_ref=ans.body.get("message_id"),
                       observation={"outcome": "ok", "status": 200, "at": ans.now},
                       evidence=["notification.send answered 200, message %s" % ans.body.get("message_id")])
            return {"outcome": "confirmed"}
        if ans.definite:
            self.entry(self.msg_key, "PROPOSED", observation={"outcome": ans.error.get("code"), "definite": True})
            raise Retry("notification refused")
        return {"outcome": "notify_unknown"}

    # -- step 3: finish ------------------------------------------------------------
    def finish(self, outcome):
        self.load()
        if self.store.finished():
            return "done"
        led = self.store.latest(self.key)
        k = led["knowledge"] if led else None
        if outcome in ("given_up", "exhausted", "deadline"):
            outcome = "unknown" if k == "SENT_UNKNOWN" else ("confirmed" if k == "CONFIRMED" else "none")
        table = {
            "confirmed": ("SUCCEEDED", None, "the reservation is confirmed by the service"),
            "notify_unknown": ("WAITING_OPERATOR", "operator", "the notification's delivery is unknown; not resent"),
            "cancelled_before": ("CANCELLED_NO_EFFECT", None, "cancelled before any send"),
            "unknown": ("FAILED_EFFECT_UNKNOWN", "operator", "no read can settle the reservation"),
            "integrity": ("WAITING_OPERATOR", "operator", "the key holds other parameters: integrity error"),
            "integrity_rejected": ("WAITING_OPERATOR", "operator", "the key holds other parameters: integrity error"),
            "rejected": ("FAILED_NO_EFFECT", None, "the service refused the reservation"),
            "none": ("FAILED_NO_EFFECT", None, "no attempt left; the ledger proves no reservation"),
        }
        disp, owner, reason = table[outcome]
        if self.cancel and disp in ("SUCCEEDED", "FAILED_EFFECT_UNKNOWN", "FAILED_NO_EFFECT"):
            disp = {"SUCCEEDED": "CANCELLED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN": "CANCELLED_EFFECT_UNKNOWN",
                    "FAILED_NO_EFFECT": "CANCELLED_NO_EFFECT"}[disp]
            owner = "operator" if disp != "CANCELLED_NO_EFFECT" else None
            reason = "cancellation recorded; " + reason
        cur = self.state()
        terminal = cur in TERMINAL or cur == "WAITING_OPERATOR"
        if terminal:
            pass
        elif disp in ("SUCCEEDED", "CANCELLED_EFFECT_REMAINS") and cur not in ("EFFECT_CONFIRMED", "NOTIFYING"):
            self.checkpoint("EFFECT_CONFIRMED")
        elif cur is None:
            self.checkpoint("VALIDATED")
        if not terminal:
            self.checkpoint(disp)
        effects = [{"key": kk, "knowledge": self.store.latest(kk)["knowledge"]}
                   for kk in (self.key, self.msg_key) if self.store.latest(kk)]
        self.store.write_finish({"disposition": disp, "effects": effects, "next_owner": owner, "reason": reason})
        return "done"
