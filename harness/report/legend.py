"""The figure's legend, drawn by hand (a matplotlib Legend costs a third of the render
time): only what the figure uses, in sections."""
from __future__ import annotations

from functools import cache

from . import style

#: Arrow colours by outcome: (colour, line style, legend label).
OUTCOMES = {
    "send": ("#37474f", "-", "send (may cause an effect)"),
    "read": ("#78909c", "-", "read (lookup, status, ...)"),
    "ok": ("#2e7d32", "-", "answer: ok"),
    "indefinite": ("#ef6c00", "-", "answer: indefinite (timeout, ...)"),
    "definite": ("#c62828", "-", "answer: definite error (refused, ...)"),
    "lost": ("#9e9e9e", (0, (2, 2)), "answer never seen (worker crashed)"),
}
MISMATCH = {"contradicts": ("#d50000", "////", "knowledge contradicts the service"),
            "lags": ("#4e342e", "\\\\\\\\", "knowledge behind the service (unknown)")}
DELIVERY = {"first": ("o", "#455a64", True, "inbox delivery"),
            "duplicate": ("D", "#c2185b", False, "duplicate delivery (same event id)")}
AUTHORITY = {"requested": ("o", "#5c6bc0", False, "approval requested"),
             "refused": ("X", "#6a1b9a", True, "authority check: not live"),
             "revoked": ("X", "#c62828", True, "revoked / capability changed")}
GRANT_COLOR = "#c5e1a5"
BAND_COLOR = "#ffe0b2"


def entries(used: dict[str, set[str]], violations: bool) -> list[tuple[str, dict, str]]:
    """(kind, spec, label) rows; kind is section, patch, line or glyph."""
    out: list[tuple[str, dict, str]] = []

    def glyph(spec, key=None):
        g, color, filled, label = spec
        out.append(("glyph", {"marker": g, "color": color, "filled": filled}, label))

    if used["marker"] or used["band"] or used["break"]:
        out.append(("section", {}, "markers"))
        for kind, (color, ls, lw, label) in style.MARKERS.items():
            if kind in used["marker"]:
                out.append(("line", {"color": color, "linestyle": ls, "linewidth": max(lw, 1.2)}, label))
        if used["band"]:
            out.append(("patch", {"facecolor": BAND_COLOR}, "repeated fault (one band)"))
        if used["break"]:
            out.append(("patch", {"facecolor": "#eeeeee", "edgecolor": "#9e9e9e", "hatch": "//"},
                        "time compressed (break)"))
    out.append(("section", {}, "run state"))
    for state, color in style.RUN_COLORS.items():
        if state in used["run"]:
            out.append(("patch", {"facecolor": color}, state))
    out.append(("patch", {"facecolor": style.WORKER_COLOR}, "worker alive"))
    if "lease" in used["worker"]:
        out.append(("line", {"color": style.LEASE_COLORS[1], "linewidth": 1.6}, "lease held (until expiry)"))
    if "lease_granted" in used["worker"]:   # an integration trace: the supervisor's grant, not a worker's call
        out.append(("line", {"color": style.LEASE_COLORS[1], "linewidth": 1.6}, "lease granted by crashlab"))
    if "paused" in used["worker"]:
        out.append(("patch", {"facecolor": "white", "edgecolor": "#6a1b9a", "hatch": "////"}, "paused (zombie)"))
    for kind in style.WORKER_GLYPHS:
        if kind in used["worker"]:
            glyph(style.WORKER_GLYPHS[kind])
    if used["authority"]:
        out.append(("section", {}, "authority"))
        if "granted" in used["authority"]:
            out.append(("patch", {"facecolor": GRANT_COLOR}, "approval live (until expiry)"))
        for kind in AUTHORITY:
            if kind in used["authority"]:
                glyph(AUTHORITY[kind])
    if used["inbox"]:
        out.append(("section", {}, "inbox"))
        for kind in DELIVERY:
            if kind in used["inbox"]:
                glyph(DELIVERY[kind])
    if used["arrow"]:
        out.append(("section", {}, "calls to services"))
        for kind, (color, ls, label) in OUTCOMES.items():
            if kind in used["arrow"]:
                out.append(("line", {"color": color, "linestyle": ls, "linewidth": 1.2}, label))
        if "repeat" in used["arrow"]:
            out.append(("patch", {"facecolor": "#eceff1", "edgecolor": "#90a4ae"}, "identical calls in a row (one mark)"))
    if used["cause"] or used["transport"]:
        out.append(("section", {}, "remote effects"))
        for cause, color in style.CAUSE_COLORS.items():
            if cause in used["cause"]:
                out.append(("patch", {"facecolor": color}, style.CAUSE_LABELS[cause]))
        if "released" in used["cause"]:
            out.append(("glyph", {"marker": "|", "color": "#212121", "filled": True}, "released (compensation)"))
        for kind in style.TRANSPORT_GLYPHS:
            if kind in used["transport"]:
                glyph(style.TRANSPORT_GLYPHS[kind])
    if used["knowledge"] or used["mismatch"]:
        out.append(("section", {}, "knowledge"))
        for k, color in style.KNOWLEDGE_COLORS.items():
            if k in used["knowledge"]:
                out.append(("patch", {"facecolor": color}, k))
        if "stale" in used["knowledge"]:
            out.append(("glyph", {"marker": "x", "color": "#c62828", "filled": True}, "append under a stale epoch"))
        for kind, (color, hatch, label) in MISMATCH.items():
            if kind in used["mismatch"]:
                out.append(("patch", {"facecolor": "none", "edgecolor": color, "hatch": hatch}, label))
    if used.get("final"):
        out.append(("section", {}, "where it ended"))
        out.append(("patch", {"facecolor": "white", "edgecolor": style.VIOLATION_COLOR},
                    "≠ an end state the service contradicts"))
    if violations:
        out.append(("section", {}, "violations"))
        out.append(("glyph", {"marker": "o", "color": style.VIOLATION_COLOR, "filled": False, "size": 60},
                    "cited evidence event"))
    return out


