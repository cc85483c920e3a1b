# layer report: drawing and writing what ran: scorecards, lanes, HTML, Markdown, the changelog.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, integrate, runtimes, probe (only floors below it).
"""Reports: the timeline figures, the HTML page and the Markdown summary (docs/reports.md).

Three entry points, all writing into ``out_dir`` and returning the path of ``index.html``
(each takes ``no_answers=True`` to hide teaching cards and adapter names, as the workshop
does, ``linear=True`` for a plain linear time axis, ``window="10:04..10:04:01"`` to draw only
that stretch of each trace, ``slides=True`` for projector figures (1920 x 1080 px, large type),
``figures="failures"`` to draw figures
only for scenarios that did not pass, and ``jobs=N`` for the number of worker
processes drawing the figures: by default the cores, 1 for this process only; the output is
the same bytes for any number):

* :func:`render_results` - scenario results whose traces were saved (``crashlab run --report``);
* :func:`render_scorecard` - a scored suite (``crashlab conformance --report``);
* :func:`render_inputs` - saved files only (``crashlab report PATH...``): traces, folders of
  traces and/or a results JSON, re-rendered without re-running anything, every trace checked again
  (a results JSON's verdicts against them).

Output: ``index.html`` (the findings and every scenario), ``scenarios/<scenario>.html`` (one
self-contained page each), ``summary.md`` (for a CI job summary) and ``figures/<scenario>.png``. matplotlib is the optional
``report`` extra and is imported only here, lazily.
"""
from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from pathlib import Path

from ..vocab.errors import UsageError
from ..vocab.results import Scorecard, ScenarioResult
from ..world.trace import read_jsonl
from .window import Window, parse_window

__all__ = ["render_results", "render_scorecard", "render_inputs"]

INPUT_HINT = ("give trace files (.jsonl, written by `crashlab run`), folders of traces, or a results JSON "
              "written by `crashlab conformance --json PATH`")


@contextmanager
def _collector_paused():
    """No cyclic garbage collection while the traces are read and matplotlib is imported:
    they make hundreds of thousands of objects that all live on (a fifth of this process's
    time before the figures was spent in collections that freed nothing). Restored before
    any figure is drawn."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def render_results(results: list[ScenarioResult], out_dir: Path, *, no_answers: bool = False,
                   linear: bool = False, progress=None, jobs: int | None = None, figures: str = "all",
                   window: Window | str | None = None, slides: bool = False) -> Path:
    """Render scenario results; each result's ``trace`` names its saved JSONL trace."""
    results, read = list(results), _Reader()
    with _collector_paused():
        events = [_trace_of(r, [], read=read) for r in results]
    return _render(results, events, None, Path(out_dir),
                   adapter=_common_adapter(results), notes=[], no_answers=no_answers, linear=linear,
                   progress=progress, jobs=jobs, figures=figures, window=window, slides=slides)


def render_scorecard(card: Scorecard, out_dir: Path, *, no_answers: bool = False, linear: bool = False,
                     progress=None, jobs: int | None = None, figures: str = "all",
                     window: Window | str | None = None, slides: bool = False) -> Path:
    """Render a scored suite: the score, where points were lost, and every scenario."""
    scenarios, read = list(card.scenarios), _Reader()
    with _collector_paused():
        events = [_trace_of(r, [], read=read) for r in scenarios]
    return _render(scenarios, events, card, Path(out_dir),
                   adapter=card.adapter, notes=[], no_answers=no_answers, linear=linear, progress=progress,
                   jobs=jobs, figures=figures, window=window, slides=slides)


