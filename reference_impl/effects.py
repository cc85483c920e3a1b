"""External effects through the ledger (AR-08 "Effect ledger and semantic identity",
"Six crash points in one reservation", "Reconciliation is a first-class capability",
"Compensation as forward recovery").

Every effect (the run's reservation or publish, the follow-up notification, a
compensation) follows one pattern:

* **prepare**: a ledger entry in PROPOSED with its semantic key, intent (business fields
  plus proposal hash), fingerprint and canonicalization version, then a checkpoint;
* **dispatch**: live authority bound to the proposal hash, ``SENT_UNKNOWN`` with the
  attempt, the checkpoint compare-and-set (the last lease-checked write before the
  send), the call with ``retry_owner="caller"`` (and ``fence`` where the service fences),
  then the outcome classified by the recovery matrix;
* **reconcile**: one authoritative read by semantic identity per step, comparing every
  intent field; a negative read counts as absence only when it is authoritative;
* **compensate**: a separate effect with its own proposal, authority and key; the
  original is linked, never rewritten.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from crashlab.vocab.model import Knowledge, RunState
from crashlab.world.ports import PortError

from . import canonical, matrix
from .matrix import ROW, Action
from .session import FencedOut, Session
from .facts import EffectFact, _K  # noqa: F401 (moved there)


class Role(str, Enum):
    PRIMARY = "primary"              # the run's own effect (reserve, publish, send)
    NOTIFICATION = "notification"    # the message after a confirmed reservation
    COMPENSATION = "compensation"    # the release of a confirmed reservation


#: The checkpoint state written right before a send, per role.
IN_FLIGHT_STATE = {Role.PRIMARY: RunState.EFFECT_IN_FLIGHT, Role.NOTIFICATION: RunState.NOTIFYING,
                   Role.COMPENSATION: RunState.COMPENSATING}


# --------------------------------------------------------------------------- entries
def role_of(entry: Mapping[str, Any], intake: Mapping[str, Any]) -> Role:
    if entry["kind"] == "compensation":
        return Role.COMPENSATION
    if (entry["service"], entry["operation"]) == (intake["service"], intake["operation"]):
        return Role.PRIMARY
    return Role.NOTIFICATION


def new_entry(s: Session, *, kind: str, service: str, operation: str, intent: dict, version: int,
              compensates: str | None = None) -> dict:
    key = (s.behaviour.semantic_key or canonical.semantic_key)(operation, intent, version)
    return {"semantic_key": key, "kind": kind,
            "service": service, "operation": operation, "run_id": s.run_id, "intent": intent,
            "intent_fingerprint": canonical.fingerprint(operation, intent, version),
            "canonicalization_version": version, "knowledge": _K.PROPOSED.value, "attempts": [],
            "lease_epoch": s.epoch, "proposal_hash": intent["proposal_hash"], "observations": [],
            "remote_ref": None, "reconciliation": [], "compensates": compensates,
            "compensated_by": None, "evidence": [], "note": "prepared"}


def evolve(s: Session, entry: Mapping[str, Any], knowledge: Knowledge, note: str, **changes: Any) -> dict:
    return {**entry, **changes, "knowledge": knowledge.value, "lease_epoch": s.epoch, "note": note}


def last_verdict(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    recs = entry["reconciliation"]
    if recs and recs[-1]["attempts_seen"] == len(entry["attempts"]):
        return recs[-1]
    return None


def retry_delay(n: int, retry_after_ms: int | None) -> int:
    """The least wait after attempt ``n`` failed retryably: the service's retry-after, and
    at least the exponential backoff (before jitter)."""
    return max(retry_after_ms or 0, min(matrix.BACKOFF_CAP_MS, matrix.BACKOFF_BASE_MS * 2 ** (n - 1)))


def retry_at(entry: Mapping[str, Any]) -> int | None:
    """When the next attempt may leave at the earliest, if the last attempt failed
    retryably before send (None otherwise)."""
    if entry["knowledge"] != _K.PROPOSED.value or not entry["attempts"] or not entry["observations"]:
        return None
    last = entry["observations"][-1]
    row = ROW.get(last["row"])
    if last["attempt"] != len(entry["attempts"]) or row is None or row.action is not Action.RETRY_SAME_KEY:
        return None
    return last["at"] + retry_delay(last["attempt"], last["retry_after_ms"])


def fact_of(entry: Mapping[str, Any]) -> EffectFact:
    verdict = last_verdict(entry)
    return EffectFact(key=entry["semantic_key"], knowledge=Knowledge(entry["knowledge"]),
                      attempts=len(entry["attempts"]),
                      claimed_retries=tuple(a["retry_id"] for a in entry["attempts"] if a["retry_id"]),
                      verdict=verdict["verdict"] if verdict else None, note=entry["note"],
                      retry_at=retry_at(entry))


# --------------------------------------------------------------------------- service bindings
def effect_request(entry: Mapping[str, Any], profile: Mapping[str, Any], epoch: int) -> dict:
    """Arguments of the effect call: key, intent, the single retry owner, the fence."""
    args = {"key": entry["semantic_key"], "intent": dict(entry["intent"]),
            "retry_owner": ROW["retry_amplification"].retry_owner}
    if entry["kind"] == "compensation":
        args["ref"] = entry["intent"]["ref"]
    if profile["fencing"]:
        args["fence"] = epoch
    return args


def interpret_response(entry: Mapping[str, Any], response: Mapping[str, Any]) -> tuple[str, str | None]:
    """(observation code, remote reference) of a successful effect call, verified."""
    op = entry["operation"]
    if op == "reserve":
        ours = response["key"] == entry["semantic_key"] and response["intent"] == entry["intent"]
        if ours and response.get("status") == "released":    # a replayed hold a release undid
            return "released", response["ref"]
        return ("accepted" if ours else "mismatch"), response["ref"]
    if op == "publish":      # a publish job: keep its id; a running job is not failure
        return "job_running", response["job_id"]
    if op == "release":
        ours = response["ref"] == entry["intent"]["ref"] and response["status"] == "released"
        return ("accepted" if ours else "mismatch"), response["release_ref"]
    return "accepted", response["message_id"]     # send: accepted, and nothing to read back


@dataclass(frozen=True, slots=True, kw_only=True)
class Read:
    op: str
    args: dict
    label: str


def read_request(entry: Mapping[str, Any], target: Mapping[str, Any],
                 profile: Mapping[str, Any]) -> Read | None:
    """The authoritative read for an entry; ``target`` is the entry whose remote record is
    read (the original reservation when verifying a compensation). None: no read exists."""
    lookup = profile["lookup"]
    if lookup == "by_key":
        return Read(op="lookup", args={"key": target["semantic_key"]}, label="lookup(key)")
    if lookup == "by_incident_slot":
        intent = target["intent"]
        return Read(op="search", args={"incident": intent["incident"], "slot": intent["slot"]},
                    label="search(incident, slot)")
    if lookup == "by_version":
        if entry["remote_ref"]:
            return Read(op="wait_job", args={"job_id": entry["remote_ref"], "wait_ms": matrix.JOB_WAIT_MS},
                        label="wait_job(job_id)")
        intent = entry["intent"]
        return Read(op="get_version", args={"package": intent["package"], "version": intent["version"]},
                    label="get_version(package, version)")
    return None


def _judge(record: Mapping[str, Any], target: Mapping[str, Any], verifying_release: bool) -> str:
    if record["key"] != target["semantic_key"] or record["intent"] != target["intent"]:
        return "mismatch"
    if verifying_release:
        return "found" if record["status"] == "released" else "negative"
    return "released" if record.get("status") == "released" else "found"


def interpret_read(read: Read, response: Mapping[str, Any], target: Mapping[str, Any],
                   verifying_release: bool) -> tuple[str, str | None, int | None]:
    """(observation code, remote reference, as_of) of one read, comparing every field."""
    if read.op == "search":
        mine = [r for r in response["records"] if r["key"] == target["semantic_key"]]
        matching = [r for r in mine if r["intent"] == target["intent"]]
        if len(matching) > 1:
            return "ambiguous", None, response["as_of"]
        if matching:
            return _judge(matching[0], target, verifying_release), matching[0]["ref"], response["as_of"]
        return ("mismatch" if mine else "negative"), None, response["as_of"]
    if read.op == "wait_job":
        if response["status"] == "running":
            return "in_flight", response["job_id"], None
        return _judge(response["record"], target, False), response["job_id"], None
    if response["found"]:
        record = response["record"]
        if read.op == "get_version" and record["intent"] != target["intent"]:
            return "taken", record["ref"], response["as_of"]
        code = "found" if read.op == "get_version" else _judge(record, target, verifying_release)
        return code, record["ref"], response["as_of"]
    return ("in_flight" if response["in_flight"] else "negative"), None, response["as_of"]


def send_horizon(entry: Mapping[str, Any], started_at: int) -> int:
    """Latest time the last attempt can have left the worker: its recorded outcome, or,
    when the sender died before recording one, this worker's start."""
    last = entry["attempts"][-1]
    outcome = [o["at"] for o in entry["observations"] if o["attempt"] == last["attempt"]]
    return max([last["at"], *outcome] if outcome else [last["at"], started_at])


