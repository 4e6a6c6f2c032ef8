"""One deliberately mismatched descriptor drawn three ways: the operand as intended, as lapis
predicts the tensor core reads it, and as the H200 read it (recovered from D).

Each cell is one element of the tested operand (rows x K of one K-step); its
colour is the row of the logical element it holds (so the intended panel is
horizontal bands) and its label that element's column; grey marks poison.
"""

from __future__ import annotations

import numpy as np


def plot_pair(panels: list[tuple[str, np.ndarray]], title: str, path: str, row_len: int) -> None:
    """panels: (name, ids) with ids (rows, K) = logical element index (row * row_len + col), -1 for poison."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = 16  # rows drawn: enough to see the pattern, large enough to label
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 6.2))
    for ax, (name, ids) in zip(axes, panels):
        ids = ids[:shown]
        row = np.where(ids >= 0, ids // row_len, np.nan).astype(float)
        ax.imshow(np.full(ids.shape, 0.85), cmap="gray", vmin=0, vmax=1, aspect="auto")
        ax.imshow(np.ma.masked_invalid(row % 20), cmap="tab20", vmin=0, vmax=20, aspect="auto")
        for (r, c), v in np.ndenumerate(ids):
            if v >= 0:
                ax.text(c, r, f"{v // row_len}.{v % row_len}", ha="center", va="center", fontsize=5)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("k (elements)")
        ax.set_ylabel("row m")
    fig.suptitle(title + f"\nfirst {shown} rows; label m.k and colour m: the logical element read; grey: poison",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
