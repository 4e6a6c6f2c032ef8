"""CPU checks of the HBM clock capture (lapis/gpu/capture_clock_dram.py, kernels/micro_clock_dram_v1.cu): the
campaign, one point's arithmetic on hand-made records, the no-GPU exit, and the kernel's SASS."""

import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

from lapis.gpu import capture_clock as cc
from lapis.gpu import capture_clock_dram as cd
from lapis.gpu import harness
from lapis.model import sass, smsp


def test_campaign():
    assert len(cd.POINTS) == len(set(cd.POINTS)) == 12
    assert (0.0, 0.0, 0.0) in cd.POINTS and (0.0, 0.0, 1.0) in cd.POINTS and (1.0, 1.0, 1.0) in cd.POINTS
    order = cd.schedule(2)
    assert [p for r, p in order if r == 1] == list(cd.POINTS[::-1])
    assert len(order) * cc.RUN_S + cc.WARMUP_S == 13.0  # GPU time, well inside one device call
    assert cd.STREAM_BYTES >= 64 * 60 * 2**20  # every load misses the H200's 60 MiB L2


def test_summarize_adds_the_hbm_rate():
    # two CTAs, 1e9 ns each: 300 GB and 100 GB over 1 s -> 300 + 100 = 400 GB/s
    rec = np.array([[100, 100 + 1_800_000_000, 5, 5 + 1_000_000_000, 0, 1_000_000, 400_000_000, 300_000_000_000],
                    [0, 1_600_000_000, 0, 1_000_000_000, 7, 1_000_000, 400_000_000, 100_000_000_000]],
                   dtype=np.uint64)
    s = cd.summarize(rec, 132)
    assert s["dram_gb_s"] == pytest.approx(400.0)
    assert s["probe_mhz"] == pytest.approx(1700) and (s["distinct_sms"], s["ctas"]) == (2, 2)


def test_no_gpu_is_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(harness, "gpu_present", lambda: False)
    assert cd.main(["--out", str(tmp_path)]) == 2
    assert "sm_90a" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_kernel_sass(tmp_path):
    cubin = tmp_path / "micro_clock_dram.cubin"
    p = subprocess.run(cc.NVCC + ["-Xptxas", "-v", "-o", str(cubin), str(cd.KERNEL)], check=True, timeout=600,
                       capture_output=True, text=True)
    text = subprocess.run([smsp._tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    ops = Counter(".".join((i.opcode, *i.modifiers)) for i in sass.parse_cuobjdump(text)["micro_clock_dram"])
    assert ops["HGMMA.64x128x16.F32.BF16"] == 8 and ops["FFMA"] >= 8 * 32  # micro_clock's bursts, unchanged
    assert sum(n for op, n in ops.items() if op.startswith("LDG.E.128")) == 16  # one HBM burst: STREAM_UNROLL
    assert "0 bytes spill stores" in p.stderr and "serialized" not in p.stderr
