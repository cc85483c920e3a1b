"""Zoom, slides and honest time: a figure can show a time window (``--window FROM..TO``), be drawn
for a projector (``--slides``: 1920 x 1080 px, large type, the legend of what is drawn), collapses a
run of identical calls into one mark with a count, and gives a clock time to what lies between
breaks of the time axis. The slide pages are measured in headless Chromium at 1400 and 420 px."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from crashlab.checks import check_trace
from crashlab.cli import main
from crashlab.vocab.errors import UsageError
from crashlab.report import render_inputs
from crashlab.report.axis import Break, break_label
from crashlab.report.figure import RC, _Figure, matplotlib
from crashlab.report.lanes import lanes
from crashlab.report.window import parse_window
from crashlab.world.trace import read_jsonl
from test_report_figures import text_problems

ROOT = Path(__file__).resolve().parent.parent
T8 = ROOT / "traces" / "t8-compensation-failure.jsonl"


def drawn(path: Path, **kw):
    events = read_jsonl(path)
    with matplotlib().rc_context(RC):
        drawing = _Figure(events, check_trace(events), lanes(events), **kw)
        fig = drawing.build()
    return events, drawing, fig


def texts(fig) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text)]


def legend_rows(fig) -> set[str]:
    return {line for t in texts(fig) for line in t.split("\n")}


def heads(drawing, fig, kind: str) -> int:
    """How many answer arrowheads of this outcome the figure draws (the figure has no
    matplotlib Axes: its lines are the figure's own artists)."""
    from matplotlib.lines import Line2D

    from crashlab.report import legend

    color = legend.OUTCOMES[kind][0]
    return sum(len(line.get_xdata()) for line in fig.findobj(Line2D)
               if line.get_marker() == "^" and line.get_color() == color)


def exit_code(argv: list[str]) -> int:
    """The command's exit code (a usage error found while parsing exits from argparse)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


# --------------------------------------------------------------------------- the window
def test_a_window_draws_only_its_stretch_on_a_linear_axis():
    window = parse_window("10:01:03..10:01:08")
    events, drawing, fig = drawn(T8, window=window)
    a, b = drawing.window
    assert (a, b) == (63_000, 68_000) and drawing.axis.start == a and drawing.axis.end == b
    assert not drawing.axis.breaks                                       # the zoom is linear
    assert drawing.story.calls and all(a <= c.t <= b for c in drawing.story.calls)
    assert all(a <= m.t <= b for m in drawing.data.markers)
    shown = texts(fig)
    assert any("window 10:01:03–10:01:08" in t for t in shown)
    assert "crash (after)" not in shown and "deadline run-82" not in shown    # outside the window
    assert "CANCELLED\nEFFECT_UNKNOWN" in shown or "CANCELLED_EFFECT_UNKNOWN" in shown   # still where it ended
    assert text_problems(fig) == []
    # the whole figure draws what the window leaves out: the check above measures something
    _, _, whole = drawn(T8)
    assert "crash (after)" in texts(whole)


def test_the_window_legend_lists_only_what_is_drawn():
    _, _, whole = drawn(T8)
    _, _, zoom = drawn(T8, window=parse_window("10:01:03..10:01:08"))
    assert {"cancellation", "crash", "escalation (decision packet)"} <= legend_rows(whole)
    assert not {"cancellation", "crash", "escalation (decision packet)"} & legend_rows(zoom)


@pytest.mark.parametrize("text, wrong", [
    ("10:04", "expected FROM..TO"), ("10:05..10:04", "is not after"), ("10:61..10:62", "is not a clock time"),
    ("soon..later", "expected a time"), ("..3s", "both FROM and TO"),
])
def test_a_bad_window_is_a_clear_usage_error(text, wrong, tmp_path, capsys):
    with pytest.raises(UsageError, match=wrong):
        parse_window(text).span(36_000_000)
    assert exit_code(["report", str(T8), "--window", text, "--out", str(tmp_path / "r"), "-q"]) == 3
    err = capsys.readouterr().err
    assert wrong in err and "Traceback" not in err and "--window FROM..TO" in err
    assert not (tmp_path / "r" / "index.html").exists()


def test_a_bad_window_stops_a_run_before_it_runs(tmp_path, capsys):
    argv = ["run", "t2-commit-before-record", "--out", str(tmp_path / "out"), "--report", str(tmp_path / "r")]
    assert exit_code(argv + ["--window", "10:05..10:04"]) == 3
    assert "10:04 is not after 10:05" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_window_before_a_traces_origin_names_the_scenario(tmp_path, capsys):
    assert exit_code(["report", str(T8), "--window", "09:00..09:01", "--out", str(tmp_path / "r"), "-q"]) == 3
    assert "scenario t8-compensation-failure: --window 09:00..09:01: 09:00 is before the scenario origin" in \
        capsys.readouterr().err


# --------------------------------------------------------------------------- slides
@pytest.mark.parametrize("name, window", [("t8-compensation-failure", None),
                                          ("t8-compensation-failure", "10:01:03..10:01:08"),
                                          ("combined-cancellation-under-pressure", None),
                                          ("t2-commit-before-record", "0ms..300ms"),
                                          ("matrix-conflict-in-flight-second-run", None)])
def test_a_slide_is_1920_by_1080_in_large_type_without_cut_or_overlapping_text(name, window):
    _, drawing, fig = drawn(ROOT / "traces" / f"{name}.jsonl", slides=True, window=parse_window(window))
    w, h = fig.get_size_inches() * fig.dpi
    assert (round(w), round(h)) == (1920, 1080)
    assert drawing.FONT >= 1.5 * 7.5
    assert text_problems(fig) == []


def test_every_library_slide_is_at_least_1920_by_1080_without_cut_or_overlapping_text():
    from crashlab.report.figure import build_figure

    problems = {}
    with matplotlib().rc_context(RC):
        for path in sorted((ROOT / "traces").glob("*.jsonl")):
            events = read_jsonl(path)
            fig = build_figure(events, check_trace(events), slides=True)
            w, h = fig.get_size_inches() * fig.dpi
            found = text_problems(fig) + ([] if round(w) == 1920 and round(h) >= 1080 else [f"{w} x {h} px"])
            if found:
                problems[path.stem] = found
    assert problems == {}


def test_the_slide_png_is_projector_sized(tmp_path):
    from PIL import Image

    from crashlab.report.figure import render_figure

    events = read_jsonl(T8)
    png = render_figure(events, check_trace(events), tmp_path / "t8", slides=True)
    assert Image.open(png).size == (1920, 1080)


# --------------------------------------------------------------------------- collapsed calls, breaks
def test_identical_calls_in_a_row_are_one_mark_with_a_count(monkeypatch):
    events, drawing, fig = drawn(T8)
    lookups = [c for c in drawing.story.calls if c.op == "lookup" and c.outcome == "unavailable"]
    assert len(lookups) == 33
    assert heads(drawing, fig, "definite") == 1                 # one answer arrow for 33 identical lookups
    assert "lookup → unavailable ×33" in texts(fig) and "identical calls in a row (one mark)" in legend_rows(fig)
    monkeypatch.setattr(_Figure, "REPEAT_MIN", 10_000)          # without collapsing: one arrow each
    events, drawing, fig = drawn(T8)
    assert heads(drawing, fig, "definite") == 33


def test_what_lies_between_breaks_gets_its_clock_time():
    a, b = Break(249, 1249, 52.3, 54.9), Break(1249, 63256, 54.9, 57.5)
    c = Break(63256, 180721, 57.5, 60.1)
    assert break_label([a, b, c]) == "≈3 min, 3 breaks"
    assert break_label([a, b, c], 36_000_000) == "≈3 min, 3 breaks\nevents at 10:00:01.249, 10:01:03.256"
    assert break_label([a], 36_000_000) == "≈1 s"
    _, drawing, fig = drawn(ROOT / "traces" / "matrix-throttling-restart.jsonl")
    assert "≈3 min, 3 breaks\nevents at 10:00:01.249, 10:01:03.256" in texts(fig)
    assert text_problems(fig) == []


# --------------------------------------------------------------------------- the pages, in a browser
@pytest.fixture(scope="module")
def slides_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("slides")
    traces = [T8, ROOT / "traces" / "t2-commit-before-record.jsonl"]
    return render_inputs(traces, out / "report", slides=True, window="10:00..10:01:08")


def test_a_slide_page_opens_on_its_figure_and_names_the_window(slides_report):
    page = (slides_report.parent / "scenarios" / "t8-compensation-failure.html").read_text(encoding="utf-8")
    assert '<body class=slides>' in page
    assert page.index("<figure class=slide>") < page.index("Reproduce")
    assert "Shown: 10:00 to 10:01:08 only (<code>--window 10:00..10:01:08</code>)" in page
    events = read_jsonl(T8)
    inside = [ev["seq"] for ev in events if ev["lane"] != "meta" and ev["t"] <= 68_000]
    assert f'It holds {len(inside)} events, <a href="#e-{inside[0]}">#{inside[0]}</a> to ' \
           f'<a href="#e-{inside[-1]}">#{inside[-1]}</a>' in page
    assert f"id='e-{inside[-1]}'" in page or f'id="e-{inside[-1]}"' in page        # the link lands on a row


@pytest.mark.parametrize("width", [1400, 420])
def test_slide_pages_do_not_overflow_horizontally(slides_report, width, tmp_path_factory):
    from test_report_browser import CHROMIUM, Browser

    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install -y chromium)")
    browser = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        pages = [slides_report] + sorted((slides_report.parent / "scenarios").glob("*.html"))
        for page in pages:
            got = browser.measure(page, width)
            assert got["client"] == width and got["scripts"] == 0, got
            assert got["scroll"] <= got["client"] and not got["bad"], (page.name, got)
    finally:
        browser.close()
