"""Synthetic remote services: the ground truth of what really happened.

Each service is a capability profile (BRIEF §4) plus a state. ``execute`` applies one
request that reached the service and returns its response (or raises PortError); the
transport in world.py decides whether and when a request reaches it and whether the
response reaches the caller. Every commit is recorded on the ``remote`` lane.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..vocab import events
from ..vocab.model import EFFECT_OPS, digest
from .ports import PortError

RESERVATION_INTENT_FIELDS = ("tenant", "incident", "part", "slot", "technician", "quantity",
                             "principal", "proposal_hash")

#: Profile knobs with their defaults, per service kind. The scenario loader validates
#: names and values against this table.
PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "reservation": {
        "idempotency": "semantic",        # semantic | key_only | none
        "retention_ms": 24 * 3600_000,    # provider key-retention horizon
        "lookup": "by_key",               # by_key | by_incident_slot | none
        "consistency": "strong",          # strong | eventual
        "lag_ms": 0,                      # eventual-consistency lag
        "latency_ms": 40,                 # one-way network latency
        "timeout_ms": 3000,               # client timeout the transport applies
        "max_delivery_delay_ms": 60_000,  # documented bound on a late arrival
        "fencing": False,                 # rejects requests with an older fencing token
        "stock": 10,                      # units per part, for aggregate reads
        "compensation": True,             # release supported
        "proxy_retries": 0,               # a proxy that re-sends on 5xx/timeout on its own
        "callback_delay_ms": None,        # send a completion callback to the run's inbox
        "denied_principals": [],          # principals without the reserve capability
        "background_ms": None,            # other actors reserve the same parts about this often
    },
    "notification": {
        "idempotency": "none", "retention_ms": 0, "lookup": "none", "consistency": "strong",
        "lag_ms": 0, "latency_ms": 30, "timeout_ms": 2000, "max_delivery_delay_ms": 30_000,
        "fencing": False, "proxy_retries": 0, "callback_delay_ms": None, "denied_principals": [],
    },
    "registry": {
        "idempotency": "natural_key", "retention_ms": 365 * 24 * 3600_000, "lookup": "by_version",
        "consistency": "strong", "lag_ms": 0, "latency_ms": 50, "timeout_ms": 3000,
        "max_delivery_delay_ms": 30_000, "fencing": False, "job_ms": 20_000, "proxy_retries": 0,
        "callback_delay_ms": None, "denied_principals": [],
    },
}
#: Knobs a profile may declare that have no default in a trace: a service that leaves one out
#: behaves as before, and only a scenario (or a services profile) that declares it records it.
PROFILE_OPTIONAL: dict[str, dict[str, Any]] = {
    # store an error answer under its key and answer it again to that key (as a service that keeps
    # the first response under a key, errors included, does); needs idempotency semantic or key_only
    "reservation": {"error_replay": False},
    "notification": {"error_replay": False},
}
PROFILE_CHOICES = {
    "idempotency": {"semantic", "key_only", "none", "natural_key"},
    "lookup": {"by_key", "by_incident_slot", "none", "by_version"},
    "consistency": {"strong", "eventual"},
}


def profile_conflicts(kind: str, profile: dict) -> list[tuple[str, str]]:
    """Knob combinations a service could not honour as ``describe()`` states them:
    (knob, why and what to do). The scenario loader refuses them."""
    out = []
    if profile.get("error_replay") and profile.get("idempotency") not in ("semantic", "key_only"):
        out.append(("error_replay", "error_replay: true stores an error under its key, which needs idempotency: "
                                    "semantic or key_only; set one, or drop error_replay"))
    if kind == "reservation" and profile.get("lookup") == "by_key" and profile.get("idempotency") == "none":
        out.append(("lookup", "lookup: by_key needs a key index, and idempotency: none keeps none (the lookup "
                              "could never find a hold); use idempotency: key_only or semantic, or lookup: "
                              "by_incident_slot or none"))
    return out


@dataclass(slots=True)
class Record:
    """One remote effect as the service holds it."""

    ref: str
    key: str | None
    fingerprint: str
    intent: dict
    committed_at: int
    cause: str                       # adapter | proxy_retry | duplicate_delivery | other_actor
    run: str | None
    status: str = "active"           # active | released | publishing | published
    released_at: int | None = None
    history: list = field(default_factory=list)


def fingerprint(intent: dict) -> str:
    return digest(intent)


class Service:
    kind = ""

    def __init__(self, name: str, profile: dict, emit: Callable, now: Callable[[], int]) -> None:
        self.name = name
        self.profile = profile
        self.emit = emit
        self.now = now
        self.records: list[Record] = []
        self.keys: dict[str, Record] = {}     # idempotency index
        self.in_flight: dict[str, int] = {}   # key -> requests executing
        self.errors: dict[str, tuple[PortError, str, int]] = {}   # error_replay: key -> (error, fingerprint, at)
        self.max_fence = 0
        self._refs = 0
        #: while one read is answered by a stale replica (fault stale_read): commits this recent are
        #: invisible to it, which still reports itself fresh
        self.stale_by_ms = 0

    # -- helpers -------------------------------------------------------------------------
    def execute_stale(self, stale_ms: int, op: str, args: dict, **kw) -> Any:
        """``execute`` answered by a replica that misses the last ``stale_ms`` of commits (0: none)."""
        self.stale_by_ms = stale_ms
        try:
            return self.execute(op, args, **kw)
        finally:
            self.stale_by_ms = 0

    def describe(self) -> dict:
        return {"service": self.name, "kind": self.kind, **self.profile}

    def _new_ref(self, prefix: str) -> str:
        self._refs += 1
        return f"{prefix}-{self._refs}"

    def _key_live(self, key: str | None) -> Record | None:
        rec = self.keys.get(key) if key else None
        if rec is None:
            return None
        if self.now() - rec.committed_at >= self.profile["retention_ms"]:
            return None  # the provider forgot the key
        return rec

    def _visible(self, rec: Record) -> bool:
        if self.stale_by_ms and rec.committed_at > self.now() - self.stale_by_ms:
            return False
        if self.profile["consistency"] == "eventual":
            return rec.committed_at <= self.now() - self.profile["lag_ms"]
        return True

    def _as_of(self) -> int:
        return self.now() - (self.profile["lag_ms"] if self.profile["consistency"] == "eventual" else 0)

    def _check_common(self, args: dict) -> None:
        intent = args.get("intent") or {}
        if intent.get("principal") in self.profile.get("denied_principals", ()):
            raise PortError("permission_denied", f"principal {intent.get('principal')!r} lacks the "
                            f"{self.name} capability")
        if self.profile["fencing"]:
            fence = args.get("fence")
            if not isinstance(fence, int) or isinstance(fence, bool):
                raise PortError("bad_request", "this service requires an integer 'fence' (lease epoch)")
            if fence < self.max_fence:
                raise PortError("fenced", f"fence {fence} is older than {self.max_fence}")
            self.max_fence = fence

    def record_view(self, rec: Record) -> dict:
        return {"ref": rec.ref, "key": rec.key, "intent": rec.intent, "status": rec.status,
                "fingerprint": rec.fingerprint, "committed_at": rec.committed_at}

    def commit(self, *, key, intent, cause, run, call, prefix, status="active") -> Record:
        rec = Record(ref=self._new_ref(prefix), key=key, fingerprint=fingerprint(intent),
                     intent=dict(intent), committed_at=self.now(), cause=cause, run=run,
                     status=status)
        self.records.append(rec)
        if key is not None and self.profile["idempotency"] != "none":
            self.keys[key] = rec
        self.emit(events.Effect, run=run, service=self.name, op="commit", ref=rec.ref, key=key,
                  intent=rec.intent, fingerprint=rec.fingerprint, cause=cause, call=call)
        return rec

    def dedup(self, key, intent, run, call) -> dict | None:
        """Idempotency: return the original response for a known key, or refuse a changed intent."""
        mode = self.profile["idempotency"]
        if mode in ("none", "natural_key") or key is None:
            return None
        rec = self._key_live(key)
        if rec is None:
            return None
        if mode == "semantic" and rec.fingerprint != fingerprint(intent):
            self.emit(events.Refused, run=run, service=self.name, key=key, call=call,
                      reason="intent_mismatch", ref=rec.ref)
            raise PortError("intent_mismatch", f"key {key!r} was used for a different request "
                            f"(stored fingerprint {rec.fingerprint})")
        self.emit(events.Replayed, run=run, service=self.name, key=key, ref=rec.ref, call=call)
        return {**self.record_view(rec), "replayed": True}

    def _keeps_errors(self, key) -> bool:
        return bool(self.profile.get("error_replay")) and key is not None \
            and self.profile["idempotency"] in ("semantic", "key_only")

    def replay_error(self, key, intent, run, call) -> None:
        """``error_replay``: the error answer stored under ``key`` is answered again (semantic: a
        changed intent under it is an intent_mismatch), until the key's retention ends."""
        stored = self.errors.get(key) if self._keeps_errors(key) else None
        if stored is None or self.now() - stored[2] >= self.profile["retention_ms"]:
            return
        exc, fp, _ = stored
        if self.profile["idempotency"] == "semantic" and fp != fingerprint(intent):
            self.emit(events.Refused, run=run, service=self.name, key=key, call=call, reason="intent_mismatch")
            raise PortError("intent_mismatch", f"key {key!r} was used for a different request (it failed with "
                            f"{exc.code})")
        self.emit(events.Refused, run=run, service=self.name, key=key, call=call, reason="error_replayed",
                  code=exc.code)
        raise PortError(exc.code, f"{exc.message} (the answer stored under key {key!r}, replayed)")

    def keep_error(self, key, intent, exc: PortError) -> None:
        """``error_replay``: an error answered after the request began executing is stored under a
        key that has no live effect."""
        if self._keeps_errors(key) and self._key_live(key) is None and key not in self.errors:
            self.errors[key] = (exc, fingerprint(intent), self.now())

    def refuse_in_flight(self, op: str, args: dict) -> None:
        """A keyed effect request while a request with the same key is still executing: 409-style
        conflict (when the service keeps keys), before anything is done."""
        key = args.get("key")
        if key is not None and op in EFFECT_OPS[self.kind] and self.in_flight.get(key) \
                and self.profile["idempotency"] in ("semantic", "key_only"):
            raise PortError("conflict_in_flight", f"a request with key {key!r} is executing")

    def execute(self, op: str, args: dict, *, cause: str, run: str | None, call: int | None) -> dict:
        handler = getattr(self, "op_" + op, None)
        if handler is None:
            raise PortError("bad_request", f"service {self.name!r} has no operation {op!r}")
        return handler(args, cause=cause, run=run, call=call)

    def callback_delay(self, op: str, result: Any) -> int | None:
        """The delay of the completion callback a request the service carried out sends (with a
        ``callback_delay_ms`` profile), whether or not its answer reaches the caller: one for each
        new commit of an effect, none for a replay of an earlier one. None: no callback."""
        delay = self.profile.get("callback_delay_ms")
        if delay is None or op not in EFFECT_OPS[self.kind]:
            return None
        if isinstance(result, dict) and result.get("replayed") is True:
            return None
        return delay

    def op_describe(self, args, **_):
        return self.describe()


