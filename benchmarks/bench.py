"""crashlab benchmarks: prints its figures, asserts nothing (machines are shared and noisy).

Every figure is CPU time (this process and the worker processes it reaped), measured in
interleaved rounds (a b c a b c ...) so that load from other processes falls on every side of
a comparison alike, and printed as the minimum and the median of the rounds; every target is a
ratio to a baseline measured in the same run. The machine's load average is printed at the
start and the end: figures taken under a load above the core count are still comparable as
ratios, not as absolute times.

    python benchmarks/bench.py                 # everything, reference adapter
    python benchmarks/bench.py --quick         # fewer repetitions
    python benchmarks/bench.py --adapter my_pkg:MyAdapter --no-report

Measured side by side in one process, on one core:
  1. full runs per second (simulate + check every invariant) over the scenario library;
  2. the harness's cost per scheduled simpy event (the adapter's own CPU taken out), against a
     bare simpy program that schedules the same events as a library round (the floor): as many
     processes started and ended, timeouts, plain events and conditions; and, for comparison,
     against a loop of timeouts alone;
  3. simulated time per wall second on the chapter's 10:00-10:20 "cancellation under
     pressure" timeline, and its wall time;
  4. the wall time of the whole conformance suite, scoring included; and side by side, in
     interleaved rounds, the suite with its adapter in worker processes (the default: the trust
     boundary) against ``--in-process`` (the adapter inside crashlab's own process), as a ratio;
  5. the CPU time of rendering the full report (figures, HTML, Markdown) for the library, into a
     new folder and again into the same one (the figures of unchanged traces are kept);
  6. loading the scenario library, and writing traces (CPU time, interleaved rounds);
  7. cost against scenario length: one scenario at 1x, 10x and 100x its runs, horizon and
     background traffic, per event (linear cost keeps it flat);
  8. with --sweeps: the crash matrix of the whole library (crashlab sweep, --jobs 2) with the
     peak memory of its worker processes, generated schedules per second (crashlab explore,
     --jobs 2), and the conformance suite over the wire (wire: and exec:, each also in namespaces
     and process only side by side: the cost of --isolation namespaces);
  9. peak memory (maximum resident set) of this process and of its worker processes;
 10. with --guarantees: what one trace event per port call and forking at each crash point would
     save, estimated side by side (benchmarks/guarantees.py).
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crashlab.checks import check_trace  # noqa: E402
from crashlab.run.conformance import run_suite  # noqa: E402
from crashlab.run.drivers import InProcessChannel, load_adapter  # noqa: E402
from crashlab.run.runner import Runner, Limits  # noqa: E402
from crashlab.scenario.loader import from_dict, library, library_dir  # noqa: E402
from crashlab.scenario.yaml import _parse  # noqa: E402
from crashlab.world.trace import jsonl  # noqa: E402

TIMELINE = "combined-cancellation-under-pressure"


class AdapterClock:
    """Accumulates the CPU time spent inside the adapter's own code (each resume of its
    coroutine), so the harness's own cost can be separated from the adapter's."""

    spent = 0.0
    steps = 0

    @classmethod
    def install(cls) -> None:
        original = InProcessChannel._step

        def timed_step(self, fn, arg):
            def adapter_code(value):  # only the coroutine's own resume, not the boundary copy
                start = time.process_time()
                try:
                    return fn(value)
                finally:
                    cls.spent += time.process_time() - start
                    cls.steps += 1
            return original(self, adapter_code, arg)

        InProcessChannel._step = timed_step

    @classmethod
    def own_cost(cls, n: int = 20_000) -> float:
        """CPU seconds the clock itself adds to one step (a closure, two readings of the CPU
        clock), measured on a step that does nothing: taken out of the harness's time."""
        def step(fn, arg):
            def adapter_code(value):
                start = time.process_time()
                try:
                    return fn(value)
                finally:
                    cls.spent += time.process_time() - start
                    cls.steps += 1
            return adapter_code(arg)

        saved = cls.spent, cls.steps
        start = time.process_time()
        for _ in range(n):
            step(int, 0)
        bare = time.process_time()
        for _ in range(n):
            int(0)
        cost = ((bare - start) - (time.process_time() - bare)) / n
        cls.spent, cls.steps = saved
        return max(0.0, cost)


