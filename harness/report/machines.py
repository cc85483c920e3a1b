"""The state machines, drawn as inline SVG from their transition tables.

The layout is computed once per table with networkx (the same tables the checks use for
legality): columns by shortest distance from the initial state along the main flow,
terminal states in the last column, and *hub* states (those that may lead to most states:
MIGRATING, WAITING_OPERATOR, PINNED) in a row underneath. Every legal transition is a faint
curve, except the many into and out of hubs, which are drawn only when taken; the
transitions a run took are bold and numbered in the order they happened; a transition the
table does not allow is drawn dashed red.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from typing import Mapping

from ..vocab.model import KNOWLEDGE_TRANSITIONS, RUN_TRANSITIONS, Knowledge, RunState
from . import style

NO_ENTRY = "no entry"
FONT_PX = 10
BOX_H = 20
COL_GAP = 44
ROW_GAP = 24
TAKEN = "#d84315"
ILLEGAL = "#c62828"


@dataclass(frozen=True, slots=True)
class Layout:
    width: float
    height: float
    boxes: Mapping[str, tuple[float, float, float]]   # name -> (centre x, centre y, width)
    edges: tuple[tuple[str, str], ...]               # legal edges drawn faintly
    hubs: tuple[str, ...]
    note: str


def _table(kind: str) -> dict[str, list[str]]:
    """The transition table as names, in the enum's declaration order (stable in any process)."""
    if kind == "run":
        return {s.value: sorted(t.value for t in RUN_TRANSITIONS[s]) for s in RunState}
    return {(k.value if k is not None else NO_ENTRY): sorted(t.value for t in KNOWLEDGE_TRANSITIONS[k])
            for k in [None, *Knowledge]}


@lru_cache(maxsize=None)
def layout(kind: str) -> Layout:
    import networkx as nx

    table = _table(kind)
    order = list(table)                  # enum order: stable and meaningful
    graph = nx.DiGraph()
    graph.add_nodes_from(order)
    graph.add_edges_from((a, b) for a, targets in table.items() for b in targets if a != b)
    terminals = [n for n in order if graph.out_degree(n) == 0]
    hubs = [n for n in order if n not in terminals and graph.out_degree(n) >= 0.75 * len(order)]
    main = [n for n in order if n not in terminals and n not in hubs]
    root = order[0]
    depth = nx.single_source_shortest_path_length(graph.subgraph(main), root)
    last = max(depth.values(), default=0)
    for n in main:
        depth.setdefault(n, last + 1)
    columns: list[list[str]] = [[] for _ in range(max(depth.values(), default=0) + 2)]
    for n in main:
        columns[depth[n]].append(n)
    columns[-1].extend(terminals)
    width_of = {n: len(n) * FONT_PX * 0.7 + 14 for n in order}
    boxes: dict[str, tuple[float, float, float]] = {}
    x = 8.0
    tallest = max(len(c) for c in columns)
    col_h = tallest * (BOX_H + ROW_GAP)
    for col in columns:
        w = max((width_of[n] for n in col), default=0)
        top = 28 + (col_h - len(col) * (BOX_H + ROW_GAP)) / 2
        for i, n in enumerate(col):
            boxes[n] = (x + w / 2, top + i * (BOX_H + ROW_GAP) + BOX_H / 2, width_of[n])
        x += w + COL_GAP
    width = x - COL_GAP + 8
    hub_y = 28 + col_h + 18
    if hubs:
        span = width / (len(hubs) + 1)
        for i, n in enumerate(hubs, 1):
            boxes[n] = (span * i, hub_y + BOX_H / 2, width_of[n])
    height = (hub_y + BOX_H + 26) if hubs else (28 + col_h + 10)
    edges = tuple((a, b) for a, b in graph.edges if a not in hubs and b not in hubs)
    note = (f"{', '.join(hubs)} may lead to almost any state; their transitions are drawn only when taken"
            if hubs else "")
    return Layout(width=width, height=height, boxes=boxes, edges=edges, hubs=tuple(hubs), note=note)


