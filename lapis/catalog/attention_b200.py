"""Which loop of the B200 seed's compiled instruction mix costs each chapter of
lapis.pipeline_sim.schedules.attention_b200: the one place a chapter is tied to a capture entry.

CAPTURE is the seed_mix manifest (lapis/data/captures/seeds/b200-481f9aa/manifest.json: the 18 kernels of
IaroslavElistratov/b200-attention compiled for sm_100a, per kernel and loop the per-pipe instruction counts and the
RAW chain). MIX[chapter] names:
- kernel: the manifest's kernel (chapter n of the write-up is kernel k<n>; m1..m4 are k15..k18);
- rows: (role, depth) of the loop the row warps run once per K/V tile (k01-k03: the serial CTA's loop, which also
  issues the TMA copies and MMAs; k04 on: the softmax warpgroup's; from k14 the inner loop, depth 1, under the
  work-item loop);
- correction: (role, depth) of the correction warpgroup's per-K/V-tile loop (k12 on), else None;
- correction_q_tiles: the Q tiles one correction iteration rescales (both Q tiles' O: 256 FMUL, 32 LDTM.x8);
- warps: the role's warps per SMSP (a role is one warpgroup: 4 warps, one on each SMSP).
"""

from __future__ import annotations

CAPTURE = ("seeds", "b200-481f9aa", "manifest.json")  # under lapis/data/captures
# what the seed kernels were compiled for (their headers): a run with other values keeps the mechanism costs
COMPILED = dict(block_n=128, head_dim=128, sw_exp_per16=4)


def _entry(n: int, rows: tuple, correction: tuple | None) -> dict:
    return dict(kernel=f"k{n:02d}", rows=rows, correction=correction, correction_q_tiles=2 if correction else 0,
                warps=1)


_NAMES = ("b200-k01-baseline", "b200-k02-p-in-tmem", "b200-k03-swizzle", "b200-k04-warp-specialization",
          "b200-k05-two-q-tiles", "b200-k06-load-pipeline", "b200-k07-compute-pipeline", "b200-k08-hw-approx",
          "b200-k09-sw-exp2", "b200-k10-register-caching", "b200-k11-skip-rescale", "b200-k12-split-correction",
          "b200-k13-early-pv", "b200-k14-persistent", "b200-m1-deferred-score-load", "b200-m2-split-rowsum",
          "b200-m3-phase-bitmasks", "b200-m4-tma-l2-promotion")


def _rows(n: int) -> tuple:
    return ("serial", 0) if n <= 3 else ("softmax", 1 if n >= 14 else 0)


def _correction(n: int) -> tuple | None:
    return None if n < 12 else ("correction", 1 if n >= 14 else 0)


MIX = {name: _entry(n, _rows(n), _correction(n)) for n, name in enumerate(_NAMES, start=1)}
