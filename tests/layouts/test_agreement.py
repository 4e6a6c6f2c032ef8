"""The TMA/descriptor agreement checker: named causes, harmless fields, and agreement with the H200."""

import json
from dataclasses import replace

import numpy as np
import pytest

from lapis.captures.store import SHIPPED, manifests
from lapis.layouts.descriptors.agreement import check_agreement
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.swizzle import B64
from lapis.layouts.tma import TensorMap
from lapis.validate.mma import case_result

TMAP = TensorMap("bf16", (4096, 4096), (8192,), (64, 64), swizzle="128B")
BOXES = [((128, 256), 0x400)]
GOOD = [descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), 0x400, s) for s in range(4)]


def verdict(descs, transpose=False):
    return check_agreement(TMAP, BOXES, (128, 256), "K", 64, descs, transpose)


def test_matching_plan_agrees():
    assert verdict(GOOD).ok


@pytest.mark.parametrize("change,words", [
    (dict(swizzle=B64), "descriptor swizzle 64B but the TMA wrote 128B"),
    (dict(sbo=512), "SBO should be 1024 B = 8 rows x 128 B"),
    (dict(base_offset=3), "base offset must be 0"),
])
def test_each_wrong_field_is_named(change, words):
    v = verdict([replace(d, **change) for d in GOOD])
    assert not v.ok and all(words in "; ".join(m for _, m in s.causes) for s in v.steps)


def test_wrong_k_advance_names_the_start_address():
    v = verdict([replace(d, start_address=0x400 + 16 * s) for s, d in enumerate(GOOD)])
    assert v.steps[0].ok and not v.steps[1].ok
    assert v.steps[1].first_wrong == (0, 16) and v.steps[1].read == (0, 8)
    assert "must be 0x420" in v.steps[1].causes[0][1]


def test_lbo_on_swizzled_k_major_is_harmless():
    v = verdict([replace(d, lbo=4096) for d in GOOD])
    assert v.ok and v.steps[0].harmless[0][0] == "lbo" and "is not read here" in v.steps[0].harmless[0][1]


def test_transposed_read_of_a_k_major_tile():
    v = verdict(GOOD, transpose=True)
    assert not v.ok and v.steps[0].causes[0][0] == "transpose"


def h200_k_major_cases():
    """Capture cases whose tested tile a single TMA box would write: K-major, swizzled, one atom of K."""
    for folder in manifests(SHIPPED, "wgmma"):
        man = json.loads((folder / "manifest.json").read_text())
        with np.load(folder / "inputs.npz") as imgs, np.load(folder / "d.npz") as ds:
            for c in man["cases"]:
                written = c["corrupt"][1] if c["corrupt"] and c["corrupt"][0] == "image-swizzle" else c["swizzle"]
                span = int(written[:-1]) if written != "none" else 0
                if (c["major"] != "K" or not span or c["dtype"] not in ("bf16", "f16") or c["tb" if c["test"] == "B"
                        else "ta"] not in (0, 1) or c["k_tile"] * 2 != span):
                    continue
                yield c, written, case_result(c, imgs[f"img{c['id']}"], ds[f"d{c['id']}"])


def test_checker_agrees_with_the_h200_on_every_k_major_case():
    seen = bad = 0
    for c, written, measured in h200_k_major_cases():
        reg = c["result"]["region_addr"]
        e, rows = 2, c["rows"]
        tmap = TensorMap(c["dtype"], (c["k_tile"], rows), (c["k_tile"] * e,), (c["k_tile"], rows), swizzle=written)
        descs = [WgmmaDescriptor.decode(v + (reg >> 4)) for v in (c["desc_a"] if c["test"] == "A" else c["desc_b"])]
        trans = bool(c["ta"] if c["test"] == "A" else c["tb"])
        v = check_agreement(tmap, [((0, 0), reg + c["test_base"])], (0, 0), "K", rows, descs, trans)
        seen += 1
        bad += v.ok != measured["measured_intended"]
    assert seen >= 30 and bad == 0


def test_cli_check_names_the_causes(capsys):
    from lapis.cli import main
    base = ["layout", "check", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192", "--box", "64,64",
            "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "K", "--rows", "64"]
    assert main(base + ["--desc", "0x4000004000010040", "--desc", "0x4000004000010042"]) == 0
    assert capsys.readouterr().out.startswith("agree")
    assert main(base + ["--desc", "0x4000004000010040", "--desc", "0x4000002000010041", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["steps"][0]["ok"] and out["steps"][1]["first_wrong"] == [0, 16]
    assert any("SBO should be 1024 B" in c for c in out["steps"][1]["causes"])


def test_cute_input_is_parsed_and_judged(capsys):
    from lapis.cli import main
    from lapis.layouts.cute_input import canonical_match
    m = canonical_match("Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)")
    assert m["canonical"] and (m["major"], m["layout"].rows, m["layout"].cols) == ("K", 8, 64)
    assert canonical_match("Sw<2,4,3> o smem_ptr[16b](unset) o ((_32,_2),_16):((_1,_512),_32)")["order"] == "k-first"
    padded = canonical_match("Sw<0,4,3> o (_64,_64):(_72,_1)", "bf16")
    assert not padded["canonical"] and "element (0, 8) is at 16 B" in padded["reason"]
    for bad, words in (("Sw<3,3,3> o (_8,_64):(_64,_1)", "byte addresses"), ("(_8,_64):(_64,_1)", "ambiguous")):
        assert main(["layout", "show", "--cute", bad]) == 2
        assert words in capsys.readouterr().err
    assert main(["layout", "check", "--cute", "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_8),_64):((_64,_512),_1)",
                 "--smem-base", "0x400", "--rows", "64", "--desc", "0x4000004000010040",
                 "--desc", "0x4000004000010042"]) == 0


def test_cli_check_sm100_descriptors(capsys):
    from lapis.cli import main
    base = ["layout", "check", "--arch", "sm100", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192",
            "--box", "64,64", "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "K",
            "--rows", "64"]
    assert main(base + ["--desc", "0x4000404000010040", "--desc", "0x4000404000010042"]) == 0
    assert main(base + ["--desc", "0x4000404000010040", "--desc", "0x4000402000010042"]) == 1
    assert "SBO should be 1024 B" in capsys.readouterr().out
