// lapis_timeline.cuh: per-role timelines of a CUDA kernel, recorded into one global buffer, for sm_90 and later.
//
// Dependency-free (CUDA C++ and <stdint.h> only): copy it next to your kernel. The wire format is documented in
// docs/timeline-format.md (lapis's decoder: lapis/captures/user_timeline.py); lapis's own kernels record through
// the same records and rows (lapis/gpu/kernels/harness.cuh uses the primitives below).
//
// Model. Each record is an instant: "op `op` of role `role` ended now" (kind ISSUE: the role issued work;
// COMPLETE: a wait returned). The role's span runs from its previous record to this one. `begin` writes op 0
// (BEGIN), which only opens the role's next span. Every record carries its logical ids: work item (e.g. the
// output tile) and k index (the K block; < 0 outside the K loop).
//
// Use (one recording thread per role and CTA; every call compiles to nothing in a Recorder<false>):
//
//   __global__ void k(..., const __grid_constant__ lapis_tl::Args tl_args) {
//     lapis_tl::Recorder<true> tl;
//     if (threadIdx.x == 0) tl.init(tl_args);                 // before the CTA's first __syncthreads
//     __syncthreads();
//     ...   if (lead) tl.begin(tl_args, ROLE_MMA, tile, kb);
//     ...   if (lead) tl.end(tl_args, ROLE_MMA, OP_WAIT_FULL, lapis_tl::COMPLETE, tile, kb);
//     __syncthreads();                                        // every role's last record is in
//     if (threadIdx.x == 0) tl.finish(tl_args);
//   }
//
// On a hot path (between an mbarrier wait and the wgmma it releases, or between wgmma.wait_group and the next
// issue) a begin/end call puts a shared load and branches on the warpgroup's critical path in every CTA, sampled
// or not, and in a recording CTA a division by iter_every and the record's stores too. There, read the clock (tl.now(): one CS2R) and write the record later with
// tl.record(tl_args, t, ...) where the thread waits anyway (after the wgmma issue), testing tl.sampled() once
// and sampling iterations with a counter: examples/ws_gemm_timeline.cu does so.
//
// Buffer (one allocation, zeroed by the host before the launch; little-endian): a 64-byte Header (written by CTA
// 0 at finish: what was sampled), uint32 counts[rows] (records each sampled CTA attempted), padded to 8 bytes,
// then Record rows[rows][capacity]: slot 0 and slot capacity-1 hold the CTA's opening and closing clock anchors;
// record n of role r goes to slot 1 + r + roles * n while it fits (later ones are counted, not written: the
// overflow rule). buffer_bytes(rows, capacity) sizes it.
//
// Sampling (what keeps the cost low): CTA c (linear index) records when c >= cta_first, (c - cta_first) %
// cta_every == 0, j = (c - cta_first) / cta_every < rows and bit (j % 64) of cta_mask is set; it owns row j.
// A record with k_index >= 0 is written only when k_index % iter_every == 0 (skipped ones are not counted);
// k_index < 0 is always written. Open each sampled iteration with begin() so no span straddles a skipped one.
//
// Clocks: a record's time is %clock64 (SM cycles; cheapest to read). The anchors pair %clock64 with %globaltimer
// (ns; it ticks every 32 ns on the H200); the host maps cycles to ns per CTA between its two anchors.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace lapis_tl {

enum Kind : uint8_t { ISSUE = 0, COMPLETE = 1 };
constexpr uint8_t BEGIN = 0;          // op 0: opens the role's next span, closes none
constexpr uint8_t ANCHOR = 0x7F;      // op of a clock anchor (role ANCHOR_ROLE); user op codes are 1..0x7E
constexpr uint8_t ANCHOR_ROLE = 0xFF;
constexpr uint32_t ANCHOR_SLOTS = 2;  // slot 0: at init; slot capacity-1: at finish
constexpr uint32_t MAX_ROLES = 8;     // role codes a row interleaves (Args::roles <= MAX_ROLES)
constexpr uint64_t MAGIC = 0x314C54534950414Cull;  // the bytes "LAPISTL1" read as a little-endian uint64
constexpr uint32_t VERSION = 1;

