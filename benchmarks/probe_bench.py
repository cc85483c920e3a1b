"""crashlab probe against the sandbox: requests sent and wall time per profile. Prints its figures,
asserts nothing (machines are shared and noisy).

    python benchmarks/probe_bench.py              # every profile the sandbox serves, --wait 1s
    python benchmarks/probe_bench.py --wait 300ms

The wall time is the wait (a quarter of it, then the rest) plus the requests' round trips on
loopback; the requests are the plan's, releases included.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.probe.client import Client  # noqa: E402
from crashlab.probe.interpret import interpret  # noqa: E402
from crashlab.probe.mapping import load_map  # noqa: E402
from crashlab.probe.plan import execute, worst_case  # noqa: E402
from crashlab.sandbox import Sandbox  # noqa: E402
from crashlab.scenario.loader import from_dict  # noqa: E402
from crashlab.vocab.timefmt import parse_duration  # noqa: E402

PROFILES = {
    "semantic, by_key": {"idempotency": "semantic", "lookup": "by_key"},
    "key_only, search only": {"idempotency": "key_only", "lookup": "by_incident_slot"},
    "none, no read": {"idempotency": "none", "lookup": "none"},
    "semantic, error replay": {"idempotency": "semantic", "error_replay": True},
    "semantic, eventual 150ms": {"idempotency": "semantic", "consistency": "eventual", "lag": "150ms"},
    "semantic, retention 200ms": {"idempotency": "semantic", "retention": "200ms"},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait", default="1s")
    wait_ms = parse_duration(ap.parse_args().wait)
    pmap = load_map(ROOT / "examples" / "probe" / "sandbox-map.yaml")
    print(f"crashlab probe on the sandbox (time scale 1), --wait {wait_ms} ms; plan at most {worst_case(pmap)} "
          "requests")
    print(f"{'profile':<28}{'requests':>9}{'wall s':>8}  written")
    for name, prof in PROFILES.items():
        sc = from_dict({"id": "bench", "title": "bench", "clock": {"origin": "10:00", "horizon": "23:00"},
                        "services": {"reservation": {"denied_principals": ["crashlab-probe-denied"], **prof}},
                        "runs": [{"id": "run-1", "intent": {"tenant": "T"}}]})
        sb = Sandbox(sc, time_scale=1.0)
        sb.start()
        try:
            client = Client(sb.root + "/w/run-1.w1", pmap, budget=20)
            t0 = time.perf_counter()
            obs = execute(pmap, client, wait_ms=wait_ms)
            wall = time.perf_counter() - t0
            written = interpret(pmap, obs).services()
        finally:
            sb.stop()
        print(f"{name:<28}{len(client.sent):>9}{wall:>8.2f}  "
              + ", ".join(f"{k}={v}" for k, v in written.items()) + (f"  residue {obs.residue}" if obs.residue else ""))


if __name__ == "__main__":
    main()
