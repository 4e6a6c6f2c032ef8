// lapis microbenchmark, softmax mix version 3: the rates at which the kernels' GEMM pair and softmax tile progress
// when warpgroups run them at the same time on one SM (the contention the attention schedules cost,
// lapis/pipeline_sim/contention.py).
//
// v1 and v2 time only the CTA, so a both-run gives one number for two unknowns (how much each side slowed). Here
// warpgroup 0 leads: it runs `lead_iters` units of its role and then raises a shared-memory flag; the other
// warpgroup (the follower) runs its own role for `follow_iters` units (more than it can finish in the leader's
// window) and its thread 0 notes, on the first unit boundary after the flag, how many units it had finished and
// the clock. So over one window every role ran contended throughout, and each gets its own rate:
// leader lead_iters / window, follower units / (its clock at the flag - start).
// Roles (2 bits per warpgroup, warpgroup w at bits 2w): 1 the GEMM pair (v2's: QK, 8 x wgmma m64n128k16 from
// shared memory, and PV, 8 x wgmma with P from registers, two commit groups, waited), 2 a softmax tile (the
// kernels' softmax_scores, O rescale, pack_p on a 64 x 128 tile, as micro_softmax_v1.cu). Followers never stop
// early (wgmma is warpgroup-wide: all four warps must issue the same count), they only note the flag.
// Record per CTA (RECORD_WORDS_V3 words): clk0, leader's end clk, ns0, leader's end ns, smid, then for the follower
// (warpgroup 1): units finished at the flag (0: never saw it), clk at that point.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_mix_softmax_v4.cu.
#include <cuda_bf16.h>
#include <math_constants.h>

#include "attention_plan.h"
#include "attention_softmax.cuh"
#include "micro_common.cuh"
#include "sm90.cuh"
#include "wgmma_bf16_rs.cuh"
#include "wgmma_bf16_ss.cuh"

