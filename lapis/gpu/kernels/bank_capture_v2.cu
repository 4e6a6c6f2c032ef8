// lapis shared-memory bank-conflict capture kernels, version 2: the ldmatrix/stmatrix variants v1 lacks
// (ldmatrix x1/x2 .trans, stmatrix x1/x2 and .trans x1/x2/x4). Same method as v1: one warp, exactly one
// shared-memory instruction per kernel at per-lane byte offsets from global memory; loaded values always go
// to global memory so ptxas keeps the load. Versioned: never edit once a capture of it is committed.
#include <stdint.h>

#define PROLOGUE                                                                    \
  extern __shared__ __align__(1024) uint8_t smem[];                                 \
  uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));           \
  uint32_t a = base + offsets[threadIdx.x];                                         \
  uint32_t t = threadIdx.x;

extern "C" __global__ void ldsm_x1_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(v) : "r"(a));
  out[t] = v;
}

extern "C" __global__ void ldsm_x2_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(a));
  out[t] = v0 ^ v1;
}

extern "C" __global__ void stsm_x1(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(a), "r"(t) : "memory");
}

extern "C" __global__ void stsm_x2(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %1};" ::"r"(a), "r"(t) : "memory");
}

extern "C" __global__ void stsm_x1_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(a), "r"(t) : "memory");
}

extern "C" __global__ void stsm_x2_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %1};" ::"r"(a), "r"(t) : "memory");
}

extern "C" __global__ void stsm_x4_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %1, %1, %1};" ::"r"(a), "r"(t) : "memory");
}
