"""The softmax of one 64 x 128 score tile as one thread's instruction stream, and what splitting its row
reductions into independent chains saves, from the SM sub-partition model (lapis.model.smsp).

A consumer thread holds 64 scores of two rows (the wgmma m64 accumulator fragment: score i is in row (i / 2) % 2)
and runs, per K/V tile (lapis/gpu/kernels/attention_softmax.cuh softmax_scores):
- the row max: one FMNMX per score into `chains` partial maxima per row, then a tree of chains - 1 FMNMX;
- the quad max: two SHFL.BFLY and two FMNMX per row, and one FMUL (the max in log2 units);
- per score one FFMA (scale and subtract) and one MUFU.EX2, and one FADD into `chains` partial sums per row
  (then a tree), issued in the order ptxas gives the s9 kernel: each FADD a few scores behind its MUFU;
- 32 F2FP packs of P to bf16 pairs.
chains = 1 is s9's (one running max and one running sum per row: 32-long dependent chains); chains = 4 is what
FA4's sm90 forward does for the max (flash_attn/cute/utils.py fmax_reduce: four partial maxima).

The stream is written here, not read from a compiled kernel's SASS (no cuobjdump on the CPU machines): register
names are placeholders, and the cost is smsp.predict_loop with the softmax warps the SMSP holds at once
(chain_factor).
"""

from __future__ import annotations

from functools import lru_cache

from lapis.errors import LapisError
from lapis.model import sass, smsp

SCORES = 64  # a thread's scores of a 64 x 128 tile
CHAINS = (1, 2, 4)  # the fragment's score order gives four independent chains per row at most


def _max(chains: int) -> list[str]:
    out = []
    for i in range(SCORES):
        r, c = (i // 2) % 2, (i % 2 + 2 * ((i // 4) % 2)) % chains
        out.append(f"FMNMX R{200 + 8 * r + c}, R{200 + 8 * r + c}, R{i}, !PT ;")
    for r in range(2):
        width = chains
        while width > 1:  # a tree over the partial maxima
            width //= 2
            out += [f"FMNMX R{200 + 8 * r + c}, R{200 + 8 * r + c}, R{200 + 8 * r + c + width}, !PT ;"
                    for c in range(width)]
        out += [f"SHFL.BFLY PT, R{220 + r}, R{200 + 8 * r}, 0x1, 0x1f ;",
                f"FMNMX R{200 + 8 * r}, R{200 + 8 * r}, R{220 + r}, !PT ;",
                f"SHFL.BFLY PT, R{220 + r}, R{200 + 8 * r}, 0x2, 0x1f ;",
                f"FMNMX R{200 + 8 * r}, R{200 + 8 * r}, R{220 + r}, !PT ;", f"FMUL R{230 + r}, R{200 + 8 * r}, R150 ;"]
    return out


def _exp_sum(chains: int, lag: int = 4) -> list[str]:
    def fadd(i):
        r, c = (i // 2) % 2, (i % 2 + 2 * ((i // 4) % 2)) % chains
        return f"FADD R{240 + 8 * r + c}, R{240 + 8 * r + c}, R{i} ;"
    out = []
    for i in range(SCORES + 2 * lag):
        if i < SCORES:
            out.append(f"FFMA R{100 + i}, R{i}, R150, -R{230 + (i // 2) % 2} ;")
        if lag <= i < SCORES + lag:
            out.append(f"MUFU.EX2 R{i - lag}, R{100 + i - lag} ;")
        if i >= 2 * lag:
            out.append(fadd(i - 2 * lag))
    for r in range(2):
        width = chains
        while width > 1:
            width //= 2
            out += [f"FADD R{240 + 8 * r + c}, R{240 + 8 * r + c}, R{240 + 8 * r + c + width} ;" for c in range(width)]
    return out + [f"F2FP.BF16.F32.PACK_AB R{160 + k}, R{2 * k + 1}, R{2 * k} ;" for k in range(SCORES // 2)]


def tile_body(chains: int) -> list[sass.Instruction]:
    """One thread's softmax of a 64 x 128 tile with `chains` partial maxima and sums per row (CHAINS).
    Raises LapisError for another count."""
    if chains not in CHAINS:
        raise LapisError("softmax_chains is 1, 2 or 4", repr(chains), f"use one of {CHAINS}")
    return [sass.parse_instruction(t) for t in _max(chains) + _exp_sum(chains)]


@lru_cache(maxsize=16)
def chain_factor(chains: int, warps: int = 2) -> float:
    """SMSP cycles of a tile's softmax with `chains` chains per row over those with one, with `warps` softmax warps
    on the SMSP (smsp.predict_loop; smsp.Constants from the pipes capture). In the ping-pong schedules with intra-
    warpgroup overlap both consumer warpgroups' softmaxes overlap, so each SMSP holds one warp of each (warps = the
    consumer warpgroups): then MUFU's rate bounds the tile with one chain or four, and the factor is about 1. With
    one warp alone the dependent FMNMX and FADD chains set the time and four chains save about 13%. Raises
    LapisError for a chain count outside CHAINS or warps < 1."""
    body = tile_body(chains)
    if warps < 1:
        raise LapisError("softmax warps per SMSP are at least 1", repr(warps), "pass the consumer warpgroups")
    if chains == 1:  # the measured tiles' own stream: nothing to read
        return 1.0
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    return smsp.predict_loop(body, warps, consts).cycles / smsp.predict_loop(tile_body(1), warps, consts).cycles
