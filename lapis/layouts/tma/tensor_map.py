"""TMA tensor maps and where a tiled TMA load puts each element in shared memory.

A tensor map is what `cuTensorMapEncodeTiled` encodes (CUDA driver API,
cuda.h 13.0): every list is innermost-first like the driver's, `dims`, `box`
and `elem_strides` count elements, `strides` are bytes (rank - 1 of them: the
stride of dimensions 1..rank-1). `load_box` reproduces what
`cp.async.bulk.tensor.Nd.shared::cluster.global.tile` (PTX ISA 9.7.9.25) writes
into shared memory, byte for byte. The rules, each proven on H200 dumps
(lapis/data/captures/tma, `lapis validate layouts`):

- The box is traversed innermost first; dimension i loads ceil(box[i] /
  elem_strides[i]) elements, stepping elem_strides[i] in the tensor;
  elem_strides[0] is ignored without interleave (cuda.h).
- Rows (the inner dimension) are packed at their own size without swizzle; with
  a swizzle each row is padded to the swizzle span (32/64/128 B), even when the
  box row is narrower (H200 dumps, 'narrow-box' configurations).
- The swizzle XORs address bits [6:4] with [9:7] of the *absolute* shared
  address (PTX ISA 5.5.7), so a box at +128 B from a 1024 B boundary starts at
  phase 1 of the pattern.
- Out-of-bounds elements (negative or past-the-end coordinates) are filled with
  zero, or with the 16-bit pattern 0x7FF7 repeated over the element for
  FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA (H200 dumps: f16, bf16, f32, f64, tf32).
- TFLOAT32 and TFLOAT32_FTZ round each 32-bit value to TF32 (the low 13 bits
  rounded to nearest, ties to even; a value past the largest finite rounds to
  infinity), flush no denormal, and write every NaN as 0x7FFFE000 (H200 dumps).
- The destination must be 128 B aligned (else cudaErrorMisalignedAddress) and
  coords[0] x element bytes a multiple of 16 (else cudaErrorIllegalInstruction);
  both seen on the H200.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lapis.errors import LayoutError, NotModelled, as_int  # noqa: F401 (NotModelled re-exported)
from lapis.layouts.swizzle import SWIZZLES
from lapis.layouts.tma.rules import EncodeArgs, validate
from lapis.layouts.tma.types import (  # noqa: F401 (re-exported)
    _CUDA_H,
    _H200,
    ANY_GLOBAL_ADDRESS,
    INTERLEAVE_CODES,
    L2_CODES,
    NAN_FILL_16,
    OOB_CODES,
    SMEM_BYTES,
    SWIZZLE_CODES,
    SWIZZLE_SPAN,
    TF32_NAN,
    TMA_ALIASES,
    TMA_TYPE_BY_CODE,
    TMA_TYPES,
    TmaType,
    check_lengths,
    code_name,
    tma_type,
)


@dataclass(frozen=True)
class TensorMap:
    """The arguments of cuTensorMapEncodeTiled, innermost dimension first.

    dims, box, elem_strides: elements; strides: bytes (rank - 1 entries).
    Enum arguments take lapis spellings ('128B', 'nan', ...) or cuda.h codes.
    """

    dtype: TmaType
    dims: tuple
    strides: tuple
    box: tuple
    elem_strides: tuple = None
    interleave: str = "none"
    swizzle: str = "none"
    l2: str = "none"
    oob: str = "zero"
    rank: int = field(init=False)

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "dtype", tma_type(self.dtype))
        for name in ("dims", "strides", "box"):
            set_(self, name, tuple(as_int(v, f"{name}[{i}]") for i, v in enumerate(getattr(self, name))))
        es = self.elem_strides if self.elem_strides is not None else (1,) * len(self.dims)
        set_(self, "elem_strides", tuple(as_int(v, f"elem_strides[{i}]") for i, v in enumerate(es)))
        set_(self, "interleave", code_name(INTERLEAVE_CODES, self.interleave, "interleave"))
        set_(self, "swizzle", code_name(SWIZZLE_CODES, self.swizzle, "swizzle"))
        set_(self, "l2", code_name(L2_CODES, self.l2, "L2 promotion"))
        set_(self, "oob", code_name(OOB_CODES, self.oob, "OOB fill"))
        set_(self, "rank", len(self.dims))
        check_lengths(self.rank, len(self.strides), len(self.box), len(self.elem_strides))
        # A TensorMap is one the driver encodes: every cuTensorMapEncodeTiled rule (sm_90) must hold.
        validate(EncodeArgs.from_tensor_map(self, ANY_GLOBAL_ADDRESS))

    @classmethod
    def from_driver_args(cls, dtype, dims, strides, box, elem_strides, interleave=0, swizzle=0, l2=0, oob=0):
        """Build from raw cuda.h enum codes, as a capture records them."""
        return cls(tma_type(dtype), dims, strides, box, elem_strides, interleave, swizzle, l2, oob)

    @property
    def loaded(self) -> tuple:
        """Elements loaded per dimension: ceil(box[i] / elem_strides[i]); elem_strides[0] ignored."""
        ignore0 = self.interleave == "none"
        return tuple(b if (i == 0 and ignore0) else math.ceil(b / s)
                     for i, (b, s) in enumerate(zip(self.box, self.elem_strides)))

    @property
    def row_pitch(self) -> int:
        """Bytes between box rows in smem: the swizzle span, or the row itself without swizzle."""
        return SWIZZLE_SPAN[self.swizzle] or self.loaded[0] * self.dtype.bytes

    @property
    def box_bytes(self) -> int:
        """Bytes one load delivers (its mbarrier tx count): the loaded elements, no padding."""
        return math.prod(self.loaded) * self.dtype.bytes

    @property
    def smem_footprint(self) -> int:
        """Bytes of shared memory one box spans from its destination, padding included."""
        return math.prod(self.loaded[1:]) * self.row_pitch


@dataclass(frozen=True)
class BoxPlacement:
    """Where each loaded element goes. Arrays are shaped loaded[::-1] (outermost first, C order).

    smem_addr: absolute shared byte address of the element's first byte.
    global_offset: byte offset of the source element from the tensor's base; -1 if out of bounds.
    """

    tmap: TensorMap
    coords: tuple
    dst: int
    smem_addr: np.ndarray
    global_offset: np.ndarray

    @property
    def in_bounds(self) -> np.ndarray:
        return self.global_offset >= 0


def _check_runtime(tmap: TensorMap, coords, dst: int) -> None:
    if len(coords) != tmap.rank:
        raise LayoutError("TMA load needs one coordinate per dimension", f"{len(coords)} for rank {tmap.rank}",
                          f"pass {tmap.rank} coordinates, innermost first")
    for i, c in enumerate(coords):
        if not -2**31 <= c < 2**31:
            raise LayoutError("TMA coordinates are signed 32-bit", f"coords[{i}] = {c}",
                              "use a coordinate in [-2^31, 2^31)", "PTX ISA 9.7.9.25 (tensorCoords are .s32)")
    if dst < 0 or dst + tmap.smem_footprint > SMEM_BYTES:
        raise LayoutError("the box must lie in the SM's 228 KiB of shared memory",
                          f"[{hex(dst)}, {hex(dst + tmap.smem_footprint)})",
                          f"use a destination in [0, {hex(SMEM_BYTES - tmap.smem_footprint)}] or a smaller box")
    if dst % 128:
        raise LayoutError("TMA destination must be 128 B aligned", hex(dst),
                          f"move the box to {hex(dst - dst % 128)} or {hex(dst + 128 - dst % 128)} "
                          "(the H200 raises cudaErrorMisalignedAddress)", _H200)
    if (coords[0] * tmap.dtype.bytes) % 16:
        raise LayoutError("TMA box start along dimension 0 must be 16 B aligned",
                          f"coords[0] = {coords[0]} x {tmap.dtype.bytes} B",
                          f"make coords[0] a multiple of {16 // math.gcd(16, tmap.dtype.bytes)} elements "
                          "(the H200 raises cudaErrorIllegalInstruction)", _H200)
    if tmap.interleave != "none":
        raise NotModelled("placement of interleaved tensor maps is not modelled", tmap.interleave,
                          "use interleave none")
    if tmap.swizzle.startswith("128B_atom"):
        raise NotModelled("128B_atom* swizzles are rejected by cuTensorMapEncodeTiled on sm_90 (H200, driver "
                          "580.159.04)", tmap.swizzle, "use 32B, 64B or 128B on Hopper")
    if tmap.dtype.packed:
        raise NotModelled("placement of packed 16U4/16U6 types is not modelled", tmap.dtype.name,
                          "use a byte-sized type")


def place_box(tmap: TensorMap, coords, dst: int) -> BoxPlacement:
    """Smem address and global offset of every element of one box loaded at smem address `dst`.

    coords: signed element coordinates of the box corner, innermost first.
    dst: absolute shared-memory byte address (the 32-bit shared window address).
    Raises LayoutError for a destination or coordinate the H200 faults on, and
    NotModelled for interleaved layouts, packed types and 128B_atom* swizzles.
    """
    coords = tuple(as_int(c, f"coords[{i}]") for i, c in enumerate(coords))
    dst = as_int(dst, "dst")
    _check_runtime(tmap, coords, dst)
    n, e = tmap.loaded, tmap.dtype.bytes
    j = np.indices(n[::-1]).reshape(tmap.rank, -1)[::-1]  # j[i]: index along dim i, innermost fastest
    step = np.array((1,) + tmap.elem_strides[1:] if tmap.interleave == "none" else tmap.elem_strides)[:, None]
    g = np.array(coords)[:, None] + j * step
    inside = np.all((g >= 0) & (g < np.array(tmap.dims)[:, None]), axis=0)
    reach = sum((abs(c) + k * s) * st for c, k, s, st in zip(coords, n, (1,) + tmap.elem_strides[1:],
                                                              (e,) + tmap.strides))
    exact = np.int64 if reach < 2**62 else object  # Python ints where int64 could overflow
    strides = np.array((e,) + tmap.strides, dtype=exact)
    goff = (g.astype(exact) * strides[:, None]).sum(axis=0)
    row = np.ravel_multi_index(j[:0:-1], n[:0:-1]) if tmap.rank > 1 else np.zeros_like(j[0])
    linear = dst + row * tmap.row_pitch + j[0] * e
    addr = _swizzle(linear, tmap.swizzle)
    shape = n[::-1]
    return BoxPlacement(tmap, coords, dst, addr.reshape(shape), np.where(inside, goff, -1).reshape(shape))


def _swizzle(addr: np.ndarray, mode: str) -> np.ndarray:
    return np.asarray(SWIZZLES[mode].apply(addr)) if mode in SWIZZLES else addr


def _element_bytes(tmap: TensorMap, global_image: np.ndarray, p: BoxPlacement) -> np.ndarray:
    """The bytes each loaded element writes, shape (elements, element bytes)."""
    e = tmap.dtype.bytes
    goff = p.global_offset.ravel()
    src = global_image[np.clip(goff, 0, None)[:, None] + np.arange(e)[None, :]]
    if tmap.dtype.name in ("tf32", "tf32_ftz"):
        src = _round_tf32(src)
    fill = np.zeros(e, np.uint8) if tmap.oob == "zero" else \
        np.frombuffer(np.full(e // 2 or 1, NAN_FILL_16, "<u2").tobytes()[:e], np.uint8)
    return np.where((goff >= 0)[:, None], src, fill[None, :])


def _round_tf32(src: np.ndarray) -> np.ndarray:
    """Round 32-bit values to TF32's 10 mantissa bits: the low 13 bits, to nearest, ties to even
    (H200 dumps: 0x1000 -> 0, 0x3000 -> 0x4000, 0x5000 -> 0x4000). Denormals are kept, FTZ or not;
    NaNs (either sign, any payload) become TF32_NAN."""
    v = src.copy().view("<u4").ravel().astype(np.uint64)
    kept, rest = v >> np.uint64(13), v & np.uint64(0x1FFF)
    up = (rest > 0x1000) | ((rest == 0x1000) & (kept & np.uint64(1) == 1))
    rounded = ((kept + up.astype(np.uint64)) << np.uint64(13)) & np.uint64(0xFFFFFFFF)
    nan = ((v & np.uint64(0x7F800000)) == 0x7F800000) & ((v & np.uint64(0x7FFFFF)) != 0)
    out = np.where(nan, np.uint64(TF32_NAN), rounded)  # every NaN becomes one canonical NaN
    return out.astype("<u4").view(np.uint8).reshape(src.shape)


def load_box(tmap: TensorMap, global_image: np.ndarray, coords, dst: int, smem: np.ndarray, smem_base: int) -> BoxPlacement:
    """Write into `smem` (uint8 image starting at address smem_base) what the TMA load writes.

    global_image: uint8 bytes of the tensor from its base address, 1-D (view a typed array as bytes:
    a.view(np.uint8).ravel()); smem: a 1-D uint8 array, written in place.
    Returns the placement. Raises like place_box, LayoutError if global_image or smem is not a 1-D uint8 array
    (never cast: an int64 or float image would be read as values, not bytes), and LayoutError if the box falls
    outside `smem`.
    """
    for name, a in (("global_image", global_image), ("smem", smem)):
        if not isinstance(a, np.ndarray) or a.dtype != np.uint8 or a.ndim != 1:
            got = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
            raise LayoutError(f"load_box reads {name} as 1-D uint8 bytes", got,
                              "pass the bytes: np.ascontiguousarray(x).view(np.uint8).ravel() of the tensor "
                              "(its element values are not converted)")
    p = place_box(tmap, coords, dst)
    e = tmap.dtype.bytes
    idx = (p.smem_addr.ravel() - smem_base)[:, None] + np.arange(e)[None, :]
    if idx.min() < 0 or idx.max() >= smem.size:
        raise LayoutError("box does not fit the shared-memory image", f"[{hex(int(idx.min()) + smem_base)}, "
                          f"{hex(int(idx.max()) + smem_base)}]", "enlarge the image or move the destination")
    smem[idx.ravel()] = _element_bytes(tmap, global_image, p).ravel()
    return p


def wide_tile_boxes(tmap: TensorMap, tile_inner: int, coords, dst: int) -> list[tuple[tuple, int]]:
    """Boxes that load a tile wider than one box along dimension 0 (e.g. a 128-wide bf16 K-major
    tile as two 64-wide SW128 boxes): box k starts at coords[0] + k x box[0] and lands one box
    footprint after box k-1, so each box is one column of swizzle atoms.

    tile_inner: the tile's extent along dimension 0, in elements (a multiple of box[0]).
    Returns [(coords, dst), ...] for load_box / place_box.
    """
    b0, span = tmap.box[0], SWIZZLE_SPAN[tmap.swizzle]
    tile_inner = as_int(tile_inner, "tile_inner")
    if tmap.rank != 2 or len(coords) != 2:
        raise LayoutError("wide_tile_boxes builds 2-D tiles", f"rank {tmap.rank}, {len(coords)} coords",
                          "use a rank-2 tensor map and two coordinates")
    if not span or b0 * tmap.dtype.bytes != span or tmap.box[1] % 8:
        raise LayoutError("each box must be one column of swizzle atoms: box[0] fills the swizzle span and "
                          "box[1] is a multiple of 8 rows", f"box {tmap.box}, swizzle {tmap.swizzle}",
                          "use a swizzled map with box[0] = span / element bytes and box[1] % 8 == 0")
    if tile_inner <= 0 or tile_inner % b0:
        raise LayoutError("tile width must be a positive multiple of box[0]", f"{tile_inner} vs box[0] = {b0}",
                          f"use a tile width that is a multiple of {b0}")
    return [((coords[0] + k * b0,) + tuple(coords[1:]), dst + k * tmap.smem_footprint)
            for k in range(tile_inner // b0)]
