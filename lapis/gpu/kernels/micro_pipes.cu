// lapis microbenchmark: one SASS instruction class at a time, its issue throughput per SM sub-partition (SMSP) and
// its dependent-issue latency (lapis/gpu/capture_pipes.py; constants of lapis/model/smsp.py).
//
// Classes (the SASS each compiles to on sm_90a, checked by tests/gpu/test_capture_pipes.py with cuobjdump):
//   ffma FFMA, fmul FMUL, fadd FADD, fmnmx FMNMX, ex2 MUFU.EX2, f2fp F2FP.BF16.F32.PACK_AB, shfl SHFL.BFLY,
//   iadd3 IADD3, lop3 LOP3.LUT, lds128 LDS.128, ldsm LDSM.16.M88.4, hmma HMMA.16816.F32.BF16.
// micro_pipes_<class>_tput(iters, sink_flag, out, sink): every thread runs CHAINS independent chains, iters x UNROLL
//   instructions each; one micro::Record per CTA (clock64 / %globaltimer around the loop, thread 0, after a
//   __syncthreads). Launched with 1..16 warps per SMSP (blockDim 128..1024, two CTAs per SM above 8 warps/SMSP).
//   Work per CTA: blockDim / 32 x iters x UNROLL x CHAINS warp-instructions.
// micro_pipes_<class>_lat(iters, sink_flag, out, sink): one warp, one chain of iters x UNROLL dependent
//   instructions; out[0] = clock64 cycles of the loop (lane 0). lds128 chases pointers (each 16 B slot holds its
//   own shared address); ldsm's chain adds one integer add per step (next address = base + loaded word, the buffer
//   is zero): its latency is (cycles per step) - (iadd3 latency).
// `sink_flag` is 0 at run time: results are stored only behind it, so the compiler keeps the work, no store is made.
//
// Versioned: never edit once a capture made with it is committed; a change means micro_pipes_v2.cu.
#include <stdint.h>

#include "micro_common.cuh"

namespace {

constexpr int UNROLL = 8;
constexpr int SMEM_BYTES = 16384;  // lds128 / ldsm buffer: 16 B slot k holds (its shared address, 0, 0, 0) for
                                   // lds128 (CHASE), zeros for ldsm

struct Ffma {
  using T = float;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return threadIdx.x * 1e-3f + c; }
  __device__ static void step(T& x, uint32_t, int) {
    asm volatile("fma.rn.f32 %0, %0, 0f3F7FF972, 0f3A83126F;" : "+f"(x));  // x * 0.9999 + 1e-3
  }
  __device__ static float fold(T x) { return x; }
};

struct Fmul {
  using T = float;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return 1.f + threadIdx.x * 1e-6f + c; }
  __device__ static void step(T& x, uint32_t, int) { asm volatile("mul.rn.f32 %0, %0, 0f3F7FFFEF;" : "+f"(x)); }
  __device__ static float fold(T x) { return x; }
};

struct Fadd {
  using T = float;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return threadIdx.x * 1e-3f + c; }
  __device__ static void step(T& x, uint32_t, int) { asm volatile("add.rn.f32 %0, %0, 0f3A83126F;" : "+f"(x)); }
  __device__ static float fold(T x) { return x; }
};

// max with a different (run-time) operand each step, so no two steps fold into one.
struct Fmnmx {
  using T = float;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return -1e30f + c; }
  __device__ static void step(T& x, uint32_t salt, int u) {
    float y = __uint_as_float(0x3F800000u + salt + u);  // salt = 0: 1.0f + u ulps
    asm volatile("max.f32 %0, %0, %1;" : "+f"(x) : "f"(y));
  }
  __device__ static float fold(T x) { return x; }
};

struct Ex2 {
  using T = float;
  static constexpr int CHAINS = 4;
  __device__ static T init(int c) { return -0.25f - threadIdx.x * 1e-5f - c * 0.01f; }
  __device__ static void step(T& x, uint32_t, int) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x)); }
  __device__ static float fold(T x) { return x; }
};

