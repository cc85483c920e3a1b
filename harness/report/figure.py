"""The per-scenario figure: three timelines aligned on simulated time.

Top to bottom: a marker strip (faults, crashes, pauses, cancellations, deployments, the
business deadline), the run lane (checkpoint states with their versions; each worker's
lifetime as a bar with its lease epochs), the remote lane (every record a service really
holds, as a bar from commit to release; transport ground truth as glyphs; other actors'
traffic) and the knowledge lane (ledger knowledge per semantic key). Violations are
numbered red rings at the events they cite, listed under the plot.

The time axis is the scenario clock, mildly non-linear: half of the width is proportional
to time, the other half to the logarithm of the gaps between events, so a burst of
millisecond port calls and a ten-minute wait are both readable.
"""
from __future__ import annotations

import io
import math
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..results import ScenarioResult
from ..scenario import format_time
from . import style
from .lanes import Lanes, lanes as extract_lanes

WIDTH_IN = 13.0
DPI = 120
LEFT_IN, RIGHT_IN = 2.05, 2.55        # room for row labels and the legend
FONT = 7.5
ROW_LABEL = 30                       # characters of a row label


def matplotlib():
    """Import matplotlib lazily (the ``report`` extra) with a clear error when it is missing."""
    try:
        import matplotlib as mpl
        from matplotlib.figure import Figure  # noqa: F401 - checks the submodule too
    except ImportError:
        raise UsageError("the report needs matplotlib: pip install 'crashlab[report]'") from None
    return mpl


RC = {"text.parse_math": False, "text.hinting": "none", "svg.hashsalt": "crashlab", "svg.fonttype": "none",
      "font.size": FONT, "axes.linewidth": 0.6, "font.family": "DejaVu Sans",
      "path.simplify": True}


