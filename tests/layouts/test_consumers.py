"""ldmatrix, ldmatrix.trans and LDS.128 reads of a TMA-placed swizzled tile, absolute and buffer-relative XOR."""

import json

import pytest

from lapis.cli import main
from lapis.errors import LayoutError
from lapis.layouts import check_consumer
from lapis.layouts.descriptors.agreement import tile_map
from lapis.layouts.tma import TensorMap

CONSUMERS = ("ldmatrix", "ldmatrix.trans", "lds128")


def where(swizzle, inner, base):
    tmap = TensorMap("bf16", (256, 64), (512,), (inner, 16), swizzle=swizzle)
    return tmap, tile_map(tmap, [((0, 0), base)], (0, 0), "K")


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("swizzle,inner", [("128B", 64), ("64B", 32), ("32B", 16)])
def test_on_the_repeat_boundary_both_xor_forms_read_right(consumer, swizzle, inner):
    tmap, w = where(swizzle, inner, 0x400)
    for xor in ("absolute", "relative"):
        assert check_consumer(w, consumer, xor, swizzle, 0x400, tmap.row_pitch, 2).ok


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("swizzle,inner,base,read", [
    # SW128 at 0x580: the byte at 0x580 is linear 0x580 ^ 0x30 = 0x5b0, offset 48 B = element (0, 24)
    ("128B", 64, 0x580, (0, 24)),
    # SW64 at 0x180 (512 B repeat): linear 0x180 ^ ((0x180 & 0x180) >> 3) = 0x1b0: offset 48 B of a 64 B row
    ("64B", 32, 0x180, (0, 24)),
    ("32B", 16, 0x180, (0, 8)),  # 0x180 ^ 0x10 = 0x190: offset 16 B = element (0, 8)
])
def test_off_the_boundary_the_relative_xor_reads_the_wrong_chunk(consumer, swizzle, inner, base, read):
    tmap, w = where(swizzle, inner, base)
    assert check_consumer(w, consumer, "absolute", swizzle, base, tmap.row_pitch, 2).ok  # the fixed form
    v = check_consumer(w, consumer, "relative", swizzle, base, tmap.row_pitch, 2)  # the buggy form
    assert not v.ok and (v.lane, v.register, v.half, v.wanted, v.read) == (0, 0, 0, (0, 0), read)
    assert f"lane 0 register 0 (element 0) wants logical (row, col) (0, 0) but reads element {read}" in v.summary()


def test_ldmatrix_fragment_mapping_by_hand():
    # unswizzled 16x16 tile: lane 5 register 3 holds matrix 3 (rows 8..15, cols 8..15), row 5 // 4 = 1,
    # cols 2 * (5 % 4) = 2, 3 -> logical (9, 10) and (9, 11); .trans: rows 2, 3 of column 1 -> (10, 9), (11, 9).
    from lapis.layouts.consumers import wanted_reads
    got = {(t, i, h): want for t, i, h, want, *_ in wanted_reads("ldmatrix", 32, 2)}
    assert got[(5, 3, 0)] == (9, 10) and got[(5, 3, 1)] == (9, 11)
    got = {(t, i, h): want for t, i, h, want, *_ in wanted_reads("ldmatrix.trans", 32, 2)}
    assert got[(5, 3, 0)] == (10, 9) and got[(5, 3, 1)] == (11, 9)
    got = {(t, i, h): want for t, i, h, want, *_ in wanted_reads("lds128", 128, 2)}
    assert got[(9, 3, 1)] == (1, 15)  # 8 threads per 128 B row: thread 9 = row 1, cols 8..15; reg 3 = 14, 15


def test_a_mismatched_pitch_is_caught_past_lane_0():
    # the consumer believes rows are 64 B apart but TMA wrote 128 B rows: lane 0 is right, row 1 is not
    _, w = where("none", 64, 0)
    v = check_consumer(w, "ldmatrix", "absolute", "none", 0, 64, 2)
    assert not v.ok and v.lane == 0 and v.register == 1 and v.wanted == (8, 0) and v.read == (4, 0)


def test_bad_requests_are_named():
    _, w = where("128B", 64, 0)
    with pytest.raises(LayoutError, match="16-bit elements"):
        check_consumer(w, "ldmatrix", "absolute", "128B", 0, 128, 4)
    with pytest.raises(LayoutError, match="absolute or relative"):
        check_consumer(w, "ldmatrix", "swizzled", "128B", 0, 128, 2)
    with pytest.raises(LayoutError, match="unknown consumer"):
        check_consumer(w, "ldsm", "absolute", "128B", 0, 128, 2)


PLAN = ["layout", "check", "--dtype", "bf16", "--dims", "64,64", "--strides", "128", "--box", "64,16",
        "--swizzle", "128B", "--coords", "0,0"]


def test_cli_exit_1_names_the_first_wrong_element_and_0_when_fixed(capsys):
    assert main([*PLAN, "--smem-base", "0x580", "--consumer", "ldmatrix", "--consumer-xor", "relative",
                 "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["ok"], out["lane"], out["register"], out["wanted"], out["read"]) == (False, 0, 0, [0, 0], [0, 24])
    assert len(out["warnings"]) == 1
    assert main([*PLAN, "--smem-base", "0x400", "--consumer", "ldmatrix", "--consumer-xor", "relative"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("agree: ") and out.err == ""
    assert main([*PLAN, "--smem-base", "0x580", "--consumer", "lds128"]) == 0  # absolute XOR: fine, warned
    assert "phase 384" in capsys.readouterr().err


def test_cli_bad_consumer_input_exits_2(capsys):
    assert main([*PLAN, "--smem-base", "0", "--consumer", "ldmatrix", "--desc", "0x40"]) == 2
    assert "not descriptors" in capsys.readouterr().err
    assert main(["layout", "check", "--dtype", "f32", "--dims", "64,64", "--strides", "256", "--box", "32,16",
                 "--swizzle", "128B", "--coords", "0,0", "--smem-base", "0", "--consumer", "ldmatrix"]) == 2


@pytest.mark.parametrize("args,words", [
    (({}, "ldmatrix", "absolute", "128B", 0, 128, 2), "where is a non-empty dict {smem address: (row, col)}"),
    (({0: (0, 0)}, "x", "y", "z", "a", "b", "c"), "base must be an integer: got 'a'"),
    (({0: (0, 0)}, ["ldmatrix"], "absolute", "128B", 0, 128, 2), "consumer is a name (a string): got list"),
    (({0: (0, 0)}, "ldmatrix", "absolute", "128B", 0, 128, 0), "elem_bytes is the element size in bytes"),
    (({0: "row 0"}, "ldmatrix", "absolute", "128B", 0, 128, 2), "where maps integer smem addresses to (row, col)"),
])
def test_check_consumer_refuses_arguments_of_the_wrong_type_by_name(args, words):
    with pytest.raises(LayoutError) as e:
        check_consumer(*args)
    assert words in str(e.value)


@pytest.mark.parametrize("name", [[], {}, None, 2])
def test_dtype_refuses_a_value_that_is_not_a_name(name):
    from lapis.layouts import dtype
    with pytest.raises(LayoutError, match=r"unknown dtype: got .*; fix: use one of e4m3, e5m2"):
        dtype(name)
