"""Swizzle modes and the XOR they apply to shared-memory byte addresses.

A swizzle mode of span S bytes (32, 64 or 128) permutes the 16-byte chunks of
each S-byte row by XOR-ing the chunk index with the row index taken from higher
address bits: CuTe's `Swizzle<B,4,3>` on byte addresses, B = log2(S / 16).
It acts on the *absolute* shared-memory address, so the pattern repeats every
`repeat_bytes` = 8 x S bytes (PTX ISA 5.5.7 "Swizzling Modes"; CUTLASS
`include/cute/swizzle.hpp`). On 2-byte element indices the same map is
`Swizzle<B,3,3>`.

This module is numpy-only: the TMA model (lapis.layouts.tma) and the descriptor checks import it on a GPU host
without tensor-layouts, so `SwizzleMode.apply` is their XOR. Canonical layouts use the tensor-layouts Swizzle
(lapis.layouts.canonical.library_swizzle); tests/layouts/test_library_algebra.py keeps the two equal on every
shared-memory address.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lapis.errors import LayoutError


@dataclass(frozen=True)
class SwizzleMode:
    name: str  # CLI spelling: none, 32B, 64B, 128B
    span_bytes: int  # bytes per swizzled row; 16 for no swizzle (one core-matrix row)
    bits: int  # CuTe Swizzle<B,M,S>: B
    base: int = 4  # M: log2 of the permuted unit (16 B chunks)
    shift: int = 3  # S: distance from the permuted bits to the row bits
    rows: int = 8  # strided rows in one swizzle atom (4 for 128B with 32 B atomicity)

    @property
    def repeat_bytes(self) -> int:
        """Bytes after which the pattern repeats: 2^(M+S+B), i.e. 8 rows x span for Swizzle<B,4,3>
        (128 B for none), 512 B for the 128B-with-32B-atomicity Swizzle<2,5,2>."""
        return 1 << (self.base + self.shift + self.bits)

    @property
    def cute(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def apply(self, addr: int | np.ndarray) -> int | np.ndarray:
        """Swizzle byte addresses (int or integer numpy array); an involution. The TMA model's XOR."""
        mask = ((1 << self.bits) - 1) << (self.base + self.shift)
        a = np.asarray(addr, dtype=np.int64)
        out = a ^ ((a & mask) >> self.shift)
        return int(out) if np.ndim(out) == 0 else out

    def phase(self, addr: int) -> int:
        """Row phase of an address inside the repeat: (addr / 128) mod 2^B (PTX 5.5.7)."""
        return (addr >> (self.base + self.shift)) & ((1 << self.bits) - 1)


NONE = SwizzleMode("none", 16, 0)
B32 = SwizzleMode("32B", 32, 1)
B64 = SwizzleMode("64B", 64, 2)
B128 = SwizzleMode("128B", 128, 3)

SWIZZLES: dict[str, SwizzleMode] = {m.name: m for m in (NONE, B32, B64, B128)}

# tcgen05 only (sm100): 128 B rows swizzled in 32 B units, CuTe Swizzle<2,5,2> (CUTLASS
# Layout_MN_SW128_32B_Atom; PTX "128B with 32B atomicity"). Not a canonical wgmma layout, so not in SWIZZLES.
B128_BASE32B = SwizzleMode("128B_base32B", 128, 2, 5, 2, rows=4)


def swizzle(name: str | SwizzleMode) -> SwizzleMode:
    """Look up a swizzle mode by its spelling: none, 32B, 64B, 128B.

    Raises LayoutError naming the accepted spellings.
    """
    if isinstance(name, SwizzleMode):
        return name
    try:
        return SWIZZLES[name]
    except KeyError:
        raise LayoutError("unknown swizzle mode", repr(name), "use one of " + ", ".join(SWIZZLES)) from None
