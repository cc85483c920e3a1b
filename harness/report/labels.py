"""The figure's words as :class:`Label`: matplotlib Text, written and drawn by a shorter path.

A figure writes some fifty strings. Through ``Axes.text`` and ``Text.draw`` each costs about
0.26 ms (0.5 ms with a box behind it), most of it generic work: a clip path computed from the
axes' patch for a text that is never clipped, units, rotation, a FancyBboxPatch per box. A
Label is a Text like any other (measured, found by ``findobj`` and drawn by every other
backend as matplotlib does); on Agg, upright, unclipped and without path effects, its draw
does only the arithmetic of ``Text._get_layout``, ``Text.update_bbox_position_size`` and
``Text.draw`` for that case (matplotlib 3.11, :data:`LAYOUT_OF`; another version takes the long
path), and draws its box as the one path the
FancyBboxPatch would: the same pixels, byte for byte (tests/test_report_figures.py draws the
library with :data:`FAST` on and off).

A box is ``box=(style, pad, facecolor, alpha)``, as ``bbox=dict(boxstyle=f"{style},pad={pad}",
fc=facecolor, ec="none", alpha=alpha)`` would give; any other backend (SVG) gets that bbox.
"""
from __future__ import annotations

import math
from functools import cache

__all__ = ["FAST", "Label", "fig_text", "offset", "text"]

#: Whether Labels take the short path on Agg (off: every Label is drawn by Text.draw).
FAST = True

#: the matplotlib version (major, minor) whose text layout the short path repeats
LAYOUT_OF = (3, 11)

_STYLES: dict[tuple[str, float], object] = {}   # BoxStyle by (style, pad)


def _font_heights(renderer, prop, dpi: float) -> tuple[float, float, float]:
    """A font's ascent, descent and line gap at its size: what Text._get_layout reads (from
    the renderer when it offers them, else from the font's tables at the figure's dpi)."""
    if hasattr(renderer, "_get_font_height_metrics"):
        got = renderer._get_font_height_metrics(prop)
        if None not in got[:2]:
            return got
    from matplotlib.font_manager import fontManager, get_font

    from .agg import table_heights

    return table_heights(get_font(fontManager._find_fonts_by_props(prop)), prop.get_size_in_points(), dpi)


