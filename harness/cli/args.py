"""The ``crashlab`` command line as argparse reads it: every command's options, their types
and help, and the exit codes ``crashlab --help`` lists. crashlab.cli runs what it parses.
"""
from __future__ import annotations

import argparse
import sys

from ..report.commands import add_parsers as add_report_parsers, add_report_options

EXIT_CODES_HELP = """exit codes:
  0  pass            every checked scenario passed (conformance: 20/20, every rubric point exercised
                     and kept, no automatic failure)
  1  fail            an invariant was violated, a point was lost, or the adapter misbehaved
  2  inconclusive    nothing failed but some verdict is unknown (conformance: or some rubric point
                     was not exercised by the selected scenarios; it is named, never kept)
  3  usage error     bad arguments, bad --adapter SPEC, invalid scenario or trace file, an output path
                     that names an input or another output (refused before anything runs); an output
                     another process swapped or changed before it was reported; a .pth file or
                     sitecustomize no installed package lists (CRASHLAB_ALLOW_SITE_FILE accepts one)
  4  out of room     the disk filled up or file descriptors ran out (ENOSPC, EDQUOT, EFBIG, EMFILE,
                     ENFILE): what was not written is named, and no verdict is claimed
  5  nondeterminism  replay produced a different trace for the same seed
  6  internal error  a bug in crashlab: please report it with the repro command
  130, 143           interrupted by SIGINT (Ctrl-C) or SIGTERM: finished traces and partial results are written
Exit 0 means every selected scenario ran and passed; anything else is never 0, even when the
reader of standard output went away (`crashlab conformance | head`).

adapter limits (docs/protocol.md): a request line or in-process call of at most 1 MiB, nested at most 64
levels, integers within +-(2**63 - 1), finite numbers; 10 s of real time to send a request or take a reply;
5,000 port calls per worker; 4 GiB of address space per adapter process; a trace of 200,000 events or
8 MiB per run; 300 s of real time per run (--run-timeout). Anything beyond is a recorded adapter fault of
that scenario, and the suite goes on.
"""
ADAPTER_HELP = ("adapter under test: module:attribute (in-process Python, e.g. "
                "crashlab.reference_impl:ReferenceAdapter), exec:COMMAND (any language, JSON lines over "
                "stdin/stdout, see docs/protocol.md), or wire:module:attribute (a Python adapter over the "
                "wire, one forked process per worker from a warm server); default: the reference adapter")

SERVICES_HELP = ("a services profile (as `crashlab probe` writes it): its fields replace those of the scenario's "
                 "services of the same name; the scenarios it touched are named (docs/probe.md)")


def _seed(text: str) -> int:
    from ..scenario.format import SEED_MAX

    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text[:40]} is outside 0..{SEED_MAX} (2**53 - 1)")
    return value


def _count(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive count")
    return value


def _jobs(p: argparse.ArgumentParser, same: str, what: str = "worker processes") -> None:
    p.add_argument("-j", "--jobs", type=_count, metavar="N", help=f"{what} (default: the machine's cores); {same}")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text[:40]} is outside 0 (excluded) to 86400 seconds")
    return value


def _isolation(p: argparse.ArgumentParser) -> None:
    from ..run.isolate import add_option

    add_option(p)
    p.add_argument("--in-process", action="store_true",
                   help="debugging: run a Python adapter inside crashlab's own process instead of in worker "
                        "processes, one run at a time; the adapter can then end crashlab or change its verdict, so "
                        "the results say 'untrusted' (docs/protocol.md, Trust boundary)")
    p.add_argument("--run-timeout", type=_seconds, default=300.0, metavar="SECONDS",
                   help="wall-clock bound of one run of one scenario, whatever the adapter does (default 300); "
                        "beyond it the run ends with a run_timeout adapter fault")
    p.add_argument("--fresh-processes", action="store_true",
                   help="start a new process for every worker of an exec: adapter, even one that accepts "
                        "reuse (docs/protocol.md, Reused processes)")


