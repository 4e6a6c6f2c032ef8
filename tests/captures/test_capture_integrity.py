"""Capture integrity (lapis.captures.safe, Integrity): every file a reader uses is checked against the size and
SHA-256 its capture.json lists, and a shipped capture.json against lapis/data/capture_checksums.json, so a
manifest cut down (with or without its capture.json) is a CaptureError naming the file, what was expected and
what was found; `lapis validate` exits 2 on it. Out-of-range codes in a capture (a swizzle of -1, a dim of 0,
an unknown dtype) are CaptureErrors naming the field, the value and the allowed values (lapis.captures.readers)."""

import hashlib
import json
import os
import re
import shutil

import pytest

from lapis.captures import index, readers, safe
from lapis.captures.store import SHIPPED
from lapis.cli.main import main
from lapis.data import CAPTURE_CHECKSUMS
from lapis.errors import CaptureError

TMA = "tma/h200-2026-11-29-d"  # 8 configurations, all completed


def listed(folder) -> dict:
    return {f["path"]: f for f in json.loads((folder / "capture.json").read_text())["files"]}


def cut_to_one_config(folder):
    man = json.loads((folder / "manifest.json").read_text())
    man["configs"] = man["configs"][:1]
    (folder / "manifest.json").write_text(json.dumps(man))


def relisted(folder, name: str) -> None:
    """Rewrite capture.json so it lists `name` as it now is (what an attacker who knows the format does)."""
    rec = json.loads((folder / "capture.json").read_text())
    data = (folder / name).read_bytes()
    for f in rec["files"]:
        if f["path"] == name:
            f.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (folder / "capture.json").write_text(json.dumps(rec, indent=1) + "\n")


def test_a_shipped_capture_reads_and_its_capture_json_matches_the_checksums_file():
    folder = SHIPPED / TMA
    sums = json.loads(CAPTURE_CHECKSUMS.read_text())["captures"]
    assert sums[TMA] == hashlib.sha256((folder / "capture.json").read_bytes()).hexdigest()
    assert len(sums) == len(list(SHIPPED.glob("*/*/capture.json")))
    assert len(readers.read_tma(folder).manifest["configs"]) == 8