def judge_negative(entry: Mapping[str, Any], profile: Mapping[str, Any], as_of: int, now: int,
                   started_at: int) -> tuple[str, int]:
    """A negative read is authoritative only within key retention and once its as_of
    covers the last send plus the documented maximum delivery delay (late arrivals,
    eventual consistency). -> (code, ms to wait before it could be authoritative)."""
    if now - entry["attempts"][0]["at"] >= profile["retention_ms"]:
        return "beyond_retention", 0
    horizon = send_horizon(entry, started_at) + profile["max_delivery_delay_ms"]
    if as_of < horizon:
        return "negative_too_early", horizon - as_of + 1
    return "absent", 0


# --------------------------------------------------------------------------- procedures
def entry_of(s: Session, role: Role) -> dict | None:
    for entry in s.ledger.values():
        if role_of(entry, s.record.intake) is role:
            return entry
    return None


def budgets(s: Session, base: Mapping[str, Any]) -> dict:
    """The declared budgets: the attempt ceiling of the run's effect (raised by one per
    claimed deliberate retry), the read and approval-request ceilings, and what is used."""
    primary = entry_of(s, Role.PRIMARY)
    ceiling = fact_of(primary).ceiling if primary else matrix.ATTEMPT_CEILING
    return {"reconcile_reads_used": 0, **base, "attempt_ceiling": ceiling,
            "attempts_used": len(primary["attempts"]) if primary else 0,
            "reconcile_read_ceiling": matrix.RECONCILE_READ_CEILING,
            "approval_request_ceiling": matrix.APPROVAL_REQUEST_CEILING}


