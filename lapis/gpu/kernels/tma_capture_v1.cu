// lapis TMA capture kernel, version 1.
//
// Loads up to 4 boxes of one tensor map into shared memory with
// cp.async.bulk.tensor (PTX ISA 9.7.9.25) and dumps the raw bytes of a
// sentinel-filled region around them, plus the 32-bit shared-window
// addresses, so that the host can compare every byte with a model.
//
// Versioned: never edit this file once a capture made with it is committed.
// A change means tma_capture_v2.cu; old captures keep naming v1.
#include <stdint.h>

// CUtensorMap is 128 opaque bytes, 64 B aligned (cuda.h); declared here so the
// kernel needs no driver header.
struct alignas(64) TensorMap { uint64_t opaque[16]; };

enum Status : uint32_t { OK = 0, TIMEOUT = 1 };

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void tma_load(const TensorMap* map, uint32_t dst, uint32_t bar,
                                         int rank, const int* c) {
  uint64_t m = reinterpret_cast<uint64_t>(map);
  switch (rank) {
    case 1:
      asm volatile(
          "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2}], [%3];" ::"r"(dst), "l"(m), "r"(c[0]), "r"(bar) : "memory");
      break;
    case 2:
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(bar)
          : "memory");
      break;
    case 3:
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst), "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]),
          "r"(bar) : "memory");
      break;
    case 4:
      asm volatile(
          "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst), "l"(m), "r"(c[0]), "r"(c[1]),
          "r"(c[2]), "r"(c[3]), "r"(bar) : "memory");
      break;
    default:
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(dst), "l"(m), "r"(c[0]), "r"(c[1]),
          "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(bar) : "memory");
      break;
  }
}

// Wait for phase 0 of the mbarrier, giving up after timeout_ns (watchdog: a
// wrong expect_tx must come back as data, never as a hang).
__device__ __forceinline__ uint32_t wait_phase0(uint32_t bar, uint64_t timeout_ns) {
  uint64_t deadline = globaltimer_ns() + timeout_ns;
  while (true) {
    uint32_t done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
        : "=r"(done) : "r"(bar) : "memory");
    if (done) return OK;
    if (globaltimer_ns() > deadline) return TIMEOUT;
  }
}

// One CTA of 128 threads. Dynamic smem: slack for 1024 B alignment + region_bytes.
// region: [R, R + region_bytes), R = first 1024 B-aligned shared address.
// Box b lands at R + dst_offsets[b]; coords[b*5 + i] is its coordinate i (innermost first).
// info[0] status, [1] R (shared window), [2..5] destination addresses, [6] wait ns.
extern "C" __global__ void __launch_bounds__(128, 1)
tma_capture(const __grid_constant__ TensorMap map, int rank, int nboxes,
            const int* __restrict__ coords, const uint32_t* __restrict__ dst_offsets,
            uint32_t region_bytes, uint32_t tx_bytes, uint32_t sentinel_word,
            uint64_t timeout_ns, uint32_t settle_ns, uint8_t* __restrict__ out,
            uint32_t* __restrict__ info) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ __align__(8) uint64_t bar_storage;
  uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint32_t region = (raw + 1023u) & ~1023u;
  uint8_t* region_ptr = smem + (region - raw);
  uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar_storage));

  // 1. Sentinel over the whole region (destinations and guard bands).
  uint32_t* words = reinterpret_cast<uint32_t*>(region_ptr);
  for (uint32_t i = threadIdx.x; i < region_bytes / 4; i += blockDim.x) words[i] = sentinel_word;
  // Order these generic-proxy stores before the async-proxy (TMA) writes.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  uint32_t status = OK;
  uint64_t t0 = 0, t1 = 0;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(tx_bytes)
                 : "memory");
    t0 = globaltimer_ns();
    for (int b = 0; b < nboxes; ++b) tma_load(&map, region + dst_offsets[b], bar, rank, coords + 5 * b);
    status = wait_phase0(bar, timeout_ns);
    t1 = globaltimer_ns();
    // Let any bytes beyond expect_tx land before the dump.
    while (globaltimer_ns() < t1 + settle_ns) {
    }
  }
  __syncthreads();

  // 2. Dump the region.
  for (uint32_t i = threadIdx.x; i < region_bytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(out)[i] = words[i];
  if (threadIdx.x == 0) {
    info[0] = status;
    info[1] = region;
    for (int b = 0; b < 4; ++b) info[2 + b] = b < nboxes ? region + dst_offsets[b] : 0u;
    info[6] = static_cast<uint32_t>(t1 - t0);
  }
}
