// A warp-specialized persistent GEMM for sm_90a, instrumented with lapis_timeline.cuh: the kernel of the
// schedule examples/ws_gemm.py (WS_GEMM), written as a user writes one, with CUDA and the header only.
//
//   C (M x N, fp32) = A (M x K, bf16, K-major) . B (N x K, bf16, K-major)^T
//
// One CTA per SM walks the 128 x 128 output tiles grid-stride. Warpgroup 0 is the producer: one thread, per
// K block of 64, waits for an empty ring slot (empty[s]), arms full[s] with the slot's bytes and issues one TMA
// box of A (128 x 64) and one of B (128 x 64). Warpgroups 1 and 2 are consumers, 64 rows of the tile each: per
// K block, wait full[s], issue 4 wgmma m64n128k16 and commit them, wait until one group is pending and release
// the previous K block's slot (one K block of wgmma in flight); at the tile's end wait for all, release the
// last slot, store the tile's rows. Ring: STAGES slots of [A 128 x 64 | B 128 x 64] bf16, 128-byte swizzled
// (SW128), 1024-byte aligned; full[s] takes one arrive plus the TMA bytes, empty[s] one arrive per consumer warp.
//
// Timeline (-DTL_ON=1, the default; -DTL_ON=0 builds the plain kernel): roles and ops below, named as the
// schedule names them (ROLE_NAMES / OP_NAMES, which the host runner writes beside the buffer); work item =
// the output tile, k index = the K block. Each iteration opens with a BEGIN record, so iteration sampling
// (Args::iter_every) leaves whole iterations out. The loops time ops with tl.now() and write the records with
// tl.record() off the wgmma critical path (below, before the producer branch).
#include <cuda_bf16.h>
#include <stdint.h>

#include "lapis_timeline.cuh"

#ifndef TL_ON
#define TL_ON 1
#endif

namespace {

constexpr int BM = 128, BN = 128, BK = 64, STAGES = 4, CONSUMERS = 2;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr uint32_t A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr uint32_t ROWS64_BYTES = 64 * BK * 2;  // 64 rows of a SW128 K-major slot
constexpr uint32_t KSTEP_BYTES = 32;            // a k16 step inside the 128-byte swizzle row
// wgmma matrix descriptor of a K-major SW128 tile (PTX ISA "Matrix Descriptor Format"): layout type 1 (128B
// swizzle) in bits 62-63, stride byte offset 1024 >> 4 in bits 32-45, leading byte offset 1 in bits 16-29;
// the start address >> 4 goes in bits 0-13.
constexpr uint64_t DESC_SW128 = (1ull << 62) | (64ull << 32) | (1ull << 16);

// Role and op codes of the timeline (op 0 is lapis_tl::BEGIN).
enum : uint8_t { PRODUCER = 0, CONSUMER0 = 1, CONSUMER1 = 2, ROLES = 3 };
enum : uint8_t { OP_WAIT_EMPTY = 1, OP_ISSUE_TMA = 2, OP_WAIT_FULL = 3, OP_WGMMA = 4, OP_WAIT_WGMMA = 5,
                 OP_STORE_C = 6 };
using Recorder = lapis_tl::Recorder<TL_ON != 0>;

struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// Returns once the phase of `parity` has completed (a fresh barrier counts its phase 1 as complete).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  }
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

__device__ __forceinline__ void fence_acc(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma.mma_async m64n128k16, f32 += bf16 * bf16, A and B from shared memory by descriptor, both K-major
// (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"). scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d)
      : "memory");
}

__device__ __forceinline__ uint64_t desc(uint32_t smem) { return DESC_SW128 | ((smem & 0x3FFFFu) >> 4); }

// The D fragment of m64n128 (PTX ISA wgmma register fragments): register i of thread t holds row
// 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2 * (t % 4) + i % 2.
__device__ __forceinline__ void store_rows(const float (&d)[64], float* C, int ldc, int row0, int col0) {
  const int t = threadIdx.x % 128, row = row0 + 16 * (t / 32) + (t % 32) / 4, col = col0 + 2 * (t % 4);
#pragma unroll
  for (int i = 0; i < 64; i += 4) {
    *reinterpret_cast<float2*>(C + static_cast<int64_t>(row) * ldc + col + 8 * (i / 4)) = make_float2(d[i], d[i + 1]);
    *reinterpret_cast<float2*>(C + static_cast<int64_t>(row + 8) * ldc + col + 8 * (i / 4)) =
        make_float2(d[i + 2], d[i + 3]);
  }
}

}  // namespace

