// lapis microbenchmarks, version 1 of the combined load: dense wgmma while TMA loads stream from L2, in the
// same CTA on every SM (lapis capture micro).
//
// A warp-specialized GEMM runs its tensor cores and its TMA loads together; alone, each reaches its peak
// (wgmma.sustained, tma.l2spread.*), together they share the SM's clock and power. 288 threads per CTA:
// - consumers, warpgroups 0 and 1: the wgmma.sustained pattern (micro_wgmma.cu) with m64nNk16 SS (A and B
//   from shared memory, lapis::wgmma_m64nNk16_bf16_ss): `iters` commit groups of 8 wgmmas, wait_group 1,
//   clock64 and %globaltimer around the loop (thread 0), then a named barrier and a `done` flag;
// - producer, warp 8 lane 0: TMA 2D box loads (cp.async.bulk.tensor.2d, PTX ISA 9.7.9.25.5.1) from the
//   spread tensor of micro_tma_v2.cu into a ring of `depth` stages (a smem region apart from the wgmma
//   operands), each mbarrier-completed (expect_tx), until `done` is set; then it drains the ring.
// CTA c starts at tile first_tile + c * cta_stride. out, 8 words per CTA: consumer clk0, clk1, ns0, ns1, smid,
// then the producer's loads issued and its %globaltimer start and end (all loads completed).
//
// Versioned: never edit once a capture made with it is committed; a change means micro_mix_v2.cu.
#include "micro_common.cuh"
#include "wgmma_bf16_ss.cuh"

struct alignas(64) TensorMap { uint64_t opaque[16]; };  // CUtensorMap, 128 opaque bytes (cuda.h)

constexpr uint32_t MAX_DEPTH = 8;
constexpr uint32_t CONSUMER_THREADS = 256;
constexpr uint32_t OPERAND_BYTES = 64 * 64 * 2 + 256 * 128;  // A 64 x 64 bf16 at 0, B N x 64 at 8 KiB (N <= 256)
constexpr uint32_t OUT_WORDS = 8;

__device__ __forceinline__ void tma_load_2d(const TensorMap* map, uint32_t dst, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b);
template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[64], uint64_t a, uint64_t b) {
  lapis::wgmma_m64n128k16_bf16_ss(d, a, b, 1);
}
template <>
__device__ __forceinline__ void wgmma_ss<256>(float (&d)[128], uint64_t a, uint64_t b) {
  lapis::wgmma_m64n256k16_bf16_ss(d, a, b, 1);
}

template <int N>
__device__ void consumer(uint32_t iters, uint64_t a, uint64_t b, volatile uint32_t* done, uint64_t* out,
                         float* sink) {
  float d[N / 2];
#pragma unroll
  for (int r = 0; r < N / 2; ++r) {
    d[r] = 0.f;
    asm volatile("" : "+f"(d[r])::"memory");  // the zeros are written before the wgmma.fence below
  }
  uint64_t clk0 = micro::clock_cycles(), ns0 = micro::globaltimer_ns();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < 8; ++u) wgmma_ss<N>(d, a, b);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");  // both warpgroups done
  if (threadIdx.x == 0) {
    uint64_t* o = out + OUT_WORDS * blockIdx.x;
    o[1] = micro::clock_cycles();
    o[3] = micro::globaltimer_ns();
    o[0] = clk0;
    o[2] = ns0;
    o[4] = micro::sm_id();
    *done = 1;
  }
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < N / 2; ++r) s += d[r];
  if (s == 12345.f) sink[blockIdx.x * CONSUMER_THREADS + threadIdx.x] = s;  // keeps the wgmmas live
}

