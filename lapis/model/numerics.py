"""Attention numerics: a float64 reference and the kernel-faithful online softmax the seed kernels run.

`flash_forward` processes K/V in tiles of `block_n` like the kernels, in the kernels' precisions: bf16 inputs,
fp32 scores and accumulators, P rounded to bf16 for the PV product. Options follow the B200 write-up
(b200-attention-kernel-progression, not in this repository):
- exp2 with the softmax scale folded into log2 units (ch. 8), flush-to-zero of denormal results (ch. 8);
- a fraction `emulate_frac` of the columns exponentiated in software with a cubic (ch. 9), chosen by column
  position only: 2^x = 2^floor(x) * (1 + c1 f + c2 f^2 + c3 f^3), c = 0.695, 0.227, 0.077 (coefficients from ch. 9);
- skip the O rescale unless a row's tile maximum exceeds the kept maximum by more than `threshold` (log2 units,
  ch. 11).
It reports the error against the float64 reference and how often O was rescaled: the simulator's correction
work depends on that frequency.
"""

from __future__ import annotations

import numpy as np

from lapis.errors import ScheduleError

LOG2E = 1.4426950408889634
C1, C2, C3 = 0.695, 0.227, 0.077  # the write-up's cubic for 2^f on [0, 1) (ch. 9)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 (nearest, ties to even), returned as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def reference(q, k, v, scale: float | None = None) -> np.ndarray:
    """softmax(q k^T * scale) v in float64; q (rows, d), k and v (cols, d)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[1]) if scale is None else scale
    s = q @ k.T * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def software_exp2(x: np.ndarray) -> np.ndarray:
    """2^x in float32 from the cubic: exponent bits carry 2^floor(x), three FMAs approximate 2^frac."""
    x = np.maximum(np.asarray(x, np.float32), np.float32(-127.0))
    i = np.floor(x)
    f = (x - i).astype(np.float32)
    poly = np.float32(C3)
    for c in (C2, C1, 1.0):
        poly = (poly * f + np.float32(c)).astype(np.float32)
    bits = poly.view(np.int32) + (i.astype(np.int32) << 23)
    return bits.view(np.float32)


def _exp2(x: np.ndarray, emulate_cols: np.ndarray, ftz: bool) -> np.ndarray:
    out = np.exp2(x.astype(np.float32)).astype(np.float32)
    if emulate_cols.any():
        out[:, emulate_cols] = software_exp2(x[:, emulate_cols])
    if ftz:
        out[np.abs(out) < np.float32(2.0 ** -126)] = 0
    return out


def _check_flash_args(q_shape, k_shape, block_n, emulate_frac, threshold) -> None:
    """ScheduleError naming the rule, the value and the fix (flash_forward's inputs)."""
    if len(q_shape) != 2 or len(k_shape) != 2 or q_shape[0] < 1 or q_shape[1] < 1 or q_shape[1] != k_shape[1]:
        raise ScheduleError("q is (rows >= 1, d >= 1) and k (cols, d)", f"q {q_shape}, k {k_shape}",
                            "pass 2-D arrays with the same head dim")
    if not isinstance(block_n, int) or block_n < 1 or k_shape[0] < block_n or k_shape[0] % block_n:
        raise ScheduleError("the keys are whole K/V tiles (cols a positive multiple of block_n, as the kernels need)",
                            f"cols = {k_shape[0]}, block_n = {block_n!r}", "pad the keys or pick a block_n that "
                            "divides them")
    if not (emulate_frac == 0 or (0 < emulate_frac <= 1 and abs(1 / emulate_frac - round(1 / emulate_frac)) < 1e-9)):
        raise ScheduleError("emulate_frac is 0 or 1/n (every n-th column in software)", repr(emulate_frac),
                            "use 0, 1/8, 1/4, 1/2 or 1")
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 <= threshold < 64):
        raise ScheduleError("threshold is None or a number of log2 units in [0, 64) (past ~127 fp32 exp2 overflows)",
                            repr(threshold), "use 8, the kernels' default")


