"""The TMA box figure: cells coloured by logical 16-B chunk (the swizzle's XOR visible) and the bank-group view."""

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from lapis.figures.palette import INDEX_COLOURS, UNTOUCHED_COLOUR
from lapis.figures.tma_box import bank_grid, chunk_map, plot_box_pair

SENTINEL = 0xEE


def _sw128_region(lines: int, guard: int):
    """bf16 box rows of 64 elements written with the 128B swizzle: line r, physical chunk j holds logical chunk
    j ^ (r % 8); element value = 1 + 64 r + 8 c (the first of its chunk), `guard` sentinel lines on each side."""
    region = np.full((lines + 2 * guard) * 128, SENTINEL, np.uint8)
    words = region.view("<u2")
    values = {}
    for r in range(lines):
        for j in range(8):
            c = j ^ (r % 8)
            first = 1 + 64 * r + 8 * c
            words[(guard + r) * 64 + 8 * j: (guard + r) * 64 + 8 * j + 8] = np.arange(first, first + 8)
            values[first] = (r, c)
    return region, values


def test_chunk_map_and_bank_grid_read_the_swizzle():
    region, values = _sw128_region(8, 1)
    m = chunk_map(region, values, 2, SENTINEL)
    assert (m[:8] == -1).all() and (m[-8:] == -1).all()  # the guard lines
    assert m[8 + 3 * 8 + 1].tolist() == [3, 2]  # line 3, physical chunk 1 holds logical chunk 1 ^ 3 = 2
    banks = bank_grid(m, first_addr=0x400 - 128)
    assert banks.shape == (8, 8)
    assert banks[3, 2] == 1 and banks[5, 0] == 5  # logical chunk c of row r sits in bank group c ^ r
    assert all(len(set(banks[:, c])) == 8 for c in range(8))  # each logical column over 8 rows: no bank conflict


def test_cells_are_coloured_by_logical_chunk_and_banks_by_group(tmp_path):
    region, values = _sw128_region(8, 1)
    m = chunk_map(region, values, 2, SENTINEL)
    path = tmp_path / "box.png"
    fig = plot_box_pair(m, m, "t", str(path), first_addr=0x380)
    pred, meas, banks = (ax.images[0].get_array() for ax in fig.axes[:3])
    rgb = [np.array(to_rgb(c)) for c in INDEX_COLOURS]
    assert np.allclose(pred[0, 0], to_rgb(UNTOUCHED_COLOUR))  # a guard line: grey
    assert np.allclose(pred[1 + 3, 1], rgb[2])  # line 3, physical chunk 1: logical chunk 2's colour
    assert np.allclose(meas[1 + 5, 7], rgb[7 ^ 5])
    assert banks.shape[:2] == (8, 8) and np.allclose(banks[3, 2], rgb[1])
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"r3:c2", "r0:c0", "r7:c7"} <= texts
    assert "bank group" in fig.axes[2].get_title()
    # the saved PNG (dpi 110): a corner of the predicted panel's cell (line 3, chunk 1), clear of its label, has
    # logical chunk 2's colour
    png = mpimg.imread(path)
    x, y = fig.axes[0].transData.transform((1 - 0.35, 1 + 3 + 0.35)) * 110 / fig.dpi
    h = png.shape[0]
    assert np.allclose(png[int(h - y), int(x), :3], rgb[2], atol=0.02)
    assert png.shape[1] == pytest.approx(15 * 110, abs=2)