def render_inputs(paths: list[Path], out_dir: Path, *, no_answers: bool = False, linear: bool = False,
                  progress=None, jobs: int | None = None, figures: str = "all",
                  window: Window | str | None = None, slides: bool = False) -> Path:
    """Re-render from saved files. With a results JSON, each scenario's trace is found among the
    given traces or at the path the JSON names, and checked again: a file its traces contradict
    (verdict, findings, adapter, seed, score) is refused (crashlab.checks.rubric.Contradicted, a
    usage error) before anything is written; a verdict whose trace was not kept is shown as taken
    from the file, not re-checked. With traces only, each is checked again (crashlab.checks) and,
    when they all come from one adapter, scored."""
    opts = {"no_answers": no_answers, "linear": linear, "progress": progress, "jobs": jobs, "figures": figures,
            "window": window, "slides": slides}
    if not paths:
        raise UsageError("nothing to render", hint=INPUT_HINT)
    traces, results_json = _classify([Path(p) for p in paths])
    read = _Reader()
    with _collector_paused():
        loaded = {p: read(p) for p in traces}
    if results_json is not None:
        by_key: dict[tuple, Path] = {}
        for p, events in loaded.items():
            head = events[0]
            by_key.setdefault((head.get("scenario"), head.get("seed")), p)
        events_list, used = [], set()

        def trace_for(r: ScenarioResult) -> tuple[Path, list[dict]] | None:
            """The trace a scenario is drawn from, and checked against: a given one, else the one named."""
            p = by_key.get((r.id, r.seed))
            if p is not None:
                used.add(p)
                found = (p, loaded[p])
            else:
                found = _find_trace(r, [results_json.parent], source=results_json, read=read)
            events_list.append(found[1] if found else None)
            return found

        with _collector_paused():
            card = _read_results(results_json, traces=trace_for)
        unused = len(loaded) - len(used)
        notes = [f"{unused} given trace(s) are not in {results_json} and were not rendered."] if unused else []
        results, provenance = _provenance(card, results_json)
        return _render(results, events_list, card, Path(out_dir), adapter=card.adapter,
                       notes=provenance + notes, summary_notes=provenance, **opts)
    results = [_recheck(events, p) for p, events in loaded.items()]
    card = _score(results, loaded)
    if card is not None:
        events_for = {str(p): ev for p, ev in loaded.items()}
        ordered = list(card.scenarios)
        return _render(ordered, [events_for.get(r.trace or "") for r in ordered], card, Path(out_dir),
                       adapter=card.adapter, notes=["Traces checked again from saved files."], **opts)
    return _render(results, list(loaded.values()), None, Path(out_dir), adapter=_common_adapter(results, loaded),
                   notes=["Traces checked again from saved files."], **opts)


# --------------------------------------------------------------------------- inputs
def _classify(paths: list[Path]) -> tuple[list[Path], Path | None]:
    traces: list[Path] = []
    results_json: Path | None = None
    for p in paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file or folder", hint=INPUT_HINT)
        if p.is_dir():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise UsageError(f"{p}: no .jsonl trace in this folder", hint=INPUT_HINT)
            traces.extend(found)
        elif p.suffix == ".json" or (p.suffix != ".jsonl" and _looks_like_results(p)):
            if results_json is not None:
                raise UsageError(f"{p}: a second results JSON (already have {results_json})",
                                 hint="render one results JSON at a time")
            results_json = p
        else:
            traces.append(p)
    return list(dict.fromkeys(traces)), results_json


def _looks_like_results(p: Path) -> bool:
    try:
        head = p.read_text(encoding="utf-8")[:4096].lstrip()
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("{") and '"scenarios"' in head and '"seq"' not in head.split("\n", 1)[0]


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _read_results(p: Path, traces=None) -> Scorecard:
    try:
        data = json.loads(p.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: cannot read: {exc}", hint=INPUT_HINT) from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})", hint=INPUT_HINT) from None
    except (ValueError, RecursionError) as exc:  # NaN, huge integers, deep nesting
        raise UsageError(f"{p}: not a crashlab results JSON ({str(exc)[:120]})", hint=INPUT_HINT) from None
    try:
        from ..checks.rubric import scorecard_from_json

        return scorecard_from_json(data, base=p.parent, traces=traces, source=p)
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{p}: not a crashlab results JSON: {exc}",
                         hint="the schema is docs/results.md; write one with `crashlab conformance --json PATH`") \
            from None


class _Reader:
    """Reads each trace file once per report: a file named twice (two spellings of one path, or
    two results citing one trace) is parsed once and its events shared by every page and figure
    that shows it (they only read them)."""

    def __init__(self) -> None:
        self.parsed: dict[Path, list[dict]] = {}

    def __call__(self, path: Path) -> list[dict]:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):     # a symlink loop: read_jsonl names the file
            key = path
        if key not in self.parsed:
            self.parsed[key] = read_jsonl(path)
        return self.parsed[key]


def _trace_of(r: ScenarioResult, bases: list[Path], source: Path | None = None,
              read=read_jsonl) -> list[dict] | None:
    """The events of a result's saved trace (None when it saved none), read through ``read``."""
    found = _find_trace(r, bases, source, read)
    return found[1] if found else None


