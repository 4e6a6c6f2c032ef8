"""Hypothesis strategies over lapis's layouts: canonical smem layouts, TMA tensor maps and loads, matrix descriptors.

For property tests of a kernel's layouts against lapis's model or the GPU (lapis.gpu.oracle). Every strategy
draws inputs the hardware accepts unless asked otherwise (`valid=False` draws what the driver rejects, by the
rules of lapis.layouts.tma.rules; a misaligned destination for `smem_offsets`). Units: elements for dims, box,
coordinates and layout extents; bytes for strides, shared-memory offsets and descriptor fields.

The sampled lists below cover every data type, swizzle and rank of the committed capture campaigns
(lapis/gpu/tma_campaign.py, encode_campaign.py, wgmma_campaign.py; tests/testing/test_strategies.py checks it):

- TMA_DTYPES (the 13 non-packed CUtensorMapDataType names: 1, 2, 4 and 8-byte elements), TMA_SWIZZLES (none,
  32B, 64B, 128B), RANKS (1..5): what a tiled TMA load accepts on sm_90;
- PACKED_DTYPES and ATOM_SWIZZLES: what cuTensorMapEncodeTiled rejects on sm_90, and BAD_RANKS,
  BAD_DTYPE_CODES, BAD_SWIZZLE_CODES: what it rejects anywhere (drawn by `valid=False` only);
- LAYOUT_DTYPES, LAYOUT_SWIZZLES, WGMMA_DTYPES, WGMMA_N: canonical operand layouts and wgmma shapes
  (PTX ISA 9.7.15.5.1.2; the N values are those of kernels/wgmma_capture_v1.cu);
- SM100_SWIZZLES adds tcgen05's 128B_base32B (MN-major only).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from hypothesis import assume
from hypothesis import strategies as st

from lapis.errors import LayoutError, as_int
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.mma_read import operand_addresses
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.descriptors.sm100 import UmmaDescriptor, umma_descriptor_for
from lapis.layouts.dtypes import dtype as layout_dtype
from lapis.layouts.swizzle import B128_BASE32B, SWIZZLES
from lapis.layouts.tma import EncodeArgs, TensorMap, check, tma_type
from lapis.layouts.tma.rules import BOX_BYTES_MAX
from lapis.layouts.tma.types import SWIZZLE_CODES, SWIZZLE_SPAN, TMA_TYPES

TMA_DTYPES = tuple(n for n, t in TMA_TYPES.items() if not t.packed)
PACKED_DTYPES = tuple(n for n, t in TMA_TYPES.items() if t.packed)
TMA_SWIZZLES = ("none", "32B", "64B", "128B")
ATOM_SWIZZLES = ("128B_atom32B", "128B_atom32B_flip8B", "128B_atom64B")
RANKS = (1, 2, 3, 4, 5)
BAD_RANKS = (0, 6, 7, 8)  # cuuint32_t ranks outside 1..5
BAD_DTYPE_CODES = tuple(range(-8, 0)) + tuple(range(16, 128))  # C ints that are no CUtensorMapDataType
BAD_SWIZZLE_CODES = tuple(range(-8, 0)) + tuple(range(7, 256))  # C ints that are no CUtensorMapSwizzle
LAYOUT_DTYPES = ("e4m3", "e5m2", "u8", "s8", "f16", "bf16", "tf32", "f32")
LAYOUT_SWIZZLES = ("none", "32B", "64B", "128B")
SM100_SWIZZLES = LAYOUT_SWIZZLES + ("128B_base32B",)
WGMMA_DTYPES = ("bf16", "f16", "tf32", "e4m3")
WGMMA_N = (8, 16, 64, 128, 256)
MAX_REGION = 200 * 1024  # shared memory a drawn box or operand ends below (lapis.gpu.oracle's region)
K_BYTES = 32  # K of one wgmma / tcgen05 MMA step, in bytes
_FLOAT_CODES = tuple(t.code for t in TMA_TYPES.values() if t.is_float)
_ELEM = {t.code: t.bytes for t in TMA_TYPES.values() if not t.packed}
_SPAN_BY_CODE = {0: 0, 1: 32, 2: 64, 3: 128}
MAX_ATOMS = 15  # canonical_layouts: 15 x 15 atoms of the largest (1 KiB) fit one SM's shared memory
MIN_FOOTPRINT = 4096  # tensor_maps: one box row (at most 256 elements of 8 B, or a 128 B swizzle span) must fit
MIN_GLOBAL_BYTES = 64 * 1024  # tensor_maps: a tensor of one row of every rank (dims 1 past the first) must fit
ARCHS = ("sm90", "sm100")
SMS = (90, 100)
BOUNDS = ("any", "inside", "partly-outside")


def _choice(name: str, value, allowed, drawn: bool = True) -> None:
    """LayoutError unless `value` is one of `allowed`, or None where the strategy draws it: a strategy's argument
    is checked when the strategy is built, not at its first draw."""
    if (value is not None or not drawn) and (not isinstance(value, (str, int)) or isinstance(value, bool)
                                             or value not in allowed):
        raise LayoutError(f"{name} is one of the values this strategy takes", repr(value),
                          "use one of " + ", ".join(map(str, allowed)) + (f", or leave {name} out (drawn)"
                                                                          if drawn else ""))


def _count(name: str, value, lo: int, hi: int | None = None) -> None:
    n = as_int(value, name)
    if n < lo or (hi is not None and n > hi):
        raise LayoutError(f"{name} lies in {lo}..{hi if hi is not None else 'any'}", n,
                          f"pass {name} between {lo} and {hi}" if hi is not None else f"pass {name} >= {lo}")


def _flag(name: str, value, none_ok: bool = False) -> None:
    if not (isinstance(value, bool) or (none_ok and value is None)):
        raise LayoutError(f"{name} is True or False" + (" or None" if none_ok else ""), repr(value),
                          f"pass {name}=True or False")


# ---------------------------------------------------------------- TMA: encode --

@st.composite
def encode_args(draw):
    """EncodeArgs valid on sm_90 by every rule (non-packed types, no 128B_ATOM swizzles), over the driver's whole
    ranges: dims to 2^32, strides to 2^40 B, any L2 promotion, interleave 16B/32B with rank >= 3."""
    dtype = draw(st.sampled_from(sorted(_ELEM)))
    e = _ELEM[dtype]
    il = draw(st.sampled_from((0, 0, 0, 1, 2)))
    rank = draw(st.integers(3 if il else 1, 5))
    align = 32 if il == 2 else 16
    if il == 0:
        sw = draw(st.sampled_from((0, 1, 2, 3)))
        cap = (_SPAN_BY_CODE[sw] // e) if sw else 256
        box0 = draw(st.integers(1, cap // (16 // e))) * (16 // e)
    else:
        sw = 1 if il == 2 else draw(st.sampled_from((0, 1, 2, 3)))
        box0 = draw(st.integers(1, 256 // (16 // e))) * (16 // e)
    box = [box0] + draw(st.lists(st.integers(1, 256), min_size=rank - 1, max_size=rank - 1))
    while math.prod(box) * e > BOX_BYTES_MAX:  # keep the box within one SM's shared memory
        k = max(range(1, rank), key=lambda j: box[j])
        box[k] = max(1, box[k] // 2)
    return EncodeArgs(
        dtype=dtype, rank=rank,
        global_address=draw(st.integers(0, 2**40)) * align,
        dims=draw(st.lists(st.integers(1, 2**32), min_size=rank, max_size=rank)),
        strides=draw(st.lists(st.integers(0, (2**40 - 1) // align), min_size=rank - 1, max_size=rank - 1).map(
            lambda s: [x * align for x in s])),
        box=box,
        elem_strides=draw(st.lists(st.integers(1, 8), min_size=rank, max_size=rank)),
        interleave=il, swizzle=sw, l2=draw(st.integers(0, 3)),
        oob=draw(st.sampled_from((0, 1))) if dtype in _FLOAT_CODES else 0,
        map_address=draw(st.integers(0, 2**20)) * 64)


def _with(t, i, v):
    t = list(t)
    t[i] = v
    return t


@st.composite
def rejected_encode_args(draw, sm: int = 90):
    """EncodeArgs that cuTensorMapEncodeTiled rejects on `sm` (lapis.layouts.tma.rules.check names at least one
    rule): a valid set with one argument broken, packed data types and 128B_ATOM swizzles included."""
    a = draw(encode_args())
    i = draw(st.integers(0, a.rank - 1))
    e = _ELEM[a.dtype]
    breaks = {
        "packed-type": lambda: dict(dtype=draw(st.sampled_from([TMA_TYPES[n].code for n in PACKED_DTYPES])),
                                    interleave=0, swizzle=0),
        "atom-swizzle": lambda: dict(swizzle=draw(st.sampled_from([SWIZZLE_CODES[n] for n in ATOM_SWIZZLES])),
                                     interleave=0),
        "rank": lambda: dict(rank=draw(st.sampled_from(BAD_RANKS))),
        "dtype-enum": lambda: dict(dtype=draw(st.sampled_from(BAD_DTYPE_CODES))),
        "swizzle-enum": lambda: dict(swizzle=draw(st.sampled_from(BAD_SWIZZLE_CODES))),
        "box-range": lambda: dict(box=_with(a.box, i, draw(st.sampled_from((0, 257, 512))))),
        "elem-stride-range": lambda: dict(elem_strides=_with(a.elem_strides, i, draw(st.sampled_from((0, 9, 16))))),
        "global-address-16B": lambda: dict(global_address=a.global_address + draw(st.integers(1, 15))),
        "box0-bytes": lambda: dict(box=_with(a.box, 0, draw(st.sampled_from(
            [b for b in range(1, 17) if (b * e) % 16] or [1])))),
        "dim-range": lambda: dict(dims=_with(a.dims, i, draw(st.sampled_from((0, 2**32 + 1))))),
    }
    if a.rank > 1:
        breaks["stride-multiple-16"] = lambda: dict(strides=_with(a.strides, 0, a.strides[0] + draw(
            st.integers(1, 15))))
    if a.dtype not in _FLOAT_CODES:
        breaks["oob-nan"] = lambda: dict(oob=1)
    kind = draw(st.sampled_from(sorted(breaks)))
    fields = {k: getattr(a, k) for k in ("dtype", "rank", "global_address", "dims", "strides", "box",
                                         "elem_strides", "interleave", "swizzle", "l2", "oob", "map_address")}
    fields.update(breaks[kind]())
    b = EncodeArgs(**fields)
    assume(check(b, sm))  # e8 types have no bad box[0]; such draws are retried
    return b


# ------------------------------------------------------------------ TMA: maps --

def _dense_strides(dims, e, pads):
    """Byte strides of dims 1.. : each the previous extent rounded up to 16 B plus pads[i] x 16 B."""
    out, s = [], dims[0] * e
    for d, p in zip(dims[1:], pads):
        s = -(-s // 16) * 16 + 16 * p
        out.append(s)
        s *= d
    return out


def _footprint(box, es, row):
    return math.prod(-(-b // s) for b, s in zip(box[1:], es[1:])) * row


@st.composite
def _tensor_maps(draw, dtype=None, swizzle=None, rank=None, valid: bool = True, max_global_bytes: int = 4 << 20,
                max_footprint: int = 64 * 1024):
    """A TensorMap a tiled TMA load takes on sm_90 (interleave none), or with valid=False EncodeArgs the driver
    rejects (a TensorMap cannot hold them: its constructor applies the rules).

    dtype, swizzle, rank: fix one (a TMA type name, 'none'/'32B'/'64B'/'128B', 1..5) or draw it from TMA_DTYPES,
    TMA_SWIZZLES, RANKS. The tensor spans at most max_global_bytes, one box at most max_footprint bytes of shared
    memory. Dims may be smaller than the box (out-of-bounds fill); strides are dense rows padded by 0-2 x 16 B.
    """
    if not valid:
        return draw(rejected_encode_args())
    t = tma_type(dtype if dtype is not None else draw(st.sampled_from(TMA_DTYPES)))
    e = t.bytes
    sw = swizzle if swizzle is not None else draw(st.sampled_from(TMA_SWIZZLES))
    r = rank if rank is not None else draw(st.sampled_from(RANKS))
    unit, span = 16 // e, SWIZZLE_SPAN[sw]
    box0 = draw(st.integers(1, ((span // e) if span else 256) // unit)) * unit
    box = [box0] + [draw(st.one_of(st.integers(1, 16), st.integers(1, 256))) for _ in range(r - 1)]
    es = [draw(st.one_of(st.just(1), st.integers(1, 8)))] + \
         [draw(st.sampled_from((1, 1, 1, 2, 3, 8))) for _ in range(r - 1)]
    row = span or box0 * e
    while r > 1 and _footprint(box, es, row) > max_footprint:
        k = max(range(1, r), key=lambda j: -(-box[j] // es[j]))
        box[k] = max(1, box[k] // 2)
    dims = [draw(st.integers(1, box0 + 4 * unit))] + \
           [draw(st.integers(1, box[i] * es[i] + 8)) for i in range(1, r)]
    pads = [draw(st.integers(0, 2)) for _ in range(r - 1)]
    while r > 1 and _dense_strides(dims, e, pads)[-1] * dims[-1] > max_global_bytes:
        k = max(range(1, r), key=lambda j: dims[j])
        dims[k] = max(1, dims[k] // 2)
    oob = draw(st.sampled_from(("zero", "nan"))) if t.is_float else "zero"
    l2 = draw(st.sampled_from(("none", "64B", "128B", "256B")))
    args = EncodeArgs(t.code, r, 1 << 40, dims, _dense_strides(dims, e, pads), box, es, 0, SWIZZLE_CODES[sw])
    assume(not check(args))
    return TensorMap(t, tuple(dims), tuple(_dense_strides(dims, e, pads)), tuple(box), tuple(es),
                     swizzle=sw, l2=l2, oob=oob)


# ----------------------------------------------------------- TMA: coordinates --

def _extent(tmap: TensorMap, i: int) -> int:
    """Elements of the tensor one box spans along dimension i (elem_strides[0] ignored)."""
    step = 1 if i == 0 else tmap.elem_strides[i]
    return (tmap.loaded[i] - 1) * step + 1


def _aligned_range(lo, hi, unit):
    a, b = -(-lo // unit) * unit, (hi // unit) * unit
    return (a, b) if a <= b else None


@st.composite
def _overlapping(draw, tmap: TensorMap, i: int, side: str = "any") -> int:
    """A coordinate along dimension i whose box samples hit the tensor at least once; side 'low'/'high' also
    makes it stick out before the start / past the end. Dimension 0 keeps 16 B alignment (step 1)."""
    n, d = tmap.loaded[i], tmap.dims[i]
    if i == 0:
        unit = 16 // tmap.dtype.bytes
        lo, hi = {"any": (-(n - 1), d - 1), "low": (-(n - 1), -1), "high": (d - n + 1, d - 1)}[side]
        rg = _aligned_range(lo, hi, unit)
        assume(rg is not None)
        return draw(st.integers(rg[0] // unit, rg[1] // unit)) * unit
    s = tmap.elem_strides[i]
    if side == "any":
        j, g = draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))  # sample j lands on element g
    elif side == "low":  # a sample j >= 1 on element g < j * s: the box starts before 0
        j = draw(st.integers(1, n - 1))
        g = draw(st.integers(0, min(d - 1, j * s - 1)))
    else:  # a sample j <= n - 2 on element g with the last sample past the end
        j = draw(st.integers(0, n - 2))
        g = draw(st.integers(max(0, d - (n - 1 - j) * s), d - 1))
    return g - j * s


@st.composite
def box_coords(draw, tmap: TensorMap, bounds: str = "any"):
    """Box-corner coordinates (innermost first) for `tmap`: coords[0] x element bytes a multiple of 16 (else the
    H200 raises cudaErrorIllegalInstruction), and in every dimension at least one loaded element inside the
    tensor. bounds: 'inside' (the whole box in the tensor, where it fits), 'partly-outside' (at least one
    dimension sticks out), or 'any'."""
    coords = []
    for i in range(tmap.rank):
        ext, d = _extent(tmap, i), tmap.dims[i]
        if bounds == "inside" and ext <= d:
            unit = 16 // tmap.dtype.bytes if i == 0 else 1
            rg = _aligned_range(0, d - ext, unit)
            assume(rg is not None)
            coords.append(draw(st.integers(rg[0] // unit, rg[1] // unit)) * unit)
        else:
            coords.append(draw(_overlapping(tmap, i)))
    if bounds == "partly-outside":
        sides = [(i, side) for i in range(tmap.rank) for side in ("low", "high") if tmap.loaded[i] >= 2]
        assume(sides)
        i, side = draw(st.sampled_from(sides))
        coords[i] = draw(_overlapping(tmap, i, side))
    return tuple(coords)


def repeat_bytes(swizzle: str) -> int:
    """The swizzle pattern's repeat in bytes (256/512/1024 for 32B/64B/128B); 128 without swizzle."""
    return SWIZZLES[swizzle].repeat_bytes if swizzle in SWIZZLES and swizzle != "none" else 128


