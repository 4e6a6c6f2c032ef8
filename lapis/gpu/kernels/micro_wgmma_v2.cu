// lapis microbenchmark: the completion time of one warpgroup's chain of wgmmas into one accumulator. As
// micro_wgmma.cu's latency kernels (whose source this file includes: operands, fill, descriptors, the wgmma
// helpers and signature), but each iteration issues K m64n128k16 wgmmas back to back before its commit and
// wait_group 0, so the cycles against K separate the time a group takes per wgmma from its fixed start and tail.
// "pair" issues the attention kernels' GEMM pair: K wgmmas from shared memory into one accumulator (QK), commit,
// K with A from registers into another (PV), commit, then wait_group 0 (micro_mix_softmax_v3.cu's GEMM unit without
// its loop's other instructions).
//
// Kernels micro_chain_n128_<ss|rs|pair>_k<K>(iters, desc_a, desc_b, a_bits, scale_d, sink_flag, out, sink): one
// warpgroup (128 threads, one CTA); out[0] = the sum of the iterations' clock64 cycles (wgmma.fence through
// wait_group 0), out[1] = the smallest.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_wgmma_v3.cu.
#include "micro_wgmma.cu"

namespace {

template <int K, int SRC>  // SRC 0: K ss, 1: K rs, 2: K ss then K rs (two groups)
__device__ __forceinline__ void chain_body(uint32_t iters, uint64_t desc_a, uint64_t desc_b, uint32_t a_bits,
                                           uint32_t scale_d, uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint32_t raw = micro::smem_addr(smem), region = (raw + 1023u) & ~1023u;
  fill_operands(smem + (region - raw), A_BYTES + 128 * 128);
  uint64_t a = desc_a + (region >> 4);
  uint64_t db = desc_b + (region >> 4);
  uint32_t ar[4] = {a_bits, a_bits ^ 0x00010001u, a_bits ^ (threadIdx.x & 0x3Fu), a_bits ^ 0x00020002u};
  float d[64], e[64];
#pragma unroll
  for (int r = 0; r < 64; ++r) {
    d[r] = 0.f;
    e[r] = 0.f;
    asm volatile("" : "+f"(d[r]), "+f"(e[r])::"memory");  // the zeros are written before the wgmma.fence below
  }
  uint64_t total = 0, least = ~0ull;
  for (uint32_t i = 0; i < iters; ++i) {
    uint64_t c0 = micro::clock_cycles();
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (SRC == 1) wgmma_n128_rs(d, ar, db, scale_d);
      else wgmma_n128_ss(d, a, db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    if (SRC == 2) {
#pragma unroll
      for (int k = 0; k < K; ++k) wgmma_n128_rs(e, ar, db, scale_d);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    uint64_t c = micro::clock_cycles() - c0;
    total += c;
    least = c < least ? c : least;
  }
  if (threadIdx.x == 0) {
    out[0] = total;
    out[1] = least;
  }
  if (sink_flag) {
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < 64; ++r) s += d[r] + e[r];
    sink[threadIdx.x] = s;
  }
}

}  // namespace

#define MICRO_CHAIN(NAME, K, SRC)                                                                               \
  extern "C" __global__ void __launch_bounds__(128, 1) micro_chain_n128_##NAME##_k##K(                         \
      uint32_t iters, uint64_t desc_a, uint64_t desc_b, uint32_t a_bits, uint32_t scale_d, uint32_t sink_flag, \
      uint64_t* out, float* sink) {                                                                            \
    chain_body<K, SRC>(iters, desc_a, desc_b, a_bits, scale_d, sink_flag, out, sink);                           \
  }

MICRO_CHAIN(ss, 1, 0)
MICRO_CHAIN(ss, 2, 0)
MICRO_CHAIN(ss, 4, 0)
MICRO_CHAIN(ss, 8, 0)
MICRO_CHAIN(ss, 16, 0)
MICRO_CHAIN(rs, 1, 1)
MICRO_CHAIN(rs, 8, 1)
MICRO_CHAIN(pair, 8, 2)
