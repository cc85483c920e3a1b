"""crashlab benchmarks: prints its figures, asserts nothing (machines are shared and noisy).

    python benchmarks/bench.py                 # everything, reference adapter
    python benchmarks/bench.py --quick         # fewer repetitions
    python benchmarks/bench.py --adapter my_pkg:MyAdapter --no-report

Measured side by side in one process, on one core:
  1. full runs per second (simulate + check every invariant) over the scenario library;
  2. the harness's cost per scheduled simpy event, against a bare simpy loop that schedules
     the same number of events (the floor), as a ratio;
  3. simulated time per wall second on the chapter's 10:00-10:20 "cancellation under
     pressure" timeline, and its wall time;
  4. the wall time of the whole conformance suite, scoring included;
  5. the wall time of rendering the full report (figures, HTML, Markdown) for the library.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.checks import check_trace  # noqa: E402
from harness.conformance import run_suite  # noqa: E402
from harness.drivers import InProcessChannel, load_adapter  # noqa: E402
from harness.runner import Runner, Limits  # noqa: E402
from harness.scenario import library  # noqa: E402

TIMELINE = "combined-cancellation-under-pressure"


class AdapterClock:
    """Accumulates the wall time spent inside the adapter's own code (each resume of its
    coroutine), so the harness's own cost can be separated from the adapter's."""

    spent = 0.0

    @classmethod
    def install(cls) -> None:
        original = InProcessChannel._step

        def timed_step(self, fn, arg):
            start = time.perf_counter()
            try:
                return original(self, fn, arg)
            finally:
                cls.spent += time.perf_counter() - start

        InProcessChannel._step = timed_step


def _run(scenario, adapter, seed=None):
    runner = Runner(scenario, adapter, seed, Limits())
    result = runner.run()
    return result, next(runner.world.env._eid)


def bare_simpy(n_events: int) -> None:
    env = simpy.Environment()

    def proc(env):
        for _ in range(n_events):
            yield env.timeout(1)

    env.process(proc(env))
    env.run()


def timed(fn, repeat: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default="reference_impl:ReferenceAdapter")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--no-report", action="store_true", help="skip the report-rendering figure")
    args = ap.parse_args()
    adapter = load_adapter(args.adapter)
    scenarios = library()
    rounds = 3 if args.quick else 10
    print(f"crashlab benchmark  adapter={adapter.text}  scenarios={len(scenarios)}  "
          f"python={sys.version.split()[0]}  cpus={os.cpu_count()}")

    # 1 + 2: full runs, and cost per simpy event vs a bare loop with the same event count
    total_events = 0
    runs = 0

    def all_runs():
        nonlocal total_events, runs
        for sc in scenarios:
            result, events = _run(sc, adapter)
            check_trace(result.events)
            total_events += events
            runs += 1

    all_runs()  # warm up imports and caches
    total_events = runs = 0
    wall = timed(all_runs, rounds)
    per_round_runs = runs // rounds
    per_round_events = total_events // rounds
    sim_only = timed(lambda: [_run(sc, adapter) for sc in scenarios], rounds)
    bare = timed(lambda: bare_simpy(per_round_events), rounds)
    AdapterClock.install()
    AdapterClock.spent = 0.0
    with_clock = timed(lambda: [_run(sc, adapter) for sc in scenarios], rounds)
    adapter_share = AdapterClock.spent / rounds / with_clock if adapter.kind == "python" else 0.0
    harness_only = sim_only * (1 - adapter_share)
    print()
    print(f"full runs (simulate + check)   {per_round_runs / wall:8.0f} runs/s/core   "
          f"({wall / per_round_runs * 1e3:.2f} ms per run, {per_round_runs} runs per round)")
    print(f"simulate only                  {per_round_runs / sim_only:8.0f} runs/s/core   "
          f"(checks are {(wall - sim_only) / wall:.0%} of a full run)")
    print(f"cost per simpy event           harness {harness_only / per_round_events * 1e6:6.2f} us   "
          f"bare simpy {bare / per_round_events * 1e6:6.2f} us   ratio {harness_only / bare:5.1f}x   "
          f"({per_round_events} events per round)")
    print(f"  with the adapter's own code  {sim_only / per_round_events * 1e6:6.2f} us per event, ratio "
          f"{sim_only / bare:5.1f}x (the adapter is {adapter_share:.0%} of simulate-only time)")

    # 3: simulated time per wall second on the 10:00-10:20 timeline
    timeline = next((s for s in scenarios if s.id == TIMELINE), None)
    if timeline is not None:
        result, _ = _run(timeline, adapter)
        last_t = result.events[-1]["t"]
        t_wall = timed(lambda: _run(timeline, adapter), rounds * 5)
        print(f"10:00-10:20 timeline           {t_wall * 1e3:8.2f} ms wall for {last_t / 60_000:.0f} simulated "
              f"minutes   = {last_t / 1000 / t_wall:,.0f} simulated s per wall s")

    # 4: the whole conformance suite
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        card = run_suite(adapter, scenarios, out_dir=Path(tmp))
        suite = time.perf_counter() - start
        print(f"conformance suite              {suite:8.2f} s wall   score {card.total}/{card.max} "
              f"({card.verdict}), traces written")

        # 5: report rendering of the whole library
        if not args.no_report:
            try:
                from harness.report import render_scorecard
            except ImportError as exc:  # matplotlib is an optional extra
                print(f"report rendering               skipped ({exc})")
            else:
                start = time.perf_counter()
                render_scorecard(card, out_dir=Path(tmp) / "report")
                print(f"report rendering (library)     {time.perf_counter() - start:8.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
