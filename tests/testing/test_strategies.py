"""lapis.testing.strategies: what they draw is valid (or rejected, when asked), and together they cover every data
type, swizzle, rank and wgmma shape of the committed captures (lapis/data/captures/{tma,tma_encode,wgmma})."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from lapis.layouts.descriptors.agreement import check_reads, cute_map
from lapis.layouts.tma import TensorMap, check, place_box
from lapis.layouts.tma.types import SWIZZLE_CODES, TMA_TYPE_BY_CODE
from lapis.testing import strategies as S

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "lapis" / "data" / "captures"
FIND = settings(max_examples=2000, database=None, phases=[Phase.generate])  # the first find, unshrunk


def manifests(kind):
    out = []
    for f in sorted((CAPTURES / kind).glob("*/manifest.json")):
        m = json.loads(f.read_text())
        out += m.get("configs") or m.get("cases")
    return out


def loaded_tma():  # configurations whose dumps the H200 produced
    return [c for c in manifests("tma") if c["result"]["status"] == "ok"]


def encode_cases(accepted):
    return [c for c in manifests("tma_encode") if c["result"]["accepted"] == accepted]


# ------------------------------------------------------------------ coverage --

def test_the_sampled_lists_hold_every_loaded_type_swizzle_and_rank():
    assert len(loaded_tma()) > 400
    assert {TMA_TYPE_BY_CODE[c["dtype"]].name for c in loaded_tma()} <= set(S.TMA_DTYPES)
    assert {c["swizzle"] for c in loaded_tma()} == {SWIZZLE_CODES[s] for s in S.TMA_SWIZZLES} == {0, 1, 2, 3}
    assert {c["rank"] for c in loaded_tma()} == set(S.RANKS) == {1, 2, 3, 4, 5}
    assert {TMA_TYPE_BY_CODE[c["dtype"]].bytes for c in loaded_tma()} == {1, 2, 4, 8}


def test_the_valid_and_rejected_lists_hold_every_encode_capture_value():
    acc, rej = encode_cases(True), encode_cases(False)
    assert len(acc) > 500 and len(rej) > 1000
    assert {c["dtype"] for c in acc} <= {TMA_TYPE_BY_CODE[c].code for c in range(13) if TMA_TYPE_BY_CODE[c].name
                                         in S.TMA_DTYPES}
    drawable_bad_dtypes = set(S.BAD_DTYPE_CODES) | {TMA_TYPE_BY_CODE[c].code for c in (13, 14, 15)} | set(range(13))
    assert {c["dtype"] for c in rej} <= drawable_bad_dtypes
    assert {c["rank"] for c in rej} <= set(S.BAD_RANKS) | set(S.RANKS)
    assert {c["swizzle"] for c in rej} <= set(S.BAD_SWIZZLE_CODES) | set(range(7))
    assert {TMA_TYPE_BY_CODE[c].name for c in (13, 14, 15)} == set(S.PACKED_DTYPES)
    assert {SWIZZLE_CODES[s] for s in S.ATOM_SWIZZLES} == {4, 5, 6}


def test_the_wgmma_lists_hold_every_captured_shape():
    cases = manifests("wgmma")
    assert {c["dtype"] for c in cases} == set(S.WGMMA_DTYPES)
    assert {c["n"] for c in cases} == set(S.WGMMA_N)
    assert {c["swizzle"] for c in cases} == set(S.LAYOUT_SWIZZLES)


@pytest.mark.parametrize("swizzle", S.TMA_SWIZZLES)
def test_find_draws_a_load_of_every_swizzle(swizzle):
    x = find(S.tma_loads(), lambda x: x.tmap.swizzle == swizzle, settings=FIND)
    assert isinstance(x.tmap, TensorMap)


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_find_draws_a_load_of_every_element_width(width):
    assert find(S.tma_loads(), lambda x: x.tmap.dtype.bytes == width, settings=FIND).tmap.dtype.bytes == width


@pytest.mark.parametrize("rank", S.RANKS)
def test_find_draws_a_load_of_every_rank(rank):
    assert find(S.tma_loads(), lambda x: x.tmap.rank == rank, settings=FIND).tmap.rank == rank


@pytest.mark.parametrize("code", [4, 5, 6])
def test_find_draws_every_atom_swizzle_among_rejected_maps(code):
    assert find(S.tensor_maps(valid=False), lambda a: a.swizzle == code, settings=FIND).swizzle == code


@pytest.mark.parametrize("code", [13, 14, 15])
def test_find_draws_every_packed_type_among_rejected_maps(code):
    assert find(S.tensor_maps(valid=False), lambda a: a.dtype == code, settings=FIND).dtype == code


WGMMA_SHAPES = sorted({(c["dtype"], c["swizzle"], c["major"]) for c in manifests("wgmma")})


@pytest.mark.parametrize("shape", WGMMA_SHAPES)
def test_find_draws_every_captured_wgmma_operand_shape(shape):
    dt, sw, mj = shape
    op = find(S.matrix_operands(), lambda o: (o.layout.dtype.name, o.layout.swizzle.name, o.layout.major) == shape,
              settings=FIND)
    assert (op.layout.dtype.name, op.layout.swizzle.name, op.layout.major) == (dt, sw, mj)


def test_every_wgmma_shape_of_the_captures_is_listed():
    assert len(WGMMA_SHAPES) == 24  # bf16/f16 x 4 swizzles x K/MN + tf32/e4m3 x 4 swizzles x K


# ----------------------------------------------------------------- validity --

@given(S.tensor_maps())
def test_valid_maps_break_no_rule_and_fit_their_limits(t):
    assert isinstance(t, TensorMap) and t.interleave == "none"
    assert t.smem_footprint <= 64 * 1024
    assert (t.strides[-1] * t.dims[-1] if t.rank > 1 else t.dims[0] * t.dtype.bytes) <= 4 << 20


@given(S.tensor_maps(valid=False))
def test_rejected_maps_break_a_rule(a):
    assert check(a) != []


@given(S.tma_loads(bounds="inside"))
def test_inside_loads_read_only_tensor_elements(x):
    p = place_box(x.tmap, x.coords, 1024 + x.smem_offset)
    fits = all(S._extent(x.tmap, i) <= x.tmap.dims[i] for i in range(x.tmap.rank))
    assert p.in_bounds.all() or not fits
    assert x.smem_offset % 128 == 0 and x.smem_offset + x.tmap.smem_footprint <= S.MAX_REGION


@given(S.tma_loads(bounds="partly-outside"))
def test_partly_outside_loads_have_oob_and_in_bounds_elements(x):
    p = place_box(x.tmap, x.coords, 1024 + x.smem_offset)
    assert not p.in_bounds.all() and p.in_bounds.any()


@given(st.data())
def test_offsets_on_and_off_the_repeat_and_misaligned(data):
    t = data.draw(S.tensor_maps(swizzle=data.draw(st.sampled_from(("32B", "64B", "128B")))))
    rep = {"32B": 256, "64B": 512, "128B": 1024}[t.swizzle]
    assert data.draw(S.smem_offsets(t, on_repeat_boundary=True)) % rep == 0
    off = data.draw(S.smem_offsets(t, on_repeat_boundary=False))
    assert off % 128 == 0 and off % rep != 0
    bad = data.draw(S.smem_offsets(t, valid=False))
    assert bad % 16 == 0 and bad % 128 != 0


@settings(max_examples=40)
@given(st.sampled_from(("sm90", "sm100")), st.data())
def test_operands_read_as_laid_out_and_mismatches_do_not(arch, data):
    op = data.draw(S.matrix_operands(arch))
    where = cute_map(op.layout, op.base)
    ok = check_reads(where, op.layout.swizzle.name, op.layout.major, op.layout.rows, list(op.descs), op.transpose,
                     op.layout.elem_bytes, arch=arch)
    assert ok.ok, ok.summary()
    bad = data.draw(S.mismatched_operands(arch))
    g = bad.good
    verdict = check_reads(cute_map(g.layout, g.base), g.layout.swizzle.name, g.layout.major, g.layout.rows,
                          list(bad.descs), bad.transpose, g.layout.elem_bytes, arch=arch)
    assert not verdict.ok and bad.field in S.MISMATCH_FIELDS


def test_a_mismatch_is_found_for_each_field():
    for field in ("sbo", "swap-lbo-sbo", "swizzle", "start_address", "base_offset", "transpose"):
        m = find(S.mismatched_operands(fields=(field,)), lambda m: True, settings=FIND)
        assert m.field == field


def test_wgmma_descriptors_cover_every_field_range():
    assert find(S.wgmma_descriptors, lambda d: d.sbo == 0x3FFF0, settings=FIND).sbo == 0x3FFF0
    assert find(S.wgmma_descriptors, lambda d: d.base_offset == 7, settings=FIND).base_offset == 7
    u = find(S.umma_descriptors, lambda d: d.swizzle.name == "128B_base32B", settings=FIND)
    assert u.encode() >> 61 == 1


def test_nothing_in_lapis_imports_lapis_testing():
    users = []
    for path in (ROOT / "lapis").rglob("*.py"):
        if "testing" in path.relative_to(ROOT / "lapis").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            users += [str(path) for n in names if n.startswith("lapis.testing")]
    assert users == []


def test_the_operand_image_of_a_drawn_layout_round_trips():
    op = find(S.matrix_operands(dtype="bf16", major="K", swizzle="128B", operand="A"), lambda o: o.base % 1024,
              settings=FIND)
    assert op.base % 1024 and op.layout.rows == 64 and op.descs[0].start_address == op.base
    # the tile's first 16 B chunk sits where the absolute-address XOR puts it (PTX ISA 5.5.7)
    assert op.layout.address(np.array([0]), np.array([0]), op.base)[0] == op.base ^ (((op.base >> 7) & 7) << 4)


@pytest.mark.parametrize("build,words", [
    (lambda: S.canonical_layouts(max_atoms=10**9), "max_atoms lies in 1..15: got 1000000000"),
    (lambda: S.canonical_layouts(max_atoms=0), "max_atoms lies in 1..15: got 0"),
    (lambda: S.canonical_layouts(sm=80), "sm is one of the values this strategy takes: got 80"),
    (lambda: S.tensor_maps(rank=9), "rank is one of the values this strategy takes: got 9"),
    (lambda: S.tensor_maps(max_footprint=1), "max_footprint lies in 4096..any: got 1"),
    (lambda: S.tma_loads(bounds="outside"), "bounds is one of the values"),
    (lambda: S.matrix_operands(arch="sm80"), "arch is one of the values"),
    (lambda: S.mismatched_operands(fields=("nope",)), "fields lists descriptor fields"),
])
def test_strategy_arguments_are_checked_when_the_strategy_is_built(build, words):
    from lapis.errors import LayoutError
    with pytest.raises(LayoutError) as e:
        build()
    assert words in str(e.value)


@settings(max_examples=20, deadline=None)
@given(S.canonical_layouts(max_atoms=S.MAX_ATOMS, swizzle="128B", dtype="f32"))
def test_the_largest_canonical_layouts_fit_shared_memory(layout):
    assert layout.footprint_bytes <= 228 * 1024
