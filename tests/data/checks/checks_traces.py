"""Hand-made traces for the checks' tests: the few situations no well-behaved world produces
(a store that accepts a stale write, a restart budget running out) and compact counter-
examples. Events have the shape docs/trace.md documents."""
from __future__ import annotations

INTENT = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19",
          "technician": "TECH-4", "quantity": 1, "principal": "U-7"}
SENT = {**INTENT, "proposal_hash": "ph-1"}
PROFILE = {"idempotency": "semantic", "retention_ms": 86_400_000, "lookup": "by_key", "consistency": "strong",
           "lag_ms": 0, "latency_ms": 40, "timeout_ms": 3000, "max_delivery_delay_ms": 60_000, "fencing": False,
           "proxy_retries": 0}
ENV = {"code_version": 1, "schema_version": 1, "canonicalization_version": 1}


class TraceBuilder:
    def __init__(self, *, approval="none", expect=None, tags=(), deadline=None, runs=None, services=None):
        self.events: list[dict] = []
        self.t = 0
        self.refs = 0
        self.versions: dict[str, int] = {}
        runs = runs or [{"id": "run-82", "intent": dict(INTENT), "service": "reservation",
                         "operation": "reserve", "deadline": deadline, "start": 0, "approval": approval,
                         "compensation_authority": "granted"}]
        self.emit("meta", "header", run=None, format=1, scenario="hand", title="hand-made", seed=1,
                  adapter="hand:Made", harness="test", origin_ms=36_000_000, horizon_ms=1_800_000, env=dict(ENV),
                  services=services or {"reservation": dict(PROFILE)}, runs=runs, source="hand.yaml", card={},
                  tags=list(tags), expect=dict(expect or {}))

    # ------------------------------------------------------------------ raw
    def emit(self, lane, kind, *, t=None, worker=None, run="run-82", **data) -> int:
        if t is not None:
            self.t = t
        ev = {"seq": len(self.events), "t": self.t, "lane": lane, "kind": kind, "worker": worker, "run": run}
        ev.update(data)
        self.events.append(ev)
        self.t += 1
        return ev["seq"]

    def call(self, worker, port, op, **args) -> int:
        return self.emit("port", "call", worker=worker, port=port, op=op, args=args, nth=1)

    def result(self, call, value=None, error=None, delivered=True) -> int:
        worker = self.events[call]["worker"]
        return self.emit("port", "result", worker=worker, call=call, ok=error is None, value=value,
                         error=error, delivered=delivered)

    def io(self, worker, port, op, value=None, error=None, delivered=True, **args) -> tuple[int, int]:
        c = self.call(worker, port, op, **args)
        return c, self.result(c, value=value, error=error, delivered=delivered)

    # ------------------------------------------------------------------ platform
    def start(self, worker, env=None) -> int:
        return self.emit("worker", "start", worker=worker, number=int(worker[-1]), env=dict(env or ENV))

    def acquire(self, worker, epoch, ttl=60_000) -> int:
        c = self.call(worker, "lease", "acquire", ttl_ms=ttl)
        self.emit("run", "lease", worker=worker, op="acquire", epoch=epoch, owner=worker,
                  expires_at=self.t + ttl, call=c)
        self.result(c, value={"epoch": epoch, "owner": worker, "expires_at": self.t + ttl})
        return c

    def checkpoint(self, worker, state, epoch, effects=(), record_epoch=None, **extra) -> int:
        version = self.versions.get("run-82", 0) + 1
        self.versions["run-82"] = version
        cp = {"identity": {"run_id": "run-82", "task_id": "t", "tenant": "T-1", "principal": "U-7"},
              "control": {"state": state, "state_version": version, "owner": worker,
                          "lease_epoch": epoch if record_epoch is None else record_epoch, "event_sequence": 1,
                          "cancellation": {}, "deadline": None, "budgets": {"attempt_ceiling": 3}},
              "contract": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
              "evidence": {}, "effects": [{"semantic_key": k, "knowledge": v} for k, v in effects]}
        cp.update(extra)
        c = self.call(worker, "checkpoints", "write", checkpoint=cp, expected_version=version - 1,
                      lease_epoch=epoch)
        s = self.emit("run", "checkpoint", worker=worker, call=c, version=version, state=state, owner=worker,
                      epoch=epoch, state_version=version, checkpoint=cp)
        self.result(c, value={"version": version})
        return s

    def append(self, worker, key, knowledge, previous, epoch, kind="effect", **extra) -> int:
        entry = {"semantic_key": key, "kind": kind, "service": "reservation",
                 "operation": "reserve" if kind == "effect" else "release", "run_id": "run-82",
                 "intent": dict(SENT), "intent_fingerprint": "f", "canonicalization_version": 1,
                 "knowledge": knowledge, "attempts": [], "lease_epoch": epoch, "evidence": ["test"]}
        entry.update(extra)
        c = self.call(worker, "ledger", "append", entry=entry)
        s = self.emit("knowledge", "ledger", worker=worker, call=c, index=1, key=key, knowledge=knowledge,
                      previous=previous, epoch=epoch, live_epoch=epoch, entry=entry)
        self.result(c, value={"index": 1})
        return s

    def reserve(self, worker, key, intent=None, commit=True, error=None, delivered=True, **args) -> tuple[int, str]:
        intent = dict(SENT if intent is None else intent)
        c = self.call(worker, "reservation", "reserve", key=key, intent=intent, retry_owner="caller", **args)
        ref = None
        if commit:
            self.refs += 1
            ref = f"R-{self.refs}"
            self.emit("remote", "effect", service="reservation", op="commit", ref=ref, key=key, intent=intent,
                      fingerprint="f", cause="adapter", call=c)
        value = None if error else {"ref": ref, "key": key, "intent": intent, "status": "active", "replayed": False}
        self.result(c, value=value, error=error, delivered=delivered)
        return c, ref

    def release(self, worker, key, ref, commit=True) -> int:
        c = self.call(worker, "reservation", "release", key=key, ref=ref, intent={"proposal_hash": "ph-c"})
        if commit:
            self.refs += 1
            rel = f"X-{self.refs}"
            self.emit("remote", "effect", service="reservation", op="commit", ref=rel, key=key,
                      intent={"release": ref}, fingerprint="f", cause="adapter", call=c)
            self.emit("remote", "released", service="reservation", ref=ref, release_ref=rel, key=key,
                      cause="adapter", call=c)
        self.result(c, value={"ref": ref, "status": "released", "release_ref": "X", "replayed": False})
        return c

    def deliver(self, etype, event_id=None, **payload) -> int:
        n = sum(1 for e in self.events if e["kind"] == "deliver") + 1
        return self.emit("world", "deliver", event={"seq": n, "event_id": event_id or f"ev-{n}", "type": etype,
                                                    "producer": "user", "producer_seq": None,
                                                    "payload": payload, "at": self.t})

    def finish(self, worker, disposition, effects=(), next_owner=None, accepted=True) -> int:
        c = self.call(worker, "run", "finish", disposition=disposition)
        s = self.emit("run", "finish", worker=worker, call=c, disposition=disposition,
                      effects=[{"semantic_key": k, "knowledge": v} for k, v in effects], next_owner=next_owner,
                      reason="", packet=None, accepted=accepted, stale=not accepted)
        self.result(c, value={"accepted": accepted})
        return s

    def end(self, finished=None, waiting=None, run="run-82") -> list[dict]:
        self.emit("meta", "end", run=None, t=1_800_000,
                  runs={run: {"finished": finished, "waiting": waiting, "workers": 1}})
        return self.events

    # ------------------------------------------------------------------ a clean run
    def clean_prefix(self, worker="run-82/w1", key="k-1", epoch=1):
        """Start, lease, validated/proposed/approved checkpoints, PROPOSED and SENT_UNKNOWN."""
        self.start(worker)
        self.acquire(worker, epoch)
        for state in ("VALIDATED", "PROPOSED", "APPROVED"):
            self.checkpoint(worker, state, epoch)
        self.append(worker, key, "PROPOSED", None, epoch)
        self.checkpoint(worker, "EFFECT_PREPARED", epoch, effects=[(key, "PROPOSED")])
        self.append(worker, key, "SENT_UNKNOWN", "PROPOSED", epoch)
        self.checkpoint(worker, "EFFECT_IN_FLIGHT", epoch, effects=[(key, "SENT_UNKNOWN")])

    def clean(self, worker="run-82/w1", key="k-1", epoch=1) -> list[dict]:
        self.clean_prefix(worker, key, epoch)
        _, ref = self.reserve(worker, key)
        self.append(worker, key, "CONFIRMED", "SENT_UNKNOWN", epoch, remote_ref=ref)
        self.checkpoint(worker, "EFFECT_CONFIRMED", epoch, effects=[(key, "CONFIRMED")])
        self.checkpoint(worker, "SUCCEEDED", epoch, effects=[(key, "CONFIRMED")])
        self.finish(worker, "SUCCEEDED", effects=[(key, "CONFIRMED")])
        return self.end(finished="SUCCEEDED")
