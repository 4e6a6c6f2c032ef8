// lapis shared-memory bank-conflict capture kernels, version 1.
//
// Each kernel is one warp issuing exactly ONE shared-memory instruction of its kind at per-lane byte
// offsets read from global memory; nothing else touches shared memory, so Nsight Compute's
// l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum counts that instruction's wavefronts alone.
// Loaded values are always stored to global memory (no shared traffic) so that ptxas can neither drop nor
// sink the load.
// Versioned: never edit once a capture made with it is committed; a change means v2.
#include <stdint.h>

#define PROLOGUE                                                                    \
  extern __shared__ __align__(1024) uint8_t smem[];                                 \
  uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));           \
  uint32_t a = base + offsets[threadIdx.x];

extern "C" __global__ void lds32(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
  out[threadIdx.x] = v;
}

extern "C" __global__ void lds64(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(a));
  out[threadIdx.x] = v0 ^ v1;
}

extern "C" __global__ void lds128(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1, v2, v3;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a));
  out[threadIdx.x] = v0 ^ v1 ^ v2 ^ v3;
}

extern "C" __global__ void sts32(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(a), "r"(threadIdx.x) : "memory");
}

extern "C" __global__ void sts128(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t t = threadIdx.x;
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(a), "r"(t) : "memory");
}

extern "C" __global__ void ldsm_x1(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(v) : "r"(a));
  out[threadIdx.x] = v;
}

extern "C" __global__ void ldsm_x2(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(a));
  out[threadIdx.x] = v0 ^ v1;
}

extern "C" __global__ void ldsm_x4(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1, v2, v3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a));
  out[threadIdx.x] = v0 ^ v1 ^ v2 ^ v3;
}

extern "C" __global__ void ldsm_x4_trans(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t v0, v1, v2, v3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(a));
  out[threadIdx.x] = v0 ^ v1 ^ v2 ^ v3;
}

extern "C" __global__ void stsm_x4(const uint32_t* offsets, uint32_t* out, int flag) {
  PROLOGUE
  uint32_t t = threadIdx.x;
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %1, %1, %1};" ::"r"(a), "r"(t) : "memory");
}
