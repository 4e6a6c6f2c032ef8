// lapis microbenchmark: the named-barrier GEMM-turn hand-over of the ping-pong attention kernels
// (attention_h200.cu, s4+) and the mbarrier wait that finds its phase complete, one mechanism per kernel.
//
// Layout (the attention kernels'): a CTA of 256 threads is two consumer warpgroups; of 384, warpgroup 0 sits where
// the producer does and the consumers are warpgroups 1 and 2 (consumer wg = threadIdx.x / 128 - 1, as
// attention_h200.cu). The third warpgroup only parks in the closing __syncthreads (barrier 0): resident, issuing
// nothing, as a producer suspended in an mbarrier wait. Each SM sub-partition (SMSP) holds one warp of each consumer
// warpgroup. One CTA per SM (the host asks for FORCE_ONE_CTA_SMEM of dynamic shared memory), a CTA on every SM.
//
// Kernels (all: iters, timeout_ns, err_addr, out), each timing `iters` units on thread 0 of consumer warpgroup 0:
//   micro_bar_hop_{imm,pred,reg}: the GEMM-turn ping-pong with nothing else in a turn. Consumer wg bar.syncs
//       barrier 1 + wg (256 threads: its own 128 and the other warpgroup's 128 bar.arrive) and bar.arrives barrier
//       2 - wg. Warpgroup 1 pre-arrives barrier 1 (the first turn is warpgroup 0's). The window opens when
//       warpgroup 0's first bar.sync returns and closes when its (iters + 1)-th returns: iters round trips, 2 x iters
//       hand-overs (one hop: the last bar.arrive of one warpgroup's 4 warps -> the other's 4 warps released -> their
//       bar.arrive). Forms of the turn's wait and arrive:
//         imm:  each warpgroup in its own loop (the branch on wg outside it), immediate ids: the bare mechanism;
//         pred: one loop, `if (wg == 0) bar.sync 1 else bar.sync 2`, and the arrive likewise (s4..s16's turn; ptxas
//               emits a predicated BAR.SYNC pair);
//         reg:  one loop, one bar.sync on the register id 1 + wg, the arrive as pred (s17's turn, ONE_SYNC).
//   micro_bar_sync_all: both consumer warpgroups bar.sync barrier 1 (256 threads) back to back: a barrier whose 8
//       warps arrive together, nobody waiting long; unit = one bar.sync.
//   micro_bar_sync_present: a bar.sync whose other 128 arrivals are already there. Per round warpgroup 1 bar.arrives
//       barriers 1..14 and then bar.syncs 15; warpgroup 0 lets PRESENT_SPIN cycles pass (warpgroup 1's arrivals land),
//       bar.syncs 1 (aligns its 4 warps), reads the clock, bar.syncs 2..14, reads the clock (13 units, timed) and
//       bar.arrives 15. The window is the sum of the timed stretches (each holds one clock64 read besides its 13
//       bar.syncs: ~6 cycles, micro/h200-2026-11-29's timer.clock64).
//   micro_bar_try_wait: mbarrier.try_wait.parity on a barrier whose phase of parity 0 completed before the window
//       (count 1, one arrive), by all 256 consumer threads back to back as consumer_wait's fast path (pipeline.cuh:
//       one try_wait and its branch); unit = one wait. A try_wait that fails retries until a %globaltimer deadline
//       (micro_common.cuh), so a wrong parity traps as MBARRIER_TIMEOUT (where = 1) instead of hanging.
//
// Record per CTA (6 u64, written by thread 0 of consumer warpgroup 0): clk0, clk1 (clock64 at the window's ends),
// ns0, ns1 (%globaltimer there), smid, timed cycles (clk1 - clk0; sync_present: the sum of its timed stretches).
// A bar.sync has no deadline: the host's per-measurement timeout (capture_micro) covers a lost arrival.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_bar_v2.cu.
#include <stdint.h>

#include "micro_common.cuh"
#include "sm90.cuh"

