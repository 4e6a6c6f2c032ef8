// Shared device helpers of the lapis microbenchmarks (kernels/micro_*.cu).
//
// Every wait loop has a %globaltimer deadline: on expiry the kernel writes an
// error record to mapped pinned host memory (err_addr, 4 x u32: code, where,
// CTA, 0), makes it visible with __threadfence_system() and traps, so a wrong
// parity or byte count comes back to the host as data instead of a hang.
#pragma once
#include <stdint.h>

namespace micro {

enum Error : uint32_t { MBARRIER_TIMEOUT = 1 };

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  return t;
}

__device__ __forceinline__ uint64_t clock_cycles() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
  return c;
}

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __noinline__ void fail(uint64_t err_addr, uint32_t code, uint32_t where) {
  volatile uint32_t* e = reinterpret_cast<volatile uint32_t*>(err_addr);
  e[1] = where;
  e[2] = blockIdx.x;
  e[0] = code;
  __threadfence_system();
  asm volatile("trap;");
}

// mbarrier (PTX ISA 9.7.13.15), CTA scope, 32-bit shared-window addresses.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Arrive once and add `bytes` to the transaction count the phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

// Wait until the phase with parity `parity` has completed; the deadline is checked on the retry path only.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity, uint64_t deadline, uint64_t err_addr,
                                          uint32_t where) {
  while (!mbar_try_wait(bar, parity)) {
    if (globaltimer_ns() > deadline) fail(err_addr, MBARRIER_TIMEOUT, where);
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Per-CTA record every rate kernel writes: clock64 and %globaltimer at start and end, SM id.
struct Record {
  uint64_t clk0, clk1, ns0, ns1, sm;
};
constexpr int RECORD_WORDS = 5;

__device__ __forceinline__ void write_record(uint64_t* out, const Record& r) {
  uint64_t* o = out + RECORD_WORDS * blockIdx.x;
  o[0] = r.clk0;
  o[1] = r.clk1;
  o[2] = r.ns0;
  o[3] = r.ns1;
  o[4] = r.sm;
}

}  // namespace micro
