"""The figure's time axis: linear, with breaks where long quiet stretches are compressed.

Simulated ms map to x in [0, width]. The scale is the same everywhere except inside a
*break*: a long gap with no event is drawn as a narrow fixed-width zone, marked with break
marks and its duration, so a burst of millisecond port calls and a ten-minute wait can share
one figure while every unbroken stretch stays truly linear. ``linear=True`` gives a plain
linear axis without breaks.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from ..vocab.timefmt import format_time

STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
         600_000, 900_000, 1_800_000, 3_600_000, 6 * 3_600_000, 86_400_000)


@dataclass(frozen=True, slots=True)
class Break:
    start: int        # ms
    end: int          # ms
    x0: float
    x1: float

    @property
    def ms(self) -> int:
        return self.end - self.start


def duration_label(ms: int) -> str:
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:.1f} h".replace(".0 ", " ")
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min".replace(".0 ", " ")
    if ms >= 1000:
        return f"{ms / 1000:.1f} s".replace(".0 ", " ")
    return f"{ms} ms"


class TimeAxis:
    """ms -> x. Breaks go to the largest gaps between event times, one at a time, while the
    largest remaining gap is over ``share`` of the time still drawn linearly and over
    ``min_gap_ms``; at most ``max_breaks``."""

    def __init__(self, times: list[int], start: int, end: int, *, linear: bool = False, width: float = 100.0,
                 break_width: float = 2.6, max_breaks: int = 10, share: float = 0.08, min_gap_ms: int = 1000,
                 margin: float = 0.0):
        self.start, self.end = start, max(end, start + 1)
        self.width = width
        ts = sorted({t for t in times if self.start <= t <= self.end} | {self.start, self.end})
        chosen: list[tuple[int, int]] = []
        if not linear:
            gaps = sorted(((b - a, a, b) for a, b in zip(ts, ts[1:])), reverse=True)
            visible = self.end - self.start
            for gap, a, b in gaps[:max_breaks]:
                if gap < min_gap_ms or gap <= share * visible:
                    break
                chosen.append((a, b))
                visible -= gap
        chosen.sort()
        visible_ms = (self.end - self.start) - sum(b - a for a, b in chosen)
        self.scale = (width - 2 * margin - break_width * len(chosen)) / max(1, visible_ms)
        # knots: (ms, x) at every segment boundary; inside a break, x moves linearly over break_width;
        # ``margin`` x units of air at both ends
        knots = [(self.start, margin)]
        x = margin
        prev = self.start
        self.breaks: list[Break] = []
        for a, b in chosen:
            x += (a - prev) * self.scale
            knots.append((a, x))
            self.breaks.append(Break(a, b, x, x + break_width))
            x += break_width
            knots.append((b, x))
            prev = b
        knots.append((self.end, width - margin))
        self._ms = [k[0] for k in knots]
        self._x = [k[1] for k in knots]

    def x(self, t: float | None) -> float:
        t = self.end if t is None else min(max(t, self.start), self.end)
        i = min(max(0, bisect_right(self._ms, t) - 1), len(self._ms) - 2)
        t0, t1 = self._ms[i], self._ms[i + 1]
        x0, x1 = self._x[i], self._x[i + 1]
        return x0 if t1 == t0 else x0 + (x1 - x0) * (t - t0) / (t1 - t0)

    def segments(self) -> list[tuple[int, int]]:
        """The linear stretches between breaks, in ms."""
        out, prev = [], self.start
        for b in self.breaks:
            out.append((prev, b.start))
            prev = b.end
        out.append((prev, self.end))
        return out

    def ticks(self, origin_ms: int, important: list[int], char_x: float) -> tuple[list[float], list[str]]:
        """Tick positions and labels that never overlap: segment starts and the important
        moments first, then round times of a step giving about one tick per 11 units of x.
        ``char_x`` is the width of one label character in x units."""
        segments = self.segments()
        candidates: list[int] = [self.start] + [t for t in important if self.start <= t <= self.end]
        candidates += [a for a, _ in segments] + [b for _, b in segments]   # each stretch's start before any end
        target = 11.0 / self.scale              # ms per tick on the linear stretches
        step = next((s for s in STEPS if s >= target), STEPS[-1])
        for a, b in self.segments():
            first = -(-(a + origin_ms) // step) * step - origin_ms
            candidates += list(range(first, b + 1, step))
        taken: list[tuple[float, float]] = []
        chosen: list[tuple[float, str]] = []
        for t in candidates:
            if not self.start <= t <= self.end or any(br.start < t < br.end for br in self.breaks):
                continue
            label = format_time(int(t), origin_ms)
            x = self.x(t)
            half = len(label) * char_x / 2 + char_x
            lo, hi = x - half, x + half
            if lo < -4 * char_x / 0.78 or hi > self.width + 3 * char_x / 0.78:   # 0.78: a character at 7.5 pt
                continue
            if all(hi < a or lo > b for a, b in taken):
                taken.append((lo, hi))
                chosen.append((x, label))
        chosen.sort()
        return [x for x, _ in chosen], [label for _, label in chosen]


def break_label(group: list[Break], origin_ms: int | None = None) -> str:
    """``≈61 s`` for one break; for breaks that share a label, the time from the first's
    start to the last's end and how many they are: ``≈10 min, 2 breaks``. With ``origin_ms``,
    a second line gives the clock time of what lies between them (``events at 10:01:03.256``):
    the short stretches between breaks have no room for a tick of their own."""
    if len(group) == 1:
        return "≈" + duration_label(group[0].ms)
    label = f"≈{duration_label(group[-1].end - group[0].start)}, {len(group)} breaks"
    if origin_ms is None:
        return label
    inside = list(dict.fromkeys(br.end for br in group[:-1]))
    times = ", ".join(format_time(t, origin_ms) for t in inside[:2]) + (f" +{len(inside) - 2}" if len(inside) > 2
                                                                          else "")
    return f"{label}\nevents at {times}"


def label_width(label: str, char_width: float) -> float:
    """The width of a (possibly multi-line) label: its longest line."""
    return max(len(line) for line in label.split("\n")) * char_width


def break_groups(breaks: list[Break], width, origin_ms: int | None = None) -> list[list[Break]]:
    """Breaks in order, grouped so that no two labels collide: neighbouring groups whose
    labels (``width(label)`` x units wide, centred on the group) would overlap are merged,
    until none do. Every break belongs to exactly one labelled group."""
    groups = [[br] for br in breaks]

    def extent(group: list[Break]) -> tuple[float, float]:
        mid, half = (group[0].x0 + group[-1].x1) / 2, width(break_label(group, origin_ms)) / 2
        return mid - half, mid + half

    merged = True
    while merged:
        merged = False
        for i in range(len(groups) - 1):
            if extent(groups[i])[1] + 0.3 > extent(groups[i + 1])[0]:
                groups[i:i + 2] = [groups[i] + groups[i + 1]]
                merged = True
                break
    return groups
