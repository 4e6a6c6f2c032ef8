// lapis microbenchmarks, version 1: SM-core rates and latencies (lapis capture micro).
//
// Rate kernels (fma, ex2, mma.sync, shared-memory reads) run one CTA per SM (the host asks for enough
// dynamic shared memory that a second CTA cannot fit) and write one micro::Record per CTA; the host
// divides the work of a CTA by its clock64 cycles. Latency kernels (timer reads, mbarrier ping-pong,
// bar.sync) run one CTA and report cycles over a known count. `sink_flag` is 0 at run time: results are
// stored only behind it, so the compiler must keep the work but no store is made.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_core_v2.cu.
#include "micro_common.cuh"

#define RATE_PROLOGUE                     \
  micro::Record rec{};                    \
  __syncthreads();                        \
  if (threadIdx.x == 0) {                 \
    rec.ns0 = micro::globaltimer_ns();    \
    rec.clk0 = micro::clock_cycles();     \
  }

#define RATE_EPILOGUE                     \
  __syncthreads();                        \
  if (threadIdx.x == 0) {                 \
    rec.clk1 = micro::clock_cycles();     \
    rec.ns1 = micro::globaltimer_ns();    \
    rec.sm = micro::sm_id();              \
    micro::write_record(out, rec);        \
  }

// Cost of one read of %globaltimer (which = 0) or %clock64 (which = 1): one warp, `iters` x 32 reads
// back to back, XOR-folded so none is dead. out[0] = cycles for all reads (lane 0).
extern "C" __global__ void __launch_bounds__(32, 1)
micro_timer_read(uint32_t iters, uint32_t which, uint32_t sink_flag, uint64_t* out) {
  uint64_t acc = 0;
  __syncwarp();
  uint64_t c0 = micro::clock_cycles();
  if (which == 0) {
    for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
      for (int u = 0; u < 32; ++u) acc ^= micro::globaltimer_ns();
    }
  } else {
    for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
      for (int u = 0; u < 32; ++u) acc ^= micro::clock_cycles();
    }
  }
  uint64_t c1 = micro::clock_cycles();
  if (threadIdx.x == 0) out[0] = c1 - c0;
  if (sink_flag) out[1 + threadIdx.x] = acc;
}

// fma.rn.f32 throughput: 8 independent chains per thread, `iters` x 8 FMAs per chain.
extern "C" __global__ void __launch_bounds__(1024, 1)
micro_fma_rate(uint32_t iters, float a, float b, uint32_t sink_flag, uint64_t* out, float* sink) {
  float x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] = threadIdx.x * 1e-3f + c;
  RATE_PROLOGUE
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
#pragma unroll
      for (int c = 0; c < 8; ++c) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x[c]) : "f"(a), "f"(b));
    }
  }
  RATE_EPILOGUE
  if (sink_flag) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) s += x[c];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  }
}

// ex2.approx.ftz.f32 (MUFU.EX2) throughput: 4 independent chains per thread, `iters` x 8 ex2 per chain.
// Each ex2 is followed by one mul.f32 by `scale` (-0.5) so the chain stays in [-0.5, 0]: the FMA pipe
// has 8x the MUFU rate, so the multiply does not bound the loop.
extern "C" __global__ void __launch_bounds__(1024, 1)
micro_ex2_rate(uint32_t iters, float scale, uint32_t sink_flag, uint64_t* out, float* sink) {
  float x[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) x[c] = -0.25f - threadIdx.x * 1e-5f - c * 0.01f;
  RATE_PROLOGUE
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
#pragma unroll
      for (int c = 0; c < 4; ++c)
        asm volatile("ex2.approx.ftz.f32 %0, %0;\n\tmul.f32 %0, %0, %1;" : "+f"(x[c]) : "f"(scale));
    }
  }
  RATE_EPILOGUE
  if (sink_flag) sink[blockIdx.x * blockDim.x + threadIdx.x] = x[0] + x[1] + x[2] + x[3];
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 throughput (PTX ISA 9.7.14.5.14): 4 independent
// accumulators per warp, `iters` x 8 MMAs per accumulator. 4096 FLOP per MMA.
extern "C" __global__ void __launch_bounds__(512, 1)
micro_mma_sync_rate(uint32_t iters, uint32_t a_bits, uint32_t b_bits, uint32_t sink_flag, uint64_t* out,
                    float* sink) {
  float d[4][4] = {};
  uint32_t a0 = a_bits, a1 = a_bits ^ threadIdx.x, a2 = a_bits, a3 = a_bits ^ 0x00010001u;
  uint32_t b0 = b_bits, b1 = b_bits ^ 0x00020002u;
  RATE_PROLOGUE
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
#pragma unroll
      for (int c = 0; c < 4; ++c)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  RATE_EPILOGUE
  if (sink_flag) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < 4; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  }
}

