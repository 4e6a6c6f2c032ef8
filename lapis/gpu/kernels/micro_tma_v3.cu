// lapis microbenchmarks, version 3 of the TMA loads: one attention K/V tile as a set of boxes (lapis capture micro).
//
// An attention kernel loads a 128-row x 128-column bf16 K or V tile (32 KiB) as the boxes its shared-memory
// layout allows: with no swizzle a canonical layout needs boxes 16 B wide (8 bf16), so a K-major tile is 16 boxes
// of 128 rows and an MN-major one 256 boxes of 8 x 8 (the b200-attention progression's kernels 1-2, its
// smem_layout_noswizzle.cuh); with the 128B swizzle a box is 128 B wide (64 bf16), so 2 boxes of 128 rows, or 32
// of 8 rows (kernels 3 on). This kernel times those sets: per tile, one thread issues every box of part A, then
// every box of part B (cp.async.bulk.tensor.2d ... mbarrier::complete_tx::bytes, PTX ISA 9.7.9.25.5.1), all onto
// one mbarrier that expects the tile pair's bytes, through a ring of `depth` stages (depth 1: issue, wait, repeat,
// as a serial kernel does). Part A reads box (a_cols x a_rows elements) and part B (b_cols x b_rows), each over
// `cols` elements of `rows_per_tile` tensor rows; both maps cover the same L2-resident tensor. Nothing reads the
// landed data.
//
// CTA c loads the tiles (c * cta_stride + i) % tiles_total, i < tiles. One micro::Record per CTA.
// micro_tma_tile takes the box shapes as arguments (a run-time loop per box); micro_tma_tile_<set> has them at
// compile time, its box loops unrolled as a kernel with fixed tiles issues them (the b200-attention kernels' loops
// over constexpr counts), so the two tell the issuing thread's cost from the TMA unit's.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_tma_v4.cu.
#include "micro_common.cuh"

struct alignas(64) TensorMap { uint64_t opaque[16]; };  // CUtensorMap, 128 opaque bytes (cuda.h)

constexpr uint32_t MAX_DEPTH = 4;

