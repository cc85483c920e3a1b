"""Adapters that send the port boundary what it must refuse (tests/test_boundary.py), in-process
and, through ``python -m crashlab.run.wire``, over the wire."""
import json
import os

from crashlab.vocab.model import PortCall
from crashlab.world.ports import PortError
from crashlab.gallery.blindspots import SilentDuplicates

#: The calls FuzzCalls makes, as JSON ``[[port, op, args], ...]`` (an environment variable, so that
#: an adapter process started over the wire reads the same calls).
CALLS_VAR = "CRASHLAB_TEST_CALLS"
#: Where FuzzCalls writes what each call was answered, one JSON line per call.
ANSWERS_VAR = "CRASHLAB_TEST_ANSWERS"


class SilentDuplicatesAskingBadly(SilentDuplicates):
    """The gallery's SilentDuplicates, asking once for an approval with a list as proposal hash."""

    async def run(self, ports):
        try:
            await ports.authority.request([1], "reserve")
        except PortError:
            pass
        await super().run(ports)


class NonDictArgs:
    async def run(self, ports):
        await PortCall(port="clock", op="sleep", args=[1000, "backoff"])
        await ports.run.finish("SUCCEEDED")


class NonStringPort:
    async def run(self, ports):
        await PortCall(port=["clock"], op="now", args={})
        await ports.run.finish("SUCCEEDED")


class WaitsSoon:
    """Publishes, then waits for the job with ``wait_ms: "soon"``; finishes with the answer's code
    as its reason."""

    async def run(self, ports):
        info = await ports.run.info()
        registry = ports.service("registry")
        intent = {"tenant": "T-1", "package": "adc-cli", "version": "1.4.1", "principal": "U-7"}
        job = await registry.call("publish", key="k-1", intent=intent, retry_owner="caller")
        try:
            await registry.call("wait_job", job_id=job["job_id"], wait_ms="soon")
            code = "ok"
        except PortError as exc:
            code = f"{exc.code}:{exc.details.get('field')}"
        await ports.run.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator", reason=code,
                               effects=[{"semantic_key": "k-1", "knowledge": "SENT_UNKNOWN"}])
        assert info


class FuzzCalls:
    """Makes the calls named in $CRASHLAB_TEST_CALLS, whatever they are answered, then finishes."""

    async def run(self, ports):
        calls = json.loads(os.environ.get(CALLS_VAR, "[]"))
        answers = []
        for port, op, args in calls:
            try:
                await PortCall(port=port, op=op, args=args)
                answers.append("ok")
            except PortError as exc:
                answers.append(exc.code)
        path = os.environ.get(ANSWERS_VAR)
        if path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(answers) + "\n")
        await ports.run.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator")
