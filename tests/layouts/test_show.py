"""`lapis layout show|desc|decode` and the tile figure, through the CLI.

Expected values are derived by hand, not from lapis:
- sm90 descriptor bits (PTX ISA 9.7.15.5.1.2.2): start [13:0] = addr >> 4,
  LBO [29:16], SBO [45:32] (bytes >> 4), base offset [51:49], layout type
  [63:62] (0 none, 1 128B, 2 64B, 3 32B).
- SW128 (PTX ISA 5.5.7): in the 128-B line r of a 1024-B aligned repeat, smem
  chunk c holds logical chunk c ^ (r & 7); the phase r comes from address bits 9:7.
"""

import json

import pytest

from lapis.cli import main
from lapis.layouts import CanonicalLayout

K128 = ["--arch", "sm90", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "128", "--cols", "64"]
SHOW_K128 = ["layout", "show"] + K128[2:]

# K-major SW128 bf16 128x64 at smem 0 (CUTLASS's tile):
#   start 0 >> 4 = 0                        -> 0x0000_0000_0000_0000
#   LBO unused, written 1           << 16   -> 0x0000_0000_0001_0000
#   SBO 8 rows x 128 B = 1024 B, enc 64 = 0x40 << 32 -> 0x0000_0040_0000_0000
#   layout type 1 (128B)            << 62   -> 0x4000_0000_0000_0000
DESC_K128 = 0x4000_0040_0001_0000


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, _ = run(capsys, *argv, "--json")
    assert rc == 0
    return json.loads(out)


def byte_map(text):
    """{line address: [cell labels]} from show's text output."""
    lines = text.split("byte map:")[1].splitlines()[2:]
    return {int(ln.split()[0], 16): ln.split()[1:] for ln in lines if ln.strip() and not ln.startswith("...")}


# ---------------------------------------------------------------------------
# desc / decode
# ---------------------------------------------------------------------------


def test_desc_json_hand_value(capsys):
    d = run_json(capsys, "layout", "desc", *K128)
    assert d["hex"] == "0x4000004000010000" and d["value"] == DESC_K128
    fields = {f["name"]: f for f in d["fields"]}
    assert (fields["lbo"]["bytes"], fields["lbo"]["encoded"]) == (16, 1)
    assert (fields["sbo"]["bytes"], fields["sbo"]["encoded"]) == (1024, 64)
    assert fields["layout_type"]["encoded"] == 1 and d["swizzle"] == "128B"
    assert "unused" in d["lbo_role"]


def test_desc_step_moves_only_the_start(capsys):
    # K-step 2 starts 2 x 32 B = 64 B in: start field 64 >> 4 = 4.
    d = run_json(capsys, "layout", "desc", *K128, "--step", "2")
    assert d["value"] == DESC_K128 | 4


def test_desc_text_shows_bytes_and_encoded(capsys):
    rc, out, _ = run(capsys, "layout", "desc", *K128)
    assert rc == 0
    assert out.splitlines()[0] == "0x4000004000010000"
    sbo = next(ln for ln in out.splitlines() if ln.strip().startswith("sbo"))
    assert "1024 B" in sbo and "enc 64" in sbo
    assert "unused for swizzled K-major (field = 1)" in out


def test_decode_gives_the_fields_back(capsys):
    d = run_json(capsys, "layout", "decode", "--arch", "sm90", hex(DESC_K128))
    assert d["hex"] == "0x4000004000010000"
    got = {f["name"]: (f["bytes"], f["encoded"]) for f in d["fields"]}
    assert got == {"start_address": (0, 0), "lbo": (16, 1), "sbo": (1024, 64),
                   "base_offset": (None, 0), "layout_type": (None, 1)}
    rc, out, _ = run(capsys, "layout", "decode", "--arch", "sm90", "0x4000004000010000")
    assert rc == 0 and "0x4000004000010000" in out and "enc 64" in out


