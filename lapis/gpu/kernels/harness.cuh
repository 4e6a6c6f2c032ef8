// lapis kernel harness: mbarrier waits with a %globaltimer watchdog, and per-role timelines.
//
// Used by every lapis kernel that is timed (gemm_ws.cu, attention_h200.cu, timeline_cost.cu). Host side:
// lapis/gpu/harness.py, which owns the wire formats below (decode, status) and must change with them.
//
// 1. Watchdog. Every mbarrier wait (PTX ISA "mbarrier.test_wait/try_wait") retries until a
//    %globaltimer deadline (PTX ISA special registers, ns; it ticks every 32 ns on the H200). On expiry the first
//    thread to expire writes a Status record to mapped pinned host memory, __threadfence_system()s and
//    traps, so a lost arrive or a wrong expect_tx is an error that names its barrier, never a hang.
//    Blocking waits the harness cannot time out (bar.sync, wgmma.wait_group) are covered on the host by
//    running each kernel in a subprocess with a timeout.
// 2. Timeline (compiled in with -DLAPIS_TIMELINE=1; otherwise every record call is empty). The records, their
//    anchors and stores are the user header's (lapis_timeline.cuh, docs/timeline-format.md): a row here is
//    byte for byte a row of that format, without its Header block; -DLAPIS_TIMELINE_CTA_EVERY=N and
//    -DLAPIS_TIMELINE_ITER_EVERY=M sample as it does (below). Each record is
//    an instant: "op `op` of role `role` ended now", either an issue (the role issued work: a TMA, a
//    wgmma batch, stores) or a completion (a wait returned, which is when hardware completion is seen).
//    A role's activity spans from its previous record to this one; each role starts with a START record.
//    Records go to a per-CTA row of a global buffer, the roles interleaved: record n of role r in slot
//    1 + r + R * n (R = HarnessArgs.roles), n counted in shared memory by the role's one recording thread (no
//    atomic); records past a role's share of the row are counted, never written. The CTA's records
//    attempted land in counts[cta] at exit. Slots a role never reached stay zero: the host drops them.
//    A record's time is %clock64 (SM cycles, the cheapest clock to read; kernels/timeline_cost.cu measures
//    what a record costs with it and with %globaltimer). Each row opens and closes with an ANCHOR record
//    pairing %globaltimer with %clock64 (at init and at finish, in fixed slots 0 and capacity-1, so an
//    overflow never loses them); the host (harness.anchored_to_ns) maps each CTA's cycles to %globaltimer ns
//    by linear interpolation between its two anchors and drops them, before anything is saved. %clock64 is
//    per SM and a CTA never leaves its SM, so per-CTA anchors suffice; the interpolation assumes the SM clock
//    is constant over the CTA's life (tens of µs).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "lapis_timeline.cuh"

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

using lapis_tl::Kind;
using lapis_tl::ISSUE;
using lapis_tl::COMPLETE;
constexpr uint8_t START = lapis_tl::BEGIN;  // op 0 of every kernel: a role begins (seeds its first span)
// Reserved op (kind ISSUE, role 0xFF): a clock anchor. t_ns holds %clock64 (cycles), work_item the low and
// k_index the high 32 bits of %globaltimer (ns). Kernels' own op codes stay below it (harness.ANCHOR_OP).
using lapis_tl::ANCHOR;
using lapis_tl::ANCHOR_SLOTS;  // slot 0: at init; slot capacity-1: at finish; records in between

// 24 bytes, little-endian, no padding (numpy: t_ns u8, cta u4, work_item u4, k_index i4, sm u2, role u1,
// op u1; op's bit 7 is the kind). On the device t_ns is %clock64 cycles; the host turns it into ns.
using lapis_tl::Record;

// Kernel parameter, passed by value (a numpy structured scalar, align=True, on the host).
struct HarnessArgs {
  Status* status;        // device view of the mapped pinned Status
  Record* timeline;      // capacity slots per CTA: 2 anchors + capacity - 2 records (null when not recording)
  uint32_t* counts;      // records attempted per CTA, anchors excluded (attempted - written = overflow)
  uint32_t capacity;     // slots per CTA (harness.timeline_slots: records + ANCHOR_SLOTS)
  uint32_t roles;        // R: role codes interleaved in a row, 1..MAX_ROLES (harness.harness_args `roles`)
  uint64_t timeout_ns;   // watchdog deadline of each mbarrier wait
};
static_assert(sizeof(Status) == 32 && offsetof(Status, t_ns) == 24, "Status layout (harness.STATUS_DTYPE)");
static_assert(sizeof(HarnessArgs) == 40 && offsetof(HarnessArgs, capacity) == 24 &&
                  offsetof(HarnessArgs, timeout_ns) == 32, "HarnessArgs layout (harness.HARNESS_DTYPE)");

