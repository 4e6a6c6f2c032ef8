"""The shipped FA4 sm90 SASS capture (sass/fa4-sm90-2026-12-03, written by lapis.captures.fa4_sass): its listings'
counts, their control bits, the d128 listing against the one Nsight Compute recorded on the H200, and the tool's
input checks."""

import json
import re

import pytest

from lapis.captures import fa4_sass
from lapis.captures.provenance import blob_in_history
from lapis.data import CAPTURES
from lapis.errors import CaptureError
from lapis.model import sass

FOLDER = CAPTURES / "sass" / "fa4-sm90-2026-12-03"
NCU = CAPTURES / "ncu" / "h200-2026-12-02-source" / "fa4_source.csv.gz"
# case -> (instructions, HGMMA, MUFU, last address), read by hand from the listings (zcat | grep -c)
COUNTS = {"d128": (1520, 32, 132, 0x5ef0), "d128_causal": (2296, 48, 198, 0x8f70),
          "d64": (1360, 24, 132, 0x54f0), "d256": (1832, 42, 84, 0x7270)}


def _listing(case):
    functions = sass.parse_cuobjdump(FOLDER / f"{case}.sass.gz")
    assert len(functions) == 1
    (name, instrs), = functions.items()
    return name, instrs


@pytest.mark.parametrize("case", sorted(COUNTS))
def test_listing_counts_and_control_bits(case):
    name, instrs = _listing(case)
    n, hgmma, mufu, last = COUNTS[case]
    assert len(instrs) == n
    assert sum(i.opcode == "HGMMA" for i in instrs) == hgmma
    assert sum(i.opcode == "MUFU" for i in instrs) == mufu
    assert [i.address for i in instrs] == list(range(0, last + 16, 16))
    assert all(i.control is not None for i in instrs)
    assert "FlashAttentionForwardSm90" in name
    rec = json.loads((FOLDER / "manifest.json").read_text())["kernels"][case]
    assert (rec["instructions"], rec["hgmma"], rec["mufu"], rec["function"]) == (n, hgmma, mufu, name)


def test_provenance_names_committed_sources():
    prov = json.loads((FOLDER / "manifest.json").read_text())["provenance"]
    assert prov["flash_attn_4"] == "4.0.0b36" and prov["dirty"] is False
    assert prov["compiler"]["ptxas"] == "Cuda compilation tools, release 13.4, V13.4.59"
    assert sorted(prov["source_blobs"]) == ["benchmarks/fa4_sass.sh", "lapis/captures/fa4_sass.py"]
    assert all(blob_in_history(b) for b in prov["source_blobs"].values())


def _text(ins, base=0):
    """One instruction as (address from the start, its text with single spaces, no .reuse, code addresses made
    relative to base)."""
    text = re.sub(r"\s+", " ", ins.text.replace(".reuse", ""))
    text = re.sub(r"0x[0-9a-f]{9,}", lambda m: hex(int(m.group(0), 16) - base), text)  # only ncu's are this long
    return ins.address - base, text


def test_d128_equals_the_h200_listing():
    _, mine = _listing("d128")
    ncu = sass.parse_ncu_source_csv(NCU)
    assert len(ncu) == len(mine) == 1520
    base = ncu[0].address
    pairs = [(_text(a), _text(b, base)) for a, b in zip(mine, ncu)]
    differ = [(a, b) for a, b in pairs if a != b]
    # the only difference: Nsight Compute prints a TMA instruction's descriptor operand first, cuobjdump last
    assert len(differ) == 12
    for (addr_a, a), (addr_b, b) in differ:
        op_a, _, rest_a = a.partition(" ")
        op_b, _, rest_b = b.partition(" ")
        assert addr_a == addr_b and op_a == op_b and op_a.split(".")[0] in ("UTMALDG", "UTMASTG")
        assert rest_b.startswith("desc[URZ], ") and rest_a == rest_b.removeprefix("desc[URZ], ").rstrip(" ;") \
            + ", desc[URZ]"
    assert sum(b.opcode == "BRA" for b in ncu) == 49  # branches whose absolute targets were made relative
    assert fa4_sass.compare(mine, ncu) == dict(compared=1520, equal=1508, descriptor_order=12, differ=0,
                                               first_differ=None)
    assert json.loads((FOLDER / "manifest.json").read_text())["device_check"]["differ"] == 0


def test_compare_counts_a_changed_instruction():
    _, mine = _listing("d128")
    ncu = sass.parse_ncu_source_csv(NCU)
    changed = list(ncu)
    changed[1] = sass.parse_instruction("S2R R8, SR_TID.X", ncu[1].address)  # the listing's second: S2R R7
    got = fa4_sass.compare(mine, changed)
    assert (got["equal"], got["differ"], got["first_differ"]) == (1507, 1, ["S2R R7, SR_TID.X", "S2R R8, SR_TID.X"])
    assert fa4_sass.compare(mine[:-1], ncu)["differ"] == 1  # a missing instruction differs


def test_unknown_case_is_a_named_error(tmp_path, capsys):
    with pytest.raises(CaptureError, match="a case is one of d128, d128_causal, d64, d256: got d96"):
        fa4_sass.cases("d128,d96")
    assert fa4_sass.main(["--out", str(tmp_path / "out"), "--cases", "d96"]) == 2
    assert "got d96" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