# --------------------------------------------------------------------------- time axis
class TimeAxis:
    """Simulated ms -> x in [0, 100]: half linear in time, half a sum over the gaps between
    distinct event times of (1 + log(1 + gap in ms)), so bursts get room and long waits stay long."""

    LINEAR = 0.5
    STEP = 1.0        # every distinct event time gets at least this much room (log part)

    def __init__(self, times: list[int], start: int, end: int) -> None:
        self.start, self.end = start, max(end, start + 1)
        self.ts = sorted({t for t in times if self.start <= t <= self.end} | {self.start, self.end})
        cum = [0.0]
        for a, b in zip(self.ts, self.ts[1:]):
            cum.append(cum[-1] + self._gap(b - a, b - a))
        self.cum = cum
        self.total = cum[-1] or 1.0

    def _gap(self, dt: float, gap: float) -> float:
        return self.STEP * dt / gap + math.log1p(dt) if gap else 0.0

    def x(self, t: float | None) -> float:
        t = self.end if t is None else min(max(t, self.start), self.end)
        i = max(0, bisect_right(self.ts, t) - 1)
        gap = self.ts[i + 1] - self.ts[i] if i + 1 < len(self.ts) else 0
        logpart = (self.cum[i] + self._gap(t - self.ts[i], gap)) / self.total
        linpart = (t - self.start) / (self.end - self.start)
        return 100.0 * (self.LINEAR * linpart + (1 - self.LINEAR) * min(1.0, logpart))

    def ticks(self, origin_ms: int, important: list[int], min_gap: float) -> tuple[list[float], list[str]]:
        """Tick positions and labels: the start, the important moments, round times of a step
        that gives about eight ticks, then rounder-than-needed times inside the widened bursts
        (the first multiple of each finer step after each event), skipping any that would crowd
        an earlier choice."""
        span = self.end - self.start
        steps = [1, 5, 10, 50, 100, 500, 1000, 5000, 10_000, 30_000, 60_000, 300_000, 600_000,
                 1_800_000, 3_600_000, 6 * 3_600_000, 86_400_000]
        primary = next((s for s in steps if span / s <= 8), steps[-1])
        first = -(-(self.start + origin_ms) // primary) * primary - origin_ms
        candidates = [self.start] + list(important) + list(range(first, self.end + 1, primary))
        for step in reversed([s for s in steps if s < primary]):
            candidates += [-(-(t + origin_ms) // step) * step - origin_ms for t in self.ts]
        chosen: list[float] = []
        labels: list[str] = []
        for t in candidates:
            if not self.start <= t <= self.end:
                continue
            x = self.x(t)
            if all(abs(x - c) >= min_gap for c in chosen):
                chosen.append(x)
                labels.append(format_time(int(t), origin_ms))
        order = sorted(range(len(chosen)), key=chosen.__getitem__)
        return [chosen[i] for i in order], [labels[i] for i in order]


# --------------------------------------------------------------------------- layout
@dataclass(slots=True)
class Row:
    label: str
    y: float


@dataclass(slots=True)
class Panel:
    name: str
    rows: list[Row] = field(default_factory=list)

    def add(self, label: str) -> float:
        y = -float(len(self.rows))
        self.rows.append(Row(label, y))
        return y

    @property
    def height(self) -> float:
        return max(1.0, len(self.rows))


def _pack(intervals: list[tuple[int, int | None]], end: int) -> list[int]:
    """Assign each interval to the first sub-row where it does not overlap (zombies overlap)."""
    ends: list[int] = []
    out = []
    for start, stop in intervals:
        stop = end if stop is None else stop
        for i, e in enumerate(ends):
            if start >= e:
                ends[i] = stop
                out.append(i)
                break
        else:
            ends.append(stop)
            out.append(len(ends) - 1)
    return out


# --------------------------------------------------------------------------- drawing
LINE_MARKERS = frozenset("x|_+1234")


def _scatter(ax, xs, ys, marker: str, color: str, filled: bool, size: float, zorder: int = 4):
    if marker in LINE_MARKERS:         # line-only glyphs have no face
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.3, color=color)
    else:
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.1,
                   facecolors=color if filled else "none", edgecolors=color)


class _Figure:
    def __init__(self, events: list[dict], result: ScenarioResult | None, data: Lanes, *,
                 no_answers: bool = False, linear: bool = False) -> None:
        self.no_answers = no_answers
        self.linear = linear
        self.events = events
        self.by_seq = {e.get("seq"): e for e in events}
        self.header = events[0]
        self.origin = int(self.header.get("origin_ms") or 0)
        self.result = result
        self.data = data
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
        end = max(times + [data.end]) if times else data.end
        start = min([data.start] + times)
        pad = max(1, int((end - start) * 0.02))
        self.axis = TimeAxis(times, start, end + pad)
        self.used_glyphs: dict[str, set[str]] = {"worker": set(), "transport": set(), "cause": set(),
                                                 "run": set(), "knowledge": set(), "marker": set()}

    # ---------------------------------------------------------------- layout of rows
    def layout(self):
        d = self.data
        run_p, remote_p, know_p = Panel("run state"), Panel("remote effects"), Panel("knowledge")
        self.worker_rows: dict[str, float] = {}
        self.state_rows: dict[str, float] = {}
        for r in d.runs:
            self.state_rows[r.id] = run_p.add(style.shorten(f"{r.id} checkpoint", ROW_LABEL))
            subrows = _pack([(w.start, w.end) for w in r.workers], self.axis.end)
            ys: dict[int, float] = {}
            for i in range(max(subrows, default=-1) + 1):
                ys[i] = run_p.add(style.shorten(f"{r.id} workers" + (f" ({i + 1})" if i else ""), ROW_LABEL))
            for w, sub in zip(r.workers, subrows):
                self.worker_rows[w.name] = ys[sub]
        self.effect_rows: dict[tuple[str, str], float] = {}
        own = [e for e in d.effects if e.cause != "other_actor"]
        shown = own[:10]
        for e in shown:
            label = f"{e.service} {e.ref}" + (f" (release of {e.compensates})" if e.compensates else "")
            if len(d.runs) > 1 and e.run:
                label = f"{e.run}: {label}"
            self.effect_rows[(e.service, e.ref)] = remote_p.add(style.shorten(label, ROW_LABEL))
        self.more_effects_row = remote_p.add(f"{len(own) - len(shown)} more effects") \
            if len(own) > len(shown) else None
        self.transport_row = remote_p.add("transport") if d.transport else None
        others = [e for e in d.effects if e.cause == "other_actor"]
        self.other_row = remote_p.add("other actors") if others else None
        self.key_rows: dict[str, float] = {}
        for k in d.knowledge[:14]:
            prefix = f"{k.run}: " if len(d.runs) > 1 and k.run else ""
            suffix = " (comp.)" if k.kind == "compensation" else ""
            label = prefix + style.shorten(k.key, max(8, ROW_LABEL - len(prefix) - len(suffix))) + suffix
            self.key_rows[k.key] = know_p.add(label)
        self.more_keys = max(0, len(d.knowledge) - 14)
        return run_p, remote_p, know_p

    # ---------------------------------------------------------------- helpers
    def _bars(self, ax, y: float, spans: list[tuple[float, float]], colors: list[str], height=0.62,
              **kw):
        if spans:
            ax.broken_barh([(a, max(b - a, 0.12)) for a, b in spans], (y - height / 2, height),
                           facecolors=colors, edgecolor="#ffffff", linewidth=0.6, **kw)

    def _label_in(self, ax, x0: float, x1: float, y: float, texts: list[str], color: str,
                  boxed: bool = False):
        """Write the longest text that fits between x0 and x1 (data units)."""
        width_in = (x1 - x0) / 100.0 * self.plot_w_in
        for text in texts:
            if len(text) * FONT * 0.7 / 72 <= width_in - 0.06:
                box = dict(boxstyle="round,pad=0.15", fc=color, ec="none", alpha=0.9) if boxed else None
                ax.text((x0 + x1) / 2, y, text, ha="center", va="center", fontsize=FONT - 0.5,
                        color=style.text_color(color), clip_on=True, bbox=box)
                return

    def _glyphs(self, ax, points: dict[tuple[str, str], list[tuple[float, float]]], table: dict,
                group: str, size: float = 30):
        for (kind, _), pts in sorted(points.items()):
            glyph, color, filled, _label = table[kind]
            xs, ys = zip(*pts)
            _scatter(ax, xs, ys, glyph, color, filled, size)
            self.used_glyphs[group].add(kind)

    # ---------------------------------------------------------------- lanes
    def draw_run(self, ax):
        X = self.axis.x
        points: dict[tuple[str, str], list] = {}
        for r in self.data.runs:
            y = self.state_rows[r.id]
            spans = [(X(s.start), X(s.end)) for s in r.states]
            colors = [style.RUN_COLORS.get(s.label, style.UNKNOWN_COLOR) for s in r.states]
            self._bars(ax, y, spans, colors)
            for s, (a, b), c in zip(r.states, spans, colors):
                self.used_glyphs["run"].add(s.label)
                self.loc[s.seq] = ("run", y)
                self._label_in(ax, a, b, y, [f"v{s.version} {s.label}", f"v{s.version}"], c)
            for w in r.workers:
                wy = self.worker_rows[w.name]
                a, b = X(w.start), X(w.end)
                self._bars(ax, wy, [(a, b)], [style.WORKER_COLOR], height=0.5)
                for p0, p1 in w.pauses:
                    ax.broken_barh([(X(p0), max(X(p1) - X(p0), 0.12))], (wy - 0.25, 0.5),
                                   facecolors="none", edgecolor="#6a1b9a", hatch="////", linewidth=0.6)
                for l0, l1, epoch in w.leases:
                    shade = style.LEASE_COLORS[(epoch or 0) % 2]
                    ax.plot([X(l0), X(l1)], [wy - 0.36, wy - 0.36], color=shade, linewidth=1.6,
                            solid_capstyle="butt")
                    ax.plot([X(l0)], [wy - 0.36], marker="|", color=shade, markersize=6)
                epochs = "→".join(f"e{e}" for e in dict.fromkeys(e for _, _, e in w.leases))
                short = w.name.rsplit("/", 1)[-1]
                self._label_in(ax, a, b, wy, [f"{short} {epochs}".strip(), short], style.WORKER_COLOR,
                               boxed=bool(w.pauses))
                self.loc[w.seq] = ("run", wy)
                if w.end_kind in ("crash", "adapter_fault"):
                    points.setdefault((w.end_kind, w.name), []).append((b, wy))
                for m in w.marks:
                    self.loc[m.seq] = ("run", wy)
                    kind = m.kind
                    if kind == "lease":
                        continue
                    if kind == "finish" and not m.ok:
                        kind = "finish_stale"
                    if kind == "adapter_fault":
                        continue
                    points.setdefault((kind, ""), []).append((X(m.t), wy))
                if w.leases:
                    self.used_glyphs["worker"].add("lease")
                if w.pauses:
                    self.used_glyphs["worker"].add("paused")
        self._glyphs(ax, points, style.WORKER_GLYPHS, "worker")

    def draw_remote(self, ax):
        X = self.axis.x
        for e in self.data.effects:
            if e.cause == "other_actor":
                continue
            row = self.effect_rows.get((e.service, e.ref))
            color = style.CAUSE_COLORS.get(e.cause, "#455a64")
            self.used_glyphs["cause"].add(e.cause)
            if row is None:
                ax.scatter([X(e.start)], [self.more_effects_row], marker="o", s=22, color=color, zorder=4)
                self.loc[e.seq] = ("remote", self.more_effects_row)
                continue
            self.loc[e.seq] = ("remote", row)
            if e.compensates:       # a release is an instantaneous effect of its own
                ax.scatter([X(e.start)], [row], marker="v", s=46, color=color, zorder=4)
                ax.text(X(e.start) + 0.6, row, e.ref, va="center", fontsize=FONT - 0.5, color="#212121")
                continue
            a, b = X(e.start), X(e.released)
            self._bars(ax, row, [(a, b)], [color], height=0.5, alpha=0.9)
            if e.released is not None:
                ax.plot([b, b], [row - 0.3, row + 0.3], color="#212121", linewidth=1.4)
                self.loc[e.released_seq] = ("remote", row)
                self.used_glyphs["cause"].add("released")
            self._label_in(ax, a, b, row, [f"{e.ref} key {style.shorten(e.key, 18)}", e.ref], color)
        if self.transport_row is not None:
            points: dict[tuple[str, str], list] = {}
            for m in self.data.transport:
                points.setdefault((m.kind, ""), []).append((X(m.t), self.transport_row))
                self.loc[m.seq] = ("remote", self.transport_row)
            self._glyphs(ax, points, style.TRANSPORT_GLYPHS, "transport")
        if self.other_row is not None:
            others = [e for e in self.data.effects if e.cause == "other_actor"]
            ax.scatter([X(e.start) for e in others], [self.other_row] * len(others), marker="o", s=22,
                       color=style.CAUSE_COLORS["other_actor"], edgecolors="#78909c", zorder=4)
            for e in others:
                self.loc[e.seq] = ("remote", self.other_row)
            self.used_glyphs["cause"].add("other_actor")

    def draw_knowledge(self, ax):
        X = self.axis.x
        for k in self.data.knowledge:
            y = self.key_rows.get(k.key)
            if y is None:
                continue
            spans = [(X(s.start), X(s.end)) for s in k.states]
            colors = [style.KNOWLEDGE_COLORS.get(s.label, style.UNKNOWN_COLOR) for s in k.states]
            self._bars(ax, y, spans, colors)
            for s, (a, b), c in zip(k.states, spans, colors):
                self.used_glyphs["knowledge"].add(s.label)
                self.loc[s.seq] = ("knowledge", y)
                self._label_in(ax, a, b, y, [s.label, style.abbreviation(s.label)], c)
            if k.stale:
                ax.scatter([X(m.t) for m in k.stale], [y] * len(k.stale), marker="x", s=36,
                           color="#c62828", zorder=4)
                self.used_glyphs["knowledge"].add("stale")
        if self.more_keys:
            ax.text(0.995, 0.02, f"+{self.more_keys} more keys (see the report)", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=FONT - 1, color="#616161")

    def draw_markers(self, axes, strip):
        X = self.axis.x
        by_kind: dict[str, list[float]] = {}
        for m in self.data.markers:
            by_kind.setdefault(m.kind, []).append(X(m.t))
            self.loc.setdefault(m.seq, ("strip", 0.5)) if m.seq else None
        for kind, xs in by_kind.items():
            color, ls, lw, _ = style.MARKERS.get(kind, style.MARKERS["world"])
            alpha = 0.45 if kind == "fault" else 0.85
            for ax in axes:
                ax.vlines(xs, 0, 1, transform=ax.get_xaxis_transform(), colors=color, linestyles=ls,
                          linewidths=lw, alpha=alpha, zorder=1)
            strip.vlines(xs, 0, 1, transform=strip.get_xaxis_transform(), colors=color, linestyles=ls,
                         linewidths=lw, alpha=alpha, zorder=1)
            self.used_glyphs["marker"].add(kind)
        # Labels: consecutive markers of one kind and label collapse into "label ×n"; placed on
        # three staggered levels, most important kinds first; a label that fits nowhere is left
        # to the legend.
        groups: list[tuple[str, str, float, int]] = []
        for m in self.data.markers:
            if groups and groups[-1][0] == m.kind and groups[-1][1] == m.label:
                k, lab, x, n = groups[-1]
                groups[-1] = (k, lab, x, n + 1)
            else:
                groups.append((m.kind, m.label, X(m.t), 1))
        levels = [0.78, 0.5, 0.22]
        taken: list[list[tuple[float, float]]] = [[] for _ in levels]
        char = FONT * 0.6 / 72 / self.plot_w_in * 100
        order = sorted(groups, key=lambda g: (style.MARKER_PRIORITY.index(g[0])
                                              if g[0] in style.MARKER_PRIORITY else 99, g[2]))
        for kind, label, x, n in order:
            text = style.shorten(label, 28) + (f" ×{n}" if n > 1 else "")
            x0, x1 = x + 0.3, x + 0.3 + len(text) * char
            if x1 > 100:
                x0, x1 = x - 0.3 - len(text) * char, x - 0.3
            for lvl, spans in zip(levels, taken):
                if all(x1 < a - 0.4 or x0 > b + 0.4 for a, b in spans):
                    spans.append((x0, x1))
                    color = style.MARKERS.get(kind, style.MARKERS["world"])[0]
                    strip.text(x0, lvl, text, fontsize=FONT - 0.5, va="center", ha="left", color=color,
                               bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
                    break

    def locate(self, seq: int) -> tuple[str, float]:
        """Where an event is drawn: its own glyph or bar, else its worker's row, else the strip."""
        if seq in self.loc:
            return self.loc[seq]
        worker = self.by_seq[seq].get("worker")
        if worker in self.worker_rows:
            return "run", self.worker_rows[worker]
        return "strip", 0.5

    def draw_violations(self, axes_by_name):
        X = self.axis.x
        if self.result is None:
            return []
        placed: dict[str, list[tuple[float, float]]] = {}
        notes = []
        for i, v in enumerate(self.result.violations, 1):
            cited = [s for s in v.events if s in self.by_seq][:6]
            for j, seq in enumerate(cited):
                where, y = self.locate(seq)
                if where not in axes_by_name:
                    where, y = "strip", 0.5
                ax = axes_by_name[where]
                x = X(self.by_seq[seq].get("t", 0))
                ax.scatter([x], [y], s=150, facecolors="none", edgecolors=style.VIOLATION_COLOR,
                           linewidths=1.5, zorder=6)
                if j:
                    continue
                near = [p for p in placed.setdefault(where, []) if abs(p[0] - x) < 3 and p[1] == y]
                offsets = [(7, 7), (7, -15), (-17, 7), (-17, -15), (14, -4), (-24, -4)]
                dx, dy = offsets[len(near) % len(offsets)]
                placed[where].append((x, y))
                ax.annotate(str(i), xy=(x, y), xytext=(dx, dy), textcoords="offset points",
                            fontsize=FONT, color="white", fontweight="bold", zorder=7,
                            bbox=dict(boxstyle="circle,pad=0.2", fc=style.VIOLATION_COLOR, ec="none"))
            ev = ", ".join(f"#{s}" for s in v.events[:6]) + (" …" if len(v.events) > 6 else "")
            notes.append(f"{i}  {v.invariant}: {v.message} [{ev or 'no events'}]")
        return notes

    # ---------------------------------------------------------------- legend
    def legend_entries(self) -> list[tuple[str, dict, str]]:
        """(kind, drawing spec, label) for everything this figure uses; kind is section, patch,
        line or glyph. Drawn by hand (a matplotlib Legend costs a third of the render time)."""
        out: list[tuple[str, dict, str]] = []
        used = self.used_glyphs

        def glyph(table, kind):
            g, color, filled, label = table[kind]
            out.append(("glyph", {"marker": g, "color": color, "filled": filled}, label))

        if used["marker"]:
            out.append(("section", {}, "markers"))
            for kind, (color, ls, lw, label) in style.MARKERS.items():
                if kind in used["marker"]:
                    out.append(("line", {"color": color, "linestyle": ls, "linewidth": max(lw, 1.2)}, label))
        out.append(("section", {}, "run state"))
        for state, color in style.RUN_COLORS.items():
            if state in used["run"]:
                out.append(("patch", {"facecolor": color}, state))
        out.append(("patch", {"facecolor": style.WORKER_COLOR}, "worker alive"))
        if "lease" in used["worker"]:
            out.append(("line", {"color": style.LEASE_COLORS[1], "linewidth": 1.6}, "lease held (until expiry)"))
        if "paused" in used["worker"]:
            out.append(("patch", {"facecolor": "white", "edgecolor": "#6a1b9a", "hatch": "////"},
                        "paused (zombie)"))
        for kind in style.WORKER_GLYPHS:
            if kind in used["worker"]:
                glyph(style.WORKER_GLYPHS, kind)
        if used["cause"] or used["transport"]:
            out.append(("section", {}, "remote effects"))
            for cause, color in style.CAUSE_COLORS.items():
                if cause in used["cause"]:
                    out.append(("patch", {"facecolor": color}, style.CAUSE_LABELS[cause]))
            if "released" in used["cause"]:
                out.append(("glyph", {"marker": "|", "color": "#212121", "filled": True}, "released (compensation)"))
            for kind in style.TRANSPORT_GLYPHS:
                if kind in used["transport"]:
                    glyph(style.TRANSPORT_GLYPHS, kind)
        if used["knowledge"]:
            out.append(("section", {}, "knowledge"))
            for k, color in style.KNOWLEDGE_COLORS.items():
                if k in used["knowledge"]:
                    out.append(("patch", {"facecolor": color}, k))
            if "stale" in used["knowledge"]:
                out.append(("glyph", {"marker": "x", "color": "#c62828", "filled": True}, "append under a stale epoch"))
        if self.result is not None and self.result.violations:
            out.append(("section", {}, "violations"))
            out.append(("glyph", {"marker": "o", "color": style.VIOLATION_COLOR, "filled": False, "size": 60},
                        "cited evidence event"))
        return out

    def draw_legend(self, fig, left: float, bottom: float, width: float, height: float,
                    height_in: float) -> None:
        from matplotlib.patches import Rectangle

        entries = self.legend_entries()
        ax = fig.add_axes((left, bottom, width, height))
        ax.set_axis_off()
        ax.set_xlim(0, 1)
        ax.set_ylim(height_in, 0)                     # inches from the top
        step = min(0.165, (height_in - 0.05) / max(1, len(entries)))
        for i, (kind, spec, label) in enumerate(entries):
            y = 0.08 + i * step
            if kind == "section":
                ax.text(0.0, y, label, fontsize=FONT - 0.5, fontweight="bold", va="center", color="#37474f")
                continue
            if kind == "patch":
                ax.add_patch(Rectangle((0.0, y - 0.045), 0.08, 0.09, facecolor=spec["facecolor"],
                                       edgecolor=spec.get("edgecolor", "none"), hatch=spec.get("hatch"),
                                       linewidth=0.6))
            elif kind == "line":
                ax.plot([0.0, 0.08], [y, y], color=spec["color"], linestyle=spec.get("linestyle", "-"),
                        linewidth=spec["linewidth"])
            else:
                _scatter(ax, [0.04], [y], spec["marker"], spec["color"], spec["filled"], spec.get("size", 30))
            ax.text(0.12, y, label, fontsize=FONT - 0.5, va="center")

    # ---------------------------------------------------------------- the figure
    def build(self):
        from matplotlib.figure import Figure

        run_p, remote_p, know_p = self.layout()
        panels = [run_p, remote_p, know_p]
        rows = sum(p.height for p in panels)
        notes_n = min(len(self.result.violations), 6) if self.result is not None else 0
        height = min(13.0, max(7.0, 2.3 + 0.3 * rows + 0.17 * notes_n))
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
        self.plot_w_in = WIDTH_IN - LEFT_IN - RIGHT_IN
        top_in, bottom_in = 0.75, 0.62 + 0.16 * (notes_n + (2 if notes_n else 0))
        gs = fig.add_gridspec(4, 1, height_ratios=[0.9] + [p.height + 0.6 for p in panels],
                              left=LEFT_IN / WIDTH_IN, right=1 - RIGHT_IN / WIDTH_IN,
                              top=1 - top_in / height, bottom=bottom_in / height, hspace=0.12)
        strip = fig.add_subplot(gs[0])
        axes = [fig.add_subplot(gs[i + 1]) for i in range(3)]   # x is already warped: no sharing
        key = ("deadline", "cancel", "deploy", "crash")
        xs, labels = self.axis.ticks(self.origin, [m.t for m in self.data.markers if m.kind in key],
                                     min_gap=8.5)
        strip.set_ylim(0, 1)
        strip.set_yticks([0.5], ["faults & events"])
        for ax, p in zip(axes, panels):
            ax.set_ylim(-p.height + 0.4, 0.6)
            ax.set_yticks([r.y for r in p.rows], [r.label for r in p.rows])
            ax.vlines(xs, 0, 1, transform=ax.get_xaxis_transform(), colors="#eeeeee", linewidths=0.6,
                      zorder=0)
            ax.tick_params(axis="y", length=0, labelsize=FONT)
            ax.text(-0.005, 1.0, p.name.upper(), transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=FONT, fontweight="bold", color="#37474f")
            if not p.rows:
                ax.text(50, 0, {"run state": "no checkpoint written", "remote effects": "no remote effect",
                                "knowledge": "no ledger entry"}[p.name],
                        ha="center", va="center", color="#9e9e9e", fontsize=FONT + 1)
        for ax in [strip] + axes:
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            ax.set_xlim(0, 100)
            ax.set_xticks([])
        strip.spines["left"].set_visible(False)
        strip.tick_params(axis="y", length=0)
        self.draw_run(axes[0])
        self.draw_remote(axes[1])
        self.draw_knowledge(axes[2])
        self.draw_markers(axes, strip)
        notes = self.draw_violations({"strip": strip, "run": axes[0], "remote": axes[1],
                                      "knowledge": axes[2]})
        axes[2].set_xticks(xs, labels)
        axes[2].tick_params(axis="x", length=3, labelsize=FONT)
        axes[2].set_xlabel("simulated time, scenario clock (bursts of activity are widened)",
                           fontsize=FONT, color="#616161")
        h = self.header
        verdict = self.result.verdict.upper() if self.result is not None else "NOT CHECKED"
        disp = "; ".join(f"{r.id}: {r.disposition or 'no terminal disposition'}" for r in self.data.runs)
        fig.text(0.01, 1 - 0.18 / height, style.shorten(f"{h.get('scenario')} — {h.get('title')}", 120),
                 fontsize=FONT + 4, fontweight="bold", va="top")
        fig.text(0.01, 1 - 0.48 / height,
                 style.shorten(f"{verdict} · {disp} · seed {h.get('seed')}"
                               + ("" if self.no_answers else f" · adapter {h.get('adapter')}"), 190),
                 fontsize=FONT + 1, va="top",
                 color={"PASS": "#1b5e20", "FAIL": "#b71c1c"}.get(verdict, "#e65100"))
        legend_h = height - top_in - 0.25
        self.draw_legend(fig, 1 - (RIGHT_IN - 0.15) / WIDTH_IN, (height - top_in - legend_h) / height,
                         (RIGHT_IN - 0.2) / WIDTH_IN, legend_h / height, legend_h)
        for i, note in enumerate(notes[:6]):
            fig.text(0.01, (bottom_in - 0.66 - 0.16 * i) / height, style.shorten(note, 200), fontsize=FONT,
                     color=style.VIOLATION_COLOR, va="top")
        if len(notes) > 6:
            fig.text(0.01, (bottom_in - 0.66 - 0.16 * 6) / height, f"… {len(notes) - 6} more violations in the "
                     "report", fontsize=FONT, color="#616161", va="top")
        return fig


def build_figure(events: list[dict], result: ScenarioResult | None, *, data: Lanes | None = None,
                 no_answers: bool = False, linear: bool = False):
    """The scenario's timeline figure as a matplotlib Figure (call inside ``rc_context(RC)``)."""
    return _Figure(events, result, data if data is not None else extract_lanes(events),
                   no_answers=no_answers, linear=linear).build()


def render_figure(events: list[dict], result: ScenarioResult | None, out_base: Path, *,
                  data: Lanes | None = None, no_answers: bool = False, linear: bool = False,
                  svg: bool = False) -> Path:
    """Draw the scenario's timeline figure; write ``out_base``.png (and .svg when asked);
    return the PNG's path."""
    mpl = matplotlib()
    with mpl.rc_context(RC):
        fig = build_figure(events, result, data=data, no_answers=no_answers, linear=linear)
        png = out_base.with_suffix(".png")
        png.write_bytes(_palette_png(fig))
        if svg:
            fig.savefig(out_base.with_suffix(".svg"), format="svg", metadata={"Date": None, "Creator": None})
    return png


def _palette_png(fig) -> bytes:
    """Render with Agg and write a 256-colour palette PNG: a third of the size of an RGBA PNG
    with the same flat colours (Pillow ships with matplotlib)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width, height = canvas.get_width_height()
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    pal = image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                                        dither=Image.Dither.NONE)
    out = io.BytesIO()
    pal.save(out, format="PNG", dpi=(DPI, DPI))
    return out.getvalue()
