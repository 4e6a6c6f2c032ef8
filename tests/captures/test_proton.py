"""lapis.captures.proton on Proton traces written here in the format of Triton 3.6's StreamChromeTraceWriter
(tests/conftest.py proton_ws_gemm: hand-set times, so every expected value below is worked out by hand), and on
the H200 captures committed under lapis/data/captures/proton/h200-2026-12-01 (Triton 3.6; the expected values
come from the raw trace's ts/dur, read by eye, and the SM clock of 1980 MHz its capture.json records)."""

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from lapis.captures import proton, safe
from lapis.errors import CaptureError


def spans(r, role, cta=0, work_item=None):
    return [(e["op"], e["start_ns"], e["end_ns"], e["work_item"], e["k_index"], e["kind"]) for e in r["events"]
            if e["role"] == role and e["cta"] == cta and (work_item is None or e["work_item"] == work_item)]


def test_a_capture_folder_reads_as_roles_ops_work_items_and_k_indices(proton_capture):
    r = proton.read(proton_capture())
    assert r["kernel"] == "ws_matmul_kernel" and r["ctas"] == [0, 1] and r["roles"] == ["consumer0", "consumer1",
                                                                                          "producer"]
    assert r["header"]["grid_ctas"] == 132 and r["header"]["cta_every"] == 1 and r["header"]["iter_every"] == 1
    assert r["clock_mhz"] == {0: 2000.0, 1: 2000.0} and r["time_base"].startswith("SM cycles at 2000 MHz")
    # ns = cycles / 2 (2000 MHz); consumer0's first iteration, and the store that ends its first tile
    assert spans(r, "consumer0")[:3] == [("wait full", 0.0, 100.0, 0, 0, "wait"),
                                         ("wgmma", 100.0, 150.0, 0, 0, "issue"),
                                         ("wait wgmma", 150.0, 400.0, 0, 0, "wait")]
    assert spans(r, "consumer0")[12] == ("store C", 2000.0, 2200.0, 0, -1, "issue")
    assert spans(r, "producer", work_item=1)[-2:] == [("wait empty", 3700.0, 4000.0, 1, 3, "wait"),
                                                      ("issue TMA", 4000.0, 4020.0, 1, 3, "issue")]
    # CTA 1 started 1000 ns after CTA 0 (its init time), one tile; warp 1 (no role) and the "kernel"
    # containers give no event
    assert spans(r, "consumer1", cta=1)[0] == ("wait full", 1000.0, 1100.0, 0, 0, "wait")
    assert len(r["events"]) == 2 * 2 * 13 + 2 * 8 + 2 * 13 + 8 == 102
    assert r["dropped"] == {"containers": 2, "outside_work_items": 0}
    assert [e["sm"] for e in r["events"] if e["cta"] == 1][:1] == [7]


def test_a_bare_trace_gets_a_role_per_warp_and_proton_s_1_ghz(proton_capture):
    r = proton.read(proton_capture() / "ws.chrome_trace")
    assert r["roles"] == ["warp0", "warp1", "warp4", "warp8"]
    assert r["time_base"].startswith("SM cycles at Proton's assumed 1000 MHz")
    # without a work-item scope the "tile" scopes are containers and the CTA's run is work item 0: times in cycles
    assert spans(r, "warp0")[:2] == [("wait full", 0.0, 200.0, 0, 0, "wait"), ("wgmma", 200.0, 300.0, 0, 0, "issue")]
    assert spans(r, "warp1")[0] == ("other", 0.0, 20.0, 0, 0, "issue")
    assert r["dropped"]["containers"] == 2 + 3 * 4  # the kernels, the tiles of warps 0, 4, 8 and 1


def test_wait_ops_and_the_lead_warp_of_a_role_come_from_capture_json(proton_capture):
    r = proton.read(proton_capture(dict(wait_ops=["wait full"], roles={"consumer0": [4, 5], "producer": 8})))
    assert r["roles"] == ["consumer0", "producer"]
    assert {(e["op"], e["kind"]) for e in r["events"] if e["role"] == "consumer0"} == {
        ("wait full", "wait"), ("wgmma", "issue"), ("wait wgmma", "issue"), ("store C", "issue")}


def test_ops_outside_the_work_item_scope_are_dropped_and_counted(proton_capture):
    r = proton.read(proton_capture(dict(work_item_scope="kernel")))
    # "kernel" wraps warp 0 only: the other roles' warps hold no instance, so their ops are outside
    assert r["roles"] == ["consumer0"]
    assert r["dropped"]["outside_work_items"] == (13 + 8) * 2 + 13 + 8  # consumer1 and producer, both CTAs
    assert spans(r, "consumer0")[4] == ("wgmma", 600.0, 650.0, 0, 1, "issue")  # the tiles are containers now


