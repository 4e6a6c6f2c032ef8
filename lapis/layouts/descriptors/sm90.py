"""The sm90 wgmma matrix descriptor: 64 bits that tell wgmma where an operand is.

Bit layout (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format"; CUTLASS
`include/cute/arch/mma_sm90_desc.hpp`, `union GmmaDescriptor`):

| bits  | field          | stored as |
|-------|----------------|-----------|
| 13-0  | start address  | (addr & 0x3FFFF) >> 4, i.e. 16-B units |
| 29-16 | LBO            | bytes >> 4 |
| 45-32 | SBO            | bytes >> 4 |
| 51-49 | base offset    | 3-bit pattern phase |
| 63-62 | layout type    | 0 interleave (no swizzle), 1 128B, 2 64B, 3 32B |

All other bits are zero. The meaning of LBO and SBO depends on the major-ness
and swizzle of the canonical layout (see `lapis.layouts.canonical`).

"Interleave" here is only PTX's name for the no-swizzle canonical layout (layout
type 0). It has nothing to do with TMA's `CU_TENSOR_MAP_INTERLEAVE_16B/32B`,
which is a global-memory tensor-map option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lapis.errors import LayoutError, as_int
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.swizzle import B32, B64, B128, NONE, SwizzleMode
from lapis.layouts.swizzle import swizzle as _swizzle

__all__ = [
    "WgmmaDescriptor",
    "DescriptorField",
    "descriptor_for",
    "base_offset_for",
    "layout_type",
    "swizzle_from_layout_type",
]

_SRC = "PTX ISA 9.7.15.5.1.2.2"

# SM90::GMMA::LayoutType (CUTLASS mma_sm90_desc.hpp): note 128B is 1 and 32B is 3.
_LAYOUT_TYPE = {NONE.name: 0, B128.name: 1, B64.name: 2, B32.name: 3}
_BY_CODE = {code: _swizzle(name) for name, code in _LAYOUT_TYPE.items()}

# (name, low bit, width) of every field, in bit order.
_FIELDS = (
    ("start_address", 0, 14),
    ("lbo", 16, 14),
    ("sbo", 32, 14),
    ("base_offset", 49, 3),
    ("layout_type", 62, 2),
)
_USED = sum(((1 << w) - 1) << lo for _, lo, w in _FIELDS)
RESERVED_MASK = ((1 << 64) - 1) & ~_USED  # bits 15-14, 31-30, 48-46, 61-52
_MAX_OFFSET = ((1 << 14) - 1) << 4  # 0x3FFF0 B: the largest LBO/SBO a 14-bit field holds
_SMEM_LIMIT = 1 << 18  # start addresses are taken modulo 2^18 by the encoding


def layout_type(mode: str | SwizzleMode) -> int:
    """The descriptor's 2-bit layout type for a swizzle mode (0 none, 1 128B, 2 64B, 3 32B)."""
    m = _swizzle(mode)
    if _LAYOUT_TYPE.get(m.name) is None or _BY_CODE[_LAYOUT_TYPE[m.name]] != m:
        raise LayoutError("sm90 descriptor: swizzle mode has no layout type", repr(m),
                          "use none, 32B, 64B or 128B", _SRC)
    return _LAYOUT_TYPE[m.name]


def swizzle_from_layout_type(code: int) -> SwizzleMode:
    """Inverse of layout_type; raises LayoutError for a code outside 0..3."""
    try:
        return _BY_CODE[code]
    except (KeyError, TypeError):
        raise LayoutError("sm90 descriptor: invalid layout type (swizzle code)", repr(code),
                          "use 0 (interleave), 1 (128B), 2 (64B) or 3 (32B)", _SRC) from None


class DescriptorField(NamedTuple):
    """One descriptor field for a printer: bytes is None where the field is not a byte count."""

    name: str
    bits: str  # "hi-lo"
    bytes: int | None
    encoded: int


