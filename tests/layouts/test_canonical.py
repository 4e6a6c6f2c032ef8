"""Canonical smem layouts against PTX's worked examples and a pycute oracle.

Expected values are independent of lapis.layouts.canonical: literals derived by
hand from PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout"
(https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-shared-memory-layout),
or pycute (shipped with nvidia-cutlass) evaluating layouts written out here from
the PTX canonical-layout table.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycute import ComposedLayout
from pycute import Layout as PLayout
from pycute import Swizzle as PSwizzle

from lapis.errors import LayoutError
from lapis.layouts import CanonicalLayout, canonical_layout, swizzle

FAST = settings(max_examples=60, deadline=None)

SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
ELEM_BYTES = {"e4m3": 1, "s8": 1, "bf16": 2, "f16": 2, "tf32": 4, "f32": 4}


def grid(rows, cols):
    return np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")


def eval_pycute(layout, rows, cols):
    """Evaluate a pycute layout with one integer coordinate per (mn, k) mode."""
    return np.array([[layout(m, k) for k in range(cols)] for m in range(rows)], dtype=np.int64)


# ---------------------------------------------------------------------------
# The oracle: PTX canonical-layout table, written by hand in bytes
# ---------------------------------------------------------------------------


def ptx_oracle(major, swz, e, rows, cols, order):
    """(pycute byte layout incl. swizzle, pre-swizzle byte layout, LBO, SBO) from the PTX table.

    PTX table (elements, T = 16/e, c = span/16):
      K-major  ((8,m),(T,c*k)) : ((c*T, SBO), (1, T))  [none: (1, LBO) on the K side]
      MN-major ((T,c,m),(8,k)) : ((1, T, LBO or SBO), (c*T, SBO or LBO))
    Atoms are 8 * span bytes; the atom strides follow the stacking order.
    The K-major swizzled K mode gets a third level for K > one atom (a new
    descriptor per atom in hardware; here just the atom stride).
    """
    span = SPAN[swz]
    c, atom = span // 16, 8 * span
    T = 16 // e
    if major == "K":
        m, k = rows // 8, cols // (T * c)
    else:
        m, k = rows // (T * c), cols // 8
    mn_step, k_step = (atom, m * atom) if order == "mn-first" else (k * atom, atom)
    if major == "K":
        sbo = mn_step
        lbo = k_step if swz == "none" else None
        shape = ((8, m), (T, c, k))
        stride = ((span, sbo), (e, 16, k_step))
    elif swz == "none":  # MN interleave: SBO along MN, LBO along K
        sbo, lbo = mn_step, k_step
        shape = ((T, 1, m), (8, k))
        stride = ((e, 16, sbo), (16, lbo))
    else:  # MN swizzled: LBO along MN, SBO along K
        lbo, sbo = mn_step, k_step
        shape = ((T, c, m), (8, k))
        stride = ((e, 16, lbo), (span, sbo))
    plain = PLayout(shape, stride)
    return ComposedLayout(PSwizzle(int(math.log2(c)), 4, 3), 0, plain), plain, lbo, sbo


layouts = st.builds(
    lambda major, swz, dt, am, ak, order: (major, swz, dt, am, ak, order),
    st.sampled_from(["K", "MN"]),
    st.sampled_from(list(SPAN)),
    st.sampled_from(list(ELEM_BYTES)),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from(["mn-first", "k-first"]),
)


def build(params):
    """A CanonicalLayout of am x ak atoms, with the atom extents computed here from Table 38."""
    major, swz, dt, am, ak, order = params
    e = ELEM_BYTES[dt]
    atom_mn, atom_k = (8, SPAN[swz] // e) if major == "K" else (SPAN[swz] // e, 8)
    return CanonicalLayout(major, swz, dt, am * atom_mn, ak * atom_k, order), e


# ---------------------------------------------------------------------------
# PTX worked examples (PTX ISA 9.7.15.5.1.2.1.1-2: leading and stride dimension byte offsets)
# ---------------------------------------------------------------------------

# (major, swizzle, dtype, rows, cols, PTX layout in elements, LBO B, SBO B)
PTX_EXAMPLES = [
    ("K", "none", "tf32", 16, 16, (((8, 2), (4, 4)), ((4, 32), (1, 64))), 256, 128),
    ("MN", "none", "bf16", 16, 16, (((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))), 256, 128),
    ("MN", "32B", "bf16", 32, 16, (((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256))), 256, 512),
    ("MN", "64B", "bf16", 64, 16, (((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512))), 512, 1024),
    # K-major 32B tf32 as printed is ((8,2),(4,4)):((8,64),(1,4)), which is not a
    # bijection (see test below); its consistent reading is one atom wide in K.
    ("K", "32B", "tf32", 16, 8, (((8, 2), (4, 2)), ((8, 64), (1, 4))), None, 256),
]


@pytest.mark.parametrize("major,swz,dt,rows,cols,ptx,lbo,sbo", PTX_EXAMPLES)
def test_ptx_worked_examples(major, swz, dt, rows, cols, ptx, lbo, sbo):
    # PTX's examples stack atoms MN first.
    lay = CanonicalLayout(major, swz, dt, rows, cols, "mn-first")
    assert lay.lbo_bytes == lbo
    assert lay.sbo_bytes == sbo
    e = ELEM_BYTES[dt]
    expected = eval_pycute(PLayout(*ptx), rows, cols)
    mn, k = grid(rows, cols)
    assert np.array_equal(lay.offset_bytes(mn, k), expected * e)
    # Swizzle on element offsets: Swizzle<B, 4 - log2(e), 3> (notes §1.1 practical note).
    sw = PSwizzle(int(math.log2(SPAN[swz] // 16)), 4 - int(math.log2(e)), 3)
    swizzled = np.vectorize(sw)(expected)
    assert np.array_equal(lay.address(mn, k, base=0), swizzled * e)


def test_ptx_k_major_32b_tf32_example_as_printed_is_not_a_bijection():
    # ((8,2),(4,4)):((8,64),(1,4)): element (0, 8) and (1, 0) both land on offset 8,
    # because a 32 B row holds 8 tf32 values but the K mode spans 16. lapis uses
    # the one-atom-wide reading (test above) with the same SBO (256 B).
    printed = PLayout(((8, 2), (4, 4)), ((8, 64), (1, 4)))
    assert printed(0, 8) == printed(1, 0) == 8
    assert len({printed(m, k) for m in range(16) for k in range(16)}) < 256


def test_cutlass_k_major_sw128_bf16():
    # CUTLASS Layout_K_SW128_Atom<bf16> tiled over a 64 x 64 tile: SBO = 8 rows x 128 B.
    lay = CanonicalLayout("K", "128B", "bf16", 64, 64)
    assert lay.order == "mn-first"
    assert lay.lbo_bytes is None
    assert lay.sbo_bytes == 1024 and lay.sbo_bytes >> 4 == 64
    assert lay.atom_shape == (8, 64) and lay.atom_bytes == 1024
    assert lay.footprint_bytes == 8192
    # Derived by hand: 8 row groups at 512 elements, K = one atom of 8 chunks x 8.
    assert lay.ptx_text() == "((8,8),(8,8,1)):((64,512),(1,8,4096))"
    # As CUTLASS 4.2's print(tile_to_shape(Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64,_64>{})) writes it.
    assert lay.cute() == "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_8),(_64,_1)):((_64,_512),(_1,_0))"


def test_ptx_text_matches_ptx_print():
    lay = CanonicalLayout("MN", "none", "bf16", 16, 16, "mn-first")
    assert lay.ptx_text() == "((8,1,2),(8,2)):((1,8,64),(8,128))"


# ---------------------------------------------------------------------------
# Atoms (PTX Table 38, CuTe Layout_*_Atom for bf16)
# ---------------------------------------------------------------------------

ATOMS_BF16 = [
    ("K", "128B", (8, 64), 1024),
    ("K", "64B", (8, 32), 512),
    ("K", "32B", (8, 16), 256),
    ("K", "none", (8, 8), 128),
    ("MN", "128B", (64, 8), 1024),
    ("MN", "64B", (32, 8), 512),
    ("MN", "32B", (16, 8), 256),
    ("MN", "none", (8, 8), 128),
]


@pytest.mark.parametrize("major,swz,shape,nbytes", ATOMS_BF16)
def test_atom_table_bf16(major, swz, shape, nbytes):
    lay = CanonicalLayout(major, swz, "bf16", *shape)
    assert lay.atom_shape == shape
    assert lay.atom_bytes == nbytes == lay.footprint_bytes


def test_atom_tf32_mn_128b_is_32x8():
    # PTX Table 38 text: the 128B MN-major atom is (8*(128/32)) x 8 = 32 x 8 for tf32.
    assert CanonicalLayout("MN", "128B", "tf32", 32, 8).atom_shape == (32, 8)


def test_atom_row_is_contiguous_before_swizzle():
    # K-major SW128 bf16: atom (8,64):(64,1) (CuTe Layout_K_SW128_Atom), MN-major (64,8):(1,64).
    k = CanonicalLayout("K", "128B", "bf16", 8, 64)
    mn = CanonicalLayout("MN", "128B", "bf16", 64, 8)
    r, c = grid(8, 64)
    assert np.array_equal(k.offset_bytes(r, c), 2 * (64 * r + c))
    r, c = grid(64, 8)
    assert np.array_equal(mn.offset_bytes(r, c), 2 * (r + 64 * c))


def test_default_orders_follow_cutlass():
    assert CanonicalLayout("K", "128B", "bf16", 8, 64).order == "mn-first"
    assert CanonicalLayout("MN", "128B", "bf16", 64, 8).order == "k-first"


def test_orders_stack_atoms():
    # 2 x 2 atoms of K-major SW128 bf16 (16 x 128): atom (i, j) starts at
    # (i + 2 j) KiB mn-first, (2 i + j) KiB k-first.
    for order, starts in (("mn-first", {(0, 0): 0, (1, 0): 1024, (0, 1): 2048, (1, 1): 3072}),
                          ("k-first", {(0, 0): 0, (0, 1): 1024, (1, 0): 2048, (1, 1): 3072})):
        lay = CanonicalLayout("K", "128B", "bf16", 16, 128, order)
        for (i, j), start in starts.items():
            assert lay.offset_bytes(8 * i, 64 * j) == start


# ---------------------------------------------------------------------------
# Absolute-address swizzle
# ---------------------------------------------------------------------------


def test_swizzle_hand_values_sw128_bf16():
    lay = CanonicalLayout("K", "128B", "bf16", 8, 64)
    # (1, 0): offset 128 -> bits [9:7] = 1 XOR-ed into [6:4] -> 144.
    assert lay.address(1, 0) == 144
    # (1, 8): offset 144 -> 128.
    assert lay.address(1, 8) == 128
    # A tile at 1024 + 128 starts in row phase 1: (0, 0) lands at 1152 ^ 16 = 1168.
    assert lay.address(0, 0, base=1152) == 1168
    assert lay.address(7, 0, base=1024) == 1024 + 7 * 128 + 7 * 16


@pytest.mark.parametrize("swz", ["32B", "64B", "128B"])
def test_tile_at_base_plus_128_differs(swz):
    lay = CanonicalLayout("K", swz, "bf16", 16, SPAN[swz] // 2)
    mn, k = grid(lay.rows, lay.cols)
    at0 = lay.address(mn, k, base=4096)
    at128 = lay.address(mn, k, base=4096 + 128)
    assert not np.array_equal(at128 - 128, at0)


def test_no_swizzle_is_position_independent():
    lay = CanonicalLayout("K", "none", "bf16", 16, 16)
    mn, k = grid(16, 16)
    assert np.array_equal(lay.address(mn, k, base=144) - 144, lay.address(mn, k, base=0))


# ---------------------------------------------------------------------------
# K-steps (CUTLASS GMMA::DescriptorIterator, include/cute/atom/mma_traits_sm90_gmma.hpp)
# ---------------------------------------------------------------------------


def test_kstep_inside_sw128_atom():
    lay = CanonicalLayout("K", "128B", "bf16", 64, 128)  # 2 atoms in K, 8 in MN
    assert [lay.kstep_start(s) for s in range(4)] == [0, 32, 64, 96]
    # Step 4 is K = 64: the next atom along K, 8 MN atoms x 1024 B away (mn-first).
    assert lay.kstep_start(4) == 8192
    assert lay.kstep_start(5, base=1024) == 1024 + 8192 + 32


def test_kstep_defaults_are_32_bytes():
    assert CanonicalLayout("K", "128B", "tf32", 8, 32).kstep_start(1) == 32  # 8 tf32
    assert CanonicalLayout("K", "128B", "e4m3", 8, 128).kstep_start(1) == 32  # 32 fp8
    assert CanonicalLayout("K", "128B", "bf16", 8, 64).kstep_start(2, k_per_mma=8) == 32


def test_kstep_mn_major():
    # MN-major SW128 bf16, k-first: K atoms are 8 rows and 1024 B apart; K = 16 is 2 atoms.
    lay = CanonicalLayout("MN", "128B", "bf16", 64, 32)
    assert [lay.kstep_start(s) for s in range(2)] == [0, 2048]
    # MN-major none bf16 16x32 mn-first: 8-row K groups are LBO = 2 x 128 B apart.
    lay = CanonicalLayout("MN", "none", "bf16", 16, 32, "mn-first")
    assert lay.kstep_start(1) == 2 * 256


# ---------------------------------------------------------------------------
# Properties over all majors x swizzles x dtypes x orders x sizes x bases
# ---------------------------------------------------------------------------


@FAST
@given(layouts, st.integers(0, 4096))
def test_address_element_at_round_trip(params, base16):
    lay, _ = build(params)
    base = 16 * base16
    mn, k = grid(lay.rows, lay.cols)
    addr = lay.address(mn, k, base=base)
    back_mn, back_k = lay.element_at(addr, base=base)
    assert np.array_equal(back_mn, mn) and np.array_equal(back_k, k)
    i, j = int(mn.flat[-1]), int(k.flat[-1])
    assert lay.element_at(lay.address(i, j, base), base) == (i, j)


@FAST
@given(layouts, st.integers(0, 4096))
def test_address_is_a_bijection_onto_footprint(params, base16):
    lay, e = build(params)
    base = 16 * base16
    mn, k = grid(lay.rows, lay.cols)
    addr = lay.address(mn, k, base=base).ravel()
    assert len(np.unique(addr)) == lay.rows * lay.cols == lay.footprint_bytes // e
    assert np.all(addr % e == 0)


@FAST
@given(layouts, st.integers(0, 64))
def test_each_atom_occupies_its_own_bytes(params, j):
    lay, e = build(params)
    _, swz, _, am, ak, order = params
    base = 1024 * j  # aligned to every swizzle repeat
    amn, akk = lay.atom_shape
    atom_bytes = 8 * SPAN[swz]
    for i, jj in itertools.product(range(am), range(ak)):
        n = i + am * jj if order == "mn-first" else jj + ak * i
        r, c = grid(amn, akk)
        addr = lay.address(i * amn + r, jj * akk + c, base=base)
        lo = base + n * atom_bytes
        assert addr.min() >= lo and addr.max() < lo + atom_bytes
        assert len(np.unique(addr)) == atom_bytes // e


@FAST
@given(layouts, st.integers(0, 255))
def test_pycute_oracle(params, base16):
    lay, e = build(params)
    major, swz, _, _, _, order = params
    swizzled, plain, lbo, sbo = ptx_oracle(major, swz, e, lay.rows, lay.cols, order)
    assert lay.lbo_bytes == lbo and lay.sbo_bytes == sbo
    mn, k = grid(lay.rows, lay.cols)
    pre = eval_pycute(plain, lay.rows, lay.cols)
    assert np.array_equal(lay.offset_bytes(mn, k), pre)
    # Aligned base: the smem layout is the position-independent pycute composition.
    aligned = 1024 * (base16 % ((228 * 1024 - lay.footprint_bytes) // 1024 + 1))  # the tile stays in smem
    assert np.array_equal(lay.address(mn, k, base=aligned) - aligned, eval_pycute(swizzled, lay.rows, lay.cols))
    # Any 16 B base: the swizzle acts on the absolute address.
    base = 16 * base16 + 128
    sw = PSwizzle(int(math.log2(SPAN[swz] // 16)), 4, 3)
    assert np.array_equal(lay.address(mn, k, base=base), np.vectorize(sw)(pre + base))
    # The tensor_layouts view is the same map in elements.
    tl = np.array([[lay.layout(m, kk) for kk in range(lay.cols)] for m in range(lay.rows)])
    assert np.array_equal(tl * e, pre)


# ---------------------------------------------------------------------------
# Errors name their value
# ---------------------------------------------------------------------------


def raises_naming(value, fn, *args, **kw):
    with pytest.raises(LayoutError) as ei:
        fn(*args, **kw)
    assert f"got {value}" in str(ei.value), str(ei.value)
    return ei.value


def test_constructor_errors():
    raises_naming("'row'", CanonicalLayout, "row", "128B", "bf16", 8, 64)
    raises_naming("'m-first'", CanonicalLayout, "K", "128B", "bf16", 8, 64, "m-first")
    raises_naming("'96B'", CanonicalLayout, "K", "96B", "bf16", 8, 64)
    raises_naming("'fp4'", CanonicalLayout, "K", "128B", "fp4", 8, 64)
    err = raises_naming("12", CanonicalLayout, "K", "128B", "bf16", 12, 64)
    assert "8" in err.fix
    raises_naming("48", CanonicalLayout, "K", "128B", "bf16", 8, 48)
    raises_naming("32", CanonicalLayout, "MN", "128B", "bf16", 32, 8)  # MN atom is 64 bf16
    raises_naming("12", CanonicalLayout, "MN", "none", "bf16", 8, 12)
    raises_naming("0", CanonicalLayout, "K", "none", "bf16", 0, 8)
    raises_naming("6", canonical_layout, "K", "none", "tf32", 8, 6)  # not a multiple of T = 4
    raises_naming("2.5", CanonicalLayout, "K", "none", "bf16", 8, 2.5)


def test_access_errors():
    lay = CanonicalLayout("K", "128B", "bf16", 64, 64)
    raises_naming("64", lay.offset_bytes, 64, 0)
    raises_naming("-1", lay.offset_bytes, 0, -1)
    raises_naming("70", lay.address, np.array([0, 1]), np.array([3, 70]))
    raises_naming("0x408", lay.address, 0, 0, base=0x408)
    raises_naming("0x2000", lay.element_at, 0x2000)  # footprint is 8192 B
    raises_naming("0x3", lay.element_at, np.array([0, 2, 3]))  # not on a bf16 boundary
    raises_naming("0x10", lay.element_at, 0x10, base=0x400)  # below the tile
    raises_naming("0x8", lay.element_at, 0, base=8)
    raises_naming("step 4 x 16", lay.kstep_start, 4)  # K = 64 is past the 64-wide tile
    raises_naming("step -1", lay.kstep_start, -1)
    raises_naming("0", lay.kstep_start, 0, k_per_mma=0)


def test_swizzle_lookup_shared():
    # canonical layouts accept the SwizzleMode objects of lapis.layouts.swizzle
    assert CanonicalLayout("K", swizzle("64B"), "bf16", 8, 32).swizzle is swizzle("64B")


def test_128b_with_32b_atomicity_is_mn_major_only():
    # tcgen05 only: Swizzle<2,5,2> (CUTLASS Layout_MN_SW128_32B_Atom): 128 B of MN x 4 K rows per atom.
    lay = CanonicalLayout("MN", "128B_base32B", "bf16", 64, 8)
    assert (lay.atom_shape, lay.atom_bytes, lay.swizzle.repeat_bytes) == ((64, 4), 512, 512)
    # K row 1 (bytes 128..255): 32 B units XOR (row & 3) = 1 -> MN element 0 sits 32 B into the row.
    assert lay.address(0, 1, 0) == 128 + 32 and lay.address(16, 1, 0) == 128
    with pytest.raises(LayoutError, match="only MN-major"):
        CanonicalLayout("K", "128B_base32B", "bf16", 8, 64)
