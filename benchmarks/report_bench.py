"""The cost of rendering the whole-library report: prints its figures, asserts nothing.

    python benchmarks/report_bench.py                  # the committed traces in traces/
    python benchmarks/report_bench.py --serial         # one process (no forked workers)
    python benchmarks/report_bench.py --repeat 3
    python benchmarks/report_bench.py --against HEAD~2 --repeat 5     # side by side with another version
    python benchmarks/report_bench.py --copies 2       # every trace given twice (from two folders)

It renders every trace in traces/ (checks included, as ``crashlab report traces/`` does)
into a new temporary folder and prints the wall time and the CPU time it took (this process
and its worker processes), so a number measured on a busy shared machine can still be read:
wall ~ CPU / cores when the machine is otherwise idle.

``--against REV`` measures this checkout and the crashlab of git revision REV (its package
sources, taken with ``git archive`` into a temporary folder) side by side on the same traces:
each round renders once with each version, in a fresh process of its own, the two in turns
(a b a b ...), so that load from other processes falls on both alike; it prints every round
with the load average, then the median CPU per scenario of each and their ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the package's modules live in a checkout (pyproject.toml's package-dir).
PACKAGE_DIRS = {"harness": "crashlab", "scenarios": "crashlab/scenarios", "reference_impl": "crashlab/reference_impl",
                "gallery": "crashlab/gallery"}


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def render_once(traces: Path, serial: bool, copies: int = 1) -> dict:
    """Render the traces (``copies`` copies of their folder, each given) into a new folder: CPU
    (this process and its workers) and wall seconds."""
    import crashlab.report as report

    if serial:
        report.PARALLEL_MIN = 10 ** 9
    with tempfile.TemporaryDirectory() as tmp:
        folders = [traces] + [shutil.copytree(traces, Path(tmp) / f"copy{i}") for i in range(1, copies)]
        w0, c0 = time.perf_counter(), cpu()
        report.render_inputs(folders, Path(tmp) / "report")
        wall, used = time.perf_counter() - w0, cpu() - c0
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
    return {"cpu": used, "wall": wall, "size": size, "harness": str(Path(report.__file__).resolve().parent)}


def package_of(rev: str, into: Path) -> Path:
    """The crashlab package of git revision ``rev``, laid out for PYTHONPATH under ``into``."""
    archive = into / "src.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, *PACKAGE_DIRS], stdout=fh, check=True)
    src = into / "src"
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    pkg = into / "pkg"
    for folder, target in PACKAGE_DIRS.items():        # the package first, the folders mapped into it after
        if (src / folder).is_dir():
            shutil.copytree(src / folder, pkg / target, dirs_exist_ok=True)
    # compiled now, as this checkout's modules are: neither side pays for compiling in its rounds
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True)
    return pkg


def side_by_side(args) -> int:
    n = len(list(Path(args.traces).glob("*.jsonl"))) * args.copies
    with tempfile.TemporaryDirectory(prefix="crashlab-report-bench-") as tmp:
        old = package_of(args.against, Path(tmp))
        sides = {f"previous ({args.against})": str(old), "this checkout": ""}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--traces", args.traces,
               "--copies", str(args.copies)] + (["--serial"] if args.serial else [])
        samples: dict[str, list[float]] = {name: [] for name in sides}
        print(f"{n} traces; {cores()} cores; {'one process' if args.serial else 'forked drawing workers'}; "
              f"{args.repeat} interleaved rounds, each a fresh process rendering into a new folder")
        for i in range(args.repeat):
            for name, path in sides.items():
                env = {**os.environ, "PYTHONPATH": path} if path else \
                    {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                got = json.loads(out.stdout.strip().splitlines()[-1])
                samples[name].append(got["cpu"] / max(n, 1) * 1000)
                print(f"round {i + 1}  {name:24} cpu {got['cpu']:6.2f} s ({samples[name][-1]:4.0f} ms per scenario)  "
                      f"wall {got['wall']:6.2f} s  load average {os.getloadavg()[0]:.1f}  ({got['harness']})")
        med = {name: statistics.median(v) for name, v in samples.items()}
        (before, after) = med.values()
        print("median CPU per scenario: " + "   ".join(f"{name} {v:.0f} ms" for name, v in med.items())
              + f"   previous / this {before / after:.2f}x   (target <= 75 ms)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(ROOT / "traces"), help="folder of traces (default: traces/)")
    ap.add_argument("--serial", action="store_true", help="render in one process only")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--copies", type=int, default=1, metavar="N",
                    help="give N copies of the traces' folder (every figure repeated N times)")
    ap.add_argument("--against", metavar="REV", help="also measure git revision REV, in interleaved rounds")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(render_once(Path(args.traces), args.serial, args.copies)))
        return 0
    if args.against:
        return side_by_side(args)
    import crashlab.report as report

    traces = Path(args.traces)
    n = len(list(traces.glob("*.jsonl"))) * args.copies
    print(f"harness from {Path(report.__file__).resolve().parent.parent}; {n} traces; {cores()} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    for i in range(args.repeat):
        got = render_once(traces, args.serial, args.copies)
        print(f"run {i + 1}: wall {got['wall']:6.2f} s   cpu {got['cpu']:6.2f} s ({got['cpu'] / max(n, 1) * 1000:4.0f} ms "
              f"per scenario)   output {got['size'] / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