def _anchor(box: tuple[float, float, float], toward: tuple[float, float]) -> tuple[float, float]:
    cx, cy, w = box
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min((w / 2) / abs(dx) if dx else math.inf, (BOX_H / 2) / abs(dy) if dy else math.inf)
    return cx + dx * scale, cy + dy * scale


def _curve(lay: Layout, a: str, b: str) -> tuple[str, tuple[float, float]]:
    """A quadratic curve from box a to box b (bent to one side, so a->b and b->a differ), and
    the point halfway along it."""
    path, (p0, c, p1) = _curve_points(lay, a, b)
    return path, _at(p0, c, p1, 0.5)


def _at(p0, c, p1, t: float) -> tuple[float, float]:
    u = 1 - t
    return (u * u * p0[0] + 2 * u * t * c[0] + t * t * p1[0], u * u * p0[1] + 2 * u * t * c[1] + t * t * p1[1])


def _curve_points(lay: Layout, a: str, b: str):
    (ax, ay, _), (bx, by, _) = lay.boxes[a][:3], lay.boxes[b][:3]
    mx, my = (ax + bx) / 2, (ay + by) / 2
    dx, dy = bx - ax, by - ay
    length = math.hypot(dx, dy) or 1
    bend = 0.12 * length + 6
    cx, cy = mx - dy / length * bend, my + dx / length * bend
    p0 = _anchor(lay.boxes[a], (cx, cy))
    p1 = _anchor(lay.boxes[b], (cx, cy))
    return f"M{p0[0]:.1f},{p0[1]:.1f} Q{cx:.1f},{cy:.1f} {p1[0]:.1f},{p1[1]:.1f}", (p0, (cx, cy), p1)


def label_box(x: float, y: float, text: str) -> tuple[float, float, float, float]:
    """The extent of an edge label drawn centred at (x, y): x0, y0, x1, y1."""
    w = len(text) * FONT_PX * 0.66 + 4
    return x - w / 2, y - 7, x + w / 2, y + 6


def _hits(box, boxes) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in boxes)


def place_label(lay: Layout, a: str, b: str, text: str, taken: list) -> tuple[float, float]:
    """Where an edge's label goes: the first point along the curve (from its middle outwards)
    where it covers no state and no other label; the middle if none is free."""
    states = [(cx - w / 2, cy - BOX_H / 2, cx + w / 2, cy + BOX_H / 2) for cx, cy, w in lay.boxes.values()]
    if a == b:
        _, spot = _loop(lay, a)
        candidates = [spot, (spot[0] + 10, spot[1]), (spot[0] + 10, spot[1] - 10)]
    else:
        _, (p0, c, p1) = _curve_points(lay, a, b)
        candidates = [_at(p0, c, p1, t) for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78)]
        mx, my = candidates[0]
        candidates += [(mx + dx, my + dy) for dx, dy in ((0, -14), (0, 14), (-22, 0), (22, 0), (-22, -14),
                                                             (22, -14), (-22, 14), (22, 14), (0, -26), (0, 26))]
    for x, y in candidates:
        box = label_box(x, y, text)
        if not _hits(box, states) and not _hits(box, taken):
            taken.append(box)
            return x, y
    taken.append(label_box(*candidates[0], text))
    return candidates[0]


def _loop(lay: Layout, a: str) -> tuple[str, tuple[float, float]]:
    cx, cy, w = lay.boxes[a]
    x0, x1, y = cx - w / 4, cx + w / 4, cy - BOX_H / 2
    return f"M{x0:.1f},{y:.1f} C{x0:.1f},{y - 16:.1f} {x1:.1f},{y - 16:.1f} {x1:.1f},{y:.1f}", (x1 + 8, y - 8)