@dataclass(frozen=True)
class WgmmaDescriptor:
    """An sm90 wgmma matrix descriptor with its fields in bytes.

    start_address: smem byte address the operand starts at (pre-swizzle), 16 B aligned, < 2^18.
    lbo, sbo: leading / stride dimension byte offsets, 16 B aligned, <= 0x3FFF0 B.
    base_offset: the 3-bit "matrix base offset" field value (pattern phase, not bytes).
    swizzle: the layout type as a SwizzleMode (or its spelling).
    """

    start_address: int
    lbo: int
    sbo: int
    base_offset: int = 0
    swizzle: SwizzleMode = NONE

    def __post_init__(self):
        for name in ("start_address", "lbo", "sbo", "base_offset"):  # numpy ints are fine, floats are not
            v = getattr(self, name)
            if isinstance(v, np.integer):
                object.__setattr__(self, name, int(v))
        object.__setattr__(self, "swizzle", _swizzle(self.swizzle))
        layout_type(self.swizzle)  # rejects a mode the descriptor cannot express
        _check_bytes("start address", self.start_address, _SMEM_LIMIT - 16,
                     "place the operand in shared memory below 256 KiB (2^18 B)")
        _check_bytes("leading dimension byte offset (LBO)", self.lbo, _MAX_OFFSET,
                     "reorder the atoms so the LBO stride is at most 0x3FFF0 B")
        _check_bytes("stride dimension byte offset (SBO)", self.sbo, _MAX_OFFSET,
                     "reorder the atoms so the SBO stride is at most 0x3FFF0 B")
        b = self.base_offset
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 7:
            raise LayoutError("sm90 descriptor: base offset must fit 3 bits", repr(b),
                              "use 0..7: (pattern start addr >> 7) & 7", _SRC)

    # -- bits -----------------------------------------------------------------

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        return sum(enc << lo for enc, (_, lo, _) in zip(self._encoded(), _FIELDS))

    def _encoded(self) -> tuple[int, ...]:
        return ((self.start_address & 0x3FFFF) >> 4, self.lbo >> 4, self.sbo >> 4,
                self.base_offset, layout_type(self.swizzle))

    @classmethod
    def decode(cls, value: int) -> WgmmaDescriptor:
        """Split a 64-bit descriptor into its fields; reserved bits must be zero."""
        if isinstance(value, np.integer):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise LayoutError("sm90 descriptor: value is not a 64-bit unsigned integer", repr(value),
                              "pass the descriptor as an int in [0, 2^64)", _SRC)
        if value & RESERVED_MASK:
            raise LayoutError("sm90 descriptor: reserved bits set", hex(value & RESERVED_MASK),
                              "clear bits 15-14, 31-30, 48-46 and 61-52 (a tcgen05 descriptor sets bit 46)", _SRC)
        f = [(value >> lo) & ((1 << w) - 1) for _, lo, w in _FIELDS]
        return cls(f[0] << 4, f[1] << 4, f[2] << 4, f[3], swizzle_from_layout_type(f[4]))

    # -- printing -------------------------------------------------------------

    def fields(self) -> list[DescriptorField]:
        """(name, bits, bytes, encoded) for every field, low bits first."""
        byte_values = (self.start_address, self.lbo, self.sbo, None, None)
        return [DescriptorField(name, f"{lo + w - 1}-{lo}", b, enc)
                for (name, lo, w), b, enc in zip(_FIELDS, byte_values, self._encoded())]

    def __str__(self) -> str:
        lines = [f"WgmmaDescriptor {self.encode():#018x}"]
        for f in self.fields():
            if f.name == "layout_type":
                value = f"{self.swizzle.name} swizzle" if self.swizzle != NONE else "interleave (no swizzle)"
            elif f.name == "base_offset":
                value = "pattern phase (not bytes)"
            else:
                value = f"{f.bytes} B ({f.bytes:#x})"
            lines.append(f"  {f.name:<14} [{f.bits:>5}]  {value:<26} enc {f.encoded} ({f.encoded:#x})")
        return "\n".join(lines)


def _check_bytes(what: str, value, limit: int, fix_range: str, arch: str = "sm90", src: str = _SRC) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LayoutError(f"{arch} descriptor: {what} must be a non-negative byte count", repr(value),
                          "pass bytes as an int", src)
    if value % 16:
        raise LayoutError(f"{arch} descriptor: {what} is not 16 B aligned", hex(value),
                          f"align it to 16 B (the field stores bytes >> 4), e.g. {value - value % 16:#x}", src)
    if value > limit:
        raise LayoutError(f"{arch} descriptor: {what} does not fit its 14-bit field", hex(value), fix_range, src)


def base_offset_for(mode: SwizzleMode, base: int) -> int:
    """Matrix base offset for data whose swizzle pattern is anchored at smem byte `base`
    (chunk c of the row starting at base + 128 r holds logical chunk c ^ r), not at address 0.

    PTX formula: 0 when `base` is a multiple of the swizzle repeat (1024/512/256 B),
    else (base >> 7) & 7; always 0 without swizzle (PTX: not valid for no-swizzle).
    Settled on the H200: the hardware XORs with ((addr >> 7) - base_offset), so this
    is right for tile-anchored patterns; data a TMA wrote (anchored at address 0,
    as `CanonicalLayout.address` lays it out) needs 0, which `descriptor_for` uses.
    CUTLASS `make_gmma_desc` always writes 0.
    """
    mode, base = _swizzle(mode), as_int(base, "base")
    if mode.bits == 0 or base % mode.repeat_bytes == 0:
        return 0
    return (base >> 7) & 7


