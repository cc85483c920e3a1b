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


def scatter(ax, xs, ys, marker: str, color: str, filled: bool, size: float, zorder: float = 4, **kw):
    if marker in LINE_MARKERS:         # line-only glyphs have no face
        points(ax, xs, ys, marker, size, zorder=zorder, linewidths=1.3, facecolors=color, edgecolors="face", **kw)
    else:
        points(ax, xs, ys, marker, size, zorder=zorder, linewidths=1.1,
               facecolors=color if filled else "none", edgecolors=color, **kw)


_MARKER_PATHS: dict[str, object] = {}


def points(ax, xs, ys, marker: str, size: float, *, facecolors, edgecolors, linewidths=None, zorder: float = 1):
    """``ax.scatter`` of one glyph at one size, in a :class:`Plot`: the same
    PathCollection, made without scatter's argument parsing or a data-limit update. A glyph
    that has no face (``x``, ``|``) takes its colour from ``facecolors`` with ``edgecolors="face"``
    (and, as scatter, ``lines.linewidth`` when no width is given)."""
    import matplotlib as mpl
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.markers import MarkerStyle
    from matplotlib.transforms import IdentityTransform

    path = _MARKER_PATHS.get(marker)
    if path is None:
        style_ = MarkerStyle(marker)
        path = _MARKER_PATHS[marker] = (style_.get_path().transformed(style_.get_transform()), style_.is_filled())
    path, filled = path
    if not filled and linewidths is None:
        linewidths = mpl.rcParams["lines.linewidth"]
    col = PathCollection((path,), np.array([size], float), facecolors=facecolors, edgecolors=edgecolors,
                         linewidths=linewidths, offsets=np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]),
                         offset_transform=ax.transData, zorder=zorder)
    col.set_transform(IdentityTransform())
    return ax.add(col)


class Plot:
    """The figure's one plotting area, without a matplotlib Axes (making one, with its axis
    and tick objects, took about 5 ms a figure: more than setting up all of the figure's own
    artists now does): the data and axes transforms an Axes with limits ``xlim`` and ``ylim``
    would have, its left and bottom spines, and artists added to the figure itself, clipped
    to the area unless asked not to be. The figure draws them by z-order, equal z-orders in
    the order they were added, as an Axes draws its children."""

    def __init__(self, fig, rect: tuple[float, float, float, float], xlim: tuple[float, float],
                 ylim: tuple[float, float]) -> None:
        import matplotlib as mpl
        from matplotlib.collections import LineCollection
        from matplotlib.transforms import (Bbox, BboxTransformFrom, BboxTransformTo, TransformedBbox,
                                           blended_transform_factory)

        self.figure = fig
        self.transAxes = BboxTransformTo(TransformedBbox(Bbox.from_bounds(*rect), fig.transSubfigure))
        self.transData = BboxTransformFrom(Bbox([[xlim[0], ylim[0]], [xlim[1], ylim[1]]])) + self.transAxes
        self.clipbox = TransformedBbox(Bbox.unit(), self.transAxes)
        self._xaxis = blended_transform_factory(self.transData, self.transAxes)
        self._yaxis = blended_transform_factory(self.transAxes, self.transData)
        # the two spines an Axes would draw (axes.linewidth and axes.edgecolor, z-order 2.5)
        self.add(LineCollection([[(0, 0), (0, 1)], [(0, 0), (1, 0)]], colors=mpl.rcParams["axes.edgecolor"],
                                linewidths=mpl.rcParams["axes.linewidth"], capstyle="projecting", zorder=2.5,
                                transform=self.transAxes), clip=False)

    def get_xaxis_transform(self):
        """x in data, y from the area's bottom (0) to its top (1)."""
        return self._xaxis

    def get_yaxis_transform(self):
        """x from the area's left (0) to its right (1), y in data."""
        return self._yaxis

    def add(self, artist, clip: bool = True):
        """Add ``artist`` (in data coordinates unless it has a transform of its own)."""
        if not artist.is_transform_set():
            artist.set_transform(self.transData)
        if clip:
            artist.set_clip_box(self.clipbox)
        else:
            artist.set_clip_on(False)
        self.figure.add_artist(artist)
        return artist


def _rgba(color, alpha: float | None) -> tuple[float, float, float, float]:
    from matplotlib.colors import to_rgba

    if isinstance(color, str) and color.lower() == "none":
        return (0.0, 0.0, 0.0, 0.0)
    return to_rgba(color, alpha)


class Shapes:
    """A figure's rectangles and line segments, gathered while it is drawn and added as one
    collection per look that a collection cannot vary (z-order, hatch, transform, cap style,
    clipping): a collection costs about as much to make and draw however many shapes it
    holds, and a figure has a few looks but dozens of bars and lines. Colours, widths and
    line styles vary per shape; a shape's ``alpha`` goes into its colours, as a collection's
    alpha would. :meth:`flush` adds what is gathered: the rectangles, then the lines, each look
    in the order it first came."""

    def __init__(self, ax) -> None:
        self.ax = ax
        self.rects: dict[tuple, tuple] = {}
        self.lines: dict[tuple, tuple] = {}

    def bars(self, xranges, yrange: tuple[float, float], *, facecolors, edgecolors="none", linewidths=1.0,
             alpha: float | None = None, hatch: str | None = None, zorder: float = 1, transform=None,
             clip_on: bool = True) -> None:
        """Rectangles (x, width) over ``yrange`` (y, height), as ``ax.broken_barh`` draws them."""
        y0, dy = yrange
        y1 = y0 + dy
        n = len(xranges)
        verts, faces, edges, widths, _ = self.rects.setdefault((zorder, hatch, id(transform), clip_on),
                                                               ([], [], [], [], transform))
        verts += [[(x0, y0), (x0, y1), (x0 + dx, y1), (x0 + dx, y0)] for x0, dx in xranges]
        faces += [_rgba(c, alpha) for c in _each(facecolors, n)]
        edges += [_rgba(c, alpha) for c in _each(edgecolors, n)]
        widths += _each(linewidths, n)

    def segments(self, segments: list, *, color, linewidth: float = 1.0, linestyle="-", alpha: float | None = None,
                 zorder: float = 2, transform=None, capstyle: str = "butt", clip_on: bool = True) -> None:
        """Line segments (each a list of points) of one colour, width and style."""
        segs, colors, widths, styles, _ = self.lines.setdefault((zorder, id(transform), capstyle, clip_on),
                                                                ([], [], [], [], transform))
        segs += segments
        colors += [_rgba(color, alpha)] * len(segments)
        widths += [linewidth] * len(segments)
        styles += [linestyle] * len(segments)

    def flush(self) -> None:
        from matplotlib.collections import LineCollection, PolyCollection

        for (zorder, hatch, _, clip_on), (verts, faces, edges, widths, tr) in self.rects.items():
            col = PolyCollection(verts, facecolors=faces, edgecolors=edges, linewidths=widths, hatch=hatch,
                                 zorder=zorder, **({"transform": tr} if tr is not None else {}))
            self.ax.add(col, clip=clip_on)
        for (zorder, _, capstyle, clip_on), (segs, colors, widths, styles, tr) in self.lines.items():
            col = LineCollection(segs, colors=colors, linewidths=widths, linestyles=styles, zorder=zorder,
                                 capstyle=capstyle, **({"transform": tr} if tr is not None else {}))
            self.ax.add(col, clip=clip_on)
        self.rects.clear()
        self.lines.clear()


def _each(value, n: int) -> list:
    """A per-shape list from one value (a colour as a string, a number) or a sequence of them."""
    if isinstance(value, (str, int, float)) or value is None:
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


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
