"""The attention kernels' compiled-in plan equals lapis's layout model, every wgmma read agrees with the TMA
boxes, and the kernels build without spills."""

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from lapis.gpu import attention_plan, gen_wgmma_rs, harness


@pytest.fixture(scope="module")
def plan():
    return attention_plan.plan()


def test_committed_header_json_and_wrappers_are_the_generator_output(plan):
    assert attention_plan.HEADER.read_text() == attention_plan.header(plan)
    assert json.loads(attention_plan.PLAN_JSON.read_text()) == plan
    assert gen_wgmma_rs.OUT.read_text() == gen_wgmma_rs.generate()


def test_compiled_constants_equal_lapis_output_and_ptx_rules_by_hand(plan):
    c = attention_plan.parse_header(attention_plan.HEADER.read_text())
    assert c == attention_plan.constants(plan)
    # K-major SW128 bf16 (Q, K): layout type 1 (128B) in bits 62-63, SBO 1024 B (8 rows x 128 B), LBO 16 B (unused)
    k_major = (1 << 62) | ((1024 >> 4) << 32) | ((16 >> 4) << 16)
    assert c["Q_DESC"] == c["K128_DESC"] == c["K64_DESC"] == k_major
    # MN-major SW128 (V, D contiguous): LBO = bytes between 64-wide D atoms = one box (BN keys x 128 B),
    # SBO = bytes between 8-key groups = 1024
    assert c["V128_DESC"] == (1 << 62) | ((1024 >> 4) << 32) | ((128 * 128 >> 4) << 16)
    assert c["V64_DESC"] == (1 << 62) | ((1024 >> 4) << 32) | ((64 * 128 >> 4) << 16)
    # K-steps: 32 B within a 64-column box, then the second box; V: 16 keys = 2 atoms of 8 rows x 128 B
    assert c["Q_KSTEP_START"] == [0, 32, 64, 96, 8192, 8224, 8256, 8288]
    assert c["K128_KSTEP_START"] == [0, 32, 64, 96, 16384, 16416, 16448, 16480]
    assert c["V128_KSTEP_START"] == [2048 * s for s in range(8)] and c["V64_KSTEP_START"] == [0, 2048, 4096, 6144]
    assert (c["Q_SLOT_BYTES"], c["K128_SLOT_BYTES"], c["V128_SLOT_BYTES"]) == (64 * 128 * 2, 128 * 128 * 2,
                                                                            128 * 128 * 2)
    assert (c["Q_BOX_BYTES"], c["K128_BOX_BYTES"], c["Q_BOXES"]) == (64 * 64 * 2, 128 * 64 * 2, 2)
    assert plan["tensor_map"]["swizzle_code"] == 3 and plan["tensor_map"]["dtype_code"] == 9  # cuda.h enums
    assert c["OP_START"] == 0 and c["ROLE_CONSUMER0"] == 1 and c["ROLE_CONSUMER1"] == 2


def test_q128_halves_by_hand(plan):
    c = attention_plan.parse_header(attention_plan.HEADER.read_text())
    # Q128: K-major 128 x 128 as two {64, 128} boxes of 128 rows x 128 B = 16 KiB; the same K-major SW128 fields
    assert (c["Q128_SLOT_BYTES"], c["Q128_BOX_BYTES"], c["Q128_BOXES"], c["Q128_BOX_ROWS"]) == (32768, 16384, 2, 128)
    assert c["Q128_DESC"] == c["Q_DESC"] and c["Q128_KSTEP_START"] == [0, 32, 64, 96, 16384, 16416, 16448, 16480]
    # row 64 starts 64 rows x 128 B = 8 swizzle atoms (1024 B each) into the first box
    assert c["Q128_HALF_START"] == [0, 64 * 128]


def test_every_wgmma_read_agrees_with_the_tma_boxes(plan):
    v = attention_plan.agreement(plan)
    assert [n for n, _ in v] == ["Q as A", "K64 as K-major B", "V64 as MN-major B", "K128 as K-major B",
                                 "V128 as MN-major B", "Q128 rows 0.. as A", "Q128 rows 64.. as A"]
    assert all(a.ok for _, a in v)
    assert all(len(a.steps) == n for (_, a), n in zip(v, (8, 8, 4, 8, 8, 8, 8)))