def _find_trace(r: ScenarioResult, bases: list[Path], source: Path | None = None,
                read=read_jsonl) -> tuple[Path, list[dict]] | None:
    """A result's saved trace, its path and events (None when it saved none): a trace it names that
    is not there, or of another scenario, is a usage error naming it."""
    if not r.trace:
        return None
    given = Path(r.trace)
    candidates = [given] + [b / given for b in bases if not given.is_absolute()] + [b / given.name for b in bases]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        where = f"{source}: " if source else ""
        raise UsageError(f"{where}the trace of scenario {r.id} ({r.trace}) does not exist",
                         hint="pass the folder of traces too, e.g. `crashlab report results.json crashlab-out/`")
    events = read(path)
    if events[0].get("scenario") != r.id:
        raise UsageError(f"{path}: this trace is of scenario {events[0].get('scenario')!r}, not {r.id!r}",
                         hint="the results and the traces come from different runs")
    return path, events


def _provenance(card: Scorecard, source: Path) -> tuple[list[ScenarioResult], list[str]]:
    """A checked results file's scenarios, each whose verdict was not checked again against a trace
    saying so, and the report's line on where its verdicts come from."""
    from dataclasses import replace

    unchecked: dict[str, str] = card.extra.get("unchecked") or {}
    results = [replace(r, notes=(*r.notes, f"Verdict and findings taken from the results file, not re-checked: "
                                           f"{unchecked[r.id]}."))
               if r.id in unchecked else r for r in card.scenarios]
    n, shown = len(results), f"Rendered from {source} without re-running"
    if not unchecked:
        return results, [f"{shown}; every scenario's verdict and findings were checked again against its trace "
                         f"({n} trace{'' if n == 1 else 's'}) and agree."]
    ids = list(unchecked)
    named = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    why = "; ".join(dict.fromkeys(unchecked.values()))
    if len(ids) == n:
        return results, [f"{shown}. None of its {n} scenarios' verdicts was checked again against a trace: all are "
                         f"taken from the results file, not re-checked ({why}), and so is the score."]
    one, them = len(ids) == 1, "it" if len(ids) == 1 else "them"
    return results, [f"{shown}. {n - len(ids)} of {n} scenarios' verdicts and findings were checked again against "
                     f"their traces and agree; the other {len(ids)} ({named}) {'is' if one else 'are'} taken from the "
                     f"results file, not re-checked ({why}); the score counts {them} as the results file records "
                     f"{them}."]


def _recheck(events: list[dict], path: Path) -> ScenarioResult:
    from ..run.conformance import recheck_saved  # a trace edited out of shape is a usage error, not a crash

    return recheck_saved(events, path)


def _score(results: list[ScenarioResult], loaded: dict[Path, list[dict]]) -> Scorecard | None:
    adapters = {events[0].get("adapter") for events in loaded.values()}
    if len(adapters) != 1:
        return None
    try:
        from ..checks.rubric import score
    except ImportError:
        return None
    return score(results, adapter=str(adapters.pop()), seed=None)


def _common_adapter(results: list[ScenarioResult], loaded: dict | None = None) -> str | None:
    adapters = set()
    for r in results:
        head = None
        if loaded is not None:
            head = next((ev[0] for p, ev in loaded.items() if str(p) == r.trace), None)
        if head is not None:
            adapters.add(head.get("adapter"))
        else:
            from .view import Item, repro_parts

            adapter = repro_parts(Item(result=r, events=None, name=r.id))[1]
            if adapter:
                adapters.add(adapter)
    return adapters.pop() if len(adapters) == 1 else None


# --------------------------------------------------------------------------- rendering
def _names(results: list[ScenarioResult]) -> list[str]:
    from ..run.conformance import safe_name

    names, seen = [], set()
    for r in results:
        base = safe_name(r.id)
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base}-{n}"
        seen.add(name)
        names.append(name)
    return names