def draw(fig, rows: list[tuple[str, dict, str]], left_in: float, top_in: float, height_in: float,
         font: float) -> None:
    """Draw the legend straight on the figure (no axes), ``left_in`` and ``top_in`` in inches
    from the figure's left and top. The labels are one multi-line text (one text costs about
    as much to draw as one line of it); the section titles are placed on its lines, measured
    once, and the swatches beside them are one :class:`Swatches` artist."""
    from .agg import Canvas
    from .labels import fig_text

    if not rows:
        return
    fig_h = fig.get_figheight()
    tr = fig.dpi_scale_trans
    size = font - 0.5
    spacing = 1.45
    labels = fig_text(fig, left_in + 0.28, fig_h - top_in,
                      "\n".join("" if k == "section" else label for k, _, label in rows),
                      fontsize=size, va="top", linespacing=spacing, transform=tr)
    renderer = Canvas(fig).get_renderer()     # drawing the figure later reuses it
    box = labels.get_window_extent(renderer)
    if box.height / fig.dpi > height_in:             # too many rows: tighter lines, smaller type
        size, spacing = font - 1.5, 1.2
        labels.set_fontsize(size)
        labels.set_linespacing(spacing)
        box = labels.get_window_extent(renderer)
    step = box.height / fig.dpi / len(rows)
    top = box.y1 / fig.dpi
    for i, (kind, spec, label) in enumerate(rows):
        if kind == "section":
            fig_text(fig, left_in, top - (i + 0.5) * step, label, fontsize=size, fontweight="bold", va="center",
                     color="#37474f", transform=tr)
    shown = [(i, kind, spec) for i, (kind, spec, _) in enumerate(rows) if kind != "section"]
    fig.add_artist(_swatches_class()(shown, left_in, top, step))


