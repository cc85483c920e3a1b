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
hatched zones labelled with their duration (harness.report.axis); ``linear=True`` draws a
plain linear axis.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..results import ScenarioResult
from . import legend, style
from .axis import TimeAxis, duration_label
from .lanes import Lanes, Segment, lanes as extract_lanes
from .story import story as read_story

WIDTH_IN = 13.0
DPI = 120
LEFT_IN, RIGHT_IN = 2.1, 2.6          # room for row labels and the legend
FONT = 7.5
ROW_LABEL = 28                       # characters of a row label
TIME_W = 82.0                        # x of the time axis: 0 .. TIME_W
FINAL_X0, FINAL_X1 = 84.5, 100.0     # the "where it ended" column
CHAR = 0.62                          # average glyph width of DejaVu Sans, in em (a safe estimate)


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


class Placer:
    """Keeps the x-intervals taken on each line of text, so labels never overlap."""

    def __init__(self) -> None:
        self.taken: dict[object, list[tuple[float, float]]] = {}

    def free(self, key: object, x0: float, x1: float, pad: float = 0.4) -> bool:
        return all(x1 < a - pad or x0 > b + pad for a, b in self.taken.get(key, ()))

    def take(self, key: object, x0: float, x1: float) -> None:
        self.taken.setdefault(key, []).append((x0, x1))


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


def collapse_states(states: tuple[Segment, ...]) -> list[tuple[Segment, Segment, list[int]]]:
    """Consecutive checkpoints in the same state become one block: (first, last, seqs)."""
    out: list[tuple[Segment, Segment, list[int]]] = []
    for s in states:
        if out and out[-1][1].label == s.label:
            first, _, seqs = out[-1]
            out[-1] = (first, s, seqs + [s.seq])
        else:
            out.append((s, s, [s.seq]))
    return out


LINE_MARKERS = frozenset("x|_+1234")


def _scatter(ax, xs, ys, marker: str, color: str, filled: bool, size: float, zorder: int = 4, **kw):
    if marker in LINE_MARKERS:         # line-only glyphs have no face
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.3, color=color, **kw)
    else:
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.1,
                   facecolors=color if filled else "none", edgecolors=color, **kw)


def _fit(text: str, limit: int) -> str:
    """Cut a sentence at its end (a title reads from the start)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _disposition_words(text: str, duplicate: bool) -> str:
    """A delivery's disposition in a few words: "accepted", "no transition"."""
    if not duplicate:
        return style.shorten(text.split(":")[0], 24)
    tail = text.split(": ", 1)[-1]
    return style.shorten(tail.rsplit(", ", 1)[-1], 24)


def _outcome_kind(call) -> str:
    if not call.delivered:
        return "lost"
    if call.outcome == "ok":
        return "ok"
    return "definite" if call.definite else "indefinite"


