"""The sm90 wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2, CUTLASS GmmaDescriptor).

Expected 64-bit values are derived by hand from the bit layout:
start [13:0] = addr >> 4, LBO [29:16] = bytes >> 4, SBO [45:32] = bytes >> 4,
base offset [51:49], layout type [63:62] (0 none, 1 128B, 2 64B, 3 32B).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lapis.errors import LayoutError
from lapis.layouts import (
    CanonicalLayout,
    SwizzleMode,
    WgmmaDescriptor,
    base_offset_for,
    descriptor_for,
    layout_type,
    swizzle,
    swizzle_from_layout_type,
)
from lapis.testing.strategies import wgmma_descriptors

FAST = settings(max_examples=150, deadline=None)
SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
ELEM_BYTES = {"e4m3": 1, "bf16": 2, "tf32": 4}

# ---------------------------------------------------------------------------
# Hand-derived values
# ---------------------------------------------------------------------------

# CUTLASS K-major SW128 bf16 tile at smem 0x400:
#   start 0x400 >> 4 = 0x40            -> 0x0000_0000_0000_0040
#   LBO enc 1 (unused, CUTLASS)  << 16 -> 0x0000_0000_0001_0000
#   SBO 1024 B enc 64 = 0x40     << 32 -> 0x0000_0040_0000_0000
#   layout type 1 (128B)         << 62 -> 0x4000_0000_0000_0000
CUTLASS_SW128_BF16 = 0x4000_0040_0001_0040


def test_cutlass_k_major_sw128_bf16_literal():
    d = descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), base=0x400)
    assert d.encode() == CUTLASS_SW128_BF16
    assert (d.start_address, d.lbo, d.sbo, d.base_offset) == (0x400, 16, 1024, 0)
    assert d.swizzle == swizzle("128B")
    # K-step 1 (+32 B): only the start field moves, 0x420 >> 4 = 0x42.
    assert descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), 0x400, step=1).encode() == 0x4000_0040_0001_0042
    assert WgmmaDescriptor.decode(CUTLASS_SW128_BF16) == d


# (major, swizzle, dtype, rows, cols) of the PTX worked examples (mn-first), hand-encoded at base 0.
PTX_DESCRIPTORS = [
    # LBO 256 enc 16 << 16 = 0x10_0000; SBO 128 enc 8 << 32 = 0x8_0000_0000; type 0
    (("K", "none", "tf32", 16, 16), 0x0000_0008_0010_0000),
    (("MN", "none", "bf16", 16, 16), 0x0000_0008_0010_0000),
    # LBO 256 -> 0x10_0000; SBO 512 enc 32 -> 0x20_0000_0000; type 3 (32B) -> 0xC000...
    (("MN", "32B", "bf16", 32, 16), 0xC000_0020_0010_0000),
    # LBO 512 enc 32 -> 0x20_0000; SBO 1024 enc 64 -> 0x40_0000_0000; type 2 (64B) -> 0x8000...
    (("MN", "64B", "bf16", 64, 16), 0x8000_0040_0020_0000),
    # LBO unused enc 1 -> 0x1_0000; SBO 256 enc 16 -> 0x10_0000_0000; type 3
    (("K", "32B", "tf32", 16, 8), 0xC000_0010_0001_0000),
]


@pytest.mark.parametrize("args,value", PTX_DESCRIPTORS)
def test_ptx_examples_encode(args, value):
    assert descriptor_for(CanonicalLayout(*args, order="mn-first"), base=0).encode() == value


def test_base_offset_hand_values():
    lay = CanonicalLayout("K", "128B", "bf16", 64, 64)
    # 0x480 = 1024 + 128: the layout swizzles absolute addresses (as TMA writes), so the H200 needs base
    # offset 0 (lapis/data/captures/wgmma); start 0x48.
    d = descriptor_for(lay, base=0x480)
    assert d.base_offset == 0
    assert d.encode() == 0x4000_0040_0001_0048
    # PTX's formula, for a pattern anchored at the tile start: (0x480 >> 7) & 7 = 1 -> bit 49.
    assert base_offset_for(swizzle("128B"), 0x2000 + 5 * 128) == 5
    assert base_offset_for(swizzle("64B"), 0x200) == 0  # 512 B boundary
    assert base_offset_for(swizzle("64B"), 0x280) == 5  # (640 >> 7) & 7
    assert base_offset_for(swizzle("32B"), 0x80) == 1
    assert base_offset_for(swizzle("none"), 0x90) == 0  # not valid without swizzle


def test_decode_fields_hand_value():
    # base offset 5 (bits 51-49 = 0b101 -> 0xA_0000_0000_0000), 64B, start 0x1230, LBO 0x40, SBO 0x800.
    value = (2 << 62) | (5 << 49) | (0x80 << 32) | (0x4 << 16) | 0x123
    assert value == 0x800A_0080_0004_0123
    d = WgmmaDescriptor.decode(value)
    assert (d.start_address, d.lbo, d.sbo, d.base_offset, d.swizzle) == (0x1230, 0x40, 0x800, 5, swizzle("64B"))


def test_layout_type_codes():
    assert [layout_type(s) for s in ("none", "128B", "64B", "32B")] == [0, 1, 2, 3]
    assert [swizzle_from_layout_type(c).name for c in range(4)] == ["none", "128B", "64B", "32B"]


def test_fields_and_printer():
    d = WgmmaDescriptor.decode(CUTLASS_SW128_BF16)
    assert d.fields() == [
        ("start_address", "13-0", 0x400, 0x40),
        ("lbo", "29-16", 16, 1),
        ("sbo", "45-32", 1024, 64),
        ("base_offset", "51-49", None, 0),
        ("layout_type", "63-62", None, 1),
    ]
    text = str(d)
    assert "0x4000004000010040" in text
    for piece in ("start_address", "1024 B", "enc 64", "16 B", "enc 1", "128B"):
        assert piece in text


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

RESERVED = (0b11 << 14) | (0b11 << 30) | (0b111 << 46) | (((1 << 10) - 1) << 52)

descriptors = wgmma_descriptors  # every field over its whole range (lapis.testing.strategies)


@FAST
@given(descriptors)
def test_encode_decode_round_trip(d):
    v = d.encode()
    assert 0 <= v < 1 << 64 and v & RESERVED == 0
    assert WgmmaDescriptor.decode(v) == d
    # independent field extraction
    assert (v & 0x3FFF) << 4 == d.start_address
    assert ((v >> 16) & 0x3FFF) << 4 == d.lbo
    assert ((v >> 32) & 0x3FFF) << 4 == d.sbo
    assert (v >> 49) & 7 == d.base_offset
    assert v >> 62 == {"none": 0, "128B": 1, "64B": 2, "32B": 3}[d.swizzle.name]


@FAST
@given(st.integers(0, (1 << 64) - 1))
def test_decode_encode_round_trip(v):
    v &= ~RESERVED
    assert WgmmaDescriptor.decode(v).encode() == v


layouts = st.tuples(
    st.sampled_from(["K", "MN"]),
    st.sampled_from(list(SPAN)),
    st.sampled_from(list(ELEM_BYTES)),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from(["mn-first", "k-first"]),
    st.integers(0, 1000),
)


@FAST
@given(layouts)
def test_descriptor_for_matches_layout(params):
    major, swz, dt, am, ak, order, base16 = params
    e = ELEM_BYTES[dt]
    amn, akk = (8, SPAN[swz] // e) if major == "K" else (SPAN[swz] // e, 8)
    lay = CanonicalLayout(major, swz, dt, am * amn, ak * akk, order)
    base = 16 * base16
    kpm = 32 // e
    # sm90 transposes only 16-bit operands, and a wgmma operand covers at least one 32 B K-step
    wgmma = (major == "K" or dt in ("f16", "bf16")) and lay.cols * e >= 32
    for step in range(lay.cols // kpm):
        d = descriptor_for(lay, base, step, wgmma_operand=wgmma)
        assert WgmmaDescriptor.decode(d.encode()) == d
        # The hardware XORs the start address: it is where element (0, step * kpm) lives.
        assert lay.swizzle.apply(d.start_address) == lay.address(0, step * kpm, base)
    d = descriptor_for(lay, base, wgmma_operand=wgmma)
    # A stride across a dimension with a single group in the operand is never read: 0, as CUTLASS writes it.
    t = 16 // e
    mn_single = lay.rows <= (8 if major == "K" else (SPAN[swz] // e if swz != "none" else t))
    k_single = major == "MN" and 32 // e <= 8
    if major == "K":
        expect = (16 if swz != "none" else lay.lbo_bytes, 0 if mn_single else lay.sbo_bytes)
    elif swz == "none":
        expect = (0 if k_single else lay.lbo_bytes, 0 if mn_single else lay.sbo_bytes)
    else:
        expect = (0 if mn_single else lay.lbo_bytes, 0 if k_single else lay.sbo_bytes)
    assert (d.lbo, d.sbo) == expect
    repeat = 8 * SPAN[swz]
    assert d.base_offset == 0 and base_offset_for(swz, base) == (
        0 if swz == "none" or base % repeat == 0 else (base // 128) % 8)


# ---------------------------------------------------------------------------
# Errors name their value
# ---------------------------------------------------------------------------


def raises_naming(value, fn, *args, **kw):
    with pytest.raises(LayoutError) as ei:
        fn(*args, **kw)
    assert f"got {value}" in str(ei.value), str(ei.value)


def test_errors():
    raises_naming("0x408", WgmmaDescriptor, 0x408, 16, 1024)
    raises_naming("0x18", WgmmaDescriptor, 0, 0x18, 1024)
    raises_naming("0x404", WgmmaDescriptor, 0, 16, 0x404)
    raises_naming("0x40000", WgmmaDescriptor, 0, 0x40000, 1024)  # > 0x3FFF0
    raises_naming("0x40000", WgmmaDescriptor, 0, 16, 0x40000)
    raises_naming("0x40000", WgmmaDescriptor, 1 << 18, 16, 1024)
    raises_naming("-16", WgmmaDescriptor, -16, 16, 1024)
    raises_naming("8", WgmmaDescriptor, 0, 16, 1024, 8)
    raises_naming("-1", WgmmaDescriptor, 0, 16, 1024, -1)
    raises_naming("'96B'", WgmmaDescriptor, 0, 16, 1024, 0, "96B")
    odd = SwizzleMode("128B-32B-atom", 128, 2, base=5, shift=2)  # tcgen05-only mode
    raises_naming(repr(odd), WgmmaDescriptor, 0, 16, 1024, 0, odd)
    raises_naming("0x400000000000", WgmmaDescriptor.decode, CUTLASS_SW128_BF16 | 1 << 46)  # tcgen05 version bit
    raises_naming("0xc000", WgmmaDescriptor.decode, 0xC000)
    raises_naming(str(1 << 64), WgmmaDescriptor.decode, 1 << 64)
    raises_naming("-1", WgmmaDescriptor.decode, -1)
    raises_naming("4", swizzle_from_layout_type, 4)


def test_limits_fit():
    # The largest encodable values are accepted and round-trip.
    d = WgmmaDescriptor((1 << 18) - 16, 0x3FFF0, 0x3FFF0, 7, "32B")
    assert d.encode() == 0xC00E_3FFF_3FFF_3FFF


def test_sm90_refuses_tiles_shorter_than_one_k_step():
    with pytest.raises(LayoutError, match="at least one MMA K-step"):
        descriptor_for(CanonicalLayout("K", "none", "bf16", 8, 8), base=0)


@pytest.mark.parametrize("dt", ["tf32", "e4m3", "s8"])
def test_sm90_refuses_mn_major_non_16_bit_operands(dt):
    lay = CanonicalLayout("MN", "128B", dt, 128 // {"tf32": 4}.get(dt, 1), 32 // {"tf32": 4}.get(dt, 1))
    with pytest.raises(LayoutError, match="only for f16/bf16"):
        descriptor_for(lay, base=0)
    # tcgen05 reads these: SBO steps 8-row K groups, 0 (unused) when one K-step holds one group (tf32).
    assert descriptor_for(lay, base=0, wgmma_operand=False).sbo == (0 if dt == "tf32" else lay.sbo_bytes)