def swatch(kind: str, spec: dict, left: float, y: float, step: float, transform):
    """The artist of one legend row's swatch: its left edge at ``left``, centred on ``y``
    (inches, in ``transform``), for rows ``step`` inches apart."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if kind == "patch":
        return Rectangle((left, y - step * 0.3), 0.19, step * 0.6, facecolor=spec["facecolor"],
                         edgecolor=spec.get("edgecolor", "none"), hatch=spec.get("hatch"), linewidth=0.6,
                         transform=transform)
    if kind == "line":
        return Line2D([left, left + 0.19], [y, y], color=spec["color"], linestyle=spec.get("linestyle", "-"),
                      linewidth=spec["linewidth"], transform=transform)
    filled = spec["filled"] or spec["marker"] in "x|_+1234"
    return Line2D([left + 0.095], [y], linestyle="none", marker=spec["marker"], markersize=spec.get("size", 30) ** 0.5,
                  markeredgewidth=1.1, markerfacecolor=spec["color"] if filled else "none",
                  markeredgecolor=spec["color"], transform=transform)


#: Whether the swatches are pasted as one image on Agg (off: drawn as vector artists everywhere).
IMAGES = True
#: Each distinct swatch drawn (key: kind, spec, row pitch, dpi): its RGBA pixels, top row
#: first, cropped to its ink, and where they sit from the row's centre (pixels left, down).
_SWATCHES: dict[tuple, tuple] = {}
_MARGIN = 4         # pixels around a swatch's nominal box (line caps, markers)


def _pixels(kind: str, spec: dict, step: float, dpi: float):
    """One swatch drawn alone on a transparent canvas: the same pixels wherever and in whatever
    legend it is later placed (a hatch is laid from its canvas's corner)."""
    import numpy as np
    from matplotlib.figure import Figure

    from .agg import Canvas

    key = (kind, repr(sorted(spec.items())), round(step * dpi, 6), dpi)
    hit = _SWATCHES.get(key)
    if hit is not None:
        return hit
    half = int(np.ceil(step * dpi / 2)) + _MARGIN
    width, height = int(np.ceil(0.19 * dpi)) + 2 * _MARGIN, 2 * half
    fig = Figure(figsize=((width + 1e-6) / dpi, (height + 1e-6) / dpi), dpi=dpi, facecolor="none")
    fig.add_artist(swatch(kind, spec, _MARGIN / dpi, half / dpi, step, fig.dpi_scale_trans))
    canvas = Canvas(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[:height, :width]
    ink_rows, ink_cols = np.nonzero(image[:, :, 3].any(axis=1))[0], np.nonzero(image[:, :, 3].any(axis=0))[0]
    if not len(ink_rows):
        hit = (image[:0, :0].copy(), 0, 0)
    else:
        r0, r1, c0, c1 = ink_rows[0], ink_rows[-1] + 1, ink_cols[0], ink_cols[-1] + 1
        hit = (image[r0:r1, c0:c1].copy(), int(c0) - _MARGIN, int(r0) - half)
    if len(_SWATCHES) > 10_000:
        _SWATCHES.clear()
    _SWATCHES[key] = hit
    return hit


@cache
def _swatches_class():
    """:class:`Swatches`, defined on first use (matplotlib is the report's optional extra)."""
    from matplotlib.artist import Artist
    from matplotlib.backends.backend_agg import RendererAgg

    class Swatches(Artist):
        """The legend's swatches as one artist: on Agg one image, pasted together from each
        distinct swatch drawn once per process (:func:`_pixels`); on any other backend (SVG)
        the vector artists of :func:`swatch`. ``rows``: (line number, kind, spec)."""

        def __init__(self, rows: list[tuple[int, str, dict]], left: float, top: float, step: float) -> None:
            super().__init__()
            self.rows, self.left, self.top, self.step = rows, left, top, step

        def image(self, dpi: float):
            """The pasted RGBA image, top row first, and its lower left corner in pixels."""
            import numpy as np

            placed = []
            for i, kind, spec in self.rows:
                pixels, dx, dy = _pixels(kind, spec, self.step, dpi)
                if pixels.size:
                    # the row's centre on a pixel boundary; y: the pixel row (from the bottom) of its top row
                    x, y = round(self.left * dpi) + dx, round((self.top - (i + 0.5) * self.step) * dpi) - dy - 1
                    placed.append((pixels, x, y))
            if not placed:
                return None, 0, 0
            x0, x1 = min(x for _, x, _ in placed), max(x + p.shape[1] for p, x, _ in placed)
            y0, y1 = min(y - p.shape[0] + 1 for p, _, y in placed), max(y for _, _, y in placed)
            out = np.zeros((y1 - y0 + 1, x1 - x0, 4), np.uint8)
            for pixels, x, y in placed:
                r, c = y1 - y, x - x0
                area = out[r:r + pixels.shape[0], c:c + pixels.shape[1]]
                np.copyto(area, pixels, where=pixels[:, :, 3:] > 0)
            return out, x0, y0

        def draw(self, renderer):
            if not self.get_visible():
                return
            fig = self.figure
            if IMAGES and isinstance(renderer, RendererAgg) and renderer.dpi == fig.dpi:
                image, x0, y0 = self.image(fig.dpi)
                if image is not None:
                    gc = renderer.new_gc()
                    renderer.draw_image(gc, x0, y0, image[::-1])     # Agg takes the bottom row first
                    gc.restore()
            else:
                for i, kind, spec in self.rows:
                    artist = swatch(kind, spec, self.left, self.top - (i + 0.5) * self.step, self.step,
                                    fig.dpi_scale_trans)
                    artist.set_figure(fig)
                    artist.draw(renderer)
            self.stale = False

    return Swatches


def __getattr__(name: str):
    if name == "Swatches":
        return _swatches_class()
    raise AttributeError(name)
