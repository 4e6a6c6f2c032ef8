"""Shared-memory bank conflicts: wavefronts one warp-wide instruction needs.

Shared memory has 32 banks of 4 bytes (bank = address / 4 mod 32). A warp's request is served in
phases: the 32 lanes at once for 4 B accesses, 16 lanes for 8 B, 8 lanes for 16 B, and one 8x8
matrix (8 lanes' 16 B rows) per phase for ldmatrix/stmatrix (.trans reads the same rows). In a
phase, each bank delivers one 4 B word per wavefront; lanes reading the same word share it
(broadcast). So a phase takes max over banks of (distinct words in that bank) wavefronts, and the
instruction the sum over its phases. The ideal is the number of phases (1, 2 or 4; ldmatrix .xN: N).
Checked against Nsight Compute's l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st} on the H200
(lapis/data/captures/bank). tensor-layouts' bank_conflicts gives one group's worst way-count, not
wavefronts per phase, so lapis counts them itself.
"""

from __future__ import annotations

import numpy as np

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError, as_int

# kind -> (bytes each lane accesses, lanes per phase, lanes that supply addresses)
KINDS = {
    "lds32": (4, 32, 32), "sts32": (4, 32, 32), "lds64": (8, 16, 32), "sts64": (8, 16, 32),
    "lds128": (16, 8, 32), "sts128": (16, 8, 32),
    "ldsm_x1": (16, 8, 8), "ldsm_x2": (16, 8, 16), "ldsm_x4": (16, 8, 32),
    "ldsm_x1_trans": (16, 8, 8), "ldsm_x2_trans": (16, 8, 16), "ldsm_x4_trans": (16, 8, 32),
    "stsm_x1": (16, 8, 8), "stsm_x2": (16, 8, 16), "stsm_x4": (16, 8, 32),
    "stsm_x1_trans": (16, 8, 8), "stsm_x2_trans": (16, 8, 16), "stsm_x4_trans": (16, 8, 32),
}


SMEM_BYTES = SMEM_BYTES_PER_SM


def _lane_addresses(offsets, kind: str, lanes: int, width: int) -> np.ndarray:
    """32 integer byte addresses (ldmatrix .x1/.x2: the first 8/16 are used), aligned and inside shared memory."""
    if isinstance(offsets, (str, bytes)) or not hasattr(offsets, "__len__") or len(offsets) not in (lanes, 32):
        n = f"{lanes} (or 32)" if lanes != 32 else "32"
        raise LayoutError(f"{kind} takes one address per lane", repr(offsets)[:60], f"pass {n} integers")
    a = [as_int(v, f"lane {i} address") for i, v in enumerate(offsets)][:lanes]
    bad = [v for v in a if v % width or not 0 <= v < SMEM_BYTES]
    if bad:
        raise LayoutError(f"{kind} lane addresses must be {width} B aligned and inside 228 KiB of shared memory",
                          bad[:4], f"pass multiples of {width} in [0, {SMEM_BYTES})")
    return np.array(a, dtype=np.int64)


def wavefronts(kind: str, offsets) -> tuple[int, int]:
    """(wavefronts, ideal) of one warp-wide `kind` at the 32 lane byte offsets (ldmatrix: row addresses).

    Raises LayoutError for an unknown kind, a misaligned address or too few lanes.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise LayoutError("unknown shared-memory access kind", kind, "use one of " + ", ".join(KINDS))
    width, per_phase, lanes = KINDS[kind]
    a = _lane_addresses(offsets, kind, lanes, width)
    total = 0
    for p in range(0, lanes, per_phase):
        words = (a[p:p + per_phase, None] + 4 * np.arange(width // 4)[None, :]).ravel() // 4
        banks = {}
        for w in np.unique(words):
            banks[w % 32] = banks.get(w % 32, 0) + 1
        total += max(banks.values())
    return total, lanes // per_phase
