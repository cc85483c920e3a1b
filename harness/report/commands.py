"""The report-side commands of ``crashlab`` (show, diff, compare) and the report options
(--no-answers, --linear), registered by crashlab.cli.args with a few lines. Importing this module
is cheap: the handlers import their modules when they run."""
from __future__ import annotations

import argparse

from ..vocab.events import LANES as ALL_LANES

LANES = tuple(lane for lane in ALL_LANES if lane != "meta")  # the lanes `crashlab show` can filter on


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that renders a report."""
    parser.add_argument("--no-answers", action="store_true",
                        help="hide teaching cards and adapter names (for workshops); repro lines read the "
                             "adapter from $CRASHLAB_ADAPTER")
    if not any("--quiet" in a.option_strings for a in parser._actions):
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--report-failures", action="store_true",
                        help="draw figures only for scenarios that did not pass (most of a report's time goes "
                             "to drawing figures); every scenario still gets its page")
    parser.add_argument("--linear", action="store_true",
                        help="figures on a plain linear time axis (default: long quiet gaps are compressed, "
                             "marked with break marks)")
    parser.add_argument("--window", metavar="FROM..TO", type=_window,
                        help="draw only this stretch of each trace, on a linear axis: clock times "
                             "(10:04..10:04:01.500) or durations after the scenario's origin (4m..4m1s)")
    parser.add_argument("--slides", action="store_true",
                        help="projector-ready figures: 1920 x 1080 px, large type, the legend of what is drawn; "
                             "each page opens on its figure")


def _window(text: str):
    """--window FROM..TO, read when the command line is: a malformed one stops before anything runs."""
    from ..vocab.errors import UsageError
    from .window import parse_window

    try:
        return parse_window(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--window {text}: ")) from None


def report_options(args: argparse.Namespace) -> dict:
    """Keyword arguments for crashlab.report's render functions (with a progress bar of the figures,
    silent with -q). A command with ``--jobs`` draws the figures in that many processes too."""
    return {"no_answers": bool(getattr(args, "no_answers", False)), "linear": bool(getattr(args, "linear", False)),
            "window": getattr(args, "window", None), "slides": bool(getattr(args, "slides", False)),
            "progress": figure_progress(quiet=bool(getattr(args, "quiet", False))),
            "figures": "failures" if getattr(args, "report_failures", False) else "all",
            "jobs": getattr(args, "jobs", None)}


def figure_progress(*, quiet: bool = False, stream=None):
    """A progress display that counts figures drawn. Drawing a figure is not a verdict, so its
    status line says nothing of failures (a failing adapter's report never logs "0 failing")."""
    from .progress import Progress

    class Figures(Progress):
        def status(self, now: float | None = None) -> str:
            return super().status(now).rsplit(", ", 1)[0]

    return Figures(0, "figures", quiet=quiet, stream=stream)


def add_parsers(cmd, adapter_help: str) -> None:
    """Register show, diff, compare and export; ``cmd(name, help, description)`` makes a subparser."""
    p = cmd("show", "print a trace as a readable text timeline",
            "Print a saved JSONL trace one event per line: time, lane, worker and what happened; a port "
            "call is printed with its result.")
    p.add_argument("trace", metavar="TRACE.jsonl")
    p.add_argument("--lane", action="append", choices=LANES, metavar="LANE",
                   help=f"only this lane (repeatable): {', '.join(LANES)}")
    p.add_argument("--worker", metavar="W", help="only this worker (run-82/w2, or just w2)")
    p.add_argument("--around", type=int, metavar="SEQ", help="only the events around this sequence number")
    p.add_argument("--context", type=int, default=12, metavar="N", help="events each side of --around (default 12)")
    p.add_argument("--all", action="store_true", help="also clock reads, random draws and empty inbox polls")
    p.set_defaults(handler=_show)

    p = cmd("diff", "two traces of one scenario side by side, with the first divergence marked",
            "Set two saved traces of the same scenario (typically the reference and a candidate, same seed) "
            "side by side, event by event; mark the first divergence and compare what each run ended with. "
            "Exit 0 when they do not diverge, 1 when they do.")
    p.add_argument("trace_a", metavar="TRACE_A.jsonl")
    p.add_argument("trace_b", metavar="TRACE_B.jsonl")
    p.add_argument("--width", type=int, metavar="N", help="line width (default: the terminal's, at least 120)")
    p.set_defaults(handler=_diff)

    p = cmd("compare", "run two implementations on the same scenarios and list where their outcomes differ",
            "Run two adapters on the same library scenarios (and, with --examples N, the same generated fault "
            "schedules) and report every scenario where their dispositions, remote effects or next owners "
            "differ. Exit 0 when none differs, 1 otherwise.")
    p.add_argument("--adapter", action="append", metavar="SPEC", help=adapter_help + " (give exactly two)")
    p.add_argument("--results", action="append", metavar="PATH",
                   help="instead of --adapter: two results JSON (older first); list the points, scenarios and "
                        "checks that moved between them and why (a rule new or changed since the older rule set)")
    p.add_argument("--scenario", action="append", metavar="ID",
                   help="this scenario (repeatable; with --tag, it is run along with the tagged ones)")
    p.add_argument("--tag", action="append", metavar="TAG",
                   help="the scenarios with this tag (repeatable; with --scenario, both sets are run)")
    p.add_argument("--seed", type=int, metavar="N", help="override every scenario's seed")
    p.add_argument("--examples", type=int, default=0, metavar="N",
                   help="also N generated fault schedules, the same for both adapters (default 0)")
    p.add_argument("--schedule-seed", type=int, default=0, metavar="N",
                   help="seed of the generated schedules (default 0)")
    p.add_argument("--save", metavar="DIR", help="write each differing generated schedule here as YAML")
    from ..run.isolate import add_option
    add_option(p)
    p.set_defaults(handler=_compare)

    p = cmd("export", "convert a trace for other viewers: Perfetto / chrome://tracing, or OpenTelemetry",
            "Write a saved JSONL trace in another format: chrome (the Chrome Trace Event format, for "
            "ui.perfetto.dev and chrome://tracing: the three timelines as processes, workers, records and keys "
            "as threads, calls as slices, faults as instants, a flow from each send to the effect it caused) "
            "or otel (OpenTelemetry spans as OTLP/JSON, on the scenario clock).")
    p.add_argument("trace", metavar="TRACE.jsonl")
    p.add_argument("--format", required=True, metavar="FORMAT", help="chrome or otel")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: standard output)")
    p.set_defaults(handler=_export)


def _show(args) -> int:
    from .text import cmd_show

    return cmd_show(args)


def _diff(args) -> int:
    from .compare import cmd_diff

    return cmd_diff(args)


def _export(args) -> int:
    from .export import cmd_export

    return cmd_export(args)


def _compare(args) -> int:
    from .compare import cmd_compare

    if args.results:
        import sys

        from ..vocab.errors import UsageError
        from .movement import cmd

        if args.adapter:
            raise UsageError("compare takes two --adapter or two --results, not both")
        return cmd(args.results, sys.stdout)

    return cmd_compare(args)