async def commit(s: Session, state: RunState, **changes: Any) -> None:
    """Checkpoint ``state`` with the record changes and the refreshed budgets."""
    record = s.record.evolve(**changes)
    await s.commit(state, record.evolve(budgets=budgets(s, record.budgets)))


async def prepare_primary(s: Session) -> None:
    """"Generate the key before first dispatch and persist it with the prepared effect."
    A crash after the append leaves the entry for the next worker, which reuses it."""
    rec = s.record
    if entry_of(s, Role.PRIMARY) is None:
        intent = {**rec.intake["intent"], "proposal_hash": rec.proposal["hash"]}
        await s.append(new_entry(s, kind="effect", service=rec.intake["service"],
                                 operation=rec.intake["operation"], intent=intent,
                                 version=rec.proposal["canonicalization_version"]))
    await commit(s, RunState.EFFECT_PREPARED)


async def prepare_notification(s: Session) -> None:
    """The notification is a separate effect with its own key (a new intent, frozen now
    under the current canonicalization); it never repeats the reservation."""
    rec, primary = s.record, entry_of(s, Role.PRIMARY)
    intent = {"tenant": rec.tenant, "principal": rec.principal, "to": rec.principal,
              "template": f"{primary['operation']}-confirmed", "about": primary["semantic_key"],
              "ref": primary["remote_ref"], "proposal_hash": rec.proposal["hash"]}
    await s.append(new_entry(s, kind="effect", service="notification", operation="send",
                             intent=intent, version=rec.contract["canonicalization_version"]))


