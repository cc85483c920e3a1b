"""Small adapters that produce realistic traces for the report tests.

``Careful`` follows the AR-08 recovery procedure closely enough to produce every kind of
lane event (lease takeovers, ledger knowledge moves, reconciliation, escalation, a
compensation); ``Sloppy`` dispatches without fencing and retries blindly under a fresh key;
``Hostile`` puts markup into everything an adapter controls.
"""
from __future__ import annotations

from crashlab.vocab.model import digest
from crashlab.world.ports import PortError

TTL = 60_000
TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}


class Stop(Exception):
    """This worker lost the run (stale lease or version): stop without touching anything."""


class Careful:
    fence = True          # renew the lease before every dispatch
    blind_retry = False   # retry an ambiguous timeout under a fresh key
    key_prefix = "rsv"

    async def run(self, p):
        self.p = p
        info = await p.run.info()
        self.run_id, self.worker = info["run_id"], info["worker"]
        self.env = info["env"]
        events = (await p.inbox.poll(0))["events"]
        payload = next(e for e in events if e["type"] == "intake")["payload"]
        self.deadline = payload.get("deadline")
        self.intent = dict(payload["intent"])
        self.intent["proposal_hash"] = digest(payload["intent"])
        self.key = f"{self.key_prefix}-{self.run_id}-{self.intent['proposal_hash'][:8]}"
        try:
            await self.recover()
        except Stop as stop:
            await p.run.finish("WAITING_OPERATOR", next_owner="operator", reason=str(stop))

    # ---------------------------------------------------------------- durable state
    async def acquire(self):
        while True:
            try:
                lease = await self.p.lease.acquire(TTL)
                self.epoch = lease["epoch"]
                return
            except PortError as exc:
                if exc.code != "lease_held":
                    raise
                now = (await self.p.clock.now())["now"]
                await self.p.clock.sleep(max(1, exc.details["expires_at"] - now + 1),
                                         "wait for the previous owner's lease to expire")

    async def write(self, state, **extra):
        cp = {"identity": {"run_id": self.run_id, "task_id": "task-" + self.run_id,
                           "tenant": self.intent.get("tenant", "T-1"),
                           "principal": self.intent.get("principal", "U-7")},
              "control": {"state": state, "state_version": self.version + 1, "owner": self.worker,
                          "lease_epoch": self.epoch, "event_sequence": 1,
                          "cancellation": {"requested": self.cancelled}, "deadline": self.deadline,
                          "budgets": {"attempt_ceiling": 3}},
              "contract": {k: self.env[k] for k in ("schema_version", "code_version",
                                                    "canonicalization_version")},
              "evidence": {"proposal_hash": self.intent["proposal_hash"]},
              "effects": [{"semantic_key": self.key}], **extra}
        try:
            res = await self.p.checkpoints.write(cp, self.version, self.epoch)
        except PortError as exc:
            raise Stop(f"checkpoint write refused: {exc.code}") from None
        self.version = res["version"]
        self.state = state

    async def ledger(self, knowledge, key=None, kind="effect", **extra):
        entry = {"semantic_key": key or self.key, "kind": kind, "service": "reservation",
                 "operation": "reserve" if kind == "effect" else "release", "run_id": self.run_id,
                 "intent": self.intent, "intent_fingerprint": self.intent["proposal_hash"],
                 "canonicalization_version": self.env["canonicalization_version"],
                 "knowledge": knowledge, "attempts": [], "lease_epoch": self.epoch, **extra}
        await self.p.ledger.append(entry)

    async def poll_cancel(self):
        events = (await self.p.inbox.poll(0))["events"]
        self.cancelled = any(e["type"] == "cancel" for e in events)
        return self.cancelled

    # ---------------------------------------------------------------- recovery
    async def recover(self):
        await self.acquire()
        loaded = await self.p.checkpoints.load()
        self.version = loaded["version"]
        self.state = (loaded["checkpoint"] or {}).get("control", {}).get("state", "INTAKE")
        await self.poll_cancel()
        if self.state in TERMINAL:
            await self.p.run.finish(self.state, next_owner=None)
            return
        entries = (await self.p.ledger.read(self.key))["entries"]
        knowledge = entries[-1]["knowledge"] if entries else None
        if knowledge is None:
            if self.cancelled:
                await self.write("CANCELLED_NO_EFFECT")
                await self.p.run.finish("CANCELLED_NO_EFFECT")
                return
            await self.write("VALIDATED")
            await self.write("PROPOSED")
            await self.write("APPROVED")
            await self.ledger("PROPOSED")
            await self.write("EFFECT_PREPARED")
            knowledge = "PROPOSED"
        if knowledge == "PROPOSED":
            knowledge = await self.dispatch()
        if knowledge == "SENT_UNKNOWN":
            knowledge = await self.reconcile()
        if knowledge == "CONFIRMED":
            await self.write("EFFECT_CONFIRMED")
            if await self.poll_cancel():
                await self.compensate()
                return
            await self.write("SUCCEEDED")
            await self.p.run.finish("SUCCEEDED", effects=[{"semantic_key": self.key,
                                                            "knowledge": "CONFIRMED"}])

    async def dispatch(self, key=None):
        key = key or self.key
        if self.fence:
            try:
                await self.p.lease.renew(self.epoch, TTL)
            except PortError:
                raise Stop("lease lost before dispatch") from None
        await self.ledger("SENT_UNKNOWN", key=key)
        if self.state != "EFFECT_IN_FLIGHT":
            await self.write("EFFECT_IN_FLIGHT")
        args = {"key": key, "intent": self.intent}
        if not self.blind_retry:
            args["retry_owner"] = "caller"
        try:
            await self.p.service("reservation").call("reserve", **args)
        except PortError as exc:
            if exc.definite:
                await self.ledger("PROPOSED", key=key)
                return "PROPOSED"
            if self.blind_retry:
                return await self.dispatch(key=f"{key}-retry")
            return "SENT_UNKNOWN"
        await self.ledger("CONFIRMED", key=key)
        return "CONFIRMED"

    async def reconcile(self):
        await self.write("RECONCILING")
        for attempt in range(1, 40):
            try:
                await self.p.lease.renew(self.epoch, TTL)
            except PortError:
                raise Stop("lease lost while reconciling") from None
            try:
                res = await self.p.service("reservation").call("lookup", key=self.key)
            except PortError as exc:
                now = (await self.p.clock.now())["now"]
                if self.deadline is not None and now >= self.deadline:
                    return await self.give_up(f"lookup {exc.code} until the deadline")
                jitter = (await self.p.random.draw(0, 10_000, "backoff jitter"))["value"]
                wait = 30_000 + jitter
                if self.deadline is not None:
                    wait = max(1, min(wait, self.deadline - now))
                await self.p.clock.sleep(wait, f"backoff before lookup attempt {attempt + 1}")
                await self.poll_cancel()
                continue
            if res["found"]:
                await self.ledger("CONFIRMED", remote_ref=res["record"]["ref"])
                return "CONFIRMED"
            if not res["in_flight"]:
                await self.ledger("PROPOSED")
                return await self.dispatch()
        return await self.give_up("reconciliation budget exhausted")

    async def give_up(self, why):
        disposition = "CANCELLED_EFFECT_UNKNOWN" if self.cancelled else "FAILED_EFFECT_UNKNOWN"
        packet = self.packet(why, disposition)
        await self.p.operator.escalate(packet)
        await self.write(disposition)
        await self.p.run.finish(disposition, next_owner="operator", reason=why, packet=packet,
                                effects=[{"semantic_key": self.key, "knowledge": "SENT_UNKNOWN"}])
        return None

    def packet(self, why, disposition):
        return {"header": {"run_id": self.run_id, "tenant": self.intent.get("tenant"),
                           "goal": f"reserve {self.intent.get('part')} for {self.intent.get('incident')}",
                           "consequence": "inventory hold", "state": self.state,
                           "state_version": self.version, "owner": self.worker,
                           "lease_epoch": self.epoch,
                           "cancellation": {"requested": self.cancelled}},
                "effects": [{"semantic_key": self.key, "attempts": 1, "last_observation": "timeout",
                             "remote_ref": None, "reconciliation": [why],
                             "knowledge": "SENT_UNKNOWN"}],
                "authority": {"principal": self.intent.get("principal"), "approval": "standing",
                              "expires_at": None, "revoked": False},
                "compatibility": {k: self.env[k] for k in ("schema_version", "code_version",
                                                           "canonicalization_version")},
                "budget": {"deadline": self.deadline, "attempts_remaining": 0, "time_remaining_ms": 0},
                "recommended": {"action": "RECONCILE", "query": "reservation.lookup(key)",
                                "expected": ["found", "absent", "unavailable"]},
                "alternatives": [{"action": "STOP", "effect": "unknown", "disposition": disposition}],
                "next_owner": "operator"}

    async def compensate(self):
        comp_key = "rel-" + self.key
        await self.ledger("COMPENSATION_PROPOSED", compensated_by=comp_key)
        await self.ledger("PROPOSED", key=comp_key, kind="compensation", compensates=self.key)
        await self.write("COMPENSATING")
        found = await self.p.service("reservation").call("lookup", key=self.key)
        await self.ledger("SENT_UNKNOWN", key=comp_key, kind="compensation", compensates=self.key)
        await self.p.service("reservation").call(
            "release", key=comp_key, ref=found["record"]["ref"], intent={"release_of": self.key})
        await self.ledger("CONFIRMED", key=comp_key, kind="compensation", compensates=self.key)
        await self.ledger("COMPENSATED", compensated_by=comp_key)
        await self.write("CANCELLED_EFFECT_REMAINS")
        await self.p.run.finish("CANCELLED_EFFECT_REMAINS", reason="reservation released by "
                                "compensation; the original hold stays on record",
                                effects=[{"semantic_key": self.key, "knowledge": "COMPENSATED"}])


class Sloppy(Careful):
    fence = False
    blind_retry = True
    key_prefix = "try"


HOSTILE = "<script>alert('pwn')</script>"


class Hostile(Careful):
    key_prefix = "<b>k</b>$x$"

    def packet(self, why, disposition):
        packet = super().packet(why, disposition)
        packet["header"]["goal"] = HOSTILE
        packet["effects"][0]["reconciliation"] = ["<img src=x onerror=alert(2)>"]
        packet["recommended"] = {"action": "<iframe src='javascript:alert(3)'>", "query": HOSTILE}
        packet["alternatives"] = [{"action": "STOP", "<svg onload=alert(4)>": "x"}]
        packet["next_owner"] = "</table><script>alert(5)</script>"
        return packet

    async def give_up(self, why):
        return await super().give_up(why + " " + HOSTILE)