// 24 bytes, little-endian, no padding. t_ns: %clock64 cycles on the device (the host turns them into ns);
// op's bit 7 is the Kind. An anchor: t_ns = %clock64, work_item = low and k_index = high 32 bits of %globaltimer.
struct Record {
  uint64_t t_ns;
  uint32_t cta;
  uint32_t work_item;
  int32_t k_index;
  uint16_t sm;
  uint8_t role;
  uint8_t op;
};
static_assert(sizeof(Record) == 24 && offsetof(Record, sm) == 20, "Record layout (docs/timeline-format.md)");

// The buffer's first 64 bytes: what the launch sampled, so the dump describes itself.
struct Header {
  uint64_t magic;          // MAGIC
  uint32_t version;        // VERSION
  uint32_t header_bytes;   // 64
  uint32_t record_bytes;   // 24
  uint32_t capacity;       // slots per row, the two anchors included
  uint32_t rows;           // rows allocated (sampled CTAs at most)
  uint32_t roles;          // R: records of R role codes interleave in a row
  uint32_t grid_ctas;      // CTAs the launch had (gridDim.x * y * z)
  uint32_t cta_first;      // CTA sampling: first CTA,
  uint32_t cta_every;      //   every Nth CTA from it,
  uint32_t iter_every;     // every Nth k index
  uint64_t cta_mask;       //   and of those, row j when bit (j % 64) is set
  uint32_t counts_offset;  // bytes from the buffer's start to counts[0] (64)
  uint32_t rows_offset;    // bytes from the buffer's start to rows[0][0]
};
static_assert(sizeof(Header) == 64 && offsetof(Header, cta_mask) == 48, "Header layout (docs/timeline-format.md)");

// Kernel parameter, passed by value (__grid_constant__): the buffer and the sampling.
struct Args {
  uint8_t* buffer;      // buffer_bytes(rows, capacity) bytes, zeroed; null: nothing is recorded
  uint32_t capacity;    // slots per row: records + ANCHOR_SLOTS
  uint32_t rows;        // rows in the buffer
  uint32_t roles;       // 1..MAX_ROLES
  uint32_t cta_first;
  uint32_t cta_every;   // >= 1
  uint32_t iter_every;  // >= 1
  uint64_t cta_mask;    // ~0: every selected CTA
};
static_assert(sizeof(Args) == 40 && offsetof(Args, cta_mask) == 32, "Args layout (docs/timeline-format.md)");

__host__ __device__ constexpr uint32_t counts_offset() { return sizeof(Header); }
__host__ __device__ constexpr uint32_t rows_offset(uint32_t rows) {
  return sizeof(Header) + (rows * 4u + 7u) / 8u * 8u;
}
__host__ __device__ constexpr uint64_t buffer_bytes(uint32_t rows, uint32_t capacity) {
  return rows_offset(rows) + static_cast<uint64_t>(rows) * capacity * sizeof(Record);
}
// Rows for every `cta_every`th CTA of `grid_ctas` from `cta_first`.
__host__ __device__ constexpr uint32_t rows_for(uint32_t grid_ctas, uint32_t cta_first, uint32_t cta_every) {
  return grid_ctas > cta_first ? (grid_ctas - cta_first + cta_every - 1) / cta_every : 0;
}
// Args for `per_role` records of each of `roles` roles per sampled CTA (size the buffer with
// buffer_bytes(args.rows, args.capacity)).
__host__ __device__ constexpr Args make_args(uint8_t* buffer, uint32_t grid_ctas, uint32_t roles, uint32_t per_role,
                                             uint32_t cta_every = 1, uint32_t iter_every = 1,
                                             uint32_t cta_first = 0, uint64_t cta_mask = ~0ull) {
  return Args{buffer, per_role * roles + ANCHOR_SLOTS, rows_for(grid_ctas, cta_first, cta_every), roles, cta_first,
              cta_every, iter_every, cta_mask};
}
// The same for the void* that cudaMalloc gives.
__host__ __device__ inline Args make_args(void* buffer, uint32_t grid_ctas, uint32_t roles, uint32_t per_role,
                                          uint32_t cta_every = 1, uint32_t iter_every = 1, uint32_t cta_first = 0,
                                          uint64_t cta_mask = ~0ull) {
  return make_args(static_cast<uint8_t*>(buffer), grid_ctas, roles, per_role, cta_every, iter_every, cta_first,
                   cta_mask);
}

