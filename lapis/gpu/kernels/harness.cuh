// lapis kernel harness: mbarrier waits with a %globaltimer watchdog, and per-role timelines.
//
// Used by every lapis kernel that is timed (gemm_ws.cu, later attention kernels). Host side:
// lapis/gpu/harness.py, which owns the wire formats below (decode, status) and must change with them.
//
// 1. Watchdog. Every mbarrier wait (PTX ISA "mbarrier.test_wait/try_wait") retries until a
//    %globaltimer deadline (PTX ISA special registers, ns; it ticks every 32 ns on the H200). On expiry the first
//    thread to expire writes a Status record to mapped pinned host memory, __threadfence_system()s and
//    traps, so a lost arrive or a wrong expect_tx is an error that names its barrier, never a hang.
//    Blocking waits the harness cannot time out (bar.sync, wgmma.wait_group) are covered on the host by
//    running each kernel in a subprocess with a timeout.
// 2. Timeline (compiled in with -DLAPIS_TIMELINE=1; otherwise every record call is empty). Each record is
//    an instant: "op `op` of role `role` ended now", either an issue (the role issued work: a TMA, a
//    wgmma batch, stores) or a completion (a wait returned, which is when hardware completion is seen).
//    A role's activity spans from its previous record to this one; each role starts with a START record.
//    Records go to a per-CTA slice of a global buffer through a per-CTA shared-memory cursor; records
//    past the slice's capacity are counted, never written. The CTA's count lands in counts[cta] at exit.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifndef LAPIS_TIMELINE
#define LAPIS_TIMELINE 0
#endif

namespace lapis {

// ---------------------------------------------------------------- wire formats (harness.py) --

enum StatusCode : uint32_t { STATUS_OK = 0, STATUS_MBARRIER_TIMEOUT = 1 };

// Written once, by the first thread whose wait expires; lives in mapped pinned host memory.
struct Status {
  uint32_t code;     // StatusCode
  uint32_t barrier;  // the kernel's id of the barrier (see the kernel's barrier id scheme)
  uint32_t parity;   // the phase parity waited for
  uint32_t block;    // linear CTA index
  uint32_t thread;   // threadIdx.x
  uint32_t sm;       // %smid
  uint64_t t_ns;     // %globaltimer at expiry
};

enum Kind : uint8_t { ISSUE = 0, COMPLETE = 1 };
constexpr uint8_t START = 0;  // op 0 of every kernel: a role begins (seeds its first span)

// 24 bytes, little-endian, no padding (numpy: t_ns u8, cta u4, work_item u4, k_index i4, sm u2, role u1,
// op u1; op's bit 7 is the kind).
struct Record {
  uint64_t t_ns;
  uint32_t cta;
  uint32_t work_item;
  int32_t k_index;
  uint16_t sm;
  uint8_t role;
  uint8_t op;
};
static_assert(sizeof(Record) == 24 && offsetof(Record, sm) == 20, "Record layout (harness.RECORD_DTYPE)");

// Kernel parameter, passed by value (a numpy structured scalar, align=True, on the host).
struct HarnessArgs {
  Status* status;        // device view of the mapped pinned Status
  Record* timeline;      // capacity records per CTA (null when not recording)
  uint32_t* counts;      // records attempted per CTA (count - capacity = overflow)
  uint32_t capacity;     // records per CTA
  uint32_t pad;
  uint64_t timeout_ns;   // watchdog deadline of each mbarrier wait
};
static_assert(sizeof(Status) == 32 && offsetof(Status, t_ns) == 24, "Status layout (harness.STATUS_DTYPE)");
static_assert(sizeof(HarnessArgs) == 40 && offsetof(HarnessArgs, capacity) == 24 &&
                  offsetof(HarnessArgs, timeout_ns) == 32, "HarnessArgs layout (harness.HARNESS_DTYPE)");

// ------------------------------------------------------------------------------- clocks --

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __forceinline__ uint32_t cta_linear() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ------------------------------------------------------------------------------ mbarrier --

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Makes the inits visible to the async proxy (TMA complete_tx) before first use (PTX ISA "membar/fence": fence.mbarrier_init).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(tx_bytes)
               : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  return done != 0;
}

__device__ __noinline__ void watchdog_expire(const HarnessArgs& h, uint32_t barrier, uint32_t parity) {
  if (atomicCAS(&h.status->code, STATUS_OK, STATUS_MBARRIER_TIMEOUT) == STATUS_OK) {
    h.status->barrier = barrier;
    h.status->parity = parity;
    h.status->block = cta_linear();
    h.status->thread = threadIdx.x;
    h.status->sm = smid();
    h.status->t_ns = globaltimer_ns();
  }
  __threadfence_system();  // the record reaches host memory before the trap kills the context
  asm volatile("trap;");
}

// Wait for the phase with `parity` to complete. The fast path is one try_wait; the deadline is read only
// once a try_wait has failed (each try_wait already suspends for a hardware time limit).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity, const HarnessArgs& h, uint32_t barrier_id) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t deadline = globaltimer_ns() + h.timeout_ns;
  while (!mbar_try_wait(bar, parity)) {
    if (globaltimer_ns() > deadline) watchdog_expire(h, barrier_id, parity);
  }
}

// ------------------------------------------------------------------------------ timeline --

template <bool ON>
struct Timeline {
  __device__ __forceinline__ void init(uint32_t*) {}
  __device__ __forceinline__ void record(const HarnessArgs&, uint32_t*, uint8_t, uint8_t, Kind, uint32_t, int32_t) {}
  __device__ __forceinline__ void finish(const HarnessArgs&, uint32_t*) {}
};

template <>
struct Timeline<true> {
  // cursor: one uint32 in shared memory, zeroed by one thread before the CTA's first __syncthreads.
  __device__ __forceinline__ void init(uint32_t* cursor) { *cursor = 0; }

  __device__ __forceinline__ void record(const HarnessArgs& h, uint32_t* cursor, uint8_t role, uint8_t op, Kind kind,
                                         uint32_t work_item, int32_t k_index) {
    const uint64_t t = globaltimer_ns();
    const uint32_t i = atomicAdd(cursor, 1u);
    if (i >= h.capacity || h.timeline == nullptr) return;  // counted (cursor), not written
    Record r;
    r.t_ns = t;
    r.cta = cta_linear();
    r.work_item = work_item;
    r.k_index = k_index;
    r.sm = static_cast<uint16_t>(smid());
    r.role = role;
    r.op = static_cast<uint8_t>(op | (kind << 7));
    h.timeline[static_cast<uint64_t>(r.cta) * h.capacity + i] = r;
  }

  // After the CTA's last record (behind a CTA-wide barrier), one thread publishes the count.
  __device__ __forceinline__ void finish(const HarnessArgs& h, uint32_t* cursor) {
    if (h.counts != nullptr) h.counts[cta_linear()] = *cursor;
  }
};

using KernelTimeline = Timeline<LAPIS_TIMELINE != 0>;

}  // namespace lapis