def test_a_manifest_cut_to_one_config_is_refused_naming_expected_and_found_sizes(tmp_path, capsys):
    folder = tmp_path / TMA
    shutil.copytree(SHIPPED / TMA, folder)
    expected = listed(folder)["manifest.json"]["size"]
    cut_to_one_config(folder)
    found = (folder / "manifest.json").stat().st_size
    with pytest.raises(CaptureError, match=f"manifest.json: expected {expected} bytes, found {found} bytes"):
        readers.read_tma(folder)
    assert main(["validate", "layouts", "--captures", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a capture file matches what capture.json records for it" in err and "Traceback" not in err


def test_a_same_size_edit_is_refused_by_its_sha256(tmp_path):
    folder = tmp_path / TMA
    shutil.copytree(SHIPPED / TMA, folder)
    data = bytearray((folder / "dumps.npz").read_bytes())
    data[-100] ^= 0xFF
    (folder / "dumps.npz").write_bytes(bytes(data))
    sha = listed(folder)["dumps.npz"]["sha256"]
    with pytest.raises(CaptureError, match=f"dumps.npz: expected sha256 {sha}, found sha256 "
                                           f"{hashlib.sha256(data).hexdigest()}"):
        readers.read_tma(folder)


def test_a_file_capture_json_does_not_list_is_refused(tmp_path):
    folder = tmp_path / TMA
    shutil.copytree(SHIPPED / TMA, folder)
    rec = json.loads((folder / "capture.json").read_text())
    rec["files"] = [f for f in rec["files"] if f["path"] != "dumps.npz"]
    (folder / "capture.json").write_text(json.dumps(rec))
    with pytest.raises(CaptureError, match="capture.json lists every file of its capture: got .*dumps.npz is not in"):
        readers.read_tma(folder)


def test_a_capture_without_capture_json_is_read_unchecked(tmp_path):
    """A fresh capture (not yet indexed) has nothing to be checked against; its schema is still checked."""
    folder = tmp_path / TMA
    shutil.copytree(SHIPPED / TMA, folder, ignore=shutil.ignore_patterns("capture.json"))
    cut_to_one_config(folder)
    assert len(readers.read_tma(folder).manifest["configs"]) == 1


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """A copy of one shipped capture standing in for the shipped root, with its own checksums file."""
    root = tmp_path / "captures"
    shutil.copytree(SHIPPED / TMA, root / TMA)
    sums = tmp_path / "capture_checksums.json"
    sums.write_text(json.dumps({"schema": "lapis.capture-checksums/1", "captures": {
        TMA: hashlib.sha256((root / TMA / "capture.json").read_bytes()).hexdigest()}}))
    monkeypatch.setattr(safe, "CAPTURES", root)
    monkeypatch.setattr(safe, "CAPTURE_CHECKSUMS", sums)
    return root / TMA


def test_a_shipped_manifest_cut_together_with_its_capture_json_is_refused_by_the_checksums(shipped_copy):
    assert len(readers.read_tma(shipped_copy).manifest["configs"]) == 8
    expected = hashlib.sha256((shipped_copy / "capture.json").read_bytes()).hexdigest()
    cut_to_one_config(shipped_copy)
    relisted(shipped_copy, "manifest.json")
    found = hashlib.sha256((shipped_copy / "capture.json").read_bytes()).hexdigest()
    with pytest.raises(CaptureError, match=f"capture_checksums.json records for it: got .*capture.json: expected "
                                           f"sha256 {expected}, found sha256 {found}"):
        readers.read_tma(shipped_copy)


def test_a_shipped_capture_without_capture_json_is_refused(shipped_copy):
    (shipped_copy / "capture.json").unlink()
    with pytest.raises(CaptureError, match="capture.json"):
        readers.read_tma(shipped_copy)


def test_each_file_is_hashed_once_per_process(tmp_path, monkeypatch):
    folder = tmp_path / TMA
    shutil.copytree(SHIPPED / TMA, folder)
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(safe.hashlib, "sha256", lambda data=b"": hashed.append(len(data)) or real(data))
    readers.read_tma(folder)
    readers.read_tma(folder)
    sizes = {f["size"] for f in listed(folder).values() if f["path"] in ("manifest.json", "dumps.npz")}
    assert sorted(hashed) == sorted(sizes)  # the second read hashed nothing


# ---------------------------------------------------------------- out-of-range codes

def fresh(tmp_path, capture: str):
    folder = tmp_path / capture
    shutil.copytree(SHIPPED / capture, folder, ignore=shutil.ignore_patterns("capture.json"))
    return folder


def edited(folder, edit):
    man = json.loads((folder / "manifest.json").read_text())
    edit(man)
    (folder / "manifest.json").write_text(json.dumps(man))
    return folder


@pytest.mark.parametrize("field,value,allowed", [
    ("swizzle", -1, "0, 1, 2, 3, 4, 5, 6"), ("dtype", 99, "0, 1, 2, 3"), ("l2", 7, "0, 1, 2, 3"), ("oob", 2, "0, 1"),
    ("interleave", 3, "0, 1, 2")])
def test_a_tma_code_out_of_range_is_a_capture_error_naming_field_value_and_range(tmp_path, capsys, field, value,
                                                                                   allowed):
    folder = edited(fresh(tmp_path, TMA), lambda m: m["configs"][2].update({field: value}))
    with pytest.raises(CaptureError, match=rf"configs\[2\] \(id \d+\)\.{field} is one of the values the hardware "
                                           rf"takes: got .*: configs\[2\] \(id \d+\)\.{field} = {value} "
                                           rf"\(allowed: {allowed}"):
        readers.read_tma(folder)
    assert main(["validate", "layouts", "--captures", str(tmp_path)]) == 2  # not a disagreement (exit 1)
    capsys.readouterr()


def test_a_dim_of_zero_names_its_index_and_the_range(tmp_path):
    folder = edited(fresh(tmp_path, TMA), lambda m: m["configs"][0]["dims"].__setitem__(0, 0))
    with pytest.raises(CaptureError, match=r"configs\[0\] \(id \d+\)\.dims\[0\] = 0 \(allowed: 1\.\.4294967296\)"):
        readers.read_tma(folder)


@pytest.mark.parametrize("field,value", [("dtype", "f8"), ("swizzle", "256B"), ("major", "X"), ("n", 12),
                                         ("ta", 2)])
def test_a_wgmma_case_out_of_range_is_a_capture_error(tmp_path, field, value):
    folder = edited(fresh(tmp_path, "wgmma/h200-2026-11-29"),
                    lambda m: next(c for c in m["cases"] if c["result"]["status"] == "ok").update({field: value}))
    with pytest.raises(CaptureError, match=rf"\.{field} = {value!r} \(allowed: "):
        readers.read_wgmma(folder)


def test_a_bank_pattern_of_an_unknown_kind_or_negative_offset_is_a_capture_error(tmp_path):
    folder = edited(fresh(tmp_path, "bank/h200-2026-11-29"), lambda m: m["patterns"][0].update(kernel="lds256"))
    with pytest.raises(CaptureError, match=r"patterns\[0\] \(id \d+\)\.kernel = 'lds256' \(allowed: 'lds32'"):
        readers.read_bank(folder)
    edited(folder, lambda m: m["patterns"][0].update(kernel="lds32", offsets=[-4] * 32))
    with pytest.raises(CaptureError, match=r"patterns\[0\]\.offsets: -4"):
        readers.read_bank(folder)


def test_an_encode_case_the_driver_refused_may_hold_any_code_but_an_accepted_one_may_not(tmp_path):
    capture = next(p.relative_to(SHIPPED).as_posix() for p in sorted((SHIPPED / "tma_encode").iterdir()))
    folder = fresh(tmp_path, capture)
    man = json.loads((folder / "manifest.json").read_text())
    refused = next(i for i, c in enumerate(man["cases"]) if not c["result"]["accepted"])
    accepted = next(i for i, c in enumerate(man["cases"]) if c["result"]["accepted"])
    edited(folder, lambda m: m["cases"][refused].update(swizzle=-1))
    assert readers.read_tma_encode(folder).manifest["cases"][refused]["swizzle"] == -1
    edited(folder, lambda m: m["cases"][accepted].update(swizzle=-1))
    with pytest.raises(CaptureError, match=rf"cases\[{accepted}\] \(id \d+\)\.swizzle = -1"):
        readers.read_tma_encode(folder)


@pytest.mark.parametrize("shape", ["0x16x4096x128", "8x16x4096x-128", "bogus", "8x16x4096"])
def test_an_attention_shape_that_is_not_four_positive_extents_is_a_capture_error(tmp_path, shape):
    folder = edited(fresh(tmp_path, "attention/h200-2026-11-30-s5"), lambda m: m["results"][1].update(shape=shape))
    with pytest.raises(CaptureError, match=rf"shape is BxHxLxD \(positive integers\): got .*results\[1\]\.shape: "
                                           rf"'{shape}'"):
        readers.read_attention(folder)
    assert main(["validate", "timelines", "--captures", str(tmp_path)]) == 2  # was: a row lapis could not simulate


@pytest.mark.parametrize("edit", [{"gemm_size": -5}, {"gemm_size": 0}, {"shape": "8x0x4096x128"}])
def test_an_ncu_capture_of_a_size_no_kernel_ran_is_a_capture_error(tmp_path, edit):
    capture = next(p.relative_to(SHIPPED).as_posix() for p in sorted((SHIPPED / "ncu").iterdir()))
    folder = edited(fresh(tmp_path, capture), lambda m: m.update(edit))
    with pytest.raises(CaptureError, match=r"a ncu capture.s attention shape is BxHxLxD and GEMM size"):
        readers.read_ncu(folder)


@pytest.mark.parametrize("edit", [lambda m: m["kernels"].update(s3={}),
                                  lambda m: m["kernels"]["s3"]["metrics"].pop("sm__cycles_elapsed.avg")])
def test_an_ncu_kernel_without_the_metrics_units_reads_is_a_capture_error(tmp_path, edit):
    folder = edited(fresh(tmp_path, "ncu/h200-2026-12-01-units"), edit)
    with pytest.raises(CaptureError, match=r"kernels\.s3\.metrics.*missing sm__cycles_elapsed\.avg"):
        readers.read_ncu(folder)


CLOCK = "clock/h200-2026-12-02"


@pytest.mark.parametrize("corrupt, words", [
    # a FIFO was left out of capture.json's files and the capture written without its results; the others had
    # their new sha256 listed, blessing the corruption
    (lambda r: (r.unlink(), os.mkfifo(r)), "a capture file is a regular file: got .*results.json is a FIFO"),
    (lambda r: r.write_text(r.read_text()[:500]), "a clock capture is a results.json with a list of points .*JSONDecodeError"),
    (lambda r: r.unlink(), "a clock capture is a results.json with a list of points .*: got .*FileNotFoundError"),
    (lambda r: r.write_text(r.read_text().replace('"probe_mhz": 1966.32582125', '"probe_mhz": NaN')),
     "each clock point has finite tensor_duty, fma_duty, probe_mhz > 0"),
])
def test_the_index_refuses_to_list_a_clock_capture_it_cannot_fit(tmp_path, corrupt, words):
    folder = tmp_path / CLOCK
    shutil.copytree(SHIPPED / CLOCK, folder)
    assert index.generated(tmp_path, tmp_path / "index.json", tmp_path / "sums.json")  # the copy as shipped
    corrupt(folder / "clock" / "results.json")
    with pytest.raises(CaptureError, match=words):
        index.generated(tmp_path, tmp_path / "index.json", tmp_path / "sums.json")


@pytest.mark.parametrize("metric, value", [("dram__bytes_read.sum", -5e9), ("sm__cycles_elapsed.avg.per_second", 0),
                                           ("sm__cycles_elapsed.avg", 0)])
def test_a_negative_byte_count_or_a_zero_clock_is_a_capture_error(tmp_path, metric, value):
    folder = edited(fresh(tmp_path, "ncu/h200-2026-12-01-units"),
                    lambda m: m["kernels"]["s3"]["metrics"][metric].update(value=value))
    with pytest.raises(CaptureError, match=rf"byte counts are >= 0 .*kernels\.s3\.metrics\.{re.escape(metric)}"):
        readers.read_ncu(folder)