async def check_authority(s: Session, entry: Mapping[str, Any]) -> dict:
    role = role_of(entry, s.record.intake)
    action = "release" if role is Role.COMPENSATION else s.record.intake["operation"]
    answer = await s.check_authority(entry["proposal_hash"], action)
    if role is not Role.COMPENSATION:
        s.authority = answer
    return answer


async def close_unsent(s: Session, entry: Mapping[str, Any], row: matrix.Row) -> None:
    """Nothing of this entry landed and nothing more will be sent: REJECTED. Closing a
    compensation returns the original to CONFIRMED (the release did not happen)."""
    await s.append(evolve(s, entry, _K.REJECTED, row.name,
                          evidence=[*entry["evidence"], f"closed unsent: {row.name}"]))
    if entry["kind"] == "compensation":
        original = s.ledger[entry["compensates"]]
        await s.append(evolve(s, original, _K.CONFIRMED, row.name,
                              evidence=[*original["evidence"], f"compensation not applied: {row.name}"]))


async def dispatch(s: Session, key: str, retry_id: str | None = None) -> None:
    """One attempt under the entry's key (AR-08 "Six crash points in one reservation")."""
    entry = s.ledger[key]
    role = role_of(entry, s.record.intake)
    profile = await s.describe(entry["service"])
    answer = await check_authority(s, entry)
    if not answer["live"]:
        # no dispatch without live authority bound to the proposal hash; the run's own
        # effect is rerouted by the decision table (re-request or stop)
        if role is not Role.PRIMARY:
            await close_unsent(s, entry, s.classify("authority", answer["reason"]))
        return
    now = await s.now()
    if s.record.deadline is not None and now >= s.record.deadline:
        return          # authority took the run to its deadline: nothing is sent (deadline_passed)
    n = len(entry["attempts"]) + 1
    attempt = {"attempt": n, "at": now, "epoch": s.epoch, "worker": s.worker,
               "retry_id": retry_id}
    sent = evolve(s, entry, _K.SENT_UNKNOWN, f"attempt {n} may have left",
                  attempts=[*entry["attempts"], attempt])
    await s.append(sent)
    await commit(s, IN_FLIGHT_STATE[role])          # the last lease-checked write before the send
    error: PortError | None = None
    shared = False
    try:
        response = await s.send(entry["service"], entry["operation"],
                                effect_request(sent, profile, s.epoch))
        code, ref = interpret_response(sent, response)
        shared = (role is Role.PRIMARY and code == "accepted" and response.get("replayed") is True
                  and committed_before_first_attempt(sent, response))
    except PortError as exc:
        error, (code, ref) = exc, (exc.code, None)
    row = s.classify("dispatch", code)
    if row.action is Action.FENCE_OUT:
        raise FencedOut(row, error)
    observation = {"attempt": n, "at": await s.now(), "code": code, "row": row.name,
                   "definite": error.definite if error else True,
                   "retry_after_ms": error.details.get("retry_after_ms") if error else None}
    if error is None and shared:
        observation["shared"] = True
    await _record_dispatch(s, sent, role, row, observation, ref)
    fact = fact_of(s.ledger[key])
    next_at = observation["at"] + retry_delay(n, observation["retry_after_ms"])
    if row.action is Action.RETRY_SAME_KEY and (s.record.deadline is None or next_at < s.record.deadline):
        # a retry that fits before the deadline follows its backoff; one that does not is
        # never sent (the decision table stops the run: deadline_passed)
        what, floor = f"{row.name} {entry['service']}.{entry['operation']}", observation["retry_after_ms"] or 0
        s.backed_off[key] = n
        if n < fact.ceiling:
            await s.backoff(n, what, floor, s.record.deadline)
        else:
            s.owed_backoff[key] = (n, what, floor)


