"""The layout algebra lapis takes from tensor-layouts, on every canonical layout (every major, swizzle with
128B_base32B, dtype and atom order, over a range of shapes), against values computed here: the atom geometry of
PTX ISA 9.7.15.5.1.2 (Table 38), the XOR of PTX ISA 5.5.7, and literals."""

import itertools

import numpy as np
import pytest
from tensor_layouts import congruent, flatten, size

from lapis.layouts import DTYPES, SWIZZLES, CanonicalLayout
from lapis.layouts.canonical import library_swizzle
from lapis.layouts.cute_input import canonical_match, element_offsets, parse
from lapis.layouts.swizzle import B128_BASE32B

SWIZZLE_NAMES = {"K": ["none", "32B", "64B", "128B"], "MN": ["none", "32B", "64B", "128B", "128B_base32B"]}
ATOM_GRIDS = [(1, 1), (2, 1), (1, 2), (3, 2), (2, 4), (4, 3)]
SPAN_ROWS = {"none": (16, 8), "32B": (32, 8), "64B": (64, 8), "128B": (128, 8), "128B_base32B": (128, 4)}


def every_canonical_layout():
    for major, dt, order, (am, ak) in itertools.product(("K", "MN"), DTYPES, ("mn-first", "k-first"), ATOM_GRIDS):
        for sw in SWIZZLE_NAMES[major]:
            span, rows = SPAN_ROWS[sw]
            w = span // DTYPES[dt].bytes
            atom = (rows, w) if major == "K" else (w, rows)
            yield CanonicalLayout(major, sw, dt, am * atom[0], ak * atom[1], order)


ALL = list(every_canonical_layout())


def test_the_enumeration_covers_every_major_swizzle_dtype_and_order():
    seen = {(c.major, c.swizzle.name, c.dtype.name, c.order) for c in ALL}
    assert len(seen) == 2 * len(DTYPES) * 2 * 4 + len(DTYPES) * 2
    assert len(ALL) == len(seen) * len(ATOM_GRIDS)


def atom_geometry_offsets(major, sw, e, rows, cols, order):
    """Byte offset of every (mn, k) from PTX's atom geometry: atoms of `rows` strided rows x span bytes, dense,
    stacked MN first or K first; K-major rows run along K, MN-major rows along MN."""
    span, atom_rows = SPAN_ROWS[sw]
    w = span // e
    amn, ak = (atom_rows, w) if major == "K" else (w, atom_rows)
    n_mn, n_k = rows // amn, cols // ak
    mn, k = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    i, r = mn // amn, mn % amn
    j, c = k // ak, k % ak
    atom = i + n_mn * j if order == "mn-first" else j + n_k * i
    inner = r * span + c * e if major == "K" else c * span + r * e
    return atom * atom_rows * span + inner


def xor_ptx(addr, sw):
    """PTX ISA 5.5.7: 16-B chunk bits [4, 4+B) XOR row bits [7, 7+B); 128B with 32 B atomicity: 32-B chunk bits
    [5, 7) XOR bits [7, 9)."""
    if sw == "128B_base32B":
        return addr ^ (((addr >> 7) & 3) << 5)
    bits = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[sw]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_forward_and_inverse_maps_are_the_atom_geometry(dt):
    for lay in (c for c in ALL if c.dtype.name == dt):
        e = lay.elem_bytes
        mn, k = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
        want = atom_geometry_offsets(lay.major, lay.swizzle.name, e, lay.rows, lay.cols, lay.order)
        assert np.array_equal(lay.offset_bytes(mn, k), want), lay
        base = 0x480 if 0x480 + lay.footprint_bytes <= 228 * 1024 else 0
        addr = lay.address(mn, k, base)
        assert np.array_equal(addr, xor_ptx(base + want, lay.swizzle.name)), lay
        back_mn, back_k = lay.element_at(addr, base)
        assert np.array_equal(back_mn, mn) and np.array_equal(back_k, k), lay


