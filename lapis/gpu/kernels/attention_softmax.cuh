// The online softmax of the lapis Hopper attention kernels (attention_h200.cu) on the wgmma accumulator fragment,
// in a header of its own so that the softmax microbenchmark (micro_softmax_v1.cu) times the very code the kernels
// run. F: a type with EXP2, EMU, COND (attention_h200.cu's Features). D = 128 (head dim).
#pragma once
#include <math_constants.h>
#include <stdint.h>

#include "attention_sm90.cuh"

namespace lapis {

constexpr int SOFTMAX_HEAD_DIM = 128;
constexpr float RESCALE_THRESHOLD = 8.f;  // s7: log2 units (a factor 256), the simulator's `threshold` default

// 2^x on the FMA pipe (s6's emulated exponentials): 2^floor(x) from the exponent bits, 2^frac(x) from the cubic
// 1 + f (c1 + f (c2 + f c3)), the coefficients of lapis.model.numerics (the B200 write-up's ch. 9). floor(x) comes
// from adding 1.5 x 2^23 rounding down (no conversion instruction: those run at 16/clk/SM); its integer bits,
// shifted into the exponent field, add floor(x) because 0x4B400000 << 23 wraps to 0. x >= -127 (clamped).
__device__ __forceinline__ float exp2_cubic(float x) {
  x = fmaxf(x, -127.f);
  const float t = __fadd_rd(x, 12582912.f), f = x - (t - 12582912.f);
  const float p = fmaf(fmaf(fmaf(0.077f, f, 0.227f), f, 0.695f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Online softmax of one S tile in place (S -> P, fp32); m, l per row half (r0, r0 + 8). corr: the factor O must be
// rescaled by (rescale_o), kept apart so that s5 can rescale after the in-flight PV that writes O has completed.
// s1..s5: p = exp2f((s - m) * scale_log2). s6 (F::EXP2): p = ex2.approx.ftz(s * scale_log2 - m * scale_log2), one
// FFMA and one MUFU op per score, or the cubic on the EMU registers. s7 (F::COND): m moves (and O is rescaled) only
// when the tile's max exceeds it by more than RESCALE_THRESHOLD in log2 units; `rescales` counts row moves past
// tile 0 (this thread's rows; the instrumented build reports them). Returns whether any row of the warp moved.
template <int BN, class F>
__device__ __forceinline__ bool softmax_scores(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&corr)[2],
                                               float scale_log2, uint32_t& rescales) {
  // F::CHAINS partial maxima and sums per row (s11: 4, independent dependency chains; 1: one running value)
  constexpr int C = F::CHAINS;
  float mx[2] = {m[0], m[1]};
  if (C == 1) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
  } else {
    float part[2][C];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) part[r][c] = m[r];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      float& p = part[(i / 2) % 2][(i % 2 + 2 * ((i / 4) % 2)) % C];
      p = fmaxf(p, s[i]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int w = C / 2; w > 0; w /= 2)
#pragma unroll
        for (int c = 0; c < w; ++c) part[r][c] = fmaxf(part[r][c], part[r][c + w]);
      mx[r] = part[r][0];
    }
  }
  bool moved = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = quad_max(mx[r]);
    if (!F::EXP2) {
      corr[r] = exp2f((m[r] - mx[r]) * scale_log2);  // m = -inf on the first tile: corr = 0, O and l are 0 anyway
    } else {
      const bool first = m[r] == -CUDART_INF_F;
      const bool move = !F::COND || first || (mx[r] - m[r]) * scale_log2 > RESCALE_THRESHOLD;
      if (!move) mx[r] = m[r];  // keep the stale max: p <= 2^threshold, fine in fp32 and bf16
      rescales += move && !first;
      moved |= move;
      corr[r] = first ? 0.f : ex2_approx_ftz((m[r] - mx[r]) * scale_log2);
    }
    m[r] = mx[r];
    l[r] *= corr[r];
  }
  if (!F::EXP2) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      s[i] = exp2f((s[i] - mx[(i / 2) % 2]) * scale_log2);
      l[(i / 2) % 2] += s[i];  // this thread's columns only; the quad's partial sums are added in the epilogue
    }
    return true;
  }
  const float neg[2] = {-mx[0] * scale_log2, -mx[1] * scale_log2};
  float sum[2][C];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < C; ++c) sum[r][c] = c == 0 ? l[r] : 0.f;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const float x = fmaf(s[i], scale_log2, neg[(i / 2) % 2]);
    s[i] = (F::EMU && i % 2 == 0 && (i / 4) % (F::EMU ? F::EMU : 1) == 0) ? exp2_cubic(x) : ex2_approx_ftz(x);
    sum[(i / 2) % 2][(i % 2 + 2 * ((i / 4) % 2)) % C] += s[i];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int w = C / 2; w > 0; w /= 2)
#pragma unroll
      for (int c = 0; c < w; ++c) sum[r][c] += sum[r][c + w];
    l[r] = sum[r][0];
  }
  return __any_sync(0xffffffffu, moved);
}

__device__ __forceinline__ void rescale_o(float (&o)[SOFTMAX_HEAD_DIM / 2], const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < SOFTMAX_HEAD_DIM / 2; ++i) o[i] *= corr[(i / 2) % 2];
}

// Causal mask of the diagonal tile (block_m = block_n, the Q tile's own keys): key column > query row -> -inf, by
// select (PV_{j-1} is in flight); only the diagonal turn runs it. Rows of warpgroup wg: 64 wg + the fragment's row.
template <int BN>
__device__ __forceinline__ void mask_diagonal(float (&s)[BN / 2], int wg) {
  const int t = threadIdx.x % 128, row = 64 * wg + 16 * (t / 32) + (t % 32) / 4;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
    s[i] = col > row + 8 * ((i / 2) % 2) ? -CUDART_INF_F : s[i];
  }
}

template <int BN, class F>
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 2], float (&o)[SOFTMAX_HEAD_DIM / 2], float (&m)[2], float (&l)[2],
                                             float scale_log2, uint32_t& rescales) {
  float corr[2];
  if (softmax_scores<BN, F>(s, m, l, corr, scale_log2, rescales)) rescale_o(o, corr);
}

// P as wgmma's register A: k16 block kk = accumulator registers 8kk..8kk+7 (bf16 pairs).
template <int BN>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[BN / 16][4], const float (&s)[BN / 2]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = pack_bf16x2(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

}  // namespace lapis
