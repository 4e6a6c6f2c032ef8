"""One TMA box in shared memory, predicted by lapis beside the H200 dump.

Each cell is one 16-byte chunk of the dumped region (rows of 128 B, absolute
shared addresses on the left); its colour is the box row the chunk holds and
its label `r<row>:c<chunk>` the 16 B chunk of that row; grey cells kept the
sentinel. Red lines mark 1024 B boundaries, where the 128B pattern restarts.
"""

from __future__ import annotations

import numpy as np

# tab20 without its two greys (indices 14, 15), which would read as untouched memory
_PALETTE = [c for i, c in enumerate(__import__("matplotlib").colormaps["tab20"].colors) if i not in (14, 15)]


def chunk_map(region: np.ndarray, values_to_box: dict, elem_bytes: int, sentinel: int) -> np.ndarray:
    """(n_chunks, 2) array of (box row, chunk in row) per 16 B chunk; (-1, -1) for sentinel chunks."""
    out = np.full((region.size // 16, 2), -1, np.int64)
    words = region.view(f"<u{elem_bytes}") if elem_bytes > 1 else region
    per = 16 // elem_bytes
    for c in range(out.shape[0]):
        if np.all(region[16 * c: 16 * c + 16] == sentinel):
            continue
        out[c] = values_to_box.get(int(words[c * per]), (-2, -2))
    return out


def plot_box_pair(predicted: np.ndarray, measured: np.ndarray, title: str, path: str, first_addr: int,
                  bytes_per_row: int = 128):
    """Draw two chunk maps (from chunk_map) side by side; first_addr is the absolute address of chunk 0."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    cols = bytes_per_row // 16
    rows = predicted.shape[0] // cols
    n = len(_PALETTE)
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.3 * rows + 1.8))
    for ax, data, name in ((axes[0], predicted, "predicted (lapis)"), (axes[1], measured, "measured (H200 dump)")):
        grid = data[: rows * cols, 0].reshape(rows, cols).astype(float)
        ax.imshow(np.full(grid.shape, 0.85), cmap="gray", vmin=0, vmax=1, aspect="auto")
        ax.imshow(np.ma.masked_less(grid, 0) % n, cmap=ListedColormap(_PALETTE), vmin=0, vmax=n, aspect="auto")
        for (r, c), row in np.ndenumerate(grid):
            if row >= 0:
                ax.text(c, r, f"r{int(row)}:c{int(data[r * cols + c, 1])}", ha="center", va="center", fontsize=6)
        for r in range(rows + 1):
            if (first_addr + r * bytes_per_row) % 1024 == 0:
                ax.axhline(r - 0.5, color="red", lw=1.5)
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(cols), [f"+{16 * c}" for c in range(cols)], fontsize=6)
        ax.set_xlabel("byte within the 128 B line")
        ax.set_yticks(range(0, rows, 2), [f"{first_addr + bytes_per_row * r:#x}" for r in range(0, rows, 2)],
                      fontsize=6)
        ax.set_ylabel("absolute shared-memory address")
    fig.suptitle(title + "\nlabel r<box row>:c<16 B chunk of that row>; grey: sentinel left untouched; "
                 "red: 1024 B boundary", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
