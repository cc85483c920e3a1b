#!/usr/bin/env python3
"""Starting adapter, wire-protocol variant: a complete adapter in standard-library Python
that speaks crashlab's JSON-lines protocol (docs/protocol.md), so it can be rewritten in
any language. It handles one FieldOps reservation: intake, lease, approval check, a
prepared ledger entry, SENT_UNKNOWN before the send, the send, and recovery of an
unresolved entry by a later worker.

Edit ONLY the function `resolve_unknown`. Check it with
    crashlab workshop check RUNG --wire
"""
import hashlib
import json
import sys

_next = 0


class PortError(Exception):
    def __init__(self, error):
        super().__init__(error.get("message", ""))
        self.code, self.definite, self.details = error["code"], error.get("definite"), error.get("details") or {}


def call(port, op, **args):
    """One request line out, one reply line in."""
    global _next
    _next += 1
    sys.stdout.write(json.dumps({"id": _next, "port": port, "op": op, "args": args}) + "\n")
    sys.stdout.flush()
    reply = json.loads(sys.stdin.readline())
    if not reply["ok"]:
        raise PortError(reply["error"])
    return reply["value"]


def resolve_unknown(run, entry):
    """Called when the ledger says SENT_UNKNOWN for the reservation: an attempt may have
    left and nobody knows whether it landed. Finish the run truthfully.

    Tools: send(run, entry) sends the reservation again under its key and records the
    outcome; lookup(run, entry) reads the service by key and returns the record or None
    (PortError when the read fails); confirm(run, entry, record, source) records CONFIRMED;
    finish(run, disposition, entry, next_owner=None) ends the run."""
    send(run, entry)


# ----------------------------------------------------------------- plumbing (no need to edit)
def digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:24]


def append(run, entry, knowledge, **changes):
    entry.update(changes, knowledge=knowledge, lease_epoch=run["epoch"])
    call("ledger", "append", entry=entry)
    return entry


def send(run, entry):
    attempt = {"attempt": len(entry["attempts"]) + 1, "epoch": run["epoch"], "worker": run["worker"]}
    append(run, entry, "SENT_UNKNOWN", attempts=entry["attempts"] + [attempt])
    try:
        value = call("reservation", "reserve", key=entry["semantic_key"], intent=entry["intent"],
                     retry_owner="caller")
    except PortError as error:
        if error.definite:          # certainly not sent: back to PROPOSED; the next worker may redispatch
            append(run, entry, "PROPOSED", observations=entry.get("observations", []) + [error.code])
            return finish(run, "FAILED_NO_EFFECT", entry)
        return escalate(run, entry, f"reserve: {error.code}")
    confirm(run, entry, value, "accepted response")


def lookup(run, entry):
    value = call("reservation", "lookup", key=entry["semantic_key"])
    return value.get("record") if value.get("found") else None


def confirm(run, entry, record, source):
    same = all(record["intent"].get(k) == v for k, v in entry["intent"].items())
    if not same:
        return escalate(run, entry, "the remote record does not match the intent")
    append(run, entry, "CONFIRMED", remote_ref=record["ref"], evidence=[f"{source}: {record['ref']}"])
    finish(run, "SUCCEEDED", entry)


def escalate(run, entry, reason):
    packet = {"header": {"run_id": run["run_id"], "state": "RECONCILING", "owner": run["worker"],
                         "lease_epoch": run["epoch"]},
              "effects": [{"semantic_key": entry["semantic_key"], "knowledge": entry["knowledge"],
                           "attempts": len(entry["attempts"])}],
              "authority": {"checked": "authority.check before the send"},
              "compatibility": {"disposition": "replay", "reason": "one code version"},
              "budget": {"deadline": None, "attempts": len(entry["attempts"])},
              "recommended": {"action": "RECONCILE", "query": "reservation.lookup(key)",
                              "expected": ["found", "absent", "unavailable"]},
              "alternatives": [{"action": "STOP", "effect": "unknown"}], "next_owner": "operator",
              "reason": reason}
    call("operator", "escalate", packet=packet)
    finish(run, "FAILED_EFFECT_UNKNOWN", entry, next_owner="operator", packet=packet)


def finish(run, disposition, entry, next_owner=None, packet=None):
    effect = {"semantic_key": entry["semantic_key"], "kind": "effect", "service": "reservation",
              "knowledge": entry["knowledge"], "remote_ref": entry.get("remote_ref")}
    call("run", "finish", disposition=disposition, effects=[effect], next_owner=next_owner, packet=packet)
    run["done"] = True


def acquire(run):
    while True:
        try:
            lease = call("lease", "acquire", ttl_ms=60000)
            run["epoch"] = lease["epoch"]
            return
        except PortError as error:
            if error.code != "lease_held":
                raise
            now = call("clock", "now")["now"]
            call("clock", "sleep", ms=max(1, error.details["expires_at"] - now + 1), reason="lease_held: wait")


def main():
    init = json.loads(sys.stdin.readline())
    run = {"run_id": init["run_id"], "worker": init["worker"], "epoch": None, "done": False}
    intake = call("inbox", "poll", after_seq=0)["events"][0]["payload"]
    acquire(run)
    intent = dict(intake["intent"])
    proposal_hash = "ph-" + digest(intent)
    intent["proposal_hash"] = proposal_hash
    key = "reserve-" + digest(intent)
    entries = [e for e in call("ledger", "by_run")["entries"] if e["semantic_key"] == key]
    if entries and entries[-1]["knowledge"] == "CONFIRMED":
        return finish(run, "SUCCEEDED", entries[-1])
    if entries and entries[-1]["knowledge"] == "SENT_UNKNOWN":
        return resolve_unknown(run, entries[-1])
    authority = call("authority", "check", proposal_hash=proposal_hash, action="reserve")
    if not authority["live"]:
        call("authority", "request", proposal_hash=proposal_hash, action="reserve")
        entry = {"semantic_key": key, "knowledge": "PROPOSED"}
        call("run", "finish", disposition="WAITING_HUMAN", effects=[], next_owner="approver")
        return
    entry = entries[-1] if entries else {
        "semantic_key": key, "kind": "effect", "service": "reservation", "operation": "reserve",
        "run_id": run["run_id"], "intent": intent, "intent_fingerprint": digest(intent),
        "canonicalization_version": 1, "proposal_hash": proposal_hash, "knowledge": "PROPOSED",
        "attempts": [], "lease_epoch": run["epoch"]}
    if not entries:
        append(run, entry, "PROPOSED")
    send(run, entry)


def serve():
    try:
        main()
    except PortError as error:      # fenced out: another worker owns the run; write nothing more
        if error.code not in ("stale_epoch", "version_conflict", "lease_lost", "lease_held"):
            raise
        call("run", "finish", disposition="WAITING_OPERATOR", effects=[],
             next_owner="the current lease owner", reason=f"fenced out: {error.code}")


if __name__ == "__main__":
    serve()
