"""What a wgmma reads: the shared-memory address of every operand element, given a matrix descriptor.

The tensor core does not know the layout the data was written in; it walks the
canonical layout that the descriptor's fields describe (PTX ISA 9.7.15.5.1.2,
"Shared Memory Matrix Layout", canonical layouts in units of 16 B):

- K-major (no transpose), rows r = M or N index, k within one instruction (32 B of K):
  - no swizzle: core matrices of 8 rows x 16 B; SBO steps 8-row groups, LBO steps 16 B of K.
  - swizzled, span S: rows S bytes apart inside an 8-row group, SBO between groups, K contiguous;
    LBO is not used.
- MN-major (transpose, f16/bf16 only), 8 K-rows per group:
  - no swizzle: 16 B of MN per core-matrix row; SBO steps 16 B groups of MN, LBO steps 8 K-rows.
  - swizzled: S bytes of MN per row; LBO steps S-byte groups of MN, SBO steps 8 K-rows.

The swizzle XOR then acts on the absolute shared address, as for TMA, except
that the descriptor's base offset is subtracted from the row bits first: the
16 B chunk index is XORed with ((addr >> 7) - base_offset) mod 2^B (H200 wgmma
captures: every swizzle mode, tiles 128 to 896 B past their repeat boundary).
So data a TMA wrote at its absolute address needs base offset 0, and PTX's
formula (pattern start >> 7) & 7 is for a pattern anchored at the tile start.
Units: addresses and fields in bytes; r and k in elements.
"""

from __future__ import annotations

import numpy as np

from lapis.errors import LayoutError, NotModelled
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor

K_BYTES = 32  # K extent of one wgmma, in bytes (bf16 16, tf32 8, fp8 32 elements)
ROWS = {"A": 64}  # A is always m64; B has N rows