// ----------------------------------------------------------------------------------- device primitives --
// Shared with lapis/gpu/kernels/harness.cuh: one record and anchor encoding for every lapis timeline.

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// SM cycle counter (PTX ISA special registers, %clock64): per SM, not synchronized across SMs.
__device__ __forceinline__ uint64_t clock64_cycles() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
  return c;
}

__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __forceinline__ uint32_t cta_linear() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

// One (%globaltimer, %clock64) pair. The globaltimer read sits between two clock reads and is paired with
// their mean: its own latency then biases both anchors of a CTA alike (an offset, not a slope).
struct ClockPair {
  uint64_t cycles, ns;
};

__device__ __forceinline__ ClockPair clock_pair() {
  const uint64_t c0 = clock64_cycles();
  const uint64_t ns = globaltimer_ns();
  const uint64_t c1 = clock64_cycles();
  return ClockPair{c0 + (c1 - c0) / 2, ns};
}

__device__ __forceinline__ Record anchor_record(ClockPair p) {
  Record r;
  r.t_ns = p.cycles;
  r.cta = cta_linear();
  r.work_item = static_cast<uint32_t>(p.ns);
  r.k_index = static_cast<int32_t>(static_cast<uint32_t>(p.ns >> 32));
  r.sm = static_cast<uint16_t>(smid());
  r.role = ANCHOR_ROLE;
  r.op = ANCHOR;
  return r;
}

// One 24-byte Record as three 64-bit words (w0 = t_ns; w1 = cta | work_item << 32; w2 = k_index | sm << 32 |
// role << 48 | op << 56). A slot is 8-byte aligned only (24-byte stride), so a 16-byte store (st.v2.u64
// needs 16-byte alignment, PTX ISA "Vectors" / ld, st alignment) fits on the half of the slot that is
// 16-byte aligned. STORES = 3: three 8-byte stores, no branch; 2: a 16-byte and an 8-byte store, their order
// chosen by the address. Plain stores: the host reads the rows after the kernel.
template <int STORES>
__device__ __forceinline__ void store_record(Record* slot, uint64_t w0, uint64_t w1, uint64_t w2) {
  static_assert(STORES == 2 || STORES == 3, "a Record goes out in 2 (16 + 8 byte) or 3 (8-byte) stores");
  uint64_t* p = reinterpret_cast<uint64_t*>(slot);
  if constexpr (STORES == 3) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(w0) : "memory");
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p + 1), "l"(w1) : "memory");
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p + 2), "l"(w2) : "memory");
  } else if ((reinterpret_cast<uintptr_t>(p) & 8u) == 0) {
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(w0), "l"(w1) : "memory");
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p + 2), "l"(w2) : "memory");
  } else {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(w0) : "memory");
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p + 1), "l"(w1), "l"(w2) : "memory");
  }
}

// The third word of a record: k_index | (sm | role << 16 | (op | kind << 7) << 24) << 32.
__device__ __forceinline__ uint64_t record_word2(int32_t k_index, uint32_t sm_role, uint8_t op, Kind kind) {
  const uint32_t tail = sm_role | static_cast<uint32_t>(op | kind << 7) << 24;
  return static_cast<uint32_t>(k_index) | static_cast<uint64_t>(tail) << 32;
}

// ------------------------------------------------------------------------------------------ recorder --

