"""lapis.model.warp_loop: FA2's K/V-tile loop from its compiled SASS (capture sass/fa2-h200-2026-12-02), its steady
iteration, its segments between __syncthreads, and their cost on the SM sub-partitions, held against what Nsight
Compute counted and measured for the same kernel on the H200 (capture ncu/h200-2026-12-01-units)."""

import dataclasses
import gzip
import json
from collections import Counter

import numpy as np
import pytest

from lapis.data import CAPTURES
from lapis.errors import CaptureError, ScheduleError
from lapis.model import instruction_mix, sass, smsp, warp_loop

NCU = CAPTURES / "ncu" / "h200-2026-12-01-units" / "manifest.json"


def _fa2(key="hdim128"):
    k = json.loads((warp_loop.CAPTURE / "manifest.json").read_text())["kernels"][key]
    return sass.parse_cuobjdump(warp_loop.CAPTURE / k["file"])[k["function"]]


def test_the_capture_holds_the_kernel_nsight_compute_profiled():
    """The hdim 128 kernel is the one torch's SDPA ran on the H200 (its mangled name in the ncu capture)."""
    k = json.loads((warp_loop.CAPTURE / "manifest.json").read_text())["kernels"]["hdim128"]
    assert k["function"] == json.loads(NCU.read_text())["kernels"]["flash"]["mangled"]


def test_the_steady_iteration_is_what_the_hardware_executed_every_tile():
    """Oracle: Nsight Compute's executed counts. A warp runs 64 K/V tiles at 8x16x4096x128; the instructions
    executed 62 or 63 times per warp (the loop, and its out-of-line K copy skipped on the last tile) are the
    steady iteration, 1220 of them, the same opcodes as steady_body's."""
    ncu = sass.parse_ncu_source_csv(instruction_mix.FLASH_CSV)
    warps = 8 * 16 * 32 * 4
    steady = [i for i in ncu if i.count in (62 * warps, 63 * warps)]
    ins = _fa2()
    body = warp_loop.steady_body(ins, warp_loop.tile_loops(ins)[-1])
    assert len(body) == len(steady) == 1220
    assert Counter(i.opcode for i in body) == Counter(i.opcode for i in steady)
    assert sum(i.opcode == "HMMA" for i in body) == 256


def test_the_iteration_splits_at_its_two_barriers():
    ins = _fa2()
    segs = warp_loop.segments(warp_loop.steady_body(ins, warp_loop.tile_loops(ins)[-1]))
    assert [len(s) for s in segs] == [4, 189, 1025]
    assert not any(i.opcode == "BAR" for s in segs for i in s)


def test_the_loop_predicts_the_measured_tile_within_its_stated_gap():
    """Prediction against measurement, nothing fitted: Nsight Compute's SM cycles at 8x16x4096x128 over the tiles
    one CTA slot runs (4096 CTAs x 64 tiles over 132 SMs x 2 slots) give 5560 cycles per warp and tile; two warps
    per SMSP each take both warps' shares. The model reads 10% fast (register-bank and dispatch stalls, spills'
    L1 latency: not modelled); this bounds the gap from both sides."""
    m = json.loads(NCU.read_text())["kernels"]["flash"]["metrics"]
    measured = m["sm__cycles_elapsed.avg"]["value"] / (8 * 16 * 32 * 64 / (132 * 2))
    assert measured == pytest.approx(5560, abs=5)
    lp = warp_loop.kernel(128, False)["loops"][-1]
    predicted = warp_loop.WARPS * sum(lp["segment_cycles"])
    assert -0.15 < predicted / measured - 1 < -0.05


def test_tile_loops_drop_the_back_edge_of_the_out_of_line_block():
    ins = _fa2()
    assert len(warp_loop.mma_loops(ins)) == 2
    assert len(warp_loop.tile_loops(ins)) == 1


def test_ldmatrix_wavefronts_count_its_matrices():
    def one(text):
        return smsp.smem_wavefronts(sass.parse_instruction(text, 0))
    assert one("LDSM.16.M88.4 R4, [R2]") == 4
    assert one("LDSM.16.MT88.2 R4, [R2+0x100]") == 2
    assert one("LDSM.16.M88 R4, [R2]") == 1
    assert one("LDS.128 R4, [R2]") == 4
    assert one("LDGSTS.E.BYPASS.LTC128B.128 [R1], desc[UR4][R2.64]") == 4
    assert one("FFMA R1, R2, R3, R4") == 0


