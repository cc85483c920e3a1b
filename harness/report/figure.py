"""The per-scenario figure: three timelines aligned on simulated time, telling the story.

Top to bottom: a marker strip (faults, crashes, pauses, cancellations, deployments, the
business deadline; a repeated fault is one labelled band), the run lane (checkpoint states,
repeated states collapsed into one block; the authority the run held; every inbox delivery,
duplicates marked with what the run did with them; each worker's lifetime with its lease
epochs), the remote lane (one row per service, where the adapter's sends and reads arrive
as arrows from the worker's row and their answers go back, coloured by outcome; every
record a service really holds; other actors' traffic) and the knowledge lane (ledger
knowledge per semantic key, hatched where it disagrees with what the service holds).
A column on the right labels where each row ended: the final disposition, the final
knowledge, whether each record is still held. Violations are numbered red rings at the
events they cite, listed under the plot.

The time axis is linear with breaks: long quiet stretches are compressed into narrow
hatched zones labelled with their duration (crashlab.report.axis); ``linear=True`` draws a
plain linear axis.
"""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

from ..vocab.errors import UsageError
from ..vocab.files import atomic_write_bytes
from ..vocab.results import ScenarioResult
from ..vocab.timefmt import format_time
from . import labels, legend, style
from .axis import TimeAxis, break_groups, break_label, label_width
from .lanes import Lanes, lanes as extract_lanes
from .lanes_draw import LaneDrawing
from .layout import (CHAR, DPI, FONT, LEFT_IN, RIGHT_IN, ROW_LABEL, STRIP_H, STRIP_LEVELS, TIME_W,
                     TITLE_GAP, WIDTH_IN, Panel, Placer, Plot, Shapes, collapse_states, outcome_kind, pack,
                     points)
from .story import story as read_story
from .window import Window, clip_lanes, clip_story


def matplotlib():
    """Import matplotlib lazily (the ``report`` extra) with a clear error when it is missing."""
    try:
        import matplotlib as mpl
        from matplotlib.figure import Figure  # noqa: F401 - checks the submodule too
    except ImportError:
        raise UsageError("the report needs matplotlib: pip install 'crashlab[report]'") from None
    return mpl


RC = {"text.parse_math": False, "text.hinting": "none", "svg.hashsalt": "crashlab", "svg.fonttype": "none",
      "font.size": FONT, "axes.linewidth": 0.6, "font.family": "DejaVu Sans", "path.simplify": True}


__all__ = ["RC", "build_figure", "collapse_states", "figure_png", "matplotlib", "render_figure"]


