"""The figure of a canonical tile's shared memory, 16-B chunk by 16-B chunk.

Each cell is one 16-byte smem chunk drawn at its address (lines of one swizzle
span, 128 B without swizzle), coloured by the *logical* chunk it holds: hue =
the chunk's column along the contiguous dimension (K for K-major, MN for
MN-major), shade = its row inside the 8-row group. Swizzle atoms are outlined;
SBO and LBO are marked as byte distances from the tile start (PTX ISA
9.7.15.5.1.2; swizzle: PTX ISA 5.5.7). The chunk map itself comes from
`lapis.layouts.show.chunk_map`; this module only draws.

matplotlib is imported inside the function, and the figure is a bare
`matplotlib.figure.Figure` rendered by Agg: no pyplot, no global backend change.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np

from lapis.figures.palette import INDEX_COLOURS
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.show import CHUNK, any_descriptor, chunk_label, chunk_map, map_line_bytes

__all__ = ["plot_tile_chunks"]

LABEL_CELLS = 1100  # above this many cells, text labels would not fit: colours only
MAX_INCHES = (18.0, 15.0)  # largest figure (w, h); bigger tiles are scaled down
MIN_WIDTH = 8.0  # inches: room for the title of a narrow tile


# ---------------------------------------------------------------------------
# Geometry: smem lines wrapped into side-by-side panels of whole atoms
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Panels:
    lines: int  # smem lines drawn
    per_line: int  # 16-B chunks per line
    per_panel: int  # lines per panel (a multiple of 8 so atoms are not split)
    gap: float  # x distance between panels, in cell widths

    @property
    def count(self) -> int:
        return -(-self.lines // self.per_panel)

    def xy(self, line: float, chunk: float = 0.0) -> tuple[float, float]:
        """Data coordinates (x in cells, y in lines, 0 at top) of a line/chunk position."""
        p, y = divmod(line, self.per_panel)
        return p * (self.per_line + self.gap) + chunk, y

    @property
    def width(self) -> float:
        return self.count * self.per_line + (self.count - 1) * self.gap


def _panels(lines: int, per_line: int, cell_in: tuple[float, float], gap: float) -> _Panels:
    # Pick the panel count that makes the figure about 1.3 x wider than tall.
    cw, ch = cell_in
    p = max(1, round(np.sqrt(1.3 * lines * ch / ((per_line + gap) * cw))))
    per_panel = -(-lines // p)
    per_panel = min(lines, -(-per_panel // 8) * 8) if lines > 8 else lines
    return _Panels(lines, per_line, per_panel, gap)


# ---------------------------------------------------------------------------
# Colours: hue = logical chunk column, shade = row in the 8-row group
# ---------------------------------------------------------------------------


def _colours(layout: CanonicalLayout, mn, k, inside):
    from matplotlib.colors import to_rgb

    t = layout.dtype.per_16b
    col, row = (k // t, mn % 8) if layout.major == "K" else (mn // t, k % 8)
    # palette.INDEX_COLOURS (tab10 without its grey), cycled past 9 columns: every chunk of one swizzle row
    # (<= 8) gets a clearly different hue, which is what shows the XOR, and logical chunk c has the colour it
    # has in the TMA box figure.
    base = np.array([to_rgb(c) for c in INDEX_COLOURS])
    rgb = base[np.where(inside, col, 0) % len(base)]
    fade = (0.25 + 0.5 * row / 7.0)[..., None]  # row 0 strongest, row 7 palest
    rgb = rgb * (1 - fade) + fade
    rgb[~inside] = 1.0
    return rgb


# ---------------------------------------------------------------------------
# The figure
# ---------------------------------------------------------------------------


def plot_tile_chunks(layout: CanonicalLayout, base: int = 0, path=None, ax=None):
    """Draw the tile's shared memory as it lies, one cell per 16-B chunk.

    layout: a CanonicalLayout; base: absolute smem byte address of the tile.
    Cells sit at their absolute smem position and show (colour, and text when
    cells are big enough) the logical chunk they hold, e.g. `r3:k16-23`.
    Swizzle atoms are outlined; SBO and LBO are drawn as arrows from the tile
    start, labelled in bytes and encoded (bytes >> 4). Returns the Figure;
    saves a PNG to `path` when given; draws into `ax` when given (the SBO/LBO
    brackets then sit about 1 in left of it, outside the axes).
    """
    from matplotlib.collections import LineCollection

    addrs, mn, k, inside = chunk_map(layout, base)
    w = map_line_bytes(layout)
    labels = mn.size <= LABEL_CELLS
    cell_in = (0.82, 0.2) if labels else (0.28, 0.07)
    geo = _panels(len(addrs), w // CHUNK, cell_in, gap=0.55 if labels else 1.6)
    desc = any_descriptor(layout, base)  # encoded LBO/SBO; also validates base
    lines = _title_lines(layout, base, w, desc)
    if ax is None:
        fig, ax, font = _new_figure(geo, cell_in, lines)
    else:
        fig, font = ax.figure, 6.0
        ax.set_title("\n".join(textwrap.fill(t, 110) for t in lines), fontsize=9, loc="left")

    rgb = _colours(layout, mn, k, inside)
    for p in range(geo.count):
        sl = slice(p * geo.per_panel, min((p + 1) * geo.per_panel, geo.lines))
        x0, _ = geo.xy(sl.start)
        ax.imshow(rgb[sl], extent=(x0, x0 + geo.per_line, sl.stop - sl.start, 0),
                  interpolation="nearest", aspect="auto")
    if labels:
        _cell_grid(ax, geo, LineCollection)
        for i, j in zip(*np.nonzero(inside)):
            x, y = geo.xy(i, j)
            ax.text(x + 0.5, y + 0.5, chunk_label(layout, int(mn[i, j]), int(k[i, j])),
                    ha="center", va="center", fontsize=font)
    _atom_outlines(ax, layout, base, int(addrs[0]), w, geo, labels, LineCollection)
    inch = _inches(ax, geo)
    _addresses(ax, addrs, geo, font, labels, inch)
    _strides(ax, layout, base, int(addrs[0]), w, geo, font, inch, desc)

    ax.set_xlim(-0.05, geo.width + 0.05)
    ax.set_ylim(geo.per_panel + 0.05, -0.05)
    ax.set_axis_off()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _cell_grid(ax, geo: _Panels, LineCollection) -> None:
    # Thin white lines between cells: neighbours of one hue differ only by shade.
    segs = []
    for p in range(geo.count):
        x0, _ = geo.xy(p * geo.per_panel)
        h = min(geo.per_panel, geo.lines - p * geo.per_panel)
        segs += [[(x0, y), (x0 + geo.per_line, y)] for y in range(h + 1)]
        segs += [[(x0 + c, 0), (x0 + c, h)] for c in range(geo.per_line + 1)]
    ax.add_collection(LineCollection(segs, colors="white", linewidths=0.6))


def _atom_outlines(ax, layout, base, start, w, geo, labels, LineCollection) -> None:
    """Thick rectangles around each swizzle atom (each core matrix without swizzle).

    Core matrices are single lines: outlined only when cells carry text, else
    the outlines would hide the colours.
    """
    lw = 1.6 if layout.swizzle.bits else (1.0 if labels else 0.0)
    if not lw:
        return
    segs = []
    for i in range(layout.footprint_bytes // layout.atom_bytes):
        y0 = (base + i * layout.atom_bytes - start) / w
        x0, yp = geo.xy(int(y0))
        yp += y0 - int(y0)
        y1 = yp + layout.atom_bytes / w
        x1 = x0 + geo.per_line
        segs += [[(x0, yp), (x1, yp)], [(x0, y1), (x1, y1)], [(x0, yp), (x0, y1)], [(x1, yp), (x1, y1)]]
    ax.add_collection(LineCollection(segs, colors="black", linewidths=lw))


def _inches(ax, geo: _Panels) -> tuple[float, float]:
    """(cell width, line height) in inches, as drawn."""
    pos, (fw, fh) = ax.get_position(), ax.figure.get_size_inches()
    return pos.width * fw / geo.width, pos.height * fh / geo.per_panel


def _addresses(ax, addrs, geo, font, labels, inch) -> None:
    """Absolute address left of each panel (every atom, sparser when lines are thin); chunk offsets on top."""
    step = 8 * max(1, round(0.18 / (8 * inch[1]))) if geo.per_panel > 16 else 1
    for i in range(0, geo.lines, step):
        x, y = geo.xy(i)
        ax.text(x - 0.06 / inch[0], y + 0.5, f"{int(addrs[i]):#x}", ha="right", va="center",
                fontsize=font * 0.9, color="0.3")
    if labels:
        for c in range(geo.per_line):
            ax.text(c + 0.5, -0.25, f"+{c * CHUNK:#04x}", ha="center", va="bottom", fontsize=font * 0.9,
                    color="0.3")


def _stride_text(name: str, value: int | None, enc: int) -> str:
    return f"{name} unused (enc {enc})" if value is None else f"{name} = {value} B (enc {enc})"


def _strides(ax, layout, base, start, w, geo, font, inch, d) -> None:
    """Brackets from the tile start to tile start + SBO (0.5 in left) and + LBO (0.9 in left).

    The full label ("SBO = 1024 B (enc 64)") runs along a bracket long enough to
    hold it; a short bracket gets just its name (the title has the numbers).
    """
    for name, value, enc, left_in in (("SBO", layout.sbo_bytes, d.sbo >> 4, 0.5),
                                      ("LBO", layout.lbo_bytes, d.lbo >> 4, 0.9)):
        if value is None or value >= layout.footprint_bytes:
            continue  # unused, or no second group in this tile: said in the title
        a0, a1 = (base - start) / w, (base + value - start) / w
        (x0, y0), (x1, y1) = geo.xy(a0), geo.xy(a1)
        text = _stride_text(name, value, enc)
        red = {"color": "crimson", "fontsize": font, "clip_on": False}
        if x0 == x1:  # same panel: a vertical bracket in the left margin
            xa = x0 - left_in / inch[0]
            ax.annotate("", xy=(xa, y1), xytext=(xa, y0), annotation_clip=False,
                        arrowprops={"arrowstyle": "|-|,widthA=0.3,widthB=0.3", "color": "crimson", "lw": 1.2})
            if len(text) * 0.6 * font / 72 <= (y1 - y0) * inch[1]:
                ax.text(xa - 0.04 / inch[0], (y0 + y1) / 2, text, rotation=90, ha="right", va="center", **red)
            else:
                ax.text(xa, y0 - 0.05 / inch[1], name, ha="center", va="bottom", **red)
        else:  # another panel: a path over the panels and down the gap to the target line
            _jump(ax, (x0, y0), (x1, y1), text, geo, inch, red)


def _jump(ax, src, dst, text, geo, inch, style) -> None:
    """Draw src (top-left of the tile) -> above the panels -> the gap left of dst -> dst, labelled on top."""
    (x0, y0), (x1, y1) = src, dst
    top, xg, ym = y0 - 0.4 / inch[1], x1 - geo.gap / 2, y1 + 0.2
    ax.plot([x0, x0, xg, xg], [y0, top, top, ym], color="crimson", lw=1.2, clip_on=False)
    ax.annotate("", xy=(x1, ym), xytext=(xg, ym), annotation_clip=False,
                arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1.2, "shrinkA": 0, "shrinkB": 0})
    ax.text((x0 + xg) / 2, top, text, ha="center", va="bottom", **style)


def _title_lines(layout, base, w, d) -> list[str]:
    what = ("logical K chunk (k // T), shade = row mn % 8" if layout.major == "K"
            else "logical MN chunk (mn // T), shade = K row k % 8")
    atom = "swizzle atom" if layout.swizzle.bits else "core matrix"
    sbo, lbo = _stride_text("SBO", layout.sbo_bytes, d.sbo >> 4), _stride_text("LBO", layout.lbo_bytes, d.lbo >> 4)
    lines = [(f"{layout.major}-major, swizzle {layout.swizzle.name}, {layout.dtype.name}, "
              f"{layout.rows} x {layout.cols} elements ({layout.order}), smem base {base:#x}"),
             f"{sbo};  {lbo}",
             (f"each cell = one 16-B smem chunk at its absolute address ({w} B lines); colour = {what}; "
              f"thick outline = {atom} ({layout.atom_bytes} B)")]
    for name, value in (("SBO", layout.sbo_bytes), ("LBO", layout.lbo_bytes)):
        if value is not None and value >= layout.footprint_bytes:
            lines.append(f"{name} jumps past this tile (only one group in its direction)")
    return lines


def _new_figure(geo: _Panels, cell_in, lines):
    """A bare Agg-rendered Figure sized so cells keep their size up to MAX_INCHES; margins in inches."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    left, right, bottom = 1.5, 0.3, 0.3
    bw, bh = geo.width * cell_in[0], geo.per_panel * cell_in[1]
    s = min(1.0, (MAX_INCHES[0] - left - right) / bw, (MAX_INCHES[1] - 2.0) / bh)
    bw, bh, font = bw * s, bh * s, max(4.0, 7.0 * s)
    fw = max(MIN_WIDTH, left + right + bw)
    size = 10.0
    chars = int((fw - 0.2) * 72 / (0.55 * size))  # ~0.55 em per character
    title = "\n".join(textwrap.fill(t, chars, subsequent_indent="  ") for t in lines)
    top = 0.15 + (title.count("\n") + 1) * size * 1.25 / 72 + 0.7  # title, a jump arrow, chunk offsets
    fh = top + bottom + bh
    fig = Figure(figsize=(fw, fh))
    FigureCanvasAgg(fig)  # render with Agg whatever pyplot's backend is
    fig.text(0.1 / fw, 1 - 0.12 / fh, title, ha="left", va="top", fontsize=size)
    ax = fig.add_axes((left / fw, bottom / fh, bw / fw, bh / fh))
    return fig, ax, font