@pytest.mark.parametrize("meta, words", [
    (dict(status="unsupported", error="RuntimeError: proton: no instrumentation on sm_90"), "no instrumentation"),
    (dict(trace="../ws.chrome_trace"), "name of the trace file"),
    (dict(roles={"producer": 3}), "warps in the trace: [0, 1, 4, 8]"),
    (dict(roles={"a": 0, "b": [0]}), "own lead warp"),
    (dict(roles={"a": "0"}), "warp id"),
    (dict(clock_mhz=0), "clock_mhz"),
    (dict(clock_mhz=True), "clock_mhz"),
    (dict(kernel="other_kernel"), "['ws_matmul_kernel']"),
    (dict(wait_ops="wait full"), "wait_ops"),
    (dict(work_item_scope="no such scope"), "outside 'no such scope'"),
])
def test_a_capture_json_that_breaks_a_rule_is_a_capture_error(proton_capture, meta, words):
    with pytest.raises(CaptureError) as err:
        proton.read(proton_capture(meta))
    assert words in str(err.value)


def rewrite(folder, edit):
    f = folder / "ws.chrome_trace"
    doc = json.loads(f.read_text())
    f.write_text(edit(doc) if callable(edit) else edit)
    return folder


@pytest.mark.parametrize("edit, words", [
    ("{\"traceEvents\": [", "a Proton trace is JSON"),
    ("[]", "a JSON object with a traceEvents list"),
    (lambda d: json.dumps(dict(d, traceEvents=[1])), "every trace event is a JSON object"),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [dict(d["traceEvents"][-1], pid="CTA 0")])),
     "pid is \"<kernel> Core<sm> CTA<cta>\""),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [dict(d["traceEvents"][-1], tid="warp x")])),
     "tid \"warp <w> (line <l>)\""),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [dict(d["traceEvents"][-1], dur=-1)])),
     "dur is a finite number >= 0"),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [dict(d["traceEvents"][-1], ts="1")])),
     "ts is a finite number >= 0"),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [dict(d["traceEvents"][-1], name="")])),
     "names its scope"),
    (lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"][:2])), "holds scope events"),
])
def test_a_corrupt_trace_is_a_capture_error(proton_capture, edit, words):
    with pytest.raises(CaptureError) as err:
        proton.read(rewrite(proton_capture(), edit))
    assert words in str(err.value)


def test_two_kernels_need_a_choice_and_the_size_is_limited(proton_capture, monkeypatch):
    folder = rewrite(proton_capture(), lambda d: json.dumps(dict(d, traceEvents=d["traceEvents"] + [
        dict(d["traceEvents"][-1], pid="k2 Core1 CTA0", cat="k2")])))
    with pytest.raises(CaptureError, match="holds one kernel"):
        proton.read(folder / "ws.chrome_trace")
    assert proton.read(folder)["kernel"] == "ws_matmul_kernel"  # capture.json names it
    size = (folder / "ws.chrome_trace").stat().st_size
    monkeypatch.setitem(safe.LIMITS, "json_bytes", size - 1)
    with pytest.raises(CaptureError, match=f"{size} bytes"):
        proton.read(folder / "ws.chrome_trace")


def test_a_folder_without_capture_json_and_which_paths_are_proton(tmp_path, proton_capture):
    with pytest.raises(CaptureError, match="holds capture.json"):
        proton.read(tmp_path)
    assert proton.is_proton(tmp_path) and proton.is_proton(tmp_path / "x.chrome_trace")
    assert proton.is_proton(tmp_path / "x.json")
    assert not proton.is_proton(tmp_path / "x.npz") and not proton.is_proton(tmp_path / "x.bin")


H200 = Path(__file__).resolve().parents[2] / "lapis" / "data" / "captures" / "proton" / "h200-2026-12-01"


