"""One TMA box in shared memory, predicted by lapis beside the H200 dump, and where each logical chunk's banks are.

Panels 1 and 2 (predicted, measured): each cell is one 16-byte chunk of the dumped region at its place (rows of
128 B, absolute shared addresses on the left); its colour is the chunk's *logical* column (the 16-B chunk index
inside its box row, before the swizzle), so the 128B swizzle's XOR shows as each line's colours permuted; its
label `r<row>:c<chunk>`; grey cells kept the sentinel. Red lines mark 1024 B boundaries, where the 128B pattern
restarts. Panel 3 (banks): the box as the program sees it, box row by logical chunk, each cell coloured by the
bank group where the measured dump holds that chunk: bank = (byte address / 4) % 32, so a 16-B chunk covers banks
4g..4g+3 of group g = (address / 16) % 8 (CUDA C++ Programming Guide, shared memory: 32 banks of 4 bytes).
A column with 8 different colours over 8 rows is read without bank conflicts. matplotlib is imported inside
the function and the figure is a bare Agg Figure (no pyplot, no global backend change).
"""

from __future__ import annotations

import numpy as np

from lapis.figures.palette import INDEX_COLOURS, UNTOUCHED_COLOUR

__all__ = ["chunk_map", "bank_grid", "plot_box_pair"]

BANK_BYTES, BANKS, CHUNK = 4, 32, 16
GROUPS = BANKS * BANK_BYTES // CHUNK  # 8 bank groups of 4 banks


def chunk_map(region: np.ndarray, values_to_box: dict, elem_bytes: int, sentinel: int) -> np.ndarray:
    """(n_chunks, 2) array of (box row, chunk in row) per 16 B chunk; (-1, -1) for sentinel chunks, (-2, -2) for
    a chunk whose first element is no box element."""
    out = np.full((region.size // 16, 2), -1, np.int64)
    words = region.view(f"<u{elem_bytes}") if elem_bytes > 1 else region
    per = 16 // elem_bytes
    for c in range(out.shape[0]):
        if np.all(region[16 * c: 16 * c + 16] == sentinel):
            continue
        out[c] = values_to_box.get(int(words[c * per]), (-2, -2))
    return out


def bank_grid(chunks: np.ndarray, first_addr: int) -> np.ndarray:
    """(box rows, chunks per box row) of bank groups ((address / 16) % 8) where each logical chunk lies, from a
    chunk_map whose chunk 0 is at `first_addr` (bytes); -1 where no chunk of the map holds that box chunk."""
    held = chunks[:, 0] >= 0
    if not held.any():
        return np.full((0, 0), -1, np.int64)
    grid = np.full((chunks[held, 0].max() + 1, chunks[held, 1].max() + 1), -1, np.int64)
    for i in np.flatnonzero(held):
        grid[chunks[i, 0], chunks[i, 1]] = (first_addr // CHUNK + i) % GROUPS
    return grid


def _cells(ax, values, texts, font=6) -> None:
    """One coloured cell per entry of `values` (an index into INDEX_COLOURS; < 0: grey), labelled with texts."""
    from matplotlib.colors import ListedColormap, to_rgb

    rgb = np.array([to_rgb(c) for c in INDEX_COLOURS])[np.maximum(values, 0) % len(INDEX_COLOURS)]
    rgb[values < 0] = to_rgb(UNTOUCHED_COLOUR)
    ax.imshow(rgb, aspect="auto", interpolation="nearest", cmap=ListedColormap(INDEX_COLOURS))
    for (r, c), t in np.ndenumerate(texts):
        if t:
            ax.text(c, r, t, ha="center", va="center", fontsize=font)
    ax.set_xticks(np.arange(-0.5, values.shape[1]), minor=True)
    ax.set_yticks(np.arange(-0.5, values.shape[0]), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)


def plot_box_pair(predicted: np.ndarray, measured: np.ndarray, title: str, path: str, first_addr: int,
                  bytes_per_row: int = 128):
    """Draw two chunk maps (from chunk_map) side by side and the measured one's bank view (module docstring);
    first_addr is the absolute shared address of chunk 0. Saves a PNG at `path` (dpi 110) and returns the Figure:
    axes[0] predicted, axes[1] measured, axes[2] banks (images whose pixel colours are the cells')."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = bytes_per_row // CHUNK
    rows = predicted.shape[0] // cols
    banks = bank_grid(measured[: rows * cols], first_addr)
    fig = Figure(figsize=(15, 0.3 * rows + 2.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[cols, cols, max(banks.shape[1], 1)]))
    for ax, data, name in ((axes[0], predicted, "predicted (lapis)"), (axes[1], measured, "measured (H200 dump)")):
        d = data[: rows * cols].reshape(rows, cols, 2)
        texts = np.where(d[..., 0] >= 0, np.char.add(np.char.add("r", d[..., 0].astype(str)),
                                                     np.char.add(":c", d[..., 1].astype(str))), "")
        _cells(ax, np.where(d[..., 0] >= 0, d[..., 1], -1), texts)
        for r in range(rows + 1):
            if (first_addr + r * bytes_per_row) % 1024 == 0:
                ax.axhline(r - 0.5, color="red", lw=1.5)
        ax.set_title(f"{name}: colour = logical chunk c", fontsize=9)
        ax.set_xticks(range(cols), [f"+{CHUNK * c}" for c in range(cols)], fontsize=6)
        ax.set_xlabel("byte within the 128 B line (bank group = column)", fontsize=8)
        ax.set_yticks(range(0, rows, 2), [f"{first_addr + bytes_per_row * r:#x}" for r in range(0, rows, 2)],
                      fontsize=6)
        ax.set_ylabel("absolute shared-memory address", fontsize=8)
    ax = axes[2]
    if banks.size:
        texts = np.where(banks >= 0, np.char.add("g", banks.astype(str)), "")
        _cells(ax, banks, texts, font=7)
        ax.set_xticks(range(banks.shape[1]), [f"c{c}" for c in range(banks.shape[1])], fontsize=6)
        ax.set_yticks(range(banks.shape[0]), [f"r{r}" for r in range(banks.shape[0])], fontsize=6)
    ax.set_title("banks (measured): box row x logical chunk,\ncolour = bank group g (banks 4g..4g+3)", fontsize=9)
    ax.set_xlabel("logical 16 B chunk of the box row", fontsize=8)
    ax.set_ylabel("box row", fontsize=8)
    fig.suptitle(title + "\nlabel r<box row>:c<logical 16 B chunk of that row>; grey: sentinel left untouched; "
                 "red: 1024 B boundary; bank group g = (address / 16) % 8", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return fig