// Per-CTA state in static shared memory (104 bytes, instrumented builds only), written by init.
struct CtaState {
  uint2 role[MAX_ROLES];  // x: records the role attempted (its cursor); y: sm | role << 16
  ClockPair opening;      // the opening anchor, written out at finish
  Record* row;            // this CTA's row; null when the CTA is not sampled
  uint32_t cta;           // linear CTA index
  uint32_t row_index;     // j
  uint32_t other;         // records of role codes >= roles (counted, never written)
  uint32_t pad;
};

__device__ __forceinline__ CtaState* cta_state() {
  __shared__ CtaState state;
  return &state;
}

// Row j of CTA c under the sampling of `a`, or -1 when c is not sampled (Header: cta_first/every/mask).
__host__ __device__ constexpr int64_t sampled_row(const Args& a, uint32_t c) {
  if (c < a.cta_first || a.cta_every == 0 || (c - a.cta_first) % a.cta_every) return -1;
  const uint32_t j = (c - a.cta_first) / a.cta_every;
  return j < a.rows && (a.cta_mask >> (j % 64)) & 1u ? static_cast<int64_t>(j) : -1;
}

template <bool ON>
struct Recorder {
  __device__ __forceinline__ void init(const Args&) {}
  __device__ __forceinline__ void begin(const Args&, uint8_t, uint32_t, int32_t) {}
  __device__ __forceinline__ void end(const Args&, uint8_t, uint8_t, Kind, uint32_t, int32_t) {}
  __device__ __forceinline__ bool iteration(const Args&, int32_t) { return false; }
  __device__ __forceinline__ bool sampled() const { return false; }
  __device__ __forceinline__ uint64_t now() const { return 0; }
  __device__ __forceinline__ void record(const Args&, uint64_t, uint8_t, uint8_t, Kind, uint32_t, int32_t) {}
  __device__ __forceinline__ void finish(const Args&) {}
};

template <>
struct Recorder<true> {
  // By one thread before the CTA's first __syncthreads: the row (or none), the cursors, the opening anchor.
  __device__ __forceinline__ void init(const Args& a) {
    CtaState* s = cta_state();
    const uint32_t c = cta_linear(), sm = smid() & 0xFFFFu;
    const int64_t j = a.buffer == nullptr || a.roles == 0 || a.roles > MAX_ROLES || a.capacity <= ANCHOR_SLOTS
                          ? -1 : sampled_row(a, c);
    s->row = j < 0 ? nullptr
                   : reinterpret_cast<Record*>(a.buffer + rows_offset(a.rows)) + static_cast<uint64_t>(j) * a.capacity;
    s->cta = c;
    s->row_index = j < 0 ? 0 : static_cast<uint32_t>(j);
    s->other = 0;
#pragma unroll
    for (uint32_t r = 0; r < MAX_ROLES; ++r) s->role[r] = make_uint2(0, sm | r << 16);
    s->opening = clock_pair();
  }

  // Whether iteration k of a sampled CTA is recorded (k < 0: always).
  __device__ __forceinline__ bool iteration(const Args& a, int32_t k) {
    return cta_state()->row != nullptr && (k < 0 || a.iter_every <= 1 || k % a.iter_every == 0);
  }

  // Whether this CTA records (init's decision; valid after the CTA's first __syncthreads). One shared load:
  // read it once, before the loop, not per record.
  __device__ __forceinline__ bool sampled() const { return cta_state()->row != nullptr; }

  // %clock64 now (one CS2R, no branch, no memory access): the time of a record written later by record().
  __device__ __forceinline__ uint64_t now() const { return clock64_cycles(); }

  // Opens role's next span (op BEGIN).
  __device__ __forceinline__ void begin(const Args& a, uint8_t role, uint32_t work_item, int32_t k_index) {
    end(a, role, BEGIN, ISSUE, work_item, k_index);
  }