__device__ void producer(const TensorMap* map, uint32_t ring, uint64_t* full, uint32_t box_bytes,
                         uint32_t box_cols, uint32_t box_rows, uint32_t col_boxes, uint32_t row_boxes,
                         uint32_t depth, uint32_t tile, uint32_t max_loads, volatile uint32_t* done,
                         uint64_t timeout_ns, uint64_t err_addr, uint64_t* out) {
  uint32_t tiles = col_boxes * row_boxes, i = 0;
  uint64_t ns0 = micro::globaltimer_ns(), deadline = ns0 + timeout_ns;
  for (; i < max_loads && *done == 0; ++i) {
    uint32_t s = i % depth, bar = micro::smem_addr(&full[s]);
    // phase i / depth - 1 of stage s (parity ((i / depth) - 1) & 1) is load i - depth
    if (i >= depth) micro::mbar_wait(bar, ((i / depth) - 1) & 1, deadline, err_addr, 11);
    micro::mbar_arrive_expect_tx(bar, box_bytes);
    tma_load_2d(map, ring + s * box_bytes, bar, (tile % col_boxes) * box_cols, (tile / col_boxes % row_boxes) * box_rows);
    tile = tile + 1 == tiles ? 0 : tile + 1;
  }
  for (uint32_t j = i > depth ? i - depth : 0; j < i; ++j)  // drain: the last depth loads
    micro::mbar_wait(micro::smem_addr(&full[j % depth]), (j / depth) & 1, deadline, err_addr, 12);
  uint64_t* o = out + OUT_WORDS * blockIdx.x;
  o[5] = i;
  o[6] = ns0;
  o[7] = micro::globaltimer_ns();
}

template <int N>
__device__ void mix(const TensorMap* map, uint32_t box_bytes, uint32_t box_cols, uint32_t box_rows,
                    uint32_t col_boxes, uint32_t row_boxes, uint32_t depth, uint32_t first_tile,
                    uint32_t cta_stride, uint32_t max_loads, uint32_t iters, uint64_t desc_a, uint64_t desc_b,
                    uint64_t timeout_ns, uint64_t err_addr, uint64_t* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[MAX_DEPTH];
  __shared__ uint32_t done;
  uint32_t raw = micro::smem_addr(smem), region = (raw + 1023u) & ~1023u;
  uint32_t* w = reinterpret_cast<uint32_t*>(smem + (region - raw));
  // finite bf16 operands of magnitude [0.5, 1), as micro_wgmma.cu's fill_operands
  for (uint32_t i = threadIdx.x; i < OPERAND_BYTES / 4; i += blockDim.x) w[i] = ((i * 2654435761u) & 0x807F807Fu) | 0x3F003F00u;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic stores before wgmma's async-proxy reads
  if (threadIdx.x == CONSUMER_THREADS) {
    done = 0;
    for (uint32_t s = 0; s < depth; ++s) micro::mbar_init(micro::smem_addr(&full[s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // inits visible to the async proxy
  }
  __syncthreads();
  if (threadIdx.x < CONSUMER_THREADS) {
    consumer<N>(iters, desc_a + (region >> 4), desc_b + (region >> 4), &done, out, sink);
  } else if (threadIdx.x == CONSUMER_THREADS) {
    uint32_t tile = static_cast<uint32_t>((first_tile + uint64_t(blockIdx.x) * cta_stride) % (col_boxes * row_boxes));
    producer(map, region + OPERAND_BYTES, full, box_bytes, box_cols, box_rows, col_boxes, row_boxes, depth, tile,
             max_loads, &done, timeout_ns, err_addr, out);
  }
}

#define MIX_KERNEL(N)                                                                                           \
  extern "C" __global__ void __launch_bounds__(CONSUMER_THREADS + 32, 1) micro_mix_wgmma_tma_n##N(             \
      const __grid_constant__ TensorMap map, uint32_t box_bytes, uint32_t box_cols, uint32_t box_rows,          \
      uint32_t col_boxes, uint32_t row_boxes, uint32_t depth, uint32_t first_tile, uint32_t cta_stride,         \
      uint32_t max_loads, uint32_t iters, uint64_t desc_a, uint64_t desc_b, uint64_t timeout_ns,               \
      uint64_t err_addr, uint64_t* out, float* sink) {                                                         \
    mix<N>(&map, box_bytes, box_cols, box_rows, col_boxes, row_boxes, depth, first_tile, cta_stride, max_loads, \
           iters, desc_a, desc_b, timeout_ns, err_addr, out, sink);                                            \
  }

MIX_KERNEL(128)
MIX_KERNEL(256)
