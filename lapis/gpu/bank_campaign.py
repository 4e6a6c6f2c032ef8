"""The bank-conflict campaign: per-lane shared-memory byte offsets for kernels/bank_capture_v1.cu.

Pure standard library, independent of lapis's wavefront model. Each pattern is one warp-wide
instruction (its kernel) and the 32 lane offsets it uses: ldmatrix/stmatrix lanes give the 16 B rows
of the 8x8 matrices (lane l: matrix l // 8, row l % 8), 4/8/16 B loads and stores their own address.
"""

from __future__ import annotations


def swz(addr: int, span: int) -> int:
    """The 16 B-chunk XOR of a 32/64/128 B swizzle on a byte address (span 0: none)."""
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[span]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def matrix_rows(row_bytes: int, span: int = 0) -> list[int]:
    """ldmatrix/stmatrix x4 over four 8x8 b16 matrices side by side in K: lane l -> row l % 8, chunk l // 8."""
    return [swz((l % 8) * row_bytes + (l // 8) * 16, span) for l in range(32)]


def patterns_v2():
    """For kernels/bank_capture_v2.cu: the remaining ldmatrix/stmatrix variants, conflicting and not."""
    P = []
    for kernel in ("ldsm_x1_trans", "ldsm_x2_trans", "stsm_x1", "stsm_x2", "stsm_x1_trans", "stsm_x2_trans",
                   "stsm_x4_trans"):
        for name, row, span in (("128B rows, no swizzle", 128, 0), ("128B rows, SW128", 128, 128),
                                ("128B rows, SW64", 128, 64)):
            P.append(dict(kernel=kernel, name=name, offsets=matrix_rows(row, span)))
    for i, p in enumerate(P):
        p["id"] = i
    return P


def patterns():
    P = []
    for kernel in ("ldsm_x4", "ldsm_x4_trans", "stsm_x4"):
        for name, row, span in (("128B rows, no swizzle", 128, 0), ("128B rows, SW128", 128, 128),
                                ("128B rows, SW64", 128, 64), ("128B rows, SW32", 128, 32),
                                ("64-element bf16 rows padded to 72 (144 B)", 144, 0), ("64B rows", 64, 0)):
            if kernel != "ldsm_x4" and span in (32, 64):
                continue
            P.append(dict(kernel=kernel, name=name, offsets=matrix_rows(row, span)))
    P.append(dict(kernel="ldsm_x2", name="128B rows, no swizzle", offsets=matrix_rows(128)))
    P.append(dict(kernel="ldsm_x1", name="128B rows, SW128", offsets=matrix_rows(128, 128)))
    P.append(dict(kernel="ldsm_x1", name="128B rows, no swizzle", offsets=matrix_rows(128)))
    for kernel in ("lds128", "sts128"):
        P.append(dict(kernel=kernel, name="contiguous 16 B per lane", offsets=[16 * l for l in range(32)]))
        P.append(dict(kernel=kernel, name="one 128B row per lane (column)", offsets=[128 * l for l in range(32)]))
        P.append(dict(kernel=kernel, name="one 128B row per lane, SW128",
                      offsets=[swz(128 * l, 128) for l in range(32)]))
    for kernel in ("lds32", "sts32"):
        P.append(dict(kernel=kernel, name="contiguous words", offsets=[4 * l for l in range(32)]))
        P.append(dict(kernel=kernel, name="column of 128B rows", offsets=[128 * l for l in range(32)]))
        P.append(dict(kernel=kernel, name="column of 132B (padded) rows", offsets=[132 * l for l in range(32)]))
        P.append(dict(kernel=kernel, name="every other word", offsets=[8 * l for l in range(32)]))
    P.append(dict(kernel="lds32", name="broadcast: one word", offsets=[256] * 32))
    P.append(dict(kernel="lds32", name="4 distinct words in one bank", offsets=[128 * (l % 4) for l in range(32)]))
    P.append(dict(kernel="lds64", name="contiguous 8 B per lane", offsets=[8 * l for l in range(32)]))
    P.append(dict(kernel="lds64", name="8 B per lane at a 16 B stride", offsets=[16 * l for l in range(32)]))
    for i, p in enumerate(P):
        p["id"] = i
    return P


if __name__ == "__main__":
    print(len(patterns()))
