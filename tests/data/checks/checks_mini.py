"""A small, careful adapter for the checks' own tests, with one switch per classic mistake.

``Good`` follows docs/adapters.md: one lease owner, checkpoints at responsibility
boundaries, a ledger entry before every send, one stable semantic key, reconciliation by
an authoritative lookup before any retry, compensation as a separate effect, escalation
with a decision packet whenever something stays unknown. Each subclass at the bottom
switches on exactly one mistake so a test can assert the invariant that catches it.
"""
from __future__ import annotations

import hashlib
import json

from crashlab.world.ports import PortError

TERMINAL = ("SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN")
BUSINESS = ("tenant", "incident", "part", "slot", "technician", "quantity", "principal")


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


class Good:
    TTL = 300_000
    CEILING = 3
    # mistakes (off in Good)
    BLIND_RETRY = False           # redispatch after a timeout without a read
    KEY_PER_ATTEMPT = False       # the key embeds the attempt number
    INNER_RETRY = False           # a client retry loop below the worker's own
    NO_OWNER_DECLARED = False     # omit retry_owner="caller" (a proxy retries on its own)
    DEADLINE_IS_FAILURE = False   # SENT_UNKNOWN -> REJECTED when reconciliation is unavailable
    CONFIRM_FROM_SEND = False     # CONFIRMED written from the local send record alone
    TRUST_STALE_READ = False      # any negative lookup is proof of absence
    SEARCH_AFTER_LOOKUP = False   # (a free choice) a second read, by search, after the lookup found the hold
    IGNORE_CANCEL = False
    ROLLBACK = False              # compensation rewrites the original to REJECTED
    SKIP_PREPARE = False          # send before any ledger entry
    NO_BACKOFF = False            # retry a definite failure without a backoff sleep
    OTHER_PRINCIPAL = False       # answer permission_denied with another principal
    NO_PACKET = False             # finish unknown without escalating
    SUCCEED_ON_UNKNOWN = False    # report SUCCEEDED when the outcome is unknown
    NO_LEASE = False              # never acquire the lease

    BEST_EFFORT = False           # run an incompatible checkpoint without migrating
    INVENT_APPROVAL = False       # dispatch without a live approval
    IGNORE_DEADLINE = False       # keep retrying past the run's deadline
    NO_CEILING = False            # never declare an attempt ceiling
    KEY_OMITS_TENANT = False      # the key leaves the tenant out of the intent
    RESEND_CONFIRMED = False      # recreate a lost response by sending again
    TRUST_CALLBACK = False        # a completion callback is taken as confirmation
    CANCEL_THEATER = False        # report cancelled without reconciling the in-flight effect
    NO_EVIDENCE = False           # resolved ledger entries name no evidence
    PARTIAL_EFFECTS = False       # the terminal finish lists no effects
    RAISE = False                 # the adapter's code raises
    IGNORE_LEASE_LOSS = False     # carry on (and send) after the ledger refused a stale epoch

    # ------------------------------------------------------------------ plumbing
    async def run(self, p):
        try:
            await self.work(p)
        except PortError as exc:
            if exc.code not in ("stale_epoch", "version_conflict", "fenced"):
                raise
            # lost ownership: stop; the platform refuses a stale worker's finish
            await p.run.finish("WAITING_OPERATOR", next_owner="the newer owner", reason=exc.code)

    async def work(self, p):
        self.p = p
        info = await p.run.info()
        if self.RAISE:
            raise RuntimeError("the adapter's own bug")
        self.run_id, self.me, self.env = info["run_id"], info["worker"], info["env"]
        self.deadline = info.get("deadline")
        events = await self.poll()
        intake = next(e for e in events if e["type"] == "intake")
        self.intent = {k: intake["payload"]["intent"][k] for k in BUSINESS if k in intake["payload"]["intent"]}
        self.cancel = any(e["type"] == "cancel" for e in events)
        if self.NO_LEASE:
            self.epoch = 0
        else:
            self.epoch = await self.acquire()
            if self.epoch is None:
                return
        loaded = await p.checkpoints.load()
        self.version = loaded["version"]
        cp = loaded["checkpoint"]
        self.state = cp["control"]["state"] if cp else "INTAKE"
        self.phash = digest({"op": "reserve", **self.intent})
        keyed = {k: v for k, v in self.intent.items() if not (self.KEY_OMITS_TENANT and k == "tenant")}
        self.key = "rsv-" + digest({**keyed, "op": "reserve"})
        self.sent_intent = {**self.intent, "proposal_hash": self.phash}
        self.profile = await p.service("reservation").describe()
        self.known = {e["semantic_key"]: e["knowledge"] for e in (await p.ledger.by_run())["entries"]}
        if self.state in TERMINAL:
            self.known = {}
            for e in (await p.ledger.by_run())["entries"]:
                self.known[e["semantic_key"]] = e["knowledge"]
            return await self.finish(self.state)
        contract = cp["contract"] if cp else None
        if contract and not self.BEST_EFFORT and any(
                contract[f] != self.env[f] for f in ("schema_version", "canonicalization_version")):
            old = {f: contract[f] for f in ("schema_version", "canonicalization_version")}
            before = self.state
            await self.checkpoint("MIGRATING", migration={"from": old, "to": {f: self.env[f] for f in old},
                                                          "previous_version": self.version,
                                                          "changes": ["contract versions"]})
            await self.checkpoint(before)
        steps = ["INTAKE", "VALIDATED", "PROPOSED"]
        if self.state in steps:
            for state in steps[steps.index(self.state) + 1:]:
                await self.checkpoint(state)
        if self.state in ("PROPOSED", "WAITING_HUMAN"):
            if not self.INVENT_APPROVAL and not (await p.authority.check(self.phash, "reserve"))["live"]:
                if self.state != "WAITING_HUMAN":
                    await p.authority.request(self.phash, "reserve")
                    await self.checkpoint("WAITING_HUMAN")
                return await p.run.finish("WAITING_HUMAN")
            await self.checkpoint("APPROVED")
        await self.effect()

    async def acquire(self):
        p = self.p
        for _ in range(3):
            try:
                lease = await p.lease.acquire(self.TTL)
                return lease["epoch"]
            except PortError as exc:
                if exc.code != "lease_held":
                    raise
                now = (await p.clock.now())["now"]
                await p.clock.sleep(max(1, exc.details["expires_at"] - now + 1), "wait for the lease to expire")
        await p.run.finish("WAITING_OPERATOR", next_owner="platform", reason="lease never freed")
        return None

    async def poll(self):
        """Poll the inbox and keep an audit of every delivery: a redelivered event id is a
        duplicate of the first, recorded, and causes no transition."""
        events = (await self.p.inbox.poll(0))["events"]
        audit = self.__dict__.setdefault("audit", {})
        for e in events:
            first = audit.setdefault(e["event_id"], {"type": e["type"], "seq": e["seq"], "duplicates": []})
            if e["seq"] != first["seq"] and e["seq"] not in first["duplicates"]:
                first["duplicates"].append(e["seq"])
        return events

    async def checkpoint(self, state, migration=None):
        effects = []
        if getattr(self, "known", None):
            effects = [{"semantic_key": k, "knowledge": v} for k, v in self.known.items()]
        cp = {"identity": {"run_id": self.run_id, "task_id": "t", "tenant": self.intent["tenant"],
                           "principal": self.intent["principal"]},
              "control": {"state": state, "state_version": self.version + 1, "owner": self.me,
                          "lease_epoch": self.epoch, "event_sequence": 1,
                          "cancellation": {"requested": self.cancel}, "deadline": self.deadline,
                          "budgets": {} if self.NO_CEILING else {"attempt_ceiling": self.CEILING}},
              "contract": {"schema_version": self.env["schema_version"], "code_version": self.env["code_version"],
                           "canonicalization_version": self.env["canonicalization_version"]},
              "evidence": {"proposal_hash": getattr(self, "phash", None),
                           "events": getattr(self, "audit", {})}, "effects": effects}
        if migration is not None:
            cp["migration"] = migration
        res = await self.p.checkpoints.write(cp, self.version, self.epoch)
        self.version = res["version"]
        self.state = state

    async def append(self, knowledge, key=None, **extra):
        key = key or self.key
        entry = {"semantic_key": key, "kind": "effect", "service": "reservation", "operation": "reserve",
                 "run_id": self.run_id, "intent": self.sent_intent, "intent_fingerprint": digest(self.sent_intent),
                 "canonicalization_version": 1, "knowledge": knowledge, "attempts": [], "lease_epoch": self.epoch,
                 "proposal_hash": self.phash}
        entry.update(extra)
        if self.NO_EVIDENCE:
            entry.pop("evidence", None)
        try:
            await self.p.ledger.append(entry)
        except PortError as exc:
            if not (self.IGNORE_LEASE_LOSS and exc.code == "stale_epoch"):
                raise
        self.known = {**getattr(self, "known", {}), key: knowledge}

    async def finish(self, disposition, next_owner=None, escalate=False):
        if escalate and not self.NO_PACKET:
            await self.p.operator.escalate({
                "header": {"run_id": self.run_id, "state": self.state, "owner": self.me, "lease_epoch": self.epoch},
                "effects": [{"semantic_key": k, "knowledge": v} for k, v in self.known.items()],
                "authority": {"principal": self.intent["principal"]},
                "compatibility": dict(self.env), "budget": {"deadline": self.deadline},
                "recommended": {"action": "RECONCILE", "query": "reservation.lookup(key)"},
                "next_owner": next_owner})
        effects = [{"semantic_key": k, "knowledge": v} for k, v in getattr(self, "known", {}).items()]
        if self.PARTIAL_EFFECTS:
            effects = []
        await self.p.run.finish(disposition, effects=effects, next_owner=next_owner)

    async def poll_cancel(self):
        if self.IGNORE_CANCEL:
            return False
        events = await self.poll()
        self.cancel = self.cancel or any(e["type"] == "cancel" for e in events)
        return self.cancel

    # ------------------------------------------------------------------ the effect
    async def effect(self):
        p = self.p
        entries = (await p.ledger.read(self.key))["entries"]
        knowledge = entries[-1]["knowledge"] if entries else None
        if knowledge is None:
            if await self.poll_cancel():
                await self.checkpoint("CANCELLED_NO_EFFECT")
                return await self.finish("CANCELLED_NO_EFFECT")
            if not self.SKIP_PREPARE:
                await self.append("PROPOSED")
            await self.checkpoint("EFFECT_PREPARED")
            knowledge = "PROPOSED"
        if knowledge == "SENT_UNKNOWN" and self.TRUST_CALLBACK and await self.confirm_from_callback():
            knowledge = "CONFIRMED"
        if knowledge == "SENT_UNKNOWN":
            knowledge = await self.reconcile(entries[-1])
            if knowledge is None:
                return
        if knowledge in ("COMPENSATION_PROPOSED", "COMPENSATED") or self.state == "COMPENSATING":
            return await self.compensate()
        if knowledge == "CONFIRMED":
            if self.RESEND_CONFIRMED:
                await self.send(self.key)
            return await self.confirmed()
        attempt = 0
        while True:
            attempt += 1
            if await self.poll_cancel():
                await self.append("REJECTED", evidence=["cancelled before any send"])
                await self.checkpoint("CANCELLED_NO_EFFECT")
                return await self.finish("CANCELLED_NO_EFFECT")
            if self.deadline is not None and not self.IGNORE_DEADLINE and \
                    (await p.clock.now())["now"] >= self.deadline:
                await self.append("REJECTED", evidence=["deadline reached before any send took effect"])
                await self.checkpoint("FAILED_NO_EFFECT")
                return await self.finish("FAILED_NO_EFFECT")
            key = f"{self.key}-a{attempt}" if self.KEY_PER_ATTEMPT else self.key
            if key != self.key:
                await self.append("PROPOSED", key=key)
            sent_at = (await p.clock.now())["now"]
            if not self.SKIP_PREPARE:
                await self.append("SENT_UNKNOWN", key=key, attempts=[{"n": attempt, "at": sent_at}])
            if self.state == "APPROVED":
                await self.checkpoint("EFFECT_PREPARED")
            if self.state != "EFFECT_IN_FLIGHT":
                await self.checkpoint("EFFECT_IN_FLIGHT")
            try:
                res = await self.send(key)
            except PortError as exc:
                if exc.code in ("fenced", "stale_epoch"):
                    raise
                if exc.code in ("validation_failed", "permission_denied"):
                    if self.OTHER_PRINCIPAL and exc.code == "permission_denied":
                        self.sent_intent = {**self.sent_intent, "principal": "ADMIN"}
                        continue
                    await self.append("REJECTED", key=key, evidence=[exc.code])
                    await self.checkpoint("FAILED_NO_EFFECT")
                    return await self.finish("FAILED_NO_EFFECT")
                if exc.definite:
                    await self.append("PROPOSED", key=key, evidence=[exc.code])
                    if attempt >= self.CEILING:
                        await self.append("REJECTED", key=key, evidence=[exc.code, "ceiling"])
                        await self.checkpoint("FAILED_NO_EFFECT")
                        return await self.finish("FAILED_NO_EFFECT")
                    wait = max(exc.details.get("retry_after_ms", 0), 500 * attempt)
                    if not self.NO_BACKOFF:
                        jitter = (await p.random.draw(0, 100, "backoff jitter"))["value"]
                        await p.clock.sleep(wait + jitter, f"backoff after {exc.code}")
                    continue
                # indefinite
                if self.CONFIRM_FROM_SEND:
                    await self.append("CONFIRMED", key=key, evidence=["sent"], remote_ref="unknown")
                    return await self.confirmed()
                if self.BLIND_RETRY and attempt < self.CEILING:
                    await p.clock.sleep(500, "backoff after timeout")
                    continue
                if self.SUCCEED_ON_UNKNOWN:
                    return await self.finish("SUCCEEDED")
                if self.CANCEL_THEATER and await self.poll_cancel():
                    await self.checkpoint("CANCELLED_NO_EFFECT")
                    return await self.finish("CANCELLED_NO_EFFECT")
                if self.TRUST_CALLBACK and await self.confirm_from_callback():
                    return await self.confirmed()
                knowledge = await self.reconcile({"attempts": [{"n": attempt, "at": sent_at}]})
                if knowledge is None:
                    return
                if knowledge == "CONFIRMED":
                    return await self.confirmed()
                continue
            await self.append("CONFIRMED", key=key, evidence=["accepted response"], remote_ref=res["ref"])
            return await self.confirmed()

    async def confirm_from_callback(self):
        await self.p.clock.sleep(5000, "wait for the callback")
        events = [e for e in await self.poll() if e["type"] == "callback"]
        if events:
            await self.append("CONFIRMED", evidence=["callback"], remote_ref=events[-1]["payload"]["result"]["ref"])
        return bool(events)

    async def send(self, key):
        svc = self.p.service("reservation")
        args = {"key": key, "intent": dict(self.sent_intent)}
        if not self.NO_OWNER_DECLARED:
            args["retry_owner"] = "caller"
        if self.profile.get("fencing"):
            args["fence"] = self.epoch
        if self.INNER_RETRY:
            for _ in range(2):
                try:
                    return await svc.call("reserve", **args)
                except PortError as exc:
                    if exc.definite:
                        raise
        return await svc.call("reserve", **args)

    async def reconcile(self, last):
        """Authoritative lookup by key; returns the new knowledge, or None when finished."""
        p = self.p
        if self.state != "RECONCILING":
            await self.checkpoint("RECONCILING")
        sent_at = max((a.get("at", 0) for a in last.get("attempts") or [{}]), default=0)
        need = sent_at + self.profile["max_delivery_delay_ms"]
        for _ in range(4):
            try:
                res = await p.service("reservation").call("lookup", key=self.key)
            except PortError as exc:
                if self.DEADLINE_IS_FAILURE:
                    await self.append("REJECTED", evidence=["deadline passed"])
                    await self.checkpoint("FAILED_NO_EFFECT")
                    await self.finish("FAILED_NO_EFFECT")
                    return None
                await self.checkpoint("FAILED_EFFECT_UNKNOWN")
                await self.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator", escalate=True)
                return None
            if res["found"]:
                rec = res["record"]
                if all(rec["intent"].get(k) == v for k, v in self.intent.items()):
                    if self.SEARCH_AFTER_LOOKUP:
                        await p.service("reservation").call("search", incident=self.intent["incident"],
                                                            slot=self.intent["slot"])
                    await self.append("CONFIRMED", evidence=["lookup found"], remote_ref=rec["ref"])
                    return "CONFIRMED"
                await self.checkpoint("FAILED_EFFECT_UNKNOWN")
                await self.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator", escalate=True)
                return None
            if not res["in_flight"] and (self.TRUST_STALE_READ or res["as_of"] >= need):
                await self.append("PROPOSED", evidence=["authoritative absence"])
                return "PROPOSED"
            await p.clock.sleep(max(1000, need - res["as_of"]), "wait for the read to cover the send")
        await self.checkpoint("FAILED_EFFECT_UNKNOWN")
        await self.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator", escalate=True)
        return None

    async def confirmed(self):
        if self.state == "COMPENSATING":
            return await self.compensate()
        if self.state != "EFFECT_CONFIRMED":
            await self.checkpoint("EFFECT_CONFIRMED")
        if await self.poll_cancel():
            return await self.compensate()
        await self.checkpoint("SUCCEEDED")
        await self.finish("SUCCEEDED")

    async def compensate(self):
        """A separate effect with its own key; resumable from any crash point."""
        p = self.p
        svc = p.service("reservation")
        entries = (await p.ledger.read(self.key))["entries"]
        ref = next(e.get("remote_ref") for e in reversed(entries) if e.get("remote_ref"))
        original = entries[-1]["knowledge"]
        comp_key = "rel-" + self.key
        comp_hash = digest({"release": ref})
        if self.ROLLBACK:
            await self.append("REJECTED", evidence=["rolled back"])
            await svc.call("release", key=self.key, ref=ref, intent={"proposal_hash": comp_hash})
            await self.checkpoint("COMPENSATING")
            await self.checkpoint("CANCELLED_NO_EFFECT")
            return await self.finish("CANCELLED_NO_EFFECT")
        if self.state != "COMPENSATING":
            await self.checkpoint("COMPENSATING")
        comp = {"semantic_key": comp_key, "kind": "compensation", "service": "reservation",
                "operation": "release", "run_id": self.run_id, "intent": {"release": ref},
                "intent_fingerprint": digest({"release": ref}), "canonicalization_version": 1,
                "knowledge": "PROPOSED", "attempts": [], "lease_epoch": self.epoch, "compensates": self.key}
        history = (await p.ledger.read(comp_key))["entries"]
        state = history[-1]["knowledge"] if history else None
        if state is None:
            await p.authority.request(comp_hash, "release")
            if not (await p.authority.check(comp_hash, "release"))["live"]:
                await self.checkpoint("CANCELLED_EFFECT_REMAINS")
                return await self.finish("CANCELLED_EFFECT_REMAINS", next_owner="operator", escalate=True)
            await p.ledger.append(comp)
            state = "PROPOSED"
        if original == "CONFIRMED":
            await self.append("COMPENSATION_PROPOSED", evidence=["cancellation"], remote_ref=ref,
                              compensated_by=comp_key)
        self.known[comp_key] = state
        if state == "SENT_UNKNOWN":
            res = await svc.call("lookup", key=self.key)
            if res["found"] and res["record"]["status"] == "released":
                await p.ledger.append({**comp, "knowledge": "CONFIRMED", "evidence": ["lookup: released"]})
                state = "CONFIRMED"
            else:
                await self.checkpoint("CANCELLED_EFFECT_UNKNOWN")
                return await self.finish("CANCELLED_EFFECT_UNKNOWN", next_owner="operator", escalate=True)
        if state == "PROPOSED":
            if not (await p.authority.check(comp_hash, "release"))["live"]:
                await p.authority.request(comp_hash, "release")
            await p.ledger.append({**comp, "knowledge": "SENT_UNKNOWN"})
            self.known[comp_key] = "SENT_UNKNOWN"
            res = await svc.call("release", key=comp_key, ref=ref,
                                 intent={"proposal_hash": comp_hash, "principal": self.intent["principal"]})
            await p.ledger.append({**comp, "knowledge": "CONFIRMED", "remote_ref": res["release_ref"],
                                   "evidence": ["release accepted"]})
            state = "CONFIRMED"
        self.known[comp_key] = state
        if (await p.ledger.read(self.key))["entries"][-1]["knowledge"] != "COMPENSATED":
            await self.append("COMPENSATED", evidence=["release confirmed"], remote_ref=ref)
        await self.checkpoint("CANCELLED_NO_EFFECT")
        await self.finish("CANCELLED_NO_EFFECT")


