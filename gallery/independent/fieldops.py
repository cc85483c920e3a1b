#!/usr/bin/env python3
"""An adapter written from crashlab's README.md and docs/ only (docs/adapters.md,
docs/protocol.md, docs/scenarios.md), with the standard library alone (this file and its
sibling fieldops_core.py, which holds the plumbing).

It is one worker's life as a generator of port calls: every ``yield (port, op, args)`` is one
request, answered by sending the value back (or throwing a :class:`PortFailure`). The same
generator runs in process (gallery.independent wraps it for ``async def run``) and over the
wire: ``python3 gallery/independent/fieldops.py [--lease-ttl MS]
[--checkpoints dense|sparse|boundaries] [--poll MS] [--reads N] [--read-pause MS]
[--read-order lookup-first|search-first|lookup-only|search-only] [--ceiling N] [--backoff MS]
[--release-read hold|compensation] [--keep] [--early-redispatch] [--conservative]`` speaks docs/protocol.md on
stdin/stdout.

Its design choices (all free under AR-08):

* identity: the proposal hash is a digest of the intake intent and the canonicalization
  version; the key is a digest of every intent field plus that hash, made before the first
  send and reused by every attempt and worker;
* ownership: a lease of ``lease_ttl_ms``, renewed right before each send; a stale epoch,
  a held lease or a lost CAS stops the worker;
* retries: one owner (this worker), ``attempt_ceiling`` attempts with exponential backoff
  and seeded jitter, never past the deadline; a throttled answer waits its retry-after;
* reconciliation: an ambiguous send is read back (lookup by key, search by incident and
  slot compared on every field, a job or a version for the registry) every ``poll_ms``, at
  most ``reads`` times; absence counts only from a strong read past the service's declared
  late-delivery bound and within key retention, and on a service that keeps no keys only if it
  fences stale requests; otherwise it escalates and stops with the effect unknown;
* a throttle's retry-after is recorded in the ledger entry's observations: it binds every
  later worker of the run, not just the one that saw it;
* a CONFIRMED entry an earlier worker recorded is read back before its result is replayed; a
  read that shows the effect gone is contradictory evidence, escalated, never a success;
* duplicate inbox events cause no transition; each checkpoint's evidence lists every event id
  with its inbox seq and the seqs of its duplicate deliveries;
* the decision packet lists every key of the run's ledger with the knowledge the ledger holds
  when escalating (read back first), the deadline, and an action legal from that state;
* the conservative variant escalates as soon as no authoritative read is available,
  instead of observing further;
* cancellation after a commit compensates where the service can release: a second effect with
  its own key, authority, ledger entry and reconciliation; a release that cannot be determined
  ends CANCELLED_EFFECT_UNKNOWN, escalated; without release authority the hold remains
  (CANCELLED_EFFECT_REMAINS, escalated); so does a release refused as not transient (never resent);
* an unseen notification answer (no read exists) is not resent: DELIVERY_UNKNOWN, escalated;
* a deployment that changes the schema or canonicalization stops an unfinished run
  (WAITING_OPERATOR); a terminal record is replayed, never demoted.
"""
from __future__ import annotations

import json
import sys

try:
    from .fieldops_core import (INDEFINITE, NOT_TRANSIENT, TERMINAL, Base, Config, Fenced, PortFailure, Reread,
                                Stop, _digest)
except ImportError:    # run as a script: its own folder is on sys.path
    from fieldops_core import (INDEFINITE, NOT_TRANSIENT, TERMINAL, Base, Config, Fenced, PortFailure, Reread,
                               Stop, _digest)

__all__ = ["Config", "PortFailure", "Worker", "main"]