__device__ __forceinline__ void tma_load_2d(const TensorMap* map, uint32_t dst, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// Every box of one part of the tile whose first tensor row is row0, packed from dst on in issue order (each box
// lands at a multiple of its own size: 1024 B-aligned for the 128B swizzle's boxes).
__device__ __forceinline__ uint32_t load_part(const TensorMap* map, uint32_t dst, uint32_t bar, uint32_t row0,
                                              uint32_t box_cols, uint32_t box_rows, uint32_t box_bytes,
                                              uint32_t cols, uint32_t rows) {
  for (uint32_t r = 0; r < rows; r += box_rows) {
    for (uint32_t c = 0; c < cols; c += box_cols) {
      tma_load_2d(map, dst, bar, static_cast<int>(c), static_cast<int>(row0 + r));
      dst += box_bytes;
    }
  }
  return dst;
}

// The tile loop of both kernels: Load(dst, bar, row0) issues one tile pair's boxes.
template <class Load>
__device__ __forceinline__ void tile_loop(Load load, uint32_t stage_bytes, uint32_t rows_per_tile,
                                          uint32_t tiles_total, uint32_t tiles, uint32_t depth, uint32_t cta_stride,
                                          uint64_t timeout_ns, uint64_t err_addr, uint64_t* out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[MAX_DEPTH];
  uint32_t base = (micro::smem_addr(smem) + 1023u) & ~1023u;
  if (threadIdx.x != 0) return;
  for (uint32_t s = 0; s < depth; ++s) micro::mbar_init(micro::smem_addr(&full[s]), 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // inits visible to the async proxy
  uint32_t tile = static_cast<uint32_t>((uint64_t(blockIdx.x) * cta_stride) % tiles_total);
  micro::Record rec{};
  uint64_t deadline = micro::globaltimer_ns() + timeout_ns;
  rec.ns0 = micro::globaltimer_ns();
  rec.clk0 = micro::clock_cycles();
  for (uint32_t i = 0; i < tiles; ++i) {
    uint32_t s = i % depth, bar = micro::smem_addr(&full[s]);
    // phase i / depth - 1 of stage s (parity ((i / depth) - 1) & 1) is tile i - depth
    if (i >= depth) micro::mbar_wait(bar, ((i / depth) - 1) & 1, deadline, err_addr, 1);
    micro::mbar_arrive_expect_tx(bar, stage_bytes);
    load(base + s * stage_bytes, bar, tile * rows_per_tile);
    tile = tile + 1 == tiles_total ? 0 : tile + 1;
  }
  for (uint32_t i = tiles > depth ? tiles - depth : 0; i < tiles; ++i)  // drain: the last depth tiles
    micro::mbar_wait(micro::smem_addr(&full[i % depth]), (i / depth) & 1, deadline, err_addr, 2);
  rec.clk1 = micro::clock_cycles();
  rec.ns1 = micro::globaltimer_ns();
  rec.sm = micro::sm_id();
  micro::write_record(out, rec);
}

extern "C" __global__ void __launch_bounds__(32, 1)
micro_tma_tile(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, uint32_t a_cols,
               uint32_t a_rows, uint32_t b_cols, uint32_t b_rows, uint32_t cols, uint32_t rows_per_tile,
               uint32_t tiles_total, uint32_t tiles, uint32_t depth, uint32_t cta_stride, uint64_t timeout_ns,
               uint64_t err_addr, uint64_t* out) {
  const uint32_t a_box = a_cols * a_rows * 2u, b_box = b_cols * b_rows * 2u, part = cols * rows_per_tile * 2u;
  auto load = [&](uint32_t dst, uint32_t bar, uint32_t row0) {
    load_part(&map_a, dst, bar, row0, a_cols, a_rows, a_box, cols, rows_per_tile);
    load_part(&map_b, dst + part, bar, row0, b_cols, b_rows, b_box, cols, rows_per_tile);
  };
  tile_loop(load, 2u * part, rows_per_tile, tiles_total, tiles, depth, cta_stride, timeout_ns, err_addr, out);
}

// One part's boxes at compile-time shapes (COLS x ROWS elements, 128 x 128 per part), unrolled.
template <int COLS, int ROWS>
__device__ __forceinline__ void load_part_fixed(const TensorMap* map, uint32_t dst, uint32_t bar, uint32_t row0) {
#pragma unroll
  for (int r = 0; r < 128; r += ROWS) {
#pragma unroll
    for (int c = 0; c < 128; c += COLS) {
      tma_load_2d(map, dst + (r / ROWS * (128 / COLS) + c / COLS) * COLS * ROWS * 2, bar, c,
                  static_cast<int>(row0) + r);
    }
  }
}

#define MICRO_TMA_TILE_FIXED(SET, AC, AR, BC, BR)                                                                  \
  extern "C" __global__ void __launch_bounds__(32, 1) micro_tma_tile_##SET(                                        \
      const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, uint32_t rows_per_tile,   \
      uint32_t tiles_total, uint32_t tiles, uint32_t depth, uint32_t cta_stride, uint64_t timeout_ns,             \
      uint64_t err_addr, uint64_t* out) {                                                                          \
    auto load = [&](uint32_t dst, uint32_t bar, uint32_t row0) {                                                   \
      load_part_fixed<AC, AR>(&map_a, dst, bar, row0);                                                            \
      load_part_fixed<BC, BR>(&map_b, dst + 128 * 128 * 2, bar, row0);                                            \
    };                                                                                                             \
    tile_loop(load, 2u * 128 * 128 * 2, rows_per_tile, tiles_total, tiles, depth, cta_stride, timeout_ns,         \
              err_addr, out);                                                                                      \
  }

MICRO_TMA_TILE_FIXED(noswz, 8, 128, 8, 8)
MICRO_TMA_TILE_FIXED(rows16, 8, 128, 8, 128)
MICRO_TMA_TILE_FIXED(sw128, 64, 128, 64, 8)
MICRO_TMA_TILE_FIXED(sw128big, 64, 128, 64, 128)