class Reservation(Service):
    """The FieldOps inventory hold."""

    kind = "reservation"

    def op_reserve(self, args, *, cause, run, call):
        key, intent = args.get("key"), args.get("intent")
        if not isinstance(intent, dict):
            raise PortError("validation_failed", "reserve needs an 'intent' object")
        qty = intent.get("quantity")
        if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
            raise PortError("validation_failed", f"quantity must be a positive integer, got {qty!r}")
        missing = [f for f in ("tenant", "incident", "part", "slot") if not intent.get(f)]
        if missing:
            raise PortError("validation_failed", f"intent lacks {', '.join(missing)}")
        self.replay_error(key, intent, run, call)
        try:
            self._check_common(args)
        except PortError as exc:
            self.keep_error(key, intent, exc)
            raise
        replay = self.dedup(key, intent, run, call)
        if replay is not None:
            return replay
        rec = self.commit(key=key, intent=intent, cause=cause, run=run, call=call, prefix="R")
        return {**self.record_view(rec), "replayed": False}

    def op_lookup(self, args, **_):
        if self.profile["lookup"] != "by_key":
            raise PortError("bad_request", "this service has no lookup by key")
        key = args.get("key")
        rec = self._key_live(key)
        found = rec is not None and self._visible(rec)
        return {"found": found, "record": self.record_view(rec) if found else None,
                "as_of": self._as_of(), "consistency": self.profile["consistency"],
                "in_flight": self.in_flight.get(key, 0) > 0}

    def op_search(self, args, **_):
        if self.profile["lookup"] == "none":
            raise PortError("bad_request", "this service has no search")
        incident, slot = args.get("incident"), args.get("slot")
        hits = [self.record_view(r) for r in self.records
                if r.intent.get("incident") == incident and r.intent.get("slot") == slot
                and self._visible(r)]
        return {"records": hits, "as_of": self._as_of(), "consistency": self.profile["consistency"]}

    def op_aggregate(self, args, **_):
        part = args.get("part")
        held = sum(r.intent.get("quantity", 0) for r in self.records
                   if r.intent.get("part") == part and r.status == "active" and self._visible(r))
        return {"part": part, "available": self.profile["stock"] - held, "as_of": self._as_of()}

    def op_release(self, args, *, cause, run, call):
        if not self.profile["compensation"]:
            raise PortError("bad_request", "this service cannot release a hold")
        ref, key = args.get("ref"), args.get("key")
        target = next((r for r in self.records if r.ref == ref), None)
        if target is None:
            raise PortError("not_found", f"no hold {ref!r}")
        self._check_common(args)
        if key and key in self.keys and self._key_live(key) is not None:
            prior = self.keys[key]
            self.emit(events.Replayed, run=run, service=self.name, key=key, ref=prior.ref, call=call)
            return {"ref": ref, "status": target.status, "release_ref": prior.ref, "replayed": True}
        if target.status == "active":
            target.status = "released"
            target.released_at = self.now()
        rel = self.commit(key=key, intent={"release": ref, **(args.get("intent") or {})},
                          cause=cause, run=run, call=call, prefix="X", status="done")
        self.emit(events.Released, run=run, service=self.name, ref=ref, release_ref=rel.ref,
                  key=key, cause=cause, call=call)
        return {"ref": ref, "status": target.status, "release_ref": rel.ref, "replayed": False}


