// lapis microbenchmark, softmax version 1: what one K/V tile of the attention kernels' online softmax costs a
// consumer warpgroup (lapis capture micro, campaign softmax; kernels attention_h200.cu s1..s9).
//
// Each warpgroup runs, `iters` times, the kernels' own code on a 64 x 128 score tile held in registers (the
// wgmma accumulator fragment: 64 scores per thread): softmax_scores (row max over the quad, the exponentials, the
// row sums), the O rescale when a row max moved, and pack_p (P to bf16 for the PV wgmma), from
// attention_softmax.cuh. Nothing else: no wgmma, no barrier, no instruction to make the tile: each iteration
// takes the previous one's P (fp32, in place, fenced like a wgmma result) as its scores, so the row max stays put
// and the conditional flavour never rescales, as on normal inputs (the others rescale O every tile, as s1..s6 do).
// One CTA per SM (the host's dynamic smem request), 1 or 2 consumer warpgroups per CTA (128 or 256 threads): with
// 2 the warpgroups' warps share the SM sub-partitions' issue slots and pipes, as s3..s9's two consumers do.
// Flavours (attention_h200.cu Features): exp2f (s1..s5: exp2f, scale applied per score), ex2 (s6: one FFMA and
// ex2.approx.ftz), ex2_cond (s7..s9: + conditional rescale), emu8 / emu4 (s6 with 1/8 and 1/4 of the exponentials
// on the FMA pipe). Record: micro::Record per CTA (rate kind: work = tiles of all its warpgroups).
//
// Versioned: never edit once a capture made with it is committed; a change means micro_softmax_v2.cu.
#include <cuda_bf16.h>
#include <math_constants.h>

#include "attention_softmax.cuh"
#include "micro_common.cuh"
#include "sm90.cuh"

namespace {

template <bool EXP2_, int EMU_, bool COND_>
struct Flavor {
  static constexpr bool EXP2 = EXP2_, COND = COND_;
  static constexpr int EMU = EMU_;
};

constexpr int BN = 128;
using Exp2f = Flavor<false, 0, false>;  // s1..s5
using Ex2 = Flavor<true, 0, false>;     // s6
using Ex2Cond = Flavor<true, 0, true>;  // s7..s9
using Emu8 = Flavor<true, 4, false>;    // s6_emu8
using Emu4 = Flavor<true, 2, false>;    // s6_emu4

template <class F>
__device__ __forceinline__ void softmax_loop(uint32_t iters, float scale_log2, uint32_t sink_flag, uint64_t* out,
                                             float* sink) {
  float o[lapis::SOFTMAX_HEAD_DIM / 2], s[BN / 2], m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
  uint32_t pa[BN / 16][4] = {}, rescales = 0;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    o[i] = 0.f;
    s[i] = static_cast<float>((threadIdx.x * 64 + i) % 97) * 0.37f - 18.f;  // first raw scores in [-18, 18)
  }
  micro::Record rec{};
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.ns0 = micro::globaltimer_ns();
    rec.clk0 = micro::clock_cycles();
  }
  for (uint32_t it = 0; it < iters; ++it) {
    lapis::fence_registers(s);  // the tile "arrives" here, as from wgmma.wait_group
    float corr[2];
    if (lapis::softmax_scores<BN, F>(s, m, l, corr, scale_log2, rescales)) lapis::rescale_o(o, corr);
    lapis::pack_p<BN>(pa, s);
    lapis::fence_registers(o);  // O and P are read by the next wgmma in the kernels: keep them
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) lapis::fence_registers_u32(pa[kk]);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.clk1 = micro::clock_cycles();
    rec.ns1 = micro::globaltimer_ns();
    rec.sm = micro::sm_id();
    micro::write_record(out, rec);
  }
  if (sink_flag) {
    float acc = l[0] + l[1] + m[0] + static_cast<float>(rescales);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc += o[i] + __uint_as_float(pa[i / 8][(i / 2) % 4]);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  }
}

}  // namespace

// micro_softmax_<flavour>_wg<1|2>(iters, scale_log2, sink_flag, out, sink); sink: one float per thread.
#define MICRO_SOFTMAX(NAME, F)                                                                          \
  extern "C" __global__ void __launch_bounds__(128, 1)                                                        \
      micro_softmax_##NAME##_wg1(uint32_t iters, float s, uint32_t f, uint64_t* out, float* sink) {             \
    softmax_loop<F>(iters, s, f, out, sink);                                                           \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256, 1)                                                        \
      micro_softmax_##NAME##_wg2(uint32_t iters, float s, uint32_t f, uint64_t* out, float* sink) {             \
    softmax_loop<F>(iters, s, f, out, sink);                                                           \
  }

MICRO_SOFTMAX(exp2f, Exp2f)
MICRO_SOFTMAX(ex2, Ex2)
MICRO_SOFTMAX(ex2_cond, Ex2Cond)
MICRO_SOFTMAX(emu8, Emu8)
MICRO_SOFTMAX(emu4, Emu4)