@pytest.mark.parametrize("starts", [[0, 0], [0, 4096], [8192, 0]])
def test_agreement_catches_a_consumer_reading_the_wrong_half(plan, starts):
    bad = dict(plan, q128=dict(plan["q128"], half_starts=starts))
    verdict = {n: a.ok for n, a in attention_plan.agreement(bad)}
    assert verdict["Q128 rows 0.. as A"] == (starts[0] == 0) and not verdict["Q128 rows 64.. as A"]


def test_agreement_catches_a_v_descriptor_with_lbo_and_sbo_swapped(plan):
    v = plan["v"]["128"]
    fields = v["desc_fixed"] & ~((0x3FFF << 32) | (0x3FFF << 16))
    swapped = fields | ((v["lbo"] >> 4) << 32) | ((v["sbo"] >> 4) << 16)
    bad = dict(plan, v={"128": dict(v, desc_fixed=swapped)}, k={"128": plan["k"]["128"]})
    verdict = dict(attention_plan.agreement(bad))["V128 as MN-major B"]
    assert not verdict.ok and {"lbo", "sbo"} & {name for name, _ in verdict.steps[0].causes}


def test_agreement_catches_v_read_without_the_transpose(plan):
    from lapis.layouts.descriptors.agreement import check_agreement
    from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
    from lapis.layouts.tma import wide_tile_boxes
    v = plan["v"]["128"]
    tmap = attention_plan._tmap(128)
    descs = [WgmmaDescriptor.decode(v["desc_fixed"] | ((1024 + s) >> 4)) for s in v["kstep_starts"]]
    assert not check_agreement(tmap, wide_tile_boxes(tmap, 128, (0, 0), 1024), (0, 0), "MN", 128, descs, False).ok


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_kernels_build_without_spills(kernel_cache):
    from lapis.gpu import bench_attention as ba
    with ThreadPoolExecutor(len(ba.BUILDS)) as pool:  # independent nvcc runs, side by side
        done = {b: pool.submit(harness.build, ba.KERNEL, d, kernel_cache) for b, d in ba.BUILDS.items()}
    builds = {b: f.result() for b, f in done.items()}
    names = {ba.kernel_name(v) for v in ba.VARIANTS.values()}
    for b, (_, report) in builds.items():
        assert names <= set(report), b
        for name, r in report.items():
            assert r["spill_stores"] == r["spill_loads"] == 0 == r["stack_bytes"], (b, name, r)
    plain = builds["plain"][1]
    # s2: ptxas sizes the kernel for the consumer's setmaxnreg budget; 256 threads x 232 fit the 64K file
    assert plain["attn_s2_ws_ring_s2_n128_c1"]["registers"] == 232
    assert plain["attn_s1_serial_s1_n128_c1"]["registers"] <= 255
    # s3: __launch_bounds__(384, 1) caps the launch count at 65536 / 384 = 170, rounded down to 8 -> 168; the
    # consumers then raise theirs to 240 with setmaxnreg.inc (the producer drops to 24)
    assert plain["attn_s3_two_consumers_s2_n128_c2"]["registers"] == 168
    assert plain["attn_s4_pingpong_s2_n128_c2"]["registers"] == 168  # s3's launch and split (24 / 240)
    assert plain["attn_s5_intra_overlap_s2_n128_c2"]["registers"] == 168
    for b, (cubin, _) in builds.items():  # ptxas says C7508 when it ignores setmaxnreg (e.g. no launch bound)
        log = cubin.with_suffix(".ptxas.txt").read_text()
        assert "C7508" not in log and "setmaxnreg" not in log.lower(), (b, log)
        # C7510..C7520: ptxas serialized wgmmas or added a wait/fence (s5's overlap would be lost silently)
        assert re.search(r"C75(1\d|20)\b", log) is None, (b, log)