def flash_forward(q, k, v, *, block_n: int = 128, scale: float | None = None, ftz: bool = True,
                  emulate_frac: float = 0.0, threshold: float | None = None, p_bf16: bool = True):
    """Online-softmax attention as the kernels compute it. Returns (out, stats).

    q (rows, d), k and v (cols, d), any float; cols a multiple of block_n. stats: rescales (row-tile pairs
    where O was rescaled, first tile excluded), rescale_frequency, tiles.
    """
    _check_flash_args(np.shape(q), np.shape(k), block_n, emulate_frac, threshold)
    q, k, v = (to_bf16(np.asarray(a, np.float32)) for a in (q, k, v))
    rows, d = q.shape
    scale = 1 / np.sqrt(d) if scale is None else scale
    scale2 = np.float32(scale * LOG2E)  # folded into log2 units once, outside the loop (ch. 8)
    m = np.full(rows, -np.inf, np.float32)
    l = np.zeros(rows, np.float32)
    o = np.zeros((rows, d), np.float32)
    stride = round(1 / emulate_frac) if emulate_frac else 0
    rescales, tiles = 0, k.shape[0] // block_n
    for t in range(tiles):
        kt, vt = k[t * block_n:(t + 1) * block_n], v[t * block_n:(t + 1) * block_n]
        s2 = (q @ kt.T).astype(np.float32) * scale2
        tile_max = s2.max(axis=1)
        if threshold is None:
            move = tile_max > m
        else:
            move = (tile_max - m > threshold) | ~np.isfinite(m)
        new_m = np.where(move, np.maximum(m, tile_max), m)
        if t:
            rescales += int(np.count_nonzero(move))
        factor = np.where(np.isfinite(m), np.exp2(m - new_m), 0).astype(np.float32)
        o *= factor[:, None]
        l *= factor
        m = new_m
        cols = np.zeros(block_n, bool)
        if stride:
            cols[::stride] = True  # the software path takes columns by position only (ch. 9)
        p = _exp2(s2 - m[:, None], cols, ftz)
        l += p.sum(axis=1, dtype=np.float32)
        o += (to_bf16(p) if p_bf16 else p) @ vt
    pairs = rows * max(tiles - 1, 1)
    return o / l[:, None], dict(rescales=rescales, rescale_frequency=rescales / pairs, tiles=tiles)


def relative_error(out, ref) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def attention_inputs(kind: str, rows: int, cols: int, d: int = 128, seed: int = 0):
    """(q (rows, d), k (cols, d), v (cols, d)) float64 drawn as lapis.gpu.bench_attention.make_inputs draws them on
    the GPU: `normal` N(0, 1); `heavy` q, k = 3 x Student-t(3) (z / sqrt(chi2_3 / 3)), v N(0, 1). Raises ScheduleError
    for another kind."""
    if kind not in ("normal", "heavy"):
        raise ScheduleError("inputs are 'normal' or 'heavy'", repr(kind), "use kind='normal' or kind='heavy'")
    if min(rows, cols, d) < 1:
        raise ScheduleError("rows, cols and d are at least 1", f"{rows}, {cols}, {d}", "pass positive sizes")
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((rows, d)), rng.standard_normal((cols, d)), rng.standard_normal((cols, d))
    if kind == "heavy":
        q, k = (3 * x / np.sqrt((rng.standard_normal(x.shape + (3,)) ** 2).sum(-1) / 3) for x in (q, k))
    return q, k, v


def rescale_frequency_of(kind: str, seq: int, *, block_n: int = 128, threshold: float = 8.0, rows: int = 128,
                         seeds: int = 2) -> float:
    """How often a row's max moves by more than `threshold` (log2 units) past the first K/V tile, per row and tile,
    for `rows` query rows against `seq` keys of `kind` inputs (mean over `seeds` draws): the frequency the s7 kernel
    counts in its instrumented build (bench_attention's `rescales`)."""
    if seeds < 1:
        raise ScheduleError("seeds is the number of draws, at least 1", repr(seeds), "seeds=2")
    runs = [flash_forward(*attention_inputs(kind, rows, seq, seed=s), block_n=block_n, threshold=threshold)[1]
            for s in range(seeds)]
    return float(np.mean([r["rescale_frequency"] for r in runs]))
