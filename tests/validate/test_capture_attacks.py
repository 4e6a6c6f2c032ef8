"""`lapis validate` on damaged copies of shipped captures: a FIFO, a link to /dev/zero, a deflate bomb, a flipped
byte, an empty or huge-shaped .npz, wrong field types in an encode manifest, and configurations marked timeout.
Each damaged capture exits 2 with "lapis: error:" naming the file, no traceback, within seconds; entries a
capture marks as not measured are counted in --json and the text; load_box takes only uint8 bytes."""

import json
import os
import shutil
import threading

import numpy as np
import pytest

from lapis.captures.store import SHIPPED
from lapis.cli.main import main
from lapis.errors import CaptureError, LayoutError
from lapis.layouts.tma import TensorMap, load_box
from lapis.validate.layouts import format_validation, passed, validate_encode, validate_layouts
from lapis.validate.mma import not_compared_lines, validate_mma
from lapis.validate.timelines import validate_timelines
from tests.captures.test_capture_readers import empty, flipped, npz_bomb, npz_huge_shape

TMA = "tma/h200-2026-11-29-d"  # 8 configurations, all completed, 11 KB of dumps


def copy(root, *captures):
    for c in captures:
        shutil.copytree(SHIPPED / c, root / c, ignore=shutil.ignore_patterns("capture.json", "*.txt"))
    return root


