"""The ``crashlab`` command: a thin layer over harness.conformance and harness.report.

Exit codes are listed in EXIT_CODES_HELP (printed by ``crashlab --help``).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from .errors import CrashlabError, InternalError, NondeterminismDetected, UsageError
from .report.commands import add_parsers as add_report_parsers, add_report_options, report_options

EXIT = {"pass": 0, "fail": 1, "unknown": 2}
EXIT_CODES_HELP = """exit codes:
  0  pass            every checked scenario passed (conformance: 20/20, no automatic failure)
  1  fail            an invariant was violated, a point was lost, or the adapter misbehaved
  2  inconclusive    nothing failed but some verdict is unknown
  3  usage error     bad arguments, bad --adapter SPEC, invalid scenario or trace file
  5  nondeterminism  replay produced a different trace for the same seed
  6  internal error  a bug in crashlab: please report it with the repro command
"""
ADAPTER_HELP = ("adapter under test: module:attribute (in-process Python, e.g. "
                "reference_impl:ReferenceAdapter) or exec:COMMAND (any language, JSON lines over "
                "stdin/stdout, see docs/protocol.md); default: the reference adapter")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 3, never 2 (2 means inconclusive)
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(3)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="crashlab", formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Deterministic fault-injection simulator and conformance harness for durable "
                            "agent runs with external effects (AR-08).",
                epilog=EXIT_CODES_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def cmd(name, help_, description):
        return sub.add_parser(name, help=help_, description=description, epilog=EXIT_CODES_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    r = cmd("run", "run one scenario and check it",
            "Run one scenario (a library id or a YAML path) against an adapter, write its JSONL trace, "
            "check every invariant and print the verdict.")
    r.add_argument("scenario", metavar="SCENARIO", help="library scenario id (see `crashlab list`) or a .yaml file")
    r.add_argument("--adapter", metavar="SPEC", help=ADAPTER_HELP)
    r.add_argument("--seed", type=int, metavar="N", help="override the scenario's seed")
    r.add_argument("--out", metavar="DIR", default="crashlab-out",
                   help="folder for the trace (default: crashlab-out)")
    r.add_argument("--report", metavar="DIR", help="also render the timeline report into DIR")
    add_report_options(r)

    c = cmd("conformance", "run the whole scenario library and score the adapter",
            "Run every library scenario against an adapter and print the twenty-point scorecard: "
            "classification 5, ownership 4, effect correctness 6, disposition 5.")
    c.add_argument("--adapter", metavar="SPEC", help=ADAPTER_HELP)
    c.add_argument("--seed", type=int, metavar="N", help="override every scenario's seed")
    c.add_argument("--json", metavar="PATH", help="write the results JSON (schema: docs/results.md)")
    c.add_argument("--report", metavar="DIR", help="render the HTML/Markdown/figure report into DIR")
    add_report_options(c)
    c.add_argument("--out", metavar="DIR", default="crashlab-out",
                   help="folder for the traces (default: crashlab-out)")
    c.add_argument("--tag", action="append", metavar="TAG", help="only scenarios with this tag (repeatable)")
    c.add_argument("--scenario", action="append", metavar="ID", help="only this scenario (repeatable)")
    c.add_argument("-q", "--quiet", action="store_true", help="print only the score line")

    k = cmd("check", "re-check a saved trace without re-running it",
            "Read a JSONL trace written by `crashlab run` and check every invariant again.")
    k.add_argument("trace", metavar="TRACE.jsonl")

    rp = cmd("replay", "re-run a trace's seed and confirm the identical trace",
             "The determinism self-check: re-run the scenario, adapter and seed named in the trace header "
             "and compare the new trace byte for byte.")
    rp.add_argument("trace", metavar="TRACE.jsonl")
    rp.add_argument("--adapter", metavar="SPEC", help="adapter to replay with (default: the one in the header)")

    rep = cmd("report", "render reports from saved traces and results, without re-running",
              "Render the timeline figures, the HTML report and the Markdown summary from saved JSONL traces "
              "(and a results JSON, if given).")
    rep.add_argument("inputs", nargs="+", metavar="PATH", help="trace files, folders of traces, or a results JSON")
    rep.add_argument("--out", metavar="DIR", default="crashlab-report", help="output folder (default: crashlab-report)")
    add_report_options(rep)

    ls = cmd("list", "list the scenario library", "List every library scenario: id, title and tags.")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--tag", action="append", metavar="TAG", help="only scenarios with this tag")

    ex = cmd("explore", "run generated fault schedules against an adapter",
             "Swarm testing: draw fault schedules (crash points, transport faults, pauses, duplicated and "
             "reordered events) with hypothesis, check every invariant, shrink the first failure and print "
             "it as a YAML scenario that reproduces it.")
    ex.add_argument("--adapter", metavar="SPEC", help=ADAPTER_HELP)
    ex.add_argument("--examples", type=int, default=1000, metavar="N", help="schedules to try (default 1000)")
    ex.add_argument("--seed", type=int, default=0, metavar="N", help="hypothesis seed (default 0)")
    ex.add_argument("--base", action="append", metavar="ID", help="base scenario(s) to mutate (default: all)")
    ex.add_argument("--save", metavar="PATH", help="write the shrunk failing scenario YAML here")
    add_report_parsers(cmd, ADAPTER_HELP)   # show, diff, compare
    return p


def _print_result(res, out=None) -> None:
    from .conformance import failure_message

    out = out or sys.stdout
    print(f"{res.id}: {res.verdict.upper()}  disposition: {res.disposition}", file=out)
    if res.verdict != "pass":
        print(failure_message(res), file=out)
    elif res.trace:
        print(f"  trace: {res.trace}", file=out)
    if res.verdict == "pass":
        print(f"  repro: {res.repro}", file=out)


def _cmd_run(args) -> int:
    from .conformance import run_one
    from .drivers import load_adapter
    from .scenario import resolve

    adapter = load_adapter(args.adapter)
    scenario = resolve(args.scenario)
    _, res = run_one(scenario, adapter, seed=args.seed, out_dir=Path(args.out))
    _print_result(res)
    if args.report:
        from .report import render_results
        where = render_results([res], out_dir=Path(args.report), **report_options(args))
        print(f"report: {where}")
    return EXIT[res.verdict]


def format_scorecard(card) -> str:
    """The per-scenario verdicts, then every rubric point kept or lost (with the scenario,
    invariant and evidence that lost it), then the verdict."""
    from .checks.rubric import render as render_rubric

    lines = [f"crashlab conformance  adapter: {card.adapter}  seed: "
             f"{card.seed if card.seed is not None else 'per scenario'}", ""]
    width = max((len(s.id) for s in card.scenarios), default=10)
    for s in card.scenarios:
        mark = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKN"}[s.verdict]
        bad = f"  {', '.join(sorted({v.invariant for v in s.violations}))}" if s.violations else ""
        lines.append(f"  {mark}  {s.id:<{width}}  {s.disposition}{bad}")
    lines.append("")
    lines.append(render_rubric(card))
    lines.append("")
    lines.append(f"verdict: {card.verdict.upper()}")
    return "\n".join(lines)


def _cmd_conformance(args) -> int:
    from .conformance import run_suite
    from .drivers import load_adapter
    from .scenario import library

    adapter = load_adapter(args.adapter)
    scenarios = library()
    if args.tag:
        scenarios = [s for s in scenarios if set(args.tag) & set(s.tags)]
    if args.scenario:
        known = {s.id for s in scenarios}
        missing = [i for i in args.scenario if i not in known]
        if missing:
            raise UsageError(f"unknown scenario id(s): {', '.join(missing)}; `crashlab list` shows every id")
        scenarios = [s for s in scenarios if s.id in set(args.scenario)]
    if not scenarios:
        raise UsageError("no scenario matches the given --tag/--scenario filters")
    out_dir = Path(args.out)
    card = run_suite(adapter, scenarios, seed=args.seed, out_dir=out_dir)
    if args.quiet:
        print(f"{card.adapter}: {card.total}/{card.max} {card.verdict}")
    else:
        print(format_scorecard(card))
        print(f"traces: {out_dir}/")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(card.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"results: {path}")
    if args.report:
        from .report import render_scorecard
        where = render_scorecard(card, out_dir=Path(args.report), **report_options(args))
        print(f"report: {where}")
    return EXIT[card.verdict]


def _cmd_check(args) -> int:
    from .checks import check_trace
    from .trace import read_jsonl

    events = read_jsonl(args.trace)
    res = check_trace(events, trace_path=args.trace)
    head = events[0]
    from dataclasses import replace
    res = replace(res, seed=head.get("seed", 0),
                  repro=shlex.join(["crashlab", "run", str(head.get("source") or head.get("scenario")),
                                    "--adapter", str(head.get("adapter")), "--seed", str(head.get("seed"))]))
    _print_result(res)
    return EXIT[res.verdict]


def _cmd_replay(args) -> int:
    from .runner import run_scenario
    from .scenario import resolve
    from .trace import read_jsonl

    path = Path(args.trace)
    events = read_jsonl(path)
    head = events[0]
    source = head.get("source")
    scenario = resolve(source if source and Path(source).exists() else head["scenario"])
    adapter = args.adapter or head["adapter"]
    fresh = run_scenario(scenario, adapter, head["seed"]).to_jsonl()
    original = path.read_text(encoding="utf-8")
    if fresh == original:
        print(f"identical: {len(events)} events, seed {head['seed']}, {len(original)} bytes")
        return 0
    old_lines, new_lines = original.splitlines(), fresh.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b),
                 min(len(old_lines), len(new_lines)))
    raise NondeterminismDetected(
        f"{path}: replay differs from line {first + 1} "
        f"(saved {len(old_lines)} lines, replayed {len(new_lines)})",
        seed=head["seed"], step=first,
        hint="the adapter or the scenario changed since the trace was written, or something reads "
             "the wall clock or global randomness")


def _cmd_report(args) -> int:
    from .report import render_inputs

    where = render_inputs([Path(p) for p in args.inputs], out_dir=Path(args.out), **report_options(args))
    print(f"report: {where}")
    return 0


def _cmd_list(args) -> int:
    from .scenario import library

    scenarios = library()
    if args.tag:
        scenarios = [s for s in scenarios if set(args.tag) & set(s.tags)]
    if args.json:
        print(json.dumps([{"id": s.id, "title": s.title, "tags": list(s.tags)} for s in scenarios], indent=2))
        return 0
    width = max((len(s.id) for s in scenarios), default=2)
    for s in scenarios:
        print(f"{s.id:<{width}}  {s.title}  [{', '.join(s.tags)}]")
    return 0


def _cmd_explore(args) -> int:
    from .explore import explore

    return explore(adapter=args.adapter, examples=args.examples, seed=args.seed, bases=args.base,
                   save=args.save)


COMMANDS = {"run": _cmd_run, "conformance": _cmd_conformance, "check": _cmd_check, "replay": _cmd_replay,
            "report": _cmd_report, "list": _cmd_list, "explore": _cmd_explore}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return (COMMANDS.get(args.command) or args.handler)(args)
    except CrashlabError as exc:
        print(f"crashlab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("crashlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `crashlab list | head`: the reader went away; not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        err = InternalError(f"{type(exc).__name__}: {exc}",
                            hint="this is a bug in crashlab; please report it with the command you ran "
                                 "(set CRASHLAB_DEBUG=1 to see the traceback)")
        import os
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        print(f"crashlab: internal error: {err}", file=sys.stderr)
        return InternalError.exit_code


if __name__ == "__main__":
    sys.exit(main())
