"""The Agg canvas the figures are drawn on: matplotlib's own, with its text work cached
across figures. The pixels are the same, byte for byte (tests/test_report_figures.py).

matplotlib 3.11 measures, lays out and rasterises every string glyph by glyph, afresh for
each figure (its caches live with one renderer, and every figure gets a new one). The
library's seventy figures draw about five thousand strings but only some seven hundred
distinct ones, and most of their glyphs fall again on a sub-pixel offset already seen, so
this renderer keeps, for the life of the process:

* the extent of a string (width, height, descent), keyed by font, size, dpi and hinting;
* the glyph layout of a string, keyed likewise;
* the bitmap of a glyph at a sub-pixel offset: FreeType's raster of a glyph moved by whole
  pixels is the same raster, moved, so one bitmap serves every position with that fraction;
* a font's ascent, descent and line gap at a size (read from its tables for every text).

A string's glyphs are then blended into the canvas in as few calls as their rectangles allow
(most strings: one) rather than one call per glyph.

Only upright plain text takes the cached path; mathtext, TeX and rotated text are drawn by
matplotlib as they are. The layout and glyph caches copy the 3.11 drawing code, so they are
used only with the matplotlib versions checked against it (:data:`FAST_TEXT`); with any
other the strings' extents are still cached and everything else is matplotlib's own.
"""
from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib import ft2font
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font

__all__ = ["Canvas", "FAST_TEXT"]


def _version(text: str) -> tuple[int, int]:
    major, minor = (text.split(".") + ["0"])[:2]
    return int("".join(c for c in major if c.isdigit()) or 0), int("".join(c for c in minor if c.isdigit()) or 0)


#: Whether the layout and glyph caches replace matplotlib's text drawing (checked on 3.11).
FAST_TEXT = (_version(mpl.__version__) == (3, 11) and hasattr(RendererAgg, "_prepare_font")
             and hasattr(ft2font, "RenderMode")
             and all(hasattr(ft2font.FT2Font, name) for name in ("_layout", "_render_glyph", "_set_transform")))

_UPRIGHT = np.array([[0x10000, 0], [0, 0x10000]])     # the 16.16 matrix matplotlib sets at angle 0

_EXTENTS: dict[tuple, tuple[float, float, float]] = {}
_LAYOUTS: dict[tuple, tuple] = {}
_GLYPHS: dict[tuple, tuple] = {}
_HEIGHTS: dict[tuple, tuple] = {}
#: Beyond this many entries a cache is emptied (a long-lived process rendering many reports).
CACHE_LIMIT = 200_000


def table_heights(font, size: float, dpi: float) -> tuple:
    """A font's ascent, descent and line gap at ``size`` points and ``dpi``, from its OS/2 (else
    hhea) table, as Text._get_layout of 3.11 reads them; remembered."""
    key = (font, size, dpi)
    hit = _HEIGHTS.get(key)
    if hit is None:
        hit = (None, None, None)
        for table_name, linegap_key, ascent_key, descent_key in (
                ('OS/2', 'sTypoLineGap', 'sTypoAscender', 'sTypoDescender'),
                ('hhea', 'lineGap', 'ascent', 'descent')):
            table = font.get_sfnt_table(table_name)
            if table is None:
                continue
            scale = 1 / font.get_sfnt_table('head')['unitsPerEm'] * size * dpi / 72
            hit = (table[ascent_key] * scale, -table[descent_key] * scale, table[linegap_key] * scale)
            break
        _remember(_HEIGHTS, key, hit)
    return hit


def _remember(cache: dict, key, value):
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def _prop_key(prop) -> tuple:
    return (tuple(prop.get_family()), prop.get_style(), prop.get_variant(), prop.get_weight(),
            prop.get_stretch(), prop.get_size_in_points(), str(prop.get_file()), prop.get_math_fontfamily())


def _frozen(value):
    if value is None or isinstance(value, str):
        return value
    return tuple(tuple(v) if isinstance(v, list) else v for v in value)