def test_the_h200_ws_gemm_capture_reads_its_consumers_and_says_the_producer_recorded_nothing():
    r = proton.read(H200 / "gluon_ws_matmul")
    assert r["kernel"] == "ws_matmul_kernel" and r["ctas"] == list(range(132)) and r["header"]["grid_ctas"] == 132
    assert r["roles"] == ["consumer0", "consumer1"] and r["ops"] == ["store C", "wait full", "wait wgmma", "wgmma"]
    # warp 8, named the producer, ran no partition (Triton padded the 1-warp worker to a warpgroup and put the
    # producer on warp 10, outside the sampling 0, 4, 8): reported with that cause, not refused
    assert list(r["not_recorded"]) == ["producer"]
    assert r["not_recorded"]["producer"].startswith("warp 8 recorded no scope (the trace holds warps [0, 4])")
    assert "the worker on warp 10 and idle warps on 8, 9 and 11" in r["not_recorded"]["producer"]
    # 256 tiles over 132 CTAs, 2 consumer warps: each tile 8 K blocks x (wait full, wgmma, wait wgmma), the
    # last wait wgmma and store C: 26 ops; the "tile" scopes are work items, not ops
    assert len(r["events"]) == 256 * 2 * 26 == 13312 and r["dropped"] == dict(containers=0, outside_work_items=0)
    c0 = [(e["op"], e["work_item"], e["k_index"], e["kind"], e["end_ns"] - e["start_ns"], e["sm"])
          for e in r["events"] if e["cta"] == 0 and e["role"] == "consumer0"]
    # the trace's CTA0 warp 0: wait full ts 0.378 dur 1.027, wgmma ts 1.441 dur 0.089 (µs at Proton's 1 GHz,
    # i.e. kilocycles), on Core124: ns = cycles / 1.98
    assert [x[:4] for x in c0[:3]] == [("wait full", 0, 0, "wait"), ("wgmma", 0, 0, "issue"),
                                       ("wait wgmma", 0, 0, "wait")]
    assert c0[0][4] == pytest.approx(1027 / 1.98) and c0[1][4] == pytest.approx(89 / 1.98) and c0[0][5] == 124
    starts = [e["start_ns"] for e in r["events"] if e["cta"] == 0 and e["role"] == "consumer0"]
    assert starts[1] - starts[0] == pytest.approx((1441 - 378) / 1.98)
    assert len(c0) == 52 and c0[-1][:3] == ("store C", 1, -1)  # CTA 0 ran tiles 0 and 132


def test_the_h200_pipelined_gemm_and_add_captures_read_every_warp_s_scopes():
    r = proton.read(H200 / "gluon_matmul")
    assert r["kernel"] == "pipelined_matmul_kernel" and r["roles"] == ["consumer0"] and r["not_recorded"] == {}
    # 16 CTAs, 1 tile each: 8 K blocks of 128 x (issue TMA, wait full, wait wgmma, wgmma), the last wait, store C
    assert len(r["events"]) == 16 * (8 * 4 + 2) == 544
    first = r["events"][0]
    assert (first["op"], first["k_index"], first["cta"], first["sm"]) == ("issue TMA", 0, 0, 128)
    a = proton.read(H200 / "triton_add")
    assert a["kernel"] == "add_kernel" and a["roles"] == ["thread_block"] and a["header"]["grid_ctas"] == 256
    assert len(a["events"]) == 256 * 3 and a["ops"] == ["add", "load", "store"]  # warp 0 of each CTA


def test_a_trace_stored_gzip_compressed_reads_as_the_plain_one(proton_capture, tmp_path):
    folder = proton_capture()
    plain = proton.read(folder)
    f = folder / "ws.chrome_trace"
    (folder / "ws.chrome_trace.gz").write_bytes(gzip.compress(f.read_bytes(), mtime=0))
    f.unlink()
    assert proton.read(folder)["events"] == plain["events"]
    assert proton.read(folder / "ws.chrome_trace.gz")["events"] != []  # a bare .gz trace: one role a warp
    assert proton.is_proton(tmp_path / "x.chrome_trace.gz") and proton.is_proton(tmp_path / "x.json.gz")
    assert not proton.is_proton(tmp_path / "x.npz.gz")


def test_the_date_folder_of_several_kernels_names_its_subfolders(tmp_path):
    shutil.copytree(H200, tmp_path / "d")
    with pytest.raises(CaptureError, match="one kernel's folder.*gluon_matmul"):
        proton.read(tmp_path / "d")


def test_a_role_outside_the_selective_sampling_is_named_as_such(proton_capture):
    mode = "default:sampling_strategy=SAMPLING_STRATEGY.SELECTIVE:sampling_options=0,4:buffer_type=BUFFER_TYPE.SHARED"
    r = proton.read(proton_capture(dict(mode=mode, roles={"consumer0": 0, "producer": 9})))
    assert r["roles"] == ["consumer0"]
    assert r["not_recorded"] == {"producer": "warp 9 is not in the selective sampling ([0, 4]): Proton did not "
                                             "record it"}


@pytest.mark.parametrize("make, words", [(os.mkfifo, "is a FIFO"), (os.mkdir, "is a folder")])
def test_a_capture_json_that_is_not_a_regular_file_is_named_not_missing(proton_capture, make, words):
    folder = proton_capture()
    (folder / "capture.json").unlink()
    make(folder / "capture.json")
    with pytest.raises(CaptureError) as err:
        proton.read(folder)
    assert "a capture file is a regular file" in str(err.value) and words in str(err.value)
    assert "no capture.json" not in str(err.value)


def test_a_null_clock_is_refused_not_taken_as_proton_s_1000_mhz(proton_capture):
    folder = proton_capture()
    meta = json.loads((folder / "capture.json").read_text())
    (folder / "capture.json").write_text(json.dumps(dict(meta, clock_mhz=None)))
    with pytest.raises(CaptureError) as err:
        proton.read(folder)
    assert "clock_mhz null" in str(err.value) and "nvidia-smi --query-gpu=clocks.sm" in str(err.value)