def operand_addresses(desc, rows: int, elem_bytes: int, transpose: bool) -> np.ndarray:
    """(rows, K) absolute smem byte addresses of the elements one MMA reads through `desc`
    (a WgmmaDescriptor, or an sm100 UmmaDescriptor: the same canonical layouts, spec-checked only).

    rows: 64 for A, N for B; elem_bytes: 1, 2 or 4; transpose: the instruction's imm-trans flag
    (MN-major). K = 32 B / elem_bytes. Raises LayoutError for shapes wgmma cannot read, NotModelled for
    tcgen05's absolute-address LBO mode.
    """
    if not (8 <= rows <= 256 and rows % 8 == 0) or elem_bytes not in (1, 2, 4):
        raise LayoutError("MMA operand rows must be 8..256 in steps of 8, with 1, 2 or 4 B elements",
                          f"{rows} rows of {elem_bytes} B", "use M = 64 (wgmma A) or N in 8..256 step 8")
    if getattr(desc, "lbo_mode", 0):
        raise NotModelled("absolute-address LBO (tcgen05 lbo_mode 1, sm_103a) is not modelled", desc.lbo_mode,
                          "use lbo_mode 0 (LBO as a byte offset)")
    if desc.swizzle.name == "128B_base32B" and not transpose:
        raise LayoutError("128B with 32 B atomicity exists only MN-major", "K-major read",
                          "read it transposed (MN-major) or use the 128B swizzle", "CUTLASS make_umma_desc")
    k_elems = K_BYTES // elem_bytes
    r, k = np.meshgrid(np.arange(rows), np.arange(k_elems), indexing="ij")
    span = desc.swizzle.span_bytes
    g = desc.swizzle.rows  # strided rows per group: 8, or 4 for tcgen05's 128B with 32 B atomicity
    if not transpose:
        kb = k * elem_bytes
        if desc.swizzle.bits == 0:
            pre = (r // 8) * desc.sbo + (r % 8) * 16 + (kb // 16) * desc.lbo + kb % 16
        else:
            pre = (r // g) * desc.sbo + (r % g) * span + kb
    else:
        rb = r * elem_bytes
        if desc.swizzle.bits == 0:
            pre = (rb // 16) * desc.sbo + (k // 8) * desc.lbo + (k % 8) * 16 + rb % 16
        else:
            pre = (rb // span) * desc.lbo + (k // g) * desc.sbo + (k % g) * span + rb % span
    return swizzle_read(desc.start_address + np.asarray(pre, dtype=np.int64), desc)


def swizzle_read(addr: np.ndarray, desc) -> np.ndarray:
    """The XOR the tensor core applies: Swizzle<B,M,S> with the base offset taken off the row bits,
    e.g. chunk bits [6:4] ^= ((addr >> 7) - base_offset) mod 2^B for Swizzle<B,4,3> (H200)."""
    sw = desc.swizzle
    if sw.bits == 0:
        return addr
    row = ((addr >> (sw.base + sw.shift)) - desc.base_offset) & ((1 << sw.bits) - 1)
    return addr ^ (row << sw.base)


def read_operand(smem: np.ndarray, smem_base: int, desc: WgmmaDescriptor, rows: int, elem_bytes: int,
                 transpose: bool) -> np.ndarray:
    """The operand one wgmma consumes: (rows, K) raw element values (unsigned ints of elem_bytes).

    smem: uint8 image of shared memory starting at absolute address smem_base.
    Raises LayoutError if an address falls outside the image.
    """
    addr = operand_addresses(desc, rows, elem_bytes, transpose) - smem_base
    if addr.min() < 0 or addr.max() + elem_bytes > smem.size:
        raise LayoutError("the descriptor reads outside the shared-memory image",
                          f"[{hex(int(addr.min()) + smem_base)}, {hex(int(addr.max()) + smem_base)}]",
                          "check the start address, LBO and SBO")
    words = smem[addr[..., None] + np.arange(elem_bytes)].astype(np.uint64)
    return (words << (8 * np.arange(elem_bytes, dtype=np.uint64))).sum(axis=-1)


def to_float(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Raw element values -> float64, exactly (bf16, f16, tf32 read as fp32 bits, e4m3)."""
    b = np.asarray(bits, dtype=np.uint64)
    if dtype == "bf16":
        return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "f16":
        return b.astype(np.uint16).view(np.float16).astype(np.float64)
    if dtype == "tf32":
        return (b.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if dtype == "e4m3":
        return _E4M3[b.astype(np.int64)]
    raise LayoutError("unknown wgmma operand type", dtype, "use bf16, f16, tf32 or e4m3")


def _e4m3_table() -> np.ndarray:
    """All 256 e4m3 values (OCP FP8: bias 7, no infinities, S.1111.111 is NaN)."""
    t = np.empty(256)
    for v in range(256):
        s, e, m = v >> 7, (v >> 3) & 0xF, v & 7
        mag = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        t[v] = np.nan if (e == 15 and m == 7) else (-mag if s else mag)
    return t


_E4M3 = _e4m3_table()


def predict_d(smem: np.ndarray, smem_base: int, dtype: str, n: int, desc_a: WgmmaDescriptor,
              desc_b: WgmmaDescriptor, trans_a: bool, trans_b: bool) -> np.ndarray:
    """D = A x B^T (64 x n, float64) of one wgmma m64nNk* reading smem through the two descriptors."""
    e = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1}[dtype]
    if (trans_a or trans_b) and dtype not in ("bf16", "f16"):
        raise LayoutError("sm90 wgmma transposes (imm-trans) only f16/bf16 operands", f"{dtype} with transpose",
                          "tf32 and fp8 operands are K-major only", "PTX ISA 9.7.15.5.1")
    a = to_float(read_operand(smem, smem_base, desc_a, 64, e, trans_a), dtype)
    b = to_float(read_operand(smem, smem_base, desc_b, n, e, trans_b), dtype)
    return a @ b.T
