// lapis microbenchmark: the SM clock under the power limit while the tensor pipe, the FMA pipe and the HBM are held
// at a controlled duty (lapis/gpu/capture_clock.py --dram). micro_clock_v1.cu's kernel with a fifth warpgroup that
// streams loads from HBM.
//
// micro_clock_dram(tensor_permille, fma_permille, dram_permille, period_ns, run_ns, settle_ns, sink_flag, stream,
// stream_words, out, sink): one CTA per SM (the host asks for over half the SM's shared memory, so no SM holds two),
// 5 warpgroups (640 threads).
//   Warpgroups 0 and 1 drive the tensor pipe: bursts of 8 dense bf16 wgmma.mma_async m64n128k16 (PTX ISA
//   9.7.15.5) from 128B-swizzled K-major shared-memory tiles, one commit group per burst, at most two groups in
//   flight; the 8 wgmmas cycle through the tile's 4 K-steps so the operands change from one to the next.
//   Warpgroups 2 and 3 drive the FMA pipe: bursts of CHAINS x FMA_UNROLL independent FFMAs per thread
//   (x = x * x + c, c = -1.9: bounded in [-1.9, 1.71] and chaotic, so the operand bits keep toggling).
//   Time is cut into periods of period_ns from the CTA's start (%globaltimer). In each period a warpgroup runs
//   bursts while the time is below period start + duty x period_ns, then sleeps (nanosleep) to the period's end;
//   duty = permille / 1000 (0: sleep the whole period). The warpgroup's leader reads the time and every warp of
//   the warpgroup follows its decision (a named barrier per warpgroup), so the four warps issue the same wgmmas
//   (.sync.aligned). Everything stops at the first period that starts after run_ns.
//   Warpgroup 4 streams HBM: bursts of STREAM_UNROLL 16-byte ld.global.cg per thread (L2 only, PTX ISA 9.7.9.8)
//   over `stream` (stream_words 16-byte words, far larger than L2, so every load misses it), each CTA walking its
//   own slice, the loaded words XOR-folded so the loads stay live.
// Record per CTA (out + RECORD_WORDS x blockIdx.x, u64 words): clk0, clk1, ns0, ns1 (%clock64 and %globaltimer at
//   the first period boundary at or after settle_ns, and after the last period), sm (%smid), then wgmma count of
//   warpgroups 0 and 1, FFMA warp-instruction count of warpgroups 2 and 3 and bytes warpgroup 4 loaded, all over
//   the periods after the settle mark. Probed clock = (clk1 - clk0) / (ns1 - ns0) GHz.
// `sink_flag` is 0 at run time: the results are stored only behind it, so the compiler keeps the work.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_clock_dram_v2.cu.
#include <stdint.h>

#include "micro_common.cuh"

namespace {

constexpr int RECORD_WORDS = 8;
constexpr int THREADS = 640;
constexpr int STREAM_UNROLL = 16;  // 16-byte loads per thread per burst: 32 KiB a burst per SM
constexpr int WGMMA_PER_BURST = 8;
constexpr int CHAINS = 8;
constexpr int FMA_UNROLL = 32;  // FFMAs per chain per burst
// lapis/gpu/capture_micro.py DESC_A and DESC_B[128] (start address relative to the 1024 B-aligned region, which
// the kernel adds): A a 64 x 64 bf16 tile at offset 0, B a 128 x 64 one at 8192, both K-major, 128B swizzle.
constexpr uint64_t DESC_A = 0x4000004000010000ull;
constexpr uint64_t DESC_B = 0x4000004000010200ull;
constexpr uint32_t OPERAND_BYTES = 8192 + 128 * 128;
constexpr uint32_t SLEEP_MAX_NS = 1000;  // one nanosleep at most this long: the period end is not overslept much

__device__ __forceinline__ void fill_operands(uint8_t* region, uint32_t bytes) {
  uint32_t* w = reinterpret_cast<uint32_t*>(region);
  // finite bf16 pairs of magnitude [0.5, 1), random sign and mantissa
  for (uint32_t i = threadIdx.x; i < bytes / 4; i += blockDim.x) w[i] = ((i * 2654435761u) & 0x807F807Fu) | 0x3F003F00u;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic stores before wgmma's async-proxy reads
}

__device__ __forceinline__ void wgmma_n128(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
      "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b)
      : "memory");
}

__device__ __forceinline__ void tensor_burst(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int u = 0; u < WGMMA_PER_BURST; ++u) {
    uint64_t k = 2 * (u % 4);  // K-step u % 4: 32 bytes further into the swizzled rows (start address >> 4)
    wgmma_n128(d, a + k, b + k);
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}

__device__ __forceinline__ void fma_burst(float (&x)[CHAINS]) {
#pragma unroll
  for (int u = 0; u < FMA_UNROLL; ++u) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) asm volatile("fma.rn.f32 %0, %0, %0, 0fBFF33333;" : "+f"(x[c]));  // x*x-1.9
  }
}

