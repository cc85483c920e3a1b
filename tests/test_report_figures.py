"""Every library figure is drawn without clipped or overlapping text, and the figure's new
parts (calls as arrows, the authority row, duplicate deliveries, mismatch shading, the final
column, collapsed states and fault bands, the broken time axis) are computed correctly."""
from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.checks import check_trace
from crashlab.report.axis import TimeAxis
from crashlab.report.figure import RC, build_figure, collapse_states, matplotlib
from crashlab.report.lanes import lanes
from crashlab.report.story import story
from crashlab.world.trace import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = sorted((ROOT / "traces").glob("*.jsonl"))


def text_problems(fig) -> list[str]:
    """Texts cut by the figure's edge, cut by the axes that clip them, or overlapping another
    text; measured with matplotlib's own text extents."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    shown = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        box = t.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            continue
        shown.append((t, box))
    problems = []
    page = fig.bbox
    for t, box in shown:
        if box.x0 < page.x0 - 1 or box.x1 > page.x1 + 1 or box.y0 < page.y0 - 1 or box.y1 > page.y1 + 1:
            problems.append(f"cut by the figure edge: {t.get_text()!r}")
        if t.get_clip_on() and t.axes is not None and t.get_clip_box() is not None:
            clip = t.get_clip_box()
            if box.x0 < clip.x0 - 1 or box.x1 > clip.x1 + 1 or box.y0 < clip.y0 - 1 or box.y1 > clip.y1 + 1:
                problems.append(f"clipped by its axes: {t.get_text()!r}")
    inner = []
    for t, b in shown:          # a multi-line text: one box per line that has ink (blank lines have none)
        lines = t.get_text().split("\n")
        h = b.height / len(lines)
        for i, line in enumerate(lines):
            if line.strip():
                top = b.y1 - i * h
                inner.append((t, Bbox.from_extents(b.x0 + 1, top - h + 1, b.x1 - 1, top - 1)))
    for i, (a, abox) in enumerate(inner):
        for b, bbox in inner[i + 1:]:
            if abox.overlaps(bbox):
                problems.append(f"overlap: {a.get_text()!r} and {b.get_text()!r}")
    return problems


@pytest.fixture(scope="module")
def figures():
    mpl = matplotlib()
    out = {}
    with mpl.rc_context(RC):
        for path in LIBRARY:
            events = read_jsonl(path)
            out[path.stem] = (events, build_figure(events, check_trace(events)))
    return out


def test_the_text_check_catches_clipped_and_overlapping_text():
    from matplotlib.figure import Figure

    with matplotlib().rc_context(RC):
        fig = Figure(figsize=(4, 2))
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "one label")
        ax.text(0.52, 0.5, "another label")
        fig.text(0.9, 0.5, "runs off the right edge of the figure")
        problems = text_problems(fig)
    assert any(p.startswith("overlap: 'one label'") for p in problems)
    assert any(p.startswith("cut by the figure edge") for p in problems)


@pytest.mark.parametrize("name", [p.stem for p in LIBRARY])
def test_library_figure_has_no_clipped_or_overlapping_text(figures, name):
    _, fig = figures[name]
    assert text_problems(fig) == []


def test_linear_axis_figures_have_no_clipped_or_overlapping_text():
    events = read_jsonl(ROOT / "traces" / "t6-duplicate-input-event.jsonl")
    with matplotlib().rc_context(RC):
        assert text_problems(build_figure(events, check_trace(events), linear=True)) == []


# --------------------------------------------------------------------------- the time axis
def test_time_axis_is_linear_between_breaks_and_monotonic():
    times = [0, 1, 2, 3, 40, 3_000, 3_001, 60_000, 600_000]
    axis = TimeAxis(times, 0, 600_000)
    assert [(b.start, b.end) for b in axis.breaks] == [(40, 3_000), (3_001, 60_000), (60_000, 600_000)]
    grid = sorted(set(range(0, 600_001, 997)) | set(times))
    xs = [axis.x(t) for t in grid]
    assert min(xs) == 0.0 and max(xs) == pytest.approx(100.0)
    assert all(a < b for a, b in zip(xs, xs[1:]))
    # linear outside the breaks: equal time, equal distance
    assert axis.x(2_000) - axis.x(1_000) == pytest.approx(axis.x(3_000) - axis.x(2_000))
    # the quiet stretches are compressed, so the burst of the first 40 ms takes most of the width
    assert axis.x(40) > 80
    assert axis.x(3_000) - axis.x(40) == pytest.approx(2.6)      # a break: fixed width
    fewer = TimeAxis(times, 0, 600_000, min_gap_ms=10_000)
    assert [(b.start, b.end) for b in fewer.breaks] == [(3_001, 60_000), (60_000, 600_000)]
    plain = TimeAxis(times, 0, 600_000, linear=True)
    assert not plain.breaks and plain.x(300_000) == pytest.approx(50.0)


def test_ticks_never_overlap():
    axis = TimeAxis([0, 5, 10, 12_000, 12_003, 900_000], 0, 900_000)
    xs, labels = axis.ticks(36_000_000, [12_000], char_x=0.8)
    assert labels and all(b - a > 0.8 * (len(la) + len(lb)) / 2 for a, b, la, lb in zip(xs, xs[1:], labels, labels[1:]))


# --------------------------------------------------------------------------- the story
def read(name):
    events = read_jsonl(ROOT / "traces" / f"{name}.jsonl")
    return events, lanes(events)


def test_every_call_to_a_service_is_an_arrow_with_its_outcome():
    events, data = read("combined-cancellation-under-pressure")
    calls = story(events, data).calls
    reserve = [c for c in calls if c.op == "reserve"]
    lookups = [c for c in calls if c.op == "lookup"]
    assert len(reserve) == 1 and reserve[0].send and reserve[0].outcome == "timeout" and not reserve[0].definite
    assert len(lookups) == sum(1 for e in events if e.get("kind") == "call" and e.get("op") == "lookup")
    assert all(not c.send and c.outcome == "unavailable" and c.definite for c in lookups)
    events, data = read("t2-commit-before-record")
    first = story(events, data).calls[0]
    assert first.op == "reserve" and first.outcome == "ok" and not first.delivered   # the worker had crashed


def test_every_delivery_of_a_duplicated_event_has_its_disposition():
    events, data = read("t6-duplicate-input-event")
    intakes = [d for d in story(events, data).deliveries if d.type == "intake"]
    assert [d.copy for d in intakes] == [1, 2, 3, 4]
    assert all("no transition" in d.disposition for d in intakes[1:])


def test_authority_shows_the_approval_and_its_expiry():
    events, data = read("combined-deploy-expired-approval")
    auth = story(events, data).authority
    granted = [a for a in auth if a.kind == "granted"]
    assert len(granted) == 1 and granted[0].until == 330_000
    assert any(a.kind == "refused" and a.label == "expired" and a.t > 330_000 for a in auth)
    assert [a.label for a in auth if a.kind == "requested"] == ["AR-1", "AR-2"]
    events, data = read("t2-commit-before-record")
    assert story(events, data).authority == ()        # a standing approval: nothing to draw


def test_mismatch_marks_knowledge_behind_or_against_the_service():
    events, data = read("t2-commit-before-record")
    m = story(events, data).mismatches
    commit = next(e for e in data.effects if e.cause == "adapter")
    confirmed = next(s for k in data.knowledge for s in k.states if s.label == "CONFIRMED")
    assert [(x.kind, x.start, x.end) for x in m] == [("lags", commit.start, confirmed.start)]
    # a ledger that claims CONFIRMED with no record anywhere contradicts the service
    from dataclasses import replace

    fake = replace(data, effects=())
    assert [x.kind for x in story(events, fake).mismatches] == ["contradicts"]


def test_repeated_states_collapse_into_one_block():
    events, data = read("combined-cancellation-under-pressure")
    blocks = collapse_states(data.runs[0].states)
    reconciling = [b for b in blocks if b[0].label == "RECONCILING"]
    assert len(reconciling) == 1 and len(reconciling[0][2]) > 10
    assert all(a[0].label != b[0].label for a, b in zip(blocks, blocks[1:]))


def test_figure_labels_the_final_disposition_and_collapses_repeated_faults(figures):
    _, fig = figures["combined-cancellation-under-pressure"]
    words = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert "where it ended" in words
    assert any("CANCELLED" in w and "EFFECT_UNKNOWN" in w for w in words)
    assert any(w.startswith("v7–v") and "RECONCILING ×" in w for w in words)
    # repeated faults collapse into one counted label (the lane's own "unavailable ×N" may give way
    # to the label of the cancellation delivered again just before the takeover)
    assert any(w.startswith("unavailable ×") for w in words) or "unavailable" in words
    assert any(w.startswith("lookup → unavailable ×") for w in words)
    _, fig = figures["t6-duplicate-input-event"]
    words = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert any(w.startswith("intake duplicate ×3: no transition") for w in words)
    _, fig = figures["combined-deploy-expired-approval"]
    words = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert any("AP-1" in w and "expired" in w for w in words)


# --------------------------------------------------------------------------- state machines
def test_no_state_machine_label_covers_a_state_name():
    import re

    from crashlab.report.machines import BOX_H, label_box, layout, svg
    from crashlab.report.view import Item, knowledge_steps, run_steps

    checked = 0
    for path in LIBRARY:
        events = read_jsonl(path)
        item = Item(result=check_trace(events), events=events, name=path.stem, lanes=lanes(events))
        drawings = [("run", svg("run", steps, "t")) for steps in run_steps(item).values()]
        drawings.append(("knowledge", svg("knowledge", knowledge_steps(item), "t", numbered=False)))
        for kind, drawing in drawings:
            states = [(cx - w / 2, cy - BOX_H / 2, cx + w / 2, cy + BOX_H / 2) for cx, cy, w in layout(kind).boxes.values()]
            for x, y, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="middle" fill="#(?:d84315|c62828)" '
                                         r'font-weight="bold" stroke="white"[^>]*>([^<]+)</text>', drawing):
                x0, y0, x1, y1 = label_box(float(x), float(y) - 3, text)
                hit = [s for s in states if x0 < s[2] and s[0] < x1 and y0 < s[3] and s[1] < y1]
                assert not hit, (path.stem, kind, text)
                checked += 1
    assert checked > 100


# --------------------------------------------------------------------------- the canvas
def test_the_cached_canvas_draws_the_same_pixels_as_matplotlibs():
    """crashlab.report.agg caches text extents, layouts and glyph rasters across figures; the
    pixels must be matplotlib's own, byte for byte, with the caches cold and warm."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from crashlab.report import agg

    def pixels(fig, canvas_class):
        canvas = canvas_class(fig)
        canvas.draw()
        return bytes(canvas.buffer_rgba())

    names = ["combined-cancellation-under-pressure", "t6-duplicate-input-event", "combined-deploy-expired-approval"]
    for cache in (agg._EXTENTS, agg._LAYOUTS, agg._GLYPHS):
        cache.clear()
    with matplotlib().rc_context(RC):
        for linear in (False, True):
            for name in names:
                events = read_jsonl(ROOT / "traces" / f"{name}.jsonl")
                stock = pixels(build_figure(events, check_trace(events), linear=linear), FigureCanvasAgg)
                assert pixels(build_figure(events, check_trace(events), linear=linear), agg.Canvas) == stock, name
    assert agg._EXTENTS and (agg._GLYPHS or not agg.FAST_TEXT)