  // Closes role's span as op `op` (1..0x7E) of `kind`. Record n of role r goes to slot 1 + r + roles * n while
  // a slot is left before the closing anchor's; later ones are counted, not written (the overflow rule). One
  // thread records each role: its cursor is a plain shared load and store, no atomic.
  __device__ __forceinline__ void end(const Args& a, uint8_t role, uint8_t op, Kind kind, uint32_t work_item,
                                      int32_t k_index) {
    Record* row = cta_state()->row;
    if (row == nullptr) return;                                                 // CTA not sampled
    if (k_index >= 0 && a.iter_every > 1 && k_index % a.iter_every) return;   // iteration not sampled
    record(a, clock64_cycles(), role, op, kind, work_item, k_index);
  }

  // The record end() writes, at time t (a now() value taken earlier), with no sampling test: for a caller
  // that tested sampled() once and samples its iterations itself (k % iter_every == 0 by a counter, not a
  // division per record). end() sits where the op ends; record() can come later, off the critical path (e.g.
  // while wgmma run, between wgmma.commit_group and wgmma.wait_group), in the role's time order.
  __device__ __forceinline__ void record(const Args& a, uint64_t t, uint8_t role, uint8_t op, Kind kind,
                                         uint32_t work_item, int32_t k_index) {
    // The three shared loads come first, independent of each other (one shared-memory latency per record,
    // not three in a row); a role code >= MAX_ROLES reads role 0's state, unused.
    CtaState* s = cta_state();
    Record* row = s->row;
    const uint2 st = s->role[role < MAX_ROLES ? role : 0];
    const uint32_t cta = s->cta;
    if (row == nullptr) return;  // CTA not sampled: nothing written, nothing counted
    if (role >= a.roles) {
      atomicAdd(&s->other, 1u);
      return;
    }
    s->role[role].x = st.x + 1;
    const uint32_t i = role + a.roles * st.x;
    if (i + ANCHOR_SLOTS >= a.capacity) return;  // counted, not written
    // st.global without store_record's "memory" clobber: plain stores that nothing in the kernel reads (the
    // host reads the row after the kernel), so the compiler may schedule the next record's loads among them.
    uint64_t* w = reinterpret_cast<uint64_t*>(row + 1 + i);
    asm volatile("st.global.u64 [%0], %1;" ::"l"(w), "l"(t));
    asm volatile("st.global.u64 [%0], %1;" ::"l"(w + 1), "l"(cta | static_cast<uint64_t>(work_item) << 32));
    asm volatile("st.global.u64 [%0], %1;" ::"l"(w + 2), "l"(record_word2(k_index, st.y, op, kind)));
  }

  // After the CTA's last record (behind a CTA-wide barrier), by one thread: CTA 0 writes the Header; a sampled
  // CTA writes counts[j] = records attempted and its two anchors.
  __device__ __forceinline__ void finish(const Args& a) {
    const ClockPair closing = clock_pair();
    CtaState* s = cta_state();
    if (a.buffer == nullptr) return;
    if (s->cta == 0) {
      Header* hd = reinterpret_cast<Header*>(a.buffer);
      hd->magic = MAGIC;
      hd->version = VERSION;
      hd->header_bytes = sizeof(Header);
      hd->record_bytes = sizeof(Record);
      hd->capacity = a.capacity;
      hd->rows = a.rows;
      hd->roles = a.roles;
      hd->grid_ctas = gridDim.x * gridDim.y * gridDim.z;
      hd->cta_first = a.cta_first;
      hd->cta_every = a.cta_every;
      hd->iter_every = a.iter_every;
      hd->cta_mask = a.cta_mask;
      hd->counts_offset = counts_offset();
      hd->rows_offset = rows_offset(a.rows);
    }
    Record* row = s->row;
    if (row == nullptr) return;
    uint32_t attempted = s->other;
#pragma unroll
    for (uint32_t r = 0; r < MAX_ROLES; ++r) attempted += s->role[r].x;
    reinterpret_cast<uint32_t*>(a.buffer + counts_offset())[s->row_index] = attempted;
    row[0] = anchor_record(s->opening);
    row[a.capacity - 1] = anchor_record(closing);
  }
};

}  // namespace lapis_tl