def test_decode_mn_major_64b_hand_value(capsys):
    # type 2 (64B) << 62, SBO 512 B enc 32 << 32, LBO 1024 B enc 64 << 16, start 0x400 enc 0x40.
    value = (2 << 62) | (32 << 32) | (64 << 16) | 0x40
    got = {f["name"]: f["bytes"] for f in run_json(capsys, "layout", "decode", "--arch", "sm90", hex(value))["fields"]}
    assert (got["start_address"], got["lbo"], got["sbo"]) == (0x400, 1024, 512)


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def test_show_json_k128(capsys):
    d = run_json(capsys, *SHOW_K128)
    assert d["atom"] == {"shape": [8, 64], "bytes": 1024}
    assert d["footprint_bytes"] == 128 * 64 * 2
    assert d["lbo"]["bytes"] is None and d["lbo"]["encoded"] == 1 and "unused" in d["lbo"]["role"]
    assert (d["sbo"]["bytes"], d["sbo"]["encoded"]) == (1024, 64)
    # 64 K elements / 16 per step = 4 steps, 32 B apart inside the first atom row.
    assert [s["start_address"] for s in d["k_steps"]] == [0, 32, 64, 96]
    assert d["base_offset"] == 0 and d["repeat_bytes"] == 1024
    # ((8 rows, 16 atoms), (8 el, 8 chunks, 1 K atom)) : ((128 B, 1024 B), (1, 16 B, 16 KiB)) in bf16 elements
    assert d["ptx_core_matrices"] == "((8,16),(8,8,1)):((64,512),(1,8,8192))"
    # CUTLASS 4.2's print of tile_to_shape(GMMA::Layout_K_SW128_Atom<cutlass::bfloat16_t>{}, Shape<_128,_64>{})
    assert d["cute"] == "Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_1)):((_64,_512),(_1,_0))"
    assert d["cute_call"] == ("tile_to_shape(GMMA::Layout_K_SW128_Atom<cutlass::bfloat16_t>{}, Shape<_128,_64>{}, "
                              "Step<_1,_2>{})")
    assert "bytes" in d["units"] and "elements" in d["units"]


def test_show_byte_map_k128_xor(capsys):
    rc, out, _ = run(capsys, *SHOW_K128)
    assert rc == 0 and "absolute smem bytes" in out.splitlines()[1]
    m = byte_map(out)
    assert len(m) == 16  # first 16 lines of 128 B
    assert m[0x80][:2] == ["r1:k8-15", "r1:k0-7"]  # 0 ^ 1 = 1: position 0 holds logical chunk 1
    for r in range(16):
        assert m[r * 128] == [f"r{r}:k{8 * (c ^ (r & 7))}-{8 * (c ^ (r & 7)) + 7}" for c in range(8)]


def test_show_base_offset_phase(capsys):
    # Tile at 0x480 = 1024 + 128: its first line has phase (0x480 >> 7) & 7 = 1.
    rc, out, _ = run(capsys, *SHOW_K128, "--base", "0x480")
    assert rc == 0
    m = byte_map(out)
    assert m[0x480][:2] == ["r0:k8-15", "r0:k0-7"]
    assert m[0x500][0] == "r1:k16-23"  # phase 2 on the next line
    info = run_json(capsys, *SHOW_K128, "--base", "0x480")
    assert (info["base_offset"], info["base_offset_if_tile_anchored"]) == (0, 1)


def test_show_mn_major_64b(capsys):
    args = ["layout", "show", "--major", "MN", "--swizzle", "64B", "--dtype", "bf16", "--rows", "64", "--cols", "16"]
    d = run_json(capsys, *args)
    # k-first: 2 K atoms of 512 B, so the next MN atom is 1024 B away (LBO), the next 8 K rows 512 B (SBO).
    assert (d["lbo"]["bytes"], d["lbo"]["encoded"], d["sbo"]["bytes"], d["sbo"]["encoded"]) == (1024, 64, 512, 32)
    assert "MN distance" in d["lbo"]["role"] and "K distance" in d["sbo"]["role"]
    m = byte_map(run(capsys, *args)[1])
    # 64-B lines = one K row each; the XOR row index is address bits 8:7, i.e. k // 2 here.
    assert m[0x0] == ["k0:mn0-7", "k0:mn8-15", "k0:mn16-23", "k0:mn24-31"]
    assert m[0xC0] == ["k3:mn8-15", "k3:mn0-7", "k3:mn24-31", "k3:mn16-23"]