@pytest.mark.parametrize("mode", [*SWIZZLES.values(), B128_BASE32B], ids=lambda m: m.name)
def test_library_swizzle_is_ptxs_xor_and_the_tma_models(mode):
    a = np.arange(228 * 1024, dtype=np.int64)
    assert np.array_equal(library_swizzle(mode)(a), xor_ptx(a, mode.name))
    assert np.array_equal(library_swizzle(mode)(a), mode.apply(a))  # the numpy XOR the TMA model keeps


def test_library_swizzle_units():
    # 128B on bytes: address 0x80 (row 1) holds chunk 1 at +0x10; on bf16 elements the same is Swizzle<3,3,3>.
    assert library_swizzle(SWIZZLES["128B"])(0x80) == 0x90
    assert library_swizzle(SWIZZLES["128B"], 2)(0x40) == 0x48
    assert library_swizzle(B128_BASE32B, 4)(0x20) == 0x28  # 32 B chunks of f32: 128 B row 1 -> +32 B


@pytest.mark.parametrize("t,flat,n", [(8, (8,), 8), ((8, (2, 4)), (8, 2, 4), 64), (((8, 16), (64, 2)), (8, 16, 64, 2),
                                                                                    16384)])
def test_library_flatten_and_size(t, flat, n):
    assert flatten(t) == flat and size(t) == n


@pytest.mark.parametrize("a,b,same", [((8, (2, 4)), (1, (2, 3)), True), ((8, 2), (1, (2, 3)), False),
                                      (8, (1,), False), (((8, 16), (64, 2)), ((64, 512), (1, 8192)), True)])
def test_library_congruent(a, b, same):
    assert congruent(a, b) == same


def _as_cute(lay: CanonicalLayout, shape, stride) -> str:
    return f"{lay.swizzle.cute} o smem_ptr[{lay.dtype.bits}b](unset) o {shape}:{stride}".replace(" ", "")


@pytest.mark.parametrize("dt", ["u8", "bf16", "f32"])
def test_canonical_match_finds_each_layout_in_either_split_and_refuses_a_spoilt_one(dt):
    """CuTe's split and PTX's of a canonical layout match it (or an equal tile: with one atom row or column
    both orders are the same map); one stride changed, they do not (at most as a padded, LBO/SBO-only match)."""
    for lay in (c for c in ALL if c.dtype.name == dt and c.rows * c.cols <= 65536):
        ptx_shape, ptx_stride = lay._shape_stride()
        for shape, stride in ((lay.layout.shape, lay.layout.stride), (ptx_shape, ptx_stride)):
            text = _as_cute(lay, shape, stride)
            m = canonical_match(text)
            assert m["canonical"] and m["layout"].to_tensor_layouts() == lay.to_tensor_layouts(), text
            assert (m["layout"].major, m["layout"].rows, m["layout"].cols) == (lay.major, lay.rows, lay.cols)
            mn, k = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
            assert np.array_equal(element_offsets(parse(text)) * lay.elem_bytes, lay.offset_bytes(mn, k))
        spoilt = ((ptx_stride[0][0] + 1,) + ptx_stride[0][1:],) + ptx_stride[1:]
        m = canonical_match(_as_cute(lay, ptx_shape, spoilt))
        assert m["layout"] is None, lay


def test_a_mismatch_names_its_first_element():
    # Rows 72 elements apart, K contiguous: K-major none bf16 puts K element 8 in the next core matrix along K,
    # 8 MN core matrices x 128 B = 1024 B on (mn-first), so row 0 first differs at k = 8 (16 B as given).
    m = canonical_match("Sw<0,4,3> o (_64,_64):(_72,_1)", "bf16")
    assert not m["canonical"]
    assert "K-major mn-first: element (0, 8) is at 16 B, the canonical layout puts it at 1024 B" in m["reason"]
