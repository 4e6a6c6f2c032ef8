// sm_90a instruction wrappers shared by lapis kernels: TMA tile loads, wgmma fences and commit groups,
// setmaxnreg. The wgmma.mma_async instructions themselves are generated (wgmma_bf16_ss.cuh).
#pragma once
#include <stdint.h>

namespace lapis {

// CUtensorMap (cuda.h): 128 opaque bytes, 64 B aligned; declared here so kernels need no driver header.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

// Pull the tensor map into the TMA unit's descriptor cache before the first load (PTX ISA prefetch.tensormap).
__device__ __forceinline__ void prefetch_tensormap(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// One 2-D tile box into shared memory; completion is signalled as complete_tx bytes on `bar`
// (PTX ISA cp.async.bulk.tensor). c0 is the innermost coordinate (elements).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TensorMap* map, int32_t c0, int32_t c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Orders this warpgroup's register and shared-memory accesses before the wgmma.mma_async that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most N of this warpgroup's committed wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator reads or writes across an asynchronous wgmma.
template <int R>
__device__ __forceinline__ void fence_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Per-thread register budget of the calling warpgroup (PTX ISA setmaxnreg; sm_90a).
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// Named barriers (PTX ISA bar.sync / bar.arrive): `count` threads, a multiple of 32, take part in barrier `id`
// (1..15; 0 is __syncthreads'). bar.arrive does not wait; bar.sync waits until count threads have arrived.
// Immediate ids: ptxas then reserves only the barriers used (a register id makes it reserve all 16).
template <int ID, int COUNT>
__device__ __forceinline__ void named_bar_sync() {
  static_assert(ID > 0 && ID < 16 && COUNT % 32 == 0, "named barrier 1..15, a multiple of 32 threads");
  asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(COUNT) : "memory");
}

// bar.sync on barrier `id` (1..15, the same in every thread of a warp) held in a register: one instruction where a
// choice between immediate ids is two predicated ones. ptxas reserves all 16 barriers for a kernel that uses it.
template <int COUNT>
__device__ __forceinline__ void named_bar_sync(uint32_t id) {
  static_assert(COUNT % 32 == 0, "a multiple of 32 threads");
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(COUNT) : "memory");
}

template <int ID, int COUNT>
__device__ __forceinline__ void named_bar_arrive() {
  static_assert(ID > 0 && ID < 16 && COUNT % 32 == 0, "named barrier 1..15, a multiple of 32 threads");
  asm volatile("bar.arrive %0, %1;" ::"n"(ID), "n"(COUNT) : "memory");
}

// bar.arrive when `pred`, predicated rather than behind a branch (a branch there, with a wgmma in flight, makes
// ptxas serialize wgmmas).
template <int ID, int COUNT>
__device__ __forceinline__ void named_bar_arrive_if(bool pred) {
  static_assert(ID > 0 && ID < 16 && COUNT % 32 == 0, "named barrier 1..15, a multiple of 32 threads");
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %2, 0; @p bar.arrive %0, %1; }" ::"n"(ID), "n"(COUNT),
               "r"(static_cast<uint32_t>(pred)) : "memory");
}

}  // namespace lapis