def test_show_k_major_no_swizzle_core_matrices(capsys):
    args = ["layout", "show", "--major", "K", "--swizzle", "none", "--dtype", "bf16", "--rows", "16", "--cols", "16"]
    d = run_json(capsys, *args)
    # core matrices: MN-adjacent 128 B apart (SBO), K-adjacent after both MN groups, 256 B (LBO).
    assert (d["lbo"]["bytes"], d["lbo"]["encoded"], d["sbo"]["bytes"], d["sbo"]["encoded"]) == (256, 16, 128, 8)
    m = byte_map(run(capsys, *args)[1])
    assert m[0x000] == [f"r{r}:k0-7" for r in range(8)]
    assert m[0x080] == [f"r{r}:k0-7" for r in range(8, 16)]
    assert m[0x100] == [f"r{r}:k8-15" for r in range(8)]


# ---------------------------------------------------------------------------
# errors: exit 2 with a message naming the value
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv,needle", [
    (["layout", "show", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "100", "--cols", "64"],
     "100"),
    (SHOW_K128 + ["--smem-base", "0x408"], "0x408"),
    (["layout", "desc"] + K128 + ["--step", "4"], "step 4"),
    (["layout", "decode", "--arch", "sm90", hex(DESC_K128 | 1 << 46)], "0x400000000000"),
])
def test_errors_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("lapis: error:") and needle in err and "fix:" in err


# ---------------------------------------------------------------------------
# the figure
# ---------------------------------------------------------------------------


def test_show_png_written(capsys, tmp_path):
    png = tmp_path / "tile.png"
    args = ["layout", "show", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "16", "--cols", "64"]
    d = run_json(capsys, *args, "--figure", str(png))  # the JSON on stdout stays parseable
    assert d["rows"] == 16
    data = png.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_figure_cells_sit_at_their_smem_position():
    from lapis.figures.tile import plot_tile_chunks

    fig = plot_tile_chunks(CanonicalLayout("K", "128B", "bf16", 16, 64))
    ax = fig.axes[0]
    where = {t.get_text(): t.get_position() for t in ax.texts}
    # 16 lines of 128 B fit one panel: line 1, position 0 (x 0.5, y 1.5) holds r1:k8-15.
    assert where["r1:k8-15"] == pytest.approx((0.5, 1.5))
    assert where["r1:k0-7"] == pytest.approx((1.5, 1.5))
    assert where["r3:k0-7"] == pytest.approx((3.5, 3.5))  # 3 ^ 3 = 0
    assert any(t.get_text() == "SBO = 1024 B (enc 64)" for t in ax.texts)
    assert "LBO unused (enc 1)" in fig.texts[0].get_text()


@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("swz", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("dt", ["e4m3", "bf16", "tf32"])
def test_figure_every_mode(major, swz, dt):
    from lapis.figures.tile import plot_tile_chunks

    span = {"none": 16, "32B": 32, "64B": 64, "128B": 128}[swz] // {"e4m3": 1, "bf16": 2, "tf32": 4}[dt]
    atom = (8, span) if major == "K" else (span, 8)
    lay = CanonicalLayout(major, swz, dt, 2 * atom[0], 2 * atom[1])  # 2 x 2 atoms
    fig = plot_tile_chunks(lay, base=0)
    cells = sum(im.get_array().shape[0] * im.get_array().shape[1] for im in fig.axes[0].images)
    assert cells == lay.footprint_bytes // 16  # every 16-B chunk drawn once
    assert f"{lay.rows} x {lay.cols}" in fig.texts[0].get_text()


def test_figure_large_tile_drops_labels():
    from lapis.figures.tile import plot_tile_chunks

    fig = plot_tile_chunks(CanonicalLayout("K", "128B", "f32", 256, 128))  # 128 KiB
    assert not any(":k" in t.get_text() for t in fig.axes[0].texts)
    cells = sum(im.get_array().shape[0] * im.get_array().shape[1] for im in fig.axes[0].images)
    assert cells == 256 * 128 * 4 // 16
