"""The Nsight Compute reader of lapis.gpu.ncu_units, on the text ncu prints (no GPU needed)."""

import json
import re

from lapis.gpu import ncu_units

RAW = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "flash_fwd_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","sm__cycles_elapsed.avg","dram__bytes_read.sum","sm__inst_executed_pipe_xu.sum"
"","","","","","","","","","","","cycle","byte","inst"
"0","4242","python3","127.0.0.1","_Z16flash_fwd_kernelv","1","7","(128, 1, 1)","(32, 128, 1)","0","9.0","1,234,567.50","536,870,912","98765"
'''


def test_raw_csv_gives_values_with_units():
    rows = ncu_units.parse_raw_csv(RAW)
    assert len(rows) == 1
    r = rows[0]
    assert r["sm__cycles_elapsed.avg"] == (1234567.5, "cycle")
    assert r["dram__bytes_read.sum"] == (536870912.0, "byte")
    assert r["sm__inst_executed_pipe_xu.sum"] == (98765.0, "inst")
    assert r["Kernel Name"] == ("_Z16flash_fwd_kernelv", "")


def test_no_rows_when_ncu_profiled_nothing():
    assert ncu_units.parse_raw_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n") == []


def test_filters_pick_each_kernel_family():
    assert ncu_units.kernel_filter("flash") == "flash_fwd"
    assert ncu_units.kernel_filter("s9:causal") == "attn_"
    assert ncu_units.kernel_filter("gemm") == "gemm"
    assert "fprop" in ncu_units.kernel_filter("cudnn")
    # a causal third-party kernel keeps its name's filter (cuDNN's causal build has the same kernel name)
    assert ncu_units.kernel_filter("cudnn:causal") == ncu_units.kernel_filter("cudnn")
    causal_name = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
    assert re.search(ncu_units.kernel_filter("cudnn:causal"), causal_name)


def test_candidates_cover_the_units_compared():
    # elapsed cycles and clock, tensor pipe, per-pipe instructions, issue slots, DRAM bytes
    c = set(ncu_units.CANDIDATES)
    for m in ("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
              "sm__pipe_tensor_op_gmma_cycles_active.avg", "sm__inst_executed_pipe_xu.sum",
              "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_alu.sum", "sm__inst_executed_pipe_lsu.sum",
              "smsp__issue_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "dram__bytes_write.sum"):
        assert m in c


def test_source_pages_are_asked_per_kernel_and_never_of_cudnn(tmp_path, monkeypatch):
    """--source names the kernels whose source page to write; cuDNN's is never asked for (its license forbids
    disassembly), the others each get one source_page call."""
    asked = []
    monkeypatch.setattr(ncu_units, "available", lambda m: (list(m), [], ""))
    monkeypatch.setattr(ncu_units, "profile", lambda k, a, present, dest: {})
    monkeypatch.setattr(ncu_units, "source_page", lambda k, a, dest: asked.append(k) or {"k": k})
    import lapis.gpu.capture_tma as ct
    monkeypatch.setattr(ct, "provenance", lambda *a: {})
    monkeypatch.setattr(ncu_units.subprocess, "run", lambda *a, **k: type("P", (), {"stdout": "ncu 2025.3"})())
    assert ncu_units.main(["--out", str(tmp_path), "--kernels", "s2", "--source", "s1,cudnn,s14"]) == 0
    assert asked == ["s1", "s14"]
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert sorted(man["source"]) == ["s1", "s14"]
