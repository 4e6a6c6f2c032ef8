"""The timed kernels speak the pipeline's words: attention_h200.cu and gemm_ws.cu hand slots over through
pipeline.cuh (producer_acquire, producer_commit, consumer_wait, consumer_release), the names lapis.pipeline_sim
gives the same operations. What is left of the raw mbarrier calls: the inits and their fence, and one predicated
release (attention's Q slot, where a PipelineState argument changes ptxas's output), written twice: through the
slot's pointer, and through its shared address held in a register (s18's hoisted barrier addresses). The consumer's
two helpers come in both forms too, and s19's early test (consumer_test_wait) and s20's spin (consumer_spin_wait) in
the held-address form; s21's producer waits suspend until their slot frees (producer_sleep_acquire)."""

import re
from collections import Counter

import pytest

from lapis.gpu.attention_plan import KERNELS

HELPERS = ("producer_acquire", "producer_commit", "consumer_wait", "consumer_release")
RAW = re.compile(r"\b(mbar_\w+)\(")
LEFT = {"attention_h200.cu": {"mbar_init": 6, "mbar_init_fence": 1, "mbar_arrive_if": 2},
        "gemm_ws.cu": {"mbar_init": 2, "mbar_init_fence": 1}}


def code(name: str) -> str:
    """The file without its // comments."""
    return re.sub(r"//[^\n]*", "", (KERNELS / name).read_text())


@pytest.mark.parametrize("name", sorted(LEFT))
def test_ring_operations_go_through_the_pipeline_helpers(name):
    src = code(name)
    assert '#include "pipeline.cuh"' in (KERNELS / name).read_text()
    assert Counter(RAW.findall(src)) == LEFT[name]
    assert all(re.search(rf"\b{h}\(", src) for h in HELPERS)


def test_each_helper_is_one_mbarrier_operation_of_the_harness():
    src = code("pipeline.cuh")
    defs = re.findall(r"^__device__ __forceinline__ (?:void|bool) (\w+)\(.*?\) \{\n(.*?)\n\}", src, re.S | re.M)
    # producer_commit with and without tx bytes; consumer_wait and consumer_release on a barrier array and on a held
    # shared address
    assert sorted(n for n, _ in defs) == sorted(HELPERS + ("producer_commit", "consumer_wait", "consumer_release",
                                                           "consumer_test_wait", "consumer_spin_wait",
                                                           "producer_sleep_acquire"))
    for _, body in defs:
        assert len(RAW.findall(body)) == 1 and body.count(";") == 1, body
    assert "mbar_wait(&empty[ps.index], ps.phase, h, id)" in src  # the producer's state: CUTLASS's parity
    assert "mbar_sleep_wait(&empty[ps.index], ps.phase, h, id, suspend_ns)" in src
    assert "mbar_wait(&full[st.index], st.phase, h, id)" in src
    assert "mbar_wait(full + 8u * st.index, st.phase, h, id)" in src  # 8 bytes an mbarrier
    assert "mbar_spin_wait(full + 8u * st.index, st.phase)" in src
