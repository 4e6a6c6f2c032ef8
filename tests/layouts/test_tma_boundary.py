"""Warnings for a swizzled TMA destination off its repeat boundary: the phase, the XOR shift, the consumers."""

import json
from dataclasses import replace

import pytest

from lapis.cli import main
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.agreement import check_agreement
from lapis.layouts.descriptors.sm90 import descriptor_for
from lapis.layouts.tma import TensorMap, boundary_warning, boundary_warnings

MAP = ["--dtype", "bf16", "--dims", "64,64", "--strides", "128", "--box", "64,16", "--swizzle", "128B"]


@pytest.mark.parametrize("swizzle,dst,repeat,phase,shift", [
    ("128B", 0x580, 1024, 384, 3),  # 0x580 = 0x400 + 3 x 128
    ("128B", 0x480, 1024, 128, 1),
    ("64B", 0x180, 512, 384, 3),  # address bits [8:7] = 3
    ("64B", 0x300, 512, 256, 2),
    ("32B", 0x180, 256, 128, 1),  # address bit 7 = 1
])
def test_off_boundary_names_the_phase_and_the_xor_shift(swizzle, dst, repeat, phase, shift):
    w = boundary_warning(swizzle, dst)
    assert (w.repeat_bytes, w.phase, w.xor_shift) == (repeat, phase, shift)
    text = str(w)
    assert f"{phase} B past its {repeat} B swizzle repeat boundary" in text
    assert "buffer-relative offsets" in text and "base offset 0" in text


@pytest.mark.parametrize("swizzle,dst", [("128B", 0x400), ("64B", 0x200), ("32B", 0x100), ("none", 0x80),
                                         ("128B", 0)])
def test_on_boundary_or_unswizzled_is_silent(swizzle, dst):
    assert boundary_warning(swizzle, dst) is None


def test_the_warning_names_the_descriptor_the_agreement_checker_rejects():
    # the warning says base offset 0 is fine and PTX's (start >> 7) & 7 breaks: the descriptor model agrees
    tmap = TensorMap("bf16", (4096, 4096), (8192,), (64, 64), swizzle="128B")
    good = [descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), 0x580, s) for s in range(2)]
    assert all(d.base_offset == 0 for d in good)
    assert check_agreement(tmap, [((0, 0), 0x580)], (0, 0), "K", 64, good, False).ok
    ptx = [replace(d, base_offset=(0x580 >> 7) & 7) for d in good]
    assert not check_agreement(tmap, [((0, 0), 0x580)], (0, 0), "K", 64, ptx, False).ok
    assert "(start >> 7) & 7 = 3" in str(boundary_warning("128B", 0x580))


def test_a_wide_tile_warns_once_per_box_off_the_boundary():
    assert [w.dst for w in boundary_warnings("128B", [0x400, 0x2400, 0x2580])] == [0x2580]


def test_tma_place_warns_on_stderr_and_in_json_and_exits_0(capsys):
    assert main(["tma", "place", *MAP, "--smem-base", "0x580", "--coords", "0,0", "--json"]) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert len(data["warnings"]) == 1 and "384 B past its 1024 B" in data["warnings"][0]
    assert "384 B past its 1024 B" in out.err


def test_tma_place_on_the_boundary_has_no_warning(capsys):
    assert main(["tma", "place", *MAP, "--smem-base", "0x400", "--coords", "0,0", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["warnings"] == [] and out.err == ""


def test_layout_check_warns_for_the_descriptor_plan_too(capsys):
    good = descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), 0x580, 0).encode()
    args = ["layout", "check", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192", "--box", "64,64",
            "--swizzle", "128B", "--coords", "0,0", "--major", "K", "--rows", "64", "--desc", hex(good)]
    assert main([*args, "--smem-base", "0x580", "--json"]) == 0
    out = capsys.readouterr()
    assert "phase 384 of 1024" in json.loads(out.out)["warnings"][0] and "phase 384" in out.err
    assert main([*args[:-1], hex(descriptor_for(CanonicalLayout("K", "128B", "bf16", 64, 64), 0x400, 0).encode()),
                 "--smem-base", "0x400", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["warnings"] == [] and out.err == ""