async def _record_dispatch(s: Session, sent: dict, role: Role, row: matrix.Row, observation: dict,
                           ref: str | None) -> None:
    observations = [*sent["observations"], observation]
    n = observation["attempt"]
    if row.action is Action.VERIFY:
        await s.append(evolve(s, sent, _K.CONFIRMED, f"{row.name}: attempt {n}",
                              observations=observations, remote_ref=ref))
    elif row.action is Action.RETRY_SAME_KEY:      # failed before send: nothing left the worker
        await s.append(evolve(s, sent, _K.PROPOSED, f"{row.name}: attempt {n} never left",
                              observations=observations))
    elif row.knowledge is _K.REJECTED:
        await s.append(evolve(s, sent, _K.REJECTED, row.name, observations=observations))
        if role is Role.COMPENSATION:
            await s.append(evolve(s, s.ledger[sent["compensates"]], _K.CONFIRMED,
                                  f"release failed definitely: {row.name}"))
        return
    elif row.action is Action.STOP:   # contradictory: keep SENT_UNKNOWN, stop reconciling
        await s.append(evolve(s, sent, _K.SENT_UNKNOWN, row.name, observations=observations,
                              reconciliation=[*sent["reconciliation"], _verdict(row, n, {
                                  "at": observation["at"], "read": None, "code": observation["code"]})]))
    else:                             # ambiguous, 409, a running job, a hidden publish: reconcile
        await s.append(evolve(s, sent, _K.SENT_UNKNOWN, row.name, observations=observations,
                              remote_ref=ref or sent["remote_ref"]))
    await commit(s, _resting_state(role, s.ledger[sent["semantic_key"]]))


def _verdict(row: matrix.Row, attempts: int, note: Mapping[str, Any]) -> dict:
    """A decisive reconciliation record: the row it classified into, and how many
    attempts it covers (a later attempt makes it stale)."""
    return {**note, "verdict": row.name, "attempts_seen": attempts}


def _resting_state(role: Role, entry: Mapping[str, Any]) -> RunState:
    if role is not Role.PRIMARY:
        return IN_FLIGHT_STATE[role]
    fact = fact_of(entry)
    if fact.knowledge is _K.CONFIRMED:
        return RunState.EFFECT_CONFIRMED
    return RunState.EFFECT_PREPARED if fact.sendable else RunState.RECONCILING


async def reconcile(s: Session, key: str) -> None:
    """One reconciliation step (AR-08 "Runbook: ambiguous reservation" steps 4-9)."""
    entry = s.ledger[key]
    role = role_of(entry, s.record.intake)
    if role is Role.PRIMARY and s.record.state is not RunState.RECONCILING:
        await commit(s, RunState.RECONCILING)    # whatever the read shows is recorded while RECONCILING
    profile = await s.describe(entry["service"])
    target = s.ledger[entry["compensates"]] if role is Role.COMPENSATION else entry
    verifying_release = role is Role.COMPENSATION
    read = read_request(entry, target, profile)
    ref = as_of = None
    shared = False
    if read is None:
        code = "no_read"
    else:
        try:
            response = await s.ports.service(entry["service"]).call(read.op, **read.args)
            code, ref, as_of = interpret_read(read, response, target, verifying_release)
            s.read_failures = 0
            if code == "found" and role is Role.PRIMARY:
                found = [r for r in response.get("records") or [response.get("record")]
                         if isinstance(r, dict) and r.get("ref") == ref]
                shared = bool(found) and committed_before_first_attempt(entry, found[0])
        except PortError as exc:
            code = exc.code
            s.read_failures += 1
    now = await s.now()
    wait_ms = 0
    if code == "negative":
        code, wait_ms = (s.behaviour.judge_negative or judge_negative)(entry, profile, as_of, now,
                                                                       s.started_at)
    row = s.classify("read", code)
    s.reads.append(f"{read.label if read else 'no read'} -> {code} at {now}")
    n = len(entry["attempts"])
    note = {"at": now, "read": read.label if read else None, "code": code, "as_of": as_of, "ref": ref}
    if shared:
        note["shared"] = True
    if role is Role.COMPENSATION and entry["knowledge"] == _K.CONFIRMED.value:
        await _verify_release(s, entry, row, note)
        return
    if row.action is Action.VERIFY:
        await s.append(evolve(s, entry, _K.CONFIRMED, f"{row.name}: {note['read']}", remote_ref=ref,
                              reconciliation=[*entry["reconciliation"], _verdict(row, n, note)]))
        if role is Role.COMPENSATION:
            await s.append(evolve(s, target, _K.COMPENSATED, f"released by {key}"))
    elif row.knowledge in (_K.PROPOSED, _K.REJECTED):   # authoritative absence / natural key taken
        await s.append(evolve(s, entry, row.knowledge, row.name,
                              reconciliation=[*entry["reconciliation"], _verdict(row, n, note)]))
    elif row.action is Action.STOP:
        await s.append(evolve(s, entry, _K.SENT_UNKNOWN, row.name,
                              reconciliation=[*entry["reconciliation"], _verdict(row, n, note)]))
    else:                                     # WAIT or RETRY_CALL: bounded, then read again
        await _wait_and_reread(s, entry, role, row, note, wait_ms, now)
        return
    await commit(s, _resting_state(role, s.ledger[key]))


