# layer faces: the command line, the pytest plugin, the workshop.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, integrate, runtimes, probe, report, workshop (only floors below it).
"""The ``crashlab`` command: a thin layer over crashlab.run.conformance and crashlab.report.

Each command is a function of the arguments crashlab.cli.args parses; ``main`` runs one and
turns whatever happens into an exit code (listed in crashlab.cli.args.EXIT_CODES_HELP, printed
by ``crashlab --help``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..vocab.errors import CrashlabError, InternalError, NondeterminismDetected, UsageError, clip
from ..vocab.files import check_written, written_in
from .args import parser
from ..report.commands import report_options
from ..report.scorecard import format_scorecard
from .terminal import printable, refusal
from .outputs import OUTPUT_OPTIONS, _plan_outputs  # noqa: F401 (moved there)

EXIT = {"pass": 0, "fail": 1, "unknown": 2}


def _print_result(res, out=None) -> None:
    from ..run.conformance import failure_message

    out = out or sys.stdout
    print(f"{res.id}: {res.verdict.upper()}  disposition: {res.disposition}", file=out)
    if res.verdict != "pass":
        print(failure_message(res), file=out)
        return
    for line in ([f"trace: {res.trace}"] if res.trace else []) + [f"note: {n}" for n in res.notes] + [f"repro: {res.repro}"]:
        print(f"  {line}", file=out)   # a pass's notes too (what it was not judged by, under --services)


def _hide_adapter(res):
    """The result as a workshop prints it: the repro line reads the adapter from the environment."""
    from dataclasses import replace

    from ..report.view import Item, repro

    return replace(res, repro=repro(Item(result=res, events=None, name=res.id), no_answers=True))


def _limits(args):
    from ..run.runner import Limits

    return Limits(run_wall_s=args.run_timeout, reuse=not getattr(args, "fresh_processes", False))


def _adapter(args, spec=None):
    """The --adapter SPEC; a Python adapter is imported here only with --in-process."""
    from .args import check_exec_command
    from ..run.drivers import load_adapter

    if args.in_process:
        from ..run.isolate import refuse_in_process
        refuse_in_process()
        print("crashlab: --in-process: the adapter runs inside crashlab's own process; results are marked "
              "untrusted", file=sys.stderr)
    adapter = load_adapter(spec if spec is not None else args.adapter, import_code=args.in_process, in_process=args.in_process)
    if adapter.kind == "exec":
        check_exec_command(adapter)   # a program that is not there: exit 3 now, not a fault in every trace
    if not args.in_process:
        from ..run.sweep import check_imports
        check_imports(adapter)  # a worker process imports it: a spec that does not import is exit 3 now
    return adapter


def _cmd_run(args) -> int:
    from ..run.conformance import run_checked
    from ..vocab.files import check_output_dir
    from ..scenario.loader import resolve

    out = check_output_dir(args.out, "--out")
    report = check_output_dir(args.report, "--report") if args.report else None
    adapter = _adapter(args)
    scenario = resolve(args.scenario)
    if args.services:
        from ..probe.profile import with_services
        scenario = with_services([scenario], args.services)[0]
    if report and not getattr(args, "no_answers", False):
        from ..workshop.facilitator import card_shown
        args.no_answers = card_shown(scenario.id, f"crashlab run {scenario.id} --report", Path.cwd())
    tails: dict[str, str] = {}
    res = run_checked(scenario, adapter, seed=args.seed, out_dir=out, limits=_limits(args), in_process=args.in_process,
                      stderr=tails)
    if args.services:  # the repro command names the profile too, the note what it set aside
        from ..probe.profile import profiled, unjudged
        res = profiled(res, args.services, unjudged([resolve(args.scenario)], [scenario]))
    check_written([res.trace])   # still the trace crashlab wrote, before it is named
    _print_result(_hide_adapter(res) if getattr(args, "no_answers", False) else res)
    if tails and (res.verdict != "pass" or args.verbose):
        _print_stderr(tails)
    if report:
        from ..report import render_results
        where = render_results([res], out_dir=report, **report_options(args))
        check_written(written_in(report))
        print(f"report: {where}")
    return EXIT[res.verdict]


#: How much of each worker's standard error ``crashlab run`` shows: its last lines, clipped.
STDERR_LINES, STDERR_CHARS = 20, 2000


def _print_stderr(tails: dict) -> None:
    """What each worker's adapter process wrote to standard error, bounded (the last lines)."""
    for worker, text in tails.items():
        lines = text.rstrip().split("\n")   # a carriage return is shown (\x0d), not taken for a line break
        shown = "\n".join(lines[-STDERR_LINES:])[-STDERR_CHARS:]
        more = f" (last {STDERR_LINES} of {len(lines)} lines)" if len(lines) > STDERR_LINES else ""
        print(f"adapter standard error, {printable(worker)}{more}:", file=sys.stderr)
        print("  " + printable(shown).replace("\n", "\n  "), file=sys.stderr)


