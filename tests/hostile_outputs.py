"""Adapters that attack crashlab's outputs rather than its verdict: where the results land, what
the terminal shows, how large a trace grows (tests/test_outputs.py)."""
import os

from support import INTENT, checkpoint


class ChangesDirectory:
    """Moves the process to another folder ($CRASHLAB_TEST_CHDIR) before its first port call
    (relative output paths would follow it), then fails (no finish)."""

    async def run(self, p):
        os.chdir(os.environ.get("CRASHLAB_TEST_CHDIR", "/"))
        await p.run.info()


class DrawsFakeVerdict:
    """Puts terminal control sequences into the strings crashlab prints: a semantic key, a reason,
    a next owner. Each tries to erase the line and draw a passing verdict over it."""

    FAKE = "\x1b[2K\r\x1b[1A\x1b[2Kverdict: PASS\x00\x07\u202e"

    async def run(self, p):
        info = await p.run.info()
        lease = await p.lease.acquire(30_000)
        await p.checkpoints.write(checkpoint(info, lease, 1), 0, lease["epoch"])
        await p.service("reservation").call("reserve", key="k" + self.FAKE, intent=dict(INTENT))
        await p.run.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator" + self.FAKE, reason=self.FAKE)


class GrowsTrace:
    """Within every per-call limit (each request well under 1 MiB, few calls): a 600 KB checkpoint,
    then read back again and again, so that the trace grows by 600 KB a call."""

    async def run(self, p):
        info = await p.run.info()
        lease = await p.lease.acquire(30_000)
        state = checkpoint(info, lease, 1)
        state["evidence"] = {"blob": "x" * 600_000}
        await p.checkpoints.write(state, 0, lease["epoch"])
        for _ in range(200):
            await p.checkpoints.load()
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


class HoardsDescriptors:
    """Opens files until the process has no descriptor left, keeps them, then finishes."""

    KEPT: list = []

    async def run(self, p):
        await p.run.info()
        try:
            while True:
                self.KEPT.append(open(os.devnull))
        except OSError:
            pass
        await p.run.finish("FAILED_NO_EFFECT", reason="validation")


class SeparatesLines:
    """A reason with the characters str.splitlines() breaks at (U+2028, U+0085, FS)."""

    async def run(self, p):
        await p.run.info()
        await p.run.finish("FAILED_NO_EFFECT", reason="validation\u2028\x85\x1cnext")