// Sleep until `until` (%globaltimer ns).
__device__ __forceinline__ void sleep_until(uint64_t until) {
  for (uint64_t now = micro::globaltimer_ns(); now < until; now = micro::globaltimer_ns()) {
    uint64_t left = until - now;
    uint32_t ns = left < SLEEP_MAX_NS ? static_cast<uint32_t>(left) : SLEEP_MAX_NS;
    asm volatile("nanosleep.u32 %0;" ::"r"(ns));
  }
}

// One burst of warpgroup 4: STREAM_UNROLL 16-byte loads per thread from `p`, lanes side by side (coalesced), all
// issued before any is used, XOR-folded into acc.
__device__ __forceinline__ void stream_burst(const uint4* p, uint32_t& acc) {
  uint4 v[STREAM_UNROLL];
#pragma unroll
  for (int u = 0; u < STREAM_UNROLL; ++u)
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                 : "l"(p + u * 128 + threadIdx.x % 128));
#pragma unroll
  for (int u = 0; u < STREAM_UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
}

__device__ __forceinline__ void wg_sync(uint32_t wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");  // barrier 0 is __syncthreads'
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
micro_clock_dram(uint32_t tensor_permille, uint32_t fma_permille, uint32_t dram_permille, uint32_t period_ns,
                 uint64_t run_ns, uint64_t settle_ns, uint32_t sink_flag, const uint4* stream, uint64_t stream_words,
                 uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ uint64_t t_start;
  __shared__ uint32_t go[5][2];         // the leader's decision per warpgroup, double-buffered by burst parity
  __shared__ unsigned long long done[5];  // bursts per warpgroup after the settle mark
  __shared__ uint64_t mark[2];          // clk0, ns0
  uint32_t raw = micro::smem_addr(smem), region = (raw + 1023u) & ~1023u;
  fill_operands(smem + (region - raw), OPERAND_BYTES);
  // warp-uniform by construction (shfl from lane 0), so ptxas sees no divergent path around the wgmmas
  const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const bool leader = threadIdx.x % 128 == 0;
  const bool tensor = wg < 2, dram = wg == 4;
  const uint32_t permille = tensor ? tensor_permille : dram ? dram_permille : fma_permille;
  // this CTA's slice of the stream, in bursts of 128 x STREAM_UNROLL words
  const uint64_t burst_words = 128ull * STREAM_UNROLL, slice = stream_words / gridDim.x / burst_words * burst_words;
  uint64_t at = 0;
  uint32_t acc = 0;
  if (leader) done[wg] = 0;
  if (threadIdx.x == 0) {
    t_start = micro::globaltimer_ns();
    mark[0] = micro::clock_cycles();  // replaced at the settle mark (the host keeps settle_ns below run_ns)
    mark[1] = t_start;
  }
  __syncthreads();
  const uint64_t t0 = t_start, settle_at = t0 + settle_ns;
  const uint64_t a = DESC_A + (region >> 4), b = DESC_B + (region >> 4);
  float d[64];
#pragma unroll
  for (int r = 0; r < 64; ++r) {
    d[r] = 0.f;
    asm volatile("" : "+f"(d[r])::"memory");  // the zeros are written before the first wgmma.fence
  }
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = -1.5f + 3e-4f * (threadIdx.x % 128) + 0.37f * c;  // inside [-1.9, 1.71]
  bool marked = false;
  unsigned long long bursts = 0;
  uint32_t parity = 0;
  for (uint64_t k = 0;; ++k) {
    const uint64_t start = t0 + k * period_ns;
    if (start >= t0 + run_ns) break;
    const bool counting = start >= settle_at;
    if (counting && !marked) {
      marked = true;
      if (threadIdx.x == 0) {
        mark[1] = micro::globaltimer_ns();
        mark[0] = micro::clock_cycles();
      }
    }
    const uint64_t busy_end = start + static_cast<uint64_t>(period_ns) * permille / 1000;
    while (permille) {
      if (leader) go[wg][parity] = micro::globaltimer_ns() < busy_end;
      wg_sync(wg);
      const bool more = __shfl_sync(0xffffffffu, go[wg][parity], 0);
      parity ^= 1;
      if (!more) break;
      if (tensor) {
        tensor_burst(d, a, b);
      } else if (dram) {
        stream_burst(stream + blockIdx.x * slice + at, acc);
        at = at + burst_words < slice ? at + burst_words : 0;
      } else {
        fma_burst(x);
      }
      bursts += counting;
    }
    if (tensor) asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");  // the pipe idles while we sleep
    sleep_until(start + period_ns);
  }
  if (leader) done[wg] = bursts;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t clk1 = micro::clock_cycles(), ns1 = micro::globaltimer_ns();
    uint64_t* o = out + RECORD_WORDS * blockIdx.x;
    o[0] = mark[0];
    o[1] = clk1;
    o[2] = mark[1];
    o[3] = ns1;
    o[4] = micro::sm_id();
    o[5] = (done[0] + done[1]) * WGMMA_PER_BURST;
    o[6] = (done[2] + done[3]) * 4 * CHAINS * FMA_UNROLL;  // 4 warps per warpgroup
    o[7] = done[4] * 128ull * STREAM_UNROLL * 16;           // bytes
  }
  if (sink_flag) {
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < 64; ++r) s += d[r];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += x[c];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s + static_cast<float>(acc);
  }
}