@st.composite
def smem_offsets(draw, tmap: TensorMap, on_repeat_boundary: bool | None = None, valid: bool = True,
                 max_region: int = MAX_REGION):
    """A destination offset (bytes from a 1024 B-aligned shared address) where one box of `tmap` fits below
    max_region. on_repeat_boundary: True draws multiples of the swizzle repeat, False draws 128 B multiples off
    it (phase 1..7 of the pattern; without swizzle every 128 B multiple is a boundary, so any is drawn), None
    either. valid=False draws 16 B multiples that are not 128 B aligned (the H200 raises
    cudaErrorMisalignedAddress)."""
    top = max_region - tmap.smem_footprint
    assume(top >= 128)
    if not valid:
        return draw(st.integers(0, top // 128 - 1)) * 128 + draw(st.integers(1, 7)) * 16
    rep = repeat_bytes(tmap.swizzle)
    if on_repeat_boundary:
        return draw(st.integers(0, top // rep)) * rep
    off = draw(st.integers(0, top // 128)) * 128
    if on_repeat_boundary is False and rep > 128:
        assume(off % rep)
    return off


class TmaLoad(NamedTuple):
    tmap: TensorMap
    coords: tuple
    smem_offset: int


@st.composite
def _tma_loads(draw, dtype=None, swizzle=None, rank=None, bounds: str = "any", on_repeat_boundary=None):
    """A TmaLoad(tmap, coords, smem_offset) one cp.async.bulk.tensor runs: see tensor_maps, box_coords and
    smem_offsets for the knobs."""
    t = draw(_tensor_maps(dtype=dtype, swizzle=swizzle, rank=rank))
    return TmaLoad(t, draw(box_coords(t, bounds)), draw(smem_offsets(t, on_repeat_boundary)))


# ------------------------------------------------------------ canonical layouts --

def _atom(major, swizzle, dtype) -> tuple[int, int]:
    """(MN, K) elements of one swizzle atom (PTX ISA Table 38), as CanonicalLayout.atom_shape has it."""
    sw = B128_BASE32B if swizzle == B128_BASE32B.name else SWIZZLES[swizzle]
    span = sw.span_bytes // layout_dtype(dtype).bytes
    return (sw.rows, span) if major == "K" else (span, sw.rows)


@st.composite
def _canonical_layouts(draw, major=None, swizzle=None, dtype=None, sm: int = 90, max_atoms: int = 4, order=None):
    """A CanonicalLayout of 1..max_atoms swizzle atoms along MN and along K. sm=100 adds the 128B_base32B
    swizzle (tcgen05, MN-major only)."""
    sws = SM100_SWIZZLES if sm == 100 else LAYOUT_SWIZZLES
    sw = swizzle if swizzle is not None else draw(st.sampled_from(sws))
    mj = major if major is not None else ("MN" if sw == B128_BASE32B.name else draw(st.sampled_from(("K", "MN"))))
    dt = dtype if dtype is not None else draw(st.sampled_from(LAYOUT_DTYPES))
    am, ak = _atom(mj, sw, dt)
    return CanonicalLayout(mj, sw, dt, am * draw(st.integers(1, max_atoms)), ak * draw(st.integers(1, max_atoms)),
                           order if order is not None else draw(st.sampled_from(("mn-first", "k-first"))))


# ---------------------------------------------------------- matrix descriptors --

wgmma_descriptors = st.builds(  # any sm90 descriptor: every field over its whole range
    WgmmaDescriptor,
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, 7),
    st.sampled_from(LAYOUT_SWIZZLES),
)

umma_descriptors = st.builds(  # any sm100 descriptor with relative LBO (lbo_mode 0)
    UmmaDescriptor,
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, (1 << 14) - 1).map(lambda v: v << 4),
    st.integers(0, 7),
    st.sampled_from(SM100_SWIZZLES),
)


class Operand(NamedTuple):
    """An MMA operand tile in shared memory and the descriptors of its K-steps.

    layout: the tile (rows = 64 for A, N for B); base: its smem byte address (1024 B-aligned region + offset);
    descs: one descriptor per K-step of 32 B; transpose: the instruction's imm-trans flag (MN-major);
    operand: 'A' or 'B'; n: the instruction's N.
    """

    layout: CanonicalLayout
    base: int
    descs: tuple
    transpose: bool
    operand: str
    n: int


@st.composite
def _matrix_operands(draw, arch: str = "sm90", dtype=None, operand=None, major=None, swizzle=None,
                    n_values=WGMMA_N, on_repeat_boundary=None, max_k_atoms: int = 2):
    """An Operand whose descriptors (descriptor_for on sm90, umma_descriptor_for on sm100) read the tile as laid
    out. sm90: dtype from WGMMA_DTYPES, MN-major only for bf16/f16; sm100 also MN-major tf32/e4m3 and the
    128B_base32B swizzle. The tile covers 1..max_k_atoms K atoms and at least one 32 B K-step; its base sits on
    the swizzle repeat (on_repeat_boundary=True), off it (False) or either, below MAX_REGION."""
    sm100 = arch == "sm100"
    dt = dtype if dtype is not None else draw(st.sampled_from(WGMMA_DTYPES))
    sws = SM100_SWIZZLES if sm100 else LAYOUT_SWIZZLES
    sw = swizzle if swizzle is not None else draw(st.sampled_from(sws))
    majors = ("MN",) if sw == B128_BASE32B.name else (("K", "MN") if (sm100 or dt in ("bf16", "f16")) else ("K",))
    mj = major if major is not None else draw(st.sampled_from(majors))
    op = operand if operand is not None else draw(st.sampled_from(("A", "B")))
    am, ak = _atom(mj, sw, dt)
    e = 4 if dt == "tf32" else (1 if dt == "e4m3" else 2)
    n = draw(st.sampled_from([v for v in n_values if v % am == 0] or [am * 8]))
    rows = 64 if op == "A" else n
    assume(rows % am == 0)
    k_min = -(-K_BYTES // (ak * e))
    cols = ak * draw(st.integers(k_min, max(k_min, max_k_atoms)))
    lay = CanonicalLayout(mj, sw, dt, rows, cols)
    rep = repeat_bytes(sw) if sw in SWIZZLES else 512
    top = MAX_REGION - lay.footprint_bytes
    if on_repeat_boundary:
        base = draw(st.integers(0, top // rep)) * rep
    else:
        base = draw(st.integers(0, top // 128)) * 128
        if on_repeat_boundary is False:
            assume(base % rep)
    steps = cols * e // K_BYTES
    make = umma_descriptor_for if sm100 else descriptor_for
    return Operand(lay, base, tuple(make(lay, base, s) for s in range(steps)), mj == "MN", op, n)


class Mismatch(NamedTuple):
    """An Operand with one descriptor field (or the transpose flag) changed so the MMA reads other bytes."""

    good: Operand
    descs: tuple
    transpose: bool
    field: str


MISMATCH_FIELDS = ("sbo", "lbo", "swap-lbo-sbo", "swizzle", "start_address", "base_offset", "transpose")


def _reads_differ(good: Operand, descs, transpose: bool) -> bool:
    """Does any K-step read other addresses? False also for a read no MMA can make (LayoutError)."""
    e = good.layout.elem_bytes
    try:
        return any((operand_addresses(g, good.layout.rows, e, good.transpose)
                    != operand_addresses(d, good.layout.rows, e, transpose)).any() for g, d in zip(good.descs, descs))
    except LayoutError:
        return False


@st.composite
def _mismatched_operands(draw, arch: str = "sm90", fields=MISMATCH_FIELDS, **operand_kw):
    """A Mismatch: a descriptor/layout pair that disagrees. The field is drawn from `fields` among those that
    change what the MMA reads for this operand (e.g. LBO of a swizzled K-major tile is never read, so it is
    not drawn there); the descriptors stay encodable (16 B multiples in their 14-bit fields)."""
    good = draw(_matrix_operands(arch, **operand_kw))
    d0 = good.descs[0]
    sws = SM100_SWIZZLES if arch == "sm100" else LAYOUT_SWIZZLES
    delta = draw(st.integers(1, 64)) * 16
    other = draw(st.sampled_from([s for s in sws if s != d0.swizzle.name]))
    other = B128_BASE32B if other == B128_BASE32B.name else SWIZZLES[other]
    phase = draw(st.integers(1, 7))
    changes = {
        "sbo": lambda d: replace(d, sbo=d.sbo + delta if d.sbo + delta <= 0x3FFF0 else d.sbo - delta),
        "lbo": lambda d: replace(d, lbo=d.lbo + delta if d.lbo + delta <= 0x3FFF0 else d.lbo - delta),
        "swap-lbo-sbo": lambda d: replace(d, lbo=d.sbo, sbo=d.lbo),
        "swizzle": lambda d: replace(d, swizzle=other),
        "start_address": lambda d: replace(d, start_address=d.start_address + delta
                                           if d.start_address + delta < (1 << 18) - 16 else d.start_address - delta),
        "base_offset": lambda d: replace(d, base_offset=phase),
    }
    options = []
    for name in fields:
        if name == "transpose":
            if good.layout.elem_bytes == 2 or arch == "sm100":
                if _reads_differ(good, good.descs, not good.transpose):
                    options.append((name, good.descs, not good.transpose))
            continue
        try:
            bad = tuple(changes[name](d) for d in good.descs)
        except LayoutError:  # the change does not encode (a field out of range): not a candidate here
            continue
        if bad != good.descs and _reads_differ(good, bad, good.transpose):
            options.append((name, bad, good.transpose))
    assume(options)
    name, bad, trans = draw(st.sampled_from(options))
    return Mismatch(good, bad, trans, name)



# ------------------------------------------------------- the public strategies --
# Each checks its arguments when called (LayoutError naming the argument, its value and the choices), then
# returns the composite strategy above; the composites' docstrings describe what they draw.

def tensor_maps(dtype=None, swizzle=None, rank=None, valid: bool = True, max_global_bytes: int = 4 << 20,
                max_footprint: int = 64 * 1024):
    _choice("dtype", dtype, TMA_DTYPES)
    _choice("swizzle", swizzle, TMA_SWIZZLES)
    _choice("rank", rank, RANKS)
    _flag("valid", valid)
    _count("max_global_bytes", max_global_bytes, MIN_GLOBAL_BYTES)
    _count("max_footprint", max_footprint, MIN_FOOTPRINT)
    return _tensor_maps(dtype, swizzle, rank, valid, max_global_bytes, max_footprint)


def tma_loads(dtype=None, swizzle=None, rank=None, bounds: str = "any", on_repeat_boundary=None):
    _choice("dtype", dtype, TMA_DTYPES)
    _choice("swizzle", swizzle, TMA_SWIZZLES)
    _choice("rank", rank, RANKS)
    _choice("bounds", bounds, BOUNDS, drawn=False)
    _flag("on_repeat_boundary", on_repeat_boundary, none_ok=True)
    return _tma_loads(dtype, swizzle, rank, bounds, on_repeat_boundary)


def canonical_layouts(major=None, swizzle=None, dtype=None, sm: int = 90, max_atoms: int = 4, order=None):
    _choice("sm", sm, SMS, drawn=False)
    _choice("major", major, ("K", "MN"))
    _choice("swizzle", swizzle, SM100_SWIZZLES if sm == 100 else LAYOUT_SWIZZLES)
    _choice("dtype", dtype, LAYOUT_DTYPES)
    _choice("order", order, ("mn-first", "k-first"))
    _count("max_atoms", max_atoms, 1, MAX_ATOMS)
    return _canonical_layouts(major, swizzle, dtype, sm, max_atoms, order)


def matrix_operands(arch: str = "sm90", dtype=None, operand=None, major=None, swizzle=None, n_values=WGMMA_N,
                    on_repeat_boundary=None, max_k_atoms: int = 2):
    _operand_args(arch, dtype, operand, major, swizzle, n_values, on_repeat_boundary, max_k_atoms)
    return _matrix_operands(arch, dtype, operand, major, swizzle, n_values, on_repeat_boundary, max_k_atoms)


def mismatched_operands(arch: str = "sm90", fields=MISMATCH_FIELDS, **operand_kw):
    _operand_args(arch, **operand_kw)
    if isinstance(fields, str) or not fields or any(f not in MISMATCH_FIELDS for f in fields):
        raise LayoutError("fields lists descriptor fields to mismatch", repr(fields),
                          "use some of " + ", ".join(MISMATCH_FIELDS))
    return _mismatched_operands(arch, fields, **operand_kw)


def _operand_args(arch="sm90", dtype=None, operand=None, major=None, swizzle=None, n_values=WGMMA_N,
                  on_repeat_boundary=None, max_k_atoms=2) -> None:
    _choice("arch", arch, ARCHS, drawn=False)
    _choice("dtype", dtype, WGMMA_DTYPES)
    _choice("operand", operand, ("A", "B"))
    _choice("major", major, ("K", "MN"))
    _choice("swizzle", swizzle, SM100_SWIZZLES if arch == "sm100" else LAYOUT_SWIZZLES)
    if isinstance(n_values, (str, bytes)) or not n_values or any(not isinstance(n, int) or n not in WGMMA_N
                                                                 for n in n_values):
        raise LayoutError("n_values lists wgmma N values", repr(n_values), "use some of " + ", ".join(map(str, WGMMA_N)))
    _flag("on_repeat_boundary", on_repeat_boundary, none_ok=True)
    _count("max_k_atoms", max_k_atoms, 1, MAX_ATOMS)


for _public, _composite in ((tensor_maps, _tensor_maps), (tma_loads, _tma_loads),
                            (canonical_layouts, _canonical_layouts), (matrix_operands, _matrix_operands),
                            (mismatched_operands, _mismatched_operands)):
    _public.__doc__ = (_composite.__doc__ or "") + "\n\n    Raises LayoutError for an argument outside those."
