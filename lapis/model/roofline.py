"""Analytic rooflines: the fastest a shape can run on a profile, and which unit bounds it.

FLOPs: GEMM 2·M·N·K; attention forward 4·B·H·L²·D (halved when causal, FA benchmarks' formula).
Bytes: each input read once and each output written once from/to HBM (bf16, 2 B). Times in ns.
The simulator never beats this (a property test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.model.profile import Profile


@dataclass(frozen=True)
class Roofline:
    flops: float
    hbm_bytes: float
    tensor_ns: float
    hbm_ns: float

    @property
    def ns(self) -> float:
        return max(self.tensor_ns, self.hbm_ns)

    @property
    def bound_by(self) -> str:
        return "tensor" if self.tensor_ns >= self.hbm_ns else "hbm"

    def tflops(self) -> float:
        return self.flops / self.ns / 1e3  # FLOP/ns = GFLOP/s; /1e3 -> TFLOP/s


def _roofline(p: Profile, flops: float, nbytes: float) -> Roofline:
    tensor_rate = p["sm_count"] * p.per_ns("tensor_flop_per_clk_sm")  # FLOP/ns, whole GPU
    return Roofline(flops, nbytes, flops / tensor_rate, nbytes / p.hbm_bytes_per_ns)


def gemm(p: Profile, m: int, n: int, k: int, elem_bytes: int = 2) -> Roofline:
    return _roofline(p, 2.0 * m * n * k, elem_bytes * (m * k + n * k + m * n))


def attention(p: Profile, b: int, h: int, seq: int, d: int, causal: bool = False, elem_bytes: int = 2) -> Roofline:
    flops = 4.0 * b * h * seq * seq * d / (2 if causal else 1)
    return _roofline(p, flops, elem_bytes * 4 * b * h * seq * d)  # Q, K, V in; O out
