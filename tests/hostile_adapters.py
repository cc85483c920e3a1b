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


# --------------------------------------------------------------------------- the trust boundary
# Each tries to decide crashlab's verdict or exit code from inside the adapter; the adapter runs in a
# worker process, crashlab checks the trace it returns, so none can (tests/test_isolation.py).
from crashlab.gallery.retries import BlindRetry  # noqa: E402  (a 0/20 adapter: each must still fail)


class ExitsZero:
    """os._exit(0) mid-run: no exception, no cleanup, the process just ends with status 0."""

    async def run(self, p):
        await p.run.info()
        os._exit(0)


class AtexitExitsZero(BlindRetry):
    """Registers an exit hook that ends the process with status 0, whatever was decided."""

    async def run(self, p):
        import atexit
        atexit.register(os._exit, 0)
        return await super().run(p)


class PatchesChecker(BlindRetry):
    """Rewrites crashlab's checker in memory so that every trace passes."""

    async def run(self, p):
        import crashlab.checks
        import crashlab.checks.verdict as verdict
        from dataclasses import replace

        original = verdict.check_trace

        def lenient(events, **kw):
            return replace(original(events, **kw), verdict="pass", violations=())
        crashlab.checks.check_trace = verdict.check_trace = lenient
        return await super().run(p)


class ClosesStdout(BlindRetry):
    """Closes file descriptor 1 (where crashlab prints its verdict) and goes on."""

    async def run(self, p):
        try:
            os.close(1)
        except OSError:
            pass
        return await super().run(p)


class Chdirs(BlindRetry):
    """Moves the working directory (where relative --out and --json paths land)."""

    async def run(self, p):
        import tempfile
        os.chdir(tempfile.gettempdir())
        return await super().run(p)


class NativeCrash:
    """A segmentation fault inside a native call."""

    async def run(self, p):
        await p.run.info()
        import ctypes
        ctypes.string_at(0)


class BlocksAlarm:
    """Blocks SIGALRM, then computes forever: crashlab's in-process step timer never fires."""

    async def run(self, p):
        import signal
        await p.run.info()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            pass


class LongNativeCall:
    """Ignores SIGALRM and sits in one long C call (libc sleep)."""

    async def run(self, p):
        import ctypes
        import signal
        await p.run.info()
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        ctypes.CDLL(None).sleep(600)


class _SignalsCrashlab:
    signum = 0

    async def run(self, p):
        await p.run.info()
        os.kill(os.getppid(), self.signum)
        await p.run.info()
        await p.run.finish("SUCCEEDED")


class SignalsCrashlabTerm(_SignalsCrashlab):
    signum = 15


class SignalsCrashlabInt(_SignalsCrashlab):
    signum = 2


class SignalsCrashlabStop(_SignalsCrashlab):
    signum = 19


class KillsItsWorker:
    """Kills the process it runs in with SIGKILL (the pool must replace it)."""

    async def run(self, p):
        await p.run.info()
        os.kill(os.getpid(), 9)


class DoesNothing:
    """Never calls run.finish: every scenario it meets is inconclusive or failed, never passed."""

    async def run(self, p):
        return None


class SlowForever:
    """Awaits ports for ever, a little real time per step: only the run's wall-clock bound stops it."""

    async def run(self, p):
        while True:
            await p.run.info()
            time.sleep(0.05)


class Idles:
    """Sleeps in simulated time for ever and never decides anything."""

    async def run(self, p):
        while True:
            await p.clock.sleep(600_000, "idle")