class Notification(Service):
    """Accepts messages; offers no read by key, so delivery can stay unknown."""

    kind = "notification"

    def op_send(self, args, *, cause, run, call):
        intent = args.get("intent")
        if not isinstance(intent, dict):
            raise PortError("validation_failed", "send needs an 'intent' object (to, message)")
        self.replay_error(args.get("key"), intent, run, call)
        try:
            self._check_common(args)
        except PortError as exc:
            self.keep_error(args.get("key"), intent, exc)
            raise
        replay = self.dedup(args.get("key"), intent, run, call)
        if replay is not None:
            return replay
        rec = self.commit(key=args.get("key"), intent=intent, cause=cause, run=run, call=call,
                          prefix="M", status="delivered")
        return {"message_id": rec.ref}


class Registry(Service):
    """A package registry (seed 000): natural key name@version, asynchronous publish jobs."""

    kind = "registry"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.jobs: dict[str, Record] = {}

    def _natural(self, intent: dict) -> tuple:
        return (intent.get("package"), intent.get("version"))

    def _job_status(self, rec: Record) -> str:
        return "succeeded" if self.now() - rec.committed_at >= self.profile["job_ms"] else "running"

    def op_publish(self, args, *, cause, run, call):
        intent = args.get("intent")
        if not isinstance(intent, dict) or not intent.get("package") or not intent.get("version"):
            raise PortError("validation_failed", "publish needs intent.package and intent.version")
        self._check_common(args)
        for rec in self.records:
            if self._natural(rec.intent) == self._natural(intent):
                self.emit(events.Refused, run=run, service=self.name, key=args.get("key"),
                          call=call, reason="already_exists", ref=rec.ref)
                raise PortError("already_exists", f"{intent['package']}@{intent['version']} exists")
        rec = self.commit(key=args.get("key"), intent=intent, cause=cause, run=run, call=call,
                          prefix="J", status="publishing")
        self.jobs[rec.ref] = rec
        return {"job_id": rec.ref, "status": "running"}

    def op_get_version(self, args, **_):
        want = (args.get("package"), args.get("version"))
        for rec in self.records:
            if self._natural(rec.intent) == want and self._job_status(rec) == "succeeded":
                return {"found": True, "record": self.record_view(rec), "as_of": self.now(),
                        "consistency": "strong", "in_flight": False}
        running = any(self._natural(r.intent) == want for r in self.records)
        return {"found": False, "record": None, "as_of": self.now(), "consistency": "strong",
                "in_flight": running}

    def op_wait_job(self, args, **_):
        rec = self.jobs.get(args.get("job_id"))
        if rec is None:
            raise PortError("not_found", f"no job {args.get('job_id')!r}")
        return {"job_id": rec.ref, "status": self._job_status(rec), "record": self.record_view(rec)}


SERVICE_CLASSES = {"reservation": Reservation, "notification": Notification, "registry": Registry}


def malformed_request(kind: str, profile: dict, op: str, args: dict) -> str | None:
    """Why a request another actor makes (a scenario's ``other_actor.args``) could never be
    carried out, whatever the world holds when it is made, or None. The request is tried on an
    empty service of this profile: a validation failure or a malformed request is the args'
    fault; anything else (a hold not found, a refused principal) depends on the run."""
    key = args.get("key")
    if key is not None and not isinstance(key, str):
        return f"'key' must be a string, got {type(key).__name__}"
    if op == "release" and not isinstance(args.get("ref"), str):
        return "release needs 'ref', the reference of the hold to release (a string)"
    svc = SERVICE_CLASSES[kind](kind, dict(profile), lambda *a, **k: None, lambda: 0)
    try:
        svc.execute(op, dict(args), cause="other_actor", run=None, call=None)
    except PortError as exc:
        if exc.code in ("validation_failed", "bad_request"):
            return f"{op} would be refused ({exc.code}): {exc.message}"
    return None
