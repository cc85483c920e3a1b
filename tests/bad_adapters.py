"""Deliberately misbehaving adapters: each must become a recorded adapter fault."""
import asyncio


class Raises:
    async def run(self, p):
        await p.run.info()
        raise KeyError("ref")


class SpinsWithoutAwaiting:
    async def run(self, p):
        await p.run.info()
        while True:
            pass


class LoopsOnPorts:
    async def run(self, p):
        while True:
            await p.clock.now()


class AwaitsNonPort:
    async def run(self, p):
        await p.run.info()
        await asyncio.sleep(0)


class ReturnsWithoutFinish:
    async def run(self, p):
        await p.run.info()


class LetsPortErrorEscape:
    async def run(self, p):
        await p.lease.renew(99, 1000)


class InvalidCheckpoint:
    async def run(self, p):
        info = await p.run.info()
        lease = await p.lease.acquire(10_000)
        cp = {"identity": {"run_id": info["run_id"], "task_id": "t", "tenant": "T", "principal": "U"},
              "control": {"state": "VALIDATED", "lease_epoch": lease["epoch"], "event_sequence": 0,
                          "cancellation": {}, "deadline": None, "budgets": {}},
              "contract": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
              "evidence": {}, "effects": []}
        try:
            await p.checkpoints.write(cp, 0, lease["epoch"])
        except Exception as exc:  # noqa: BLE001
            await p.run.finish("FAILED_NO_EFFECT", reason=exc.code)


class NotAsync:
    def run(self, p):
        return 42


class SendsNonJson:
    async def run(self, p):
        await p.service("reservation").call("reserve", key="k", intent={"when": object()})


class MutatesAfterSending:
    """Mutates the checkpoint it wrote and the one it loaded: the store must not change."""

    async def run(self, p):
        info = await p.run.info()
        lease = await p.lease.acquire(10_000)
        from support import checkpoint
        cp = checkpoint(info, lease, 1)
        await p.checkpoints.write(cp, 0, lease["epoch"])
        cp["control"]["state"] = "SUCCEEDED"
        loaded = await p.checkpoints.load()
        loaded["checkpoint"]["control"]["owner"] = "someone else"
        again = await p.checkpoints.load()
        await p.run.finish("FAILED_NO_EFFECT", reason=again["checkpoint"]["control"]["state"] + " "
                           + again["checkpoint"]["control"]["owner"])