// two fp32 -> one bf16x2 word; the word is the next step's two inputs (the mov.b32 is a register rename).
struct F2fp {
  using T = uint32_t;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return 0x3F803F80u + threadIdx.x + c; }
  __device__ static void step(T& x, uint32_t, int) {
    asm volatile("{ .reg .f32 t; mov.b32 t, %0; cvt.rn.bf16x2.f32 %0, t, t; }" : "+r"(x));
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

struct Shfl {
  using T = uint32_t;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return threadIdx.x * 7u + c; }
  __device__ static void step(T& x, uint32_t, int u) {
    asm volatile("shfl.sync.bfly.b32 %0, %0, %1, 0x1f, 0xffffffff;" : "+r"(x) : "n"(1));
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

// three-input add with run-time operands (salt = 0 keeps the values; the compiler cannot know it).
struct Iadd3 {
  using T = uint32_t;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return threadIdx.x * 13u + c; }
  __device__ static void step(T& x, uint32_t salt, int u) {
    asm volatile("{ .reg .u32 t; add.u32 t, %1, %2; add.u32 %0, %0, t; }" : "+r"(x) : "r"(salt), "r"(salt ^ u));
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

struct Lop3 {
  using T = uint32_t;
  static constexpr int CHAINS = 8;
  __device__ static T init(int c) { return threadIdx.x * 13u + c; }
  __device__ static void step(T& x, uint32_t salt, int u) {
    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x) : "r"(salt + u), "r"(salt ^ (u * 3)));
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

// ld.shared.v4: every 16 B slot holds its own shared address in word 0 (setup_smem), so x = word 0 chases it.
struct Lds128 {
  using T = uint32_t;
  static constexpr int CHAINS = 4;
  __device__ static void step(T& x, uint32_t, int) {
    uint32_t a, b, c, d;
    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(x)
                 : "memory");
    x = a | (b & c & d & 0u);  // b, c, d are 0 in the buffer; keeps the 128-bit load
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

// ldmatrix x4 from a zero buffer: next row address = row address + first loaded word (0).
struct Ldsm {
  using T = uint32_t;
  static constexpr int CHAINS = 4;
  __device__ static void step(T& x, uint32_t, int) {
    uint32_t a, b, c, d;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(x) : "memory");
    (void)b, (void)c, (void)d;  // unused: the x4 load stays (asm volatile)
    x += a;
  }
  __device__ static float fold(T x) { return __uint_as_float(x); }
};

struct Frag {
  float d[4];
};

struct Hmma {
  using T = Frag;
  static constexpr int CHAINS = 4;
  __device__ static T init(int c) { return Frag{{0.f, 0.f, 0.f, 0.f}}; }
  __device__ static void step(T& x, uint32_t salt, int) {
    const uint32_t a = 0x3F803F80u ^ salt, b = 0x3F803F80u;  // bf16 pairs of 1.0
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(x.d[0]), "+f"(x.d[1]), "+f"(x.d[2]), "+f"(x.d[3])
        : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));
  }
  __device__ static float fold(T x) { return x.d[0] + x.d[1] + x.d[2] + x.d[3]; }
};

template <class P, bool CHASE>
__device__ __forceinline__ void tput(uint32_t iters, uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  const uint32_t base = micro::smem_addr(smem);
  for (uint32_t i = threadIdx.x; i < SMEM_BYTES / 4; i += blockDim.x) w[i] = (CHASE && i % 4 == 0) ? base + i * 4 : 0u;
  const uint32_t salt = sink_flag;  // 0 at run time
  typename P::T x[P::CHAINS];
#pragma unroll
  for (int c = 0; c < P::CHAINS; ++c) {
    if constexpr (__is_same(P, Lds128) || __is_same(P, Ldsm))
      // lds128: chain c of thread t reads slot c x blockDim + t (a warp's 32 slots are contiguous: no bank conflict)
      x[c] = CHASE ? base + ((c * blockDim.x + threadIdx.x) * 16u) % SMEM_BYTES : base + (threadIdx.x % 16) * 16u;
    else
      x[c] = P::init(c);
  }
  micro::Record rec{};
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.ns0 = micro::globaltimer_ns();
    rec.clk0 = micro::clock_cycles();
  }
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int c = 0; c < P::CHAINS; ++c) P::step(x[c], salt, u);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    rec.clk1 = micro::clock_cycles();
    rec.ns1 = micro::globaltimer_ns();
    rec.sm = micro::sm_id();
    micro::write_record(out, rec);
  }
  if (sink_flag) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < P::CHAINS; ++c) s += P::fold(x[c]);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  }
}

template <class P, bool CHASE>
__device__ __forceinline__ void lat(uint32_t iters, uint32_t sink_flag, uint64_t* out, float* sink) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint32_t* w = reinterpret_cast<uint32_t*>(smem);
  const uint32_t base = micro::smem_addr(smem);
  for (uint32_t i = threadIdx.x; i < SMEM_BYTES / 4; i += blockDim.x) w[i] = (CHASE && i % 4 == 0) ? base + i * 4 : 0u;
  const uint32_t salt = sink_flag;
  typename P::T x;
  if constexpr (__is_same(P, Lds128) || __is_same(P, Ldsm))
    x = CHASE ? base + (threadIdx.x * 16u) % SMEM_BYTES : base + (threadIdx.x % 16) * 16u;
  else
    x = P::init(0);
  __syncwarp();
  const uint64_t c0 = micro::clock_cycles();
  for (uint32_t i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) P::step(x, salt, u);
  }
  const uint64_t c1 = micro::clock_cycles();
  if (threadIdx.x == 0) out[0] = c1 - c0;
  if (sink_flag) sink[threadIdx.x] = P::fold(x);
}

}  // namespace

// micro_pipes_<name>_tput / _lat: see the header comment. Dynamic shared memory: SMEM_BYTES (every kernel).
#define MICRO_PIPES(NAME, P, CHASE)                                                                        \
  extern "C" __global__ void __launch_bounds__(1024, 2)                                                    \
      micro_pipes_##NAME##_tput(uint32_t iters, uint32_t sink_flag, uint64_t* out, float* sink) {          \
    tput<P, CHASE>(iters, sink_flag, out, sink);                                                           \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(32, 1)                                                      \
      micro_pipes_##NAME##_lat(uint32_t iters, uint32_t sink_flag, uint64_t* out, float* sink) {           \
    lat<P, CHASE>(iters, sink_flag, out, sink);                                                            \
  }

MICRO_PIPES(ffma, Ffma, false)
MICRO_PIPES(fmul, Fmul, false)
MICRO_PIPES(fadd, Fadd, false)
MICRO_PIPES(fmnmx, Fmnmx, false)
MICRO_PIPES(ex2, Ex2, false)
MICRO_PIPES(f2fp, F2fp, false)
MICRO_PIPES(shfl, Shfl, false)
MICRO_PIPES(iadd3, Iadd3, false)
MICRO_PIPES(lop3, Lop3, false)
MICRO_PIPES(lds128, Lds128, true)
MICRO_PIPES(ldsm, Ldsm, false)
MICRO_PIPES(hmma, Hmma, false)
