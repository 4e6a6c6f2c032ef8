"""The layout algebra tensor-layouts does for lapis gives what lapis's hand-written code gave, on every canonical
layout: every major, swizzle (128B_base32B included), dtype and atom order, over a range of shapes."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensor_layouts import congruent, flatten, size

from lapis.errors import LayoutError
from lapis.layouts import DTYPES, SWIZZLES, CanonicalLayout
from lapis.layouts.canonical import library_swizzle
from lapis.layouts.cute_input import (_congruent, _flat, _handwritten_canonical, _handwritten_element_offsets,
                                      _size, canonical_match, element_offsets, parse)
from lapis.layouts.swizzle import B128_BASE32B

SWIZZLE_NAMES = {"K": ["none", "32B", "64B", "128B"], "MN": ["none", "32B", "64B", "128B", "128B_base32B"]}
ATOM_GRIDS = [(1, 1), (2, 1), (1, 2), (3, 2), (2, 4), (4, 3)]


def every_canonical_layout():
    for major, dt, order, (am, ak) in itertools.product(("K", "MN"), DTYPES, ("mn-first", "k-first"), ATOM_GRIDS):
        for sw in SWIZZLE_NAMES[major]:
            span, rows = (128, 4) if sw == "128B_base32B" else (SWIZZLES[sw].span_bytes, 8)
            w = span // DTYPES[dt].bytes
            atom = (rows, w) if major == "K" else (w, rows)
            try:
                yield CanonicalLayout(major, sw, dt, am * atom[0], ak * atom[1], order)
            except LayoutError:  # larger than shared memory
                pass


ALL = list(every_canonical_layout())


def test_the_enumeration_covers_every_major_swizzle_dtype_and_order():
    seen = {(c.major, c.swizzle.name, c.dtype.name, c.order) for c in ALL}
    assert len(seen) == 2 * len(DTYPES) * 2 * 4 + len(DTYPES) * 2
    assert len(ALL) == 2 * 2 * len(DTYPES) * len(ATOM_GRIDS) * 4 + 2 * len(DTYPES) * len(ATOM_GRIDS)  # all fit


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_library_forward_and_inverse_maps_equal_the_hand_written_ones(dt):
    for lay in (c for c in ALL if c.dtype.name == dt):
        mn, k = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
        assert np.array_equal(lay.offset_bytes(mn, k), lay._handwritten_offset_bytes(mn, k)), lay
        base = 0x480 if 0x480 + lay.footprint_bytes <= 228 * 1024 else 0
        addr = lay.address(mn, k, base)
        got, old = lay.element_at(addr, base), lay._handwritten_element_at(addr, base)
        assert np.array_equal(got[0], old[0]) and np.array_equal(got[1], old[1]), lay


@pytest.mark.parametrize("mode", [*SWIZZLES.values(), B128_BASE32B], ids=lambda m: m.name)
def test_library_swizzle_equals_the_hand_written_xor_on_every_smem_address(mode):
    a = np.arange(228 * 1024, dtype=np.int64)
    assert np.array_equal(library_swizzle(mode)(a), mode.apply(a))


nested = st.recursive(st.integers(1, 64), lambda kids: st.lists(kids, min_size=1, max_size=3).map(tuple),
                      max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(nested, nested)
def test_library_flatten_size_and_congruent_equal_the_hand_written_ones(a, b):
    assert list(flatten(a)) == _flat(a)
    assert size(a) == _size(a)
    assert congruent(a, b) == _congruent(a, b)
    assert congruent(a, a)


def _as_cute(lay: CanonicalLayout, shape, stride) -> str:
    return f"{lay.swizzle.cute} o smem_ptr[{lay.dtype.bits}b](unset) o {shape}:{stride}".replace(" ", "")


@pytest.mark.parametrize("dt", ["u8", "bf16", "f32"])
def test_library_comparison_equals_the_element_by_element_one(dt):
    """Each canonical layout, in CuTe's and PTX's splits, and spoilt by one stride, is judged alike."""
    for lay in (c for c in ALL if c.dtype.name == dt and c.rows * c.cols <= 65536):
        ptx_shape, ptx_stride = lay._shape_stride()
        spoilt = ((ptx_stride[0][0] + 1,) + ptx_stride[0][1:],) + ptx_stride[1:]
        for shape, stride in ((lay.layout.shape, lay.layout.stride), (ptx_shape, ptx_stride), (ptx_shape, spoilt)):
            text = _as_cute(lay, shape, stride)
            p = parse(text)
            offsets = element_offsets(p)
            assert np.array_equal(offsets, _handwritten_element_offsets(p))
            m = canonical_match(text)
            old = _handwritten_canonical(p, offsets, dt)
            assert (m["canonical"] and m["layout"] is not None) == (old is not None), text
            if old is not None:
                assert (m["major"], m["order"]) == old, text
