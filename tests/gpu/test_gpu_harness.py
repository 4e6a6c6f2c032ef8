"""The kernel harness's host side on a CPU: timeline decode of a hand-built buffer, wire formats, the subprocess
guard, the ptxas report parser and the benchmark's manifest writer (no GPU results: inputs are synthetic)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from lapis.gpu import bench_gemm, harness

ROLES = ("producer", "consumer0", "consumer1")
OPS = ("start", "wait empty", "issue TMA", "wait full", "issue wgmma", "wait wgmma", "epilogue")
C = 0x80  # completion bit


def buffer(rows):
    """[ctas, capacity] records from {cta: [(t_ns, role, op, k, sm), ...]} in cursor order."""
    cap = 6
    rec = np.zeros((2, cap), harness.RECORD_DTYPE)
    rec["t_ns"] = 999_999  # garbage past each CTA's count must never be decoded
    for cta, rs in rows.items():
        for i, (t, role, op, k, sm) in enumerate(rs[:cap]):
            rec[cta, i] = (t, cta, 40 + cta, k, sm, role, op)
    return rec


ROWS = {0: [(1000, 0, 0, -1, 5), (1064, 1, 0, -1, 5), (1096, 0, 1 | C, 0, 5), (1160, 0, 2, 0, 5),
            (1800, 1, 3 | C, 0, 5)],
        1: [(2000, 0, 0, -1, 7), (2032, 0, 1 | C, 0, 7), (2100, 0, 2, 0, 7), (2132, 0, 1 | C, 1, 7),
            (2200, 0, 2, 1, 7), (2264, 2, 0, -1, 7)]}
COUNTS = np.array([5, 8], np.uint32)  # CTA 1 attempted 8 records into 6 slots: 2 overflowed


def test_decode_builds_spans_between_a_roles_records():
    d = harness.decode_timeline(buffer(ROWS), COUNTS, ROLES, OPS)
    got = [(e["role"], e["op"], e["start_ns"], e["end_ns"], e["kind"], e["cta"], e["sm"], e["k_index"],
            e["work_item"]) for e in d["events"]]
    assert got == [
        ("producer", "wait empty", 0, 96, "wait", 0, 5, 0, 40),
        ("producer", "issue TMA", 96, 160, "issue", 0, 5, 0, 40),
        ("consumer0", "wait full", 64, 800, "wait", 0, 5, 0, 40),
        ("producer", "wait empty", 1000, 1032, "wait", 1, 7, 0, 41),
        ("producer", "issue TMA", 1032, 1100, "issue", 1, 7, 0, 41),
        ("producer", "wait empty", 1100, 1132, "wait", 1, 7, 1, 41),
        ("producer", "issue TMA", 1132, 1200, "issue", 1, 7, 1, 41),
    ]
    assert d["overflow"] == {1: 2} and d["t0_ns"] == 1000
    assert [e["id"] for e in d["events"]] == list(range(7))


def test_decoded_events_are_simulator_events_and_export_to_perfetto():
    from lapis.pipeline_sim.recorder import Event
    from lapis.pipeline_sim.trace import check_chrome, to_chrome
    events = [Event(**e) for e in harness.decode_timeline(buffer(ROWS), COUNTS, ROLES, OPS)["events"]]
    trace = to_chrome(events)
    assert check_chrome(trace) == []
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 7 and {e["pid"] for e in xs} == {5, 7}
    assert xs[0]["ts"] == 0 and xs[0]["dur"] == pytest.approx(0.096)  # µs


def test_wire_formats_match_the_c_structs():
    # offsets are static_asserted in harness.cuh (compiled by test_gemm_plan)
    assert harness.RECORD_DTYPE.itemsize == 24 and harness.RECORD_DTYPE.fields["sm"][1] == 20
    assert harness.STATUS_DTYPE.itemsize == 32 and harness.STATUS_DTYPE.fields["t_ns"][1] == 24
    h = harness.HARNESS_DTYPE
    assert h.itemsize == 40 and (h.fields["capacity"][1], h.fields["timeout_ns"][1]) == (24, 32)
    assert h.fields["roles"][1] == 28  # HarnessArgs.roles, between capacity and timeout_ns
    a = harness.harness_args(None, 0x1000, 0x2000, 77, 5, roles=3)
    assert (int(a["timeline"]), int(a["counts"]), int(a["capacity"]), int(a["timeout_ns"])) == (0x1000, 0x2000, 77, 5)
    assert int(a["roles"]) == 3


def test_steady_period_cta_spans_and_saved_ctas():
    rec = np.zeros((2, 6), harness.RECORD_DTYPE)
    for i, t in enumerate((0, 100, 250, 400)):  # consumer0 "wait full" records of CTA 0
        rec[0, i] = (t, 0, 0, i, 3, 1, 3 | C)
    rec[1, 0] = (50, 1, 1, 0, 9, 1, 3 | C)
    counts = np.array([4, 1], np.uint32)
    assert bench_gemm.interval_median_ns(rec, counts, 1, 3) == 150  # gaps 100 (ring fill, dropped), 150, 150
    t = bench_gemm.cta_table(rec, counts)
    assert list(t["sm"]) == [3, 9] and list(t["t_first_ns"]) == [0, 50] and list(t["t_last_ns"]) == [400, 50]
    assert list(bench_gemm.select_ctas(np.array([4, 0, 7, 1, 5, 0]), first=1)) == [0, 1, 3, 5]


def test_timeline_capacity_covers_every_record_the_kernel_writes():
    v = bench_gemm.VARIANTS["ws_s4_c2_n128"]
    # producer: start + 2 per K block; each consumer: start + 3 per K block + epilogue; K = 128 -> 2 K blocks
    assert bench_gemm.timeline_capacity(v, 128) >= (1 + 2 * 2) + 2 * (1 + 3 * 2 + 1)


def test_a_hung_process_becomes_an_error_naming_the_kernel():
    with pytest.raises(harness.KernelHang, match="gemm_ws_s4_c2_n128_bf16 at 2048"):
        harness.run_guarded([sys.executable, "-c", "import time; time.sleep(30)"], 0.5,
                            "gemm_ws_s4_c2_n128_bf16 at 2048^3")


def test_parse_ptxas_keeps_each_kernels_own_report():
    text = """ptxas info    : Compiling entry function 'k1' for 'sm_90a'
