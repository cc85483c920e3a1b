"""A time window of a figure (``--window FROM..TO``): only what happened between FROM and TO is
drawn, on an axis that spans exactly that stretch, so the densest second of a trace gets the
whole width. FROM and TO are points on the scenario's clock in its own notation
(crashlab.vocab.timefmt): clock times (``10:04..10:04:01.500``) or durations after the origin
(``4m..4m1s``, ``240000..241500``).

Pure data: a window clips the figure's lanes and story; stretches (checkpoint states, records,
knowledge) that cross an edge are kept and drawn up to it, instants outside it are left out.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..vocab.errors import UsageError
from ..vocab.timefmt import CLOCK_HINT, clock_ms, parse_time
from .lanes import Lanes
from .story import Story

HINT = ("write --window FROM..TO with clock times (10:04..10:04:01.500) or durations after the scenario's "
        "origin (4m..4m1s, 240000..241500)")


@dataclass(frozen=True, slots=True)
class Window:
    """FROM..TO as written; resolved against each trace's origin (``span``)."""

    start: str
    end: str

    def span(self, origin_ms: int) -> tuple[int, int]:
        """(from, to) in ms after the origin; a usage error when either does not parse on this
        trace's clock or the window is empty."""
        try:
            a, b = parse_time(self.start, origin_ms), parse_time(self.end, origin_ms)
        except ValueError as exc:
            raise UsageError(f"--window {self}: {exc}", hint=HINT) from None
        if b <= a:
            raise UsageError(f"--window {self}: {self.end} is not after {self.start}", hint=HINT)
        return a, b

    def __str__(self) -> str:
        return f"{self.start}..{self.end}"


def parse_window(text: str | None) -> Window | None:
    """``"10:04..10:04:01"`` -> Window; None for None; a usage error naming what is wrong."""
    if text is None:
        return None
    if text.count("..") != 1:
        raise UsageError(f"--window {text}: expected FROM..TO", hint=HINT)
    start, end = (part.strip() for part in text.split(".."))
    if not start or not end:
        raise UsageError(f"--window {text}: both FROM and TO are needed", hint=HINT)
    for part in (start, end):        # the syntax now; a clock time is placed on each trace's clock later
        if ":" in part:
            if clock_ms(part) is None:
                raise UsageError(f"--window {text}: {part!r} is not a clock time; {CLOCK_HINT}", hint=HINT)
            continue
        try:
            parse_time(part, 0)
        except ValueError as exc:
            raise UsageError(f"--window {text}: {exc}", hint=HINT) from None
    window = Window(start, end)
    if ":" not in start and ":" not in end:
        window.span(0)
    elif ":" in start and ":" in end and clock_ms(end) <= clock_ms(start):
        raise UsageError(f"--window {window}: {end} is not after {start}", hint=HINT)
    return window


def _inside(t: int | None, a: int, b: int) -> bool:
    return t is not None and a <= t <= b


def _crosses(start: int, end: int | None, a: int, b: int) -> bool:
    return start <= b and (end is None or end >= a)


def clip_lanes(data: Lanes, a: int, b: int) -> Lanes:
    """The lanes as seen through the window [a, b]: stretches that reach into it, instants in it."""
    runs = []
    for r in data.runs:
        states = tuple(s for s in r.states if _crosses(s.start, s.end, a, b))
        workers = tuple(replace(w, marks=tuple(m for m in w.marks if _inside(m.t, a, b)),
                                pauses=tuple(p for p in w.pauses if _crosses(p[0], p[1], a, b)))
                        for w in r.workers if _crosses(w.start, w.end, a, b))
        runs.append(replace(r, states=states, workers=workers,
                            deadline=r.deadline if _inside(r.deadline, a, b) else None))
    knowledge = tuple(replace(k, states=tuple(s for s in k.states if _crosses(s.start, s.end, a, b)),
                              stale=tuple(m for m in k.stale if _inside(m.t, a, b)))
                      for k in data.knowledge)
    return replace(data, runs=tuple(runs), knowledge=knowledge,
                   effects=tuple(e for e in data.effects if _crosses(e.start, e.released, a, b)),
                   transport=tuple(m for m in data.transport if _inside(m.t, a, b)),
                   markers=tuple(m for m in data.markers if _inside(m.t, a, b)), start=a, end=b)


def clip_story(story: Story, a: int, b: int) -> Story:
    """The calls sent inside the window (an answer after it is left undrawn), the deliveries and
    authority events inside it, the disagreements that reach into it."""
    calls = tuple(c if c.back is None or c.back <= b else replace(c, back=None)
                  for c in story.calls if _inside(c.t, a, b))
    return replace(story, calls=calls, deliveries=tuple(d for d in story.deliveries if _inside(d.t, a, b)),
                   authority=tuple(x for x in story.authority if _inside(x.t, a, b)),
                   mismatches=tuple(m for m in story.mismatches if _crosses(m.start, m.end, a, b)))