def cli(capsys, *argv, seconds=20):
    """(exit status, stdout, stderr) of `lapis argv` run in a thread: a blocked read fails the test, never hangs."""
    box = {}
    th = threading.Thread(target=lambda: box.update(rc=main(list(argv))), daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"lapis {' '.join(argv)} blocked"
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return box["rc"], out, err


def refused_by_cli(capsys, *argv, names=()):
    rc, _, err = cli(capsys, *argv)
    assert rc == 2 and err.startswith("lapis: error:"), err
    for n in names:
        assert str(n) in err, (n, err)
    return err


def edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# ------------------------------------------------------------------ files that block, never end or inflate

def test_a_fifo_in_place_of_dumps_npz_is_refused_without_opening_it(tmp_path, capsys):
    root = copy(tmp_path, TMA)
    dumps = root / TMA / "dumps.npz"
    dumps.unlink()
    os.mkfifo(dumps)  # before: np.load blocked forever, waiting for a writer
    refused_by_cli(capsys, "validate", "layouts", "--captures", str(root), names=(dumps, "is a FIFO"))


def test_a_manifest_linked_to_dev_zero_is_refused_before_a_byte_is_read(tmp_path, capsys):
    root = copy(tmp_path, TMA, "wgmma/h200-2026-11-29", "cutlass_oracle/h200-2026-11-29-v2", "bank/h200-2026-11-29")
    for kind, capture in (("layouts", TMA), ("mma", "bank/h200-2026-11-29")):
        man = root / capture / "manifest.json"
        man.unlink()
        man.symlink_to("/dev/zero")  # before: read_text() grew without end (13 GB in 65 s)
        refused_by_cli(capsys, "validate", kind, "--captures", str(root), names=(man, "/dev/zero"))


def test_a_deflate_bomb_is_refused_from_the_zip_directory(tmp_path, capsys):
    """3 MB of deflate that inflate to 3 GB (np.load inflated all of it), in place of a wgmma input image."""
    root = copy(tmp_path, "wgmma/h200-2026-11-29", "cutlass_oracle/h200-2026-11-29-v2", "bank/h200-2026-11-29")
    inputs = root / "wgmma/h200-2026-11-29/inputs.npz"
    name = npz_bomb(inputs)
    assert inputs.stat().st_size < 8 << 20
    refused_by_cli(capsys, "validate", "mma", "--captures", str(root), names=(inputs, repr(name), "3145728128 bytes"))


# ------------------------------------------------------------------ damaged arrays

@pytest.mark.parametrize("damage", [flipped, empty, npz_huge_shape], ids=lambda d: d.__name__)
def test_a_damaged_npz_is_a_capture_error(tmp_path, capsys, damage):
    """Before: a flipped byte raised zlib.error, an empty file EOFError, an .npy header declaring 2**40 bytes
    MemoryError, each as a traceback."""
    root = copy(tmp_path, TMA)
    dumps = root / TMA / "dumps.npz"
    damage(dumps)
    refused_by_cli(capsys, "validate", "layouts", "--captures", str(root), names=(dumps,))


# ------------------------------------------------------------------ manifest field types

@pytest.mark.parametrize("change,field", [
    (lambda c: c.update(dtype="bf16"), "cases[0].dtype"),  # before: a LayoutError naming no file
    (lambda c: c.pop("result"), "cases[0].result"),  # before: KeyError
    (lambda c: c.update(result="accepted"), "cases[0].result"),  # before: TypeError
    (lambda c: c.update(dims=None), "cases[0].dims"),  # before: a LayoutError naming no file
])
def test_a_wrong_type_in_an_encode_manifest_names_the_file_and_field(tmp_path, capsys, change, field):
    root = copy(tmp_path, TMA, "tma_encode/h200-2026-11-29")
    man = root / "tma_encode/h200-2026-11-29/manifest.json"
    edit(man, lambda d: change(d["cases"][0]))
    with pytest.raises(CaptureError, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate_encode(root)
    refused_by_cli(capsys, "validate", "layouts", "--captures", str(root), names=(man, field))


def test_an_encode_case_that_is_not_an_object_is_named(tmp_path, capsys):
    root = copy(tmp_path, TMA, "tma_encode/h200-2026-11-29")
    man = root / "tma_encode/h200-2026-11-29/manifest.json"
    edit(man, lambda d: d["cases"].__setitem__(0, "case"))  # before: AttributeError (case.get)
    refused_by_cli(capsys, "validate", "layouts", "--captures", str(root), names=(man, "cases[0]"))


@pytest.mark.parametrize("capture,change,field", [
    ("cutlass_oracle/h200-2026-11-29-v2", lambda d: d["layouts"][0].update(major="X"), "layouts[0]"),
    ("bank/h200-2026-11-29", lambda d: d["patterns"][0].update(kernel="nope"), "patterns[0]"),
])
def test_a_value_the_model_refuses_names_the_capture_file(tmp_path, capsys, capture, change, field):
    """Before: the model's LayoutError reached the CLI without naming the capture."""
    root = copy(tmp_path, "wgmma/h200-2026-11-29", "cutlass_oracle/h200-2026-11-29-v2", "bank/h200-2026-11-29")
    edit(root / capture / "manifest.json", lambda d: (d["layouts" if "layouts" in d else "patterns"].__setitem__(
        slice(1, None), []), change(d)))
    edit(root / "wgmma/h200-2026-11-29/manifest.json", lambda d: d.update(cases=d["cases"][:2]))
    refused_by_cli(capsys, "validate", "mma", "--captures", str(root), names=(root / capture / "manifest.json", field))


def test_an_encode_rejected_configuration_keeps_whatever_arguments_it_had(tmp_path):
    root = copy(tmp_path, TMA)
    edit(root / TMA / "manifest.json", lambda d: d["configs"][0].update(rank=9, result=dict(
        status="encode_rejected", encode="CUDA_ERROR_INVALID_VALUE", runs=[])))
    out = validate_layouts(str(root))
    assert out["tma"]["verdicts"]["encode-rejected"] == 1 and passed(out)


# ------------------------------------------------------------------ entries not measured

def test_timed_out_configurations_are_counted_and_printed_and_do_not_fail(tmp_path, capsys):
    root = copy(tmp_path, TMA)
    edit(root / TMA / "manifest.json", lambda d: d["configs"][0]["result"].update(status="timeout"))
    out = validate_layouts(str(root))
    assert out["tma"]["verdicts"]["timeout"] == 1 and out["tma"]["configs"] == 7 and passed(out)
    assert "1 modelled loads that timed out on the GPU" in format_validation(out)
    rc, text, _ = cli(capsys, "validate", "layouts", "--captures", str(root), "--json")
    assert rc == 0 and json.loads(text)["tma"]["verdicts"]["timeout"] == 1


def test_a_capture_whose_every_configuration_timed_out_fails_beside_a_good_one(tmp_path, capsys):
    """Before: the timed-out capture was dropped without a word and the run exited 0 on the other capture."""
    root = copy(tmp_path, TMA)
    shutil.copytree(root / TMA, root / "tma/h200-2026-11-29-z")
    man = root / "tma/h200-2026-11-29-z/manifest.json"
    edit(man, lambda d: [c["result"].update(status="timeout") for c in d["configs"]])
    err = refused_by_cli(capsys, "validate", "layouts", "--captures", str(root), names=(man, "8 timeout"))
    assert "holds at least one entry lapis can compare" in err


def test_wgmma_cases_that_did_not_complete_are_counted_not_mismatches(tmp_path, capsys):
    """Before: a case whose status was not "ok" counted as a D mismatch (exit 1), and a capture of nothing but
    such cases went unremarked."""
    root = copy(tmp_path, "wgmma/h200-2026-11-29", "cutlass_oracle/h200-2026-11-29-v2", "bank/h200-2026-11-29")
    man = root / "wgmma/h200-2026-11-29/manifest.json"
    edit(man, lambda d: (d.update(cases=d["cases"][:4]), d["cases"][0]["result"].update(status="timeout")))
    out = validate_mma(str(root))
    assert out["wgmma"]["not_compared"] == {"timeout": 1} and out["wgmma"]["mismatches"] == 0
    assert not_compared_lines(out) == ["not compared: 1 wgmma cases (timeout)"]
    rc, text, _ = cli(capsys, "validate", "mma", "--captures", str(root))
    assert rc == 0 and "not compared: 1 wgmma cases (timeout)" in text
    edit(man, lambda d: [c["result"].update(status="timeout") for c in d["cases"]])
    refused_by_cli(capsys, "validate", "mma", "--captures", str(root), names=(man, "none comparable"))


def test_untimed_variants_of_a_timed_run_are_counted(tmp_path, capsys):
    root = copy(tmp_path, "gemm/h200-2026-11-29-n256")
    man = root / "gemm/h200-2026-11-29-n256/manifest.json"
    edit(man, lambda d: d["results"][0]["variants"]["ws_s4_c2_n256"].pop("plain"))
    out = validate_timelines(str(root))
    assert out["cases"] == 1 and out["not_compared"] == {"gemm/h200-2026-11-29-n256": {"no plain-build time": 1}}
    edit(man, lambda d: d["results"][1]["variants"]["ws_s4_c2_n256"].pop("plain"))  # nothing timed: no timed run
    refused_by_cli(capsys, "validate", "timelines", "--captures", str(root), names=("no timed attention or GEMM",))


# ------------------------------------------------------------------ load_box's input

@pytest.mark.parametrize("image", [np.arange(32, dtype=np.int64), np.arange(32, dtype=np.float32),
                                   np.arange(32, dtype=np.uint8).reshape(4, 8)])
def test_load_box_refuses_an_image_that_is_not_uint8_bytes(image):
    """Before: an int64 or float image was cast to bytes element by element (values mod 256), silently."""
    t = TensorMap("f32", (8,), (), (8,))
    with pytest.raises(LayoutError, match=f"global_image as 1-D uint8 bytes: got {image.dtype}.*fix: pass the bytes"):
        load_box(t, image, (0,), 0, np.zeros(32, np.uint8), 0)
    with pytest.raises(LayoutError, match="smem as 1-D uint8 bytes"):
        load_box(t, np.zeros(32, np.uint8), (0,), 0, np.zeros(8, np.float32), 0)
