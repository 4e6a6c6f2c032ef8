"""CPU checks of the clock capture (lapis/gpu/capture_clock.py, kernels/micro_clock.cu): the campaign, one point's
arithmetic on hand-made records, the whole main() with a stand-in for the GPU, and the kernel's SASS."""

import json
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

from lapis.gpu import capture_clock as cc
from lapis.gpu import capture_micro, harness
from lapis.model import clock, sass, smsp


def test_campaign():
    pts = cc.points()
    assert len(pts) == len(set(pts)) == 13
    assert pts[0] == (0.0, 0.0) and (1.0, 0.0) in pts and (0.0, 1.0) in pts and (1.0, 1.0) in pts
    order = cc.schedule(2)
    assert [p for r, p in order if r == 1] == pts[::-1]
    # GPU time: the points, the warm-up; well under the 60 s the device call allows
    assert len(order) * cc.RUN_S + cc.WARMUP_S == 14.0
    assert [cc.unit_name(*p) for p in ((0, 0), (0.5, 0), (0, 1), (1, 1))] == ["idle", "tensor", "fma", "tensor+fma"]


def test_descriptors_match_the_micro_capture():
    src = cc.KERNEL.read_text()
    assert f"DESC_A = {capture_micro.DESC_A:#x}ull" in src
    assert f"DESC_B = {capture_micro.DESC_B[128]:#x}ull" in src
    assert capture_micro.WGMMA_B_OFFSET + 128 * 128 == cc.OPERAND_BYTES


def test_summarize_hand_made_records():
    # two CTAs: 1.8e9 and 1.6e9 cycles over 1e9 ns; 1e6 wgmmas; 4e8 FFMA warp-instructions
    rec = np.array([[100, 100 + 1_800_000_000, 5, 5 + 1_000_000_000, 0, 1_000_000, 400_000_000],
                    [0, 1_600_000_000, 0, 1_000_000_000, 7, 1_000_000, 400_000_000]], dtype=np.uint64)
    s = cc.summarize(rec, 132)
    assert s["probe_mhz"] == pytest.approx(1700)  # median of 1800 and 1600
    assert (s["probe_mhz_min"], s["probe_mhz_max"]) == (pytest.approx(1600), pytest.approx(1800))
    # 1e6 x 262144 FLOP over 1.8e9 and 1.6e9 cycles
    assert s["tensor_flop_per_clk_sm"] == pytest.approx(np.median([262144e6 / 1.8e9, 262144e6 / 1.6e9]))
    assert s["ffma_per_clk_smsp"] == pytest.approx(np.median([4e8 / 7.2e9, 4e8 / 6.4e9]))
    assert (s["distinct_sms"], s["ctas"], s["sms"]) == (2, 2, 132)
    with pytest.raises(ValueError, match="no settled window"):
        cc.summarize(np.zeros((1, cc.RECORD_WORDS), np.uint64), 132)


def test_no_gpu_is_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(harness, "gpu_present", lambda: False)
    assert cc.main(["--out", str(tmp_path)]) == 2
    assert "sm_90a" in capsys.readouterr().err


class FakeRunner:
    """Stands in for the GPU: a clock that falls with the duties, rates proportional to them."""
    launches = []

    def __init__(self, cubin, attrs):
        self.smi = type("S", (), {"stop": __import__("threading").Event()})()

    def launch(self, td, fd, run_s, settle_s):
        FakeRunner.launches.append((td, fd, run_s))
        return 0.0, run_s

    def point(self, td, fd, run_s, settle_s):
        self.launch(td, fd, run_s, settle_s)
        return dict(probe_mhz=min(1980.0, 2300 - 500 * td - 150 * fd), tensor_flop_per_clk_sm=3000 * td,
                    ffma_per_clk_smsp=0.9 * fd, smi_mhz=1900.0, smi_w=650.0, smi_samples=5, distinct_sms=132)


def test_main_writes_a_capture_the_model_reads(monkeypatch, tmp_path):
    import sys
    import types
    monkeypatch.setattr(harness, "gpu_present", lambda: True)
    fake_cp = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDeviceProperties=lambda i: dict(multiProcessorCount=132, sharedMemPerMultiprocessor=233472,
                                           sharedMemPerBlockOptin=232448))))
    monkeypatch.setitem(sys.modules, "cupy", fake_cp)
    monkeypatch.setattr(cc.capture_tma, "provenance", lambda f, argv, prog: dict(command=prog))
    monkeypatch.setattr(cc.subprocess, "run", lambda *a, **k: None)
    monkeypatch.setattr(cc.time, "sleep", lambda s: None)
    monkeypatch.setattr(cc, "Runner", FakeRunner)
    FakeRunner.launches = []
    assert cc.main(["--out", str(tmp_path)]) == 0
    assert FakeRunner.launches[0] == (1.0, 1.0, cc.WARMUP_S) and len(FakeRunner.launches) == 27
    man = json.loads((tmp_path / "clock" / "manifest.json").read_text())
    assert man["kind"] == "clock" and man["kernels"] == ["lapis/gpu/kernels/micro_clock.cu"]
    res = json.loads((tmp_path / "clock" / "results.json").read_text())
    assert len(res["points"]) == 26 and {p["repeat"] for p in res["points"]} == {0, 1}
    m = clock.load(tmp_path / "clock" / "results.json")
    assert m.form == "capped-linear" and m.intercept_mhz == pytest.approx(2300)
    assert m.slope_mhz == pytest.approx(dict(tensor=-500, fma=-150))


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    cubin = tmp_path_factory.mktemp("clock") / "micro_clock.cubin"
    p = subprocess.run(cc.NVCC + ["-Xptxas", "-v", "-o", str(cubin), str(cc.KERNEL)], check=True, timeout=600,
                       capture_output=True, text=True)
    text = subprocess.run([smsp._tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    return p.stderr, sass.parse_cuobjdump(text)["micro_clock"]


def test_kernel_sass(kernel):
    ptxas, instrs = kernel
    assert "serialized" not in ptxas  # ptxas would make every wgmma wait for the one before
    ops = Counter(".".join((i.opcode, *i.modifiers)) for i in instrs)
    assert ops["HGMMA.64x128x16.F32.BF16"] == 8  # one burst
    assert ops["FFMA"] >= 8 * 32  # one burst: CHAINS x FMA_UNROLL
    assert ops["NANOSLEEP"] >= 1
    assert "0 bytes spill stores" in ptxas
