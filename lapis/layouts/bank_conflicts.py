"""Shared-memory bank conflicts: wavefronts one warp-wide instruction needs.

Shared memory has 32 banks of 4 bytes (bank = address / 4 mod 32). A warp's request is served in
phases: the 32 lanes at once for 4 B accesses, 16 lanes for 8 B, 8 lanes for 16 B, and one 8x8
matrix (8 lanes' 16 B rows) per phase for ldmatrix/stmatrix (.trans reads the same rows). In a
phase, each bank delivers one 4 B word per wavefront; lanes reading the same word share it
(broadcast). So a phase takes max over banks of (distinct words in that bank) wavefronts, and the
instruction the sum over its phases. The ideal is the number of phases (1, 2 or 4; ldmatrix .xN: N).
Checked against Nsight Compute's l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st} on the H200
(lapis/captures/bank). tensor-layouts' bank_conflicts gives one group's worst way-count, not
wavefronts per phase, so lapis counts them itself.
"""

from __future__ import annotations

import numpy as np

from lapis.errors import LayoutError

# kind -> (bytes each lane accesses, lanes per phase, lanes that supply addresses)
KINDS = {
    "lds32": (4, 32, 32), "sts32": (4, 32, 32), "lds64": (8, 16, 32), "sts64": (8, 16, 32),
    "lds128": (16, 8, 32), "sts128": (16, 8, 32),
    "ldsm_x1": (16, 8, 8), "ldsm_x2": (16, 8, 16), "ldsm_x4": (16, 8, 32),
    "ldsm_x1_trans": (16, 8, 8), "ldsm_x2_trans": (16, 8, 16), "ldsm_x4_trans": (16, 8, 32),
    "stsm_x1": (16, 8, 8), "stsm_x2": (16, 8, 16), "stsm_x4": (16, 8, 32),
    "stsm_x1_trans": (16, 8, 8), "stsm_x2_trans": (16, 8, 16), "stsm_x4_trans": (16, 8, 32),
}


def wavefronts(kind: str, offsets) -> tuple[int, int]:
    """(wavefronts, ideal) of one warp-wide `kind` at the 32 lane byte offsets (ldmatrix: row addresses).

    Raises LayoutError for an unknown kind, a misaligned address or too few lanes.
    """
    if kind not in KINDS:
        raise LayoutError("unknown shared-memory access kind", kind, "use one of " + ", ".join(KINDS))
    width, per_phase, lanes = KINDS[kind]
    a = np.asarray(offsets, dtype=np.int64)
    if a.size < lanes or np.any(a[:lanes] % width):
        raise LayoutError(f"{kind} needs {lanes} lane addresses aligned to {width} B", a[:lanes].tolist(),
                          f"pass {lanes} multiples of {width}")
    a = a[:lanes]
    total = 0
    for p in range(0, lanes, per_phase):
        words = (a[p:p + per_phase, None] + 4 * np.arange(width // 4)[None, :]).ravel() // 4
        banks = {}
        for w in np.unique(words):
            banks[w % 32] = banks.get(w % 32, 0) + 1
        total += max(banks.values())
    return total, lanes // per_phase
