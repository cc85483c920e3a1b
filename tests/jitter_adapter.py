"""Draws seeded jitter and sleeps on it, so a trace depends on every random stream."""
from support import Script


class Jittery(Script):
    async def run(self, p):
        for _ in range(3):
            draw = await p.random.draw(0, 1000, "jitter")
            await p.clock.sleep(draw["value"], "backoff jitter")
        await super().run(p)
