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
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    shown = 16  # rows drawn: enough to see the pattern, large enough to label
    palette = [c for i, c in enumerate(colormaps["tab20"].colors) if i not in (14, 15)]  # greys mean poison
    fig = Figure(figsize=(6.4 * len(panels), 7.5))
    FigureCanvasAgg(fig)  # render with Agg whatever pyplot's backend is
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, ids) in zip(axes, panels):
        ids = ids[:shown]
        row = np.where(ids >= 0, ids // row_len, np.nan).astype(float)
        ax.imshow(np.full(ids.shape, 0.85), cmap="gray", vmin=0, vmax=1, aspect="auto")
        ax.imshow(np.ma.masked_invalid(row % len(palette)), cmap=ListedColormap(palette), vmin=0,
                  vmax=len(palette), aspect="auto")
        for (r, c), v in np.ndenumerate(ids):
            if v >= 0:
                ax.text(c, r, f"{v // row_len}.{v % row_len}", ha="center", va="center", fontsize=6.5)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("k (elements)")
        ax.set_ylabel("row m")
    fig.suptitle(title + f"\nfirst {shown} of {panels[0][1].shape[0]} rows; label m.k and colour m: the logical "
                 "element read; grey: poison", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
