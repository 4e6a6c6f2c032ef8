"""The GEMM kernel's compiled-in plan equals lapis's layout model, and the kernels build without spills."""

import json
import shutil

import pytest

from lapis.gpu import bench_gemm, gemm_plan, gen_wgmma_ss, harness


@pytest.fixture(scope="module")
def plan():
    return gemm_plan.plan()


def test_committed_header_and_json_are_the_generator_output(plan):
    assert gemm_plan.HEADER.read_text() == gemm_plan.header(plan)
    assert json.loads(gemm_plan.PLAN_JSON.read_text()) == plan
    assert gen_wgmma_ss.OUT.read_text() == gen_wgmma_ss.generate()


def test_compiled_constants_equal_lapis_output(plan):
    compiled = gemm_plan.parse_header(gemm_plan.HEADER.read_text())
    assert compiled == gemm_plan.constants(plan)
    # The same numbers from PTX's rules by hand: K-major SW128 bf16, 8-row atoms of 8 x 128 B.
    desc = (1 << 62) | ((1024 >> 4) << 32) | ((16 >> 4) << 16)  # layout type 1 = 128B, SBO 1024 B, LBO 16 B
    assert compiled["A_DESC"] == compiled["B128_DESC"] == compiled["B256_DESC"] == desc
    assert compiled["KSTEP_BYTES"] == compiled["B256_KSTEP_BYTES"] == 16 * 2  # one k16 step of bf16
    assert compiled["A_ROWS64_OFFSET"] == 64 * 128  # 64 rows of 128 B
    assert (compiled["A_SLOT_BYTES"], compiled["B128_SLOT_BYTES"], compiled["B256_SLOT_BYTES"]) == (
        128 * 64 * 2, 128 * 64 * 2, 256 * 64 * 2)
    assert (compiled["A_BOX_K"], compiled["A_BOX_ROWS"], compiled["B256_BOX_ROWS"]) == (64, 128, 256)
    assert plan["tensor_map"]["swizzle_code"] == 3 and plan["tensor_map"]["dtype_code"] == 9  # cuda.h enums
    assert compiled["OP_START"] == 0 and compiled["ROLE_CONSUMER1"] == 2


def test_every_wgmma_read_agrees_with_the_tma_boxes(plan):
    verdicts = gemm_plan.agreement(plan)
    assert [(n, r0) for n, r0, _ in verdicts] == [("A", 0), ("A", 64), ("B128", 0), ("B256", 0)]
    assert all(v.ok for _, _, v in verdicts)


def test_agreement_check_catches_a_wrong_sbo(plan):
    bad = dict(plan, a=dict(plan["a"], desc_fixed=plan["a"]["desc_fixed"] & ~(0x3FFF << 32) | (32 << 32)))
    a0 = gemm_plan.agreement(bad)[0][2]
    assert not a0.ok and any(name == "sbo" for name, _ in a0.steps[0].causes)


@pytest.mark.parametrize("size", bench_gemm.DEFAULT_SIZES)
def test_bench_tensor_maps_pass_every_encode_rule(plan, size):
    from lapis.layouts.tma import TensorMap
    for box in [plan["a"]["box"]] + [b["box"] for b in plan["b"].values()]:
        t = TensorMap("bf16", (size, size), (2 * size,), tuple(box), swizzle="128B", l2="256B")
        assert t.box_bytes == box[0] * box[1] * 2


def test_variants_fit_shared_memory(plan):
    for v in bench_gemm.VARIANTS.values():
        assert bench_gemm.smem_bytes(v, plan) + 1024 <= 227 * 1024  # + the kernel's 1 KiB static smem


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_kernels_build_without_spills(kernel_cache):
    plain, ptxas = harness.build(bench_gemm.KERNEL, {}, kernel_cache)
    timeline, ptxas_tl = harness.build(bench_gemm.KERNEL, {"LAPIS_TIMELINE": 1}, kernel_cache)
    hang, ptxas_hang = harness.build(bench_gemm.HANG_KERNEL, {}, kernel_cache)
    assert plain != timeline and plain.exists() and hang.exists()
    names = {bench_gemm.kernel_name(v) for v in bench_gemm.VARIANTS.values()}
    assert names <= set(ptxas) and names <= set(ptxas_tl)
    assert {"mbarrier_ok", "hang_mbarrier", "hang_bar_sync"} <= set(ptxas_hang)
    for report in (ptxas, ptxas_tl):
        for name, r in report.items():
            assert r["spill_stores"] == r["spill_loads"] == 0, (name, r)
    # 2 consumer warpgroups: 384 threads x 168 registers (the whole 64K file) for setmaxnreg to rebalance
    assert ptxas["gemm_ws_s4_c2_n128_bf16"]["registers"] == 168
    assert harness.build(bench_gemm.KERNEL, {}, kernel_cache)[0] == plain  # cached by source hash + defines