// ------------------------------------------------------------------------------- clocks --
// The clocks, the Record, its anchors and its stores are lapis_timeline.cuh's (the user header): one encoding.

using lapis_tl::clock64_cycles;
using lapis_tl::cta_linear;
using lapis_tl::globaltimer_ns;
using lapis_tl::smid;

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

// The same operations on a barrier given by its shared::cta address (smem_addr), for a kernel that computes the
// address once and keeps it in a register: from a pointer to a __shared__ array ptxas rebuilds the address at every
// use (S2UR SR_CgaCtaId, then ULEA), since the address is a cheap constant to rematerialize.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

// Whether the phase with `parity` has completed, without waiting (PTX ISA mbarrier.test_wait: non-blocking, where
// try_wait may suspend the thread for a time limit); acquire semantics as try_wait's.
__device__ __forceinline__ bool mbar_test_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity, const HarnessArgs& h, uint32_t barrier_id) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t deadline = globaltimer_ns() + h.timeout_ns;
  while (!mbar_try_wait(bar, parity)) {
    if (globaltimer_ns() > deadline) watchdog_expire(h, barrier_id, parity);
  }
}

// Wait for the phase with `parity` to complete as CUTLASS's ClusterBarrier::wait does (cutlass/arch/barrier.h): the
// try_wait loop inside one asm block, with no deadline. ptxas then keeps a completed wait falling through (TRYWAIT,
// then a branch not taken) and places the retry loop out of line; mbar_wait's deadline check inside the loop makes
// ptxas keep the retry code inline and branch over it, a taken branch on every completed wait. A lost arrive hangs
// this wait: the kernel's other waits keep the watchdog (the producer's on the slots this consumer never frees).
__device__ __forceinline__ void mbar_spin_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra.uni LAB_WAIT;\n"
      "DONE:\n\t}"
      :: "r"(bar), "r"(parity) : "memory");
}