def _run(scenario, adapter, seed=None):
    runner = Runner(scenario, adapter, seed, Limits())
    result = runner.run()
    return result, next(runner.world.env._eid)


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Linux: /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def _memory_kb(pid: int) -> tuple[int, int, int]:
    """A process's resident set now: (RSS, PSS, USS) in KiB from /proc/<pid>/smaps_rollup. RSS
    counts the pages a forked worker shares with its parent in full, PSS a share of them, USS
    (private) none: what the worker itself costs. (0, 0, 0) once it is gone."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                fields[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return 0, 0, 0
    return fields.get("Rss", 0), fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def run_watched(cmd: list[str], **kw) -> tuple[float, float, tuple[float, float, float]]:
    """Run ``cmd``; return its wall seconds, the peak resident set of its main process and the
    peak (RSS, PSS, USS) of its worker processes (MB), sampled every 100 ms from /proc."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, **kw)
    main_kb, worker_kb = 0, [0, 0, 0]
    while proc.poll() is None:
        main_kb = max(main_kb, _memory_kb(proc.pid)[0])
        for pid in _descendants(proc.pid):
            worker_kb = [max(a, b) for a, b in zip(worker_kb, _memory_kb(pid))]
        time.sleep(0.1)
    rss, pss, uss = (k / 1024 for k in worker_kb)
    return time.perf_counter() - start, main_kb / 1024, (rss, pss, uss)


def bare_simpy(n_events: int) -> None:
    env = simpy.Environment()

    def proc(env):
        for _ in range(n_events):
            yield env.timeout(1)

    env.process(proc(env))
    env.run()


def event_mix(run_round) -> dict[str, int]:
    """The simpy events one call of ``run_round`` schedules, by kind: processes started
    (``Initialize``) and ended (``Process``), timeouts, plain events and conditions (``a | b``,
    ``any_of``)."""
    counts = {"Initialize": 0, "Process": 0, "Timeout": 0, "Event": 0, "Condition": 0}
    original = simpy.Environment.schedule

    def counted(self, event, priority=1, delay=0):
        kind = type(event).__name__
        kind = "Condition" if kind in ("AnyOf", "AllOf") else kind
        counts[kind] = counts.get(kind, 0) + 1
        return original(self, event, priority, delay)

    simpy.Environment.schedule = counted
    try:
        run_round()
    finally:
        simpy.Environment.schedule = original
    return counts


def bare_simpy_mix(mix: dict[str, int], count: bool = False) -> dict[str, int] | None:
    """A bare simpy program scheduling the same events as ``mix`` (:func:`event_mix`): a main
    process starts every other process in turn and waits for each (on a condition ``proc | event``
    for as many as the mix has conditions); the processes share the timeouts, wait on the plain
    events (each triggered by its waiter's ``succeed``), and as many as the mix left running at
    the end wait forever. With ``count``: the mix it scheduled (to compare)."""
    env = simpy.Environment()
    started, ended = mix["Initialize"], mix["Process"]
    workers = max(0, started - 1)
    hanging = max(0, started - ended)          # started but never ended (the main one always ends)
    timeouts, plain, conditions = mix["Timeout"], mix["Event"], mix["Condition"]
    never = env.event()

    def worker(env, n_timeouts, n_events, hang):
        for _ in range(n_timeouts):
            yield env.timeout(1)
        for _ in range(n_events):
            ev = env.event()
            ev.succeed()
            yield ev
        if hang:
            yield never

    def main(env):
        for i in range(workers):
            share_t = timeouts // workers + (i < timeouts % workers)
            share_e = plain // workers + (i < plain % workers)
            proc = env.process(worker(env, share_t, share_e, i < hanging))
            if i < hanging:
                continue
            if i < hanging + conditions:
                yield proc | env.event()
            else:
                yield proc

    if not count:
        env.process(main(env))
        env.run()
        return None
    return event_mix(lambda: (env.process(main(env)), env.run()))


def cpu_now() -> float:
    """CPU seconds of this process and of its reaped children (worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cpu_samples(fns: dict, repeat: int) -> dict[str, list[float]]:
    """CPU seconds of each function per round (this process and its reaped children), the rounds
    interleaved (a b a b ...) so that load from other processes falls on all of them alike."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            start = cpu_now()
            fn()
            samples[name].append(cpu_now() - start)
    return samples


