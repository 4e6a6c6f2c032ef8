// lapis microbenchmark: FFMA and FMNMX streams beside wgmma in flight, from sparse to dense. As micro_beside_v2.cu
// (whose source this file includes, with v1's: the same leader/follower protocol, record, wgmma units and classes),
// at the chain counts v2 does not run: FFMA on 4 to 8 dependent chains and FMNMX on 3 and 4. With FFMA's
// dependent-issue latency of about 4 cycles, 4 chains keep the FMA pipe about busy; 5 to 8 leave the warp an
// instruction ready in every cycle. v2's 1 to 3 chains and v1's 8 independent steps per unit (a different loop
// shape) bracket them: the sweep says how the tensor pipe's share of the SMSP's cycles moves with the stream's
// issue density in one kernel family.
//
// Kernels micro_sweep_<class>_c<CH>(...): micro_beside_v1.cu's signature and launch (256 threads, one CTA per SM,
// >= 81 KiB dynamic shared memory); the kernels of micro_beside_v1.cu and _v2.cu are in this module too.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_beside_v4.cu.
#include "micro_beside_v2.cu"

#define MICRO_SWEEP(NAME, C, CH)                                                                                \
  extern "C" __global__ void __launch_bounds__(256, 1) micro_sweep_##NAME##_c##CH(                             \
      uint32_t roles, uint32_t lead, uint32_t follow, float, uint32_t f, uint64_t* out, float* sink) {        \
    beside<Chains<C, CH>>(roles, lead, follow, f, out, sink);                                                 \
  }

MICRO_SWEEP(ffma, Ffma, 4)
MICRO_SWEEP(ffma, Ffma, 5)
MICRO_SWEEP(ffma, Ffma, 6)
MICRO_SWEEP(ffma, Ffma, 7)
MICRO_SWEEP(ffma, Ffma, 8)
MICRO_SWEEP(fmnmx, Fmnmx, 3)
MICRO_SWEEP(fmnmx, Fmnmx, 4)