def _select(args) -> list:
    from ..run.conformance import collect_scenarios
    from ..scenario.loader import library

    if args.with_library and not args.scenarios:   # a filter (--scenario, --tag) picks from the library
        raise UsageError("--with-library adds the library to --scenarios FILE|DIR, and there is none here")
    scenarios = library() if not args.scenarios or args.with_library else []
    if args.scenarios:
        own = collect_scenarios(args.scenarios)
        clash = sorted({s.id for s in own} & {s.id for s in scenarios})
        if clash:
            raise UsageError(f"--scenarios: {', '.join(clash[:5])} already name library scenarios; give your "
                             "scenarios other ids, or drop --with-library")
        scenarios = scenarios + own
    if args.scenario:
        known = {s.id for s in scenarios}
        missing = [i for i in args.scenario if i not in known]
        if missing:
            raise UsageError(f"unknown scenario id(s): {', '.join(clip(m, 200) for m in missing)}; "
                             "`crashlab list` shows every id")
    if args.tag or args.scenario:   # every --tag and --scenario adds scenarios: they unite
        tags, ids = set(args.tag or ()), set(args.scenario or ())
        scenarios = [s for s in scenarios if s.id in ids or tags & set(s.tags)]
    if not scenarios:
        raise UsageError("no scenario matches the given --tag/--scenario filters")
    return scenarios


def _executor(args):
    from ..run.sweep import default_jobs, make_executor

    if getattr(args, "in_process", False) or args.executor == "local":
        from ..run.sweep import LocalExecutor
        return LocalExecutor(args.jobs or default_jobs(), args.batch, in_process=getattr(args, "in_process", False),
                             limits=_limits(args) if hasattr(args, "run_timeout") else None)
    return make_executor(args.executor, jobs=args.jobs or default_jobs(), scheduler=args.scheduler,
                         batch=args.batch)


