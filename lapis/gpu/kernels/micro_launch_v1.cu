// lapis microbenchmark, launch version 1: how long an SM takes from one CTA's end to the next CTA's start when
// only one CTA fits (the non-persistent attention kernels' case: their CTAs run back to back per SM).
//
// Each CTA (384 threads, the host's dynamic shared memory request keeps one per SM) records %globaltimer and
// %clock64 on entry (thread 0, first instruction) and on exit (thread 0, after a __syncthreads and `spin_ns` of
// busy waiting, so every CTA lasts long enough that the SMs fill in order); the host sorts each SM's CTAs by
// start and takes the gap from one's exit record to the next's entry record: the retire and launch in between.
// Record: micro::Record per CTA.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_launch_v2.cu.
#include "micro_common.cuh"

extern "C" __global__ void __launch_bounds__(384, 1) micro_cta_turnover(uint32_t spin_ns, uint64_t* out) {
  micro::Record rec{};
  if (threadIdx.x == 0) {
    rec.ns0 = micro::globaltimer_ns();
    rec.clk0 = micro::clock_cycles();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint64_t until = rec.ns0 + spin_ns;
    while (micro::globaltimer_ns() < until) {
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.clk1 = micro::clock_cycles();
    rec.ns1 = micro::globaltimer_ns();
    rec.sm = micro::sm_id();
    micro::write_record(out, rec);
  }
}
