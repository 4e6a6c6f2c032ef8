// Register-level helpers of the lapis attention kernels (sm_90a): online-softmax row reductions over the
// wgmma accumulator fragment, bf16 packing of P into the register A operand, and a register fence for it.
// Fragment facts used here (PTX ISA 9.7.15.5.1): a row of an m64nN accumulator lives in the 4 threads of one
// quad (t / 4 equal), each holding N/4 of its columns; thread t holds rows r0 = 16*(t/32) + (t%32)/4
// (registers i with (i/2)%2 == 0) and r0 + 8 (the others).
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

namespace lapis {

// Max and sum over the quad that shares a row (lanes differing in bits 0 and 1).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Two fp32 -> one .b32 of two bf16 (round to nearest even); lo is the lower column, as wgmma's A expects.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Keep the compiler from moving reads or writes of a register A operand across an asynchronous wgmma.
template <int R>
__device__ __forceinline__ void fence_registers_u32(uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// One mbarrier arrive when `pred`, as a predicated instruction rather than a branch: ptxas serializes wgmmas
// around a divergent branch taken while a wgmma is in flight.
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; @p mbarrier.arrive.shared::cta.b64 _, [%0]; }"
               ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "r"(static_cast<uint32_t>(pred)) : "memory");
}

// mbar_arrive_if on a barrier given by its shared::cta address (harness.cuh's address overloads).
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool pred) {
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; @p mbarrier.arrive.shared::cta.b64 _, [%0]; }"
               ::"r"(bar), "r"(static_cast<uint32_t>(pred)) : "memory");
}

}  // namespace lapis