def _render(results: list[ScenarioResult], events: list[list[dict] | None], card: Scorecard | None,
            out_dir: Path, *, adapter: str | None, notes: list[str], summary_notes: list[str] = (),
            no_answers: bool = False,
            linear: bool = False, progress=None, jobs: int | None = None, figures: str = "all",
            window: Window | str | None = None, slides: bool = False) -> Path:
    from ..vocab.files import atomic_write_text
    from . import index, markdown
    from .figure import matplotlib
    from .html import trace_coverage
    from .lanes import lanes as extract_lanes
    from .view import Item, ordered

    with _collector_paused():
        matplotlib()  # fail before writing anything when the extra is missing
        names = _names(results)
        # what every page and figure reads of a trace, worked out once here (workers inherit it)
        items = ordered([Item(result=r, events=evs, name=name, lanes=extract_lanes(evs) if evs else None,
                              coverage=trace_coverage(r, evs)) for r, evs, name in zip(results, events, names)])
    fig_dir = out_dir / "figures"
    pages = out_dir / "scenarios"
    fig_dir.mkdir(parents=True, exist_ok=True)
    pages.mkdir(parents=True, exist_ok=True)
    if figures not in FIGURES:
        raise UsageError(f"figures={figures!r}: give one of {', '.join(FIGURES)}")
    window = parse_window(window) if isinstance(window, str) else window
    for item in items:          # a window every trace can place on its clock, checked before anything is drawn
        if window is not None and item.events:
            try:
                window.span(int(item.events[0].get("origin_ms") or 0))
            except UsageError as exc:
                raise UsageError(f"scenario {item.result.id}: {exc.message}", hint=exc.hint) from None
    view = (linear, window, slides)
    items, keys, cache = _kept_figures(items, figures, fig_dir, no_answers, view)
    same = _repeats(items, keys)
    tasks = [(item, items[i - 1] if i else None, items[i + 1] if i + 1 < len(items) else None,
              out_dir, no_answers, view, item.png is None and _draws(item, figures) and i not in same)
             for i, item in enumerate(items)]
    # figures and their pages, the longest traces first (their figures take longest): no worker
    # is left drawing a big one at the end
    _scenarios(sorted((t for t in tasks if t[-1]), key=lambda t: -len(t[0].events)), progress, jobs)
    _copy_repeats(tasks, same, fig_dir)
    for task in tasks:
        if not task[-1]:
            _scenario(task)
    cache.remember(keys)
    where = out_dir / "index.html"
    atomic_write_text(where, index.index_page(items, card, adapter=adapter, notes=notes, no_answers=no_answers))
    summary = markdown.summary(items, card, adapter, no_answers=no_answers)
    if summary_notes:       # where its verdicts come from, under the heading
        head, _, rest = summary.partition("\n\n")
        summary = "\n\n".join([head, *(markdown.md(n) for n in summary_notes), rest])
    atomic_write_text(out_dir / "summary.md", summary)
    return where


#: Which scenarios get a figure: every one with a trace, or only those that did not pass.
FIGURES = ("all", "failures")


def _kept_figures(items: list, figures: str, fig_dir: Path, no_answers: bool, view: tuple):
    """The items with the figures a previous report in this folder drew from the same inputs
    (crashlab.report.figcache), the digest of every figure to draw or keep, and the cache."""
    from dataclasses import replace

    from .figcache import FigureCache, digest

    cache = FigureCache(fig_dir)
    keys, out = {}, []
    for item in items:
        if _draws(item, figures):
            keys[item.name] = digest(item, no_answers, view)
            png = cache.kept(item.name, keys[item.name])
            if png is not None:
                item = replace(item, png=png)
        out.append(item)
    cache.forget(item.name for item in out if item.name in keys and item.png is None)
    return out, keys, cache


def _repeats(items: list, keys: dict[str, str]) -> dict[int, int]:
    """The figures to draw that are the same picture as one before them in this report (the
    same digest of everything a figure is drawn from, crashlab.report.figcache), drawn or kept:
    index of the repeat -> index of the figure it repeats. Each distinct picture is drawn once."""
    first: dict[str, int] = {}
    same: dict[int, int] = {}
    for i, item in enumerate(items):
        if item.name in keys:
            j = first.setdefault(keys[item.name], i)
            if j != i and item.png is None:
                same[i] = j
    return same