namespace {

constexpr int RECORD_WORDS = 6;
constexpr int TURN = 256;                 // a turn barrier's thread count: attention_h200.cu PP_THREADS
constexpr int UNROLL = 8;                 // units per loop trip: the loop's own add, compare and branch amortized
constexpr int PRESENT_BARS = 14;          // barriers 1..14 pre-arrived per round; 15 closes the round
constexpr uint64_t PRESENT_SPIN = 2048;   // cycles warpgroup 0 lets pass before a round's bar.syncs

// Consumer warpgroup of this thread (0 or 1), or -1 for the parked third warpgroup of a 384-thread CTA.
__device__ __forceinline__ int consumer_wg() { return static_cast<int>(threadIdx.x / 128) - (blockDim.x == 384); }

struct Window {
  uint64_t clk0 = 0, ns0 = 0, timed = 0;
  __device__ __forceinline__ void open() {
    ns0 = micro::globaltimer_ns();
    clk0 = micro::clock_cycles();
  }
  // The window's end; timed (cycles) defaults to the whole window.
  __device__ __forceinline__ void close(uint64_t* out, bool whole) {
    const uint64_t clk1 = micro::clock_cycles(), ns1 = micro::globaltimer_ns();
    uint64_t* o = out + RECORD_WORDS * blockIdx.x;
    o[0] = clk0;
    o[1] = clk1;
    o[2] = ns0;
    o[3] = ns1;
    o[4] = micro::sm_id();
    o[5] = whole ? clk1 - clk0 : timed;
  }
};

// ---------------------------------------------------------------------------------------------- hop --
// imm: warpgroup A's loop (A waits on barrier 1 + A, arrives on 2 - A), immediate ids throughout.
template <int A>
__device__ __forceinline__ void hop_imm(uint32_t iters, bool timer, Window& w) {
  constexpr int MINE = 1 + A, OTHER = 2 - A;
  if (A == 1) lapis::named_bar_arrive<1, TURN>();  // the first turn is warpgroup 0's
  lapis::named_bar_sync<MINE, TURN>();
  if (timer) w.open();
#pragma unroll UNROLL
  for (uint32_t i = 0; i < iters; ++i) {
    lapis::named_bar_arrive<OTHER, TURN>();
    lapis::named_bar_sync<MINE, TURN>();
  }
  if (A == 0) lapis::named_bar_arrive<OTHER, TURN>();  // warpgroup 1's last turn; warpgroup 0 has none left
}

// pred and reg: one loop for both warpgroups, the turn's wait and arrive chosen by wg as attention_h200.cu's turn.
template <bool REG>
__device__ __forceinline__ void turn_wait(int wg, uint32_t id) {
  if constexpr (REG) {
    lapis::named_bar_sync<TURN>(id);  // s17: one BAR.SYNC on a register id (1 + wg)
  } else {
    if (wg == 0) lapis::named_bar_sync<1, TURN>();
    else lapis::named_bar_sync<2, TURN>();
  }
}

__device__ __forceinline__ void turn_arrive(int wg) {
  if (wg == 0) lapis::named_bar_arrive<2, TURN>();
  else lapis::named_bar_arrive<1, TURN>();
}

// wg and id are made opaque each trip (an empty asm that may change them), so the compiler cannot hoist the choice
// out of the loop (unswitching it into imm's two loops): every trip selects, as every turn of the kernels does.
template <bool REG>
__device__ __forceinline__ void hop_select(uint32_t iters, int wg, bool timer, Window& w) {
  uint32_t id = 1 + wg;
  if (wg == 1) lapis::named_bar_arrive<1, TURN>();
  turn_wait<REG>(wg, id);
  if (timer) w.open();
#pragma unroll UNROLL
  for (uint32_t i = 0; i < iters; ++i) {
    asm volatile("" : "+r"(wg), "+r"(id));
    turn_arrive(wg);
    turn_wait<REG>(wg, id);
  }
  if (wg == 0) lapis::named_bar_arrive<2, TURN>();
}

// FORM 0 imm, 1 pred, 2 reg.
template <int FORM>
__device__ __forceinline__ void hop(uint32_t iters, uint64_t* out) {
  const int wg = consumer_wg();
  const bool timer = wg == 0 && threadIdx.x % 128 == 0;
  Window w;
  __syncthreads();
  if (wg >= 0) {
    if constexpr (FORM == 0) {
      if (wg == 0) hop_imm<0>(iters, timer, w);
      else hop_imm<1>(iters, timer, w);
    } else {
      hop_select<FORM == 2>(iters, wg, timer, w);
    }
    if (timer) w.close(out, true);
  }
  __syncthreads();
}

// ------------------------------------------------------------------------------------------- others --
__device__ __forceinline__ void sync_all(uint32_t iters, uint64_t* out) {
  const int wg = consumer_wg();
  const bool timer = wg == 0 && threadIdx.x % 128 == 0;
  Window w;
  __syncthreads();
  if (wg >= 0) {
    lapis::named_bar_sync<1, TURN>();  // the 8 warps leave together
    if (timer) w.open();
#pragma unroll UNROLL
    for (uint32_t i = 0; i < iters; ++i) lapis::named_bar_sync<1, TURN>();
    if (timer) w.close(out, true);
  }
  __syncthreads();
}

// bar.arrive on barriers FIRST..LAST (immediate ids).
template <int FIRST, int LAST>
__device__ __forceinline__ void arrive_range() {
  lapis::named_bar_arrive<FIRST, TURN>();
  if constexpr (FIRST < LAST) arrive_range<FIRST + 1, LAST>();
}

template <int FIRST, int LAST>
__device__ __forceinline__ void sync_range() {
  lapis::named_bar_sync<FIRST, TURN>();
  if constexpr (FIRST < LAST) sync_range<FIRST + 1, LAST>();
}

__device__ __forceinline__ void sync_present(uint32_t iters, uint64_t* out) {
  const int wg = consumer_wg();
  const bool timer = wg == 0 && threadIdx.x % 128 == 0;
  Window w;
  __syncthreads();
  if (wg == 1) {
#pragma unroll 1
    for (uint32_t r = 0; r < iters; ++r) {
      arrive_range<1, PRESENT_BARS>();
      lapis::named_bar_sync<PRESENT_BARS + 1, TURN>();  // warpgroup 0 took this round's barriers
    }
  } else if (wg == 0) {
    if (timer) w.open();
#pragma unroll 1
    for (uint32_t r = 0; r < iters; ++r) {
      const uint64_t until = micro::clock_cycles() + PRESENT_SPIN;
      while (micro::clock_cycles() < until) {
      }
      lapis::named_bar_sync<1, TURN>();
      const uint64_t c0 = micro::clock_cycles();
      sync_range<2, PRESENT_BARS>();
      const uint64_t c1 = micro::clock_cycles();
      w.timed += c1 - c0;
      lapis::named_bar_arrive<PRESENT_BARS + 1, TURN>();
    }
    if (timer) w.close(out, false);
  }
  __syncthreads();
}

__device__ __forceinline__ void try_wait(uint32_t iters, uint64_t timeout_ns, uint64_t err_addr, uint64_t* out) {
  __shared__ __align__(8) uint64_t full;
  const uint32_t bar = micro::smem_addr(&full);
  const int wg = consumer_wg();
  const bool timer = wg == 0 && threadIdx.x % 128 == 0;
  Window w;
  if (threadIdx.x == 0) {
    micro::mbar_init(bar, 1);
    micro::mbar_arrive(bar);  // phase 0 (parity 0) complete before anyone waits
  }
  __syncthreads();
  if (wg >= 0) {
    const uint64_t deadline = micro::globaltimer_ns() + timeout_ns;
    lapis::named_bar_sync<1, TURN>();  // the 8 warps start together
    if (timer) w.open();
#pragma unroll UNROLL
    for (uint32_t i = 0; i < iters; ++i) micro::mbar_wait(bar, 0, deadline, err_addr, 1);
    if (timer) w.close(out, true);
  }
  __syncthreads();
}

}  // namespace

// Every kernel: (iters, timeout_ns, err_addr, out), one signature for the host (capture_micro.measure_bar);
// timeout_ns and err_addr are the mbarrier watchdog's (micro_common.cuh), read by micro_bar_try_wait only.
#define MICRO_BAR_ARGS uint32_t iters, uint64_t timeout_ns, uint64_t err_addr, uint64_t* out

extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_hop_imm(MICRO_BAR_ARGS) { hop<0>(iters, out); }
extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_hop_pred(MICRO_BAR_ARGS) { hop<1>(iters, out); }
extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_hop_reg(MICRO_BAR_ARGS) { hop<2>(iters, out); }
extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_sync_all(MICRO_BAR_ARGS) { sync_all(iters, out); }
extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_sync_present(MICRO_BAR_ARGS) {
  sync_present(iters, out);
}
extern "C" __global__ void __launch_bounds__(384, 1) micro_bar_try_wait(MICRO_BAR_ARGS) {
  try_wait(iters, timeout_ns, err_addr, out);
}
