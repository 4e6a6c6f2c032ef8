// Cost of one timeline record (harness.cuh) on the device. One CTA of `warps` warps runs a loop of FMA_CHAIN
// dependent FMAs per iteration; lane 0 of every warp (its leader, as in the kernels) records once per
// iteration into the CTA's shared cursor. Each warp's leader reports the loop's %globaltimer ns and %clock64
// cycles; the host (lapis/gpu/timeline_cost.py) takes (loop - the no-record loop) / iterations.
//   timeline_cost_none:              no record (baseline)
//   timeline_cost_globaltimer:       %globaltimer + shared atomicAdd + 24 B store (the record before anchors)
//   timeline_cost_clock64:           harness.cuh's record: %clock64 + shared atomicAdd + 24 B store, with the
//                                    two clock anchors of Timeline::init / finish
//   timeline_cost_clock64_register:  %clock64 + a register cursor per warp (no atomic): what the atomic costs
// Buffer: HarnessArgs.timeline with capacity >= warps * iterations + 2 slots; counts[0] gets the cursor.
#include <stdint.h>

#include "harness.cuh"

using namespace lapis;

constexpr int FMA_CHAIN = 16;  // dependent FMAs between two records (~4 cycles each)

enum Mode { NONE, GLOBALTIMER, CLOCK64, CLOCK64_REGISTER };

__device__ __forceinline__ Record make_record(uint64_t t, uint8_t role, uint32_t iteration) {
  Record r;
  r.t_ns = t;
  r.cta = cta_linear();
  r.work_item = 0;
  r.k_index = static_cast<int32_t>(iteration);
  r.sm = static_cast<uint16_t>(smid());
  r.role = role;
  r.op = 1;
  return r;
}

// Into the CTA's row, as Timeline::record indexes it.
__device__ __forceinline__ void write(const HarnessArgs& h, const Record& r, uint32_t slot) {
  h.timeline[static_cast<uint64_t>(r.cta) * h.capacity + slot] = r;
}

template <int MODE>
__device__ __forceinline__ void cost_loop(const HarnessArgs& h, float* out, uint64_t* elapsed, int iterations,
                                          float a, float b) {
  __shared__ uint32_t cursor;
  Timeline<true> tl;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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
      if constexpr (MODE == GLOBALTIMER) {
        const uint64_t t = globaltimer_ns();
        const uint32_t i = atomicAdd(&cursor, 1u);
        if (h.timeline != nullptr && i + ANCHOR_SLOTS < h.capacity) write(h, make_record(t, warp, it), 1 + i);
      } else if constexpr (MODE == CLOCK64) {
        tl.record(h, &cursor, static_cast<uint8_t>(warp), 1, ISSUE, 0, it);
      } else if constexpr (MODE == CLOCK64_REGISTER) {
        const uint64_t t = clock64_cycles();
        if (h.timeline != nullptr && mine + 1 < h.capacity) write(h, make_record(t, warp, it), mine);
        ++mine;
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
COST_KERNEL(timeline_cost_clock64, CLOCK64)
COST_KERNEL(timeline_cost_clock64_register, CLOCK64_REGISTER)