def test_a_refused_finish_says_why_stale_lease_or_run_already_ended():
    def kinds(name):
        _, data = read(name)
        return sorted(m.kind for r in data.runs for w in r.workers for m in w.marks if m.kind.startswith("finish"))

    after = kinds("combined-cancel-after-finish")      # a worker woken after the run ended
    assert "finish_after_end" in after and "finish_stale" not in after
    stale = kinds("matrix-lease-loss")                  # a worker that lost its lease
    assert "finish_stale" in stale and "finish_after_end" not in stale
    from crashlab.report import style
    assert "already ended" in style.WORKER_GLYPHS["finish_after_end"][3]


# --------------------------------------------------------------------------- the words and the legend's swatches
def test_labels_draw_the_pixels_of_matplotlibs_text_draw(monkeypatch):
    """crashlab.report.labels draws a figure's words on Agg by a shorter path than Text.draw;
    the pixels must be Text.draw's own (each box as the bbox patch it stands for), byte for
    byte, for plain and slide figures and for a failing adapter's (numbered badges in circles).
    Every text of a figure is a Label, and none of them went through Text.draw."""
    from matplotlib.text import Text

    from crashlab.report import agg, labels
    from crashlab.run.runner import run_scenario
    from crashlab.scenario.loader import resolve

    runs = [read_jsonl(ROOT / "traces" / f"{name}.jsonl")
            for name in ("t6-duplicate-input-event", "t8-compensation-failure", "combined-deploy-expired-approval")]
    runs.append(run_scenario(resolve("combined-cancellation-under-pressure"),
                             "crashlab.gallery.cancellation:CancellationTheater").events)
    slow_draws = []
    text_draw = Text.draw
    monkeypatch.setattr(Text, "draw", lambda self, renderer: (slow_draws.append(self), text_draw(self, renderer)))

    def pixels(events, **kw):
        fig = build_figure(events, check_trace(events), **kw)
        canvas = agg.Canvas(fig)
        canvas.draw()
        return fig, bytes(canvas.buffer_rgba())

    boxes = set()
    with matplotlib().rc_context(RC):
        for events in runs:
            for kw in ({}, {"slides": True}):
                fig, fast = pixels(events, **kw)
                assert not slow_draws and all(isinstance(t, labels.Label) for t in fig.findobj(Text))
                boxes |= {t._box[0] for t in fig.findobj(labels.Label) if t._box is not None}
                monkeypatch.setattr(labels, "FAST", False)
                _, slow = pixels(events, **kw)
                monkeypatch.setattr(labels, "FAST", True)
                assert slow_draws and fast == slow, (events[0]["scenario"], kw)
                slow_draws.clear()
    assert boxes == {"square", "round", "circle"}          # every kind of box was compared


