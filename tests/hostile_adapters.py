"""In-process adapters that try everything an adapter should not do; each must become a
recorded adapter fault of its scenario (tests/test_fail_closed.py)."""
import asyncio
import os
import threading
import time


class _RaisesAfterOneCall:
    error: BaseException

    async def run(self, p):
        await p.run.info()
        raise self.error


class RaisesSystemExit0(_RaisesAfterOneCall):
    error = SystemExit(0)


class RaisesSystemExit3(_RaisesAfterOneCall):
    error = SystemExit(3)


class RaisesKeyboardInterrupt(_RaisesAfterOneCall):
    error = KeyboardInterrupt()


class RaisesGeneratorExit(_RaisesAfterOneCall):
    error = GeneratorExit()


class RaisesCancelledError(_RaisesAfterOneCall):
    error = asyncio.CancelledError()


class Custom(BaseException):
    pass


class RaisesCustomBaseException(_RaisesAfterOneCall):
    error = Custom("not an Exception")


class ExitsWhileStarting:
    def __init__(self):
        raise SystemExit(0)

    async def run(self, p):
        await p.run.finish("SUCCEEDED")


class StartsThread:
    """A non-daemon thread that outlives the run (it sleeps for SECONDS)."""

    SECONDS = 5

    async def run(self, p):
        await p.run.info()
        threading.Thread(target=time.sleep, args=(self.SECONDS,), daemon=False).start()
        await p.run.info()
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


class StartsLongThread(StartsThread):
    SECONDS = 600


class Forks:
    async def run(self, p):
        await p.run.info()
        if os.fork() == 0:  # the child must never get past this point
            await p.run.info()
        await p.run.info()
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


class _SendsArgs:
    async def run(self, p):
        await p.run.info()
        await p.clock.sleep(1, self.reason())
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


class SendsDeepNesting(_SendsArgs):
    def reason(self):
        return _nested(100_000)


class SendsHugeInteger(_SendsArgs):
    def reason(self):
        return 10 ** 5000


class SendsNaN(_SendsArgs):
    def reason(self):
        return float("nan")


class SendsInfinity(_SendsArgs):
    def reason(self):
        return float("-inf")


class SendsLoneSurrogate:
    async def run(self, p):
        await p.run.info()
        await p.ledger.read("k\ud800")
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


class SendsHugeKey:
    async def run(self, p):
        await p.run.info()
        await p.ledger.read("k" * (20 << 20))
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


NOT_AN_ADAPTER = 5


MEMORY: list = []


class RemembersAcrossWorkers:
    """Counts its workers in module memory; a fresh process per worker always sees zero."""

    async def run(self, p):
        MEMORY.append(1)
        await p.run.info()
        await p.clock.sleep(1, f"workers seen in this process: {len(MEMORY)}")
        raise SystemExit(0) if len(MEMORY) > 1 else RuntimeError("crash me")
