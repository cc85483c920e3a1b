"""Durable runtimes on the integration card, naive against careful, and where the time went.

    python benchmarks/runtimes.py                       # the runtime subset, every runtime installed here
    python benchmarks/runtimes.py --suite               # the whole integration suite (and keyless-502)
    python benchmarks/runtimes.py --runtime dbos --runtime none

For each runtime (``none`` is the plain careful worker, examples/integration/worker.py, as the
baseline) and each example (naive, careful): the card's verdicts (pass / fail / inconclusive), the
rules the failures name, the wall time of the scenarios, the runtime's start (its server, or its
prepared state) and the recovery wait: after each kill, the real time from the kill to the next
worker's first request to the reservation service, less the scenario's own restart delay (scaled)
-- the runtime's start in the new process plus its recovery or redelivery. Prints figures, asserts
nothing; everything it starts is stopped at the end.
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.errors import UsageError  # noqa: E402
from crashlab.integrate.run import RUNTIME_SUITE, integrate, suite  # noqa: E402
from crashlab.integrate.supervisor import DEFAULT_TIME_SCALE  # noqa: E402
from crashlab.runtimes import load  # noqa: E402
from crashlab.scenario_loader import resolve  # noqa: E402

KEYLESS = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"
PLAIN = ROOT / "examples" / "integration" / "worker.py"
#: runtime -> what it needs installed here (the extra's package, and a binary)
NEEDS = {"dbos": ("dbos", None), "celery": ("celery", "redis-server")}


def scenario_names(whole: bool) -> list[str]:
    names = [sc.id for sc in suite()] if whole else [n for n in RUNTIME_SUITE if n != "integration-keyless-502"]
    return [str(KEYLESS)] + names


def worker(runtime: str, example: str) -> str:
    if runtime == "none":
        return f"{sys.executable} {PLAIN} {{url}} {{db}}" + (" --mistake=blind_retry" if example == "naive" else "")
    return f"{sys.executable} {ROOT / 'examples' / 'runtimes' / runtime / (example + '.py')}"


def recovery_waits(events: list[dict], time_scale: float) -> list[float]:
    """Real seconds from each kill to the next worker's first reservation request, less the restart delay."""
    out = []
    for i, ev in enumerate(events):
        if ev.get("kind") != "crash":
            continue
        nxt = next((e for e in events[i + 1:] if e.get("kind") == "call" and e.get("port") == "reservation"
                    and e.get("run") == ev.get("run") and e.get("worker") != ev.get("worker")), None)
        if nxt is not None:
            out.append(max(0.0, (nxt["t"] - ev["t"] - (ev.get("restart_after_ms") or 0)) / time_scale / 1000))
    return out


def measure(runtime: str, example: str, names: list[str], time_scale: float, out: Path) -> dict:
    import json
    rt = None if runtime == "none" else load(runtime)
    started = time.monotonic()
    server = rt.start(out / f"runtime-{runtime}") if rt is not None else None
    start_s = time.monotonic() - started
    verdicts, rules, walls, waits = Counter(), Counter(), [], []
    try:
        for name in names:
            t0 = time.monotonic()
            outcome = integrate(resolve(name), worker=worker(runtime, example), out=out / f"{runtime}-{example}",
                                time_scale=time_scale, runtime=rt, server=server)
            walls.append(time.monotonic() - t0)
            verdicts[outcome.card.verdict] += 1
            rules.update(line.invariant for line in outcome.card.lines
                         if line.status == "fail" and not line.invariant.startswith(("EXP-", "ADAPTER")))
            events = [json.loads(line) for line in outcome.trace.read_text().splitlines() if line.strip()]
            waits += recovery_waits(events, time_scale)
    finally:
        if server is not None:
            server.stop()
    return {"verdicts": verdicts, "rules": rules, "walls": walls, "start": start_s, "waits": waits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", action="append", help="none, dbos, celery (default: none and every one installed)")
    ap.add_argument("--suite", action="store_true", help="the whole integration suite instead of the runtime subset")
    ap.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    args = ap.parse_args()
    runtimes = args.runtime or ["none"] + [r for r, (pkg, binary) in NEEDS.items()
                                           if importlib.util.find_spec(pkg) and (binary is None or shutil.which(binary))]
    names = scenario_names(args.suite)
    print(f"{len(names)} scenarios ({'the integration suite and keyless-502' if args.suite else 'the runtime subset'}),"
          f" time scale {args.time_scale:g}")
    print("| runtime | example | pass | fail | inconclusive | rules failed (scenarios) | scenarios wall s "
          "(total / median / max) | runtime start s | recovery wait s (median / max, n) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="crashlab-runtimes-") as tmp:
        for runtime in runtimes:
            for example in ("naive", "careful"):
                try:
                    m = measure(runtime, example, names, args.time_scale, Path(tmp))
                except UsageError as exc:
                    print(f"| {runtime} | {example} | skipped: {exc} |")
                    continue
                v, w = m["verdicts"], m["walls"]
                rules = ", ".join(f"{r} ({n})" for r, n in sorted(m["rules"].items())) or "none"
                waits = (f"{statistics.median(m['waits']):.2f} / {max(m['waits']):.2f}, {len(m['waits'])}"
                         if m["waits"] else "no kill")
                start = f"{m['start']:.2f}" if runtime != "none" else "-"
                print(f"| {runtime} | {example} | {v['pass']} | {v['fail']} | {v['inconclusive']} | {rules} | "
                      f"{sum(w):.1f} / {statistics.median(w):.1f} / {max(w):.1f} | {start} | {waits} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
