"""TMA placement: hand-derived placements, the runtime rules, and replay of the H200 dumps."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lapis.captures.store import SHIPPED, manifests
from lapis.errors import LayoutError
from lapis.layouts.tma import NotModelled, TensorMap, load_box, place_box
from lapis.validate.layouts import check_dump, validate_layouts

REPO = Path(__file__).resolve().parents[2]


def bf16_map(swizzle, inner=64, rows=8, oob="zero"):
    return TensorMap("bf16", (256, 64), (512,), (inner, rows), swizzle=swizzle, oob=oob)


def test_sw128_row1_chunk0_moves_to_chunk1():
    # Row r's 16 B chunk c sits at chunk c ^ (r & 7) of its 128 B row (PTX ISA 5.5.7).
    p = place_box(bf16_map("128B"), (0, 0), 0)
    assert p.smem_addr[1, 0] == 128 + 16
    assert p.smem_addr[1, 8] == 128 + 0  # element 8 = chunk 1 -> chunk 0
    assert p.smem_addr[7, 63] == 7 * 128 + ((7 ^ 7) * 16) + 14


def test_swizzle_phase_follows_the_absolute_address():
    # At +128 B from a 1024 B boundary the first row already has phase 1.
    p = place_box(bf16_map("128B"), (0, 0), 1024 + 128)
    assert p.smem_addr[0, 0] == 1024 + 128 + 16
    assert p.smem_addr[0, 8] == 1024 + 128


def test_narrow_box_rows_are_padded_to_the_span():
    # SW64 with 16 B rows: row r starts at r x 64 B before the XOR of bits [5:4] with [8:7].
    p = place_box(bf16_map("64B", inner=8, rows=4), (0, 0), 0)
    assert [int(a) for a in p.smem_addr[:, 0]] == [0, 64, 128 + 16, 192 + 16]


def test_no_swizzle_rows_are_packed():
    p = place_box(bf16_map("none", inner=24, rows=3), (0, 0), 0)
    assert [int(a) for a in p.smem_addr[:, 0]] == [0, 48, 96]


def test_element_strides_skip_and_dim0_stride_is_ignored():
    t = TensorMap("u32", (16, 20), (64,), (4, 6), elem_strides=(4, 3))
    p = place_box(t, (4, 1), 0)
    assert p.smem_addr.shape == (2, 4)  # ceil(6/3) rows, 4 elements (elem_strides[0] ignored)
    assert [int(g) for g in p.global_offset[:, 0]] == [1 * 64 + 16, 4 * 64 + 16]


def test_out_of_bounds_fill_zero_and_nan_pattern():
    t = TensorMap("f32", (8, 4), (32,), (8, 2), oob="nan")
    image = np.arange(32, dtype="<u4").view(np.uint8)
    smem = np.zeros(64, np.uint8)
    load_box(t, image, (0, 3), 0, smem, 0)  # row 3 in bounds, row 4 out
    words = smem.view("<u4")
    assert list(words[:8]) == list(range(24, 32))
    assert set(words[8:].tolist()) == {0x7FF77FF7}
    load_box(TensorMap("f32", (8, 4), (32,), (8, 2)), image, (0, 3), 0, smem, 0)
    assert set(smem.view("<u4")[8:].tolist()) == {0}


def test_tf32_rounds_the_low_13_bits_to_nearest_even():
    t = TensorMap("tf32", (8,), (), (8,))
    image = np.array([0x0FFF, 0x1001, 0x3F801FFF, 0x12345678, 0x1000, 0x3000, 0x5000, 0x2000], "<u4").view(np.uint8)
    smem = np.zeros(32, np.uint8)
    load_box(t, image, (0,), 0, smem, 0)
    assert list(smem.view("<u4")) == [0x0, 0x2000, 0x3F802000, 0x12346000, 0x0, 0x4000, 0x4000, 0x2000]


@pytest.mark.parametrize("dst,coords,rule", [(0x410, (0, 0), "128 B aligned"), (0x400, (3, 0), "16 B aligned")])
def test_runtime_faults_are_named(dst, coords, rule):
    with pytest.raises(LayoutError, match=rule):
        place_box(bf16_map("128B"), coords, dst)


def test_interleave_is_reported_as_not_modelled():
    t = TensorMap("f16", (8, 4, 4), (16, 64), (8, 2, 2), interleave="16B")
    with pytest.raises(NotModelled):
        place_box(t, (0, 0, 0), 0)


# --- replay of the H200 captures -------------------------------------------

def test_h200_dumps_replay_with_zero_mismatched_bytes():
    v = validate_layouts()
    t = v["tma"]
    assert t["mismatched_bytes"] == 0, t["mismatched_configs"]
    assert t["configs"] >= 24 and t["bytes_compared"] > 1_000_000
    assert t["faults"]["missed"] == 0 and t["faults"]["false_alarms"] == 0
    assert {1, 2, 4} <= set(t["element_bytes"]) and set(t["swizzles"]) >= {0, 1, 2, 3}
    assert v["provenance"]["gpu"] == "NVIDIA H200"
    # The sm100-era 128B_ATOM_* swizzles: the H200's driver refuses to encode them, so no copy ran.
    assert {m: f["encode_accepted"] for m, f in t["atom_modes"].items()} == dict.fromkeys(
        ("128B_atom32B", "128B_atom32B_flip8B", "128B_atom64B"), False)


def _first_ok_config():
    folder = manifests(SHIPPED, "tma")[0]
    man = json.loads((folder / "manifest.json").read_text())
    cfg = next(c for c in man["configs"] if c["result"]["status"] == "ok" and c["swizzle"] == 3)
    with np.load(folder / "dumps.npz") as z:
        dumps = {k: z[k].copy() for k in z.files}
    return cfg, dumps


def test_one_flipped_captured_byte_is_exactly_one_mismatch():
    cfg, dumps = _first_ok_config()
    assert check_dump(cfg, dumps).mismatched_bytes == 0
    key = cfg["result"]["runs"][0]["key"]
    dumps[key][1024 + 37] ^= 0x01  # inside the box footprint
    check = check_dump(cfg, dumps)
    assert (check.verdict, check.mismatched_bytes, check.first_mismatch) == ("mismatch", 1, 1024 + 37)


def test_capture_manifests_have_provenance_and_blobs_in_history():
    for kind in ("tma", "tma_encode"):
        for folder in manifests(SHIPPED, kind):
            prov = json.loads((folder / "manifest.json").read_text())["provenance"]
            for key in ("gpu", "driver", "cuda_driver_api", "date", "command", "commit", "dirty", "source_blobs"):
                assert key in prov, (folder, key)
            assert prov["source_blobs"] and all(len(sha) == 40 for sha in prov["source_blobs"].values()), folder


def test_capture_source_blobs_are_in_the_git_history():
    """What this checks is the git metadata itself, so it needs a full checkout (not an sdist, not shallow)."""
    import shutil
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
                                                     capture_output=True, text=True).stdout.strip() != "false":
        pytest.skip("no full git checkout (an sdist or a shallow clone): the history is what it checks")
    for kind in ("tma", "tma_encode"):
        for folder in manifests(SHIPPED, kind):
            prov = json.loads((folder / "manifest.json").read_text())["provenance"]
            for path, sha in prov["source_blobs"].items():
                r = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{blob}}"], cwd=REPO, capture_output=True)
                assert r.returncode == 0, f"{folder.name}: {path} blob {sha} is not in the git history (stale capture)"


def test_tf32_nan_is_canonical_and_overflow_rounds_to_inf():
    t = TensorMap("tf32", (8,), (), (8,))
    words = [0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001, 0xFF800FFF, 0x7F800000, 0x7F7FFFFF, 0xFF7FF000, 0x80001001]
    smem = np.zeros(32, np.uint8)
    load_box(t, np.array(words, "<u4").view(np.uint8), (0,), 0, smem, 0)
    assert [hex(w) for w in smem.view("<u4")] == ["0x7fffe000"] * 4 + ["0x7f800000", "0x7f800000", "0xff800000",
                                                                      "0x80002000"]
