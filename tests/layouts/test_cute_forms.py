"""The tile as CuTe builds and prints it, its tensor-layouts round trip, and the CuTe spellings `--cute` reads.

Oracles, independent of lapis: strings printed by C++ CuTe (CUTLASS 4.2, `print(tile_to_shape(atom, shape,
step))`, compiled with nvcc), and pycute (nvidia-cutlass) building tile_to_shape from CUTLASS's atom definitions
written out here.
"""

import itertools

import numpy as np
import pytest
from pycute import Layout as PLayout
from pycute import logical_product, make_layout
from pycute import size as psize
from tensor_layouts import ComposedLayout, Layout, Swizzle

from lapis.cli import main
from lapis.errors import LayoutError
from lapis.layouts import DTYPES, CanonicalLayout
from lapis.layouts.cute_input import MAX_CHARS, MAX_DEPTH, canonical_match, parse

# (major, swizzle, dtype, rows, cols, order) -> what CUTLASS 4.2's print(tile_to_shape(...)) wrote.
CPP_PRINTS = [
    ("K", "128B", "bf16", 128, 128, "mn-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))"),
    ("K", "128B", "bf16", 128, 64, "mn-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_1)):((_64,_512),(_1,_0))"),
    ("K", "128B", "bf16", 128, 128, "k-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_2)):((_64,_1024),(_1,_512))"),
    ("MN", "128B", "bf16", 128, 64, "k-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_64,_2),(_8,_8)):((_1,_4096),(_64,_512))"),
    ("MN", "128B", "bf16", 64, 64, "k-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_64,_1),(_8,_8)):((_1,_0),(_64,_512))"),
    ("MN", "128B", "bf16", 128, 8, "k-first",
     "Sw<3,4,3> o smem_ptr[16b](unset) o ((_64,_2),(_8,_1)):((_1,_512),(_64,_0))"),
    ("K", "none", "bf16", 64, 32, "mn-first",
     "Sw<0,4,3> o smem_ptr[16b](unset) o ((_8,_8),(_8,_4)):((_8,_64),(_1,_512))"),
    ("MN", "none", "bf16", 64, 32, "k-first",
     "Sw<0,4,3> o smem_ptr[16b](unset) o ((_8,_8),(_8,_4)):((_1,_256),(_8,_64))"),
    ("K", "32B", "f32", 64, 8, "mn-first",
     "Sw<1,4,3> o smem_ptr[32b](unset) o ((_8,_8),(_8,_1)):((_8,_64),(_1,_0))"),
    ("MN", "64B", "u8", 64, 64, "k-first",
     "Sw<2,4,3> o smem_ptr[8b](unset) o ((_64,_1),(_8,_8)):((_1,_0),(_64,_512))"),
    ("MN", "128B_base32B", "bf16", 128, 8, "k-first",
     "Sw<2,5,2> o smem_ptr[16b](unset) o ((_64,_2),(_4,_2)):((_1,_512),(_64,_256))"),
    ("K", "64B", "u8", 24, 128, "k-first",
     "Sw<2,4,3> o smem_ptr[8b](unset) o ((_8,_3),(_64,_2)):((_64,_1024),(_1,_512))"),
    ("MN", "32B", "f32", 16, 16, "mn-first",
     "Sw<1,4,3> o smem_ptr[32b](unset) o ((_8,_2),(_8,_2)):((_1,_64),(_8,_128))"),
]


@pytest.mark.parametrize("major,sw,dt,rows,cols,order,printed", CPP_PRINTS)
def test_cute_is_what_cpp_cute_prints(major, sw, dt, rows, cols, order, printed):
    assert CanonicalLayout(major, sw, dt, rows, cols, order).cute() == printed


# CUTLASS's atoms in bits (GMMA::Layout_*_Atom_Bits, UMMA::Layout_MN_SW128_32B_Atom_Bits): K-major
# (8, span bits):(span bits, 1), MN-major (span bits, 8):(1, span bits); 4 K rows for 32 B atomicity.
ATOM_BITS = {"none": (128, 8), "32B": (256, 8), "64B": (512, 8), "128B": (1024, 8), "128B_base32B": (1024, 4)}


