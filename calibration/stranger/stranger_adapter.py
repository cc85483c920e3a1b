"""A FieldOps/AR-08 worker written from crashlab's docs alone (calibration/stranger).

Design choices (see README.md next to this file):
  * lease TTL 45 s, renewed before every send and between sleep chunks of <= 12 s;
  * checkpoints at the chapter's responsibility boundaries plus RECONCILING;
  * key  = "strg|<tenant>|<service>.<operation>|c<canon>|<sha256(canonical business intent)[:20]>";
  * backoff 1.5 s * 2^(n-1) (at least the throttle's retry-after) + jitter 0..750 ms, 4 attempts;
  * reconciliation: lookup by key first, search (all intent fields) second, a read every 4 s
    until the declared late-delivery bound (plus lag) has passed, capped at 10 minutes and
    at the business deadline;
  * an incompatible checkpoint is migrated (MIGRATING) and then work continues with the
    recorded keys and the frozen proposal; a policy/capability change re-asks for approval;
  * a confirmed hold met by a cancellation is kept (CANCELLED_EFFECT_REMAINS) and a release
    is proposed to the operator; an unresolved effect is escalated and closed *_EFFECT_UNKNOWN.
  * operator actions use names of our own with declared controls.
"""
from __future__ import annotations

import hashlib
import json

from crashlab import PortError

TTL = 45_000
CHUNK = 12_000
CEILING = 4
BASE_BACKOFF = 1_500
JITTER = 750
POLL = 4_000
OBS_CAP = 600_000
TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}
WAITING = {"WAITING_HUMAN", "WAITING_OPERATOR", "WAITING_RETRY", "PINNED"}
UNRESOLVED = {"SENT_UNKNOWN", "COMPENSATION_PROPOSED"}
REFUSED_FOR_GOOD = {"validation_failed", "permission_denied", "intent_mismatch", "already_exists"}
PRESEND = {"refused", "timeout_before_send", "throttled", "unavailable", "conflict_in_flight"}


def canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def digest(obj, n=20) -> str:
    return hashlib.sha256(canon(obj).encode()).hexdigest()[:n]


class Fenced(Exception):
    pass


