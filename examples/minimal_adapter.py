#!/usr/bin/env python3
"""A minimal subprocess adapter that speaks crashlab's wire protocol with nothing but the
standard library: any language that can read and write lines of JSON can do the same.

It is deliberately simple (no reconciliation, no cancellation): it reserves once and
reports what it saw. Run it with:

    crashlab run t1-crash-before-dispatch --adapter "exec:python examples/minimal_adapter.py"
"""
import json
import sys

_next_id = 0


def call(port, op, **args):
    """Send one request line and wait for its reply line."""
    global _next_id
    _next_id += 1
    sys.stdout.write(json.dumps({"id": _next_id, "port": port, "op": op, "args": args}) + "\n")
    sys.stdout.flush()
    reply = json.loads(sys.stdin.readline())
    if not reply["ok"]:
        raise RuntimeError(reply["error"])
    return reply["value"]


def main():
    init = json.loads(sys.stdin.readline())          # {"type": "init", "run_id", "worker", "env", "services"}
    worker = init["worker"]
    intake = call("inbox", "poll", after_seq=0)["events"][0]
    intent = dict(intake["payload"]["intent"])
    lease = call("lease", "acquire", ttl_ms=60000)
    key = "reserve:" + "|".join(str(intent[f]) for f in sorted(intent))
    entry = {"semantic_key": key, "kind": "effect", "service": "reservation", "operation": "reserve",
             "run_id": init["run_id"], "intent": intent, "intent_fingerprint": key,
             "canonicalization_version": 1, "knowledge": "PROPOSED", "attempts": [],
             "lease_epoch": lease["epoch"]}
    call("ledger", "append", entry=entry)
    call("ledger", "append", entry={**entry, "knowledge": "SENT_UNKNOWN", "attempts": [{"n": 1}]})
    try:
        result = call("reservation", "reserve", key=key, intent=intent, retry_owner="caller")
    except RuntimeError as exc:
        error = exc.args[0]
        call("run", "finish", disposition="FAILED_EFFECT_UNKNOWN", next_owner="operator",
             reason=f"{worker}: {error['code']}", effects=[{"semantic_key": key, "knowledge": "SENT_UNKNOWN"}])
        return
    call("ledger", "append", entry={**entry, "knowledge": "CONFIRMED", "attempts": [{"n": 1}],
                                    "remote_ref": result["ref"]})
    call("run", "finish", disposition="SUCCEEDED", effects=[{"semantic_key": key, "knowledge": "CONFIRMED"}])


if __name__ == "__main__":
    main()