def svg(kind: str, steps: list[tuple[str | None, str]], title: str, *, numbered: bool = True,
        uid: str = "") -> str:
    """The machine of ``kind`` ("run" or "knowledge") with ``steps`` (from, to) highlighted.

    ``steps`` are in the order they happened; a ``None`` source is the initial state. Taken
    transitions are labelled with their step numbers (``numbered``) or with a count. ``uid``
    keeps the arrowhead ids unique when several diagrams share one page."""
    lay = layout(kind)
    table = _table(kind)
    ids = f"{kind}-{uid}" if uid else kind
    colors = style.RUN_COLORS if kind == "run" else style.KNOWLEDGE_COLORS
    taken: dict[tuple[str, str], list[int]] = {}
    visited: set[str] = set()
    for i, (a, b) in enumerate(steps, 1):
        a = a if a is not None else (NO_ENTRY if kind == "knowledge" else "INTAKE")
        taken.setdefault((a, b), []).append(i)
        visited.update((a, b))
    out = [f'<svg class="machine" viewBox="0 0 {lay.width:.0f} '
           f'{lay.height:.0f}" width="{lay.width:.0f}" height="{lay.height:.0f}" role="img" '
           f'aria-label="{escape(title)}" font-family="sans-serif" font-size="{FONT_PX}">',
           '<defs>'
           f'<marker id="a-{ids}-n" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" markerHeight="5" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#b0bec5"/></marker>'
           f'<marker id="a-{ids}-t" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="4" markerHeight="4" '
           f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{TAKEN}"/></marker>'
           f'<marker id="a-{ids}-x" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="4" markerHeight="4" '
           f'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="{ILLEGAL}"/></marker>'
           '</defs>',
           f'<text x="8" y="16" font-weight="bold" font-size="{FONT_PX + 1}">{escape(title)}</text>']
    for a, b in lay.edges:
        if (a, b) in taken:
            continue
        path, _ = _curve(lay, a, b)
        out.append(f'<path d="{path}" fill="none" stroke="#cfd8dc" stroke-width="0.7" '
                   f'marker-end="url(#a-{ids}-n)"/>')
    labels = []
    placed: list = []
    for (a, b), nums in taken.items():
        if a not in lay.boxes or b not in lay.boxes:
            continue                          # a state the model does not know: listed in text
        legal = b == a or b in table.get(a, ())
        color, arrow = (TAKEN, "t") if legal else (ILLEGAL, "x")
        path, _ = _loop(lay, a) if a == b else _curve(lay, a, b)
        dash = "" if legal else ' stroke-dasharray="4 3"'
        out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"{dash} '
                   f'marker-end="url(#a-{ids}-{arrow})"><title>{escape(a)} → {escape(b)}: step '
                   f'{", ".join(map(str, nums))}{"" if legal else " (not in the transition table)"}</title></path>')
        text = (",".join(map(str, nums[:3])) + ("…" if len(nums) > 3 else "")) if numbered \
            else f"×{len(nums)}"
        mid = place_label(lay, a, b, text, placed)
        labels.append(f'<text x="{mid[0]:.1f}" y="{mid[1] + 3:.1f}" text-anchor="middle" fill="{color}" '
                      f'font-weight="bold" stroke="white" stroke-width="3" paint-order="stroke">{text}</text>')
    for name, (cx, cy, w) in lay.boxes.items():
        seen = name in visited
        fill = colors.get(name, "#eceff1") if seen else "#ffffff"
        stroke = "#37474f" if seen else "#cfd8dc"
        ink = style.text_color(fill) if seen else "#90a4ae"
        hub = ' stroke-dasharray="3 2"' if name in lay.hubs else ""
        bold = ' font-weight="bold"' if seen else ""
        out.append(f'<rect x="{cx - w / 2:.1f}" y="{cy - BOX_H / 2:.1f}" width="{w:.1f}" height="{BOX_H}" '
                   f'rx="4" fill="{fill}" stroke="{stroke}"{hub}/>'
                   f'<text x="{cx:.1f}" y="{cy + 3.5:.1f}" text-anchor="middle" fill="{ink}"'
                   f'{bold}>{escape(name)}</text>')
    out.extend(labels)
    if lay.note:
        out.append(f'<text x="8" y="{lay.height - 6:.0f}" fill="#78909c" font-size="{FONT_PX - 1}">'
                   f'{escape(lay.note)}</text>')
    out.append("</svg>")
    return "".join(out)


def unknown_states(kind: str, steps: list[tuple[str, str]]) -> list[str]:
    """States in ``steps`` that the transition table does not define (drawn nowhere)."""
    lay = layout(kind)
    seen = {s for pair in steps for s in pair if s is not None}
    return sorted(s for s in seen if s not in lay.boxes)