class Worker:
    reproposal_on_policy_change = True
    ttl = TTL
    chunk = CHUNK
    common_names = False          # declared controls (own names) by default
    wait_for_operator = False     # escalate and close *_EFFECT_UNKNOWN by default
    raise_ceiling_on_admission = True
    notify_unknown_terminal = False
    search_first = False
    replay_next_owner = True      # a terminal replay repeats the recorded next_owner
    stop_effect_word = None       # calibration only: overrides what a STOP packet says of the effect
    unknown_reason = None         # calibration only: overrides the reason of an *_EFFECT_UNKNOWN finish

    def __init__(self, ports):
        self.p = ports
        self.epoch = None
        self.expires = 0
        self.version = 0
        self.cp = None
        self.events = []
        self.applied = {}
        self.dups = {}
        self.cancel = None
        self.approval_events = []
        self.retry_events = []
        self.callbacks = []
        self.profiles = {}
        self.ceiling = CEILING
        self.final_owner = None

    # ------------------------------------------------------------------ plumbing
    async def call(self, pc):
        return await pc

    async def now(self):
        return (await self.p.clock.now())["now"]

    async def lease(self):
        for _ in range(6):
            try:
                v = await self.p.lease.acquire(ttl_ms=self.ttl)
                self.epoch, self.expires = v["epoch"], v["expires_at"]
                return True
            except PortError as e:
                if e.code != "lease_held":
                    return False
                wait = max(1, int(e.details.get("expires_at", 0)) - await self.now() + 1)
                await self.p.clock.sleep(ms=min(wait, 300_000), reason="await lease expiry of previous owner")
        return False

    async def renew(self):
        try:
            v = await self.p.lease.renew(epoch=self.epoch, ttl_ms=self.ttl)
            self.expires = v["expires_at"]
        except PortError as e:
            if e.code == "stale_epoch":
                raise Fenced() from e
            raise

    async def nap(self, ms, reason):
        """Sleep ms in chunks, renewing the lease between chunks."""
        left = ms
        while left > 0:
            step = min(left, self.chunk)
            await self.p.clock.sleep(ms=step, reason=reason)
            left -= step
            await self.renew()

    async def profile(self, svc):
        if svc not in self.profiles:
            try:
                self.profiles[svc] = await self.p.service(svc).describe()
            except PortError:
                self.profiles[svc] = {}
        return self.profiles[svc]

    async def poll(self):
        after = self.events[-1]["seq"] if self.events else 0
        try:
            v = await self.p.inbox.poll(after_seq=after)
        except PortError:
            return []
        new = v.get("events", [])
        for ev in new:
            self.events.append(ev)
            eid = ev.get("event_id")
            if eid in self.applied:
                self.dups.setdefault(eid, []).append(ev["seq"])
                continue
            self.applied[eid] = ev["seq"]
            t = ev.get("type")
            if t == "cancel" and self.cancel is None:
                self.cancel = {"requested": True, "seq": ev["seq"], "at": ev.get("at"), "event_id": eid}
            elif t in ("approval", "deny", "revocation", "capability_change"):
                self.approval_events.append(ev)
            elif t == "retry":
                self.retry_events.append(ev)
            elif t == "callback":
                self.callbacks.append(eid)
        return new

    # ------------------------------------------------------------------ records
    def evidence_block(self, extra=None):
        ev = {"proposal_hash": self.phash,
              "events": {eid: {"seq": seq, "disposition": "applied", "duplicates": self.dups.get(eid, [])}
                         for eid, seq in self.applied.items()}}
        if self.callbacks:
            ev["callbacks_recorded_as_evidence"] = list(self.callbacks)
        if extra:
            ev.update(extra)
        return ev

    async def checkpoint(self, state, extra=None, migration=None):
        seq = max([e["seq"] for e in self.events] or [0])
        cp = {"identity": {"run_id": self.run_id, "task_id": f"{self.service}.{self.operation}",
                           "tenant": str(self.intent.get("tenant", "")),
                           "principal": str(self.intent.get("principal", ""))},
              "control": {"state": state, "state_version": self.version + 1, "owner": self.worker,
                          "lease_epoch": self.epoch, "event_sequence": seq,
                          "cancellation": dict(self.cancel) if self.cancel else {},
                          "deadline": self.deadline,
                          "budgets": {"attempt_ceiling": self.ceiling, "attempts_used": self.attempts_used(),
                                      "observation_cap_ms": OBS_CAP}},
              "contract": {k: self.env.get(k) for k in ("schema_version", "code_version",
                                                        "canonicalization_version", "policy_version",
                                                        "capability_version") if self.env.get(k) is not None},
              "evidence": self.evidence_block(extra),
              "effects": [{"semantic_key": k, "knowledge": e["knowledge"], "kind": e.get("kind", "effect"),
                           "remote_ref": e.get("remote_ref")} for k, e in self.latest.items()]}
        cp["contract"]["approval_ref"] = self.approval_ref
        if migration:
            cp["migration"] = migration
        try:
            v = await self.p.checkpoints.write(checkpoint=cp, expected_version=self.version, lease_epoch=self.epoch)
        except PortError as e:
            if e.code == "stale_epoch":
                raise Fenced() from e
            if e.code == "version_conflict":
                # someone else advanced the run: reread before doing anything else
                await self.reload()
                await self.poll()
                if self.cp and self.cp["control"]["state"] in TERMINAL:
                    raise Fenced() from e
                return await self.checkpoint(state, extra, migration)
            raise
        self.version = v["version"]
        self.cp = cp
        self.state = state

    async def reload(self):
        v = await self.p.checkpoints.load()
        self.version = v["version"]
        self.cp = v.get("checkpoint")

    def attempts_used(self):
        e = self.latest.get(self.key)
        return len(e.get("attempts", [])) if e else 0

    async def read_ledger(self):
        v = await self.p.ledger.by_run()
        self.latest = {}
        for e in v.get("entries", []):
            self.latest[e["semantic_key"]] = e

    async def append(self, key, knowledge, **fields):
        prev = self.latest.get(key, {})
        entry = {"semantic_key": key, "kind": fields.pop("kind", prev.get("kind", "effect")),
                 "service": fields.pop("service", prev.get("service", self.service)),
                 "operation": fields.pop("operation", prev.get("operation", self.operation)),
                 "run_id": self.run_id,
                 "intent": fields.pop("intent", prev.get("intent", self.send_intent)),
                 "canonicalization_version": prev.get("canonicalization_version",
                                                      self.env.get("canonicalization_version", 1)),
                 "knowledge": knowledge,
                 "attempts": list(prev.get("attempts", [])),
                 "lease_epoch": self.epoch,
                 "proposal_hash": prev.get("proposal_hash", self.phash),
                 "observations": list(prev.get("observations", [])),
                 "remote_ref": prev.get("remote_ref"),
                 "reconciliation": list(prev.get("reconciliation", [])),
                 "compensates": prev.get("compensates"),
                 "compensated_by": prev.get("compensated_by"),
                 "evidence": list(prev.get("evidence", []))}
        entry["intent_fingerprint"] = digest(entry["intent"], 32)
        for k, v in fields.items():
            if k in ("observations", "reconciliation", "evidence", "attempts") and isinstance(v, dict):
                entry[k].append(v)
            else:
                entry[k] = v
        try:
            await self.p.ledger.append(entry=entry)
        except PortError as e:
            if e.code == "stale_epoch":
                raise Fenced() from e
            raise
        self.latest[key] = entry
        return entry

    def effects_list(self):
        return [{"semantic_key": k, "knowledge": e["knowledge"]} for k, e in self.latest.items()]

    # ------------------------------------------------------------------ packet
    async def escalate(self, why, recommended, alternatives, next_owner="fieldops-operator"):
        now = await self.now()
        packet = {
            "header": {"run_id": self.run_id, "tenant": self.intent.get("tenant"),
                       "goal": f"{self.operation} for {self.intent.get('incident', self.intent.get('package', self.run_id))}",
                       "consequence": f"{self.service}.{self.operation}",
                       "state": self.state, "state_version": self.version, "owner": self.worker,
                       "lease_epoch": self.epoch, "cancellation": dict(self.cancel) if self.cancel else {},
                       "reason_code": why},
            "effects": [{"semantic_key": k, "kind": e.get("kind", "effect"), "attempts": len(e.get("attempts", [])),
                         "last_observation": (e.get("observations") or [{}])[-1].get("outcome"),
                         "remote_ref": e.get("remote_ref"),
                         "reconciliation": [r.get("summary", r.get("query")) for r in e.get("reconciliation", [])][-5:],
                         "knowledge": e["knowledge"]} for k, e in self.latest.items()],
            "authority": {"principal": self.intent.get("principal"), "approval": self.approval_ref},
            "compatibility": {k: self.env.get(k) for k in ("schema_version", "code_version", "canonicalization_version")},
            "budget": {"deadline": self.deadline, "attempts_remaining": max(0, self.ceiling - self.attempts_used()),
                       "time_remaining_ms": None if self.deadline is None else max(0, self.deadline - now)},
            "recommended": self.name_action(recommended),
            "alternatives": [self.name_action(a) for a in alternatives],
            "next_owner": next_owner,
        }
        if self.stop_effect_word is not None:
            packet["recommended"] = {"action": "STOP", "effect": self.stop_effect_word}
            packet["alternatives"] = []
        await self.p.operator.escalate(packet=packet)
        return next_owner

    COMMON = {"reconciliation_read": "RECONCILE", "close_unresolved": "STOP", "cancel_new_work": "CANCEL",
              "approve_corrective_proposal": "COMPENSATE", "mark_external_reference": "VERIFY",
              "redispatch": "REDISPATCH", "acquire_takeover": "TAKEOVER",
              "migration_or_pin_runbook": "MIGRATE_OR_PIN"}

    def name_action(self, a):
        if not self.common_names or "control" not in a:
            return a
        a = dict(a)
        a["action"] = self.COMMON[a.pop("control")]
        return a

    async def read_action(self, key):
        svc = self.latest.get(key, {}).get("service", self.service)
        prof = await self.profile(svc)
        lk = prof.get("lookup", "none")
        if svc == "registry":
            return {"action": "READ_BACK_PUBLISHED_VERSION", "control": "reconciliation_read",
                    "query": "registry.get_version(package, version)", "semantic_key": key,
                    "expected": ["found", "absent", "in_flight", "unavailable"]}
        if lk == "by_key":
            return {"action": "READ_BACK_BY_KEY", "control": "reconciliation_read",
                    "query": f"{svc}.lookup(key)", "semantic_key": key,
                    "expected": ["found", "absent", "unavailable"]}
        if lk not in (None, "none"):
            return {"action": "READ_BACK_BY_INCIDENT_SLOT", "control": "reconciliation_read",
                    "query": f"{svc}.search(incident, slot)", "semantic_key": key,
                    "expected": ["found", "absent", "unavailable"]}
        return None

    # ------------------------------------------------------------------ finish
    async def finish(self, disposition, reason, next_owner=None, wake_at=None, packet=None):
        if self.unknown_reason is not None and disposition.endswith("_UNKNOWN"):
            reason = self.unknown_reason
        if disposition in TERMINAL or disposition in WAITING:
            if self.state != disposition or disposition in WAITING:
                await self.checkpoint(disposition, extra={"next_owner": next_owner, "reason": reason})
        await self.p.run.finish(disposition=disposition, effects=self.effects_list(), next_owner=next_owner,
                                reason=reason, packet=packet, wake_at=wake_at)

    async def close_unknown(self, key, why):
        """An effect we cannot settle: escalate, then close *_EFFECT_UNKNOWN."""
        rec = await self.read_action(key)
        stop = {"action": "HALT_EFFECT_UNKNOWN", "control": "close_unresolved", "effect": "unknown",
                "semantic_key": key}
        alts = [{"action": "STOP", "effect": "unknown"}]
        if (self.latest.get(key) or {}).get("knowledge") in UNRESOLVED:
            alts.append({"action": "CHECK_WITH_PROVIDER", "control": "mark_external_reference", "semantic_key": key})
        owner = await self.escalate(why, rec or stop, alts if rec else alts[1:] or alts)
        now = await self.now()
        if self.wait_for_operator and (self.deadline is None or now < self.deadline):
            if self.state != "RECONCILING" and self.state not in WAITING:
                pass
            return await self.finish("WAITING_OPERATOR", f"outcome of {key} is not known yet; another attempt is "
                                     f"blocked to avoid a duplicate ({why})", next_owner=owner, wake_at=self.deadline)
        disp = "CANCELLED_EFFECT_UNKNOWN" if self.cancel else "FAILED_EFFECT_UNKNOWN"
        await self.finish(disp, f"outcome of {key} is not known yet; another attempt is blocked "
                                f"to avoid a duplicate ({why})", next_owner=owner)

    # ------------------------------------------------------------------ main
    async def main(self):
        info = await self.p.run.info()
        self.run_id, self.worker, self.env = info["run_id"], info["worker"], dict(info.get("env") or {})
        self.state = None
        self.latest = {}
        self.approval_ref = None
        if not await self.lease():
            await self.p.run.finish(disposition="WAITING_OPERATOR", next_owner="current-lease-holder",
                                    reason="could not acquire the run's lease", effects=[])
            return
        await self.reload()
        await self.poll()
        intake = next((e for e in self.events if e.get("type") == "intake"), None)
        pay = (intake or {}).get("payload") or {}
        self.intent = dict(pay.get("intent") or {})
        self.service = pay.get("service") or info.get("service") or "reservation"
        self.operation = pay.get("operation") or info.get("operation") or "reserve"
        self.deadline = info.get("deadline", pay.get("deadline"))
        if self.deadline is None:
            self.deadline = pay.get("deadline")
        self.notify = bool(pay.get("notify"))
        await self.read_ledger()
        self.phash = None
        self.key = None
        if self.cp:
            self.state = self.cp["control"]["state"]
            self.phash = self.cp.get("evidence", {}).get("proposal_hash")
            self.approval_ref = self.cp.get("contract", {}).get("approval_ref")
            self.ceiling = int(self.cp["control"].get("budgets", {}).get("attempt_ceiling", CEILING))
            if self.cp["control"].get("deadline") is not None:
                self.deadline = self.cp["control"]["deadline"]
            if self.cancel is None and self.cp["control"].get("cancellation", {}).get("requested"):
                self.cancel = dict(self.cp["control"]["cancellation"])
            # the applied events of earlier workers stay applied
            for eid, rec in (self.cp.get("evidence", {}).get("events") or {}).items():
                if isinstance(rec, dict) and "seq" in rec:
                    self.dups.setdefault(eid, list(rec.get("duplicates", [])))
        if self.state in TERMINAL:
            # terminal is terminal: report the recorded disposition again, nothing else
            await self.p.run.finish(disposition=self.state, effects=[{"semantic_key": e["semantic_key"],
                                    "knowledge": e["knowledge"]} for e in self.cp.get("effects", [])],
                                    next_owner=(self.cp.get("evidence", {}).get("next_owner")
                                                if self.replay_next_owner else None),
                                    reason="already terminal; recorded disposition reported again: "
                                           + str(self.cp.get("evidence", {}).get("reason") or ""))
            return
        # identity: reuse a recorded key for this intent, else derive it
        own = [k for k, e in self.latest.items() if e.get("kind") == "effect" and e.get("service") == self.service]
        business = {k: v for k, v in self.intent.items()}
        if own:
            self.key = own[0]
            rec = self.latest[self.key]
            self.phash = self.phash or rec.get("proposal_hash")
        else:
            cv = self.env.get("canonicalization_version", 1)
            self.key = (f"strg|{business.get('tenant', '-')}|{self.service}.{self.operation}|c{cv}|"
                        f"{digest(business)}")
        if self.phash is None:
            self.phash = self.proposal_hash()
        self.send_intent = dict(business, proposal_hash=self.phash)
        if own:
            self.send_intent = dict(self.latest[self.key].get("intent") or self.send_intent)

        try:
            await self.drive()
        except Fenced:
            owner = "newer-lease-owner"
            try:
                v = await self.p.lease.read()
                owner = v.get("owner") or owner
            except PortError:
                pass
            await self.p.run.finish(disposition="WAITING_OPERATOR", effects=self.effects_list(),
                                    next_owner=owner, reason="lease lost to a newer owner; this worker stopped")

    async def drive(self):
        # compatibility before anything else
        if self.cp:
            old = self.cp.get("contract", {})
            changed = [k for k in ("schema_version", "canonicalization_version", "policy_version",
                                   "capability_version")
                       if k in old and self.env.get(k) is not None and old[k] != self.env.get(k)]
            if changed:
                await self.checkpoint("MIGRATING", migration={
                    "from": {k: old.get(k) for k in changed}, "to": {k: self.env.get(k) for k in changed},
                    "previous_version": self.version, "changes": changed})
                e = self.latest.get(self.key) or {}
                if self.reproposal_on_policy_change and (
                        {"policy_version", "capability_version", "canonicalization_version"} & set(changed)) \
                        and e.get("knowledge") in (None, "PROPOSED") and not e.get("attempts"):
                    # authority is never carried across a policy/capability change: a new proposal
                    # (new hash, new approval request) under the same intent-derived key
                    self.approval_ref = None
                    self.phash = self.proposal_hash()
                    self.send_intent = dict(self.intent, proposal_hash=self.phash)
                    if e:
                        await self.append(self.key, "PROPOSED", intent=self.send_intent, proposal_hash=self.phash,
                                          note="re-proposed after a policy/capability change")
        if self.cp is None:
            if self.cancel:
                await self.checkpoint("VALIDATED")
                return await self.finish("CANCELLED_NO_EFFECT", "cancelled before any effect was prepared")
            v = self.validate()
            if v:  # an invalid intake is never recorded as VALIDATED
                await self.checkpoint("INTAKE", extra={"validation": v})
                return await self.finish("FAILED_NO_EFFECT", f"intake failed validation: {v}")
            await self.checkpoint("VALIDATED")
        k = self.latest.get(self.key, {}).get("knowledge")
        comp = [key for key, e in self.latest.items() if e.get("kind") == "compensation"]
        if comp:
            return await self.settle_compensation(comp[0])
        if k == "CONFIRMED":
            return await self.after_confirmed(verify=True)
        if k == "SENT_UNKNOWN":
            return await self.reconcile_then_continue()
        if k == "REJECTED":
            return await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                     "the service refused the request; no effect was made")
        return await self.prepare_and_send()

    def proposal_hash(self):
        return "ph-" + digest({"intent": self.intent, "service": self.service, "op": self.operation,
                               "policy": self.env.get("policy_version"),
                               "capability": self.env.get("capability_version"),
                               "canon": self.env.get("canonicalization_version")}, 24)

    def validate(self):
        q = self.intent.get("quantity")
        if q is not None and (not isinstance(q, int) or q <= 0):
            return "quantity must be a positive integer"
        return None

    # ------------------------------------------------------------------ approval
    async def authorized(self):
        """True when a live approval is bound to the proposal; otherwise finishes the worker."""
        try:
            v = await self.p.authority.check(proposal_hash=self.phash, action=self.operation)
        except PortError as e:
            return await self._stop_no_effect(f"authority check failed: {e.code}")
        if v.get("live"):
            self.approval_ref = v.get("approval_id")
            return True
        for ev in self.approval_events:
            if ev.get("type") == "deny":
                return await self._stop_no_effect("the approver denied the proposal")
        now = await self.now()
        if self.deadline is not None and now >= self.deadline:
            return await self._stop_no_effect("business deadline passed without a live approval")
        asked = bool(self.cp and self.cp.get("evidence", {}).get("approval_requested") == self.phash
                     and v.get("reason", "").startswith("pending"))
        if self.cp and self.cp.get("evidence", {}).get("approval_requested") == self.phash and \
                "no approval bound" not in v.get("reason", "") and not v.get("revoked") and \
                "expired" not in v.get("reason", "") and "capability" not in v.get("reason", ""):
            asked = True
        if not asked:
            await self.p.authority.request(proposal_hash=self.phash, action=self.operation,
                                           summary={"service": self.service, "operation": self.operation,
                                                    "intent": self.send_intent})
        await self.checkpoint("WAITING_HUMAN", extra={"approval_requested": self.phash})
        await self.p.run.finish(disposition="WAITING_HUMAN", effects=self.effects_list(),
                                next_owner=str(self.intent.get("principal") or "approver"),
                                reason="waiting for a human approval of the frozen proposal",
                                wake_at=self.deadline)
        return False

    async def _stop_no_effect(self, why):
        await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT", why)
        return False

    # ------------------------------------------------------------------ dispatch
    async def prepare_and_send(self):
        if self.state in (None, "VALIDATED", "MIGRATING") and self.state != "PROPOSED":
            if not self.cp or self.cp["control"]["state"] not in ("PROPOSED", "WAITING_HUMAN", "EFFECT_PREPARED",
                                                                 "WAITING_RETRY", "WAITING_OPERATOR"):
                await self.checkpoint("PROPOSED")
        await self.poll()
        if self.cancel:
            return await self.finish("CANCELLED_NO_EFFECT", "cancelled before the effect was sent")
        if not await self.authorized():
            return
        if self.key not in self.latest:
            await self.append(self.key, "PROPOSED", evidence={"approval": self.approval_ref})
        # honour a recorded retry-after, and the ceiling / deliberate retry
        e = self.latest[self.key]
        used = len(e.get("attempts", []))
        self.retries_used = list((self.cp or {}).get("evidence", {}).get("retries_used") or [])
        if used >= self.ceiling:
            admitted = [ev for ev in self.retry_events if ev["event_id"] not in self.retries_used]
            if not admitted or (self.cp and self.cp["control"]["state"] != "WAITING_RETRY"):
                return await self.wait_retry("attempt ceiling spent by definite refusals")
            # a deliberate retry admits exactly one more attempt: declare it before using it
            self.retries_used.append(admitted[0]["event_id"])
            if self.raise_ceiling_on_admission:
                self.ceiling = used + 1
        await self.checkpoint("EFFECT_PREPARED", extra={"retries_used": getattr(self, "retries_used", [])})
        while True:
            e = self.latest[self.key]
            until = max([o.get("retry_not_before", 0) for o in e.get("observations", [])] or [0])
            now = await self.now()
            if until > now:
                j = (await self.p.random.draw(low=0, high=JITTER, reason="jitter on recorded retry-after"))["value"]
                await self.nap(until - now + j, "backoff honouring recorded retry-after")
            await self.poll()
            if self.cancel:
                return await self.finish("CANCELLED_NO_EFFECT", "cancelled before the effect was sent")
            now = await self.now()
            if self.deadline is not None and now >= self.deadline:
                return await self.finish("FAILED_NO_EFFECT", "business deadline reached before any attempt ran")
            if not await self.recheck_authority():
                return
            res = await self.send_once()
            if res == "sent":
                return await self.after_confirmed(verify=False)
            if res == "unknown":
                return await self.reconcile_then_continue()
            if res in ("rejected", "done"):
                return
            # definite pre-send failure: backoff and retry within budget
            e = self.latest[self.key]
            n = len(e["attempts"])
            if n >= self.ceiling:
                return await self.wait_retry("attempt ceiling spent by definite refusals")
            jitter = (await self.p.random.draw(low=0, high=JITTER, reason=f"jitter attempt {n + 1}"))["value"]
            ra = (e.get("observations") or [{}])[-1].get("retry_after_ms", 0) or 0
            delay = max(BASE_BACKOFF * 2 ** (n - 1), ra) + jitter
            now = await self.now()
            if self.deadline is not None and now + delay >= self.deadline:
                await self.nap(max(1, self.deadline - now), f"backoff before attempt {n + 1} (until deadline)")
                return await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                         "every attempt was refused before it ran; business deadline reached")
            await self.nap(delay, f"backoff before attempt {n + 1}")

    async def recheck_authority(self):
        try:
            v = await self.p.authority.check(proposal_hash=self.phash, action=self.operation)
        except PortError:
            await self.finish("FAILED_NO_EFFECT", "authority could not be verified before send")
            return False
        if v.get("live"):
            self.approval_ref = v.get("approval_id")
            return True
        return await self.authorized()

    async def wait_retry(self, why):
        now = await self.now()
        if self.deadline is not None and now >= self.deadline:
            return await self.finish("FAILED_NO_EFFECT", f"{why}; business deadline reached")
        owner = await self.escalate("attempt_ceiling_spent",
                                    {"action": "HALT_NO_EFFECT", "control": "cancel_new_work", "effect": "none"},
                                    [{"action": "REDISPATCH_SAME_KEY", "control": "redispatch", "semantic_key": self.key}])
        await self.checkpoint("WAITING_RETRY", extra={"retries_used": list(getattr(self, "retries_used", []))})
        await self.p.run.finish(disposition="WAITING_RETRY", effects=self.effects_list(), next_owner=owner,
                                reason=f"{why}; no effect was made; waiting for a deliberate retry",
                                wake_at=self.deadline)

    async def send_once(self):
        svc = self.p.service(self.service)
        prof = await self.profile(self.service)
        n = len(self.latest[self.key].get("attempts", [])) + 1
        await self.renew()  # confirm ownership right before the send
        now = await self.now()
        await self.append(self.key, "SENT_UNKNOWN",
                          attempts={"n": n, "at": now, "worker": self.worker})
        args = {"key": self.key, "intent": self.send_intent, "retry_owner": "caller"}
        if prof.get("fencing"):
            args["fence"] = self.epoch
        try:
            v = await svc.call(self.operation, **args)
        except PortError as e:
            t = await self.now()
            obs = {"outcome": e.code, "definite": e.definite, "at": t, "attempt": n}
            if e.code == "throttled":
                ra = int(e.details.get("retry_after_ms", 0) or 0)
                obs["retry_after_ms"] = ra
                obs["retry_not_before"] = t + ra
            if e.definite and e.code in PRESEND:
                if e.code == "conflict_in_flight":
                    await self.append(self.key, "SENT_UNKNOWN", observations=obs)
                    return "unknown"
                await self.append(self.key, "PROPOSED", observations=obs)
                return "retry"
            if e.definite and e.code in REFUSED_FOR_GOOD:
                if e.code == "already_exists" and self.service == "registry":
                    await self.append(self.key, "SENT_UNKNOWN", observations=obs)
                    return "unknown"
                await self.append(self.key, "REJECTED", observations=obs,
                                  evidence={"answer": e.code, "attempt": n})
                if e.code == "intent_mismatch":
                    owner = await self.escalate("integrity_error_key_bound_to_other_parameters",
                                                {"action": "HALT_INTEGRITY", "control": "cancel_new_work",
                                                 "effect": "unknown", "semantic_key": self.key}, [])
                    await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                      "the service refused this request: its key is bound to other parameters",
                                      next_owner=owner)
                else:
                    await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                      f"the service refused the request ({e.code}); nothing was made")
                return "rejected"
            await self.append(self.key, "SENT_UNKNOWN", observations=obs)
            return "unknown"
        t = await self.now()
        ref = v.get("ref") or v.get("message_id") or v.get("job_id")
        if self.service == "registry":
            await self.append(self.key, "SENT_UNKNOWN", remote_ref=v.get("job_id"),
                              observations={"outcome": "accepted", "job_id": v.get("job_id"), "at": t, "attempt": n})
            return "unknown"
        await self.append(self.key, "CONFIRMED", remote_ref=ref,
                          observations={"outcome": "ok", "at": t, "attempt": n},
                          evidence={"answer": f"{self.service}.{self.operation}", "ref": ref, "at": t})
        return "sent"

    # ------------------------------------------------------------------ reconciliation
    def matches(self, rec_intent):
        if not isinstance(rec_intent, dict):
            return False
        return all(rec_intent.get(k) == v for k, v in self.intent.items())

    async def read_once(self, key, intent, prof, svc_name):
        """-> ("found", record) | ("absent", as_of) | ("in_flight", None) | ("conflict", record) | ("down", None)"""
        svc = self.p.service(svc_name)
        lk = prof.get("lookup", "none")
        try:
            if svc_name == "registry":
                job = self.latest.get(key, {}).get("remote_ref")
                if job:
                    w = await svc.call("wait_job", job_id=job, wait_ms=POLL)
                    if w.get("status") == "running":
                        return "in_flight", None
                    if w.get("status") == "succeeded":
                        rec = dict(w.get("record") or {})
                        rec.setdefault("ref", job)
                        return "found", rec
                v = await svc.call("get_version", package=intent.get("package"), version=intent.get("version"))
                if v.get("found"):
                    rec = v.get("record") or {}
                    ri = rec.get("intent") or {}
                    if ri and not self.matches(ri):
                        return "other", v.get("as_of")
                    return "found", rec
                if v.get("in_flight"):
                    return "in_flight", None
                return "absent", v.get("as_of")
            if self.search_first and lk not in (None, "none") and "incident" in intent:
                v = await svc.call("search", incident=intent["incident"], slot=intent.get("slot"))
                mine = [r for r in v.get("records", []) if self.matches(r.get("intent"))]
                if mine and v.get("consistency", "strong") == "strong":
                    return "found", mine[0]
            if lk == "by_key":
                v = await svc.call("lookup", key=key)
                if v.get("in_flight"):
                    return "in_flight", None
                if v.get("found"):
                    rec = v.get("record") or {}
                    if not self.matches(rec.get("intent")):
                        return "conflict", rec
                    return "found", rec
                return "absent", v.get("as_of")
            if lk not in (None, "none") and "incident" in intent:
                v = await svc.call("search", incident=intent["incident"], slot=intent.get("slot"))
                mine = [r for r in v.get("records", []) if self.matches(r.get("intent"))]
                if mine:
                    return "found", mine[0]
                return "absent", v.get("as_of")
        except PortError as e:
            return "down", e.code
        return "noread", None

    async def reconcile(self, key):
        """Read until the effect is identified or absence is proven past the late-delivery bound.
        -> "found" | "absent" | "unknown" | "conflict" """
        e = self.latest[key]
        svc_name = e.get("service", self.service)
        prof = await self.profile(svc_name)
        obs_at = [o.get("at", 0) for o in e.get("observations", [])] + [a.get("at", 0) for a in e.get("attempts", [])]
        last_send = max([a.get("at", 0) for a in e.get("attempts", [])] or [0])
        answered = max(obs_at or [0])
        bound = last_send + int(prof.get("max_delivery_delay_ms", 60_000) or 0) + int(prof.get("lag_ms", 0) or 0)
        first_send = min([a.get("at", 0) for a in e.get("attempts", [])] or [0])
        retention = prof.get("retention_ms")
        start = await self.now()
        stop_at = min(max(bound, start) + POLL, start + OBS_CAP)
        if self.deadline is not None:
            stop_at = min(stop_at, self.deadline)
        if self.state not in ("RECONCILING",):
            await self.checkpoint("RECONCILING")
        while True:
            res, val = await self.read_once(key, e.get("intent") or self.send_intent, prof, svc_name)
            now = await self.now()
            if res == "noread":
                return "unknown"
            summary = {"query": f"{svc_name} read", "at": now, "answer": res}
            if res == "found":
                ref = val.get("ref") or val.get("job_id") or val.get("version")
                status = val.get("status")
                if status == "released":
                    await self.append(key, "CONFIRMED", remote_ref=ref, reconciliation=summary,
                                      evidence={"read": summary})
                    return "released"
                if svc_name == "registry" and False:
                    pass
                await self.append(key, "CONFIRMED", remote_ref=ref, reconciliation=summary,
                                  evidence={"read": summary})
                return "found"
            if res in ("conflict", "other"):
                await self.append(key, e["knowledge"], reconciliation=dict(summary, note="other parameters"))
                return res
            if res == "absent":
                as_of = val if isinstance(val, int) else now
                expired = retention is not None and now - first_send > int(retention)
                if not expired and as_of > bound and as_of > answered:
                    await self.append(key, "PROPOSED", reconciliation=dict(summary, as_of=as_of),
                                      evidence={"read": dict(summary, as_of=as_of)})
                    return "absent"
            if res == "in_flight":
                stop_at = max(stop_at, min(now + 4 * POLL, start + OBS_CAP))
            if self.deadline is not None and now >= self.deadline:
                return "unknown"
            await self.poll()
            if now >= stop_at:
                return "unknown"
            await self.nap(min(POLL, max(1, stop_at - now)), f"reconcile {key} after {res}")

    async def reconcile_then_continue(self):
        r = await self.reconcile(self.key)
        await self.poll()
        if r in ("found",):
            return await self.after_confirmed(verify=False)
        if r == "released":
            return await self.after_confirmed(verify=False)
        if r == "absent":
            if self.cancel:
                return await self.finish("CANCELLED_NO_EFFECT", "a read past the late-delivery bound shows no effect")
            if self.service == "notification":
                return await self.finish("FAILED_NO_EFFECT", "no effect")
            self.state = "RECONCILING"
            return await self.prepare_and_send()
        if r == "conflict":
            owner = await self.escalate("integrity_error_key_bound_to_other_parameters",
                                        {"action": "HALT_INTEGRITY", "control": "close_unresolved",
                                         "effect": "unknown", "semantic_key": self.key},
                                        [{"action": "CHECK_WITH_PROVIDER", "control": "mark_external_reference",
                                          "semantic_key": self.key}])
            return await self.finish("CANCELLED_EFFECT_UNKNOWN" if self.cancel else "FAILED_EFFECT_UNKNOWN",
                                     "integrity error: the key holds a record with other parameters",
                                     next_owner=owner)
        if r == "other":
            await self.append(self.key, "REJECTED", evidence={"read": "version held by another intent"})
            return await self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                     "the version is held by another publish; this run's publish is absent")
        return await self.close_unknown(self.key, "authoritative read did not settle the outcome")

    # ------------------------------------------------------------------ confirmed
    async def after_confirmed(self, verify):
        if verify and self.service != "notification":
            r, val = await self.read_once(self.key, self.latest[self.key].get("intent") or self.send_intent,
                                          await self.profile(self.service), self.service)
            if r == "found" and val.get("status") not in (None, "active", "done", "publishing", "published",
                                                           "succeeded"):
                r = "gone"
            if r in ("absent", "gone", "conflict", "other"):
                owner = await self.escalate("ledger_confirmed_but_service_disagrees",
                                            {"action": "CHECK_WITH_PROVIDER", "control": "mark_external_reference",
                                             "semantic_key": self.key},
                                            [{"action": "HALT_EFFECT_UNKNOWN", "control": "close_unresolved",
                                              "effect": "unknown"}])
                await self.checkpoint("WAITING_OPERATOR")
                return await self.p.run.finish(disposition="WAITING_OPERATOR", effects=self.effects_list(),
                                               next_owner=owner, wake_at=self.deadline,
                                               reason="the ledger holds the effect but a read disagrees; escalated")
        if self.state != "EFFECT_CONFIRMED" and (not self.cp or self.cp["control"]["state"] not in ("NOTIFYING",)):
            await self.checkpoint("EFFECT_CONFIRMED")
        await self.poll()
        if self.cancel:
            prof = await self.profile(self.service)
            if self.service == "reservation" and prof.get("compensation", True):
                rec = {"action": "PROPOSE_RELEASE", "control": "approve_corrective_proposal",
                       "proposal": {"release": self.latest[self.key].get("remote_ref")}, "semantic_key": self.key}
                alts = [{"action": "STOP", "effect": "remains"}]
            else:
                rec = {"action": "HOLD_REMAINS_STOP", "control": "cancel_new_work", "effect": "remains",
                       "semantic_key": self.key}
                alts = []
            owner = await self.escalate("cancelled_after_commit", rec, alts)
            return await self.finish("CANCELLED_EFFECT_REMAINS",
                                     "cancelled after the effect was recorded; it remains and the operator "
                                     "decides on any corrective action", next_owner=owner)
        if self.notify and self.service != "notification":
            return await self.notify_user()
        return await self.finish("SUCCEEDED", f"{self.operation} recorded with reference "
                                              f"{self.latest[self.key].get('remote_ref')}")

    async def notify_user(self):
        ref = self.latest[self.key].get("remote_ref")
        intent = {"tenant": self.intent.get("tenant"), "to": self.intent.get("principal"),
                  "incident": self.intent.get("incident"), "ref": ref,
                  "message": f"Reservation {ref} for incident {self.intent.get('incident')} is confirmed.",
                  "proposal_hash": self.phash}
        nkey = f"strg|{self.intent.get('tenant', '-')}|notification.send|c{self.env.get('canonicalization_version', 1)}|{digest({k: v for k, v in intent.items() if k != 'proposal_hash'})}"
        ne = self.latest.get(nkey)
        if ne and ne["knowledge"] == "CONFIRMED":
            return await self.finish("SUCCEEDED", f"reservation {ref} recorded and the user was notified")
        if ne and ne["knowledge"] == "SENT_UNKNOWN":
            owner = await self.escalate("delivery_unknown",
                                        {"action": "ASK_PROVIDER_FOR_RECEIPT", "control": "mark_external_reference",
                                         "semantic_key": nkey},
                                        [{"action": "STOP", "effect": "unknown"}])
            why = (f"reservation {ref} is recorded; the user notification's delivery is unknown "
                   "(DELIVERY_UNKNOWN) and is not sent again")
            now = await self.now()
            if self.notify_unknown_terminal:
                return await self.finish("FAILED_EFFECT_UNKNOWN", why, next_owner=owner)
            if self.deadline is not None and now >= self.deadline:
                if self.state != "WAITING_OPERATOR":
                    await self.checkpoint("WAITING_OPERATOR")
                return await self.finish("FAILED_EFFECT_UNKNOWN", why, next_owner=owner)
            return await self.finish("WAITING_OPERATOR", why, next_owner=owner, wake_at=self.deadline)
        await self.checkpoint("NOTIFYING")
        if not ne:
            await self.append(nkey, "PROPOSED", service="notification", operation="send", intent=intent,
                              kind="effect")
        await self.renew()
        now = await self.now()
        await self.append(nkey, "SENT_UNKNOWN", attempts={"n": 1, "at": now, "worker": self.worker})
        try:
            v = await self.p.service("notification").call("send", key=nkey, intent=intent, retry_owner="caller")
        except PortError as e:
            if e.definite:
                await self.append(nkey, "PROPOSED", observations={"outcome": e.code, "definite": True})
                return await self.finish("FAILED_EFFECT_REMAINS",
                                         f"reservation {ref} remains; the user notification was refused ({e.code})",
                                         next_owner="fieldops-operator")
            await self.append(nkey, "SENT_UNKNOWN", observations={"outcome": e.code, "definite": False})
            return await self.notify_user()
        await self.append(nkey, "CONFIRMED", remote_ref=v.get("message_id"),
                          evidence={"answer": "notification.send", "ref": v.get("message_id")})
        return await self.finish("SUCCEEDED", f"reservation {ref} recorded and the user was notified")

    # ------------------------------------------------------------------ compensation
    async def settle_compensation(self, ckey):
        ce = self.latest[ckey]
        if ce["knowledge"] in ("SENT_UNKNOWN", "PROPOSED"):
            prof = await self.profile(ce.get("service", "reservation"))
            svc = self.p.service(ce.get("service", "reservation"))
            try:
                if prof.get("lookup") == "by_key":
                    v = await svc.call("lookup", key=self.key)
                    rec = v.get("record") or {}
                    if v.get("found") and rec.get("status") == "released":
                        now = await self.now()
                        await self.append(ckey, "CONFIRMED", remote_ref=rec.get("release_ref") or rec.get("ref"),
                                          evidence={"read": {"query": "lookup(hold key)", "at": now}})
                        await self.append(self.key, "COMPENSATED", compensated_by=ckey,
                                          evidence={"read": {"query": "lookup(hold key)", "at": now}})
                        return await self.finish("CANCELLED_NO_EFFECT",
                                                 "the hold was released; a read verified the release")
            except PortError:
                pass
        return await self.close_unknown(ckey, "release could not be verified")


