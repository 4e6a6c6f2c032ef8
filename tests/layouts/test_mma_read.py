"""What wgmma reads through a descriptor: hand-derived addresses, and replay of the H200 captures."""

import json

import numpy as np
import pytest

from lapis.captures.store import SHIPPED, manifests
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.descriptors.mma_read import operand_addresses, read_operand, to_float
from lapis.validate.mma import case_result, validate_mma


def test_k_major_sw128_rows_and_chunks():
    # bf16 K-major SW128 at 0x400, SBO 1024: row 1 starts at 0x480 and its chunk 0 sits at chunk 1.
    d = WgmmaDescriptor(0x400, 16, 1024, 0, "128B")
    a = operand_addresses(d, 64, 2, transpose=False)
    assert a.shape == (64, 16)
    assert (a[0, 0], a[0, 8], a[1, 0], a[1, 8], a[8, 0]) == (0x400, 0x410, 0x490, 0x480, 0x800)


def test_base_offset_is_subtracted_from_the_row_bits():
    # H200: chunk ^= ((addr >> 7) - base_offset) mod 8. At 0x480 with base offset 1 the row reads phase 0.
    plain = operand_addresses(WgmmaDescriptor(0x480, 16, 1024, 0, "128B"), 8, 2, False)
    shifted = operand_addresses(WgmmaDescriptor(0x480, 16, 1024, 1, "128B"), 8, 2, False)
    assert (plain[0, 0], shifted[0, 0]) == (0x490, 0x480)


def test_mn_major_none_uses_sbo_for_mn_and_lbo_for_k():
    d = WgmmaDescriptor(0, 256, 128, 0, "none")  # PTX MN-major interleave: SBO between 16 B MN groups
    a = operand_addresses(d, 64, 2, transpose=True)
    assert (a[8, 0], a[0, 1], a[0, 8]) == (128, 16, 256)


def test_reading_a_canonical_tile_returns_it():
    lay = CanonicalLayout("MN", "64B", "bf16", 64, 32)
    smem = np.zeros(16384, np.uint8)
    mn, k = np.meshgrid(np.arange(64), np.arange(32), indexing="ij")
    vals = (mn * 32 + k).astype("<u2")
    addr = lay.address(mn, k, 0x1000)
    smem[addr - 0x1000], smem[addr - 0x1000 + 1] = vals & 0xFF, vals >> 8
    for step in range(2):
        got = read_operand(smem, 0x1000, descriptor_for(lay, 0x1000, step), 64, 2, transpose=True)
        assert np.array_equal(got, vals[:, 16 * step:16 * step + 16])


def test_e4m3_and_tf32_values():
    assert list(to_float(np.array([0x38, 0x01, 0xB8, 0x7E]), "e4m3")) == [1.0, 2.0 ** -9, -1.0, 448.0]
    assert to_float(np.array([0x3F801FFF]), "tf32")[0] == 1.0  # the low 13 bits are not read


def test_h200_wgmma_replay():
    v = validate_mma()
    w, p, s = v["wgmma"], v["mismatch_pairs"], v["settled"]
    assert w["cases"] >= 200 and w["mismatches"] == 0
    assert set(w["dtypes"]) == {"bf16", "f16", "tf32", "e4m3"} and w["n_values"] == [8, 16, 64, 128, 256]
    assert p["cases"] >= 50 and p["prediction_failures"] == 0
    assert set(p["kinds"]) >= {"desc-swizzle", "swap-lbo-sbo", "k-advance", "transpose", "base-offset-formula"}
    assert s == {"lbo_ignored_swizzled_k_major": True, "base_offset_zero_reads_tma_layout": True,
                 "ptx_formula_base_offset_reads_tma_layout": False}
    assert v["provenance"]["gpu"] == "NVIDIA H200"


@pytest.mark.parametrize("which", ["image", "d"])
def test_one_changed_value_breaks_the_replay(which):
    folder = manifests(SHIPPED, "wgmma")[0]
    man = json.loads((folder / "manifest.json").read_text())
    case = next(c for c in man["cases"] if c["tag"] == "canonical" and c["dtype"] == "bf16" and c["test"] == "A")
    with np.load(folder / "inputs.npz") as imgs, np.load(folder / "d.npz") as ds:
        image, d = imgs[f"img{case['id']}"].copy(), ds[f"d{case['id']}"].copy()
    assert case_result(case, image, d)["exact"]
    if which == "d":
        d[0, 5, 3] += 1.0
    else:  # one byte of the tested tile
        image[case["test_base"] + 1] ^= 0x01
    assert not case_result(case, image, d)["exact"]


def test_cutlass_oracle_bit_for_bit():
    o = validate_mma()["cutlass_oracle"]
    assert o["cases"] >= 96 + 12 and o["k_steps"] >= 288 + 24 and o["disagreements"] == 0


def test_bank_conflict_wavefronts_match_nsight_compute():
    b = validate_mma()["bank_conflicts"]
    assert b["patterns"] >= 12 + 21 and b["conflicting_patterns"] >= 6 and len(b["degrees"]) >= 3
    kinds = {r["kernel"] for r in b["table"]}
    assert {f"{op}_x{n}{t}" for op in ("ldsm", "stsm") for n in (1, 2, 4) for t in ("", "_trans")} <= kinds
    assert b["disagreements"] == 0


def test_bank_model_hand_values():
    from lapis.layouts.bank_conflicts import wavefronts
    rows = [(l % 8) * 128 + (l // 8) * 16 for l in range(32)]  # ldmatrix x4 on unswizzled 128 B rows: 8-way
    assert wavefronts("ldsm_x4", rows) == (32, 4)
    sw = [a ^ (((a >> 7) & 7) << 4) for a in rows]  # the 128B swizzle removes it
    assert wavefronts("ldsm_x4", sw) == (4, 4)
    assert wavefronts("lds32", [0] * 32) == (1, 1)  # broadcast
    with pytest.raises(Exception, match="aligned"):
        wavefronts("lds128", [8] * 32)


def test_sm100_descriptor_reads_the_128b_base32b_tile():
    # Spec-checked (no sm100 here): a tcgen05 descriptor over the 32 B-atomicity layout reads the tile back.
    from lapis.layouts.descriptors.sm100 import umma_descriptor_for
    lay = CanonicalLayout("MN", "128B_base32B", "bf16", 128, 32)
    r, k = np.meshgrid(np.arange(128), np.arange(16), indexing="ij")
    for step in range(2):
        got = operand_addresses(umma_descriptor_for(lay, 0x400, step), 128, 2, transpose=True)
        assert np.array_equal(got, lay.address(r, k + 16 * step, 0x400))