class _Figure(LaneDrawing):
    WIDTH_IN, LEFT_IN, RIGHT_IN = WIDTH_IN, LEFT_IN, RIGHT_IN

    def __init__(self, events: list[dict], result: ScenarioResult | None, data: Lanes, *,
                 no_answers: bool = False, linear: bool = False, window: Window | None = None,
                 slides: bool = False) -> None:
        self.no_answers = no_answers
        self.events = events
        self.by_seq = {e.get("seq"): e for e in events}
        self.header = events[0]
        self.origin = int(self.header.get("origin_ms") or 0)
        self.result = result
        self.story = read_story(events, data)
        self.window = window.span(self.origin) if window is not None else None
        if self.window is not None:
            self.whole = (data, self.story)
            data = clip_lanes(data, *self.window)
            self.story = clip_story(self.story, *self.window)
        self.data = data
        if slides:      # a projector: 16 x 9 in at 120 dpi (1920 x 1080 px), type 1.6 times as large
            self.FONT, self.WIDTH_IN, self.LEFT_IN, self.RIGHT_IN = 12.0, 16.0, 3.2, 3.9
        self.k = self.FONT / FONT
        self.slides = slides
        self.loc: dict[int, tuple[str, float]] = {}
        times = [m.t for m in data.markers]
        for r in data.runs:
            times += [s.start for s in r.states]
            for w in r.workers:
                times += [w.start] + ([w.end] if w.end is not None else []) + [m.t for m in w.marks]
                times += [p for pair in w.pauses for p in pair if p is not None]
        times += [e.start for e in data.effects] + [e.released for e in data.effects if e.released]
        times += [m.t for m in data.transport]
        times += [s.start for k in data.knowledge for s in k.states]
        times += [c.t for c in self.story.calls] + [c.back for c in self.story.calls if c.back is not None]
        times += [d.t for d in self.story.deliveries] + [a.t for a in self.story.authority]
        end = max(times + [data.end]) if times else data.end
        start = min([data.start] + times)
        if self.window is not None:     # a window is drawn on a plain linear axis: it is the zoom
            start, end = self.window
            times, linear = [t for t in times if start <= t <= end], True
        self.axis = TimeAxis(times, start, end, linear=linear, width=TIME_W, margin=1.2)
        self.placer = Placer()
        self.used: dict[str, set[str]] = {k: set() for k in (
            "worker", "transport", "cause", "run", "knowledge", "marker", "band", "break", "authority", "inbox",
            "arrow", "mismatch", "final")}

    # ---------------------------------------------------------------- helpers
    def char_x(self, size: float) -> float:
        """Width of one character at ``size`` points, in x units."""
        return size * CHAR / 72 / self.plot_w_in * 100

    def _bars(self, ax, y: float, spans: list[tuple[float, float]], colors, height=0.62, edgecolor="#ffffff",
              linewidth=0.6, **kw):
        if spans:
            self.shapes.bars([(a, max(b - a, 0.12)) for a, b in spans], (y - height / 2, height), facecolors=colors,
                             edgecolors=edgecolor, linewidths=linewidth, **kw)

    def _label_in(self, ax, x0: float, x1: float, y: float, texts: list[str], color: str, boxed: bool = False):
        """Write the longest text that fits between x0 and x1."""
        size = self.FONT - 0.5
        for text in texts:
            w = (len(text) + 1) * self.char_x(size)
            if w <= x1 - x0:
                mid = (x0 + x1) / 2
                if not self.placer.free((id(ax), y), mid - w / 2, mid + w / 2, pad=0.1):
                    continue
                self.placer.take((id(ax), y), mid - w / 2, mid + w / 2)
                labels.text(ax, mid, y, text, ha="center", va="center", fontsize=size, color=style.text_color(color),
                            box=("round", 0.15, color, 0.9) if boxed else None, zorder=5)
                return True
        return False

    def _note(self, ax, x: float, y: float, text: str, color: str = "#37474f", size: float | None = None,
              offsets: tuple[float, ...] = (0.0,)):
        """A small label starting at x on row y (or at one of the vertical ``offsets`` from it), if
        it fits beside what is already written there."""
        size = self.FONT - 1 if size is None else size
        w = len(text) * self.char_x(size)
        x0, x1 = x + 0.4, x + 0.4 + w
        if x1 > TIME_W:
            x0, x1 = x - 0.4 - w, x - 0.4
        if x0 < -0.5:
            return False
        for dy in offsets:
            key = (id(ax), round(y + dy, 3))
            if self.placer.free(key, x0, x1) and (dy or self.placer.free((id(ax), y), x0, x1)):
                self.placer.take(key, x0, x1)
                labels.text(ax, x0, y + dy, text, ha="left", va="center", fontsize=size, color=color, zorder=5,
                            box=("square", 0.05, "white", 0.8))
                return True
        return False

    # ---------------------------------------------------------------- rows
    def layout(self):
        d, s = self.data, self.story
        run_p = Panel("run state", top=-STRIP_H - TITLE_GAP + 0.5)
        self.worker_rows: dict[str, float] = {}
        self.state_rows: dict[str, float] = {}
        self.auth_rows: dict[str | None, float] = {}
        self.inbox_rows: dict[str | None, float] = {}
        many = len(d.runs) > 1
        for r in d.runs:
            pre = f"{r.id} " if many else ""
            self.state_rows[r.id] = run_p.add(style.shorten(f"{pre}checkpoint", ROW_LABEL))
            if any(a.run == r.id for a in s.authority):
                self.auth_rows[r.id] = run_p.add(style.shorten(f"{pre}authority", ROW_LABEL))
            mine = [x for x in s.deliveries if x.run == r.id]
            if len(mine) > 1:
                self.inbox_rows[r.id] = run_p.add(style.shorten(f"{pre}inbox", ROW_LABEL))
            subrows = pack([(w.start, w.end) for w in r.workers], self.axis.end)
            ys: dict[int, float] = {}
            for i in range(max(subrows, default=-1) + 1):
                ys[i] = run_p.add(style.shorten(f"{pre}workers" + (f" ({i + 1})" if i else ""), ROW_LABEL))
            for w, sub in zip(r.workers, subrows):
                self.worker_rows[w.name] = ys[sub]
        remote_p = Panel("remote effects", top=run_p.bottom - TITLE_GAP)
        self.service_rows: dict[str, float] = {}
        services = list(dict.fromkeys([c.service for c in s.calls] + [m.label for m in d.transport]))
        for name in services:
            self.service_rows[name] = remote_p.add(style.shorten(f"{name} (service)", ROW_LABEL))
        self.effect_rows: dict[tuple[str, str], float] = {}
        own = [e for e in d.effects if e.cause != "other_actor"]
        shown = own[:10]
        for e in shown:
            label = f"{e.ref} = release of {e.compensates}" if e.compensates else f"{e.service} {e.ref}"
            if many and e.run:
                label = f"{e.run}: {label}"
            self.effect_rows[(e.service, e.ref)] = remote_p.add(style.shorten(label, ROW_LABEL))
        self.more_effects_row = remote_p.add(f"{len(own) - len(shown)} more effects") if len(own) > len(shown) else None
        others = [e for e in d.effects if e.cause == "other_actor"]
        self.other_row = remote_p.add("other actors") if others else None
        know_p = Panel("knowledge", top=remote_p.bottom - TITLE_GAP)
        self.key_rows: dict[str, float] = {}
        for k in d.knowledge[:14]:
            prefix = f"{k.run}: " if many and k.run else ""
            suffix = " (comp.)" if k.kind == "compensation" else ""
            label = prefix + style.shorten(k.key, max(8, ROW_LABEL - len(prefix) - len(suffix))) + suffix
            self.key_rows[k.key] = know_p.add(label)
        self.more_keys = max(0, len(d.knowledge) - 14)
        return run_p, remote_p, know_p

    # ---------------------------------------------------------------- markers, bands, breaks
    def draw_markers(self, ax):
        X = self.axis.x
        groups: list[list] = []
        for m in self.data.markers:
            if groups and groups[-1][0].kind == m.kind and groups[-1][0].label == m.label:
                groups[-1].append(m)
            else:
                groups.append([m])
        lines: dict[str, list[float]] = {}
        bands: list[tuple[float, float]] = []
        for g in groups:
            for m in g:
                if m.seq:
                    self.loc.setdefault(m.seq, ("strip", -STRIP_H / 2))
            if g[0].kind == "fault" and len(g) >= 3:
                bands.append((X(g[0].t), X(g[-1].t)))
                lines.setdefault("fault_tick", []).extend(X(m.t) for m in g)
            else:
                lines.setdefault(g[0].kind, []).extend(X(m.t) for m in g)
        across = ax.get_xaxis_transform()          # x in data, y from the plot's bottom (0) to its top (1)
        for a, b in bands:
            self.shapes.bars([(a, max(b, a + 0.3) - a)], (0, 1), facecolors=legend.BAND_COLOR, alpha=0.45,
                             linewidths=0, zorder=0.2, transform=across)
            self.used["band"].add("fault")
        for kind, xs in lines.items():
            if kind == "fault_tick":
                self.shapes.segments([[(x, -STRIP_H), (x, -STRIP_H + 0.15)] for x in xs],
                                     color=style.MARKERS["fault"][0], linewidth=0.8, zorder=1)
                continue
            color, ls, lw, _ = style.MARKERS.get(kind, style.MARKERS["world"])
            self.shapes.segments([[(x, 0), (x, 1)] for x in xs], color=color, linewidth=lw, linestyle=ls,
                                 alpha=0.45 if kind == "fault" else 0.85, zorder=1, transform=across)
            self.used["marker"].add(kind if kind in style.MARKERS else "world")
        # labels: most important kinds first, on three levels; a label that fits nowhere is left
        # to the legend
        levels = STRIP_LEVELS
        size = self.FONT - 0.5
        order = sorted(groups, key=lambda g: (style.MARKER_PRIORITY.index(g[0].kind)
                                              if g[0].kind in style.MARKER_PRIORITY else 99, g[0].t))
        for g in order:
            m = g[0]
            text = style.clip(m.label, 44) + (f" ×{len(g)}" if len(g) > 1 else "")
            x = X(m.t)
            w = len(text) * self.char_x(size)
            x0, x1 = x + 0.3, x + 0.3 + w
            if x1 > TIME_W:
                x0, x1 = x - 0.3 - w, x - 0.3
            for lvl in levels:
                if x0 >= 0 and self.placer.free(("strip", lvl), x0, x1):
                    self.placer.take(("strip", lvl), x0, x1)
                    color = style.MARKERS.get(m.kind, style.MARKERS["world"])[0]
                    labels.text(ax, x0, lvl, text, fontsize=size, va="center", ha="left", color=color,
                                box=("square", 0.1, "white", 0.85))
                    break

    def draw_breaks(self, ax):
        """Hatch each break; label it with the time it compresses. Breaks whose labels would
        collide share one label with the time of their whole stretch (``≈10 min, 2 breaks``):
        a dropped label would leave its neighbour's duration to be read as the whole gap."""
        if self.axis.breaks:
            self.shapes.bars([(br.x0, br.x1 - br.x0) for br in self.axis.breaks], (0, 1), facecolors="#f4f4f4",
                             edgecolors="#d6d6d6", hatch="////", linewidths=0, zorder=0.3,
                             transform=ax.get_xaxis_transform())
            self.used["break"].add("break")
        size = self.FONT - 1
        self.break_lines = 1
        under = labels.offset(ax.figure, ax.get_xaxis_transform(), 0, -15 * self.k)
        for group in break_groups(self.axis.breaks, lambda label: label_width(label, self.char_x(size)), self.origin):
            mid = (group[0].x0 + group[-1].x1) / 2
            label = break_label(group, self.origin)
            self.break_lines = max(self.break_lines, label.count("\n") + 1)
            labels.text(ax, mid, 0, label, transform=under, ha="center", va="top", fontsize=size, color="#757575",
                        linespacing=1.1)

    # ---------------------------------------------------------------- arrows
    #: This many identical calls in a row (same worker, service, operation and outcome) are drawn
    #: as one mark: the first call's arrows and a band to the last, with a tick per call and a count.
    REPEAT_MIN = 3

    def draw_arrows(self, ax):
        """Each call to a service: a line from the worker's row down to the service's row at the
        time it was sent, and its answer back up at the time it came, coloured by outcome. A run
        of identical calls is one mark with a count (``lookup → unavailable ×27``)."""
        from matplotlib.lines import Line2D

        calls = [c for c in self.story.calls if c.worker in self.worker_rows and c.service in self.service_rows]
        if not calls:
            return
        X = self.axis.x
        remote_ax = ax
        groups: list[list] = []
        for c in calls:
            key = (c.worker, c.op, c.outcome, c.service, outcome_kind(c))
            if groups and (groups[-1][0].worker, groups[-1][0].op, groups[-1][0].outcome, groups[-1][0].service,
                           outcome_kind(groups[-1][0])) == key:
                groups[-1].append(c)
            else:
                groups.append([c])
        segs: dict[str, list] = {}
        heads: dict[str, tuple[list, list, str]] = {}
        ticks: dict[str, list] = {}
        for g in groups:
            repeated = len(g) >= self.REPEAT_MIN
            c = g[0]
            top, low = self.worker_rows[c.worker] - 0.27, self.service_rows[c.service] + 0.2
            if repeated:
                back = outcome_kind(c)
                x0, x1 = X(c.t), X(max(x.back if x.back is not None else x.t for x in g))
                self.shapes.bars([(x0, max(x1 - x0, 0.3))], (low, top - low), facecolors=legend.OUTCOMES[back][0],
                                 alpha=0.13, zorder=0.6)
                ticks.setdefault(back, []).extend([(X(x.t), low - 0.16), (X(x.t), low)] for x in g[1:])
                self.used["arrow"].add("repeat")
            for c in g[:1] if repeated else g:
                x_out = X(c.t)
                kind = "send" if c.send else "read"
                segs.setdefault(kind, []).append([(x_out, top), (x_out, low)])
                heads.setdefault(kind, ([], [], "v"))[0].append(x_out)
                heads[kind][1].append(low)
                self.used["arrow"].add(kind)
                if c.back is not None:
                    back = outcome_kind(c)
                    x_back = X(c.back)
                    segs.setdefault(back, []).append([(x_back, low), (x_back, top)])
                    heads.setdefault(back, ([], [], "^"))[0].append(x_back)
                    heads[back][1].append(top)
                    self.used["arrow"].add(back)
        for kind, lines in segs.items():
            color, ls, _ = legend.OUTCOMES[kind]
            self.shapes.segments(lines, color=color, linewidth=1.0 if kind in ("send", "read") else 0.9, linestyle=ls,
                                 alpha=0.85, zorder=3)
        for kind, lines in ticks.items():
            self.shapes.segments([[a, b] for a, b in lines], color=legend.OUTCOMES[kind][0], linewidth=0.8, zorder=3)
        for kind, (xs, ys, marker) in heads.items():
            ax.add(Line2D(xs, ys, linestyle="none", marker=marker, markersize=3.6 * self.k,
                          color=legend.OUTCOMES[kind][0], zorder=3))
        # one label per run of identical answers: "lookup → unavailable ×27"
        for g in groups:
            c = g[0]
            text = f"{c.op} → {c.outcome}" + (", never seen" if not c.delivered else "") + \
                (f" ×{len(g)}" if len(g) > 1 else "")
            color = legend.OUTCOMES[outcome_kind(c)][0]
            for at in dict.fromkeys([g[0], g[len(g) // 2], g[-1]]):
                x = X(at.back if at.back is not None else at.t)
                if self._note(remote_ax, x, self.service_rows[c.service], text, color=color, size=self.FONT - 1,
                              offsets=(-0.05, -0.33)):
                    break

    # ---------------------------------------------------------------- violations
    def _shown(self, t: int) -> bool:
        return self.window is None or self.window[0] <= t <= self.window[1]

    def locate(self, seq: int) -> tuple[str, float]:
        if seq in self.loc:
            return self.loc[seq]
        worker = self.by_seq[seq].get("worker")
        if worker in self.worker_rows:
            return "run", self.worker_rows[worker]
        return "strip", -STRIP_H / 2

    def draw_violations(self, ax):
        X = self.axis.x
        if self.result is None:
            return []
        placed: dict[str, list[tuple[float, float]]] = {}
        notes = []
        rings: list[tuple[float, float]] = []
        for i, v in enumerate(self.result.violations, 1):
            cited = [s for s in v.events if s in self.by_seq and self._shown(self.by_seq[s].get("t", 0))][:6]
            for j, seq in enumerate(cited):
                where, y = self.locate(seq)
                x = X(self.by_seq[seq].get("t", 0))
                rings.append((x, y))
                if j:
                    continue
                near = [p for p in placed.setdefault(where, []) if abs(p[0] - x) < 3 and p[1] == y]
                dx, dy = self._badge_spot(ax, x, y, len(near))
                placed[where].append((x, y))
                labels.text(ax, x, y, str(i), transform=labels.offset(ax.figure, ax.transData, dx, dy),
                            fontsize=self.FONT, color="white", fontweight="bold", zorder=7,
                            box=("circle", 0.2, style.VIOLATION_COLOR, None))
            notes.append(f"{i}  {v.invariant}: {v.message} [{note_events(v)}]")
        if rings:                       # every cited event's ring: one collection
            points(ax, *zip(*rings), "o", 150, facecolors="none", edgecolors=style.VIOLATION_COLOR, linewidths=1.5,
                   zorder=6)
        return notes

    #: Where a violation's number may sit around its first cited event (points from it).
    BADGE_OFFSETS = ((7, 7), (7, -15), (-17, 7), (-17, -15), (14, -4), (-24, -4), (7, 17), (-17, 17),
                     (7, -25), (-17, -25))

    def _badge_spot(self, ax, x: float, y: float, crowd: int) -> tuple[int, int]:
        """The first offset whose badge covers no label already written (measured in data
        units through the axes' transform) and no other badge; else the crowd's turn."""
        to_display, to_data = ax.transData.transform, ax.transData.inverted().transform
        px = ax.figure.dpi / 72
        X0, Y0 = to_display((x, y))
        (ax0, ay0), (ax1, ay1) = to_data((X0, Y0)), to_data((X0 + 6 * px, Y0 + 6 * px))
        rx, ry = abs(ax1 - ax0), abs(ay1 - ay0)                  # a badge's half size
        text_h = abs(to_data((X0, Y0 + (self.FONT - 1) * 0.75 * px))[1] - ay0)
        for dx, dy in self.BADGE_OFFSETS:
            cx, cy = to_data((X0 + (dx + 4) * px, Y0 + (dy + 4) * px))
            clash = any(abs(ky - cy) < ry + text_h and not (cx + rx < a or cx - rx > b)
                        for (owner, ky), spans in self.placer.taken.items() if owner in (id(ax), "badge", "strip")
                        for a, b in spans)
            if not clash:
                self.placer.take(("badge", round(cy, 3)), cx - rx, cx + rx)
                return dx, dy
        return self.BADGE_OFFSETS[crowd % len(self.BADGE_OFFSETS)]

    def note_lines(self, notes: list[str] | None = None) -> list[str]:
        """The violation list under the plot: at most six violations, each wrapped at word
        boundaries to the width left of the legend (two lines at most), never over it."""
        if notes is None:
            notes = [f"{i}  {v.invariant}: {v.message} [{note_events(v)}]"
                     for i, v in enumerate(self.result.violations, 1)]
        chars = int((self.WIDTH_IN - self.RIGHT_IN - 0.2) * 72 / (self.FONT * CHAR))
        out: list[str] = []
        for note in notes[:6]:
            lines = textwrap.wrap(note, chars, break_on_hyphens=False, subsequent_indent="    ") or [""]
            if len(lines) > 2:
                lines = [lines[0], style.clip(" ".join(lines[1:]), chars)]
            out += lines
        if len(notes) > 6:
            out.append(f"… {len(notes) - 6} more violations in the report")
        return out

    # ---------------------------------------------------------------- the figure
    def build(self):
        from matplotlib.figure import Figure

        run_p, remote_p, know_p = self.layout()
        panels = [run_p, remote_p, know_p]
        span = -know_p.bottom                      # y runs from 0 (top of the strip) down to -span
        notes_n = len(self.note_lines()) if self.result is not None else 0
        k = self.k
        top_in, bottom_in = 0.78 * k, 0.78 * k + 0.16 * k * (notes_n + (2 if notes_n else 0))
        height = top_in + bottom_in + (0.34 if self.slides else 0.3) * k * span
        height = max(9.0, min(20.0, height)) if self.slides else min(15.0, max(7.0, height))
        fig = Figure(figsize=(self.WIDTH_IN, height), dpi=DPI)
        self.plot_w_in = self.WIDTH_IN - self.LEFT_IN - self.RIGHT_IN
        # one plotting area for everything (x is already warped), and no matplotlib Axes
        ax = Plot(fig, (self.LEFT_IN / self.WIDTH_IN, bottom_in / height, self.plot_w_in / self.WIDTH_IN,
                        (height - top_in - bottom_in) / height), (0, 100), (-span, 0))
        row_tr = ax.get_yaxis_transform()
        labels.text(ax, -0.006, -STRIP_H / 2, "faults & events", transform=row_tr, ha="right", va="center",
                    fontsize=self.FONT)
        self.shapes = Shapes(ax)
        self.shapes.segments([[(0, y), (100, y)] for y in [-STRIP_H] + [p.bottom - 0.1 for p in panels[:-1]]],
                             color="#455a64", linewidth=0.6, zorder=2)
        for p in panels:
            for r in p.rows:       # row labels as plain text: cheaper than tick labels
                labels.text(ax, -0.006, r.y, r.label, transform=row_tr, ha="right", va="center", fontsize=self.FONT)
            labels.text(ax, -0.005, p.top + 0.62, p.name.upper(), transform=row_tr, ha="right", va="center",
                        fontsize=self.FONT, fontweight="bold", color="#37474f")
            if not p.rows:
                empty = {"run state": "no checkpoint written", "remote effects": "no remote effect",
                         "knowledge": "no ledger entry"}[p.name]
                labels.text(ax, TIME_W / 2, p.top, empty, ha="center", va="center", color="#9e9e9e",
                            fontsize=self.FONT + 1)
        self.draw_run(ax)
        self.draw_remote(ax)
        self.draw_knowledge(ax)
        self.draw_final(ax)
        self.shapes.flush()         # the lanes' bars, before the markers' lines drawn over them
        self.draw_markers(ax)
        self.draw_breaks(ax)
        self.draw_arrows(ax)
        notes = self.draw_violations(ax)
        key = ("deadline", "cancel", "deploy", "crash")
        xs, ticks = self.axis.ticks(self.origin, [m.t for m in self.data.markers if m.kind in key],
                                    self.char_x(self.FONT))
        bottom_tr = ax.get_xaxis_transform()
        self.shapes.segments([[(x, -0.012), (x, 0)] for x in xs], color="#212121", linewidth=0.6,
                             transform=bottom_tr, clip_on=False)
        self.shapes.segments([[(x, 0), (x, 1)] for x in xs], color="#eeeeee", linewidth=0.6, zorder=0,
                             transform=bottom_tr)
        self.shapes.flush()
        tick_tr = labels.offset(fig, bottom_tr, 0, -4 * k)
        for x, lab in zip(xs, ticks):         # tick labels as plain text: cheaper than Tick artists
            labels.text(ax, x, 0, lab, transform=tick_tr, ha="center", va="top", fontsize=self.FONT)
        scale = "linear time" if not self.axis.breaks else "linear time; hatched breaks compress quiet stretches"
        drop = (-27 - 8 * (self.break_lines - 1) if self.axis.breaks else -16) * k
        labels.text(ax, TIME_W / 2, 0, f"simulated time, scenario clock ({scale})",
                    transform=labels.offset(fig, bottom_tr, 0, drop), ha="center", va="top", fontsize=self.FONT,
                    color="#616161")
        h = self.header
        verdict = self.result.verdict.upper() if self.result is not None else "NOT CHECKED"
        disp = "; ".join(f"{r.id}: {r.disposition or 'no terminal disposition'}" for r in self.data.runs)
        title = f"{h.get('scenario')} — {h.get('title')}"
        size = self.FONT + 4
        while size > self.FONT + 1 and len(title) * (size + 0.6) * CHAR / 72 > self.WIDTH_IN - 0.3:
            size -= 0.5
        labels.fig_text(fig, 0.01, 1 - 0.16 * k / height,
                        style.clip(title, int((self.WIDTH_IN - 0.3) / ((size + 0.6) * CHAR / 72))),
                        fontsize=size, fontweight="bold", va="top")
        shown = "" if self.window is None else \
            f" · window {format_time(self.window[0], self.origin)}–{format_time(self.window[1], self.origin)}"
        labels.fig_text(fig, 0.01, 1 - 0.46 * k / height,
                        style.clip(f"{verdict} · {disp} · seed {h.get('seed')}{shown}"
                                   + ("" if self.no_answers else f" · adapter {h.get('adapter')}"),
                                   175 if k == 1 else int(self.WIDTH_IN * 72 / ((self.FONT + 1) * CHAR)) - 2),
                        fontsize=self.FONT + 1, va="top",
                        color={"PASS": "#1b5e20", "FAIL": "#b71c1c"}.get(verdict, "#e65100"))
        legend.draw(fig, legend.entries(self.used, bool(self.result is not None and self.result.violations)),
                    self.WIDTH_IN - self.RIGHT_IN + 0.15, top_in, height - top_in - 0.25,
                    self.FONT - 1.5 if self.slides else self.FONT)
        for i, line in enumerate(self.note_lines(notes)):
            labels.fig_text(fig, 0.01, (bottom_in - 0.8 * k - 0.16 * k * i) / height, line, fontsize=self.FONT,
                            color="#616161" if line.startswith("… ") else style.VIOLATION_COLOR, va="top")
        return fig


def note_events(v) -> str:
    return (", ".join(f"#{s}" for s in v.events[:6]) + (" …" if len(v.events) > 6 else "")) or "no events"


def build_figure(events: list[dict], result: ScenarioResult | None, *, data: Lanes | None = None,
                 no_answers: bool = False, linear: bool = False, window: Window | None = None,
                 slides: bool = False):
    """The scenario's timeline figure as a matplotlib Figure (call inside ``rc_context(RC)``):
    only the stretch ``window`` when given; ``slides`` for a projector (1920 x 1080 px, large type)."""
    return _Figure(events, result, data if data is not None else extract_lanes(events),
                   no_answers=no_answers, linear=linear, window=window, slides=slides).build()


def render_figure(events: list[dict], result: ScenarioResult | None, out_base: Path, *,
                  data: Lanes | None = None, no_answers: bool = False, linear: bool = False,
                  svg: bool = False, window: Window | None = None, slides: bool = False) -> Path:
    """Draw the scenario's timeline figure; write ``out_base``.png (and .svg when asked);
    return the PNG's path."""
    figure_png(events, result, out_base, data=data, no_answers=no_answers, linear=linear, svg=svg, window=window,
               slides=slides)
    return out_base.with_suffix(".png")


def figure_png(events: list[dict], result: ScenarioResult | None, out_base: Path, *,
               data: Lanes | None = None, no_answers: bool = False, linear: bool = False,
               svg: bool = False, window: Window | None = None, slides: bool = False) -> bytes:
    """:func:`render_figure`, returning the PNG's bytes (the report embeds them without reading
    the file back)."""
    mpl = matplotlib()
    with mpl.rc_context(RC):
        fig = build_figure(events, result, data=data, no_answers=no_answers, linear=linear, window=window,
                           slides=slides)
        png = _palette_png(fig)
        atomic_write_bytes(out_base.with_suffix(".png"), png)
        if svg:
            fig.savefig(out_base.with_suffix(".svg"), format="svg", metadata={"Date": None, "Creator": None})
    return png


def _palette_png(fig) -> bytes:
    """Render with Agg and write a 256-colour palette PNG: a third of the size of an RGBA PNG
    with the same flat colours (Pillow ships with matplotlib). The palette is chosen from
    every other pixel of every other row and each pixel then takes its nearest colour: under
    half the time of choosing it from all of them, and as close to the drawing (a figure's
    colours are flat areas, lines and the anti-aliased edges between them)."""
    from PIL import Image

    from .agg import Canvas

    canvas = fig.canvas if isinstance(fig.canvas, Canvas) else Canvas(fig)
    canvas.draw()
    width, height = canvas.get_width_height()
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).convert("RGB")
    sample = image.resize((max(1, width // 2), max(1, height // 2)), Image.Resampling.NEAREST)
    palette = sample.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    pal = image.quantize(palette=palette, dither=Image.Dither.NONE)
    out = io.BytesIO()
    pal.save(out, format="PNG", dpi=(DPI, DPI), compress_level=1)   # a quarter of the time, 20 % larger
    return out.getvalue()