def test_the_shared_memory_path_bounds_a_loop_of_ldmatrix():
    """Sixteen LDSM.x4 per iteration, nothing else: the pipes capture's ldmatrix rate (1 / 16 per SMSP cycle)
    bounds each warp's iteration at 16 x 16 cycles however many warps there are."""
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    assert consts.smem_cycles_per_wavefront == pytest.approx(4.0, rel=0.01)
    body = []
    for k in range(16):
        i = sass.parse_instruction(f"LDSM.16.M88.4 R{4 * k}, [R200]", 16 * k)
        body.append(dataclasses.replace(i, control=sass.Control(1, False, None, None, 0, 0)))
    assert smsp.simulate(body, 2, consts) == pytest.approx(16 * 16, rel=0.02)


def test_the_committed_file_is_the_rebuild():
    assert warp_loop.build() == json.loads(warp_loop.LOOPS.read_text())


def test_every_head_dim_and_mask_is_costed():
    for d in (64, 128, 256):
        for causal in (False, True):
            lp = warp_loop.kernel(d, causal)["loops"][-1]
            assert lp["hmma"] == 256 and lp["barriers"] == 2 and len(lp["segment_cycles"]) == 3


@pytest.mark.parametrize("content, why", [
    ("{", "unreadable"),
    ('{"schema": "other", "kernels": {}}', "schema"),
    ('{"schema": "lapis.warp-loops/1", "kernels": {"hdim128": {"loops": []}}}', "no loops"),
    ('{"schema": "lapis.warp-loops/1", "kernels": {"hdim128": {"loops": [{"segment_cycles": [1, NaN, 2]}]}}}',
     "finite"),
])
def test_a_malformed_file_is_refused(tmp_path, content, why):
    path = tmp_path / "warp_loops.json"
    path.write_text(content)
    with pytest.raises(CaptureError, match=why):
        warp_loop.load(path)


def test_a_kernel_the_file_lacks_is_none(tmp_path):
    path = tmp_path / "warp_loops.json"
    path.write_text('{"schema": "lapis.warp-loops/1", "kernels": {"hdim128": {"loops": [{"segment_cycles": [1], '
                    '"segment_hmma": [0]}], "prologue": {"cycles": 1}, "epilogue": {"cycles": 1}}}}')
    assert warp_loop.kernel(64, False, path) is None
    assert warp_loop.kernel(128, False, path)["loops"] == [{"segment_cycles": [1], "segment_hmma": [0]}]


@pytest.mark.parametrize("head_dim", [128.0, np.int64(128), np.float32(128)])
def test_a_whole_head_dim_of_any_number_type_finds_its_kernel(head_dim):
    assert warp_loop.kernel(head_dim, False) == warp_loop.kernel(128, False) is not None


@pytest.mark.parametrize("head_dim", [128.5, float("nan"), float("inf"), "128", None, True])
def test_a_head_dim_that_is_not_a_whole_number_is_a_named_error(head_dim):
    with pytest.raises(ScheduleError, match=r"the head dim is a whole number of elements: got .*; fix: pass an "
                                            r"integer head dim"):
        warp_loop.kernel(head_dim, False)


def test_the_sass_is_what_ran_on_the_h200():
    """The capture was read on the H200 machine from the installed torch 2.11.0+cu130's libtorch_cuda.so (the
    library the timed FA2 runs used; the torch 2.11.0 wheel's copy on a CPU machine gave byte-identical SASS): six
    flash_fwd_kernel functions, head dims 64, 128, 256, causal and not."""
    man = json.loads((warp_loop.CAPTURE / "manifest.json").read_text())
    assert man["provenance"]["gpu"] == "NVIDIA H200"
    assert "libtorch_cuda.so" in {s["library"] for s in man["scanned"]}
    assert sorted(man["kernels"]) == sorted(f"hdim{d}{c}" for d in (64, 128, 256) for c in ("", "_causal"))
    for key, k in man["kernels"].items():
        assert k["function"].startswith("_ZN13pytorch_flash16flash_fwd_kernel") and k["library"] == "libtorch_cuda.so"
        assert k["head_dim"] == int(key[4:].split("_")[0]) and k["causal"] == key.endswith("_causal")