class Renderer(RendererAgg):
    """matplotlib's Agg renderer with the text caches above. One renderer draws within one rc
    context (the fonts a property resolves to are remembered for the renderer's life)."""

    def __init__(self, width, height, dpi):
        super().__init__(width, height, dpi)
        self._fonts: dict[tuple, object] = {}

    def _font_of(self, prop):
        """The FT2Font a font property resolves to (what ``_prepare_font`` finds), without its
        side effects: a cache key."""
        key = _prop_key(prop)
        font = self._fonts.get(key)
        if font is None:
            font = self._fonts[key] = get_font(fontManager._find_fonts_by_props(prop))
        return font

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:
            return super().get_text_width_height_descent(s, prop, ismath)
        key = (self._font_of(prop), prop.get_size_in_points(), self.dpi, get_hinting_flag(), s)
        hit = _EXTENTS.get(key)
        if hit is None:
            hit = _remember(_EXTENTS, key, super().get_text_width_height_descent(s, prop, ismath))
        return hit

    if FAST_TEXT:
        def _get_font_height_metrics(self, prop):
            """A font's ascent, descent and line gap at a size, which Text._get_layout of 3.11
            reads from the font's tables for every text it measures (the same arithmetic)."""
            return table_heights(self._font_of(prop), prop.get_size_in_points(), self.dpi)

        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if ismath or angle != 0:
                return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
            features = mtext.get_fontfeatures() if mtext is not None else None
            language = mtext.get_language() if mtext is not None else None
            flags = get_hinting_flag()
            size = prop.get_size_in_points()
            dpi = self.dpi
            key = (self._font_of(prop), size, dpi, flags, s, _frozen(features), _frozen(language))
            glyphs = _LAYOUTS.get(key)
            if glyphs is None:
                items = self._prepare_font(prop)._layout(s, flags=flags, features=features, language=language)
                glyphs = _remember(_LAYOUTS, key, tuple((i.ft_object, i.glyph_index, i.x, i.y) for i in items))
            # matplotlib's _draw_text_glyphs_and_boxes at angle 0 (cos 1, sin 0): the glyph's
            # origin in 26.6 fixed point, its raster found by the origin's fraction
            antialiased = gc.get_antialiased()
            mode = ft2font.RenderMode.NORMAL if antialiased else ft2font.RenderMode.MONO
            lift = self.height - y
            bottom = int(self.height)
            batch: list[tuple] = []     # glyphs whose rectangles are disjoint: (buffer, x0, y0, x1, y1)
            reach = None                # the batch's rightmost pixel column + 1
            for font, index, dx, dy in glyphs:
                gx = int(round(0x40 * (x + dx)))
                gy = int(round(0x40 * (lift + dy)))
                gkey = (font, size, dpi, index, gx & 63, gy & 63, flags, mode)
                raster = _GLYPHS.get(gkey)
                if raster is None:
                    font.set_size(size, dpi)
                    font._set_transform(_UPRIGHT, [gx & 63, gy & 63])
                    bitmap = font._render_glyph(index, flags, mode)
                    buffer = bitmap.buffer
                    if not antialiased:
                        buffer *= 0xff
                    raster = _remember(_GLYPHS, gkey, (buffer, bitmap.left, bitmap.top - buffer.shape[0]))
                buffer, left, top_less_rows = raster
                if not buffer.size:             # a space has no pixels to blend
                    continue
                x0 = left + (gx >> 6)
                y1 = bottom - top_less_rows - (gy >> 6)
                rows, cols = buffer.shape
                x1 = x0 + cols
                y0 = y1 - rows
                if reach is not None and x0 < reach and any(
                        x0 < b[3] and b[1] < x1 and y0 < b[4] and b[2] < y1 for b in batch):
                    self._blend(batch, gc)      # it covers a pixel of one before it: that one first
                    batch, reach = [], None
                batch.append((buffer, x0, y0, x1, y1))
                reach = x1 if reach is None else max(reach, x1)
            self._blend(batch, gc)

        def _blend(self, batch: list[tuple], gc) -> None:
            """Blend glyphs whose rectangles are disjoint in one call, as one image (zero
            elsewhere): Agg leaves a pixel of zero coverage untouched and each pixel gets at
            most one glyph, so the pixels are those of one call per glyph, in any order."""
            if len(batch) == 1:
                buffer, x0, _, _, y1 = batch[0]
                self._renderer.draw_text_image(buffer, x0, y1, 0, gc)
            elif batch:
                left, top = min(b[1] for b in batch), min(b[2] for b in batch)
                right, low = max(b[3] for b in batch), max(b[4] for b in batch)
                image = np.zeros((low - top, right - left), np.uint8)
                for buffer, x0, y0, x1, y1 in batch:
                    image[y0 - top:y1 - top, x0 - left:x1 - left] = buffer
                self._renderer.draw_text_image(image, left, low, 0, gc)


class Canvas(FigureCanvasAgg):
    """FigureCanvasAgg drawing with :class:`Renderer`."""

    def get_renderer(self, *args, **kwargs):
        if FAST_TEXT and not args and not kwargs:        # FigureCanvasAgg.get_renderer of 3.11
            w, h = self.get_width_height(physical=True)
            key = w, h, self.figure.dpi
            if self._lastKey != key:
                self.renderer = Renderer(w, h, self.figure.dpi)
                self._lastKey = key
            return self.renderer
        renderer = super().get_renderer(*args, **kwargs)
        if not isinstance(renderer, Renderer):              # a new one: the same, with the caches
            renderer = self.renderer = Renderer(renderer.width, renderer.height, renderer.dpi)
        return renderer