@cache
def _label_class():
    """:class:`Label`, defined on first use (matplotlib is the report's optional extra: this
    module is imported without it)."""
    import matplotlib
    from matplotlib import colors as mcolors
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.patches import BoxStyle
    from matplotlib.text import Text
    from matplotlib.transforms import Affine2D

    # the arithmetic below is matplotlib 3.11's; another version draws every Label by Text.draw
    _SAME_LAYOUT = tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) == LAYOUT_OF

    class Label(Text):
        """A Text with a quick draw on Agg (see the module's docstring)."""

        _box: tuple[str, float, str, float] | None = None

        def set_box(self, box: tuple[str, float, str, float] | None) -> None:
            self._box = box

        def _fast(self, renderer) -> bool:
            if not _SAME_LAYOUT:
                return False
            unclipped = not self._clipon or (self.clipbox is None and self._clippath is None)
            return (FAST and isinstance(renderer, RendererAgg) and unclipped and self._bbox_patch is None
                    and self.get_rotation() == 0 and not self.get_usetex() and not self.get_wrap()
                    and not self.get_path_effects() and self.get_rotation_mode() == "default"
                    and self._url is None and self.get_snap() is None and not self.get_parse_math())

        def draw(self, renderer):
            if not self._fast(renderer):
                if self._box is not None and self._bbox_patch is None:
                    style, pad, fc, alpha = self._box
                    self.set_bbox(dict(boxstyle=f"{style},pad={pad}", fc=fc, ec="none", alpha=alpha))
                return super().draw(renderer)
            self._renderer = renderer
            if not self.get_visible() or self._text == "":
                return
            posx, posy = self.get_transform().transform((float(self._x), float(self._y)))
            if not (math.isfinite(posx) and math.isfinite(posy)):
                return
            lines, (x_box, y_box), (w_box, h_box) = self._layout(renderer)
            if self._box is not None:
                self._draw_box(renderer, posx + x_box, posy + y_box, w_box, h_box)
            gc = renderer.new_gc()
            gc.set_foreground(mcolors.to_rgba(self.get_color()), isRGBA=True)
            gc.set_alpha(self.get_alpha())
            gc.set_antialiased(self._antialiased)
            mtext = self if len(lines) == 1 else None
            flip = renderer.get_canvas_width_height()[1] if renderer.flipy() else None
            for line, x, y in lines:
                y = y + posy
                renderer.draw_text(gc, x + posx, y if flip is None else flip - y, line, self._fontproperties, 0,
                                   ismath=False, mtext=mtext)
            gc.restore()
            self.stale = False

        def _layout(self, renderer):
            """Text._get_layout at angle 0 (rotation mode "default"): each line with its offset from
            the anchor, and the text box's corner and size."""
            prop = self._fontproperties
            lines = self._text.split("\n")
            min_ascent, min_descent, line_gap = _font_heights(renderer, prop, self.figure.dpi)
            if len(lines) == 1:
                line_gap = 0
            spacing = self._linespacing
            thisy = 0.0
            wads, ys = [], []
            a = d = baseline = 0.0
            for line in lines:
                if line:
                    w, h, d = renderer.get_text_width_height_descent(line, prop, ismath=False)
                else:
                    w = h = d = 0
                a = h - d
                if spacing == "normal":
                    a = max(a, min_ascent) + line_gap / 2
                    d = max(d, min_descent) + line_gap / 2
                else:
                    line_height = spacing * (min_ascent + min_descent)
                    leading = line_height - (a + d)
                    a += leading / 2
                    d += leading / 2
                baseline = a - thisy
                thisy -= a
                wads.append((w, a, d))
                ys.append(thisy)
                thisy -= d
            descent = d
            ws = [w for w, _, _ in wads]
            width = max(ws)
            ymin = ys[-1] - descent
            malign = self._get_multialignment()
            if malign == "left":
                xs = [0 for _ in ws]
            elif malign == "center":
                xs = [0 + width / 2 - w / 2 for w in ws]
            else:
                xs = [0 + width - w for w in ws]
            halign, valign = self._horizontalalignment, self._verticalalignment
            offsetx = 0 if halign == "left" else width if halign == "right" else (0 + width) / 2
            height = 0 - ymin
            offsety = (ymin if valign == "bottom" else 0 if valign == "top" else (ymin + 0) / 2 if valign == "center"
                       else ymin + descent if valign == "baseline" else ymin + height - baseline / 2)
            out = [(line, x - offsetx, y - offsety) for line, x, y in zip(lines, xs, ys)]
            return out, (0 - offsetx, ymin - offsety), (width - 0, height)

        def _draw_box(self, renderer, x: float, y: float, w: float, h: float) -> None:
            """The box a FancyBboxPatch (``ec="none"``) draws behind a Text: its path at the text's
            corner, mutated by the font's size in pixels."""
            style, pad, fc, alpha = self._box
            boxstyle = _STYLES.get((style, pad))
            if boxstyle is None:
                boxstyle = _STYLES[(style, pad)] = BoxStyle(style, pad=pad)
            path = boxstyle(0.0, 0.0, w, h, renderer.points_to_pixels(self.get_size()))
            gc = renderer.new_gc()
            gc.set_linewidth(0)
            gc.set_capstyle("butt")
            gc.set_joinstyle("miter")
            gc.set_antialiased(True)
            gc.set_alpha(alpha)
            gc.set_foreground((0.0, 0.0, 0.0, 0.0), isRGBA=True)
            gc.set_dashes(0, None)
            face = mcolors.to_rgba(fc, alpha)
            renderer.draw_path(gc, path, Affine2D().translate(x, y), face if face[3] else None)
            gc.restore()

    return Label


def __getattr__(name: str):
    if name == "Label":
        return _label_class()
    raise AttributeError(name)


def text(plot, x: float, y: float, s: str, *, box=None, **kw) -> Label:
    """``ax.text(x, y, s, **kw)`` as a Label (``bbox`` as ``box``) in ``plot``
    (crashlab.report.layout.Plot), unclipped as ``ax.text`` is."""
    kw.setdefault("transform", plot.transData)
    label = _label_class()(x, y, s, **kw)
    if box is not None:
        label.set_box(box)
    return plot.add(label, clip=False)


def fig_text(fig, x: float, y: float, s: str, *, box=None, **kw) -> Label:
    """``fig.text(x, y, s, **kw)`` as a Label."""
    kw.setdefault("transform", fig.transSubfigure)
    label = _label_class()(x, y, s, **kw)
    if box is not None:
        label.set_box(box)
    label.set_figure(fig)
    fig.texts.append(label)
    label._remove_method = fig.texts.remove
    fig.stale = True
    return label


def offset(fig, transform, dx: float, dy: float):
    """``transform`` moved by (dx, dy) points: the anchor of an annotation's ``offset points``."""
    from matplotlib.transforms import ScaledTranslation

    return transform + ScaledTranslation(dx / 72, dy / 72, fig.dpi_scale_trans)
