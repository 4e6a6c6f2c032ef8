// lapis microbenchmarks, version 2 of the TMA loads: L2 bandwidth of a spread-out, L2-resident tensor
// (lapis capture micro).
//
// Version 1 (micro_tma.cu) re-reads a 4 MiB tensor: every SM hits the same few L2 lines, a hot spot. A GEMM
// streams its operands through most of the L2, so here the tensor is sized to fill most of the 50 MB L2
// (micro_campaign.TMA_TENSOR_BYTES["l2spread"], made resident by the untimed warm-up launch) and CTA c starts at tile
// first_tile + (c / group) * cta_stride (mod tiles): with group = 1 and cta_stride = tiles / CTAs the CTAs
// walk their own stretches of the whole tensor, so the traffic spans both L2 partitions; group > 1 makes
// `group` CTAs read the same box at about the same time (a GEMM's CTAs in one row of tiles sharing A).
//
// One thread per CTA issues `loads` 2D tile loads (cp.async.bulk.tensor.2d ... mbarrier::complete_tx::bytes,
// PTX ISA 9.7.9.25.5.1) through a ring of `depth` stages, one mbarrier per stage; nothing reads the data.
// Tile t is box (t % col_boxes, t / col_boxes % row_boxes). One micro::Record per CTA.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_tma_v3.cu.
#include "micro_common.cuh"

struct alignas(64) TensorMap { uint64_t opaque[16]; };  // CUtensorMap, 128 opaque bytes (cuda.h)

constexpr uint32_t MAX_DEPTH = 8;

__device__ __forceinline__ void tma_load_2d(const TensorMap* map, uint32_t dst, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

extern "C" __global__ void __launch_bounds__(32, 1)
micro_tma_spread(const __grid_constant__ TensorMap map, uint32_t box_bytes, uint32_t box_cols, uint32_t box_rows,
                 uint32_t col_boxes, uint32_t row_boxes, uint32_t loads, uint32_t depth, uint32_t first_tile,
                 uint32_t cta_stride, uint32_t group, uint64_t timeout_ns, uint64_t err_addr, uint64_t* out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[MAX_DEPTH];
  uint32_t base = (micro::smem_addr(smem) + 1023u) & ~1023u;  // 128B swizzle wants 1024 B-aligned stages
  if (threadIdx.x != 0) return;
  for (uint32_t s = 0; s < depth; ++s) micro::mbar_init(micro::smem_addr(&full[s]), 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // inits visible to the async proxy
  uint32_t tiles = col_boxes * row_boxes;
  uint32_t tile = static_cast<uint32_t>((first_tile + uint64_t(blockIdx.x / group) * cta_stride) % tiles);
  micro::Record rec{};
  uint64_t deadline = micro::globaltimer_ns() + timeout_ns;
  rec.ns0 = micro::globaltimer_ns();
  rec.clk0 = micro::clock_cycles();
  for (uint32_t i = 0; i < loads; ++i) {
    uint32_t s = i % depth, bar = micro::smem_addr(&full[s]);
    // phase i / depth - 1 of stage s (parity ((i / depth) - 1) & 1) is load i - depth
    if (i >= depth) micro::mbar_wait(bar, ((i / depth) - 1) & 1, deadline, err_addr, 1);
    micro::mbar_arrive_expect_tx(bar, box_bytes);
    tma_load_2d(&map, base + s * box_bytes, bar, (tile % col_boxes) * box_cols,
                (tile / col_boxes % row_boxes) * box_rows);
    tile = tile + 1 == tiles ? 0 : tile + 1;
  }
  for (uint32_t i = loads > depth ? loads - depth : 0; i < loads; ++i)  // drain: the last depth loads
    micro::mbar_wait(micro::smem_addr(&full[i % depth]), (i / depth) & 1, deadline, err_addr, 2);
  rec.clk1 = micro::clock_cycles();
  rec.ns1 = micro::globaltimer_ns();
  rec.sm = micro::sm_id();
  micro::write_record(out, rec);
}
