// lapis microbenchmark: one instruction class beside wgmma in flight, at a controlled issue density. As
// micro_beside_v1.cu (whose source this file includes: the same leader/follower protocol, record, wgmma units and
// classes), but the class unit runs CH dependent chains instead of eight independent ones: UNROLL x CH
// instructions per thread, each waiting for the one before it on its chain. With FFMA's dependent-issue latency of
// about 4 cycles, one chain issues about once in 4 cycles, two about twice, three about three times; FMNMX (the ALU
// pipe, half rate) likewise. Against v1's dense streams, the tensor pipe's rate beside these says whether a sparse
// stream costs the tensor pipe one cycle per issue, as a dense one does.
//
// Kernels micro_density_<class>_c<CH>(...): micro_beside_v1.cu's signature and launch (256 threads, one CTA per
// SM, >= 81 KiB dynamic shared memory); the kernels of micro_beside_v1.cu are in this module too.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_beside_v3.cu.
#include "micro_beside_v1.cu"

namespace {

// C's step on the first CH chains only: the loops are unrolled, so the steps on chains CH..7 fold away and each
// unit is UNROLL x CH instructions on CH dependent chains.
template <class C, int CH>
struct Chains {
  static_assert(CH >= 1 && CH <= CHAINS, "1 to CHAINS chains");
  __device__ static void step(float& x, uint32_t salt, int u, int c) {
    if (c < CH) C::step(x, salt, u, c);
  }
};

}  // namespace

#define MICRO_DENSITY(NAME, C, CH)                                                                              \
  extern "C" __global__ void __launch_bounds__(256, 1) micro_density_##NAME##_c##CH(                           \
      uint32_t roles, uint32_t lead, uint32_t follow, float, uint32_t f, uint64_t* out, float* sink) {        \
    beside<Chains<C, CH>>(roles, lead, follow, f, out, sink);                                                 \
  }

MICRO_DENSITY(ffma, Ffma, 1)
MICRO_DENSITY(ffma, Ffma, 2)
MICRO_DENSITY(ffma, Ffma, 3)
MICRO_DENSITY(fmnmx, Fmnmx, 1)
MICRO_DENSITY(fmnmx, Fmnmx, 2)
