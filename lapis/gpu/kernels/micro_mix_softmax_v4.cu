// lapis microbenchmark, softmax mix version 4: micro_mix_softmax_v3.cu's contend protocol on three warpgroups, so
// that a softmax tile runs beside another warpgroup's softmax and a third warpgroup's wgmma in flight at once (the
// state of an attention kernel's two consumer warpgroups while one's GEMMs run; v3 has two warpgroups only).
//
// Warpgroup 0 leads: it runs `lead_iters` units of its role and then raises a shared-memory flag; warpgroups 1 and
// 2 follow, each running its role for `follow_iters` units and noting (thread 0 of the warpgroup), on its first
// unit boundary after the flag, how many units it had finished and the clock. Roles (2 bits per warpgroup,
// warpgroup w at bits 2w): 0 idle, 1 a QK GEMM unit (8 x wgmma m64n128k16 with A and B from shared memory, one
// commit group, waited: 64 accumulator registers, where v3's GEMM pair holds 160), 2 a softmax tile (v3's: the
// kernels' softmax_scores, O rescale, pack_p on a 64 x 128 tile).
// Registers: 384 threads at most 168 a thread (__launch_bounds__(384, 1)); ptxas -v: 160-162, no spills, and no
// wgmma serialized (v3's GEMM pair, S, O and P in registers, does not fit beside two softmax warpgroups: C7512).
// Record per CTA (RECORD_WORDS_V4 words): clk0, leader's end clk, ns0, leader's end ns, smid, then for warpgroups 1
// and 2: units finished at the flag (0: never saw it, or idle), clk at that point.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_mix_softmax_v5.cu.
#include <cuda_bf16.h>
#include <math_constants.h>

#include "attention_plan.h"
#include "attention_softmax.cuh"
#include "micro_common.cuh"
#include "sm90.cuh"
#include "wgmma_bf16_ss.cuh"

namespace {

template <bool EXP2_, int EMU_, bool COND_>
struct Flavor {
  static constexpr bool EXP2 = EXP2_, COND = COND_;
  static constexpr int EMU = EMU_;
};

constexpr int BN = 128;
constexpr int RECORD_WORDS_V4 = 9;
constexpr uint32_t ROLE_GEMM = 1, ROLE_SOFTMAX = 2;
namespace P = attention_plan;

__device__ __forceinline__ uint64_t desc(uint64_t fixed, uint32_t smem) { return fixed | ((smem & 0x3FFFFu) >> 4); }

// A follower's note: the first unit boundary after the leader's flag (thread 0 of the warpgroup only).
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
  for (uint32_t it = 0; it < iters; ++it) {
    if (flag) note.check(flag, it);
    lapis::fence_registers(acc);
    lapis::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
      lapis::wgmma_bf16_ss<BN>(acc, desc(P::Q_DESC, region + P::Q_KSTEP_START[ks]),
                               desc(P::K128_DESC, region + P::Q_SLOT_BYTES + P::K128_KSTEP_START[ks]), 1);
    lapis::wgmma_commit_group();
    lapis::wgmma_wait_group<0>();
    lapis::fence_registers(acc);
  }
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
      uint64_t* o = out + RECORD_WORDS_V4 * blockIdx.x;
      o[0] = clk0;
      o[1] = clk1;
      o[2] = ns0;
      o[3] = ns1;
      o[4] = micro::sm_id();
    }
  } else if (threadIdx.x % 128 == 0) {
    uint64_t* o = out + RECORD_WORDS_V4 * blockIdx.x + 5 + 2 * (wg - 1);
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

// micro_contend3_<flavour>(roles, lead_iters, follow_iters, scale_log2, sink_flag, out, sink); 384 threads, one CTA
// per SM, >= 49 KiB of dynamic shared memory (Q 16 KiB, K 32 KiB, 1024 B aligned).
#define MICRO_CONTEND3(NAME, F)                                                                                 \
  extern "C" __global__ void __launch_bounds__(384, 1) micro_contend3_##NAME(                                 \
      uint32_t roles, uint32_t lead, uint32_t follow, float s, uint32_t f, uint64_t* out, float* sink) {      \
    contend<F>(roles, lead, follow, s, f, out, sink);                                                         \
  }

using Exp2f = Flavor<false, 0, false>;  // s1..s5
using Ex2 = Flavor<true, 0, false>;     // s6
using Ex2Cond = Flavor<true, 0, true>;  // s7..s9
using Emu8 = Flavor<true, 4, false>;    // s6_emu8
using Emu4 = Flavor<true, 2, false>;    // s6_emu4
MICRO_CONTEND3(exp2f, Exp2f)
MICRO_CONTEND3(ex2, Ex2)
MICRO_CONTEND3(ex2_cond, Ex2Cond)
MICRO_CONTEND3(emu8, Emu8)
MICRO_CONTEND3(emu4, Emu4)
