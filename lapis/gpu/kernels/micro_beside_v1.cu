// lapis microbenchmark: one instruction class beside wgmma in flight. Each SM sub-partition (SMSP) holds one warp of
// each warpgroup: warpgroup 0 issues a stream of one SASS class (as micro_pipes.cu: FFMA, FFMA with three register sources, FMNMX, MUFU.EX2, F2FP,
// SHFL.BFLY, LOP3) while warpgroup 1 keeps wgmma groups in flight on the tensor pipe, so every class instruction
// shares its SMSP's issue slot and register file with a warp whose wgmma reads (RS: A) and accumulates (C/D) in
// registers. The rates each side keeps, against the same side alone, are the constants lapis.model.smsp reads for
// "beside wgmma" (the contend microbenchmark's softmax and GEMM pair then become predictions).
//
// The leader/follower protocol of micro_mix_softmax_v3.cu: warpgroup 0 leads (`lead_iters` units of its role, then a
// shared-memory flag), warpgroup 1 follows (`follow_iters` units, more than fit the leader's window) and its thread
// 0 notes the units finished and the clock at the first unit boundary after the flag. Record per CTA (7 words, as
// v3): clk0, leader's end clk, ns0, leader's end ns, smid, follower units at the flag (0: never saw it), its clk.
//
// roles (u32): bits 0-1 warpgroup 0's role, bits 2-3 warpgroup 1's (0 idle, 1 wgmma, 2 the class stream), bits 4-5
// the wgmma mode:
//   0 ss:   unit = 8 x wgmma m64n128k16 from shared memory (QK's operands), one commit group, wait_group 1 (the
//           next unit issues while this one runs: the pipe stays fed);
//   1 rs:   unit = 8 x wgmma m64n128k16 with A from registers (PV's form), one commit group, wait_group 1;
//   2 pair: unit = the contend GEMM pair (8 ss, commit, 8 rs, commit, wait_group 0), as micro_mix_softmax_v3.cu.
// A class unit is UNROLL x CHAINS independent instructions per thread (one warp-instruction each per warp).
//
// Versioned: never edit once a capture made with it is committed; a change means micro_beside_v2.cu.
#include <cuda_bf16.h>
#include <stdint.h>

#include "attention_plan.h"
#include "micro_common.cuh"
#include "sm90.cuh"
#include "wgmma_bf16_rs.cuh"
#include "wgmma_bf16_ss.cuh"

namespace {

constexpr int UNROLL = 8, CHAINS = 8;
constexpr int RECORD_WORDS = 7;
constexpr uint32_t ROLE_WGMMA = 1, ROLE_CLASS = 2;
constexpr uint32_t MODE_SS = 0, MODE_RS = 1;  // any other mode: the pair
namespace P = attention_plan;

__device__ __forceinline__ uint64_t desc(uint64_t fixed, uint32_t smem) { return fixed | ((smem & 0x3FFFFu) >> 4); }

constexpr uint32_t V_OFFSET = P::Q_SLOT_BYTES + P::K128_SLOT_BYTES;  // Q 16 KiB, K 32 KiB, then V 32 KiB

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

// One step of each class on chain c's value x, unroll step u (salt is 0 at run time: the compiler cannot fold the
// operands).
struct Ffma {
  __device__ static void step(float& x, uint32_t, int, int) {
    asm volatile("fma.rn.f32 %0, %0, 0f3F7FF972, 0f3A83126F;" : "+f"(x));
  }
};
// three register sources, each chain its own: no operand-reuse cache hit, three register-file reads per instruction.
struct Ffma3 {
  __device__ static void step(float& x, uint32_t salt, int, int c) {
    const float y = __uint_as_float(0x3F7FF972u + salt + c), z = __uint_as_float(0x3A83126Fu + salt + 2 * c);
    asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(y), "f"(z));
  }
};
struct Fmnmx {
  __device__ static void step(float& x, uint32_t salt, int u, int) {
    asm volatile("max.f32 %0, %0, %1;" : "+f"(x) : "f"(__uint_as_float(0x3F800000u + salt + u)));
  }
};
struct Ex2 {
  __device__ static void step(float& x, uint32_t, int, int) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x)); }
};
struct F2fp {
  __device__ static void step(float& x, uint32_t, int, int) {
    asm volatile("{ .reg .b32 w; cvt.rn.bf16x2.f32 w, %0, %0; mov.b32 %0, w; }" : "+f"(x));
  }
};
struct Shfl {
  __device__ static void step(float& x, uint32_t, int, int) {
    asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;" : "+f"(x));
  }
};
struct Lop3 {
  __device__ static void step(float& x, uint32_t salt, int u, int) {
    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+f"(x) : "r"(salt + u), "r"(salt ^ (u * 3)));
  }
};

// WATCH: a follower's loop notes the flag at each unit boundary; a leader's loop has no check (its branch and
// convergence barrier would be part of every unit).
template <class C, bool WATCH>
__device__ __forceinline__ float class_loop(uint32_t iters, uint32_t salt, const volatile uint32_t* flag,
                                            Note& note) {
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = -0.25f - threadIdx.x * 1e-5f - c * 0.01f;
  for (uint32_t it = 0; it < iters; ++it) {
    if constexpr (WATCH) note.check(flag, it);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int c = 0; c < CHAINS; ++c) C::step(x[c], salt, u, c);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += x[c];
  return s;
}