def _copy_repeats(tasks: list, same: dict[int, int], fig_dir: Path) -> None:
    """Give each repeated figure the bytes of the picture it repeats (drawn by now, in this
    process or a worker), written under its own name; its page is written after."""
    from dataclasses import replace

    from ..vocab.files import atomic_write_bytes

    drawn: dict[int, bytes] = {}
    for i, j in same.items():
        if j not in drawn:     # kept from a previous report, or drawn just now
            drawn[j] = tasks[j][0].png or (fig_dir / f"{tasks[j][0].name}.png").read_bytes()
        item = replace(tasks[i][0], png=drawn[j])
        atomic_write_bytes(fig_dir / f"{item.name}.png", item.png)
        tasks[i] = (item,) + tasks[i][1:]


def _draws(item, figures: str) -> bool:
    return bool(item.events) and (figures == "all" or item.result.verdict != "pass")


#: Below this many figures, forking workers costs more than it saves.
PARALLEL_MIN = 8


def _figure(job) -> bytes:
    from .figure import figure_png

    events, result, data, base, no_answers, (linear, window, slides) = job
    return figure_png(events, result, base, data=data, no_answers=no_answers, linear=linear, window=window,
                      slides=slides)


def _scenario(task) -> None:
    """One scenario's figure (``figures/<name>.png``, when it has a trace) and its page
    (``scenarios/<name>.html``, the figure embedded); ``prev`` and ``next_`` are its
    neighbours in the report's order."""
    from dataclasses import replace

    from ..vocab.files import atomic_write_text
    from . import html

    item, prev, next_, out_dir, no_answers, view, draw = task
    if draw:
        png = _figure((item.events, item.result, item.lanes, out_dir / "figures" / item.name, no_answers, view))
        item = replace(item, png=png)
    atomic_write_text(out_dir / "scenarios" / f"{item.name}.html",
                      html.scenario_page(item, no_answers=no_answers, prev=prev, next_=next_, window=view[1],
                                         slides=view[2]))


_TASKS: list = []     # a worker's scenarios, inherited when it is forked (never pickled)


def _worker_start(tasks: list) -> None:
    """A worker: SIGINT is left to the parent, which stops the workers (a terminal sends it
    to the whole process group), and SIGTERM ends it (not the handler it inherited, which
    would turn it into an exception the pool's worker loop survives). What it inherited (the
    traces, matplotlib) is frozen out of the garbage collector's scans: the collections a
    figure's many artists trigger then look at the figure's objects only (they took an
    eighth of the drawing time, now half that) and leave the parent's pages shared."""
    import gc
    import signal

    global _TASKS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.freeze()
    _TASKS = tasks


def _worker_scenario(i: int) -> int:
    _scenario(_TASKS[i])
    return i


def _workers(tasks: list, jobs: int | None) -> int:
    """How many worker processes draw the scenarios: ``jobs`` (default: the cores this process
    may use), 1 (this process) for a few figures, on a single core, without fork, or inside
    a daemon process."""
    import multiprocessing as mp
    import os

    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if jobs < 2 or len(tasks) < PARALLEL_MIN or "fork" not in mp.get_all_start_methods() \
            or mp.current_process().daemon:
        return 1
    return min(jobs, len(tasks))


def _scenarios(tasks: list, progress=None, jobs: int | None = None) -> None:
    """Draw every scenario's figure and write its page (each task is the argument of
    :func:`_scenario`), in ``jobs`` forked worker processes (see :func:`_workers`); the
    output is the same bytes for any number. The workers take one scenario at a time, so
    none idles while another has a queue. What workers could not do (one died, or none could
    start) is done in this process; an interrupt stops them at once. ``progress``
    (crashlab.report.progress) counts figures."""
    done = [False] * len(tasks)
    if progress is not None:
        progress.total = len(tasks)
    try:
        workers = _workers(tasks, jobs)
        if workers > 1:
            _in_workers(tasks, workers, done, progress)
        for i, task in enumerate(tasks):
            if not done[i]:
                _scenario(task)
                if progress is not None:
                    progress.update()
    finally:
        if progress is not None:
            progress.close()


def _in_workers(tasks: list, workers: int, done: list[bool], progress) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"),
                               initializer=_worker_start, initargs=(tasks,))
    stop = True
    try:
        pending = {pool.submit(_worker_scenario, i) for i in range(len(tasks))}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                done[future.result()] = True
                if progress is not None:
                    progress.update()
        stop = False
    except (BrokenProcessPool, OSError):     # a worker died or could not start: the rest are done here
        stop = False
    finally:
        if stop:             # an interrupt or an error: stop the workers now, drop the queued scenarios
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
        pool.shutdown(wait=not stop, cancel_futures=True)
