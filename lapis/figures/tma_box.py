"""One TMA box in shared memory, predicted by lapis beside the H200 dump.

Each cell is one 16-byte chunk of the dumped region (rows of 128 B); its colour
is the box row the chunk holds and its label the 16 B chunk index within that
row; sentinel (untouched) chunks are grey.
"""

from __future__ import annotations

import numpy as np


def chunk_map(region: np.ndarray, values_to_box: dict, elem_bytes: int, sentinel: int) -> np.ndarray:
    """(n_chunks, 2) array of (box row, chunk in row) per 16 B chunk; (-1, -1) for sentinel chunks."""
    out = np.full((region.size // 16, 2), -1, np.int64)
    words = region.view(f"<u{elem_bytes}") if elem_bytes > 1 else region
    per = 16 // elem_bytes
    for c in range(out.shape[0]):
        chunk = region[16 * c: 16 * c + 16]
        if np.all(chunk == sentinel):
            continue
        out[c] = values_to_box.get(int(words[c * per]), (-2, -2))
    return out


def plot_box_pair(predicted: np.ndarray, measured: np.ndarray, title: str, path: str, bytes_per_row: int = 128):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    cols = bytes_per_row // 16
    rows = predicted.shape[0] // cols
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.32 * rows + 1.6))
    cmap = ListedColormap(plt.get_cmap("tab20").colors)
    for ax, data, name in ((axes[0], predicted, "predicted (lapis)"), (axes[1], measured, "measured (H200 dump)")):
        grid = data[: rows * cols, 0].reshape(rows, cols).astype(float)
        shown = np.ma.masked_less(grid, 0)
        ax.imshow(np.full(grid.shape, 0.85), cmap="gray", vmin=0, vmax=1, aspect="auto")
        ax.imshow(shown % 20, cmap=cmap, vmin=0, vmax=20, aspect="auto")
        for (r, c), row in np.ndenumerate(grid):
            if row >= 0:
                ax.text(c, r, f"{int(row)}.{int(data[r * cols + c, 1])}", ha="center", va="center", fontsize=6)
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(cols), [f"+{16 * c}" for c in range(cols)], fontsize=6)
        ax.set_yticks(range(0, rows, 4), [f"{bytes_per_row * r}" for r in range(0, rows, 4)], fontsize=6)
        ax.set_ylabel("bytes from 256 B before the destination")
    fig.suptitle(title + "\ncell label: box row . 16 B chunk of that row; grey: sentinel left untouched", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