def descriptor_for(layout: CanonicalLayout, base: int, step: int = 0, wgmma_operand: bool = True) -> WgmmaDescriptor:
    """The descriptor for MMA K-step `step` of `layout` placed at smem byte `base`.

    start = layout.kstep_start(step, base=base); LBO = layout.lbo_bytes, or 16 B
    (encoded 1, CUTLASS's convention) where PTX says it is unused (swizzled
    K-major; the H200 ignores it); SBO = layout.sbo_bytes; base offset 0: the
    layout (like a TMA load) swizzles absolute addresses, and the H200 subtracts a
    non-zero base offset from the address row bits, which would shift the pattern
    (lapis/data/captures/wgmma: PTX's formula at an off-boundary base reads the wrong
    elements).
    With wgmma_operand (the default), raises LayoutError for an MN-major operand
    that is not f16/bf16: wgmma's transpose (imm-trans-a/b) exists only for
    .f16/.bf16 (PTX ISA 9.7.15.5.1). Pass False to encode the fields of a layout
    that is canonical but not a wgmma operand (e.g. MN-major tf32 for tcgen05).
    """
    if not isinstance(layout, CanonicalLayout):
        raise LayoutError("descriptor_for needs a CanonicalLayout", repr(layout),
                          "build one with CanonicalLayout(major, swizzle, dtype, rows, cols)")
    if layout.swizzle.name == "128B_base32B":
        raise LayoutError("sm90 wgmma has no 128B-with-32B-atomicity layout", layout.swizzle.name,
                          "it is tcgen05 only: use descriptor_sm100.umma_descriptor_for", _SRC)
    base, step = as_int(base, "base"), as_int(step, "step")
    if wgmma_operand and layout.cols * layout.elem_bytes < 32:
        raise LayoutError("a wgmma operand tile must cover at least one MMA K-step (32 B of K)",
                          f"K extent {layout.cols} x {layout.elem_bytes} B = {layout.cols * layout.elem_bytes} B",
                          f"use cols >= {32 // layout.elem_bytes}", "PTX ISA 9.7.15.5.1 (k = 32 B per wgmma)")
    if wgmma_operand and layout.major == "MN" and layout.dtype.name not in ("f16", "bf16"):
        raise LayoutError("sm90 wgmma reads MN-major (transposed) operands only for f16/bf16",
                          f"MN-major {layout.dtype.name}", "store the operand K-major",
                          "PTX ISA 9.7.15.5.1, imm-trans-a/b")
    lbo, sbo = unused_strides_zeroed(layout)
    return WgmmaDescriptor(
        start_address=layout.kstep_start(step, base=base),
        lbo=lbo,
        sbo=sbo,
        base_offset=0,
        swizzle=layout.swizzle,
    )


def unused_strides_zeroed(layout: CanonicalLayout) -> tuple[int, int]:
    """(LBO, SBO) bytes for one K-step's descriptor, as CUTLASS's make_gmma_desc / make_umma_desc write them:
    a stride across a dimension that holds a single group in the operand (one 8-row group of MN, one swizzle
    atom of MN, one 8-row group of K: tf32 MN-major) is never read and is written 0; LBO of swizzled K-major,
    unused by PTX, is written 16 B (encoded 1). Checked bit for bit against CUTLASS on 96 layouts
    (lapis/data/captures/cutlass_oracle); the H200 reads the same elements either way (lapis/data/captures/wgmma)."""
    lbo = layout.lbo_bytes if layout.lbo_bytes is not None else 16
    sbo = layout.sbo_bytes
    one_mn_group = layout.rows <= (8 if layout.major == "K" else layout.span_elems)
    one_k_group = layout.major == "MN" and 32 // layout.elem_bytes <= layout.swizzle.rows
    if layout.major == "K":
        sbo = 0 if one_mn_group else sbo
    elif layout.swizzle.bits == 0:  # MN-major interleave: SBO steps MN, LBO steps K
        sbo, lbo = (0 if one_mn_group else sbo), (0 if one_k_group else lbo)
    else:  # MN-major swizzled: LBO steps MN atoms, SBO steps K groups
        lbo, sbo = (0 if one_mn_group else lbo), (0 if one_k_group else sbo)
    return lbo, sbo