def _suite_options(p: argparse.ArgumentParser, out_help: str) -> None:
    p.add_argument("--adapter", metavar="SPEC", help=ADAPTER_HELP)
    p.add_argument("--seed", type=_seed, metavar="N", help="override every scenario's seed (0 to 2**53 - 1)")
    p.add_argument("--json", metavar="PATH", help="write the results JSON (schema: docs/results.md)")
    p.add_argument("--out", metavar="DIR", default="crashlab-out",
                   help=f"folder for {out_help} (default: crashlab-out)")
    p.add_argument("--tag", action="append", metavar="TAG",
                   help="the scenarios with this tag (repeatable; with --scenario, both sets are run)")
    p.add_argument("--scenario", action="append", metavar="ID",
                   help="this scenario (repeatable; with --tag, it is run along with the tagged ones)")
    p.add_argument("--scenarios", action="append", metavar="PATH",
                   help="your own scenario file, or a folder of *.yaml files, instead of the library (repeatable)")
    p.add_argument("--with-library", action="store_true", help="with --scenarios: run the library too")
    _jobs(p, "the results are the same for any N")
    p.add_argument("--shard", metavar="I/N", help="run only the I-th of N deterministic shares of the runs; "
                                                   "join the shares' results with `crashlab merge`")
    p.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="where runs execute: local processes, or a Dask cluster (pip install 'crashlab[dask]')")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --executor dask: the scheduler, e.g. tcp://10.0.0.5:8786 (default: a local cluster)")
    p.add_argument("--batch", type=_count, default=16, metavar="N", help="runs per task (default 16)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, and print only the score line")
    p.add_argument("--rules", metavar="VERSION",
                   help="the rule set your project certified against (`crashlab --version` names the installed "
                        "one): run only if this crashlab judges by it, else stop and say what changed since")
    _isolation(p)


def _version() -> str:
    from ..rules.ruleset import CURRENT, RULES, package_version

    return (f"crashlab {package_version()} (rule set {RULES}: {CURRENT.checks} checks, {CURRENT.scenarios} library "
            "scenarios; CHANGELOG.md says what changed)")