// Shared-memory read bandwidth: ld.volatile.shared.v4.u32 (volatile: ptxas must not merge the loads of
// successive iterations), thread t reads the 16 B at t * 16 + k * 16 KiB of a 64 KiB buffer (a warp reads
// 512 contiguous bytes: no bank conflict), `iters` x 4 loads per thread, folded into 4 XOR accumulators.
extern "C" __global__ void __launch_bounds__(1024, 1)
micro_smem_read(uint32_t iters, uint32_t sink_flag, uint64_t* out, uint32_t* sink) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  for (uint32_t i = threadIdx.x; i < 65536 / 4; i += blockDim.x) w[i] = i * 2654435761u;
  uint32_t base = micro::smem_addr(smem) + threadIdx.x * 16;
  uint32_t acc[4] = {0, 0, 0, 0};
  RATE_PROLOGUE
#pragma unroll 2  // more would keep > 64 registers live (1024 threads: 64 registers each)
  for (uint32_t i = 0; i < iters; ++i) {
    uint32_t v[4][4];
    asm volatile(
        "ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%16];\n\t"
        "ld.volatile.shared.v4.u32 {%4, %5, %6, %7}, [%16+16384];\n\t"
        "ld.volatile.shared.v4.u32 {%8, %9, %10, %11}, [%16+32768];\n\t"
        "ld.volatile.shared.v4.u32 {%12, %13, %14, %15}, [%16+49152];"
        : "=r"(v[0][0]), "=r"(v[0][1]), "=r"(v[0][2]), "=r"(v[0][3]), "=r"(v[1][0]), "=r"(v[1][1]),
          "=r"(v[1][2]), "=r"(v[1][3]), "=r"(v[2][0]), "=r"(v[2][1]), "=r"(v[2][2]), "=r"(v[2][3]),
          "=r"(v[3][0]), "=r"(v[3][1]), "=r"(v[3][2]), "=r"(v[3][3])
        : "r"(base)
        : "memory");
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[k] ^= v[k][0] ^ v[k][1] ^ v[k][2] ^ v[k][3];
  }
  RATE_EPILOGUE
  if (sink_flag) sink[blockIdx.x * blockDim.x + threadIdx.x] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
}

// mbarrier arrive-to-wake latency, by ping-pong between warp 0 and warp 1 (64 threads, one CTA):
// lane 0 of one warp arrives (count 1), the whole other warp waits with try_wait.parity, then answers on
// the second barrier. out[0] = clock64 cycles of warp 0 for `iters` round trips (2 hops each).
extern "C" __global__ void __launch_bounds__(64, 1)
micro_mbarrier_pingpong(uint32_t iters, uint64_t timeout_ns, uint64_t err_addr, uint64_t* out) {
  __shared__ __align__(8) uint64_t bars[2];
  uint32_t ping = micro::smem_addr(&bars[0]), pong = micro::smem_addr(&bars[1]);
  if (threadIdx.x == 0) {
    micro::mbar_init(ping, 1);
    micro::mbar_init(pong, 1);
  }
  __syncthreads();
  uint64_t deadline = micro::globaltimer_ns() + timeout_ns;
  uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint64_t c0 = micro::clock_cycles();
  for (uint32_t i = 0; i < iters; ++i) {
    uint32_t parity = i & 1;  // phase i of each barrier completes in round trip i
    if (warp == 0) {
      if (lane == 0) micro::mbar_arrive(ping);
      micro::mbar_wait(pong, parity, deadline, err_addr, 1);
      __syncwarp();  // every lane has seen phase i before lane 0 can start phase i + 1
    } else {
      micro::mbar_wait(ping, parity, deadline, err_addr, 2);
      __syncwarp();
      if (lane == 0) micro::mbar_arrive(pong);
    }
  }
  uint64_t c1 = micro::clock_cycles();
  if (threadIdx.x == 0) out[0] = c1 - c0;
}

// Named-barrier round trip: all threads of the CTA (blockDim.x, a multiple of 32) run `iters` x bar.sync 1
// (PTX ISA 9.7.13.1). out[0] = clock64 cycles of thread 0.
extern "C" __global__ void __launch_bounds__(1024, 1)
micro_named_barrier(uint32_t iters, uint64_t* out) {
  uint32_t n = blockDim.x;
  __syncthreads();
  uint64_t c0 = micro::clock_cycles();
  for (uint32_t i = 0; i < iters; ++i) asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory");
  uint64_t c1 = micro::clock_cycles();
  if (threadIdx.x == 0) out[0] = c1 - c0;
}