def _scored(args, what: str, run, *, report_dir=None) -> int:
    """Run a scored suite (``run(executor, shard, progress)``), print and save its scorecard;
    on an interrupt, print and save what finished (marked partial) and re-raise."""
    from ..vocab.errors import Interrupted
    from ..vocab.files import atomic_write_text, check_output_dir, check_output_file
    from ..report.progress import Progress
    from ..run.sweep import Shard

    out_dir = check_output_dir(args.out, "--out")
    json_path = check_output_file(args.json, "--json") if args.json else None
    shard = Shard.parse(args.shard) if args.shard else None
    executor = _executor(args)
    progress = Progress(0, what, quiet=args.quiet)
    interrupted = None
    try:
        card = run(executor, shard, progress, out_dir)
    except Interrupted as exc:
        card, interrupted = getattr(exc, "partial", None), exc
        if card is None:
            raise
    finally:
        progress.close()
        if hasattr(executor, "close"):
            executor.close()
        _contain()  # nothing an adapter started outlives the suite to rewrite what is written next
    # the traces and findings listed are still the files crashlab wrote, or nothing is reported
    listed = [s.trace for s in card.scenarios]
    check_written(listed + written_in(card.extra.get("findings")))
    if json_path:   # first: a scorecard is never printed for results that could not be written
        atomic_write_text(json_path, json.dumps(card.to_json(), indent=2, sort_keys=True) + "\n")
        check_written([json_path])
    if args.quiet:
        print(f"{card.adapter}: {card.score_text()} {card.verdict}"
              + (f" (shard {shard.index}/{shard.count})" if shard else ""))
    else:
        print(format_scorecard(card, no_answers=bool(getattr(args, "no_answers", False))))
        if shard:
            print(f"shard {shard.index}/{shard.count}: this score covers this share of the runs only; "
                  "`crashlab merge` joins the shards' results JSON")
        print(f"traces: {out_dir}/")
    from ..probe.profile import services_line
    if services_line(card):   # a run under --services says which expectations it set aside
        print(services_line(card))
    if json_path:
        print(f"results: {json_path}" + (" (partial)" if interrupted else ""))
    if interrupted:
        done = card.extra["partial"]
        seed = f"seed {args.seed}" if args.seed is not None else "each scenario's own seed"
        again = "run the same command with --resume to continue" if what == "sweep" else \
            "run the same command again to start over"
        print(f"crashlab: interrupted after {done['done']} of {done['planned']} runs ({seed}); the traces of "
              f"the finished ones are in {out_dir}/; {again}", file=sys.stderr)
        raise interrupted
    if report_dir:
        from ..report import render_scorecard
        check_written(listed)
        where = render_scorecard(card, out_dir=report_dir, **report_options(args))
        check_written(written_in(report_dir))
        print(f"report: {where}")
    if card.extra.get("internal_errors"):
        return InternalError.exit_code
    return EXIT[card.verdict]


def _cmd_conformance(args) -> int:
    from ..run.conformance import run_suite
    from ..vocab.files import check_output_dir
    from ..rules.ruleset import check_pinned, selection

    rules = check_pinned(args.rules) if args.rules is not None else None
    report_dir = check_output_dir(args.report, "--report") if args.report else None
    adapter = _adapter(args)
    scenarios = before = _select(args)
    if args.services:
        from ..probe.profile import profiled, unjudged, with_services
        scenarios = with_services(scenarios, args.services)
    later = selection(rules)[1]      # an older rule set runs without the scenarios added since
    named = [i for i in args.scenario or () if i in later]
    if named or (later and all(s.id in later for s in scenarios)):
        raise UsageError(f"--rules {rules}: {', '.join(named) or 'no selected scenario'} "
                         f"{'is' if len(named) == 1 else 'are'} not in rule set {rules} (added since: CHANGELOG.md)")

    def run(executor, shard, progress, out_dir):
        kept = [s for s in scenarios if s.id not in later]
        progress.total = len(shard.select(kept) if shard else kept)
        card = run_suite(adapter, scenarios, seed=args.seed, out_dir=out_dir, executor=executor, shard=shard,
                         limits=_limits(args), progress=lambda r: progress.update(failed=r.verdict != "pass"),
                         rules=rules)
        return profiled(card, args.services, unjudged(before, scenarios)) if args.services else card
    return _scored(args, "conformance", run, report_dir=report_dir)


def _cmd_sweep(args) -> int:
    from ..vocab.files import check_output_dir
    from ..run.sweep import sweep
    from ..rules.ruleset import RULES, check_pinned

    if args.rules is not None and check_pinned(args.rules) != RULES:
        raise UsageError(f"--rules {args.rules}: sweep judges by this crashlab's rule set ({RULES}) only; "
                         f"`crashlab conformance --rules {args.rules}` runs the older one")
    findings = check_output_dir(args.findings, "--findings") if args.findings else None
    adapter = _adapter(args)
    scenarios = _select(args)
    if args.services:   # the crash points are built from each scenario's document, the profile's services in it
        from ..probe.profile import with_services
        scenarios = with_services(scenarios, args.services)

    def run(executor, shard, progress, out_dir):
        card = sweep(adapter, scenarios, double=args.double, seed=args.seed, executor=executor, shard=shard,
                     out_dir=out_dir, findings_dir=findings, keep=args.keep_traces, resume=args.resume,
                     progress=progress)
        where = card.extra.get("findings")
        if any(s.verdict != "pass" for s in card.scenarios):
            print(f"findings: {where}/ (one scenario file per distinct failure, each with its repro command)",
                  file=sys.stderr)
        return card
    return _scored(args, "sweep", run)