def check_exec_command(adapter) -> None:
    """An exec: adapter whose program cannot be found is a usage error before anything runs (exit 3),
    not a failed run in every scenario with the reason only in each trace."""
    import os
    import shutil

    from ..vocab.errors import UsageError

    program = adapter.command[0]
    found = (os.path.isfile(program) and os.access(program, os.X_OK)) if os.sep in program \
        else shutil.which(program) is not None
    if not found:
        raise UsageError(f"--adapter {adapter.text!r}: cannot run {program!r}: no such command (not on PATH, not an "
                         "executable); give a command on PATH or a path to an executable, e.g. "
                         "'exec:python3 my_adapter.py'")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 3, never 2 (2 means inconclusive)
        self.print_usage(sys.stderr)
        from .terminal import printable

        print(f"{self.prog}: error: {printable(message)}", file=sys.stderr)
        raise SystemExit(3)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="crashlab", formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Deterministic fault-injection simulator and conformance harness for durable "
                            "agent runs with external effects (AR-08).",
                epilog=EXIT_CODES_HELP)
    p.add_argument("--version", action="version", version=_version(),
                   help="print crashlab's version and the rule set it judges by, and exit")
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
    r.add_argument("--seed", type=_seed, metavar="N", help="override the scenario's seed (0 to 2**53 - 1)")
    r.add_argument("--out", metavar="DIR", default="crashlab-out",
                   help="folder for the trace (default: crashlab-out)")
    r.add_argument("--report", metavar="DIR", help="also render the timeline report into DIR")
    r.add_argument("-v", "--verbose", action="store_true",
                   help="show what the adapter process wrote to standard error (its last lines per worker), "
                        "also when the run passes; a failing run always shows it")
    r.add_argument("--services", metavar="PROFILE.yaml", help=SERVICES_HELP)
    _jobs(r, "the report is the same for any N", "with --report: worker processes drawing the figures")
    _isolation(r)
    add_report_options(r)

    c = cmd("conformance", "run the whole scenario library and score the adapter",
            "Run every library scenario against an adapter and print the twenty-point scorecard: "
            "classification 5, ownership 4, effect correctness 6, disposition 5. A point is kept only when "
            "some selected scenario exercised it (docs/rubric.md): a subset (--tag, --scenario, --scenarios "
            "without --with-library) that leaves points not exercised names them and is inconclusive (exit 2).")
    _suite_options(c, "traces")
    c.add_argument("--services", metavar="PROFILE.yaml", help=SERVICES_HELP)
    c.add_argument("--report", metavar="DIR", help="render the HTML/Markdown/figure report into DIR")
    add_report_options(c)

    sw = cmd("sweep", "the crash matrix: a crash before and after every port call of every scenario",
             "The crash laboratory, exhaustively: run each selected scenario once to find the adapter's port "
             "calls, then once per crash point (before and after every call; with --double, two crashes at "
             "every durable call), check every invariant and score the whole as one suite. Each distinct "
             "failure is written to the findings folder as it is found, with a repro command.")
    _suite_options(sw, "the traces and scenario files of failing runs, and the journal")
    sw.add_argument("--services", metavar="PROFILE.yaml", help=SERVICES_HELP)
    sw.add_argument("--double", action="store_true", help="two crashes at every durable call instead of one")
    sw.add_argument("--findings", metavar="DIR", help="folder for the findings (default: OUT/findings)")
    sw.add_argument("--keep-traces", choices=("failing", "all", "none"), default="failing",
                    help="which runs' traces to write (default: failing)")
    sw.add_argument("--resume", action="store_true",
                    help="skip the runs an interrupted sweep with the same options finished (OUT/sweep.journal.jsonl)")

    mg = cmd("merge", "join the results JSON of the shards of one run",
             "Join the results JSON written by `--shard I/N` runs (conformance or sweep) into the results of "
             "the unsharded run, and print its scorecard.")
    mg.add_argument("results", nargs="+", metavar="RESULTS.json",
                    help="the results JSON of every shard (each written with --shard I/N --json PATH)")
    mg.add_argument("--json", metavar="PATH", help="write the merged results JSON here")
    mg.add_argument("-q", "--quiet", action="store_true", help="print only the score line")

    k = cmd("check", "re-check a saved trace without re-running it",
            "Read a JSONL trace written by `crashlab run` and check every invariant again.")
    k.add_argument("trace", metavar="TRACE.jsonl",
                   help="a JSONL trace crashlab wrote (run, conformance, sweep, integrate)")

    rp = cmd("replay", "re-run a trace's seed and confirm the identical trace",
             "The determinism self-check: re-run the scenario, adapter and seed named in the trace header "
             "and compare the new trace byte for byte.")
    rp.add_argument("trace", metavar="TRACE.jsonl", help="a JSONL trace crashlab wrote (run, conformance, sweep)")
    rp.add_argument("--adapter", metavar="SPEC",
                    help="adapter to replay with; a trace's own adapter runs only when it is crashlab's "
                         "reference or gallery adapter, or with --trust-adapter")
    rp.add_argument("--trust-adapter", action="store_true",
                    help="run the adapter the trace header names, whatever it is (only for traces you trust)")
    _isolation(rp)

    rep = cmd("report", "render reports from saved traces and results, without re-running",
              "Render the timeline figures, the HTML report and the Markdown summary from saved JSONL traces "
              "(and a results JSON, if given).")
    rep.add_argument("inputs", nargs="+", metavar="PATH", help="trace files, folders of traces, or a results JSON")
    rep.add_argument("--out", metavar="DIR", default="crashlab-report", help="output folder (default: crashlab-report)")
    _jobs(rep, "the report is the same for any N", "worker processes drawing the figures")
    add_report_options(rep)

    ls = cmd("list", "list the scenario library", "List every library scenario: id, title and tags.")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--tag", action="append", metavar="TAG", help="only scenarios with this tag")

    ex = cmd("explore", "run generated fault schedules against an adapter",
             "Swarm testing: draw fault schedules (crash points, transport faults, pauses, duplicated and "
             "reordered events) with hypothesis, check every invariant, shrink the first failure and print "
             "it as a YAML scenario that reproduces it.")
    ex.add_argument("--adapter", metavar="SPEC", help=ADAPTER_HELP)
    ex.add_argument("--examples", type=_count, default=1000, metavar="N", help="schedules to try (default 1000)")
    ex.add_argument("--seed", type=_seed, default=0, metavar="N", help="hypothesis seed (default 0)")
    ex.add_argument("--base", action="append", metavar="ID", help="base scenario(s) to mutate (default: all)")
    ex.add_argument("--save", metavar="PATH", help="write the shrunk failing scenario YAML here")
    ex.add_argument("--findings", metavar="DIR", default="crashlab-findings",
                    help="folder for every distinct failure, written as found, and the journal "
                         "(default: crashlab-findings)")
    ex.add_argument("--resume", action="store_true", help="skip the chunks an interrupted run with the same "
                                                          "options finished (FINDINGS/explore.journal.jsonl)")
    ex.add_argument("--json", metavar="PATH", help="write every chunk's outcome as JSON (joinable with merge)")
    _jobs(ex, "the schedules tried are the same")
    ex.add_argument("--shard", metavar="I/N", help="explore only the I-th of N deterministic shares of the chunks")
    ex.add_argument("--executor", choices=("local", "dask"), default="local", help="local processes or Dask")
    ex.add_argument("--scheduler", metavar="ADDRESS", help="with --executor dask: the scheduler address")
    ex.add_argument("--batch", type=_count, default=1, metavar="N", help="chunks per task (default 1)")
    ex.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    from ..workshop.cli import add_workshop_parser
    add_workshop_parser(sub, EXIT_CODES_HELP)
    add_report_parsers(cmd, ADAPTER_HELP)   # show, diff, compare, export
    from ..integrate.cli import add_parsers as add_integration_parsers
    add_integration_parsers(cmd)            # sandbox serve, integrate
    from ..probe.cli import add_parser as add_probe_parser
    add_probe_parser(cmd)                   # probe
    return p