def _corrupt(tmp_path, edit):
    d = json.loads(warp_loop.LOOPS.read_text())
    edit(d["kernels"]["hdim128"])
    path = tmp_path / "warp_loops.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("edit, why", [
    (lambda k: k["peeled"][0]["segment_cycles"].__setitem__(0, float("nan")), "peeled"),
    (lambda k: k["peeled"][0]["segment_cycles"].__setitem__(0, -5.0), "peeled"),
    (lambda k: k["peeled"][0].__setitem__("segment_cycles", [1.0]), "peeled"),
    (lambda k: k.__setitem__("peeled", "x"), "peeled"),
    (lambda k: k.pop("prologue"), "prologue"),
    (lambda k: k["prologue"].__setitem__("cycles", float("nan")), "prologue"),
    (lambda k: k["epilogue"].__setitem__("cycles", -1e9), "epilogue"),
    (lambda k: k["epilogue"].__setitem__("cycles", 1e308), "epilogue"),
    (lambda k: k["loops"][-1].__setitem__("segment_cycles", [1e308, 1.0, 1.0]), "segment_cycles"),
    (lambda k: k["loops"][-1].pop("segment_hmma"), "segment_hmma"),
    (lambda k: k["loops"][-1].__setitem__("segment_hmma", [1]), "segment_hmma"),
    (lambda k: k["loops"][-1].__setitem__("segment_hmma", [0, -3, 1]), "segment_hmma"),
    (lambda k: k["loops"][-1].__setitem__("segment_hmma", [0, 1.5, 1]), "segment_hmma"),
], ids=["peeled-nan", "peeled-negative", "peeled-one-segment", "peeled-not-list", "no-prologue", "prologue-nan",
        "epilogue-negative", "epilogue-huge", "loop-huge", "no-hmma", "hmma-short", "hmma-negative", "hmma-float"])
def test_every_field_the_schedule_reads_is_checked(tmp_path, edit, why):
    """Each value fa2_flash.loop_costs turns into ns: a corrupt one is refused on load, naming the file."""
    path = _corrupt(tmp_path, edit)
    with pytest.raises(CaptureError, match=why) as e:
        warp_loop.kernel(128, False, path)
    assert str(path) in str(e.value) and "--write" in str(e.value)


def test_the_committed_file_passes_the_checks():
    """The checks refuse nothing FA2's own kernels hold: one peeled tile without the mask, ceil(128 / 64) with."""
    assert [t["segment_hmma"] for t in warp_loop.kernel(128, False)["peeled"]] == [[128, 128]]
    assert [t["segment_hmma"] for t in warp_loop.kernel(128, True)["peeled"]] == [[127, 129], [127, 129]]


def _capture_copy(tmp_path, key="hdim64"):
    """A copy of the capture holding one kernel: (its directory, its manifest entry)."""
    cap = tmp_path / "fa2_sass"
    cap.mkdir()
    man = json.loads((warp_loop.CAPTURE / "manifest.json").read_text())
    k = man["kernels"][key]
    (cap / k["file"]).write_bytes((warp_loop.CAPTURE / k["file"]).read_bytes())
    (cap / "manifest.json").write_text(json.dumps({"kernels": {key: k}}))
    return cap, k


def test_a_capture_outside_the_repository_builds(tmp_path):
    cap, _ = _capture_copy(tmp_path)
    d = warp_loop.build(str(cap))
    assert d["capture"] == str(cap)
    assert d["kernels"]["hdim64"] == warp_loop.kernel(64, False)


@pytest.mark.parametrize("manifest, why", [
    ([], "manifest"),
    ({"kernels": []}, "manifest"),
    ({"kernels": {"hdim64": "x"}}, "hdim64"),
    ({"kernels": {"hdim64": {"function": "f", "head_dim": 64, "causal": False}}}, "file"),
], ids=["list", "kernels-list", "kernel-str", "no-file"])
def test_a_malformed_capture_manifest_is_refused(tmp_path, manifest, why):
    cap, _ = _capture_copy(tmp_path)
    (cap / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CaptureError, match=why) as e:
        warp_loop.build(cap)
    assert str(cap / "manifest.json") in str(e.value)


def test_a_function_without_a_tile_loop_is_refused(tmp_path):
    """A dump cut short (its loop lost) names the kernel rather than failing on an empty list."""
    cap, k = _capture_copy(tmp_path)
    (cap / k["file"]).write_bytes(gzip.compress(f"\t\tFunction : {k['function']}\n".encode()))
    with pytest.raises(CaptureError, match="no loop holding mma.sync") as e:
        warp_loop.build(cap)
    assert k["file"] in str(e.value)
