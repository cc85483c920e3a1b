"""The cost of rendering the whole-library report: prints its figures, asserts nothing.

    python benchmarks/report_bench.py                  # the committed traces in traces/
    python benchmarks/report_bench.py --serial         # one process (no forked workers)
    python benchmarks/report_bench.py --repeat 3

It renders every trace in traces/ (checks included, as ``crashlab report traces/`` does)
into a temporary folder and prints the wall time and the CPU time it took (this process and
its worker processes), so a number measured on a busy shared machine can still be read:
wall ~ CPU / cores when the machine is otherwise idle. Run it from another checkout with
PYTHONPATH pointing at that checkout to compare two versions on the same traces.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(ROOT / "traces"), help="folder of traces (default: traces/)")
    ap.add_argument("--serial", action="store_true", help="render in this process only")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    import crashlab.report as report

    if args.serial:
        report.PARALLEL_MIN = 10 ** 9
    traces = Path(args.traces)
    n = len(list(traces.glob("*.jsonl")))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"harness from {Path(report.__file__).resolve().parent.parent}; {n} traces; {cores} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            w0, c0 = time.perf_counter(), cpu()
            report.render_inputs([traces], Path(tmp) / "report")
            wall, used = time.perf_counter() - w0, cpu() - c0
            size = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
        print(f"run {i + 1}: wall {wall:6.2f} s   cpu {used:6.2f} s ({used / max(n, 1) * 1000:4.0f} ms per scenario)"
              f"   output {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