class Worker(Base):
    """One worker of one run: recovery, authority, dispatch, reconciliation, compensation."""

    # ------------------------------------------------------------------ the worker
    def run(self):
        try:
            while True:
                try:
                    yield from self._run()
                    return
                except Reread:
                    continue        # a newer version under this worker's own lease: reread, reclassify
        except Fenced as lost:
            try:
                yield from self.call("run", "finish", disposition="WAITING_OPERATOR", effects=[],
                                     next_owner="the current lease owner", packet=None, wake_at=None,
                                     reason=f"ownership lost ({lost}): another worker owns the run")
            except PortFailure:
                pass
        except Stop:
            return

    def _run(self):
        info = yield from self.call("run", "info")
        self.run_id, self.worker, self.env = info["run_id"], info["worker"], info["env"]
        yield from self.poll()
        self.intent = dict(self.intake["intent"])
        self.service, self.op = self.intake["service"], self.intake["operation"]
        self.deadline = self.intake.get("deadline")
        canon = self.env["canonicalization_version"]
        self.phash = "p-" + _digest({"intent": self.intent, "canon": canon})
        self.sent_intent = {**self.intent, "proposal_hash": self.phash}
        self.key = self.semantic_key(canon)
        self.knowledge = self.ref = self.approval_id = None
        self.latest: dict = {}
        self.attempt_log, self.readings, self.attempts_used = [], [], 0
        self.read_name = None
        yield from self.acquire()
        loaded = yield from self.call("checkpoints", "load")
        self.version = loaded["version"]
        ck = loaded["checkpoint"]
        if ck is not None:
            self.state = ck["control"]["state"]
            self.attempts_used = int(ck["control"]["budgets"].get("attempts_used", 0))
            self.admitted = list(ck["control"]["budgets"].get("admitted_retries", []))
            contract = ck["contract"]
            if self.state not in TERMINAL and any(
                    contract.get(k) != self.env[k] for k in ("schema_version", "canonicalization_version")):
                yield from self.incompatible(contract)
            if self.state in TERMINAL:
                self.profile = {}
                entries = (yield from self.call("ledger", "by_run"))["entries"]
                for e in entries:
                    self.latest[e["semantic_key"]] = e
                yield from self.finish(self.state, reason="already terminal; replaying the recorded outcome",
                                       next_owner="operator" if "UNKNOWN" in self.state else None)
        self.profile = yield from self.call(self.service, "describe")
        entries = (yield from self.call("ledger", "by_run"))["entries"]
        for e in entries:
            self.latest[e["semantic_key"]] = e
        mine = [e for e in entries if e["semantic_key"] == self.key]
        if mine:
            last = mine[-1]
            self.knowledge, self.ref = last["knowledge"], last.get("remote_ref")
            self.attempt_log = list(last.get("attempts") or [])
            self.observations = list(last.get("observations") or [])
            # an attempt recorded in the ledger counts against the ceiling, even if the checkpoint
            # that would have counted it was never written (a crash between the two)
            self.attempts_used = max(self.attempts_used, len(self.attempt_log))
        yield from self.poll()
        if self.knowledge == "CONFIRMED":
            yield from self.verify_recorded()
            yield from self.confirmed()
        if self.knowledge in ("COMPENSATION_PROPOSED", "COMPENSATED"):
            yield from self.compensate()
        if self.knowledge == "REJECTED":
            yield from self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                   reason="rejected earlier")
        if self.knowledge == "SENT_UNKNOWN":
            if self.service == "registry" and self.ref:
                yield from self.follow_job(self.ref)
            yield from self.advance("RECONCILING")
            yield from self.reconcile()
        # nothing sent (no entry, or PROPOSED): the effect certainly does not exist
        if self.cancel:
            if self.knowledge == "PROPOSED":
                yield from self.record("REJECTED", note="cancelled before any send")
            yield from self.finish("CANCELLED_NO_EFFECT", reason="cancelled before dispatch")
        if self.state == "WAITING_RETRY":
            fresh = [r for r in self.retries if r not in self.admitted]
            if not fresh:
                yield from self.finish("WAITING_RETRY", next_owner="operator", reason="waiting for a retry request")
            self.admitted.append(fresh[0])
        yield from self.authorize()
        yield from self.dispatch_loop()

    def semantic_key(self, canon) -> str:
        """The key: a digest of every intent field and the proposal hash, nothing volatile."""
        return f"{self.op}.c{canon}:" + _digest({"service": self.service, "op": self.op, **self.sent_intent})

    def incompatible(self, contract):
        self.knowledge = None
        yield from self.escalate("WAITING_OPERATOR", "operator",
                                 f"checkpoint contract {contract} differs from this code {self.env}",
                                 more=[{"action": "MIGRATE", "requires": "a tested migration for these versions"},
                                       {"action": "PIN", "requires": "the old code deployed to drain the run"}])
        yield from self.checkpoint("WAITING_OPERATOR")
        effects = [{"semantic_key": k, "knowledge": e["knowledge"], "service": e["service"], "kind": e["kind"],
                    "remote_ref": e.get("remote_ref")} for k, e in self.latest.items()]
        yield from self.call("run", "finish", disposition="WAITING_OPERATOR", effects=effects,
                             next_owner="operator", reason="incompatible deployment: stopped", packet=None,
                             wake_at=None)
        raise Stop("incompatible")

    # ------------------------------------------------------------------ authority
    def authorize(self):
        if self.state in ("INTAKE",):
            yield from self.checkpoint("VALIDATED")
        if self.state in ("VALIDATED",):
            yield from self.checkpoint("PROPOSED")
        check = yield from self.call("authority", "check", proposal_hash=self.phash, action=self.op)
        if check.get("live"):
            self.approval_id = check.get("approval_id")
            if self.state in ("PROPOSED", "WAITING_HUMAN"):
                yield from self.checkpoint("APPROVED")
            return
        if check.get("revoked") or "capabilit" in str(check.get("reason", "")) or self.state == "APPROVED":
            if self.knowledge == "PROPOSED":
                yield from self.record("REJECTED", note="authority no longer live")
            yield from self.finish("FAILED_NO_EFFECT", reason=f"authority: {check.get('reason')}")
        yield from self.call("authority", "request", proposal_hash=self.phash, action=self.op,
                             summary={"intent": self.intent})
        if self.state != "WAITING_HUMAN":
            yield from self.checkpoint("WAITING_HUMAN")
        yield from self.call("lease", "renew", epoch=self.epoch, ttl_ms=1)
        yield from self.call("run", "finish", disposition="WAITING_HUMAN", effects=[], next_owner="approver",
                             reason="approval requested", packet=None, wake_at=None)
        raise Stop("WAITING_HUMAN")

    # ------------------------------------------------------------------ dispatch
    def dispatch_loop(self):
        if self.knowledge is None:
            yield from self.record("PROPOSED", note="prepared before the first send")
        if self.state != "EFFECT_PREPARED":
            yield from self.checkpoint("EFFECT_PREPARED")
        while True:
            yield from self.poll()
            if self.cancel:
                yield from self.recheck_absence()
                yield from self.record("REJECTED", note="cancelled before this send")
                yield from self.finish("CANCELLED_NO_EFFECT", reason="cancelled before dispatch")
            now = yield from self.now()
            if self.deadline is not None and now >= self.deadline:
                yield from self.recheck_absence()
                yield from self.record("REJECTED", note="deadline passed; nothing left the worker")
                yield from self.finish("FAILED_NO_EFFECT", reason="deadline reached before any send landed")
            if self.attempts_used >= self.ceiling:
                if self.cfg.at_ceiling == "fail":
                    yield from self.record("REJECTED", note="attempt ceiling spent; every attempt refused before send")
                    yield from self.finish("FAILED_NO_EFFECT",
                                           reason="attempt ceiling spent; every attempt was refused before send")
                yield from self.finish("WAITING_RETRY", next_owner="operator", escalate=True,
                                       reason="attempt ceiling spent; every attempt was refused before send")
            not_before = max([int(o.get("not_before") or 0) for o in self.observations] or [0])
            if now < not_before:
                # a retry-after binds the run, not the worker that saw it: it is in the ledger
                jitter = (yield from self.call("random", "draw", low=0, high=500, reason="backoff jitter"))["value"]
                wait = not_before - now + jitter
                if self.deadline is not None and now + wait >= self.deadline:
                    wait = max(1, self.deadline - now)
                yield from self.sleep(wait, "backoff: the recorded retry-after has not passed")
                continue
            yield from self.send_once()

    @property
    def ceiling(self) -> int:
        """The declared attempt ceiling: the policy's, plus one attempt per admitted retry request."""
        return self.cfg.attempt_ceiling + len(self.admitted)

    def send_once(self):
        self.attempts_used += 1
        now = yield from self.now()
        self.attempt_log.append({"n": len(self.attempt_log) + 1, "at": now, "worker": self.worker,
                                 "epoch": self.epoch})
        yield from self.advance("EFFECT_IN_FLIGHT", dense_only=("EFFECT_IN_FLIGHT",))
        yield from self.renew(self.call_ttl())
        yield from self.record("SENT_UNKNOWN", note="about to send")
        self.sent_at = now
        args = {"key": self.key, "intent": self.sent_intent, "retry_owner": "caller"}
        if self.profile.get("fencing"):
            args["fence"] = self.epoch
        try:
            value = yield from self.call(self.service, self.op, **args)
        except PortFailure as exc:
            yield from self.after_error(exc)
            return
        yield from self.accepted(value)

    def accepted(self, value):
        if self.service == "registry" and value.get("status") != "succeeded":
            self.ref = value.get("job_id")
            yield from self.record("SENT_UNKNOWN", note=f"job {self.ref} accepted and running")
            yield from self.follow_job(self.ref)
            return
        self.ref = value.get("ref") or value.get("job_id") or value.get("message_id")
        yield from self.record("CONFIRMED", note="accepted response")
        yield from self.confirmed()

    def after_error(self, exc):
        now = yield from self.now()
        seen = {"outcome": exc.code, "at": now, "definite": exc.definite,
                "boundary": "before send" if exc.definite else "possibly sent"}
        retry_after = int(exc.details.get("retry_after_ms") or 0)
        if retry_after:
            seen.update(retry_after_ms=retry_after, not_before=now + retry_after)
        self.observations.append(seen)
        if exc.code in INDEFINITE or not exc.definite:
            yield from self.advance("RECONCILING")
            yield from self.reconcile()
        if exc.code == "already_exists" or exc.code == "conflict_in_flight":
            yield from self.advance("RECONCILING")
            yield from self.reconcile()
        if exc.code in NOT_TRANSIENT:
            yield from self.record("REJECTED", note=f"{exc.code}: refused before any effect")
            yield from self.finish("CANCELLED_NO_EFFECT" if self.cancel else "FAILED_NO_EFFECT",
                                   reason=f"{exc.code} is not transient")
        # definite and transient: nothing left; back off and let the loop decide
        yield from self.record("PROPOSED", note=f"{exc.code}: certainly not sent")
        if self.attempts_used >= self.ceiling:
            return                  # no attempt follows: no backoff to sleep
        wait = int(exc.details.get("retry_after_ms") or 0)
        jitter = (yield from self.call("random", "draw", low=0, high=500, reason="backoff jitter"))["value"]
        wait = max(wait, self.cfg.backoff_ms * (2 ** (self.attempts_used - 1))) + jitter
        now = yield from self.now()
        if self.deadline is not None and now + wait >= self.deadline:
            wait = max(1, self.deadline - now)
        yield from self.sleep(wait, f"backoff after {exc.code}")

    # ------------------------------------------------------------------ reconciliation
    def reconcile(self):
        """Read the effect back until found, proven absent or the budget is spent: at least ``reads``
        reads and through the declared late-delivery bound and lag, whatever the polling cadence."""
        n = 0
        if self.cfg.read_pause_ms:
            yield from self.sleep(self.cfg.read_pause_ms, "reconcile: a pause before the first read")
        while True:
            n += 1
            verdict = yield from self.read_once()
            if verdict == "found":
                yield from self.record("CONFIRMED", note="authoritative read found the effect",
                                       reconciliation=self.readings[-3:])
                yield from self.confirmed()
            if verdict == "absent" and (self.claimable or not (yield from self.claim_due())):
                self.early_absence = not self.claimable
                yield from self.record("PROPOSED", note="authoritative read proves absence",
                                       reconciliation=self.readings[-3:])
                if self.cancel:
                    yield from self.record("REJECTED", note="absent and cancelled")
                    yield from self.finish("CANCELLED_NO_EFFECT", reason="cancelled; the effect is absent")
                yield from self.advance("EFFECT_PREPARED")
                yield from self.dispatch_loop()
            if verdict == "conflict":
                yield from self.poll()
                yield from self.finish("CANCELLED_EFFECT_UNKNOWN" if self.cancel else "FAILED_EFFECT_UNKNOWN",
                                       next_owner="operator", escalate=True,
                                       reason="integrity error: the key is bound to other parameters")
            if verdict == "none" or (verdict == "unavailable" and self.cfg.conservative):
                break
            now = yield from self.now()
            if n >= self.cfg.reads and now >= self.observe_until():
                break
            yield from self.sleep(self.cfg.poll_ms, f"reconcile: {verdict}")
        yield from self.poll()
        reason = "outcome unknown after the declared observation budget"
        yield from self.finish("CANCELLED_EFFECT_UNKNOWN" if self.cancel else "FAILED_EFFECT_UNKNOWN",
                               next_owner="operator", escalate=True, reason=reason)

    def observe_until(self) -> int:
        """The end of the observation window: the last send plus the late-delivery bound and lag."""
        sent = self.attempt_log[-1]["at"] if self.attempt_log else 0
        p = self.profile
        return sent + int(p.get("max_delivery_delay_ms") or 0) + int(p.get("lag_ms") or 0) + 1

    def read_once(self):
        """One authoritative observation: found, absent, wait, unavailable, none or conflict."""
        p = self.profile
        now = yield from self.now()
        sent = self.sent_at if hasattr(self, "sent_at") else (self.attempt_log[-1]["at"] if self.attempt_log else 0)
        first = self.attempt_log[0]["at"] if self.attempt_log else sent
        self.claimable = now >= sent + int(p.get("max_delivery_delay_ms") or 0)   # absent enough to claim it
        settled = now >= sent + int(p.get("max_delivery_delay_ms") or 0) or (
            self.cfg.early_redispatch and p.get("idempotency") in ("semantic", "key_only"))
        try:
            if self.service == "registry":
                self.read_name = "registry.get_version(package, version)"
                got = yield from self.call("registry", "get_version", package=self.intent.get("package"),
                                           version=self.intent.get("version"))
                self.readings.append({"at": now, "read": "get_version", "found": got.get("found")})
                if got.get("found"):
                    if self._matches(got.get("record")):
                        self.ref = (got.get("record") or {}).get("ref") or self.ref
                        return "found"
                    return "none"
                if got.get("in_flight") or not settled:
                    return "wait"
                return "absent"
            lookup, retained = p.get("lookup"), now - first < int(p.get("retention_ms") or 0)
            order = {"lookup-first": ["lookup", "search"], "search-first": ["search", "lookup"],
                     "lookup-only": ["lookup"], "search-only": ["search"]}[self.cfg.read_order]
            usable = {"lookup": lookup == "by_key" and retained, "search": lookup in ("by_key", "by_incident_slot")}
            reads = [r for r in order if usable[r]]
            if not reads and self.cfg.read_order.endswith("-only"):
                # the one read this design prefers is not offered (or not authoritative): the other
                reads = [r for r in ("lookup", "search") if usable[r]]
            if not reads:
                return "none"
            found, decisive = None, True
            for r in reads:                     # every usable read, in the configured order
                if r == "lookup":
                    self.read_name = "reservation.lookup(key)"
                    got = yield from self.call(self.service, "lookup", key=self.key)
                    records = [got["record"]] if got.get("found") else []
                else:
                    self.read_name = "reservation.search(incident, slot)"
                    got = yield from self.call(self.service, "search", incident=self.intent.get("incident"),
                                               slot=self.intent.get("slot"))
                    records = got.get("records") or []
                self.readings.append({"at": now, "read": r, "records": len(records), "as_of": got.get("as_of")})
                match = next((rec for rec in records if self._matches(rec)), None)
                if match is not None:
                    found = found or match
                elif any(rec.get("key") == self.key for rec in records):
                    return "conflict"           # the same key with other parameters: integrity error
                fresh = got.get("consistency", "strong") == "strong" or \
                    int(got.get("as_of") or 0) >= sent + int(p.get("max_delivery_delay_ms") or 0)
                if got.get("in_flight") or not settled or not fresh:
                    decisive = False
            if found is not None:
                self.ref = found.get("ref") or self.ref
                return "found"
            if not decisive:
                return "wait"
            if lookup == "by_key" and not retained:
                return "none"
            if p.get("idempotency") == "none" and not p.get("fencing"):
                return "none"           # a request still on its way could land after a resend
            return "absent"
        except PortFailure as exc:
            self.readings.append({"at": now, "error": exc.code})
            return "unavailable"

    def follow_job(self, job_id):
        """Keep the job id and follow the existing task: a wait that ends while the job runs is
        not failure. Follows it ``reads`` times, and at least for the job time the registry
        declares (``job_ms`` in ``describe``)."""
        until = self.observe_until() + int(self.profile.get("job_ms") or 0)
        n = 0
        while True:
            n += 1
            now = yield from self.now()
            if n > self.cfg.reads and now >= until:
                break
            yield from self.renew(max(self.cfg.lease_ttl_ms, 2 * self.cfg.poll_ms))
            try:
                job = yield from self.call("registry", "wait_job", job_id=job_id, wait_ms=self.cfg.poll_ms)
            except PortFailure:
                job = {"status": "unknown"}
            if job.get("status") == "succeeded":
                self.ref = job_id
                yield from self.record("CONFIRMED", note="the job succeeded")
                yield from self.confirmed()
            if job.get("status") == "failed":
                break
        yield from self.advance("RECONCILING")
        yield from self.reconcile()

    # ------------------------------------------------------------------ after the effect
    def confirmed(self):
        yield from self.poll()
        if self.state not in ("EFFECT_CONFIRMED", "NOTIFYING"):
            yield from self.checkpoint("EFFECT_CONFIRMED")
        if self.cancel:
            if self.cfg.compensate and self.profile.get("compensation"):
                yield from self.compensate()
            yield from self.finish("CANCELLED_EFFECT_REMAINS", next_owner="coordinator", escalate=True,
                                   reason="cancelled after the commit; the release is a coordinator's decision")
        if self.intake.get("notify"):
            yield from self.notify()
        yield from self.finish("SUCCEEDED", reason="confirmed")

    # ------------------------------------------------------------------ compensation
    def compensate(self):
        """Release a confirmed hold after a cancellation: a second effect with its own key."""
        ckey = "release." + _digest({"compensates": self.key})
        cintent = {"compensates": self.key, "ref": self.ref, "tenant": self.intent.get("tenant"),
                   "principal": self.intent.get("principal")}
        chash = "c-" + _digest(cintent)
        cintent["proposal_hash"] = chash
        base = {"semantic_key": ckey, "kind": "compensation", "service": self.service, "operation": "release",
                "run_id": self.run_id, "intent": cintent, "intent_fingerprint": _digest(cintent),
                "canonicalization_version": self.env["canonicalization_version"], "lease_epoch": self.epoch,
                "proposal_hash": chash, "compensates": self.key}
        prior = self.latest.get(ckey)
        attempts = list((prior or {}).get("attempts") or [])
        if self.knowledge == "COMPENSATED":
            yield from self.finish("CANCELLED_NO_EFFECT", reason="released earlier")
        if prior is None or prior["knowledge"] == "REJECTED":
            live = yield from self.release_authority(chash)
            if not live:
                yield from self.finish("CANCELLED_EFFECT_REMAINS", next_owner="coordinator", escalate=True,
                                       reason="cancelled after the commit; no authority to release the hold")
            yield from self.append({**base, "knowledge": "PROPOSED", "attempts": [], "evidence": ["cancellation"]})
            yield from self.record("COMPENSATION_PROPOSED", compensated_by=ckey, note="release prepared")
        if self.state != "COMPENSATING":
            yield from self.checkpoint("COMPENSATING")
        if (self.latest.get(ckey) or {}).get("knowledge") == "SENT_UNKNOWN":
            yield from self.reconcile_release(ckey, base, attempts)
        sent = 0
        while True:
            now = yield from self.now()
            if sent >= self.cfg.attempt_ceiling or (self.deadline is not None and now >= self.deadline):
                yield from self.append({**base, "knowledge": "REJECTED", "attempts": attempts,
                                        "evidence": ["every release attempt was refused before it was sent"]})
                yield from self.record("CONFIRMED", note="the release certainly failed; the hold remains")
                yield from self.finish("CANCELLED_EFFECT_REMAINS", next_owner="coordinator", escalate=True,
                                       reason="cancelled; the release failed, the reservation remains")
            sent += 1
            attempts.append({"n": len(attempts) + 1, "at": now, "worker": self.worker, "epoch": self.epoch})
            yield from self.renew(self.call_ttl())
            yield from self.append({**base, "knowledge": "SENT_UNKNOWN", "attempts": list(attempts),
                                    "evidence": ["about to send the release"]})
            try:
                done = yield from self.call(self.service, "release", key=ckey, ref=self.ref, intent=cintent,
                                            retry_owner="caller")
            except PortFailure as exc:
                if not exc.definite:
                    yield from self.reconcile_release(ckey, base, attempts)
                if exc.code in NOT_TRANSIENT:
                    # a validation failure stops: the release certainly failed, resending cannot fix it
                    yield from self.append({**base, "knowledge": "REJECTED", "attempts": list(attempts),
                                            "evidence": [f"{exc.code}: definite, not transient"]})
                    yield from self.record("CONFIRMED", note=f"the release was refused ({exc.code}); the hold remains")
                    yield from self.finish("CANCELLED_EFFECT_REMAINS", next_owner="coordinator", escalate=True,
                                           reason=f"cancelled; the release was refused ({exc.code}), "
                                                  "the reservation remains")
                yield from self.append({**base, "knowledge": "PROPOSED", "attempts": list(attempts),
                                        "evidence": [f"{exc.code}: certainly not sent"]})
                jitter = (yield from self.call("random", "draw", low=0, high=500, reason="backoff jitter"))["value"]
                wait = self.cfg.backoff_ms * (2 ** (sent - 1)) + jitter
                if self.deadline is not None:
                    wait = max(1, min(wait, self.deadline - now))
                yield from self.sleep(wait, f"backoff after release {exc.code}")
                continue
            yield from self.released(ckey, base, attempts, done.get("release_ref"), "accepted release response")

    def released(self, ckey, base, attempts, ref, why):
        yield from self.append({**base, "knowledge": "CONFIRMED", "attempts": list(attempts), "remote_ref": ref,
                                "evidence": [why] + self.readings[-2:]})
        yield from self.record("COMPENSATED", compensated_by=ckey, note=f"release {ref} confirmed")
        yield from self.finish("CANCELLED_NO_EFFECT", reason="cancelled; the hold was released")

    def release_authority(self, chash):
        check = yield from self.call("authority", "check", proposal_hash=chash, action="release")
        if not check.get("live"):
            yield from self.call("authority", "request", proposal_hash=chash, action="release",
                                 summary={"compensates": self.key, "ref": self.ref})
            check = yield from self.call("authority", "check", proposal_hash=chash, action="release")
        return bool(check.get("live"))

    def reconcile_release(self, ckey, base, attempts):
        """The release's outcome is unknown: read it back until it answers, by the hold's key (the
        hold reads as released) or by the release's own key (its record names the hold)."""
        yield from self.advance("COMPENSATING")
        for n in range(self.cfg.reads):
            now = yield from self.now()
            try:
                if self.cfg.release_read == "compensation":
                    # the release is an effect of its own: read it back by its own key
                    got = yield from self.call(self.service, "lookup", key=ckey)
                    record = got.get("record") or {}
                    self.readings.append({"at": now, "read": "lookup(release)", "found": got.get("found")})
                    if got.get("found") and (record.get("intent") or {}).get("release") == self.ref:
                        yield from self.released(ckey, base, attempts, record.get("ref"),
                                                 "the release reads back under its own key")
                else:
                    hold = yield from self.call(self.service, "lookup", key=self.key)
                    record = hold.get("record") or {}
                    self.readings.append({"at": now, "read": "lookup(hold)", "status": record.get("status")})
                    if record.get("ref") == self.ref and record.get("status") == "released":
                        yield from self.released(ckey, base, attempts, self.ref, "the hold reads as released")
            except PortFailure as exc:
                self.readings.append({"at": now, "error": exc.code})
                if self.cfg.conservative:
                    break
            yield from self.sleep(self.cfg.poll_ms, "reconcile the release")
        yield from self.finish("CANCELLED_EFFECT_UNKNOWN", next_owner="operator", escalate=True,
                               reason="cancelled; whether the release happened is unknown")


