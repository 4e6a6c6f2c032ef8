"""Bad and borderline input on the MMA side: named errors, no silent passes, no wrong advice."""

import json
import shutil

import pytest

from lapis.captures.store import SHIPPED
from lapis.cli import main
from lapis.errors import LayoutError, NotModelled
from lapis.layouts.bank_conflicts import wavefronts
from lapis.layouts.cute_input import canonical_match
from lapis.layouts.descriptors.sm100 import InstrDescriptor, UmmaDescriptor
from lapis.layouts.descriptors.mma_read import operand_addresses

M = ["layout", "check", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192", "--box", "64,64",
     "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "K"]


def test_two_wrong_fields_are_both_causes(capsys):
    # start address and swizzle both wrong: each alone (on top of the right descriptor) changes the read
    assert main(M + ["--rows", "64", "--desc", "0x8000004000010840", "--json"]) == 1
    causes = " ".join(json.loads(capsys.readouterr().out)["steps"][0]["causes"])
    assert "swizzle 64B" in causes and "start address must be 0x400" in causes


def test_unused_stride_written_as_cutlass_does_is_not_blamed(capsys):
    args = ["layout", "check", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192", "--box", "64,16",
            "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "MN", "--rows", "64",
            "--trans", "1", "--desc", "0xc000004000000040", "--json"]
    assert main(args) == 1
    causes = json.loads(capsys.readouterr().out)["steps"][0]["causes"]
    assert len(causes) == 1 and "swizzle 32B" in causes[0]


def test_edge_tile_rows_past_the_tensor_still_count_as_written(capsys):
    args = M[:]
    args[args.index("--dims") + 1], args[args.index("--coords") + 1] = "4096,100", "128,64"
    assert main(args + ["--rows", "64", "--desc", "0x4000004000010040"]) == 0


@pytest.mark.parametrize("extra,words", [(["--rows", "0"], "rows must be 64"), (["--rows", "128"], "more rows"),
                                         (["--rows", "64"] + ["--desc", "0x4000004000010040"] * 5, "more K-steps")])
def test_impossible_requests_are_errors(extra, words, capsys):
    assert main(M + (extra if "--desc" in extra else extra + ["--desc", "0x4000004000010040"])) == 2
    assert words in capsys.readouterr().err


def test_transposed_8_bit_read_is_refused(capsys):
    args = ["layout", "check", "--dtype", "u8", "--dims", "4096,4096", "--strides", "4096", "--box", "128,64",
            "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "MN", "--rows", "128",
            "--desc", "0x4000004000000040", "--trans", "1"]
    assert main(args) == 2 and "only f16/bf16" in capsys.readouterr().err


def test_padded_atoms_are_canonical_with_their_own_strides(capsys):
    padded = "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_8),(_64,_2)):((_64,_512),(_1,_8192))"
    m = canonical_match(padded)
    assert m["canonical"] and m["major"] == "K" and m["layout"] is None
    assert main(["layout", "check", "--cute", padded, "--smem-base", "0", "--rows", "64",
                 "--desc", "0x4000004000010000"]) == 0


@pytest.mark.parametrize("text,words", [("((_8,_2),_64):(_64,_1)", "same nesting"), ("(_0,_8):(_8,_1)", "positive"),
                                        ("(_65536,_65536):(_1,_65536)", "too large"),
                                        ("(_8,_64):(_99999999999999999999999,_1)", "past shared memory")])
def test_bad_cute_strings(text, words):
    with pytest.raises(LayoutError, match=words):
        canonical_match(text, "bf16")


def test_tcgen05_instruction_descriptor_combinations():
    for args, words in ((("i8", "s8", "s8", "f32", 128, 256), "accumulates in s32"),
                        (("f16", "f16", "bf16", "f32", 128, 64), "one type"),
                        (("f16", "bf16", "bf16", "f32", 128, 8), "multiple of 16")):
        with pytest.raises(LayoutError, match=words):
            InstrDescriptor(*args)
    with pytest.raises(LayoutError, match="saturate"):
        InstrDescriptor("f16", "bf16", "bf16", "f32", 64, 8, saturate=1)


def test_absolute_lbo_and_k_major_base32b_reads_are_refused():
    with pytest.raises(NotModelled, match="absolute-address LBO"):
        operand_addresses(UmmaDescriptor(0x400, 0x2000, 0x400, 0, "128B", 1), 128, 2, True)
    with pytest.raises(LayoutError, match="only MN-major"):
        operand_addresses(UmmaDescriptor(0x400, 16, 512, 0, "128B_base32B"), 64, 2, False)


@pytest.mark.parametrize("offsets", [[4 * i + 0.5 for i in range(32)], "0", [-128 * i for i in range(32)], [0] * 64])
def test_bank_model_refuses_bad_lane_addresses(offsets):
    with pytest.raises(LayoutError):
        wavefronts("lds32", offsets)


def test_validate_mma_refuses_a_capture_that_ran_no_k_step(tmp_path):
    for kind in ("wgmma", "cutlass_oracle", "bank", "tma"):
        shutil.copytree(SHIPPED / kind, tmp_path / kind, ignore=shutil.ignore_patterns("capture.json"))  # fresh
    man = tmp_path / "wgmma" / "h200-2026-11-29" / "manifest.json"
    data = json.loads(man.read_text())
    for c in data["cases"]:
        c["steps"] = 0
    man.write_text(json.dumps(data))
    assert main(["validate", "mma", "--captures", str(tmp_path)]) == 2
