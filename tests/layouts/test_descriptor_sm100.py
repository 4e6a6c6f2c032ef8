"""tcgen05 descriptors: hand-derived values, round trips, and CUTLASS's own code as an oracle.

sm100 cannot run here; these are checked against PTX and CUTLASS, not hardware.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lapis.errors import LayoutError
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm100 import InstrDescriptor, UmmaDescriptor, umma_descriptor_for

ORACLE = Path(__file__).parents[1] / "oracles" / "umma_oracle.cu"


def test_k_major_sw128_bf16_is_the_sm90_value_with_bit_46():
    # sm90 0x4000004000010040 (layout 1 at bits 63-62) -> sm100 layout 2 at bits 63-61 (same bit) + bit 46.
    d = umma_descriptor_for(CanonicalLayout("K", "128B", "bf16", 128, 64), 0x400)
    assert d.encode() == 0x4000_4040_0001_0040
    assert UmmaDescriptor.decode(d.encode()) == d


def test_instruction_descriptor_hand_value():
    # bf16 x bf16 -> f32, M 128, N 256: a/b format 1 at bits 7 and 10, D f32 1 at bit 4, N>>3 = 32 at 17, M>>4 = 8 at 24.
    i = InstrDescriptor("f16", "bf16", "bf16", "f32", 128, 256)
    assert i.encode() == 0x0840_0490 and InstrDescriptor.decode(0x0840_0490, "f16") == i


@pytest.mark.parametrize("value,words", [(0x4000_0040_0001_0040, "0b001"), (0x6000_4040_0001_0040, "layout type"),
                                         (0x0000_4040_0000_c000, "reserved")])
def test_decode_errors(value, words):
    with pytest.raises(LayoutError, match=words):
        UmmaDescriptor.decode(value)


def test_mn_major_only_for_the_types_cutlass_allows():
    with pytest.raises(LayoutError, match="MN-major"):
        InstrDescriptor("f8f6f4", "e2m1", "e4m3", "f32", 128, 64, a_major="MN")


def _cutlass_include():
    try:
        import cutlass_library
    except ImportError:
        return None
    inc = Path(cutlass_library.__file__).parent / "source" / "include"
    return inc if (inc / "cute" / "arch" / "mma_sm100_desc.hpp").exists() else None


@pytest.mark.nvcc
@pytest.mark.skipif(not shutil.which("nvcc") or _cutlass_include() is None,
                    reason="needs nvcc and the nvidia-cutlass wheel's headers (pip install .[test])")
def test_cutlass_make_instr_desc_and_smem_descriptor_fields_agree(tmp_path):
    exe = tmp_path / "umma_oracle"
    subprocess.run(["nvcc", "-std=c++17", "-x", "cu", f"-I{_cutlass_include()}", "-o", str(exe), str(ORACLE)],
                   check=True, capture_output=True, env=dict(os.environ))
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    instr = [ln.split() for ln in lines if ln.startswith("instr")]
    smem = [ln.split() for ln in lines if ln.startswith("smem")]
    assert len(instr) == 36 and len(smem) == 31
    for _, kind, a, b, c, m, n, ma, mb, value in instr:
        if (ma == "MN" and a not in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")):
            continue
        assert InstrDescriptor(kind, a, b, c, int(m), int(n), ma, mb).encode() == int(value), (kind, a, b, m, n, ma, mb)
    names = {0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"}
    for _, start, lbo, sbo, base, mode, layout, value in smem:
        d = UmmaDescriptor(int(start), int(lbo), int(sbo), int(base), names[int(layout)], int(mode))
        assert d.encode() == int(value) and UmmaDescriptor.decode(int(value)) == d


def test_cli_sm100(capsys):
    from lapis.cli import main
    assert main(["layout", "desc", "--arch", "sm100", "--major", "K", "--swizzle", "128B", "--dtype", "bf16",
                 "--rows", "128", "--cols", "64", "--base", "0x400"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "0x4000404000010040"
    assert main(["layout", "decode", "--arch", "sm90", "0x4000404000010040"]) == 2  # bit 46 is tcgen05's
    assert "tcgen05 descriptor sets bit 46" in capsys.readouterr().err