// mbar_wait whose retries suspend until the phase completes or `suspend_ns` passes (PTX ISA mbarrier.try_wait's
// suspendTimeHint, in ns), where a plain try_wait returns after a system-dependent limit: a wait longer than that
// limit retries, each retry a try_wait, a %globaltimer read, a compare and a branch issued by the waiting warp. The
// watchdog deadline is checked after each suspension, as mbar_wait's.
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity, uint32_t suspend_ns) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; selp.u32 %0, 1, 0, p; }"
      : "=r"(done) : "r"(smem_addr(bar)), "r"(parity), "r"(suspend_ns) : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbar_sleep_wait(uint64_t* bar, uint32_t parity, const HarnessArgs& h,
                                                uint32_t barrier_id, uint32_t suspend_ns) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t deadline = globaltimer_ns() + h.timeout_ns;
  while (!mbar_try_wait(bar, parity, suspend_ns)) {
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

using lapis_tl::ClockPair;
using lapis_tl::clock_pair;

// The CTA's opening pair, taken at init and written out at finish (init has no HarnessArgs): 16 bytes of
// static shared memory in kernels built with the timeline only.
__device__ __forceinline__ ClockPair* opening_pair() {
  __shared__ ClockPair pair;
  return &pair;
}

using lapis_tl::anchor_record;

// The number of role codes a CTA's row can interleave (HarnessArgs.roles <= MAX_ROLES; harness.MAX_ROLES).
using lapis_tl::MAX_ROLES;

// Per role code of the CTA, in static shared memory (64 bytes, timeline builds only), written by init:
// x = records the role attempted (its cursor), y = sm | role << 16, the constant half of the record's last
// word (%smid read once per CTA, at init: a CTA stays on its SM).
__device__ __forceinline__ uint2* role_state() {
  __shared__ uint2 state[MAX_ROLES];
  return state;
}

// One 24-byte Record as three 64-bit words, in 2 or 3 stores (lapis_timeline.cuh store_record).
using lapis_tl::store_record;

#ifndef LAPIS_TIMELINE_STORES
#define LAPIS_TIMELINE_STORES 3
#endif
// Sampling of timeline builds (lapis_timeline.cuh's rule, fixed at compile time): only CTAs whose linear index
// is a multiple of LAPIS_TIMELINE_CTA_EVERY record, and a record with k_index >= 0 is written only when k_index
// % LAPIS_TIMELINE_ITER_EVERY == 0 (skipped ones are not counted). Every CTA keeps its row, its anchors and its
// count (0 when not sampled), so the host reads the rows as before. 1 and 1 (the defaults) compile to the
// unsampled recorder.
#ifndef LAPIS_TIMELINE_CTA_EVERY
#define LAPIS_TIMELINE_CTA_EVERY 1
#endif
#ifndef LAPIS_TIMELINE_ITER_EVERY
#define LAPIS_TIMELINE_ITER_EVERY 1
#endif
static_assert(LAPIS_TIMELINE_CTA_EVERY >= 1 && LAPIS_TIMELINE_ITER_EVERY >= 1, "sampling periods are >= 1");

template <>
struct Timeline<true> {
  // By one thread before the CTA's first __syncthreads: zeroes the cursor (the count of records whose
  // role has no slots) and the role cursors, reads %smid, and takes the opening anchor.
  __device__ __forceinline__ void init(uint32_t* cursor) {
    *cursor = 0;
    const uint32_t sm = smid() & 0xFFFFu;
#pragma unroll
    for (uint32_t r = 0; r < MAX_ROLES; ++r) role_state()[r] = make_uint2(0, sm | r << 16);
    *opening_pair() = clock_pair();
  }

  // Record n of role r goes to record index i = r + R * n (slot 1 + i), R = h.roles, while a slot is left
  // before the closing anchor's; later ones are counted, not written (role r's share of a row of C record
  // slots: ceil((C - r) / R) records). Rule: each role is recorded by one thread, so the role's cursor n is
  // read and bumped by plain shared loads and stores, with no atomic (whose returned value a record waited
  // for). A register cursor in this per-thread object would be cheaper still, but one more register live
  // through the consumer loops spills attention s3 (timeline build, 168 registers; timeline_cost.cu
  // measures both). The row interleaves the roles; slots a role never reached stay zero and the host drops
  // them (harness.anchored_to_ns). A role code >= R has no slots: counted on the shared cursor, never
  // written. The cursor argument is otherwise unused, kept for source compatibility.
  __device__ __forceinline__ void record(const HarnessArgs& h, uint32_t* cursor, uint8_t role, uint8_t op, Kind kind,
                                         uint32_t work_item, int32_t k_index) {
    record_with<LAPIS_TIMELINE_STORES, false>(h, cursor, role, op, kind, work_item, k_index);
  }

  // record(), with the store form (store_record) and the cursor's home (REGISTER: n_, one recording thread
  // per object and role) as parameters: timeline_cost.cu times each.
  template <int STORES, bool REGISTER>
  __device__ __forceinline__ void record_with(const HarnessArgs& h, uint32_t* cursor, uint8_t role, uint8_t op,
                                              Kind kind, uint32_t work_item, int32_t k_index) {
    if constexpr (LAPIS_TIMELINE_CTA_EVERY > 1) {
      if (cta_linear() % LAPIS_TIMELINE_CTA_EVERY) return;
    }
    if constexpr (LAPIS_TIMELINE_ITER_EVERY > 1) {
      if (k_index >= 0 && k_index % LAPIS_TIMELINE_ITER_EVERY) return;
    }
    const uint64_t t = clock64_cycles();
    if (role >= h.roles || role >= MAX_ROLES) {
      atomicAdd(cursor, 1u);
      return;
    }
    const uint2 state = role_state()[role];
    const uint32_t n = REGISTER ? n_++ : state.x;
    role_state()[role].x = n + 1;  // finish sums these (REGISTER too: one store, nothing waits on it)
    const uint32_t i = role + h.roles * n;
    if (h.timeline == nullptr || i + ANCHOR_SLOTS >= h.capacity) return;  // counted (role_state), not written
    const uint32_t cta = cta_linear();
    const uint32_t tail = state.y | static_cast<uint32_t>(op | kind << 7) << 24;
    store_record<STORES>(h.timeline + (static_cast<uint64_t>(cta) * h.capacity + 1 + i), t,
                         cta | static_cast<uint64_t>(work_item) << 32,
                         static_cast<uint32_t>(k_index) | static_cast<uint64_t>(tail) << 32);
  }

  // After the CTA's last record (behind a CTA-wide barrier, which also makes the recording threads'
  // role_state stores visible), by one thread: counts[cta] = records attempted (every role's, plus those of
  // a role code without slots), and the two anchors (the opening pair is in shared memory since the first
  // __syncthreads).
  __device__ __forceinline__ void finish(const HarnessArgs& h, uint32_t* cursor) {
    const ClockPair closing = clock_pair();
    if (h.counts != nullptr) {
      uint32_t attempted = *cursor;
#pragma unroll
      for (uint32_t r = 0; r < MAX_ROLES; ++r) attempted += role_state()[r].x;
      h.counts[cta_linear()] = attempted;
    }
    if (h.timeline == nullptr || h.capacity < ANCHOR_SLOTS) return;
    Record* row = h.timeline + static_cast<uint64_t>(cta_linear()) * h.capacity;
    row[0] = anchor_record(*opening_pair());
    row[h.capacity - 1] = anchor_record(closing);
  }

  uint32_t n_ = 0;  // record_with<..., true>'s cursor (dead, so no register, in record())
};

using KernelTimeline = Timeline<LAPIS_TIMELINE != 0>;

}  // namespace lapis
