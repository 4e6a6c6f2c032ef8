// lapis microbenchmark, softmax mix version 2: micro_mix_softmax_v1.cu with the kernels' GEMM pair on warpgroup 0:
// per iteration QK (8 x wgmma m64n128k16, A and B from shared memory: Q and K descriptors) and PV (8 x wgmma
// m64n128k16 with A, P, from registers and B, V, MN-major from shared memory: the V descriptor), two commit groups,
// waited; S and O in 64 accumulator registers each. v1's GEMM is QK only (shared-memory operands): v2 asks whether
// the register-sourced PV wgmma is what keeps the kernels' softmax from overlapping. Warpgroup 1 runs `softmax_iters` tiles of the kernels' softmax (micro_softmax_v1.cu's
// loop: softmax_scores, O rescale, pack_p on a 64 x 128 tile; flavour ex2_cond or exp2f). Either count may be 0.
// The CTA's record spans both (a __syncthreads at each end): run with one count 0, then the other, then both; if
// the two overlap fully the both-run takes the longer one's time, if they serialize, the sum.
// The operands are whatever the shared memory holds: the values do not change the time.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_mix_softmax_v3.cu.
#include <cuda_bf16.h>
#include <math_constants.h>

#include "attention_plan.h"
#include "attention_softmax.cuh"
#include "micro_common.cuh"
#include "sm90.cuh"
#include "wgmma_bf16_rs.cuh"
#include "wgmma_bf16_ss.cuh"

namespace {

template <bool EXP2_, bool COND_>
struct Flavor {
  static constexpr bool EXP2 = EXP2_, COND = COND_;
  static constexpr int EMU = 0;
};

constexpr int BN = 128;
namespace P = attention_plan;

__device__ __forceinline__ uint64_t desc(uint64_t fixed, uint32_t smem) { return fixed | ((smem & 0x3FFFFu) >> 4); }

constexpr uint32_t V_OFFSET = P::Q_SLOT_BYTES + P::K128_SLOT_BYTES;  // Q 16 KiB, K 32 KiB, then V 32 KiB

__device__ __forceinline__ void gemm_loop(uint32_t iters, uint32_t region, float (&acc)[BN / 2]) {
  float o[BN / 2];
  uint32_t pa[BN / 16][4];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) o[i] = 0.f;
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = 0x3F803F80u;  // two bf16 1.0
  for (uint32_t it = 0; it < iters; ++it) {
    lapis::fence_registers(acc);
    lapis::fence_registers(o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) lapis::fence_registers_u32(pa[kk]);
    lapis::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
      lapis::wgmma_bf16_ss<BN>(acc, desc(P::Q_DESC, region + P::Q_KSTEP_START[ks]),
                               desc(P::K128_DESC, region + P::Q_SLOT_BYTES + P::K128_KSTEP_START[ks]), 1);
    lapis::wgmma_commit_group();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      lapis::wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], desc(P::V128_DESC, region + V_OFFSET + P::V128_KSTEP_START[kk]),
                                         1);
    lapis::wgmma_commit_group();
    lapis::wgmma_wait_group<0>();
    lapis::fence_registers(acc);
    lapis::fence_registers(o);
  }
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] += o[i];
}

template <class F>
__device__ __forceinline__ void softmax_loop(uint32_t iters, float scale_log2, float (&o)[BN / 2], float (&l)[2]) {
  float s[BN / 2], m[2] = {-CUDART_INF_F, -CUDART_INF_F};
  uint32_t pa[BN / 16][4] = {}, rescales = 0;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = static_cast<float>((threadIdx.x * 64 + i) % 97) * 0.37f - 18.f;
  for (uint32_t it = 0; it < iters; ++it) {
    lapis::fence_registers(s);
    float corr[2];
    if (lapis::softmax_scores<BN, F>(s, m, l, corr, scale_log2, rescales)) lapis::rescale_o(o, corr);
    lapis::pack_p<BN>(pa, s);
    lapis::fence_registers(o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) lapis::fence_registers_u32(pa[kk]);
  }
  l[0] += static_cast<float>(rescales) + m[0];
}

template <class F>
__device__ __forceinline__ void mix(uint32_t tensor_iters, uint32_t softmax_iters, float scale_log2,
                                    uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t region = (micro::smem_addr(smem) + 1023u) & ~1023u;
  float acc[BN / 2], l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  micro::Record rec{};
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.ns0 = micro::globaltimer_ns();
    rec.clk0 = micro::clock_cycles();
  }
  if (threadIdx.x < 128) gemm_loop(tensor_iters, region, acc);
  else softmax_loop<F>(softmax_iters, scale_log2, acc, l);
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.clk1 = micro::clock_cycles();
    rec.ns1 = micro::globaltimer_ns();
    rec.sm = micro::sm_id();
    micro::write_record(out, rec);
  }
  if (sink_flag) {
    float a = l[0] + l[1];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) a += acc[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = a;
  }
}

}  // namespace

// micro_mixsm2_<flavour>(tensor_iters, softmax_iters, scale_log2, sink_flag, out, sink); 256 threads, >= 81 KiB of
// dynamic shared memory (Q 16 KiB, K 32 KiB, V 32 KiB, 1024 B aligned).
#define MICRO_MIXSM2(NAME, F)                                                                                    \
  extern "C" __global__ void __launch_bounds__(256, 1) micro_mixsm2_##NAME(                                    \
      uint32_t tensor_iters, uint32_t softmax_iters, float s, uint32_t f, uint64_t* out, float* sink) {         \
    mix<F>(tensor_iters, softmax_iters, s, f, out, sink);                                                       \
  }

using Exp2f = Flavor<false, false>;  // s1..s5
using Ex2Cond = Flavor<true, true>;  // s7..s9
MICRO_MIXSM2(exp2f, Exp2f)
MICRO_MIXSM2(ex2_cond, Ex2Cond)