async def _wait_and_reread(s: Session, entry: dict, role: Role, row: matrix.Row, note: dict,
                           wait_ms: int, now: int) -> None:
    used = s.record.budgets.get("reconcile_reads_used", 0) + 1
    if row.action is Action.RETRY_CALL:
        wait_ms = min(matrix.BACKOFF_CAP_MS, matrix.BACKOFF_BASE_MS * 2 ** (s.read_failures - 1))
    elif not wait_ms:
        wait_ms = matrix.RECONCILE_POLL_MS
    if s.record.deadline is not None:
        wait_ms = min(wait_ms, s.record.deadline - now)
    if used >= matrix.RECONCILE_READ_CEILING or wait_ms <= 0:
        final = s.classify("read", "down" if row.action is Action.RETRY_CALL else "unresolved")
        await s.append(evolve(s, entry, final.knowledge or _K.SENT_UNKNOWN, final.name,
                              reconciliation=[*entry["reconciliation"],
                                              _verdict(final, len(entry["attempts"]), note)]))
        await commit(s, IN_FLIGHT_STATE[role] if role is not Role.PRIMARY else RunState.RECONCILING)
        return
    await commit(s, IN_FLIGHT_STATE[role] if role is not Role.PRIMARY else RunState.RECONCILING,
                 budgets={**s.record.budgets, "reconcile_reads_used": used})
    if row.action is Action.RETRY_CALL:
        await s.backoff(s.read_failures, f"{row.name} {entry['service']}.{note['read']}",
                        deadline=s.record.deadline)
    else:
        await s.sleep(wait_ms, f"reconcile {row.name}: {note['read']} again", s.record.deadline)


async def _verify_release(s: Session, compensation: dict, row: matrix.Row, note: dict) -> None:
    """The verification read after a confirmed release: the original becomes COMPENSATED
    unless the read contradicts the release. Without a usable read the confirmed release
    response stands as the evidence, and the record says so."""
    original = s.ledger[compensation["compensates"]]
    n = len(compensation["attempts"])
    if row.name in ("known_completion", "weak_service", "transient_read"):
        basis = "verified by read" if row.name == "known_completion" else \
            f"release response only ({row.name}: {note['code']})"
        await s.append(evolve(s, compensation, _K.CONFIRMED, basis,
                              reconciliation=[*compensation["reconciliation"],
                                              _verdict(ROW["known_completion"], n, note)]))
        await s.append(evolve(s, original, _K.COMPENSATED, f"released by {compensation['semantic_key']}"))
    else:
        contradiction = ROW["contradictory_evidence"]
        await s.append(evolve(s, compensation, _K.CONFIRMED, contradiction.name,
                              reconciliation=[*compensation["reconciliation"],
                                              _verdict(contradiction, n, note)]))
    await commit(s, RunState.COMPENSATING)


#: Reads a recovering worker makes to verify a confirmation an earlier owner recorded.
VERIFY_READS = 3