__device__ __forceinline__ void issue_ss(float (&acc)[64], uint32_t region) {
#pragma unroll
  for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
    lapis::wgmma_bf16_ss<128>(acc, desc(P::Q_DESC, region + P::Q_KSTEP_START[ks]),
                              desc(P::K128_DESC, region + P::Q_SLOT_BYTES + P::K128_KSTEP_START[ks]), 1);
  lapis::wgmma_commit_group();
}

__device__ __forceinline__ void issue_rs(float (&o)[64], const uint32_t (&pa)[8][4], uint32_t region) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
    lapis::wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], desc(P::V128_DESC, region + V_OFFSET + P::V128_KSTEP_START[kk]),
                                       1);
  lapis::wgmma_commit_group();
}

__device__ __forceinline__ float wgmma_loop(uint32_t mode, uint32_t iters, uint32_t region,
                                            const volatile uint32_t* flag, Note& note) {
  float acc[64], o[64];
  uint32_t pa[8][4];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = o[i] = 0.f;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = 0x3F803F80u;  // two bf16 1.0
  lapis::fence_registers(acc);
  lapis::fence_registers(o);
  for (uint32_t it = 0; it < iters; ++it) {
    if (flag) note.check(flag, it);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(pa[kk][r]));  // opaque: kept in registers, not constants
    lapis::wgmma_fence();
    if (mode == MODE_SS) {
      issue_ss(acc, region);
      lapis::wgmma_wait_group<1>();
    } else if (mode == MODE_RS) {
      issue_rs(o, pa, region);
      lapis::wgmma_wait_group<1>();
    } else {  // the pair
      issue_ss(acc, region);
      issue_rs(o, pa, region);
      lapis::wgmma_wait_group<0>();
    }
  }
  lapis::wgmma_wait_group<0>();
  lapis::fence_registers(acc);
  lapis::fence_registers(o);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i] + o[i];
  return s;
}

template <class C>
__device__ __forceinline__ void beside(uint32_t roles, uint32_t lead_iters, uint32_t follow_iters,
                                       uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint32_t flag;
  const uint32_t region = (micro::smem_addr(smem) + 1023u) & ~1023u;
  const uint32_t wg = threadIdx.x / 128, role = (roles >> (2 * wg)) & 3u, mode = (roles >> 4) & 3u;
  const bool lead = wg == 0;
  Note note;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  const uint64_t clk0 = micro::clock_cycles(), ns0 = micro::globaltimer_ns();
  const volatile uint32_t* watch = lead ? nullptr : &flag;
  const uint32_t iters = lead ? lead_iters : follow_iters;
  float s = 0.f;
  if (role == ROLE_WGMMA) s = wgmma_loop(mode, iters, region, watch, note);
  else if (role == ROLE_CLASS)
    s = lead ? class_loop<C, false>(iters, sink_flag, watch, note) : class_loop<C, true>(iters, sink_flag, watch, note);
  if (lead) {
    asm volatile("bar.sync 1, 128;" ::: "memory");  // every warp of the leader is done
    if (threadIdx.x == 0) {
      const uint64_t clk1 = micro::clock_cycles(), ns1 = micro::globaltimer_ns();
      *static_cast<volatile uint32_t*>(&flag) = 1;
      uint64_t* o = out + RECORD_WORDS * blockIdx.x;
      o[0] = clk0;
      o[1] = clk1;
      o[2] = ns0;
      o[3] = ns1;
      o[4] = micro::sm_id();
    }
  } else if (threadIdx.x % 128 == 0) {
    uint64_t* o = out + RECORD_WORDS * blockIdx.x + 5;
    o[0] = note.units;
    o[1] = note.clk;
  }
  if (sink_flag) sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

}  // namespace

// micro_beside_<class>(roles, lead_iters, follow_iters, unused, sink_flag, out, sink): 256 threads, one CTA per SM,
// >= 81 KiB of dynamic shared memory (Q 16 KiB, K 32 KiB, V 32 KiB, 1024 B aligned; contents do not matter). The
// float argument keeps micro_mix_softmax_v3.cu's launch signature (capture_micro.measure_contend) and is unused.
#define MICRO_BESIDE(NAME, C)                                                                                   \
  extern "C" __global__ void __launch_bounds__(256, 1) micro_beside_##NAME(                                   \
      uint32_t roles, uint32_t lead, uint32_t follow, float, uint32_t f, uint64_t* out, float* sink) {        \
    beside<C>(roles, lead, follow, f, out, sink);                                                             \
  }

MICRO_BESIDE(ffma, Ffma)
MICRO_BESIDE(ffma3, Ffma3)
MICRO_BESIDE(fmnmx, Fmnmx)
MICRO_BESIDE(ex2, Ex2)
MICRO_BESIDE(f2fp, F2fp)
MICRO_BESIDE(shfl, Shfl)
MICRO_BESIDE(lop3, Lop3)
