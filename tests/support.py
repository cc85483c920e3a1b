"""Small scripted adapters and scenario builders for the harness's own tests."""
from __future__ import annotations

from crashlab.run.runner import Limits, run_scenario
from crashlab.scenario import from_dict

INTENT = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19",
          "technician": "TECH-4", "quantity": 1, "principal": "U-7"}


def scenario(**overrides):
    doc = {"id": "test", "title": "test", "clock": {"origin": "10:00", "horizon": "10:30"},
           "runs": [{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}}]}
    doc.update(overrides)
    return from_dict(doc, file="test.yaml")


def checkpoint(info, lease, version, state="VALIDATED"):
    return {"identity": {"run_id": info["run_id"], "task_id": "t", "tenant": "T-1", "principal": "U-7"},
            "control": {"state": state, "state_version": version, "owner": info["worker"],
                        "lease_epoch": lease["epoch"], "event_sequence": 1, "cancellation": {},
                        "deadline": None, "budgets": {}},
            "contract": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
            "evidence": {}, "effects": []}


def entry(run_id, epoch, knowledge, key="k-1"):
    return {"semantic_key": key, "kind": "effect", "service": "reservation", "operation": "reserve",
            "run_id": run_id, "intent": dict(INTENT), "intent_fingerprint": "f",
            "canonicalization_version": 1, "knowledge": knowledge, "attempts": [], "lease_epoch": epoch}


class Script:
    """Acquire, checkpoint, reserve once under key k-1, finish. Records what it saw in SEEN."""

    SEEN: list = []

    async def run(self, p):
        info = await p.run.info()
        try:
            lease = await p.lease.acquire(30_000)
        except Exception as exc:  # noqa: BLE001
            Script.SEEN.append(("lease", getattr(exc, "code", None)))
            await p.clock.sleep(31_000, "wait for the lease")
            lease = await p.lease.acquire(30_000)
        loaded = await p.checkpoints.load()
        await p.checkpoints.write(checkpoint(info, lease, loaded["version"] + 1), loaded["version"],
                                  lease["epoch"])
        try:
            res = await p.service("reservation").call("reserve", key="k-1", intent=dict(INTENT))
            Script.SEEN.append(("ok", res.get("ref")))
            await p.run.finish("SUCCEEDED")
        except Exception as exc:  # noqa: BLE001
            Script.SEEN.append(("error", exc.code, exc.definite))
            await p.run.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator")


def run(sc, adapter="support:Script", seed=None, **limits):
    return run_scenario(sc, adapter, seed, Limits(**limits) if limits else None)


def kinds(result, kind, lane=None):
    return [e for e in result.events if e["kind"] == kind and (lane is None or e["lane"] == lane)]


def effects(result):
    return [e for e in result.events if e["lane"] == "remote" and e["kind"] == "effect"]


_MESSAGE_FAULTS = [
    (r"\bNone\b", "None"),
    (r"\b(?:RunState|Knowledge|Action|Role)\.[A-Z_]+", "a raw enum"),
    (r"<[\w.]+ object at|\bdict_(?:keys|values|items)\(", "a Python repr"),
    (r"[\[{(]'|'[\]})]", "a Python repr of a list, dict or tuple"),
    (r"(?i)\b(\w+) \1\b", "a doubled word"),
    (r"\S  +\S", "a double space"),
    (r" [,.;:)]", "a space before punctuation"),
    (r"\(\s*\)|\[\s*\]|\"\"|''", "an empty value"),
    (r"[,;:(]\s*$|^\s|\s$", "a dangling start or end"),
    (r"(?<!\.)\.\.(?!\.)|,,|;;", "doubled punctuation"),
]


def message_faults(message: str) -> list[str]:
    """What makes a violation message read badly: a Python repr or ``None``, a raw enum, broken
    punctuation or a doubled word (the message templates of every invariant are held to it)."""
    import re

    return [why for pattern, why in _MESSAGE_FAULTS if re.search(pattern, message)]


def default_isolation():
    """The isolation the default (``auto``) gives on this machine, whatever the session runs under
    (tests/conftest.py sets ``process``): the session's setting is put back."""
    import os

    from crashlab.run import isolate

    before = os.environ.pop(isolate.ENV, None)
    try:
        return isolate.current()
    finally:
        if before is not None:
            os.environ[isolate.ENV] = before