// M, N multiples of 128, K a multiple of 64. Grid: min(tiles, SMs) CTAs of THREADS threads; dynamic shared
// memory STAGES * STAGE_BYTES + 1024 bytes.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    ws_gemm(const __grid_constant__ TensorMap tmap_a, const __grid_constant__ TensorMap tmap_b, float* C, int M,
            int N, int K, const __grid_constant__ lapis_tl::Args tl_args) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  Recorder tl;
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128, tiles_n = N / BN, tiles = (M / BM) * tiles_n, k_blocks = K / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4 * CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    tl.init(tl_args);
  }
  __syncthreads();

  // Recording stays off the critical path: the loops read %clock64 where an op ends (tl.now(): one CS2R, no
  // branch, every thread alike) and write the records later, where the thread waits anyway (the producer after
  // its TMA issue, the consumers while their wgmma run). Whether this thread records is one shared load per
  // CTA (tl.sampled()); iteration sampling is a counter (kb % iter_every == 0), not a division per record.
  const uint32_t iter_every = tl_args.iter_every > 1 ? tl_args.iter_every : 1;
  if (wg == 0) {  // ------------------------------------------------------------------------ producer --
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      const bool rec = tl.sampled();
      int s = 0;
      uint32_t phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int tm = tile / tiles_n, tn = tile % tiles_n;
        uint32_t since = 0;  // K blocks since the last sampled one
        for (int kb = 0; kb < k_blocks; ++kb) {
          const bool rk = rec && since == 0;
          if (++since == iter_every) since = 0;
          const uint64_t t_begin = tl.now();
          mbar_wait(&empty[s], phase ^ 1u);
          const uint64_t t_empty = tl.now();
          const uint32_t slot = ring + s * STAGE_BYTES;
          mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
          tma_load_2d(slot, &tmap_a, kb * BK, tm * BM, &full[s]);
          tma_load_2d(slot + A_BYTES, &tmap_b, kb * BK, tn * BN, &full[s]);
          const uint64_t t_issue = tl.now();
          if (rk) {
            tl.record(tl_args, t_begin, PRODUCER, lapis_tl::BEGIN, lapis_tl::ISSUE, tile, kb);
            tl.record(tl_args, t_empty, PRODUCER, OP_WAIT_EMPTY, lapis_tl::COMPLETE, tile, kb);
            tl.record(tl_args, t_issue, PRODUCER, OP_ISSUE_TMA, lapis_tl::ISSUE, tile, kb);
          }
          if (++s == STAGES) s = 0, phase ^= 1u;
        }
      }
    }
    __syncwarp();
  } else {  // ----------------------------------------------------------------------------- consumers --
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;
    const uint8_t role = CONSUMER0 + c;
    const bool lead = threadIdx.x % 128 == 0, warp_lead = threadIdx.x % 32 == 0;
    const bool rec = lead && tl.sampled();
    const bool last_sampled = (k_blocks - 1) % iter_every == 0;  // the tile's last K block is a sampled one
    int s = 0;
    uint32_t phase = 0;
    float acc[64];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int tm = tile / tiles_n, tn = tile % tiles_n;
      int prev = 0;
      uint32_t since = 0;     // K blocks since the last sampled one
      bool pending = false;   // the previous K block's OP_WAIT_WGMMA record is yet to be written
      uint64_t t_wait = 0;
      for (int kb = 0; kb < k_blocks; ++kb) {
        const bool rk = rec && since == 0;
        if (++since == iter_every) since = 0;
        const uint64_t t_begin = tl.now();
        mbar_wait(&full[s], phase);
        const uint64_t t_full = tl.now();
        const uint32_t a = ring + s * STAGE_BYTES + c * ROWS64_BYTES, b = ring + s * STAGE_BYTES + A_BYTES;
        fence_acc(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks)
          wgmma_m64n128k16(acc, desc(a + ks * KSTEP_BYTES), desc(b + ks * KSTEP_BYTES), kb > 0 || ks > 0);
        wgmma_commit();
        fence_acc(acc);
        const uint64_t t_issue = tl.now();
        // While this K block's wgmma run: the previous block's wait, then this block's records, in time order.
        if (pending) tl.record(tl_args, t_wait, role, OP_WAIT_WGMMA, lapis_tl::COMPLETE, tile, kb - 1);
        if (rk) {
          tl.record(tl_args, t_begin, role, lapis_tl::BEGIN, lapis_tl::ISSUE, tile, kb);
          tl.record(tl_args, t_full, role, OP_WAIT_FULL, lapis_tl::COMPLETE, tile, kb);
          tl.record(tl_args, t_issue, role, OP_WGMMA, lapis_tl::ISSUE, tile, kb);
        }
        pending = false;
        if (kb > 0) {
          wgmma_wait<1>();  // the previous K block's wgmma have read their slot
          t_wait = tl.now();
          pending = rk;
          if (warp_lead) mbar_arrive(&empty[prev]);
        }
        prev = s;
        if (++s == STAGES) s = 0, phase ^= 1u;
      }
      wgmma_wait<0>();
      fence_acc(acc);
      const uint64_t t_drain = tl.now();
      if (warp_lead) mbar_arrive(&empty[prev]);
      if (pending) tl.record(tl_args, t_wait, role, OP_WAIT_WGMMA, lapis_tl::COMPLETE, tile, k_blocks - 1);
      if (rec && last_sampled)
        tl.record(tl_args, t_drain, role, OP_WAIT_WGMMA, lapis_tl::COMPLETE, tile, k_blocks - 1);
      const uint64_t t_store0 = tl.now();
      store_rows(acc, C, N, tm * BM + c * 64, tn * BN);
      const uint64_t t_store = tl.now();
      if (rec) {
        tl.record(tl_args, t_store0, role, lapis_tl::BEGIN, lapis_tl::ISSUE, tile, -1);
        tl.record(tl_args, t_store, role, OP_STORE_C, lapis_tl::ISSUE, tile, -1);
      }
    }
  }
  __syncthreads();  // every role's last record is in before the counts are written
  if (threadIdx.x == 0) tl.finish(tl_args);
}