namespace {

template <bool EXP2_, int EMU_, bool COND_>
struct Flavor {
  static constexpr bool EXP2 = EXP2_, COND = COND_;
  static constexpr int EMU = EMU_;
};

constexpr int BN = 128;
constexpr int RECORD_WORDS_V3 = 7;
constexpr uint32_t ROLE_GEMM = 1, ROLE_SOFTMAX = 2;
namespace P = attention_plan;

__device__ __forceinline__ uint64_t desc(uint64_t fixed, uint32_t smem) { return fixed | ((smem & 0x3FFFFu) >> 4); }

constexpr uint32_t V_OFFSET = P::Q_SLOT_BYTES + P::K128_SLOT_BYTES;  // Q 16 KiB, K 32 KiB, then V 32 KiB

// The follower's note: the first unit boundary after the leader's flag (thread 0 of the warpgroup only).
struct Note {
  uint32_t units = 0;
  uint64_t clk = 0;
  __device__ __forceinline__ void check(const volatile uint32_t* flag, uint32_t done) {
    if (units == 0 && threadIdx.x % 128 == 0 && *flag) {
      units = done;
      clk = micro::clock_cycles();
    }
  }
};

__device__ __forceinline__ void gemm_loop(uint32_t iters, uint32_t region, float (&acc)[BN / 2],
                                          const volatile uint32_t* flag, Note& note) {
  float o[BN / 2];
  uint32_t pa[BN / 16][4];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) o[i] = 0.f;
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = 0x3F803F80u;  // two bf16 1.0
  for (uint32_t it = 0; it < iters; ++it) {
    if (flag) note.check(flag, it);
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
__device__ __forceinline__ void softmax_loop(uint32_t iters, float scale_log2, float (&o)[BN / 2], float (&l)[2],
                                             const volatile uint32_t* flag, Note& note) {
  float s[BN / 2], m[2] = {-CUDART_INF_F, -CUDART_INF_F};
  uint32_t pa[BN / 16][4] = {}, rescales = 0;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = static_cast<float>((threadIdx.x * 64 + i) % 97) * 0.37f - 18.f;
  for (uint32_t it = 0; it < iters; ++it) {
    if (flag) note.check(flag, it);
    lapis::fence_registers(s);
    float corr[2];
    if (lapis::softmax_scores<BN, F>(s, m, l, corr, scale_log2, rescales)) lapis::rescale_o(o, corr);
    lapis::pack_p<BN>(pa, s);
    lapis::fence_registers(o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) lapis::fence_registers_u32(pa[kk]);
  }
  l[0] += static_cast<float>(rescales) + m[0];
  for (int kk = 0; kk < BN / 16; ++kk) l[1] += __uint_as_float(pa[kk][0]);
}

template <class F>
__device__ __forceinline__ void contend(uint32_t roles, uint32_t lead_iters, uint32_t follow_iters, float scale_log2,
                                        uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint32_t flag;
  const uint32_t region = (micro::smem_addr(smem) + 1023u) & ~1023u;
  const uint32_t wg = threadIdx.x / 128, role = (roles >> (2 * wg)) & 3u;
  const bool lead = wg == 0;
  float acc[BN / 2], l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  Note note;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  const uint64_t clk0 = micro::clock_cycles(), ns0 = micro::globaltimer_ns();
  const volatile uint32_t* watch = lead ? nullptr : &flag;
  const uint32_t iters = lead ? lead_iters : follow_iters;
  if (role == ROLE_GEMM) gemm_loop(iters, region, acc, watch, note);
  else if (role == ROLE_SOFTMAX) softmax_loop<F>(iters, scale_log2, acc, l, watch, note);
  if (lead) {
    asm volatile("bar.sync 1, 128;" ::: "memory");  // every warp of the leader is done
    if (threadIdx.x == 0) {
      const uint64_t clk1 = micro::clock_cycles(), ns1 = micro::globaltimer_ns();
      *static_cast<volatile uint32_t*>(&flag) = 1;
      uint64_t* o = out + RECORD_WORDS_V3 * blockIdx.x;
      o[0] = clk0;
      o[1] = clk1;
      o[2] = ns0;
      o[3] = ns1;
      o[4] = micro::sm_id();
    }
  } else if (threadIdx.x % 128 == 0) {
    uint64_t* o = out + RECORD_WORDS_V3 * blockIdx.x + 5 + 2 * (wg - 1);
    o[0] = note.units;
    o[1] = note.clk;
  }
  if (sink_flag) {
    float a = l[0] + l[1];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) a += acc[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = a;
  }
}

}  // namespace

// micro_contend_<flavour>(roles, lead_iters, follow_iters, scale_log2, sink_flag, out, sink); 256 threads (the
// leader and one follower; a third warpgroup does not fit: at 384 threads ptxas serializes the wgmmas, C7512), one
// CTA per SM, >= 81 KiB of dynamic shared memory (Q 16 KiB, K 32 KiB, V 32 KiB, 1024 B aligned).
#define MICRO_CONTEND(NAME, F)                                                                                  \
  extern "C" __global__ void __launch_bounds__(256, 1) micro_contend_##NAME(                                  \
      uint32_t roles, uint32_t lead, uint32_t follow, float s, uint32_t f, uint64_t* out, float* sink) {      \
    contend<F>(roles, lead, follow, s, f, out, sink);                                                         \
  }

using Exp2f = Flavor<false, 0, false>;  // s1..s5
using Ex2 = Flavor<true, 0, false>;     // s6
using Ex2Cond = Flavor<true, 0, true>;  // s7..s9
using Emu8 = Flavor<true, 4, false>;    // s6_emu8
using Emu4 = Flavor<true, 2, false>;    // s6_emu4
MICRO_CONTEND(exp2f, Exp2f)
MICRO_CONTEND(ex2, Ex2)
MICRO_CONTEND(ex2_cond, Ex2Cond)
MICRO_CONTEND(emu8, Emu8)
MICRO_CONTEND(emu4, Emu4)
