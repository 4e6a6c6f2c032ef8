// lapis pipeline helpers: the kernels' mbarrier hand-offs in the words of CUTLASS's PipelineTmaAsync
// (include/cutlass/pipeline/sm90_pipeline.hpp) and of lapis's simulator (lapis/pipeline_sim/pipeline.py).
//
// A ring of STAGES slots has a full barrier per slot (the producer's arrive.expect_tx and the TMA bytes complete its
// phase) and an empty barrier per slot (one arrival per consumer completes it). A mainloop reads:
//   producer:  producer_acquire(empty, ps) -> producer_commit(full, ps, tx_bytes) -> TMA into slot ps.index
//   consumer:  consumer_wait(full, st) -> MMA -> consumer_release(empty, st) -> st.advance()
// A kernel keeps one position per ring, the consumers' (slot 0, phase 0 first). The producer's state is that position
// with the phase flipped, PipelineState(st.index, st.phase ^ 1u): CUTLASS's make_producer_start_state starts the
// producer at phase 1, and a fresh barrier's phase of parity 1 counts as completed (PTX ISA "mbarrier"), so the
// producer's first pass over the ring does not wait. Each function is one mbarrier operation of harness.cuh, inlined;
// every wait keeps the watchdog (HarnessArgs) and takes the barrier's id in the kernel's scheme (Status.barrier).
#pragma once
#include <stdint.h>

#include "harness.cuh"

namespace lapis {

// A position in a ring of STAGES slots: the slot and the parity of its barriers' current phase (CUTLASS's
// PipelineState<Stages> without the token count, which no kernel reads). The caller advances it. The members are
// declared phase first: the kernels' SASS depends on the order (tests/gpu/test_sass.py).
template <int STAGES>
struct PipelineState {
  uint32_t phase = 0;
  int index = 0;

  PipelineState() = default;
  __device__ __forceinline__ PipelineState(int index_, uint32_t phase_) : phase(phase_), index(index_) {}

  __device__ __forceinline__ void advance() {
    if (++index == STAGES) index = 0, phase ^= 1u;  // wrapping the ring flips the parity
  }
};

// Wait until slot ps.index is free: its empty barrier's phase of parity ps.phase completed (ps: the producer's state).
// id: that barrier's id.
template <int STAGES>
__device__ __forceinline__ void producer_acquire(uint64_t* empty, const PipelineState<STAGES>& ps, const HarnessArgs& h,
                                                 uint32_t id) {
  mbar_wait(&empty[ps.index], ps.phase, h, id);
}

// producer_acquire whose retries suspend until the slot frees (mbar_sleep_wait; suspend_ns: the try_wait's
// suspendTimeHint, ns) rather than returning after the hardware's own limit to retry.
template <int STAGES>
__device__ __forceinline__ void producer_sleep_acquire(uint64_t* empty, const PipelineState<STAGES>& ps,
                                                       const HarnessArgs& h, uint32_t id, uint32_t suspend_ns) {
  mbar_sleep_wait(&empty[ps.index], ps.phase, h, id, suspend_ns);
}

// The producer's arrival on slot st.index's full barrier, expecting tx_bytes: the TMA copies issued next complete
// the phase when their bytes land (PTX ISA cp.async.bulk.tensor .mbarrier::complete_tx::bytes).
template <int STAGES>
__device__ __forceinline__ void producer_commit(uint64_t* full, const PipelineState<STAGES>& st, uint32_t tx_bytes) {
  mbar_arrive_expect_tx(&full[st.index], tx_bytes);
}

// The producer's arrival with no bytes to expect: the arrival alone completes the phase (CUTLASS's PipelineAsync).
template <int STAGES>
__device__ __forceinline__ void producer_commit(uint64_t* full, const PipelineState<STAGES>& st) {
  mbar_arrive(&full[st.index]);
}

// Wait until slot st.index holds its bytes: its full barrier's phase of parity st.phase completed. id: its id.
template <int STAGES>
__device__ __forceinline__ void consumer_wait(uint64_t* full, const PipelineState<STAGES>& st, const HarnessArgs& h,
                                              uint32_t id) {
  mbar_wait(&full[st.index], st.phase, h, id);
}

// One consumer's arrival on slot st.index's empty barrier: it is done reading the slot.
template <int STAGES>
__device__ __forceinline__ void consumer_release(uint64_t* empty, const PipelineState<STAGES>& st) {
  mbar_arrive(&empty[st.index]);
}

// consumer_wait and consumer_release on a ring whose barrier array starts at shared::cta address `full` / `empty`
// (smem_addr of the array, 8 bytes a slot), held in a register by the caller.
template <int STAGES>
__device__ __forceinline__ void consumer_wait(uint32_t full, const PipelineState<STAGES>& st, const HarnessArgs& h,
                                              uint32_t id) {
  mbar_wait(full + 8u * st.index, st.phase, h, id);
}

// consumer_wait without the watchdog, as CUTLASS's PipelineTmaAsync::consumer_wait spins (mbar_spin_wait).
template <int STAGES>
__device__ __forceinline__ void consumer_spin_wait(uint32_t full, const PipelineState<STAGES>& st) {
  mbar_spin_wait(full + 8u * st.index, st.phase);
}

// Whether slot st.index already holds its bytes, without waiting (mbarrier.test_wait; CUTLASS's consumer_test_wait):
// a consumer that tests early waits later only if this said no.
template <int STAGES>
__device__ __forceinline__ bool consumer_test_wait(uint32_t full, const PipelineState<STAGES>& st) {
  return mbar_test_wait(full + 8u * st.index, st.phase);
}

template <int STAGES>
__device__ __forceinline__ void consumer_release(uint32_t empty, const PipelineState<STAGES>& st) {
  mbar_arrive(empty + 8u * st.index);
}

}  // namespace lapis
