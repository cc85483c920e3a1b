"""What two of the approved changes of guarantee would save, measured before anyone builds them.

    python benchmarks/guarantees.py            # both, reference adapter
    python benchmarks/bench.py --guarantees    # the same, beside the harness's per-event ratio

* **One trace event per port call** (a trace format 2): each run of the library simulated and
  its trace written as today (a call event and a result event), and again with every result
  folded into its call's event (no result event is made, checked or written). The checks are
  left out of both: they would have to be rewritten for the new format, so the estimate is the
  simulator's and the writer's side, where the event is made.
* **Sharing what runs before a crash point** by forking the simulation there: the crash-matrix
  runs of the first library scenarios, each run in this process, each run in a forked child
  (what a child at a crash point costs: the pages it copies on write, its exit), and a bare
  fork and exit of this process. A shared prefix can save at most the prefix's share of a
  crashed run's events (printed), and only while a fork costs less than that share.

Every figure is CPU time of this process and its reaped children, measured in interleaved rounds
(a b c a b c ...), printed as the median (and the minimum) of the rounds, with the load average.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cpu_samples, load, spread  # noqa: E402
from crashlab.checks import check_trace  # noqa: E402
from crashlab.run.drivers import load_adapter  # noqa: E402
from crashlab.run.explore import matrix_documents  # noqa: E402
from crashlab.run.runner import run_scenario  # noqa: E402
from crashlab.scenario.loader import from_dict, library  # noqa: E402
from crashlab.vocab.events import Result  # noqa: E402
from crashlab.world.trace import Trace, jsonl  # noqa: E402


def _folded_emit(emit):
    """``Trace.emit`` with a result folded into its call's event (``t_result``: when it was
    answered) instead of an event of its own: the one-event-per-call trace, as cheaply as it
    could be made."""
    def emit_one_per_call(self, event, /, *, worker=None, run=None, **data):
        if event is Result:
            record = self.events[data.pop("call")]
            record.update(data, t_result=self._now())
            return record
        return emit(self, event, worker=worker, run=run, **data)
    return emit_one_per_call


def format2_estimate(scenarios, adapter, rounds: int) -> dict:
    """CPU of simulating the library and writing its traces, with two events per port call and
    with one; the events of a round each way."""
    two, one = Trace.emit, _folded_emit(Trace.emit)
    counts: dict[str, int] = {}

    def simulate(emit, name):
        def round_() -> None:
            Trace.emit = emit
            events = 0
            try:
                for sc in scenarios:
                    result = run_scenario(sc, adapter)
                    jsonl(result.events)          # the trace as written
                    events += len(result.events)
            finally:
                Trace.emit = two
            counts[name] = events
        return round_

    samples = cpu_samples({"two events a call": simulate(two, "two"), "one event a call": simulate(one, "one"),
                           "checks (today's format)": lambda: [check_trace(run_scenario(sc, adapter).events)
                                                               for sc in scenarios]}, rounds)
    return {"samples": samples, "events": counts}


def fork_at_crash_points(scenarios, adapter, rounds: int, count: int = 200) -> dict:
    """CPU per crash-matrix run: in this process, in a forked child, and a bare fork; the share of
    a crashed run's events that come before its crash (what a fork at the crash point shares)."""
    docs = []
    for doc, source in matrix_documents(adapter, scenarios):
        docs.append(from_dict(doc, file=source))
        if len(docs) == count:
            break
    kept = [run_scenario(sc, adapter) for sc in scenarios]   # a baseline process holds its runs

    def inline() -> None:
        for sc in docs:
            check_trace(run_scenario(sc, adapter).events)

    def forked(work, frozen: bool = False) -> None:
        if frozen:   # what a fork server does: the collector never walks (and copies) the parent's objects
            gc.freeze()
        for sc in docs:
            pid = os.fork()
            if pid == 0:
                try:
                    work(sc)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
        if frozen:
            gc.unfreeze()

    samples = cpu_samples({"in this process": inline,
                           "in a forked child": lambda: forked(lambda sc: check_trace(run_scenario(sc, adapter).events)),
                           "in a forked child, collector frozen": lambda: forked(
                               lambda sc: check_trace(run_scenario(sc, adapter).events), frozen=True),
                           "a bare fork and exit": lambda: forked(lambda sc: None)}, rounds)
    before = total = 0
    for sc in docs:
        events = run_scenario(sc, adapter).events
        cut = next((e["seq"] for e in events if e["kind"] == "crash"), len(events))
        before, total = before + cut, total + len(events)
    del kept
    return {"samples": samples, "runs": len(docs), "prefix": before / max(total, 1)}


def report(adapter, scenarios, rounds: int, harness: float | None = None, bare: float | None = None) -> None:
    """Print both estimates; with the harness's own CPU per round and the bare simpy floor's
    (benchmarks/bench.py), also the per-event ratio the format change would reach."""
    f2 = format2_estimate(scenarios, adapter, rounds)
    s = f2["samples"]
    two, one = statistics.median(s["two events a call"]), statistics.median(s["one event a call"])
    checks = statistics.median(s["checks (today's format)"]) - two
    saved = two - one
    print(f"trace format 2 (estimate)      simulate + write {two * 1e3:7.1f} ms CPU with two events a call "
          f"({f2['events'].get('two', 0)} events), {one * 1e3:.1f} ms with one ({f2['events'].get('one', 0)} "
          f"events): {saved * 1e3:+.1f} ms, {saved / two:.1%} of a round   [{spread(s['two events a call'])}; "
          f"{spread(s['one event a call'])}]")
    print(f"  the checks                   {checks * 1e3:7.1f} ms CPU a round on today's format (a rewrite "
          f"for one event a call would save at most a part of it)")
    if harness and bare:
        print(f"  per-event ratio              {harness / bare:5.1f}x today, {(harness - saved) / bare:5.1f}x "
              f"with the saving off the harness's own CPU (target <= 12x)")
    fk = fork_at_crash_points(scenarios, adapter, rounds)
    s, n = fk["samples"], fk["runs"]
    per = {k: statistics.median(v) / n for k, v in s.items()}
    inline = per["in this process"]
    print(f"crash point, shared prefix     {inline * 1e3:6.2f} ms CPU a crashed run in this process, "
          f"{per['in a forked child'] * 1e3:.2f} ms in a forked child "
          f"({per['in a forked child, collector frozen'] * 1e3:.2f} ms with the collector frozen first), {per['a bare fork and exit'] * 1e3:.2f} ms "
          f"a bare fork and exit ({n} crash-matrix runs a round)")
    print(f"  what sharing could save      {fk['prefix']:.0%} of a crashed run's events come before its crash: "
          f"at most {fk['prefix'] * inline * 1e3:.2f} ms a crash point, against "
          f"{per['a bare fork and exit'] * 1e3:.2f} ms for the fork alone")


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default="crashlab.reference_impl:ReferenceAdapter")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    adapter = load_adapter(args.adapter)
    scenarios = library()
    print(f"crashlab guarantees benchmark  adapter={adapter.text}  scenarios={len(scenarios)}  "
          f"python={sys.version.split()[0]}  {load()}")
    [run_scenario(sc, adapter) for sc in scenarios]   # warm up imports and caches
    report(adapter, scenarios, args.rounds)
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