# --------------------------------------------------------------------------- the figure
class _Figure:
    def __init__(self, events: list[dict], result: ScenarioResult | None, data: Lanes, *,
                 no_answers: bool = False, linear: bool = False) -> None:
        self.no_answers = no_answers
        self.events = events
        self.by_seq = {e.get("seq"): e for e in events}
        self.header = events[0]
        self.origin = int(self.header.get("origin_ms") or 0)
        self.result = result
        self.data = data
        self.story = read_story(events, data)
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
        self.axis = TimeAxis(times, start, end, linear=linear, width=TIME_W, margin=1.2)
        self.placer = Placer()
        self.used: dict[str, set[str]] = {k: set() for k in (
            "worker", "transport", "cause", "run", "knowledge", "marker", "band", "break", "authority", "inbox",
            "arrow", "mismatch")}

    # ---------------------------------------------------------------- helpers
    def char_x(self, size: float) -> float:
        """Width of one character at ``size`` points, in x units."""
        return size * CHAR / 72 / self.plot_w_in * 100

    def _bars(self, ax, y: float, spans: list[tuple[float, float]], colors, height=0.62, **kw):
        if spans:
            kw.setdefault("edgecolor", "#ffffff")
            kw.setdefault("linewidth", 0.6)
            ax.broken_barh([(a, max(b - a, 0.12)) for a, b in spans], (y - height / 2, height),
                           facecolors=colors, **kw)

    def _label_in(self, ax, x0: float, x1: float, y: float, texts: list[str], color: str, boxed: bool = False):
        """Write the longest text that fits between x0 and x1."""
        size = FONT - 0.5
        for text in texts:
            w = (len(text) + 1) * self.char_x(size)
            if w <= x1 - x0:
                mid = (x0 + x1) / 2
                if not self.placer.free((id(ax), y), mid - w / 2, mid + w / 2, pad=0.1):
                    continue
                self.placer.take((id(ax), y), mid - w / 2, mid + w / 2)
                box = dict(boxstyle="round,pad=0.15", fc=color, ec="none", alpha=0.9) if boxed else None
                ax.text(mid, y, text, ha="center", va="center", fontsize=size, color=style.text_color(color),
                        bbox=box)
                return True
        return False

    def _note(self, ax, x: float, y: float, text: str, color: str = "#37474f", size: float = FONT - 1,
              offsets: tuple[float, ...] = (0.0,)):
        """A small label starting at x on row y (or at one of the vertical ``offsets`` from it), if
        it fits beside what is already written there."""
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
                ax.text(x0, y + dy, text, ha="left", va="center", fontsize=size, color=color,
                        bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.8))
                return True
        return False

    # ---------------------------------------------------------------- rows
    def layout(self):
        d, s = self.data, self.story
        run_p, remote_p, know_p = Panel("run state"), Panel("remote effects"), Panel("knowledge")
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
            subrows = _pack([(w.start, w.end) for w in r.workers], self.axis.end)
            ys: dict[int, float] = {}
            for i in range(max(subrows, default=-1) + 1):
                ys[i] = run_p.add(style.shorten(f"{pre}workers" + (f" ({i + 1})" if i else ""), ROW_LABEL))
            for w, sub in zip(r.workers, subrows):
                self.worker_rows[w.name] = ys[sub]
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
        self.key_rows: dict[str, float] = {}
        for k in d.knowledge[:14]:
            prefix = f"{k.run}: " if many and k.run else ""
            suffix = " (comp.)" if k.kind == "compensation" else ""
            label = prefix + style.shorten(k.key, max(8, ROW_LABEL - len(prefix) - len(suffix))) + suffix
            self.key_rows[k.key] = know_p.add(label)
        self.more_keys = max(0, len(d.knowledge) - 14)
        return run_p, remote_p, know_p

    # ---------------------------------------------------------------- run lane
    def draw_run(self, ax):
        X = self.axis.x
        points: dict[tuple[str, str], list] = {}
        for r in self.data.runs:
            y = self.state_rows[r.id]
            blocks = collapse_states(r.states)
            spans = [(X(first.start), X(last.end)) for first, last, _ in blocks]
            colors = [style.RUN_COLORS.get(first.label, style.UNKNOWN_COLOR) for first, _, _ in blocks]
            self._bars(ax, y, spans, colors)
            for (first, last, seqs), (a, b), c in zip(blocks, spans, colors):
                self.used["run"].add(first.label)
                for seq in seqs:
                    self.loc[seq] = ("run", y)
                vs = f"v{first.version}" if first is last else f"v{first.version}–v{last.version}"
                many = f" ×{len(seqs)}" if len(seqs) > 1 else ""
                self._label_in(ax, a, b, y, [f"{vs} {first.label}{many}", f"{vs} {first.label}", vs + many, vs], c)
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
                            solid_capstyle="butt", marker="|", markevery=[0], markersize=6)
                epochs = "→".join(f"e{e}" for e in dict.fromkeys(e for _, _, e in w.leases))
                short = w.name.rsplit("/", 1)[-1]
                self._label_in(ax, a, b, wy, [f"{short} {epochs}".strip(), short], style.WORKER_COLOR,
                               boxed=bool(w.pauses))
                self.loc[w.seq] = ("run", wy)
                if w.end_kind in ("crash", "adapter_fault"):
                    points.setdefault((w.end_kind, ""), []).append((b, wy))
                for m in w.marks:
                    self.loc[m.seq] = ("run", wy)
                    kind = "finish_stale" if m.kind == "finish" and not m.ok else m.kind
                    if kind in ("lease", "adapter_fault"):
                        continue
                    points.setdefault((kind, ""), []).append((X(m.t), wy))
                if w.leases:
                    self.used["worker"].add("lease")
                if w.pauses:
                    self.used["worker"].add("paused")
        for (kind, _), pts in sorted(points.items()):
            glyph, color, filled, _label = style.WORKER_GLYPHS[kind]
            xs, ys = zip(*pts)
            _scatter(ax, xs, ys, glyph, color, filled, 30)
            self.used["worker"].add(kind)
        self.draw_authority(ax)
        self.draw_inbox(ax)

    def draw_authority(self, ax):
        X = self.axis.x
        for run, y in self.auth_rows.items():
            items = [a for a in self.story.authority if a.run == run]
            revokes = sorted(a.t for a in items if a.kind == "revoked")
            grants = [a for a in items if a.kind == "granted"]
            spans = []
            for g in grants:
                stop = min([t for t in revokes if t >= g.t] + [g.until if g.until is not None else self.axis.end,
                                                                self.axis.end])
                spans.append((X(g.t), X(stop)))
                self.loc[g.seq] = ("run", y)
                ended = "expired" if g.until is not None and g.until <= self.axis.end else "until"
                when = style.format_time(g.until, self.origin) if g.until is not None else "never"
                label = f"{g.label} live, {ended} {when}" if g.until is not None else f"{g.label} live (no expiry)"
                self.used["authority"].add("granted")
                if not self._label_in(ax, X(g.t), X(stop), y, [label, g.label], legend.GRANT_COLOR):
                    self._note(ax, X(g.t), y, label, offsets=(0.0, 0.36))
                if g.until is not None and g.until <= self.axis.end:
                    ax.plot([X(g.until)] * 2, [y - 0.3, y + 0.3], color="#6a1b9a", linewidth=1.4)
            self._bars(ax, y, spans, legend.GRANT_COLOR, height=0.5)
            by_kind: dict[str, list] = {}
            groups: list[list] = []
            for a in items:
                if a.kind == "granted":
                    continue
                self.loc[a.seq] = ("run", y)
                by_kind.setdefault(a.kind, []).append(X(a.t))
                if groups and groups[-1][0].kind == a.kind and groups[-1][0].label == a.label:
                    groups[-1].append(a)
                else:
                    groups.append([a])
            for kind, xs in by_kind.items():
                g, color, filled, _ = legend.AUTHORITY[kind]
                _scatter(ax, xs, [y] * len(xs), g, color, filled, 28)
                self.used["authority"].add(kind)
            for group in groups:
                a = group[0]
                text = {"requested": f"requested {a.label}", "refused": f"not live: {a.label}",
                        "revoked": a.label}[a.kind]
                text = style.shorten(text, 34) + (f" ×{len(group)}" if len(group) > 1 else "")
                self._note(ax, X(a.t), y, text, color=legend.AUTHORITY[a.kind][1], offsets=(0.36, -0.36))

    def draw_inbox(self, ax):
        X = self.axis.x
        for run, y in self.inbox_rows.items():
            items = [d for d in self.story.deliveries if d.run == run]
            first = [X(d.t) for d in items if d.copy == 1]
            dup = [X(d.t) for d in items if d.copy > 1]
            for d in items:
                self.loc[d.seq] = ("run", y)
            if first:
                g, color, filled, _ = legend.DELIVERY["first"]
                _scatter(ax, first, [y] * len(first), g, color, filled, 24)
                self.used["inbox"].add("first")
            if dup:
                g, color, filled, _ = legend.DELIVERY["duplicate"]
                _scatter(ax, dup, [y] * len(dup), g, color, filled, 34, zorder=5)
                self.used["inbox"].add("duplicate")
            groups: list[list] = []
            for d in items:
                what = _disposition_words(d.disposition, d.copy > 1)
                if groups and groups[-1][0].event_id == d.event_id and d.copy > 1 and groups[-1][0].copy > 1 \
                        and _disposition_words(groups[-1][0].disposition, True) == what:
                    groups[-1].append(d)
                else:
                    groups.append([d])
            for g in groups:
                d = g[0]
                what = _disposition_words(d.disposition, d.copy > 1)
                text = (f"{d.type} duplicate{' ×' + str(len(g)) if len(g) > 1 else ''}: {what}" if d.copy > 1
                        else f"{d.type}: {what}")
                self._note(ax, X(d.t), y, text, color=legend.DELIVERY["duplicate" if d.copy > 1 else "first"][1],
                           offsets=(0.36, -0.36))

    # ---------------------------------------------------------------- remote lane
    def draw_remote(self, ax):
        X = self.axis.x
        for e in self.data.effects:
            if e.cause == "other_actor":
                continue
            row = self.effect_rows.get((e.service, e.ref))
            color = style.CAUSE_COLORS.get(e.cause, "#455a64")
            self.used["cause"].add(e.cause)
            if row is None:
                ax.scatter([X(e.start)], [self.more_effects_row], marker="o", s=22, color=color, zorder=4)
                self.loc[e.seq] = ("remote", self.more_effects_row)
                continue
            self.loc[e.seq] = ("remote", row)
            if e.compensates:       # a release is an instantaneous effect of its own
                ax.scatter([X(e.start)], [row], marker="v", s=46, color=color, zorder=4)
                self._note(ax, X(e.start), row, e.ref, color="#212121", size=FONT - 0.5)
                continue
            a, b = X(e.start), X(e.released) if e.released is not None else TIME_W
            self._bars(ax, row, [(a, b)], [color], height=0.5, alpha=0.9)
            if e.released is not None:
                ax.plot([b, b], [row - 0.3, row + 0.3], color="#212121", linewidth=1.4)
                self.loc[e.released_seq] = ("remote", row)
                self.used["cause"].add("released")
            self._label_in(ax, a, b, row, [f"{e.ref} key {style.shorten(e.key, 18)}", e.ref], color)
        points: dict[str, list] = {}
        for m in self.data.transport:
            y = self.service_rows.get(m.label)
            if y is None:
                continue
            points.setdefault(m.kind, []).append((X(m.t), y))
            self.loc[m.seq] = ("remote", y)
        for kind, pts in sorted(points.items()):
            glyph, color, filled, _ = style.TRANSPORT_GLYPHS[kind]
            xs, ys = zip(*pts)
            _scatter(ax, xs, ys, glyph, color, filled, 34, zorder=6)
            self.used["transport"].add(kind)
        if self.other_row is not None:
            others = [e for e in self.data.effects if e.cause == "other_actor"]
            ax.scatter([X(e.start) for e in others], [self.other_row] * len(others), marker="o", s=22,
                       color=style.CAUSE_COLORS["other_actor"], edgecolors="#78909c", zorder=4)
            for e in others:
                self.loc[e.seq] = ("remote", self.other_row)
            self.used["cause"].add("other_actor")

    # ---------------------------------------------------------------- knowledge lane
    def draw_knowledge(self, ax):
        X = self.axis.x
        for k in self.data.knowledge:
            y = self.key_rows.get(k.key)
            if y is None:
                continue
            spans = [(X(s.start), X(s.end) if s.end is not None else TIME_W) for s in k.states]
            colors = [style.KNOWLEDGE_COLORS.get(s.label, style.UNKNOWN_COLOR) for s in k.states]
            self._bars(ax, y, spans, colors)
            for s, (a, b), c in zip(k.states, spans, colors):
                self.used["knowledge"].add(s.label)
                self.loc[s.seq] = ("knowledge", y)
                self._label_in(ax, a, b, y, [s.label, style.abbreviation(s.label)], c, boxed=True)
            if k.stale:
                ax.scatter([X(m.t) for m in k.stale], [y] * len(k.stale), marker="x", s=36, color="#c62828", zorder=4)
                self.used["knowledge"].add("stale")
        for kind in ("lags", "contradicts"):
            color, hatch, _ = legend.MISMATCH[kind]
            for key, y in self.key_rows.items():
                spans = [(X(m.start), X(m.end)) for m in self.story.mismatches if m.key == key and m.kind == kind]
                if spans:
                    self._bars(ax, y, spans, "none", height=0.74, edgecolor=color, hatch=hatch, linewidth=0.9,
                               zorder=3)
                    self.used["mismatch"].add(kind)
        if self.more_keys:
            ax.text(TIME_W, -len(self.key_rows) + 0.45, f"+{self.more_keys} more keys (see the report)",
                    ha="right", va="bottom", fontsize=FONT - 1, color="#616161")

    # ---------------------------------------------------------------- where each row ended
    def draw_final(self, axes_by_name, strip):
        run_ax, remote_ax, know_ax = axes_by_name["run"], axes_by_name["remote"], axes_by_name["knowledge"]
        strip.text((FINAL_X0 + FINAL_X1) / 2, 0.5, "where it ended", ha="center", va="center", fontsize=FONT - 0.5,
                   color="#37474f", fontweight="bold")
        width = FINAL_X1 - FINAL_X0
        for r in self.data.runs:
            y = self.state_rows[r.id]
            final = r.disposition or (r.states[-1].label if r.states else None)
            if final is None:
                continue
            color = style.RUN_COLORS.get(final, style.UNKNOWN_COLOR)
            self._bars(run_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.7, edgecolor="#37474f", linewidth=0.8)
            self.used["run"].add(final)
            if not self._label_in(run_ax, FINAL_X0, FINAL_X1, y, [final, final.replace("_", " ")], color):
                head, _, tail = final.partition("_")
                run_ax.text(FINAL_X0 + width / 2, y, f"{head}\n{tail}", ha="center", va="center", linespacing=0.95,
                            fontsize=FONT - 1.5, color=style.text_color(color))
        for k in self.data.knowledge:
            y = self.key_rows.get(k.key)
            if y is None or not k.states:
                continue
            last = k.states[-1].label
            color = style.KNOWLEDGE_COLORS.get(last, style.UNKNOWN_COLOR)
            self._bars(know_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.62)
            self._label_in(know_ax, FINAL_X0, FINAL_X1, y, [last, style.abbreviation(last)], color)
        for e in self.data.effects:
            y = self.effect_rows.get((e.service, e.ref))
            if y is None or e.compensates:
                continue
            held = e.released is None
            color = style.CAUSE_COLORS.get(e.cause, "#455a64") if held else "#eceff1"
            self._bars(remote_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.5)
            self._label_in(remote_ax, FINAL_X0, FINAL_X1, y, ["still held" if held else "released"], color)
        for ax in (run_ax, remote_ax, know_ax, strip):
            ax.axvline(TIME_W + 1.2, color="#9e9e9e", linewidth=0.8, linestyle=(0, (1, 2)), zorder=1)

    # ---------------------------------------------------------------- markers, bands, breaks
    def draw_markers(self, axes, strip):
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
                    self.loc.setdefault(m.seq, ("strip", 0.5))
            if g[0].kind == "fault" and len(g) >= 3:
                bands.append((X(g[0].t), X(g[-1].t)))
                lines.setdefault("fault_tick", []).extend(X(m.t) for m in g)
            else:
                lines.setdefault(g[0].kind, []).extend(X(m.t) for m in g)
        for a, b in bands:
            for ax in list(axes) + [strip]:
                ax.axvspan(a, max(b, a + 0.3), color=legend.BAND_COLOR, alpha=0.45, zorder=0.2, linewidth=0)
            self.used["band"].add("fault")
        for kind, xs in lines.items():
            if kind == "fault_tick":
                strip.vlines(xs, 0.0, 0.12, colors=style.MARKERS["fault"][0], linewidths=0.8, zorder=1)
                continue
            color, ls, lw, _ = style.MARKERS.get(kind, style.MARKERS["world"])
            alpha = 0.45 if kind == "fault" else 0.85
            for ax in list(axes) + [strip]:
                ax.vlines(xs, 0, 1, transform=ax.get_xaxis_transform(), colors=color, linestyles=ls,
                          linewidths=lw, alpha=alpha, zorder=1)
            self.used["marker"].add(kind if kind in style.MARKERS else "world")
        # labels: most important kinds first, on three levels; a label that fits nowhere is left
        # to the legend
        levels = [0.8, 0.5, 0.2]
        size = FONT - 0.5
        order = sorted(groups, key=lambda g: (style.MARKER_PRIORITY.index(g[0].kind)
                                              if g[0].kind in style.MARKER_PRIORITY else 99, g[0].t))
        for g in order:
            m = g[0]
            text = style.shorten(m.label, 28) + (f" ×{len(g)}" if len(g) > 1 else "")
            x = X(m.t)
            w = len(text) * self.char_x(size)
            x0, x1 = x + 0.3, x + 0.3 + w
            if x1 > TIME_W:
                x0, x1 = x - 0.3 - w, x - 0.3
            for lvl in levels:
                if x0 >= 0 and self.placer.free(("strip", lvl), x0, x1):
                    self.placer.take(("strip", lvl), x0, x1)
                    color = style.MARKERS.get(m.kind, style.MARKERS["world"])[0]
                    strip.text(x0, lvl, text, fontsize=size, va="center", ha="left", color=color,
                               bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.85))
                    break

    def draw_breaks(self, axes, bottom):
        taken: list[tuple[float, float]] = []
        for br in self.axis.breaks:
            for ax in axes:
                ax.axvspan(br.x0, br.x1, facecolor="#f4f4f4", edgecolor="#d6d6d6", hatch="////", linewidth=0,
                           zorder=0.3)
            self.used["break"].add("break")
            label = "≈" + duration_label(br.ms)
            size = FONT - 1
            mid = (br.x0 + br.x1) / 2
            w = len(label) * self.char_x(size)
            if all(mid + w / 2 < a - 0.3 or mid - w / 2 > b + 0.3 for a, b in taken):
                taken.append((mid - w / 2, mid + w / 2))
                bottom.annotate(label, xy=(mid, 0), xycoords=bottom.get_xaxis_transform(), xytext=(0, -15),
                                textcoords="offset points", ha="center", va="top", fontsize=size, color="#757575")

    # ---------------------------------------------------------------- arrows
    def draw_arrows(self, fig, run_ax, remote_ax):
        """Each call to a service: a line from the worker's row down to the service's row at the
        time it was sent, and its answer back up at the time it came, coloured by outcome."""
        from matplotlib.collections import LineCollection
        from matplotlib.lines import Line2D

        calls = [c for c in self.story.calls if c.worker in self.worker_rows and c.service in self.service_rows]
        if not calls:
            return
        X = self.axis.x

        def fy(ax, y):
            lo, hi = ax.get_ylim()
            pos = ax.get_position()
            return pos.y0 + (y - lo) / (hi - lo) * pos.height

        def fx(x):
            pos = run_ax.get_position()
            return pos.x0 + x / 100 * pos.width

        segs: dict[str, list] = {}
        heads: dict[str, tuple[list, list, str]] = {}
        for c in calls:
            top, low = fy(run_ax, self.worker_rows[c.worker] - 0.27), fy(remote_ax, self.service_rows[c.service] + 0.2)
            x_out = fx(X(c.t))
            kind = "send" if c.send else "read"
            segs.setdefault(kind, []).append([(x_out, top), (x_out, low)])
            heads.setdefault(kind, ([], [], "v"))[0].append(x_out)
            heads[kind][1].append(low)
            self.used["arrow"].add(kind)
            if c.back is not None:
                back = _outcome_kind(c)
                x_back = fx(X(c.back))
                segs.setdefault(back, []).append([(x_back, low), (x_back, top)])
                heads.setdefault(back, ([], [], "^"))[0].append(x_back)
                heads[back][1].append(top)
                self.used["arrow"].add(back)
        for kind, lines in segs.items():
            color, ls, _ = legend.OUTCOMES[kind]
            fig.add_artist(LineCollection(lines, colors=color, linewidths=1.0 if kind in ("send", "read") else 0.9,
                                          linestyles=ls, transform=fig.transFigure, zorder=3, alpha=0.85))
        for kind, (xs, ys, marker) in heads.items():
            color = legend.OUTCOMES[kind][0]
            fig.add_artist(Line2D(xs, ys, linestyle="none", marker=marker, markersize=3.6, color=color,
                                  transform=fig.transFigure, zorder=3))
        # one label per run of identical answers: "lookup → unavailable ×27"
        groups: list[list] = []
        for c in calls:
            if groups and (groups[-1][0].op, groups[-1][0].outcome, groups[-1][0].service) == (c.op, c.outcome,
                                                                                                  c.service):
                groups[-1].append(c)
            else:
                groups.append([c])
        for g in groups:
            c = g[0]
            text = f"{c.op} → {c.outcome}" + (f" ×{len(g)}" if len(g) > 1 else "")
            color = legend.OUTCOMES[_outcome_kind(c)][0]
            for at in dict.fromkeys([g[0], g[len(g) // 2], g[-1]]):
                x = X(at.back if at.back is not None else at.t)
                if self._note(remote_ax, x, self.service_rows[c.service], text, color=color, size=FONT - 1,
                              offsets=(-0.05, -0.33)):
                    break

    # ---------------------------------------------------------------- violations
    def locate(self, seq: int) -> tuple[str, float]:
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
                ax.scatter([x], [y], s=150, facecolors="none", edgecolors=style.VIOLATION_COLOR, linewidths=1.5,
                           zorder=6)
                if j:
                    continue
                near = [p for p in placed.setdefault(where, []) if abs(p[0] - x) < 3 and p[1] == y]
                offsets = [(7, 7), (7, -15), (-17, 7), (-17, -15), (14, -4), (-24, -4)]
                dx, dy = offsets[len(near) % len(offsets)]
                placed[where].append((x, y))
                ax.annotate(str(i), xy=(x, y), xytext=(dx, dy), textcoords="offset points", fontsize=FONT,
                            color="white", fontweight="bold", zorder=7, annotation_clip=False,
                            bbox=dict(boxstyle="circle,pad=0.2", fc=style.VIOLATION_COLOR, ec="none"))
            ev = ", ".join(f"#{s}" for s in v.events[:6]) + (" …" if len(v.events) > 6 else "")
            notes.append(f"{i}  {v.invariant}: {v.message} [{ev or 'no events'}]")
        return notes

    # ---------------------------------------------------------------- the figure
    def build(self):
        from matplotlib.figure import Figure

        run_p, remote_p, know_p = self.layout()
        panels = [run_p, remote_p, know_p]
        rows = sum(p.height for p in panels)
        notes_n = min(len(self.result.violations), 6) if self.result is not None else 0
        height = min(14.0, max(7.0, 2.4 + 0.3 * rows + 0.17 * notes_n))
        fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
        self.plot_w_in = WIDTH_IN - LEFT_IN - RIGHT_IN
        top_in, bottom_in = 0.78, 0.78 + 0.16 * (notes_n + (2 if notes_n else 0))
        gs = fig.add_gridspec(4, 1, height_ratios=[0.9] + [p.height + 0.6 for p in panels],
                              left=LEFT_IN / WIDTH_IN, right=1 - RIGHT_IN / WIDTH_IN,
                              top=1 - top_in / height, bottom=bottom_in / height, hspace=0.14)
        strip = fig.add_subplot(gs[0])
        axes = [fig.add_subplot(gs[i + 1]) for i in range(3)]   # x is already warped: no sharing
        strip.set_ylim(0, 1)
        strip.text(-0.006, 0.5, "faults & events", transform=strip.transAxes, ha="right", va="center",
                   fontsize=FONT)
        for ax, p in zip(axes, panels):
            ax.set_ylim(-p.height + 0.4, 0.6)
            row_tr = ax.get_yaxis_transform()
            for r in p.rows:       # row labels as plain text: cheaper than tick labels
                ax.text(-0.006, r.y, r.label, transform=row_tr, ha="right", va="center", fontsize=FONT)
            ax.text(-0.005, 1.0, p.name.upper(), transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=FONT, fontweight="bold", color="#37474f")
            if not p.rows:
                ax.text(TIME_W / 2, 0, {"run state": "no checkpoint written", "remote effects": "no remote effect",
                                        "knowledge": "no ledger entry"}[p.name],
                        ha="center", va="center", color="#9e9e9e", fontsize=FONT + 1)
        for ax in [strip] + axes:
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            ax.set_xlim(0, 100)
            ax.set_xticks([])
            ax.set_yticks([])
        strip.spines["left"].set_visible(False)
        by_name = {"strip": strip, "run": axes[0], "remote": axes[1], "knowledge": axes[2]}
        self.draw_run(axes[0])
        self.draw_remote(axes[1])
        self.draw_knowledge(axes[2])
        self.draw_final(by_name, strip)
        self.draw_markers(axes, strip)
        self.draw_breaks([strip] + axes, axes[2])
        self.draw_arrows(fig, axes[0], axes[1])
        notes = self.draw_violations(by_name)
        key = ("deadline", "cancel", "deploy", "crash")
        xs, labels = self.axis.ticks(self.origin, [m.t for m in self.data.markers if m.kind in key],
                                     self.char_x(FONT))
        keep = list(zip(xs, labels))
        bottom_tr = axes[2].get_xaxis_transform()
        axes[2].vlines([x for x, _ in keep], -0.035, 0, transform=bottom_tr, colors="#212121", linewidths=0.6,
                       clip_on=False)
        for x, lab in keep:        # tick labels as plain text: cheaper than Tick artists
            axes[2].annotate(lab, xy=(x, 0), xycoords=bottom_tr, xytext=(0, -4), textcoords="offset points",
                             ha="center", va="top", fontsize=FONT)
        scale = "linear time" if not self.axis.breaks else "linear time; hatched breaks compress quiet stretches"
        axes[2].annotate(f"simulated time, scenario clock ({scale})", xy=(TIME_W / 2, 0), xycoords=bottom_tr,
                         xytext=(0, -27 if self.axis.breaks else -16), textcoords="offset points", ha="center",
                         va="top", fontsize=FONT, color="#616161")
        for ax in axes[:2] + [strip]:
            ax.vlines([x for x, _ in keep], 0, 1, transform=ax.get_xaxis_transform(), colors="#eeeeee",
                      linewidths=0.6, zorder=0)
        axes[2].vlines([x for x, _ in keep], 0, 1, transform=axes[2].get_xaxis_transform(), colors="#eeeeee",
                       linewidths=0.6, zorder=0)
        h = self.header
        verdict = self.result.verdict.upper() if self.result is not None else "NOT CHECKED"
        disp = "; ".join(f"{r.id}: {r.disposition or 'no terminal disposition'}" for r in self.data.runs)
        title = f"{h.get('scenario')} — {h.get('title')}"
        size = FONT + 4
        while size > FONT + 1 and len(title) * (size + 0.6) * CHAR / 72 > WIDTH_IN - 0.3:
            size -= 0.5
        fig.text(0.01, 1 - 0.16 / height, _fit(title, int((WIDTH_IN - 0.3) / ((size + 0.6) * CHAR / 72))),
                 fontsize=size, fontweight="bold", va="top")
        fig.text(0.01, 1 - 0.46 / height,
                 style.shorten(f"{verdict} · {disp} · seed {h.get('seed')}"
                               + ("" if self.no_answers else f" · adapter {h.get('adapter')}"), 175),
                 fontsize=FONT + 1, va="top", color={"PASS": "#1b5e20", "FAIL": "#b71c1c"}.get(verdict, "#e65100"))
        legend.draw(fig, legend.entries(self.used, bool(self.result is not None and self.result.violations)),
                    WIDTH_IN - RIGHT_IN + 0.15, top_in, height - top_in - 0.25, FONT)
        for i, note in enumerate(notes[:6]):
            fig.text(0.01, (bottom_in - 0.8 - 0.16 * i) / height, style.shorten(note, 190), fontsize=FONT,
                     color=style.VIOLATION_COLOR, va="top")
        if len(notes) > 6:
            fig.text(0.01, (bottom_in - 0.8 - 0.16 * 6) / height, f"… {len(notes) - 6} more violations in the "
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
    pal = image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    pal.save(out, format="PNG", dpi=(DPI, DPI))
    return out.getvalue()
