"""The integration commands, registered by crashlab.cli.args in one line: ``crashlab sandbox
serve`` (crashlab.sandbox.cli) and ``crashlab integrate``."""
from __future__ import annotations

import argparse

#: how many more times a scenario whose card is inconclusive is run (--again)
AGAIN = 2


def add_parsers(cmd) -> None:
    from ..sandbox.cli import add_parser as add_sandbox
    from .supervisor import DEFAULT_TIME_SCALE, HANDOVER_WAIT_S, WALL_LIMIT_S
    from .run import AGAIN_SLOWER

    add_sandbox(cmd)
    p = cmd("integrate", "judge a real worker process, with its own database, against the sandbox",
            "Serve each scenario's services over HTTP on 127.0.0.1, start the worker command for every run "
            "(templated {url}, {db}, {worker}, {run}; each worker in its own process group), kill it with SIGKILL "
            "at the scenario's service boundaries and failpoints, read its store views while it is blocked on "
            "each request, and judge the trace on the integration card (docs/integration.md). Exit 0 pass, "
            "1 fail, 2 inconclusive.")
    from .supervisor import MAX_OUTPUT_BYTES, MAX_WORKERS
    from ..sandbox.server import MAX_REQUESTS

    p.epilog = f"""exit codes:
  0  pass            every scenario's integration card passed
  1  fail            a rule failed on some card, or a worker misbehaved (a recorded fault)
  2  inconclusive    nothing failed, but a rule of the minimum set (EFF-01, PREP-02, RETRY-01, REC-01,
                     TRUTH-01) could not be judged, a run was cut by the wall-clock limit, or the
                     scenario did not happen: a paused worker's replacement never got the run (no read,
                     send or store row within --handover-wait), or its faults never met a request
  3  usage error     bad arguments, an unknown scenario, a bad --store URL, a runtime that is not installed,
                     an output path that names an input or another output (refused before anything runs)
  4  out of room     the disk filled up or file descriptors ran out: what was not written is named
  6  internal error  a bug in crashlab: please report it with the command you ran
  130, 143           interrupted by SIGINT (Ctrl-C) or SIGTERM: every worker and server is stopped first

worker command and environment (docs/integration.md, "The worker contract"):
  {{url}} CRASHLAB_URL        the worker's base URL at the sandbox (services and inbox under it)
  {{db}} CRASHLAB_DB          its store: a SQLite path or a PostgreSQL URL (--store)
  {{worker}} CRASHLAB_WORKER  its name, run-82/w2; {{run}} CRASHLAB_RUN its run
  CRASHLAB_EPOCH            its number in the run (1, 2, ...): a later worker's is higher (a lease epoch)
  CRASHLAB_FAILPOINT        the store failpoints armed for it (port.op:nth:boundary, comma-separated)
  {{runtime}} {{runtime_id}}    with --runtime: the runtime's address, and the run's unit-of-work id

worker limits (docs/integration.md): {MAX_REQUESTS:,} requests per worker (beyond: a flood), {MAX_OUTPUT_BYTES >> 20} MiB
of standard output and error per worker, {MAX_WORKERS} workers per run, --wall-limit seconds per scenario;
no process may outlive its group. Each is a recorded fault of that scenario with a clear message."""
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="library scenario ids or .yaml files")
    p.add_argument("--suite", action="store_true",
                   help="the integration suite: every library scenario tagged 'integration' (docs/integration.md)")
    p.add_argument("--tag", action="append", metavar="TAG",
                   help="also every library scenario with this tag (repeatable), e.g. --tag crash-point")
    p.add_argument("--worker", required=True, metavar="CMD",
                   help="the worker command, e.g. 'python3 worker.py {url} {db}'")
    p.add_argument("--worker-next", metavar="CMD",
                   help="the next code version's worker command: a scenario's deploy event stops the old version's "
                        "workers and starts every later one with it, told the new versions in CRASHLAB_*_VERSION "
                        "(default: the --worker command; docs/integration.md, \"Deployments\")")
    p.add_argument("--store", default="sqlite:{db}", metavar="URL",
                   help="the worker's store: sqlite:{db} (default: one database file per run in the output folder), "
                        "sqlite:PATH with {scenario} and {run} (a file crashlab did not make is never deleted), "
                        "or postgresql://USER@127.0.0.1:PORT/[PREFIX_]{db} (one database per run, created empty)")
    p.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE, metavar="N",
                   help=f"scenario milliseconds per real millisecond (default {DEFAULT_TIME_SCALE:g})")
    p.add_argument("--wall-limit", type=float, default=WALL_LIMIT_S, metavar="S",
                   help=f"real seconds a scenario may take before the worker is declared unresponsive "
                        f"(default {WALL_LIMIT_S:g})")
    p.add_argument("--handover-wait", type=float, default=HANDOVER_WAIT_S, metavar="S",
                   help="after a paused worker is replaced, real seconds the stale worker stays stopped waiting "
                        "for its replacement to work on the run (a read, a send or a store row; a durable runtime "
                        "hands a stalled run over on its own timeouts); none by then: the card is inconclusive "
                        f"(default {HANDOVER_WAIT_S:g})")
    p.add_argument("--again", type=int, default=AGAIN, metavar="N",
                   help="run a scenario whose card is inconclusive (its premise did not happen under real time: a "
                        "clock event came before the requests it was to meet, a replacement never got the run, a "
                        "run was cut) up to N more times; a pass or a fail is never run again, and the output says "
                        f"which attempt the card is from (default {AGAIN}; 0: once)")
    p.add_argument("--again-slower", type=float, default=AGAIN_SLOWER, metavar="F",
                   help="each further attempt of --again runs at a time scale F times lower, with --wall-limit and "
                        "--handover-wait F times longer, so a worker slow to start has more scenario time (default "
                        f"{AGAIN_SLOWER:g}: 100, 20, 4; never below 1, real time; 1 keeps the time scale)")
    p.add_argument("--out", default="crashlab-integrate", metavar="DIR",
                   help="folder for the traces, stores and worker logs (default: crashlab-integrate)")
    p.add_argument("--json", metavar="PATH", help="write every scenario's card as JSON here")
    p.add_argument("--runtime", metavar="NAME",
                   help="run the worker under a durable runtime (dbos, celery, temporal, restate; docs/runtimes/) or an agent "
                        "framework (langgraph, pydantic-ai-dbos, pydantic-ai-temporal, openai-agents-dbos, "
                        "openai-agents-temporal; docs/agents/): "
                        "crashlab starts its local server once, gives every worker its address ({runtime}) and a "
                        "unit-of-work id per run ({runtime_id}), and shows the runtime's record on each card")
    from ..run.isolate import add_option

    add_option(p)      # the worker's isolation (docs/integration.md, "Isolation")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..vocab.errors import UsageError
    from ..scenario.loader import resolve
    from .run import SUITE_TAG, integrate, until_conclusive

    names = list(args.scenarios)
    tags = list(args.tag or ()) + ([SUITE_TAG] if args.suite else [])
    if tags:
        from ..scenario.loader import library

        tagged = [sc.id for sc in library() if set(tags) & set(sc.tags)]
        if not tagged:
            raise UsageError(f"no library scenario has the tag {', '.join(tags)}", hint="crashlab list shows the tags")
        names += [n for n in tagged if n not in names]
    if not names:
        raise UsageError("name at least one scenario, or --suite, or --tag TAG")
    for flag, value in (("--time-scale", args.time_scale), ("--wall-limit", args.wall_limit),
                        ("--handover-wait", args.handover_wait)):
        if not value > 0:
            raise UsageError(f"{flag} must be positive, got {value:g}")
    if not 0 <= args.again <= 10:
        raise UsageError(f"--again must be 0 to 10, got {args.again}")
    if not 1 <= args.again_slower <= 100:
        raise UsageError(f"--again-slower must be 1 to 100 (how many times slower each further attempt runs; 1 keeps "
                         f"the time scale), got {args.again_slower:g}")
    scenarios = [resolve(n) for n in names]
    runtime = None
    if getattr(args, "runtime", None):
        from ..runtimes import load
        runtime = load(args.runtime)          # a UsageError naming the extra when its package is missing
    from ..vocab.files import check_output_dir, check_output_file

    check_output_dir(args.out, "--out")          # before any worker runs: a file there is exit 3, not a crash
    from .store import plan_stores

    plan_stores(args.store, [(sc.id, spec.id, Path(args.out) / sc.id) for sc in scenarios for spec in sc.runs])
    if args.json:
        check_output_file(args.json, "--json")
    codes, cards = [], []
    with _runtime_server(runtime, Path(args.out)) as server:
        for sc in scenarios:
            def once(scale, sc=sc):
                slower = args.time_scale / scale       # a slower attempt's real-time limits are as much longer
                return integrate(sc, worker=args.worker, out=Path(args.out), store=args.store,
                                 time_scale=scale, wall_limit_s=args.wall_limit * slower,
                                 handover_wait_s=args.handover_wait * slower, runtime=runtime, server=server,
                                 worker_next=args.worker_next or args.worker)

            outcome, earlier, scale = until_conclusive(once, args.again, time_scale=args.time_scale,
                                                       slower=args.again_slower)
            print(outcome.card.text())
            for n, attempt in enumerate(earlier, 1):
                print(f"  attempt {n} of {len(earlier) + 1}, at time scale {attempt.time_scale:g}, was inconclusive "
                      f"({attempt.why}); this card is attempt {len(earlier) + 1}'s, at time scale {scale:g}")
            if earlier:
                print(f"  repro: {outcome.result.repro}")
            print(f"  trace: {outcome.trace}", flush=True)
            codes.append(outcome.card.exit_code)
            cards.append({**outcome.card.to_json(), "trace": str(outcome.trace), "attempts": len(earlier) + 1,
                          "time_scale": scale, "repro": outcome.result.repro,
                          "inconclusive_attempts": [a.why for a in earlier],
                          "attempt_time_scales": [a.time_scale for a in earlier] + [scale]})
    if args.json:
        import json

        from ..vocab.files import atomic_writer
        with atomic_writer(Path(args.json)) as fh:
            fh.write(json.dumps({"integration": cards}, indent=1, sort_keys=True) + "\n")
    print(f"integration: {sum(c == 0 for c in codes)} pass, {sum(c == 1 for c in codes)} fail, "
          f"{sum(c == 2 for c in codes)} inconclusive of {len(codes)}")
    return 1 if 1 in codes else (2 if 2 in codes else 0)


class _runtime_server:
    """One runtime server per ``crashlab integrate``: started before the first scenario, stopped when
    the last one ends, also on an error, on Ctrl-C and on SIGTERM (crashlab.cli turns both signals
    into an exception that passes through here)."""

    def __init__(self, runtime, out) -> None:
        self.runtime, self.out, self.server = runtime, out, None

    def __enter__(self):
        if self.runtime is None:
            return None
        from ..vocab.errors import UsageError

        work = self.out / f"runtime-{self.runtime.name}"
        try:
            work.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out: cannot make {work} for the runtime: {exc.strerror or exc}") from None
        self.server = self.runtime.start(work)
        return self.server

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.stop()
