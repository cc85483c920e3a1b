"""The figure's legend, drawn by hand (a matplotlib Legend costs a third of the render
time): only what the figure uses, in sections."""
from __future__ import annotations

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
    as much to draw as one line of it); the swatches and section titles are placed on its
    lines, measured once."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    from .agg import Canvas

    if not rows:
        return
    fig_h = fig.get_figheight()
    tr = fig.dpi_scale_trans
    size = font - 0.5
    spacing = 1.45
    labels = fig.text(left_in + 0.28, fig_h - top_in, "\n".join("" if k == "section" else label for k, _, label in rows),
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
        y = top - (i + 0.5) * step
        if kind == "section":
            fig.text(left_in, y, label, fontsize=size, fontweight="bold", va="center", color="#37474f", transform=tr)
        elif kind == "patch":
            fig.add_artist(Rectangle((left_in, y - step * 0.3), 0.19, step * 0.6, facecolor=spec["facecolor"],
                                     edgecolor=spec.get("edgecolor", "none"), hatch=spec.get("hatch"),
                                     linewidth=0.6, transform=tr))
        elif kind == "line":
            fig.add_artist(Line2D([left_in, left_in + 0.19], [y, y], color=spec["color"],
                                  linestyle=spec.get("linestyle", "-"), linewidth=spec["linewidth"], transform=tr))
        else:
            filled = spec["filled"] or spec["marker"] in "x|_+1234"
            fig.add_artist(Line2D([left_in + 0.095], [y], linestyle="none", marker=spec["marker"],
                                  markersize=spec.get("size", 30) ** 0.5, markeredgewidth=1.1,
                                  markerfacecolor=spec["color"] if filled else "none",
                                  markeredgecolor=spec["color"], transform=tr))