def test_the_legends_swatches_sit_where_their_vector_drawing_does(monkeypatch):
    """On Agg the legend's swatches are one image pasted from each distinct swatch, drawn once
    per process: the image depends on no figure drawn before it (a report draws in several
    processes), and each swatch's ink lies within a pixel of its vector drawing's (SVG's)."""
    import numpy as np

    from crashlab.report import agg, legend

    def drawn(name, **kw):
        events = read_jsonl(ROOT / "traces" / f"{name}.jsonl")
        fig = build_figure(events, check_trace(events), **kw)
        canvas = agg.Canvas(fig)
        canvas.draw()
        swatches = next(a for a in fig.artists if isinstance(a, legend.Swatches))
        return swatches, np.asarray(canvas.buffer_rgba())[:, :, :3].astype(int)

    with matplotlib().rc_context(RC):
        legend._SWATCHES.clear()
        _, alone = drawn("t8-compensation-failure")
        legend._SWATCHES.clear()
        drawn("combined-cancellation-under-pressure", slides=True)
        drawn("t6-duplicate-input-event")
        assert np.array_equal(drawn("t8-compensation-failure")[1], alone)
        for name, kw in (("t8-compensation-failure", {}), ("combined-cancellation-under-pressure", {"slides": True})):
            swatches, image = drawn(name, **kw)
            monkeypatch.setattr(legend, "IMAGES", False)
            _, vector = drawn(name, **kw)
            monkeypatch.setattr(legend, "IMAGES", True)
            dpi, height = swatches.figure.dpi, image.shape[0]
            x0, x1 = round(swatches.left * dpi) - 6, round((swatches.left + 0.19) * dpi) + 6
            for i, kind, spec in swatches.rows:
                centre = height - (swatches.top - (i + 0.5) * swatches.step) * dpi      # pixel rows from the top
                rows = slice(int(centre - swatches.step * dpi / 2), int(centre + swatches.step * dpi / 2))
                ink = [np.argwhere(np.abs(px[rows, x0:x1] - 255).max(axis=2) > 12) for px in (image, vector)]
                assert len(ink[0]) and len(ink[1]), (name, kind, spec)
                assert np.abs(ink[0].min(axis=0) - ink[1].min(axis=0)).max() <= 1, (name, kind, spec)
                assert np.abs(ink[0].max(axis=0) - ink[1].max(axis=0)).max() <= 1, (name, kind, spec)