class StrangerAdapter:
    worker = Worker

    async def run(self, ports):
        try:
            await self.worker(ports).main()
        except Fenced:
            pass
        except PortError as e:
            try:
                await ports.run.finish(disposition="WAITING_OPERATOR", effects=[], next_owner="fieldops-operator",
                                       reason=f"stopped on an unexpected port error {e.code}")
            except PortError:
                pass


class _CarryApproval(Worker):
    reproposal_on_policy_change = False


class StrangerCarryApproval(StrangerAdapter):
    """A deliberately WRONG variant kept for the calibration report: after a policy-changing
    deployment it migrates and then dispatches under the approval given to the old-policy
    proposal (crashlab scores it 20/20; the scenario card says it must not)."""
    worker = _CarryApproval


def _variant(name, **attrs):
    w = type("_W" + name, (Worker,), attrs)
    return type(name, (StrangerAdapter,), {"worker": w, "__doc__": f"variant of StrangerAdapter: {attrs}"})


# Variants used in README.md to reproduce the calibration findings.
StrangerCommonNames = _variant("StrangerCommonNames", common_names=True)
StrangerWaits = _variant("StrangerWaits", wait_for_operator=True)
StrangerShortLease = _variant("StrangerShortLease", ttl=8_000, chunk=2_500)
StrangerFixedCeiling = _variant("StrangerFixedCeiling", raise_ceiling_on_admission=False)
StrangerNotifyTerminal = _variant("StrangerNotifyTerminal", notify_unknown_terminal=True)
StrangerSearchFirst = _variant("StrangerSearchFirst", search_first=True)
# Deliberately wrong, to show what crashlab does and does not notice:
StrangerBareReplay = _variant("StrangerBareReplay", replay_next_owner=False)
StrangerStopSaysNone = _variant("StrangerStopSaysNone", stop_effect_word="none")
StrangerSaysCreated = _variant("StrangerSaysCreated", unknown_reason="Done: hold created for the technician.")