ptxas info    : Function properties for k1
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Function properties for _ZN5lapis15watchdog_expireE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k2' for 'sm_90a'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers
"""
    assert harness.parse_ptxas(text) == {
        "k1": dict(stack_bytes=8, spill_stores=4, spill_loads=12, registers=168, smem_bytes=1024),
        "k2": dict(stack_bytes=0, spill_stores=0, spill_loads=0, registers=40, smem_bytes=0)}


def test_manifest_writer_and_table(tmp_path):
    r = dict(median_us=30.0, spread_pct=1.5, runs=10, clocks=dict(sm_clock_mhz=dict(median=1980.0)))
    v = dict(plain=dict(r, median_us=40.0, rel_err_set0=0.003), timeline=dict(r, median_us=42.0),
             timeline_overhead_pct=5.0)
    results = [dict(size=2048, shape="2048x2048x2048", cublas=dict(r, rel_err=0.002),
                    variants={"ws_s4_c2_n128": v})]
    demo = dict(verdict=dict(control_ok=True, mbarrier_watchdog=True, bar_sync_timeout=True))
    plan = dict(block_m=128, block_k=64, group_m=8)
    bench_gemm.write_manifest(tmp_path, dict(gpu="(synthetic)"), {}, results, demo, None, ["--out", "x"], plan, 1.0)
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["provenance"] == dict(gpu="(synthetic)") and man["schedule"] == "h200-gemm-ws"
    # the simulator parameters of each variant: lapis compare simulates them
    assert man["variants"] == {"ws_s4_c2_n128": dict(block_m=128, block_k=64, block_n=128, stages=4, consumer_wgs=2)}
    assert man["command"] == "python -m lapis.gpu.bench_gemm --out x" and "spread_pct" in man["units"]
    lines = bench_gemm.table(results, demo).splitlines()
    flop = 2 * 2048 ** 3
    assert lines[1].split()[:5] == ["2048x2048x2048", "cuBLAS", "30.0", "1.50", f"{flop / 30e-6 / 1e12:.0f}"]
    assert lines[2].split()[1:6] == ["ws_s4_c2_n128", "40.0", "1.50", f"{flop / 40e-6 / 1e12:.0f}", "1.333"]
    assert lines[-1].startswith("watchdog demo: control_ok=True")


def test_gpu_side_modules_import_without_simpy_tensor_layouts_cupy_or_torch():
    block = ("import sys, importlib.abc\n"
             "class Block(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path, target=None):\n"
             "        if name.split('.')[0] in ('tensor_layouts', 'matplotlib', 'cupy', 'torch', 'simpy'):\n"
             "            raise ImportError('blocked: ' + name)\n"
             "sys.meta_path.insert(0, Block())\n"
             "import lapis.gpu.harness, lapis.gpu.bench_gemm, lapis.gpu.gemm_plan\n"
             "assert lapis.gpu.gemm_plan.load()['block_m'] == 128\n")
    r = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gpu_present_reads_the_major_version_as_a_number(monkeypatch):
    """sm_100 ("100") counts as 9.0+; a string compare with "90" would refuse it. sm_80 does not count."""
    import sys
    import types

    from lapis.gpu.harness import gpu_present

    def fake(cc, n=1):
        dev = types.SimpleNamespace(compute_capability=cc)
        cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: n), Device=lambda i: dev)
        return types.SimpleNamespace(cuda=cuda)

    for cc, n, want in (("90", 1, True), ("100", 1, True), ("80", 1, False), ("90", 0, False)):
        monkeypatch.setitem(sys.modules, "cupy", fake(cc, n))
        assert gpu_present() is want, (cc, n)
