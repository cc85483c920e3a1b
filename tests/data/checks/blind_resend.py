"""A tiny adapter for the exploration test: the careful adapter of checks_mini, made to stop
(escalating with its evidence intact) on any port error it does not handle, and a variant
with one deliberate mistake: after an ambiguous timeout it sends again without a read."""
from __future__ import annotations

from checks_mini import Good

from crashlab.world.ports import PortError


class Careful(Good):
    async def run(self, p):
        for attempt in range(1, 6):
            try:
                return await self.work(p)
            except PortError as exc:
                if exc.code == "unavailable" and attempt < 5:
                    # a store was down: back off and start over from durable state
                    jitter = (await p.random.draw(0, 100, "backoff jitter"))["value"]
                    await p.clock.sleep(1000 * attempt + jitter, f"backoff after {exc.code}")
                    continue
                if exc.code in ("stale_epoch", "version_conflict", "fenced") and hasattr(self, "known"):
                    # lost ownership: stop and hand over (the platform refuses the finish of a
                    # worker a newer owner replaced)
                    return await self.finish("WAITING_OPERATOR", next_owner="operator", escalate=True)
                raise


class BlindResend(Careful):
    BLIND_RETRY = True
