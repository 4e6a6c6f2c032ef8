"""lapis.model.instruction_mix: code regions of a kernel's SASS, their executed counts for a run, the committed mixes."""

import dataclasses
import shutil
from collections import Counter

import pytest

from lapis.errors import CaptureError
from lapis.model import instruction_mix as im
from lapis.model import sass


def _code(lines):
    return [sass.parse_instruction(text, 16 * k) for k, text in enumerate(lines)]


def test_a_wait_that_succeeds_skips_its_retry_path():
    code = _code(["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3", "@P0 BRA 0x40", "CS2R R4, SR_GLOBALTIMERLO",
                  "IADD3 R5, R4, R4, RZ", "FFMA R1, R2, R2, R2"])
    assert im.waits_slow_path(code) == {2, 3}
    code[1] = dataclasses.replace(code[1], predicate="!P0")  # a branch on the wait failing is not the fast path
    assert im.waits_slow_path(code) == set()


def test_nsight_pipes_of_the_uniform_moves():
    assert im.ncu_pipe("R2UR") == "alu" and im.ncu_pipe("UMOV") == "other" and im.ncu_pipe("SYNCS.ARRIVE") == "other"
    assert im.ncu_pipe("FFMA.FTZ") == "fma" and im.ncu_pipe("HGMMA.64x128x16.F32.BF16") == "tensor"


def test_executed_counts_from_the_work_order():
    mix = {"block": {"fma": 10, "tensor_ops": 2, "tensor": 2}, "rescale": {"fma": 64}, "tile": {},
           "straight": {"fma": 1, "tensor_ops": 0}, "load_block": {"lsu": 3}, "load_tile": {}}
    c = im.executed(mix, tiles=2, blocks=8, ctas=2, consumer_warps=4, warps_per_cta=5, tensor_per_block=2,
                    rescale_per_block=0.25)
    # block loop: 8 blocks x 2 tensor / 2 per iteration = 8 iterations, by 4 warps; straight: 5 warps x 2 CTAs
    assert c["fma"] == 4 * 8 * (10 + 0.25 * 64) + 5 * 2 * 1
    assert c["tensor"] == 4 * 8 * 2 and c["lsu"] == 8 * 3 and c["other"] == 0
    with pytest.raises(CaptureError, match="cannot carry"):
        im.executed(dict(mix, straight={"tensor_ops": 100}), 2, 8, 2, 4, 5, 2)


def test_committed_mixes_are_of_these_sources():
    d = im.load()
    assert d["source_sha256"] == im.source_digests(), "rebuild: python -m lapis.model.instruction_mix --write"
    s9 = d["kernels"]["s9"]["regions"]
    # per K/V block: QK and PV, 8 wgmma each; ex2 flavour: 64 scores + 2 corrections on MUFU; the O rescale's
    # 64 FMULs behind the cond_rescale branch
    assert s9["block"]["tensor_ops"] == 16 and s9["block"]["xu"] == 66 and s9["rescale"]["fma"] == 64
    assert d["kernels"]["gemm"]["regions"]["block"]["tensor_ops"] == 4  # block_k 64: 4 k-steps of m64n128k16
    assert d["kernels"]["flash"]["regions"]["block"]["tensor_ops"] == 256  # mma.sync per K/V block and warp


def test_s14s_descriptor_increments_leave_less_uniform_work_in_the_kv_loop():
    k = im.load()["kernels"]
    s13, s14 = k["s13"]["regions"]["block"], k["s14"]["regions"]["block"]
    # s13 rebuilds its 24 descriptors per K/V tile (mask, shift, or on the uniform datapath, and 16 R2UR of Q's
    # descriptors, which Nsight Compute counts on alu); s14 adds a constant per K-step to a base in a uniform register
    assert (s13["uniform"], s14["uniform"]) == (77, 30)
    assert (s13["alu"], s14["alu"]) == (136, 122)
    assert (sum(s13.values()) - s13["tensor_ops"], sum(s14.values()) - s14["tensor_ops"]) == (494, 433)
    # the same loop otherwise: 16 wgmma, 66 MUFU (64 exponentials, 2 corrections)
    assert s13["tensor_ops"] == s14["tensor_ops"] == 16 and s13["xu"] == s14["xu"] == 66


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_a_rebuild_gives_the_committed_mixes():
    built, committed = im.build(), im.load()
    for key, k in committed["kernels"].items():
        assert {r: Counter(c) for r, c in built["kernels"][key]["regions"].items()} == \
            {r: Counter(c) for r, c in k["regions"].items()}, key
