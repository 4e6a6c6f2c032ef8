// Harness self-test kernels: each must come back as an error, never as a hang (lapis/gpu/harness.py).
//   mbarrier_ok:    one arrive completes phase 0 and every thread's wait returns (the control).
//   hang_mbarrier:  every thread waits on phase 0 of an mbarrier nobody arrives at; the watchdog writes
//                   Status {MBARRIER_TIMEOUT, barrier 7, parity 0, ...} and traps.
//   hang_bar_sync:  warp 0 and warp 1 wait at different named barriers that each expect 64 threads; no
//                   thread can time out of bar.sync, so only the host's subprocess timeout ends it.
#include <stdint.h>

#include "harness.cuh"

using namespace lapis;

constexpr uint32_t TEST_BARRIER_ID = 7;

// One mbarrier expecting one arrive; thread 0 arrives iff `arrive`; then every thread waits for phase 0.
__device__ __forceinline__ void wait_one_barrier(const HarnessArgs& h, bool arrive) {
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (arrive && threadIdx.x == 0) mbar_arrive(&bar);
  mbar_wait(&bar, 0, h, TEST_BARRIER_ID);
}

extern "C" __global__ void __launch_bounds__(128) mbarrier_ok(const __grid_constant__ HarnessArgs h) {
  wait_one_barrier(h, true);
}

extern "C" __global__ void __launch_bounds__(128) hang_mbarrier(const __grid_constant__ HarnessArgs h) {
  wait_one_barrier(h, false);
}

extern "C" __global__ void __launch_bounds__(64) hang_bar_sync() {
  if (threadIdx.x < 32)
    asm volatile("bar.sync 1, 64;" ::: "memory");
  else
    asm volatile("bar.sync 2, 64;" ::: "memory");
}