def mistake(name, **flags):
    return type(name, (Good,), flags)


BlindRetry = mistake("BlindRetry", BLIND_RETRY=True)
KeyPerAttempt = mistake("KeyPerAttempt", KEY_PER_ATTEMPT=True)
InnerRetry = mistake("InnerRetry", INNER_RETRY=True)
NoOwnerDeclared = mistake("NoOwnerDeclared", NO_OWNER_DECLARED=True)
DeadlineIsFailure = mistake("DeadlineIsFailure", DEADLINE_IS_FAILURE=True)
ConfirmFromSend = mistake("ConfirmFromSend", CONFIRM_FROM_SEND=True)
TrustStaleRead = mistake("TrustStaleRead", TRUST_STALE_READ=True)
IgnoreCancel = mistake("IgnoreCancel", IGNORE_CANCEL=True)
Rollback = mistake("Rollback", ROLLBACK=True)
SkipPrepare = mistake("SkipPrepare", SKIP_PREPARE=True)
NoBackoff = mistake("NoBackoff", NO_BACKOFF=True)
OtherPrincipal = mistake("OtherPrincipal", OTHER_PRINCIPAL=True)
NoPacket = mistake("NoPacket", NO_PACKET=True)
SucceedOnUnknown = mistake("SucceedOnUnknown", SUCCEED_ON_UNKNOWN=True)
NoLease = mistake("NoLease", NO_LEASE=True)
BestEffort = mistake("BestEffort", BEST_EFFORT=True)
InventApproval = mistake("InventApproval", INVENT_APPROVAL=True)
IgnoreDeadline = mistake("IgnoreDeadline", IGNORE_DEADLINE=True)
NoCeiling = mistake("NoCeiling", NO_CEILING=True)
KeyOmitsTenant = mistake("KeyOmitsTenant", KEY_OMITS_TENANT=True)
ResendConfirmed = mistake("ResendConfirmed", RESEND_CONFIRMED=True)
TrustCallback = mistake("TrustCallback", TRUST_CALLBACK=True)
CancelTheater = mistake("CancelTheater", CANCEL_THEATER=True)
NoEvidence = mistake("NoEvidence", NO_EVIDENCE=True)
PartialEffects = mistake("PartialEffects", PARTIAL_EFFECTS=True)
StaleSend = mistake("StaleSend", TTL=10_000, IGNORE_LEASE_LOSS=True)
Raises = mistake("Raises", RAISE=True)
SearchAfterLookup = mistake("SearchAfterLookup", SEARCH_AFTER_LOOKUP=True)   # not a mistake: a free choice
