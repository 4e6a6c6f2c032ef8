"""Warnings for a swizzled TMA destination that is off its swizzle repeat boundary.

TMA swizzles the *absolute* shared-memory address (PTX ISA 5.5.7 "Swizzling Modes"), so a box written at any
128 B-aligned destination lands exactly where CuTe's Swizzle<B,4,3> on the byte address says. A consumer that
computes the XOR from offsets relative to the buffer start (ldmatrix/LDS address math `row ^ col_chunk` with
row counted from the buffer) assumes the buffer starts on a repeat boundary (8 rows x the swizzle span:
1024 B for 128B, 512 B for 64B, 256 B for 32B); off it, that consumer's XOR row is shifted by the phase and it
reads other chunks. A wgmma descriptor reads the absolute address bits minus its base offset: base offset 0
reads the tile correctly (H200 captures: lapis.validate.mma settled fact "base_offset_zero_reads_tma_layout"),
and PTX's (start >> 7) & 7 base offset does not ("ptx_formula_base_offset_reads_tma_layout" is False).
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.layouts.swizzle import SWIZZLES


@dataclass(frozen=True)
class BoundaryWarning:
    """One destination off its repeat boundary. phase: bytes past the boundary; xor_shift: how far the XOR row
    value (address bits above the 128 B row, mod 2^B) of the first byte differs from a buffer-relative count."""

    dst: int
    swizzle: str
    repeat_bytes: int
    phase: int
    xor_shift: int

    def __str__(self) -> str:
        sw = SWIZZLES[self.swizzle]
        rows = 1 << sw.bits
        return (f"warning: destination {self.dst:#x} is {self.phase} B past its {self.repeat_bytes} B swizzle "
                f"repeat boundary ({self.swizzle}: 8 rows x {sw.span_bytes} B; phase {self.phase} of "
                f"{self.repeat_bytes}). TMA places the bytes correctly (it swizzles absolute addresses), but the "
                f"XOR row value at the buffer start is {self.xor_shift}, not 0: the 16 B chunk of byte offset o is "
                f"XORed with ((o >> 7) + {self.xor_shift}) mod {rows}. Breaks: a consumer that computes the XOR from "
                f"buffer-relative offsets (ldmatrix/LDS address math row ^ col_chunk from the buffer start) and a "
                f"wgmma/tcgen05 descriptor with PTX's base offset (start >> 7) & 7 = {(self.dst >> 7) & 7}. Fine: "
                f"a consumer that swizzles absolute address bits (CuTe {sw.cute} on the byte address) and a "
                f"descriptor with base offset 0. Fix: place the buffer at a multiple of {self.repeat_bytes} B "
                f"(e.g. {self.dst - self.phase:#x} or {self.dst - self.phase + self.repeat_bytes:#x}), or make every "
                f"consumer swizzle absolute addresses")


def boundary_warning(swizzle: str, dst: int) -> BoundaryWarning | None:
    """The warning for a box written at absolute smem byte address `dst` with swizzle mode `swizzle` (lapis
    spelling: none, 32B, 64B, 128B), or None when unswizzled or on a repeat boundary."""
    sw = SWIZZLES.get(swizzle)
    if sw is None or sw.bits == 0:
        return None
    phase = dst % sw.repeat_bytes
    if phase == 0:
        return None
    return BoundaryWarning(dst, swizzle, sw.repeat_bytes, phase, sw.phase(dst))


def boundary_warnings(swizzle: str, dsts) -> list[BoundaryWarning]:
    """The warnings of several destinations (e.g. the boxes of a wide tile), one per destination off its
    boundary, in order."""
    return [w for w in (boundary_warning(swizzle, d) for d in dsts) if w is not None]