def _explorations(paths: list[str]) -> list[tuple[str, dict]]:
    """The given files as explore outcomes (``--json`` of explore), or [] when they are results JSON."""
    out = []
    for name in paths:
        try:
            data = json.loads(Path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return []  # merge() reports what is wrong with it
        if not isinstance(data, dict) or data.get("kind") != "explore":
            if out:
                raise UsageError(f"{name}: not an explore outcome, unlike {out[0][0]}; merge one kind at a time")
            return []
        out.append((name, data))
    return out


def _cmd_merge(args) -> int:
    from ..checks.rubric import Contradicted
    from ..vocab.files import atomic_write_text, check_output_file
    from ..run.sweep import merge

    json_path = check_output_file(args.json, "--json") if args.json else None
    explorations = _explorations(args.results)
    if explorations:
        from ..run.explore import merge_explorations
        merged = merge_explorations(explorations)
        failures = [c for c in merged["chunks"] if c.get("failure") is not None]
        print(f"explore: {len(merged['chunks'])} chunks, {sum(c.get('tried', 0) for c in merged['chunks'])} "
              f"schedules, {len(failures)} chunk(s) with a failure")
        if json_path:
            atomic_write_text(json_path, json.dumps(merged, indent=2, sort_keys=True) + "\n")
            check_written([json_path])
            print(f"results: {json_path}")
        return 1 if failures else 0
    notes: list[str] = []         # verdicts taken from a shard's file, not re-checked against a trace
    try:
        card = merge([Path(p) for p in args.results], notes=notes)
    except Contradicted as exc:     # a shard its traces contradict: nothing written, every line of why
        return refusal(exc)
    for note in notes:
        print(f"crashlab: note: {printable(note)}", file=sys.stderr)
    if json_path:   # first: a scorecard is never printed for results that could not be written
        atomic_write_text(json_path, json.dumps(card.to_json(), indent=2, sort_keys=True) + "\n")
        check_written([json_path])
    if args.quiet:
        print(f"{card.adapter}: {card.score_text()} {card.verdict}")
    else:
        print(format_scorecard(card))
    if json_path:
        print(f"results: {json_path}")
    return InternalError.exit_code if card.extra.get("internal_errors") else EXIT[card.verdict]


def _cmd_check(args) -> int:
    from ..run.conformance import recheck_saved
    from ..world.trace import read_jsonl

    from ..rules.ruleset import note_for

    events = read_jsonl(args.trace)
    res = recheck_saved(events, args.trace)
    from ..integrate import is_integration

    if is_integration(events[0]):     # its verdict is its integration card's: the card, as integrate prints it
        from ..checks.card import judged

        print(judged(events).text())
        print(f"  trace: {args.trace}\n  repro: {res.repro}")
    else:
        _print_result(res)
    note = note_for(events[0].get("rules"), f"the trace {args.trace}")
    if note:
        print(f"note: {note}", file=sys.stderr)
    return EXIT[res.verdict]


#: Adapters shipped with crashlab: a trace naming one of these may be replayed without --trust-adapter.
SHIPPED_ADAPTER_MODULES = ("crashlab.reference_impl", "crashlab.gallery")


def _shipped(spec: str) -> bool:
    module, sep, attr = spec.partition(":")
    return (not spec.startswith(("exec:", "wire:")) and bool(sep and attr)
            and any(module == m or module.startswith(m + ".") for m in SHIPPED_ADAPTER_MODULES))


def _cmd_replay(args) -> int:
    import shlex

    from ..run.runner import run_scenario
    from ..scenario.loader import resolve
    from ..world.trace import read_jsonl

    path = Path(args.trace)
    events = read_jsonl(path)
    head = events[0]
    named = head["adapter"]
    if args.adapter is None and not args.trust_adapter and not _shipped(named):
        raise UsageError(f"{path}: the trace names the adapter {clip(named, 200)!r}; crashlab does not run an "
                         "adapter named by a trace unless you name it: "
                         f"crashlab replay {shlex.quote(str(path))} --adapter {shlex.quote(clip(named, 400))} "
                         "(or pass --trust-adapter)")
    source = head.get("source")
    scenario = resolve(source if isinstance(source, str) and Path(source).exists() else head["scenario"])
    adapter = _adapter(args, args.adapter or named)
    if args.in_process:
        fresh = run_scenario(scenario, adapter, head["seed"]).to_jsonl()
    else:
        from ..run.sweep import traced_once
        fresh = traced_once(scenario, adapter, head["seed"], _limits(args))
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
    from ..checks.rubric import Contradicted
    from ..vocab.files import check_output_dir
    from ..report import render_inputs
    from ..report.movement import whats_new

    out = check_output_dir(args.out, "--out")
    try:
        where = render_inputs([Path(p) for p in args.inputs], out_dir=out, **report_options(args))
    except Contradicted as exc:     # results their traces contradict: nothing written, every line of why
        return refusal(exc)
    check_written(written_in(out))
    print(f"report: {where}")
    for note in whats_new(args.inputs):
        print(f"what's new since your last run: {note}", file=sys.stderr)
    return 0


def _cmd_list(args) -> int:
    from ..scenario.loader import library

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


def _cmd_workshop(args) -> int:
    from ..workshop.cli import run

    return run(args)


def _cmd_explore(args) -> int:
    import shlex

    from ..vocab.errors import Interrupted
    from ..run.explore import explore
    from ..vocab.files import check_output_dir, check_output_file
    from ..report.progress import Progress
    from ..run.sweep import Shard
    from ..probe.profile import services_line

    if args.save:
        check_output_file(args.save, "--save")
    json_path = check_output_file(args.json, "--json") if args.json else None
    findings = check_output_dir(args.findings, "--findings")
    shard = Shard.parse(args.shard) if args.shard else None
    executor = _executor(args)
    try:
        return explore(adapter=args.adapter, examples=args.examples, seed=args.seed, bases=args.base,
                       save=args.save, executor=executor, shard=shard, findings_dir=findings, resume=args.resume,
                       progress=Progress(0, "explore", quiet=args.quiet), json_path=json_path)
    except Interrupted as exc:
        done, planned, tried, where = getattr(exc, "explored", (0, 0, 0, findings))
        again = ["crashlab", "explore", "--examples", str(args.examples), "--seed", str(args.seed),
                 "--findings", str(where), "--resume"]
        again += ["--adapter", args.adapter] if args.adapter else []
        again += [x for b in args.base or () for x in ("--base", b)]
        again += ["--shard", args.shard] if args.shard else []
        print(f"crashlab: explore interrupted: {done} of {planned} chunks done, {tried} schedules tried "
              f"(seed {args.seed}); findings so far in {where}/; continue with: {shlex.join(again)}",
              file=sys.stderr)
        raise
    finally:
        if hasattr(executor, "close"):
            executor.close()


COMMANDS = {"run": _cmd_run, "conformance": _cmd_conformance, "sweep": _cmd_sweep, "merge": _cmd_merge,
            "check": _cmd_check, "replay": _cmd_replay, "report": _cmd_report, "list": _cmd_list,
            "explore": _cmd_explore, "workshop": _cmd_workshop}


_COMMAND: list[bool] = [False]   # main() runs as the crashlab command (not called by a program)


def _contain() -> None:
    """The command kills everything below it (workers, adapters, what they left behind)."""
    from ..run.jobs import kill_tree

    if _COMMAND[0]:
        kill_tree()


def _on_signal(signum, frame):
    from ..vocab.errors import Interrupted

    if Interrupted.requested is None:  # the first signal stops the work; later ones let cleanup finish
        Interrupted.requested = signum
        raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code. Never raises, never prints a traceback (except with
    CRASHLAB_DEBUG=1), and SIGINT/SIGTERM stop it cleanly with 130/143. What it prints is escaped
    (crashlab.cli.terminal), and a reader that goes away never changes the exit code."""
    from ..run.jobs import become_subreaper, protect_self
    from .terminal import guarded

    args = parser().parse_args(argv)
    _COMMAND[0] = argv is None
    if argv is None:  # the command itself, not a call from a test or a program: contain what it starts
        become_subreaper()
        protect_self()
    with guarded():
        return _main(args)


def _main(args) -> int:
    import os
    import signal
    import threading

    from ..run import isolate
    from ..run.drivers import kill_all_adapters
    from ..vocab.errors import Interrupted, ResourcesExhausted
    from .terminal import printable

    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, _on_signal)
    Interrupted.requested = None
    before = os.environ.get(isolate.ENV)
    try:
        if _COMMAND[0]:   # the crashlab command: no planted code ran before it (crashlab.vocab.planted)
            from ..vocab.planted import refuse_planted
            refuse_planted()
        if hasattr(args, "isolation"):   # a command that runs adapter code: its isolation, checked now
            isolate.choose(args.isolation)
            isolate.prepare()
        _plan_outputs(args)
        code = (COMMANDS.get(args.command) or args.handler)(args)
        if Interrupted.requested is not None:   # swallowed where it landed (a finalizer, say): never exit 0
            raise Interrupted(Interrupted.requested)
        return code
    except CrashlabError as exc:
        print(f"crashlab: error: {printable(clip(exc, 2000))}", file=sys.stderr)
        if isinstance(exc, ResourcesExhausted):
            print(RESOURCES_STOPPED, file=sys.stderr)
        return exc.exit_code
    except (Interrupted, KeyboardInterrupt) as exc:
        kill_all_adapters()
        signum = getattr(exc, "signum", signal.SIGINT)
        name = signal.Signals(signum).name
        print(f"crashlab: interrupted by {name}; stopped (adapter processes killed)", file=sys.stderr)
        return 128 + signum
    except BaseException as exc:  # noqa: BLE001 - the last line of defence: no traceback, never exit 0
        if ResourcesExhausted.matches(exc):   # ENOSPC, EMFILE, ... outside crashlab's own file writing
            where = f" ({printable(clip(exc.filename, 300))})" if getattr(exc, "filename", None) else ""
            print(f"crashlab: error: {exc.strerror or exc}{where}", file=sys.stderr)
            print(RESOURCES_STOPPED, file=sys.stderr)
            return ResourcesExhausted.exit_code
        if os.environ.get("CRASHLAB_DEBUG"):
            raise
        err = InternalError(f"{type(exc).__name__}: {clip(exc, 500)}",
                            hint="this is a bug in crashlab; please report it with the command you ran "
                                 "(set CRASHLAB_DEBUG=1 to see the traceback)")
        print(f"crashlab: internal error: {printable(err)}", file=sys.stderr)
        return InternalError.exit_code
    finally:
        kill_all_adapters()
        _contain()
        if getattr(args, "isolation", None):   # a call from a program: its environment as it was
            if before is None:
                os.environ.pop(isolate.ENV, None)
            else:
                os.environ[isolate.ENV] = before
        for sig, old in handlers.items():
            signal.signal(sig, old)


RESOURCES_STOPPED = ("crashlab: stopped: out of disk space or file descriptors (exit 4); no verdict is claimed, and "
                     "results not reported as written were not written")


def entry() -> None:
    """The console script: ``main``, then exit even if an in-process adapter left threads running."""
    import os
    import threading

    code = main()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
