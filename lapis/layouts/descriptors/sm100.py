"""The sm100 tcgen05 descriptors: the shared-memory matrix descriptor (64 bits) and the
instruction descriptor (32 bits). Spec-checked against PTX and CUTLASS, not hardware (no sm100 here).

Shared-memory descriptor (PTX ISA tcgen05 "Shared Memory Descriptor"; CUTLASS
`include/cute/arch/mma_sm100_desc.hpp`, `union UMMA::SmemDescriptor`):

| bits  | field            | stored as |
|-------|------------------|-----------|
| 13-0  | start address    | (addr & 0x3FFFF) >> 4 |
| 29-16 | LBO              | bytes >> 4 (an absolute address >> 4 when lbo_mode = 1) |
| 45-32 | SBO              | bytes >> 4 |
| 48-46 | fixed constant   | 0b001 (CUTLASS: version = 1) |
| 51-49 | base offset      | 3-bit pattern phase |
| 52    | LBO mode         | 0 relative byte offset, 1 absolute address (sm_103a) |
| 63-61 | layout type      | 0 none, 1 128B with 32B atomicity, 2 128B, 4 64B, 6 32B |

The layout codes are the sm90 ones shifted left by one, with bit 61 for 32 B atomicity.

Instruction descriptor (PTX ISA tcgen05 "Instruction descriptor", kinds f16/tf32/f8f6f4/i8;
CUTLASS `UMMA::InstrDescriptor`): bits 1-0 sparsity selector, 2 sparse, 3 saturate, 5-4 D format,
9-7 A format, 12-10 B format, 13/14 negate A/B, 15/16 transpose (MN-major) A/B, 22-17 N >> 3,
28-24 M >> 4, 31-30 maximum shift (.ws); bits 6, 23 and 29 are reserved.
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.errors import LayoutError, as_int
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm90 import DescriptorField, _check_bytes, unused_strides_zeroed
from lapis.layouts.swizzle import B128_BASE32B, SWIZZLES, SwizzleMode
from lapis.layouts.swizzle import swizzle as _swizzle

_SRC = "PTX ISA tcgen05 shared memory descriptor; CUTLASS UMMA::SmemDescriptor"
LAYOUT_CODES = {"none": 0, "128B_base32B": 1, "128B": 2, "64B": 4, "32B": 6}
_FIELDS = (("start_address", 0, 14), ("lbo", 16, 14), ("sbo", 32, 14), ("version", 46, 3),
           ("base_offset", 49, 3), ("lbo_mode", 52, 1), ("layout_type", 61, 3))
RESERVED_MASK = ((1 << 64) - 1) & ~sum(((1 << w) - 1) << lo for _, lo, w in _FIELDS)
VERSION = 0b001  # bits 48-46


def _mode(name) -> SwizzleMode:
    if isinstance(name, SwizzleMode):
        return name
    if name == B128_BASE32B.name:
        return B128_BASE32B
    return _swizzle(name)


@dataclass(frozen=True)
class UmmaDescriptor:
    """A tcgen05 shared-memory matrix descriptor; addresses and offsets in bytes (16 B aligned)."""

    start_address: int
    lbo: int
    sbo: int
    base_offset: int = 0
    swizzle: SwizzleMode = SWIZZLES["none"]
    lbo_mode: int = 0

    def __post_init__(self):
        object.__setattr__(self, "swizzle", _mode(self.swizzle))
        if self.swizzle.name not in LAYOUT_CODES:
            raise LayoutError("tcgen05 descriptor: unknown layout type", self.swizzle.name,
                              "use none, 32B, 64B, 128B or 128B_base32B", _SRC)
        _check_bytes("start address", as_int(self.start_address, "start address"), (1 << 18) - 16,
                     "place the operand in shared memory below 2^18 B", "tcgen05", _SRC)
        _check_bytes("LBO", as_int(self.lbo, "lbo"), ((1 << 14) - 1) << 4, "keep LBO at most 0x3FFF0 B", "tcgen05", _SRC)
        _check_bytes("SBO", as_int(self.sbo, "sbo"), ((1 << 14) - 1) << 4, "keep SBO at most 0x3FFF0 B", "tcgen05", _SRC)
        for name, hi in (("base_offset", 7), ("lbo_mode", 1)):
            v = as_int(getattr(self, name), name)
            if not 0 <= v <= hi:
                raise LayoutError(f"tcgen05 descriptor: {name} out of range", v, f"use 0..{hi}", _SRC)

    def _encoded(self) -> tuple:
        return ((self.start_address & 0x3FFFF) >> 4, self.lbo >> 4, self.sbo >> 4, VERSION, self.base_offset,
                self.lbo_mode, LAYOUT_CODES[self.swizzle.name])

    def encode(self) -> int:
        return sum(v << lo for v, (_, lo, _) in zip(self._encoded(), _FIELDS))

    @classmethod
    def decode(cls, value: int) -> UmmaDescriptor:
        """Split a 64-bit tcgen05 descriptor; reserved bits zero, bits 48-46 = 0b001, a defined layout code."""
        value = as_int(value, "descriptor")
        if not 0 <= value < 1 << 64:
            raise LayoutError("tcgen05 descriptor: not a 64-bit value", hex(value), "pass an int in [0, 2^64)", _SRC)
        f = {name: (value >> lo) & ((1 << w) - 1) for name, lo, w in _FIELDS}
        if value & RESERVED_MASK:
            raise LayoutError("tcgen05 descriptor: reserved bits set", hex(value & RESERVED_MASK),
                              "clear bits 15-14, 31-30 and 60-53", _SRC)
        if f["version"] != VERSION:
            raise LayoutError("tcgen05 descriptor: bits 48-46 must be the constant 0b001", bin(f["version"]),
                              "set bit 46 (an sm90 wgmma descriptor leaves it 0)", _SRC)
        by_code = {v: k for k, v in LAYOUT_CODES.items()}
        if f["layout_type"] not in by_code:
            raise LayoutError("tcgen05 descriptor: invalid layout type", f["layout_type"],
                              "use 0 none, 1 128B_base32B, 2 128B, 4 64B or 6 32B", _SRC)
        return cls(f["start_address"] << 4, f["lbo"] << 4, f["sbo"] << 4, f["base_offset"],
                   by_code[f["layout_type"]], f["lbo_mode"])

    def fields(self) -> list[DescriptorField]:
        byte_values = (self.start_address, self.lbo, self.sbo, None, None, None, None)
        return [DescriptorField(name, f"{lo + w - 1}-{lo}", b, enc)
                for (name, lo, w), b, enc in zip(_FIELDS, byte_values, self._encoded())]

    def __str__(self) -> str:
        lines = [f"UmmaDescriptor {self.encode():#018x}"]
        for f in self.fields():
            value = f"{f.bytes} B ({f.bytes:#x})" if f.bytes is not None else {
                "version": "fixed 0b001", "base_offset": "pattern phase (not bytes)",
                "lbo_mode": "absolute LBO" if self.lbo_mode else "relative LBO",
                "layout_type": f"{self.swizzle.name} swizzle"}[f.name]
            lines.append(f"  {f.name:<14} [{f.bits:>5}]  {value:<26} enc {f.encoded} ({f.encoded:#x})")
        return "\n".join(lines)


def umma_descriptor_for(layout: CanonicalLayout, base: int, step: int = 0) -> UmmaDescriptor:
    """The tcgen05 descriptor of K-step `step` of `layout` at smem byte `base` (same fields as sm90's
    descriptor_for, which the H200 settled: base offset 0, LBO 16 B where unused)."""
    if not isinstance(layout, CanonicalLayout):
        raise LayoutError("umma_descriptor_for needs a CanonicalLayout", repr(layout), "build one first")
    lbo, sbo = unused_strides_zeroed(layout)
    return UmmaDescriptor(layout.kstep_start(as_int(step, "step"), base=as_int(base, "base")), lbo, sbo, 0,
                          layout.swizzle.name)


# -- instruction descriptor -------------------------------------------------------

# Format codes per kind (PTX tcgen05 instruction descriptor tables; CUTLASS UMMA format enums).
KINDS = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "i8": {"u8": 0, "s8": 1},
}
D_FORMATS = {"f16": 0, "f32": 1, "s32": 2}
D_ALLOWED = {"f16": ("f16", "f32"), "tf32": ("f32",), "f8f6f4": ("f16", "f32"), "i8": ("s32",)}  # PTX kind table
MN_MAJOR_OK = {"e4m3", "e5m2", "u8", "s8", "f16", "bf16", "tf32"}  # CUTLASS: a/b_major 1 only for these
_IFIELDS = (("sparse_id2", 0, 2), ("sparse", 2, 1), ("saturate", 3, 1), ("d_format", 4, 2), ("a_format", 7, 3),
            ("b_format", 10, 3), ("negate_a", 13, 1), ("negate_b", 14, 1), ("a_major", 15, 1), ("b_major", 16, 1),
            ("n_dim", 17, 6), ("m_dim", 24, 5), ("max_shift", 30, 2))
I_RESERVED = ((1 << 32) - 1) & ~sum(((1 << w) - 1) << lo for _, lo, w in _IFIELDS)  # bits 6, 23, 29


@dataclass(frozen=True)
class InstrDescriptor:
    """A tcgen05.mma instruction descriptor. m, n in elements; majors 'K' or 'MN'."""

    kind: str
    a_type: str
    b_type: str
    d_type: str
    m: int
    n: int
    a_major: str = "K"
    b_major: str = "K"
    negate_a: int = 0
    negate_b: int = 0
    sparse: int = 0
    sparse_id2: int = 0
    saturate: int = 0
    max_shift: int = 0

    def __post_init__(self):
        src = "PTX ISA tcgen05 instruction descriptor"
        if self.kind not in KINDS:
            raise LayoutError("unknown tcgen05 kind", self.kind, "use " + ", ".join(KINDS), src)
        for name in ("a_type", "b_type"):
            if getattr(self, name) not in KINDS[self.kind]:
                raise LayoutError(f"{name} not valid for kind::{self.kind}", getattr(self, name),
                                  "use " + ", ".join(KINDS[self.kind]), src)
        if self.d_type not in D_ALLOWED[self.kind]:
            raise LayoutError(f"kind::{self.kind} accumulates in {' or '.join(D_ALLOWED[self.kind])}", self.d_type,
                              f"use d_type {D_ALLOWED[self.kind][0]}", src)
        if self.kind in ("f16", "tf32") and self.a_type != self.b_type:
            raise LayoutError(f"kind::{self.kind} needs A and B of one type", f"{self.a_type} x {self.b_type}",
                              "use f16 x f16 or bf16 x bf16", src)
        if as_int(self.m, "m") not in (64, 128, 256):
            raise LayoutError("tcgen05 M must be 64, 128 or 256", self.m, "use M = 64, 128 or 256", src)
        n, step = as_int(self.n, "n"), 8 if self.m == 64 else 16
        if not (step <= n <= 256 and n % step == 0):
            raise LayoutError(f"tcgen05 N must be a multiple of {step} in {step}..256 for M = {self.m}", n,
                              f"round N to a multiple of {step}", "CUTLASS make_instr_desc static_asserts")
        if self.kind == "i8" and (self.negate_a or self.negate_b):
            raise LayoutError("kind::i8 cannot negate A or B", (self.negate_a, self.negate_b), "use 0", src)
        if self.kind != "i8" and self.saturate:
            raise LayoutError("saturate exists only for kind::i8", self.kind, "use saturate 0", src)
        for name, t in (("a_major", self.a_type), ("b_major", self.b_type)):
            major = getattr(self, name)
            if major not in ("K", "MN"):
                raise LayoutError(f"{name} must be K or MN", major, "use K or MN", src)
            if major == "MN" and t not in MN_MAJOR_OK:
                raise LayoutError(f"MN-major (transposed) {t} is not supported", t, "store it K-major",
                                  "CUTLASS UMMA::InstrDescriptor a_major/b_major")
        for name, hi in (("negate_a", 1), ("negate_b", 1), ("sparse", 1), ("sparse_id2", 3), ("saturate", 1),
                         ("max_shift", 3)):
            if not 0 <= as_int(getattr(self, name), name) <= hi:
                raise LayoutError(f"{name} out of range", getattr(self, name), f"use 0..{hi}", src)

    def _encoded(self) -> tuple:
        return (self.sparse_id2, self.sparse, self.saturate, D_FORMATS[self.d_type], KINDS[self.kind][self.a_type],
                KINDS[self.kind][self.b_type], self.negate_a, self.negate_b, int(self.a_major == "MN"),
                int(self.b_major == "MN"), self.n >> 3, self.m >> 4, self.max_shift)

    def encode(self) -> int:
        return sum(v << lo for v, (_, lo, _) in zip(self._encoded(), _IFIELDS))

    @classmethod
    def decode(cls, value: int, kind: str) -> InstrDescriptor:
        """Split a 32-bit instruction descriptor; the kind (f16, tf32, f8f6f4, i8) says how to read the formats."""
        value = as_int(value, "instruction descriptor")
        if not 0 <= value < 1 << 32 or value & I_RESERVED:
            raise LayoutError("tcgen05 instruction descriptor: not 32 bits or reserved bits 6, 23, 29 set", hex(value),
                              "clear the reserved bits", "PTX ISA tcgen05 instruction descriptor")
        f = {name: (value >> lo) & ((1 << w) - 1) for name, lo, w in _IFIELDS}
        names = {v: k for k, v in KINDS.get(kind, {}).items()}
        d_names = {v: k for k, v in D_FORMATS.items()}
        try:
            return cls(kind, names[f["a_format"]], names[f["b_format"]], d_names[f["d_format"]], f["m_dim"] << 4,
                       f["n_dim"] << 3, "MN" if f["a_major"] else "K", "MN" if f["b_major"] else "K", f["negate_a"],
                       f["negate_b"], f["sparse"], f["sparse_id2"], f["saturate"], f["max_shift"])
        except KeyError as exc:
            raise LayoutError(f"tcgen05 instruction descriptor: a format code undefined for kind::{kind}",
                              str(exc), "check the kind and the A/B/D formats") from None
