// Cost of one timeline record (harness.cuh) on the device. One CTA of `warps` warps runs a loop of FMA_CHAIN
// dependent FMAs per iteration; lane 0 of every warp (its leader, as in the kernels) records once per
// iteration, warp w as role w. Each warp's leader reports the loop's %globaltimer ns and %clock64 cycles; the
// host (lapis/gpu/timeline_cost.py) takes (loop - the no-record loop) / iterations.
//   timeline_cost_none:             no record (baseline)
//   Cursor-ordered records, the alternative to harness.cuh's interleaved rows (one shared atomicAdd cursor,
//   rows in cursor order, %smid and the 24 B Record stored field by field, every record):
//   timeline_cost_globaltimer:      %globaltimer + atomicAdd
//   timeline_cost_clock64_atomic:   %clock64 + atomicAdd
//   timeline_cost_clock64_register: %clock64 + a register cursor per warp (no atomic), own contiguous slots
//   harness.cuh's record (Timeline<true>::record_with; interleaved rows, %smid read once at init, the
//   role's count in shared memory), with the two clock anchors of Timeline::init / finish:
//   timeline_cost_record:           record(): shared per-role cursor, three 8 B stores (the default)
//   timeline_cost_record_pair:      shared per-role cursor, a 16 B + an 8 B store
//   timeline_cost_record_register:  register cursor, three 8 B stores
//   timeline_cost_record_register_pair: register cursor, a 16 B + an 8 B store
// Buffer: HarnessArgs.timeline with capacity >= warps * iterations + 2 slots, roles = warps (<= MAX_ROLES);
// counts[0] gets the records attempted.
#include <stdint.h>

#include "harness.cuh"

using namespace lapis;

constexpr int FMA_CHAIN = 16;  // dependent FMAs between two records (~4 cycles each)

enum Mode { NONE, GLOBALTIMER, CLOCK64_ATOMIC, CLOCK64_REGISTER, RECORD, RECORD_PAIR, RECORD_REGISTER,
            RECORD_REGISTER_PAIR };

// A cursor-ordered record: field by field, %smid read each time.
__device__ __forceinline__ void write_fields(const HarnessArgs& h, uint64_t t, uint8_t role, uint32_t iteration,
                                             uint32_t slot) {
  Record r;
  r.t_ns = t;
  r.cta = cta_linear();
  r.work_item = 0;
  r.k_index = static_cast<int32_t>(iteration);
  r.sm = static_cast<uint16_t>(smid());
  r.role = role;
  r.op = 1;
  h.timeline[static_cast<uint64_t>(r.cta) * h.capacity + slot] = r;
}

template <int MODE>
__device__ __forceinline__ void cost_loop(const HarnessArgs& h, float* out, uint64_t* elapsed, int iterations,
                                          float a, float b) {
  __shared__ uint32_t cursor;
  Timeline<true> tl;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint8_t role = static_cast<uint8_t>(warp);
  if (threadIdx.x == 0) tl.init(&cursor);
  __syncthreads();
  float x = a * static_cast<float>(threadIdx.x);
  uint32_t mine = 1 + warp * iterations;  // CLOCK64_REGISTER: this warp's own slots
  const uint64_t g0 = globaltimer_ns(), c0 = clock64_cycles();
#pragma unroll 1
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int f = 0; f < FMA_CHAIN; ++f) x = fmaf(x, a, b);
    if (lane == 0) {
      if constexpr (MODE == GLOBALTIMER || MODE == CLOCK64_ATOMIC) {
        const uint64_t t = MODE == GLOBALTIMER ? globaltimer_ns() : clock64_cycles();
        const uint32_t i = atomicAdd(&cursor, 1u);
        if (h.timeline != nullptr && i + ANCHOR_SLOTS < h.capacity) write_fields(h, t, role, it, 1 + i);
      } else if constexpr (MODE == CLOCK64_REGISTER) {
        const uint64_t t = clock64_cycles();
        if (h.timeline != nullptr && mine + 1 < h.capacity) write_fields(h, t, role, it, mine);
        ++mine;
      } else if constexpr (MODE == RECORD) {
        tl.record(h, &cursor, role, 1, ISSUE, 0, it);
      } else if constexpr (MODE != NONE) {
        constexpr int STORES = MODE == RECORD_PAIR || MODE == RECORD_REGISTER_PAIR ? 2 : 3;
        tl.record_with<STORES, MODE == RECORD_REGISTER || MODE == RECORD_REGISTER_PAIR>(h, &cursor, role, 1, ISSUE,
                                                                                         0, it);
      }
    }
  }
  const uint64_t c1 = clock64_cycles(), g1 = globaltimer_ns();
  __syncthreads();
  if (threadIdx.x == 0) tl.finish(h, &cursor);  // the anchors: converted by harness.anchored_to_ns
  out[threadIdx.x] = x;                          // keeps the FMA chain alive
  if (lane == 0) {
    elapsed[2 * warp] = g1 - g0;
    elapsed[2 * warp + 1] = c1 - c0;
  }
}

#define COST_KERNEL(name, mode)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024) name(const __grid_constant__ HarnessArgs h, float* out,   \
                                                           uint64_t* elapsed, int iterations, float a, float b) { \
    cost_loop<mode>(h, out, elapsed, iterations, a, b);                                                          \
  }

COST_KERNEL(timeline_cost_none, NONE)
COST_KERNEL(timeline_cost_globaltimer, GLOBALTIMER)
COST_KERNEL(timeline_cost_clock64_atomic, CLOCK64_ATOMIC)
COST_KERNEL(timeline_cost_clock64_register, CLOCK64_REGISTER)
COST_KERNEL(timeline_cost_record, RECORD)
COST_KERNEL(timeline_cost_record_pair, RECORD_PAIR)
COST_KERNEL(timeline_cost_record_register, RECORD_REGISTER)
COST_KERNEL(timeline_cost_record_register_pair, RECORD_REGISTER_PAIR)
