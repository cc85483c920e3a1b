"""The figure's geometry and small shared helpers: sizes, rows and panels stacked in one
plot, a label placer that keeps text from overlapping, and the glyph helper."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import style
from .lanes import Segment

WIDTH_IN = 13.0
DPI = 120
LEFT_IN, RIGHT_IN = 2.1, 2.6          # room for row labels and the legend
FONT = 7.5
ROW_LABEL = 28                       # characters of a row label
TIME_W = 82.0                        # x of the time axis: 0 .. TIME_W
FINAL_X0, FINAL_X1 = 84.5, 100.0     # the "where it ended" column
CHAR = 0.62                          # average glyph width of DejaVu Sans, in em (a safe estimate)


# --------------------------------------------------------------------------- layout
@dataclass(slots=True)
class Row:
    label: str
    y: float


STRIP_H = 1.3          # the marker strip: y from 0 down to -STRIP_H
TITLE_GAP = 1.15       # between a panel's top row and the bottom of what is above it
STRIP_LEVELS = (-0.22, -0.62, -1.02)


@dataclass(slots=True)
class Panel:
    """One band of rows in the single plot; y is absolute, one unit per row, top row at ``top``."""

    name: str
    top: float
    rows: list[Row] = field(default_factory=list)

    def add(self, label: str) -> float:
        y = self.top - float(len(self.rows))
        self.rows.append(Row(label, y))
        return y

    @property
    def height(self) -> float:
        return max(1.0, len(self.rows))

    @property
    def bottom(self) -> float:
        return self.top - self.height + 0.5


class Placer:
    """Keeps the x-intervals taken on each line of text, so labels never overlap."""

    def __init__(self) -> None:
        self.taken: dict[object, list[tuple[float, float]]] = {}

    def free(self, key: object, x0: float, x1: float, pad: float = 0.4) -> bool:
        return all(x1 < a - pad or x0 > b + pad for a, b in self.taken.get(key, ()))

    def take(self, key: object, x0: float, x1: float) -> None:
        self.taken.setdefault(key, []).append((x0, x1))


def pack(intervals: list[tuple[int, int | None]], end: int) -> list[int]:
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


def scatter(ax, xs, ys, marker: str, color: str, filled: bool, size: float, zorder: int = 4, **kw):
    if marker in LINE_MARKERS:         # line-only glyphs have no face
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.3, color=color, **kw)
    else:
        ax.scatter(xs, ys, marker=marker, s=size, zorder=zorder, linewidths=1.1,
                   facecolors=color if filled else "none", edgecolors=color, **kw)


def bars(ax, xranges, yrange: tuple[float, float], **kw):
    """``ax.broken_barh`` for an axes whose limits are already set: the same rectangles, added
    without updating the data limits (the figure's limits are fixed), which is a good part of
    broken_barh's cost when a figure has hundreds of bars."""
    from matplotlib.collections import PolyCollection

    y0, dy = yrange
    y1 = y0 + dy
    col = PolyCollection([[(x0, y0), (x0, y1), (x0 + dx, y1), (x0 + dx, y0)] for x0, dx in xranges], **kw)
    ax.add_collection(col, autolim=False)
    return col


def disposition_words(text: str, duplicate: bool) -> str:
    """A delivery's disposition in a few words: "accepted", "no transition"."""
    if not duplicate:
        return style.clip(text.split(":")[0], 24)
    tail = text.split(": ", 1)[-1]
    return style.clip(tail.rsplit(", ", 1)[-1], 24)


def outcome_kind(call) -> str:
    if not call.delivered:
        return "lost"
    if call.outcome == "ok":
        return "ok"
    return "definite" if call.definite else "indefinite"


# --------------------------------------------------------------------------- the figure