def cpu_rounds(fns: dict, repeat: int) -> dict[str, float]:
    """Median CPU seconds of each function over interleaved rounds (:func:`cpu_samples`)."""
    return {k: statistics.median(v) for k, v in cpu_samples(fns, repeat).items()}


def spread(values: list[float], scale: float = 1e3, unit: str = "ms") -> str:
    return f"min {min(values) * scale:.2f} {unit}, median {statistics.median(values) * scale:.2f} {unit}"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def scaled(scenario, k: int):
    """``scenario`` k times longer: k runs (distinct intents), k times the horizon, and other
    actors' traffic on the service all along."""
    doc = copy.deepcopy(dict(scenario.raw))
    origin = doc.get("clock", {}).get("origin", "10:00")
    doc["clock"] = {"origin": origin, "horizon": f"{20 * k}m"}
    base = doc["runs"][0]
    doc["runs"] = [{**copy.deepcopy(base), "id": f"run-{i + 1}",
                    "intent": {**base["intent"], "incident": f"I-{i + 1}"}} for i in range(k)]
    doc["services"] = {**doc.get("services", {}), "reservation": {**doc.get("services", {}).get("reservation", {}),
                                                                  "background": "20s"}}
    doc.pop("expect", None)
    doc.pop("faults", None)
    doc.pop("crashes", None)
    return from_dict(doc, file=scenario.source)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapter", default="crashlab.reference_impl:ReferenceAdapter")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--no-report", action="store_true", help="skip the report-rendering figure")
    ap.add_argument("--guarantees", action="store_true",
                    help="also what a trace format of one event per port call and a crash matrix that forks "
                         "at each crash point would save (benchmarks/guarantees.py)")
    ap.add_argument("--sweeps", action="store_true",
                    help="also the crash matrix, explore and the wire suite (a minute or more)")
    args = ap.parse_args()
    adapter = load_adapter(args.adapter)
    scenarios = library()
    rounds = 3 if args.quick else 10
    print(f"crashlab benchmark  adapter={adapter.text}  scenarios={len(scenarios)}  "
          f"python={sys.version.split()[0]}  cpus={os.cpu_count()}  {load()}")

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
    AdapterClock.install()

    def with_clock():
        AdapterClock.spent, AdapterClock.steps = 0.0, 0
        [_run(sc, adapter) for sc in scenarios]
        adapter_cpu.append(AdapterClock.spent)
        clock_cpu.append(AdapterClock.steps * clock_cost)
    clock_cost = statistics.median(AdapterClock.own_cost() for _ in range(5))
    adapter_cpu: list[float] = []
    clock_cpu: list[float] = []
    probe_events = sum(_run(sc, adapter)[1] for sc in scenarios)
    mix = event_mix(lambda: [_run(sc, adapter) for sc in scenarios])
    samples = cpu_samples({"full": all_runs, "simulate": with_clock, "bare": lambda: bare_simpy_mix(mix),
                           "timeouts": lambda: bare_simpy(probe_events)}, rounds)
    per_round_runs = runs // rounds
    per_round_events = probe_events
    wall = statistics.median(samples["full"])
    sim_only = statistics.median(samples["simulate"])
    bare = statistics.median(samples["bare"])
    harness_rounds = [s - a - c for s, a, c in zip(samples["simulate"], adapter_cpu, clock_cpu)]
    harness_only = statistics.median(harness_rounds)
    adapter_share = statistics.median(adapter_cpu) / sim_only if adapter.kind == "python" else 0.0
    print()
    print(f"full runs (simulate + check)   {per_round_runs / wall:8.0f} runs/s/core   "
          f"({wall / per_round_runs * 1e3:.2f} ms CPU per run, {per_round_runs} runs per round; "
          f"a round: {spread(samples['full'])})")
    print(f"simulate only                  {per_round_runs / sim_only:8.0f} runs/s/core   "
          f"(checks are {(wall - sim_only) / wall:.0%} of a full run)")
    timeouts_only = statistics.median(samples["timeouts"])
    print(f"cost per simpy event           harness {harness_only / per_round_events * 1e6:6.2f} us   "
          f"bare simpy {bare / per_round_events * 1e6:6.2f} us   ratio {harness_only / bare:5.1f}x "
          f"(min {min(harness_rounds) / min(samples['bare']):.1f}x)   "
          f"({per_round_events} events per round, target <= 12x)")
    print(f"  the bare baseline            the round's own mix: {mix['Initialize']} processes started, "
          f"{mix['Process']} ended, {mix['Timeout']} timeouts, {mix['Event']} events, {mix['Condition']} "
          f"conditions; a loop of {per_round_events} timeouts alone costs "
          f"{timeouts_only / per_round_events * 1e6:.2f} us "
          f"per event (ratio {harness_only / timeouts_only:.1f}x)")
    print(f"  the adapter's time           its own CPU time in each step, plus what timing it costs "
          f"({clock_cost * 1e6:.2f} us a step, {AdapterClock.steps} steps a round)")
    print(f"  with the adapter's own code  {sim_only / per_round_events * 1e6:6.2f} us per event, ratio "
          f"{sim_only / bare:5.1f}x (the adapter is {adapter_share:.0%} of simulate-only CPU, by its own CPU time)")

    if args.guarantees:   # 2b: two changes of guarantee, estimated beside the ratio they were meant to move
        from guarantees import report as guarantees

        guarantees(adapter, scenarios, rounds, harness=harness_only, bare=bare)

    # 3: simulated time per wall second on the 10:00-10:20 timeline
    timeline = next((s for s in scenarios if s.id == TIMELINE), None)
    if timeline is not None:
        result, _ = _run(timeline, adapter)
        last_t = result.events[-1]["t"]
        t_wall = cpu_rounds({"t": lambda: _run(timeline, adapter)}, rounds * 5)["t"]
        print(f"10:00-10:20 timeline           {t_wall * 1e3:8.2f} ms CPU for {last_t / 60_000:.0f} simulated "
              f"minutes   = {last_t / 1000 / t_wall:,.0f} simulated s per CPU s")

    # 6: loading the library and writing traces
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(library_dir().glob("*.yaml"))]
    results = [_run(sc, adapter)[0] for sc in scenarios]

    def canonical():  # the serialisation the trace writer replaced (json with sorted keys)
        for r in results:
            "".join(json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
                    for e in r.events)

    cpu = cpu_rounds({"load": lambda: [from_dict(_parse(t, f), file=f) for f, t in texts],
                      "write": lambda: [jsonl(r.events) for r in results], "write_json": canonical,
                      "simulate+check": lambda: [check_trace(_run(sc, adapter)[0].events) for sc in scenarios]},
                     rounds)
    print(f"loading the library            {cpu['load'] * 1e3:8.1f} ms CPU   "
          f"({cpu['load'] / cpu['simulate+check']:.0%} of simulating and checking it)")
    print(f"writing its traces             {cpu['write'] * 1e3:8.1f} ms CPU   (json.dumps: "
          f"{cpu['write_json'] * 1e3:.1f} ms, {cpu['write_json'] / cpu['write']:.1f}x slower; "
          f"{cpu['write'] / cpu['simulate+check']:.0%} of a simulate+check round)")

    # 7: cost against scenario length
    base = next(s for s in scenarios if s.id == "t2-commit-before-record")
    per_event = {}
    for k in (1, 10, 100):
        sc = scaled(base, k)
        result, events = _run(sc, adapter)
        t = cpu_rounds({"run": lambda: check_trace(_run(sc, adapter)[0].events)}, 3 if k == 100 else rounds)["run"]
        per_event[k] = t / events
        print(f"length {k:>3}x                    {t * 1e3:8.1f} ms CPU   {events:>7} events   "
              f"{per_event[k] * 1e6:6.2f} us per event ({per_event[k] / per_event[1]:.2f}x the 1x cost)")

    # 7b: the crash matrix against scenario length: every run's crash points, CPU per crash point
    from crashlab.run.explore import crash_matrix

    matrix = {}
    for k in (1, 2, 4):
        sc = scaled(base, k)
        count = [0]

        def one_matrix(sc=sc, count=count):
            count[0] = sum(1 for _ in crash_matrix(adapter, [sc]))
        t = cpu_rounds({"m": one_matrix}, 1 if args.quick or k == 4 else 2)["m"]
        matrix[k] = (t, count[0])
        print(f"crash matrix, length {k}x        {t * 1e3:8.0f} ms CPU   {count[0]:>5} crashed runs   "
              f"{t / count[0] * 1e3:6.2f} ms per crash point ({t / count[0] / (matrix[1][0] / matrix[1][1]):.2f}x "
              f"the 1x cost; every run of the {k} is crashed at each of its calls)")

    # 4: the whole conformance suite
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu0 = time.perf_counter(), cpu_now()
        card = run_suite(adapter, scenarios, out_dir=Path(tmp))
        suite, suite_cpu = time.perf_counter() - start, cpu_now() - cpu0
        print(f"conformance suite              {suite_cpu:8.2f} s CPU ({suite:.2f} s wall)   score {card.total}/{card.max} "
              f"({card.verdict}), traces written")

        # 4b: the trust boundary's cost: the adapter in worker processes against --in-process
        from crashlab.run.sweep import LocalExecutor

        def suite_with(executor):
            return lambda: run_suite(adapter, scenarios, out_dir=Path(tmp) / "iso", executor=executor)
        modes = {"in-process": suite_with(LocalExecutor(1, in_process=True)),
                 "isolated --jobs 1": suite_with(LocalExecutor(1)), "isolated --jobs 2": suite_with(LocalExecutor(2))}
        walls: dict[str, list[float]] = {k: [] for k in modes}
        cpus: dict[str, list[float]] = {k: [] for k in modes}
        for _ in range(max(3, rounds // 2)):
            for name, fn in modes.items():
                gc.collect()
                start, cpu0 = time.perf_counter(), cpu_now()
                fn()
                walls[name].append(time.perf_counter() - start)
                cpus[name].append(cpu_now() - cpu0)
        med = {k: statistics.median(v) for k, v in walls.items()}
        cpu = {k: statistics.median(v) for k, v in cpus.items()}
        base_s, base_cpu = med["in-process"], cpu["in-process"]
        print(f"conformance, trust boundary    {base_cpu:8.2f} s CPU --in-process   "
              + "   ".join(f"{cpu[k]:.2f} s {k} (ratio {cpu[k] / base_cpu:.2f}x)" for k in modes if k != "in-process")
              + f"   (CPU of all processes, median of {len(walls['in-process'])} interleaved rounds)")
        print(f"  its wall time                {base_s:8.2f} s --in-process   "
              + "   ".join(f"{med[k]:.2f} s {k} (ratio {med[k] / base_s:.2f}x)" for k in modes if k != "in-process"))

        # 5: report rendering of the whole library (CPU of this process and its drawing workers)
        if not args.no_report:
            try:
                from crashlab.report import render_scorecard
            except ImportError as exc:  # matplotlib is an optional extra
                print(f"report rendering               skipped ({exc})")
            else:
                start, cpu0 = time.perf_counter(), cpu_now()
                render_scorecard(card, out_dir=Path(tmp) / "report")
                spent = cpu_now() - cpu0
                print(f"report rendering (library)     {spent:8.2f} s CPU ({time.perf_counter() - start:.2f} s wall)   "
                      f"{spent / len(scenarios) * 1e3:.0f} ms CPU per scenario (target <= 75 ms), into a new folder")
                start, cpu0 = time.perf_counter(), cpu_now()
                render_scorecard(card, out_dir=Path(tmp) / "report")
                again = cpu_now() - cpu0
                print(f"  written again, same folder   {again:8.2f} s CPU ({time.perf_counter() - start:.2f} s wall)   "
                      f"{again / len(scenarios) * 1e3:.0f} ms CPU per scenario: the same traces, every figure kept")
    # 8: sweeps, explore and the wire (CPU of the crashlab process and its workers, reaped)
    if args.sweeps:
        here = Path(__file__).resolve().parent.parent
        cmd = [sys.executable, "-m", "crashlab"]
        with tempfile.TemporaryDirectory() as tmp:
            cpu0 = cpu_now()
            sweep_s, main_mb, worker_mb = run_watched(
                cmd + ["sweep", "-q", "--jobs", "2", "--keep-traces", "none", "--out", tmp, "--json", f"{tmp}/s.json"],
                cwd=here, stdout=subprocess.DEVNULL)
            sweep_cpu = cpu_now() - cpu0
            done = json.loads(Path(f"{tmp}/s.json").read_text())
            runs = len(done["scenarios"])
            print(f"crash matrix (sweep, 2 jobs)   {sweep_cpu:8.2f} s CPU ({sweep_s:.2f} s wall)   {runs} runs, "
                  f"{sweep_cpu / runs * 1e3:.2f} ms CPU per run; {done.get('coverage', {}).get('runs_crashed')} of "
                  f"{done.get('coverage', {}).get('runs')} runs crashed")
            rss, pss, uss = worker_mb
            print(f"  its peak memory              {rss:8.0f} MB per worker process (RSS; {pss:.0f} MB PSS, "
                  f"{uss:.0f} MB its own: USS), {main_mb:.0f} MB the main process")
            n = 1000
            with open(f"{tmp}/explore.txt", "w") as log:
                explore_s, _, explore_mb = run_watched(
                    cmd + ["explore", "-q", "--examples", str(n), "--seed", "1", "--jobs", "2",
                           "--findings", f"{tmp}/findings"], cwd=here, stdout=log)
            said = Path(f"{tmp}/explore.txt").read_text().split()     # "explored N schedules in ..."
            tried = int(said[1]) if len(said) > 1 and said[1].isdigit() else n
            print(f"explore                        {tried / explore_s:8.1f} schedules/s   ({tried} schedules, "
                  f"--jobs 2, {explore_mb[0]:.0f} MB RSS per worker)")
            shim = f"exec:{sys.executable} -m crashlab.run.wire {adapter.text}"
            suites = {"in-process": ["--in-process"],
                      "wire: (warm server)": ["--adapter", f"wire:{adapter.text}"],
                      "exec: (Python shim)": ["--adapter", shim],
                      "wire: in namespaces": ["--adapter", f"wire:{adapter.text}", "--isolation", "namespaces"],
                      "wire: process only": ["--adapter", f"wire:{adapter.text}", "--isolation", "process"],
                      "wire: process only, unpinned": ["--adapter", f"wire:{adapter.text}", "--isolation", "process"],
                      "exec: in namespaces": ["--adapter", shim, "--isolation", "namespaces"],
                      "exec: process only": ["--adapter", shim, "--isolation", "process"]}
            from crashlab.run import isolate
            if isolate.current().mode != "namespaces":
                print(f"isolation                      no namespaces here ({isolate.current().detail}): "
                      "the suites in namespaces are left out")
                suites = {k: v for k, v in suites.items() if "namespaces" not in k}
            # the version before crashlab.run.affinity: no wire: worker shares the harness's CPU
            unpinned = [sys.executable, "-c", "import sys, crashlab.run.affinity as a; a.pin = lambda *pids: False; "
                        "from crashlab.cli import main; sys.exit(main())"]

            def suite_cli(extra, base=cmd):
                return lambda: subprocess.run(base + ["conformance", "-q", "--jobs", "1", "--out", tmp, *extra],
                                              check=False, cwd=here, stdout=subprocess.DEVNULL)
            wire_cpu = cpu_rounds({k: suite_cli(v, unpinned if "unpinned" in k else cmd) for k, v in suites.items()},
                                  1 if args.quick else 2)
            base_cpu = wire_cpu["in-process"]
            # the targets on --isolation process: there every process's CPU reaches this one when it is
            # reaped; in namespaces the sandbox's processes may end unreaped by crashlab (undercounted)
            targets = {"wire: process only": 2.5, "exec: process only": 8.0}
            print(f"conformance over the wire      {base_cpu:8.2f} s CPU in-process (--jobs 1)   "
                  + "   ".join(f"{wire_cpu[k]:.2f} s {k} (ratio {wire_cpu[k] / base_cpu:.1f}x, target <= {t:g}x)"
                             for k, t in targets.items()))
            print(f"  default isolation            {wire_cpu['wire: (warm server)']:.2f} s wire:, "
                  f"{wire_cpu['exec: (Python shim)']:.2f} s exec:   (a wire: worker not sharing crashlab's CPU, the "
                  f"version before: {wire_cpu['wire: process only, unpinned']:.2f} s, ratio "
                  f"{wire_cpu['wire: process only, unpinned'] / base_cpu:.1f}x)")
            for kind in ("wire:", "exec:"):   # the cost of namespaces, side by side
                inside, outside = wire_cpu.get(f"{kind} in namespaces"), wire_cpu[f"{kind} process only"]
                if inside is not None:
                    print(f"  {kind} isolation              {outside:8.2f} s CPU process only   {inside:.2f} s in "
                          f"namespaces (ratio {inside / outside:.2f}x)")

    print(f"at the end: {load()}")
    # 9: peak memory
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory                    {own:8.0f} MB this process, {children:.0f} MB its largest child "
          "(the report's workers, forked from it, count the pages they share)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
