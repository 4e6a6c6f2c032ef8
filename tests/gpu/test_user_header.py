"""lapis_timeline.cuh (the user header) builds for sm_90a: the example kernel in both builds without spills, the
layout and sizing rules of docs/timeline-format.md at compile time, and a Recorder<false> that leaves the SASS
of a kernel exactly as without it; the example records off its wgmma critical path. Skipped without nvcc (and, for the SASS, without cuobjdump)."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lapis.gpu import harness, sass

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "lapis" / "gpu" / "kernels"
HEADER = KERNELS / "lapis_timeline.cuh"
EXAMPLE = ROOT / "examples" / "ws_gemm_timeline.cu"
DIGESTS = ROOT / "tests" / "data" / "sass" / "kernels.json"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def nvcc(source: Path, out: Path, *defines: str) -> str:
    p = subprocess.run(["nvcc", *harness.NVCC_FLAGS, f"-I{KERNELS}", *defines, "-o", str(out), str(source)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def test_the_magic_is_the_documented_bytes():
    m = re.search(r"MAGIC = (0x[0-9A-Fa-f]+)ull", HEADER.read_text())
    assert int(m[1], 16).to_bytes(8, "little") == b"LAPISTL1"


def test_the_header_includes_nothing_of_lapis():
    assert re.findall(r'#include\s+[<"]([^>"]+)', HEADER.read_text()) == ["stddef.h", "stdint.h"]


@needs_nvcc
def test_the_example_builds_plain_and_instrumented_without_spills(tmp_path):
    for on in (0, 1):
        report = harness.parse_ptxas(nvcc(EXAMPLE, tmp_path / f"ws{on}.cubin", f"-DTL_ON={on}"))
        assert report["ws_gemm"]["spill_stores"] == 0 and report["ws_gemm"]["spill_loads"] == 0



def consumer_k_loop(text: str) -> dict[str, list[str]]:
    """The consumer K loop of the example's SASS (cuobjdump -sass), in three straight-line pieces: `issue`, from
    the loop head (the target of the back edge that follows WARPGROUP.DEPBAR.LE gsb0, 0x1) to WARPGROUP.ARRIVE
    (the mbarrier wait on full[s], then the wgmma issue); `shadow`, from the last HGMMA to that DEPBAR (while the
    K block's wgmma run); `release`, from the DEPBAR to the back edge (empty[s] arrive, loop bookkeeping)."""
    ins = [(int(m.group(1), 16), m.group(2).strip())
           for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", text)]
    dep = next(a for a, t in ins if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in t)
    back, head = next((a, int(m.group(1), 16)) for a, t in ins
                      if a > dep and (m := re.search(r"\bBRA (0x[0-9a-f]+)", t)) and int(m.group(1), 16) < a)
    arrive = next(a for a, t in ins if a >= head and t.startswith("WARPGROUP.ARRIVE"))
    last_hgmma = max(a for a, t in ins if head <= a < dep and t.startswith("HGMMA"))
    def piece(lo: int, hi: int) -> list[str]:
        return [t for a, t in ins if lo <= a < hi]

    return {"issue": piece(head, arrive), "shadow": piece(last_hgmma + 1, dep), "release": piece(dep, back + 1),
            "hgmma": [t for a, t in ins if head <= a < dep and t.startswith("HGMMA")]}


@needs_nvcc
def test_the_example_records_off_the_wgmma_critical_path(tmp_path):
    """Instrumented (TL_ON=1) build: between the K loop's wgmma wait and the next K block's wgmma issue only
    clock reads are added (no shared load, no global store, no division, no branch on a sampling predicate); the
    records are written while the wgmma run. ptxas keeps the wgmma pipelined (no serialization warning; one K
    block in flight: DEPBAR.LE gsb0, 0x1) in both builds."""
    tools = sass.tool_dir()
    if tools is None:
        pytest.skip("cuobjdump/nvdisasm missing: pip install '.[test]'")
    loops = {}
    for on in (0, 1):
        log = nvcc(EXAMPLE, tmp_path / f"ws{on}.cubin", f"-DTL_ON={on}")
        assert "serialized" not in log, log
        text = subprocess.run([str(tools / "cuobjdump"), "-sass", str(tmp_path / f"ws{on}.cubin")],
                              capture_output=True, text=True, check=True).stdout
        loops[on] = consumer_k_loop(text)
    plain, rec = loops[0], loops[1]
    assert len(plain["hgmma"]) == len(rec["hgmma"]) == 4  # BK / 16 wgmma m64n128k16 per K block
    def opcodes(lines, pattern=r"LDS|STS|STG|ST|ATOMS|MUFU|I2F|F2I|BSSY|BRA"):
        ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in lines]
        return [op for op in ops if re.fullmatch(pattern, op)]

    on_path, plain_path = rec["issue"] + rec["release"], plain["issue"] + plain["release"]
    assert opcodes(on_path) == opcodes(plain_path) == ["BRA", "BRA"]  # the mbarrier retry and the back edge
    assert sum("SR_CLOCKLO" in t for t in on_path) == 3  # K block begins, full[s] wait returns, wgmma wait returns
    assert len(on_path) <= len(plain_path) + 6
    assert opcodes(rec["shadow"], "STG").count("STG") == 12  # 4 records x 3 stores, while the wgmma run

SIZES = r"""
#include "lapis_timeline.cuh"
using namespace lapis_tl;
// docs/timeline-format.md: 64-byte header, counts padded to 8 bytes, 24-byte records
static_assert(rows_offset(1) == 72 && rows_offset(2) == 72 && rows_offset(3) == 80, "rows offset");
static_assert(buffer_bytes(3, 10) == 80 + 3 * 10 * 24, "buffer bytes");
static_assert(rows_for(7, 2, 2) == 3 && rows_for(132, 0, 16) == 9 && rows_for(2, 5, 1) == 0, "rows");
constexpr Args A = make_args(static_cast<uint8_t*>(nullptr), 7, 3, 4, 2, 4, 2, 0b010);
static_assert(A.capacity == 14 && A.rows == 3 && A.iter_every == 4, "make_args");
static_assert(sampled_row(A, 4) == 1 && sampled_row(A, 2) == -1 && sampled_row(A, 5) == -1 && sampled_row(A, 1) == -1,
              "CTA sampling: every 2nd from 2, mask keeps row 1 only");
__global__ void k() {}
"""


@needs_nvcc
def test_sizes_and_sampling_rules_hold_at_compile_time(tmp_path):
    (tmp_path / "sizes.cu").write_text(SIZES)
    nvcc(tmp_path / "sizes.cu", tmp_path / "sizes.cubin")


PAIR = r"""
#include <stdint.h>
#include "lapis_timeline.cuh"
template <bool ON, bool CALLS>
__device__ void body(float* x, int n, const lapis_tl::Args& a) {
  lapis_tl::Recorder<ON> tl;
  if (CALLS && threadIdx.x == 0) tl.init(a);
  __syncthreads();
  for (int k = 0; k < n; ++k) {
    if (CALLS && threadIdx.x == 0) tl.begin(a, 0, blockIdx.x, k);
    x[threadIdx.x] = x[threadIdx.x] * 2.0f + 1.0f;
    if (CALLS && threadIdx.x == 0) tl.end(a, 0, 1, lapis_tl::ISSUE, blockIdx.x, k);
  }
  __syncthreads();
  if (CALLS && threadIdx.x == 0) tl.finish(a);
}
extern "C" __global__ void with_calls(float* x, int n, const __grid_constant__ lapis_tl::Args a) {
  body<false, true>(x, n, a);
}
extern "C" __global__ void without_calls(float* x, int n, const __grid_constant__ lapis_tl::Args a) {
  body<false, false>(x, n, a);
}
extern "C" __global__ void recording(float* x, int n, const __grid_constant__ lapis_tl::Args a) {
  body<true, true>(x, n, a);
}
"""


@needs_nvcc
def test_a_disabled_recorder_leaves_the_sass_unchanged(tmp_path):
    tools = sass.tool_dir()
    if tools is None:
        pytest.skip("cuobjdump/nvdisasm missing: pip install '.[test]'")
    (tmp_path / "pair.cu").write_text(PAIR)
    nvcc(tmp_path / "pair.cu", tmp_path / "pair.cubin")
    text = subprocess.run([str(tools / "cuobjdump"), "-sass", str(tmp_path / "pair.cubin")], capture_output=True,
                          text=True, check=True).stdout
    got = dict(sass.digests(text))
    assert got["with_calls"] == got["without_calls"]
    assert got["recording"] != got["without_calls"]  # the recording build does differ: the digest sees records


@needs_nvcc
def test_the_harness_samples_lapis_kernels_at_compile_time(tmp_path):
    """gemm_ws.cu's timeline build with -DLAPIS_TIMELINE_CTA_EVERY / ITER_EVERY: no spills, and other SASS than
    the committed unsampled timeline build (which tests/gpu/test_sass.py pins, the defaults of 1 and 1)."""
    src = KERNELS / "gemm_ws.cu"
    report = harness.parse_ptxas(nvcc(src, tmp_path / "g.cubin", "-DLAPIS_TIMELINE=1", "-DLAPIS_TIMELINE_CTA_EVERY=8",
                                      "-DLAPIS_TIMELINE_ITER_EVERY=4"))
    assert report and all(r["spill_stores"] == 0 and r["spill_loads"] == 0 for r in report.values())
    tools = sass.tool_dir()
    if tools is None:
        pytest.skip("cuobjdump/nvdisasm missing: pip install '.[test]'")
    text = subprocess.run([str(tools / "cuobjdump"), "-sass", str(tmp_path / "g.cubin")], capture_output=True,
                          text=True, check=True).stdout
    committed = dict(json.loads(DIGESTS.read_text())["builds"]["gemm_ws.cu"]["timeline"])
    got = dict(sass.digests(text))
    assert set(got) == set(committed) and all(got[k] != committed[k] for k in got)