async def verify_recorded(s: Session, key: str) -> str | None:
    """Verify a CONFIRMED entry an earlier owner recorded (AR-08 "Six crash points": recovery
    finds CONFIRMED, verifies the effect). -> a description of the contradiction when the
    authoritative read disagrees (the hold is released, or the key holds another intent, or a
    strong read finds nothing) or cannot be made after a few tries, else None. A contradiction is recorded beside the confirmation (the entry
    stays CONFIRMED: history is never rewritten)."""
    entry = s.ledger[key]
    profile = await s.describe(entry["service"])
    read = read_request(entry, entry, profile)
    if read is None:
        return None
    for n in range(1, VERIFY_READS + 1):
        try:
            response = await s.ports.service(entry["service"]).call(read.op, **read.args)
            code, ref, as_of = interpret_read(read, response, entry, False)
            break
        except PortError as exc:
            code, ref, as_of = exc.code, None, None
            if n < VERIFY_READS:
                await s.backoff(n, f"verify {entry['service']}.{read.op}")
    else:
        # the record cannot be verified now: what remains remotely is unknown, not confirmed
        code = f"unverifiable ({code})"
    if code == "found" or code == "in_flight" or (code == "negative" and profile["consistency"] != "strong"):
        return None
    now = await s.now()
    s.reads.append(f"{read.label} -> {code} at {now}")
    row = s.classify("read", "mismatch")
    note = {"at": now, "read": read.label, "code": code, "as_of": as_of, "ref": ref}
    await s.append(evolve(s, entry, _K.CONFIRMED, f"{row.name}: the ledger says CONFIRMED, {read.label} says {code}",
                          reconciliation=[*entry["reconciliation"], _verdict(row, len(entry["attempts"]), note)]))
    return f"the ledger records {entry['remote_ref']} CONFIRMED; {read.label} says {code}"


def committed_before_first_attempt(entry: Mapping[str, Any], record: Mapping[str, Any] | None) -> bool:
    """The remote record under the entry's key predates the entry's first attempt: another run
    of the same intent (which shares the semantic key) committed it."""
    committed = (record or {}).get("committed_at")
    attempts = entry["attempts"]
    return isinstance(committed, int) and bool(attempts) and committed < attempts[0]["at"]


def caused_elsewhere(entry: Mapping[str, Any]) -> bool:
    return any(o.get("shared") for o in [*entry["observations"], *entry["reconciliation"]])


async def compensate(s: Session) -> matrix.Row | None:
    """Cancellation after commit: prepare a separate, separately authorized release, and
    link it to the original (CONFIRMED -> COMPENSATION_PROPOSED). Resumable: a worker that
    died after preparing the release finds the entry and completes the link.
    -> the matrix row that stops it (no release capability, authority not live), or None."""
    rec, original = s.record, entry_of(s, Role.PRIMARY)
    profile = await s.describe(original["service"])
    if not profile.get("compensation", False):
        return s.classify("compensation", "not_supported")
    entry = entry_of(s, Role.COMPENSATION)
    if entry is None and caused_elsewhere(original):
        # a run compensates only what it caused: an effect it shares with another run of the
        # same intent is escalated, never released from under the run that reports it
        return s.classify("compensation", "shared")
    if entry is None:
        version = rec.contract["canonicalization_version"]
        proposal = {"tenant": rec.tenant, "principal": rec.principal,
                    "compensates": original["semantic_key"], "ref": original["remote_ref"]}
        intent = {**proposal, "proposal_hash": canonical.proposal_hash("release", proposal, version)}
        entry = new_entry(s, kind="compensation", service=original["service"], operation="release",
                          intent=intent, version=version, compensates=original["semantic_key"])
    phash = entry["proposal_hash"]
    answer = await s.check_authority(phash, "release")
    if not answer["live"]:
        await s.call("platform", s.ports.authority.request(
            phash, "release", {"compensates": original["semantic_key"], "ref": original["remote_ref"]}))
        answer = await s.check_authority(phash, "release")
    if not answer["live"]:        # corrective authority is never inferred from the original's
        return ROW["compensation_denied"]
    if entry["semantic_key"] not in s.ledger:
        await s.append(entry)
    await s.append(evolve(s, original, _K.COMPENSATION_PROPOSED, f"compensation {entry['semantic_key']} proposed",
                          compensated_by=entry["semantic_key"]))
    await commit(s, RunState.COMPENSATING)
    return None