# ---------------------------------------------------------------------- over the wire
def _config_from(argv) -> Config:
    opts, i = {}, 0
    names = {"--lease-ttl": ("lease_ttl_ms", int), "--checkpoints": ("checkpoints", str),
             "--poll": ("poll_ms", int), "--reads": ("reads", int), "--read-order": ("read_order", str),
             "--ceiling": ("attempt_ceiling", int), "--backoff": ("backoff_ms", int),
             "--read-pause": ("read_pause_ms", int), "--release-read": ("release_read", str)}
    flags = {"--conservative": ("conservative", True), "--keep": ("compensate", False),
             "--early-redispatch": ("early_redispatch", True)}
    while i < len(argv):
        if argv[i] in flags:
            name, value = flags[argv[i]]
            opts[name] = value
            i += 1
            continue
        name, kind = names[argv[i]]
        opts[name] = kind(argv[i + 1])
        i += 2
    return Config(**opts)


def main(argv=None) -> None:
    cfg = _config_from(sys.argv[1:] if argv is None else argv)
    json.loads(sys.stdin.readline())                 # init: the worker learns the rest from run.info
    gen = Worker(cfg).run()
    n, reply = 0, None
    try:
        request = next(gen)
        while True:
            n += 1
            port, op, args = request
            sys.stdout.write(json.dumps({"id": n, "port": port, "op": op, "args": args}) + "\n")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                return
            reply = json.loads(line)
            if reply.get("ok"):
                request = gen.send(reply.get("value"))
            else:
                request = gen.throw(PortFailure(reply.get("error") or {}))
    except StopIteration:
        return


if __name__ == "__main__":
    main()