def pycute_tile(major, sw, bits, rows, cols, order):
    """tile_to_shape as cute/layout.hpp writes it, in pycute: blocked_product(atom, make_ordered_layout(...)),
    with the atom upcast from bits to elements (stride-1 mode: shape / bits; others: stride / bits)."""
    span, k_rows = ATOM_BITS[sw]
    w = span // bits
    atom = PLayout((k_rows, w), (w, 1)) if major == "K" else PLayout((w, k_rows), (1, w))
    reps = (rows // psize(atom[0]), cols // psize(atom[1]))
    # make_ordered_layout: C++'s compact_order gives a static _1 mode stride _0
    strides = (1, reps[0]) if order == "mn-first" else (reps[1], 1)
    tiler = PLayout(reps, tuple(0 if n == 1 else d for n, d in zip(reps, strides)))
    prod = logical_product(atom, tiler)
    return make_layout(make_layout(prod[0][0], prod[1][0]), make_layout(prod[0][1], prod[1][1]))


def zero_unit_strides(shape, stride):
    if isinstance(shape, tuple):
        return tuple(zero_unit_strides(s, d) for s, d in zip(shape, stride))
    return 0 if shape == 1 else stride


SHAPES = [(1, 1), (2, 1), (1, 2), (3, 2), (2, 4)]


@pytest.mark.parametrize("major", ["K", "MN"])
def test_layout_is_pycutes_tile_to_shape(major):
    swizzles = ["none", "32B", "64B", "128B"] + (["128B_base32B"] if major == "MN" else [])
    for sw, dt, order, (am, ak) in itertools.product(swizzles, ["u8", "bf16", "f32"], ["mn-first", "k-first"],
                                                      SHAPES):
        bits = DTYPES[dt].bits
        span, k_rows = ATOM_BITS[sw]
        atom = (k_rows, span // bits) if major == "K" else (span // bits, k_rows)
        lay = CanonicalLayout(major, sw, dt, am * atom[0], ak * atom[1], order)
        ref = pycute_tile(major, sw, bits, lay.rows, lay.cols, order)
        assert lay.layout.shape == ref.shape, lay
        assert lay.layout.stride == zero_unit_strides(ref.shape, ref.stride), lay
        mn, k = np.meshgrid(np.arange(lay.rows), np.arange(lay.cols), indexing="ij")
        want = np.array([[ref(m, q) for q in range(lay.cols)] for m in range(lay.rows)]) * (bits // 8)
        assert np.array_equal(lay.offset_bytes(mn, k), want), lay


# ---------------------------------------------------------------------------
# tensor-layouts round trip, swizzle kept
# ---------------------------------------------------------------------------

SWIZZLE_BITS = {"none": (0, 4, 3), "32B": (1, 4, 3), "64B": (2, 4, 3), "128B": (3, 4, 3), "128B_base32B": (2, 5, 2)}


def every_canonical_layout():
    for major, dt, order, (am, ak) in itertools.product(("K", "MN"), DTYPES, ("mn-first", "k-first"),
                                                         SHAPES + [(4, 3), (1, 8)]):
        for sw in ("none", "32B", "64B", "128B") + (("128B_base32B",) if major == "MN" else ()):
            span, k_rows = ATOM_BITS[sw]
            w = span // DTYPES[dt].bits
            atom = (k_rows, w) if major == "K" else (w, k_rows)
            yield CanonicalLayout(major, sw, dt, am * atom[0], ak * atom[1], order)


@pytest.mark.parametrize("major", ["K", "MN"])
def test_tensor_layouts_round_trip_keeps_the_swizzle(major):
    count = 0
    for lay in (c for c in every_canonical_layout() if c.major == major):
        tl = lay.to_tensor_layouts()
        b, m, s = SWIZZLE_BITS[lay.swizzle.name]
        e = lay.elem_bytes
        # the byte swizzle recast to elements: M drops by log2(e)
        assert isinstance(tl, ComposedLayout) and tl.outer == Swizzle(b, m - (e.bit_length() - 1), s), lay
        back = CanonicalLayout.from_tensor_layouts(tl, lay.dtype.name)
        assert (back.major, back.swizzle, back.dtype, back.rows, back.cols) == \
            (lay.major, lay.swizzle, lay.dtype, lay.rows, lay.cols), lay
        if min(lay.atoms) > 1:  # with one atom row or column both orders are the same tile
            assert back.order == lay.order
        assert back.to_tensor_layouts() == tl
        # the composed map is the tile's swizzled address, in elements, for a repeat-aligned base
        rng = np.random.default_rng(lay.rows * 1000 + lay.cols)
        for mn, k in zip(rng.integers(0, lay.rows, 16), rng.integers(0, lay.cols, 16)):
            assert tl(int(mn), int(k)) * e == lay.address(int(mn), int(k), base=0), lay
        count += 1
    assert count == 2 * len(DTYPES) * 7 * (4 if major == "K" else 5)


def test_from_tensor_layouts_takes_a_plain_layout_as_unswizzled_and_refuses_others():
    lay = CanonicalLayout("K", "none", "bf16", 64, 32)
    assert CanonicalLayout.from_tensor_layouts(lay.layout, "bf16") == lay
    with pytest.raises(LayoutError, match="no canonical layout has this map"):
        CanonicalLayout.from_tensor_layouts(Layout((64, 32), (32, 1)), "bf16")
    with pytest.raises(LayoutError, match="not a canonical smem swizzle"):
        CanonicalLayout.from_tensor_layouts(ComposedLayout(Swizzle(3, 4, 3), lay.layout), "bf16")  # byte form
    with pytest.raises(LayoutError, match="offset 0"):
        CanonicalLayout.from_tensor_layouts(ComposedLayout(Swizzle(3, 3, 3), lay.layout, offset=64), "bf16")


# ---------------------------------------------------------------------------
# The spellings --cute reads, and its limits
# ---------------------------------------------------------------------------

K128 = ("K", "128B", "bf16", 128, 128, "mn-first")
SPELLINGS = [
    # C++ print() of the smem_ptr-flagged tile; operator<< (the flag prints as _0); composition(Swizzle, Layout)
    "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))",
    "Sw<3,4,3> o _0 o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))",
    "Sw<3,4,3> o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))",
    # CuTe DSL
    "S<3,4,3> o 0 o ((8,16),(64,2)):((64,512),(1,8192))",
    "S<3,4,3> o ((8,16),(64,2)):((64,512),(1,8192))",
    # pycute str()
    "SW_3_4_3 o 0 o ((8, 16), (64, 2)):((64, 512), (1, 8192))",
    # PTX's split of the same map, and lapis's earlier spelling
    "Sw<3,4,3> o smem_ptr[16b] o ((8,16),(8,8,2)):((64,512),(1,8,8192))",
    "  Sw< 3, 4, 3 >  o  smem_ptr[16b](unset)  o  ( (_8, 16) , (64 ,_2) ) : ( (_64,512),(_1,8192) )  ",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_every_spelling_reads_as_the_same_tile(text):
    m = canonical_match(text, "bf16")
    assert m["canonical"] and m["layout"] == CanonicalLayout(*K128)


def test_a_tile_with_dynamic_extents_reads_as_its_static_twin():
    # CUTLASS 4.2 print of tile_to_shape(Layout_MN_SW128_Atom<bfloat16_t>{}, make_shape(128, 64), Step<_2,_1>{})
    m = canonical_match("Sw<3,4,3> o smem_ptr[16b](unset) o ((_64,2),(_8,8)):((_1,4096),(_64,_512))")
    assert m["canonical"] and m["layout"] == CanonicalLayout("MN", "128B", "bf16", 128, 64, "k-first")


def test_the_cli_reads_the_dsl_and_pycute_spellings(capsys):
    for text in SPELLINGS[3], SPELLINGS[5]:
        assert main(["layout", "show", "--cute", text, "--dtype", "bf16", "--lines", "1"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("K-major 128B bf16 128x128 (mn-first)") and SPELLINGS[0] in out


@pytest.mark.parametrize("text,words", [
    ("S<3,4,3> o 64 o (8,64):(64,1)", "non-zero offset"),
    ("S<3,4,3> o 0 o (?,64):(64,1)", "dynamic values"),
    ("Sw<3,4,3> o smem_ptr[16b](unset) o (8,64):(64,1) o", "expected the end"),
    ("Sw<3,4,3> o (8,64)", "expected ':'"),
    ("Sw<3,4 o (8,64):(64,1)", "expected ','"),
    ("(8,64):(64," + "9" * 200 + ")", "longer than 100 digits"),
])
def test_malformed_spellings_name_the_rule(text, words):
    with pytest.raises(LayoutError, match=words):
        parse(text, "bf16")


@pytest.mark.parametrize("text,words", [
    ("Sw<3,4,3> o " + "(_8," * 250_000, f"longer than {MAX_CHARS} characters"),  # 1 MB
    ("(" * 10_000 + "_8" + ")" * 10_000 + ":_1", f"nested deeper than {MAX_DEPTH} levels"),
    ("(_8," * 10_000 + "_8" + ")" * 10_000 + ":_1", f"nested deeper than {MAX_DEPTH} levels"),
])
def test_huge_and_deep_input_fail_fast_with_the_named_limit(text, words):
    with pytest.raises(LayoutError, match=words) as exc:
        parse(text, "bf16")
    assert "fix:" in str(exc.value) and len(str(exc.value)) < 400


def test_input_just_under_the_length_limit_is_read():
    text = "Sw<3,4,3> o smem_ptr[16b](unset) o (_8," + "  " * (MAX_CHARS // 2 - 40) + "_64):(_64,_1)"
    assert len(text) <= MAX_CHARS
    assert parse(text)["shape"] == (8, 64)
