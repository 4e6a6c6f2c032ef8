"""cuTensorMapEncodeTiled rules (lapis.layouts.tma.rules) against the H200 encode capture.

Ground truth: lapis/data/captures/tma_encode/h200-2026-11-29/manifest.json, 627 parameter
sets passed to the real driver (H200, driver 580.159.04, CUDA 13.0). Every case must be
predicted (rejected iff some rule is violated), and every rule must be the sole
violation of at least one rejected case, which shows the driver enforces it on its own.
"""

import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lapis.errors import LayoutError
from lapis.layouts.tma import TensorMap
from lapis.layouts.tma.rules import (
    ADVISORIES,
    BOX_BYTES_MAX,
    DOC,
    DRIVER,
    OBSERVED,
    RULES,
    EncodeArgs,
    EncodeRejected,
    Violation,
    advise,
    check,
    rule_table,
    validate,
)
from lapis.testing.strategies import encode_args

ENCODE = Path(__file__).resolve().parents[2] / "lapis/data/captures/tma_encode"
MANIFESTS = sorted(ENCODE.glob("*/manifest.json"))
MANIFEST = ENCODE / "h200-2026-11-29" / "manifest.json"
# Every case of every encode capture; case ids repeat across captures (each re-runs the campaign).
CASES = [c for m in MANIFESTS for c in json.loads(m.read_text())["cases"]]

# Rules no H200 case can isolate: every case with a packed type also breaks
# packed-type-unsupported-sm90. They need a capture on an architecture that accepts
# the packed types (sm_100); the values say what to run there.
UNSETTLED_ON_SM90 = {
    "global-address-32B-packed16": "16U4_ALIGN16B/16U6_ALIGN16B base cases at addr_offset 16, 48, 80 "
                                   "(and 0, 32 accepted)",
    "packed16-dim0-multiple-128": "16U6_ALIGN16B/16U4_ALIGN16B with dims[0] = 64, 96, 129, 200 "
                                  "(and 128, 256 accepted)",
    "packed8-dim0-even": "16U4_ALIGN8B with dims[0] = 65, 129, 255 (and 64, 130 accepted)",
    "stride-multiple-32-packed16": "16U6_ALIGN16B/16U4_ALIGN16B with strides[0] = 272, 304, 528 "
                                   "(and 256, 288 accepted)",
    "packed16-box0-128": "16U4_ALIGN16B/16U6_ALIGN16B with box[0] = 32, 64, 96, 192, 256 (and 128 accepted)",
    "packed6-interleave-none": "16U6_ALIGN16B rank 3 with interleave 16B (swizzle none) and 32B (swizzle 32B)",
    "packed-swizzle-subset": "16U6_ALIGN16B with swizzle 32B, 64B, 128B_ATOM_32B_FLIP_8B; 16U4_ALIGN16B with 32B, "
                             "64B, 128B_ATOM_32B_FLIP_8B, 128B_ATOM_64B (and the allowed ones accepted)",
}


def _describe(case, vs):
    r = case["result"]
    fields = {k: case[k] for k in ("dtype", "rank", "addr_offset", "dims", "strides", "box", "elem_strides",
                                   "interleave", "swizzle", "l2", "oob", "map_offset")}
    said = "; ".join(str(v) for v in vs) or "no violation"
    return (f"case {case['id']} (probe {case['probe']}, {case['side']}): driver {r['name']}, lapis: {said}\n"
            f"    args {fields}")


# ---------------------------------------------------------------------------
# Replay of the capture
# ---------------------------------------------------------------------------

def test_captures_are_the_expected_ones():
    assert len(json.loads(MANIFEST.read_text())["cases"]) == 627 and len(CASES) >= 627 + 819
    for m in MANIFESTS:
        prov = json.loads(m.read_text())["provenance"]
        assert prov["driver"] == DRIVER and prov["compute_capability"] == "9.0"


def test_replay_every_capture_case():
    disagree = [(c, vs) for c in CASES for vs in [check(c)] if bool(vs) == c["result"]["accepted"]]
    agree = len(CASES) - len(disagree)
    msg = f"{agree} agree, {len(disagree)} disagree with the H200 driver:\n" + \
          "\n".join(_describe(c, vs) for c, vs in disagree)
    assert not disagree, msg


def test_every_rule_is_the_sole_violation_of_some_rejected_case():
    witnesses = defaultdict(list)
    for c in CASES:
        rules = {v.rule for v in check(c)}
        if len(rules) == 1 and not c["result"]["accepted"]:
            witnesses[rules.pop()].append(c["id"])
    missing = sorted(set(RULES) - set(witnesses))
    unexpected = [r for r in missing if r not in UNSETTLED_ON_SM90]
    assert not unexpected, "rules with no rejected capture case breaking only them:\n" + \
        "\n".join(f"  {r}: {RULES[r].doc.splitlines()[0]}" for r in unexpected)
    settled = [r for r in UNSETTLED_ON_SM90 if r in witnesses]
    assert not settled, f"now isolated by the capture, drop from UNSETTLED_ON_SM90: {settled}"


def test_unsettled_rules_are_all_about_packed_types():
    # They are unsettled *because* sm_90 rejects the packed types outright.
    for r in UNSETTLED_ON_SM90:
        assert r in RULES and RULES[r].source == DOC
    packed = [c for c in CASES if c["dtype"] in (13, 14, 15)]
    assert packed and not any(c["result"]["accepted"] for c in packed)
    assert all("packed-type-unsupported-sm90" in {v.rule for v in check(c)} for c in packed)


def test_advisories_are_not_enforced_by_the_driver():
    # Each advisory is broken by some case the H200 accepted, so it must stay out of check().
    for rid in ADVISORIES:
        hits = [c["id"] for c in CASES if c["result"]["accepted"] and any(v.rule == rid for v in advise(c))]
        assert hits, f"{rid}: no accepted case breaks it; is it really not enforced?"


# ---------------------------------------------------------------------------
# The rule table and messages
# ---------------------------------------------------------------------------

def test_rule_table_is_documented():
    assert len(RULES) >= 25
    for rid, r in {**RULES, **ADVISORIES}.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-zA-Z0-9^]+)*", rid), rid
        assert r.id == rid and r.doc and r.source in (DOC, OBSERVED) and r.driver == DRIVER
    assert {r["id"] for r in rule_table()} == set(RULES) | set(ADVISORIES)
    observed = {rid for rid, r in RULES.items() if r.observed}
    assert observed == {"packed-type-unsupported-sm90", "swizzle-128B-atom-unsupported-sm90", "box-total-bytes"}
    assert all(not r.enforced for r in ADVISORIES.values())


def f16_args(**kw):
    d = {"dtype": 6, "rank": 2, "global_address": 0x7F00_0000_0000, "dims": (128, 64), "strides": (256,),
         "box": (64, 8), "elem_strides": (1, 1), "swizzle": 3}
    d.update(kw)
    return EncodeArgs(**d)


def test_message_names_rule_value_and_fix():
    (v,) = check(f16_args(box=(7, 8)))
    assert v.rule == "box0-bytes-multiple-16"
    assert v.value == "box[0] x 2 B = 14 B is not a multiple of 16 B"
    assert v.fix == "make box[0] a multiple of 8"
    assert str(v).startswith("box0-bytes-multiple-16: box[0] x 2 B = 14 B is not a multiple of 16 B; "
                             "fix: make box[0] a multiple of 8")
    assert v.source == DOC


def test_a_row_past_the_swizzle_span_is_told_to_narrow_and_offered_a_wider_swizzle_only_where_one_fits():
    (v,) = check(f16_args(box=(128, 8), swizzle=3))  # 256 B under 128B, the widest span
    assert v.value == "box[0] x 2 B = 256 B exceeds the 128 B span of swizzle 128B"
    assert v.fix == ("make box[0] at most 64 (128 B), e.g. split the box into 2 boxes of at most 64 elements along "
                     "dimension 0; no swizzle spans 256 B (the widest, 128B, spans 128 B)")
    (v,) = check(f16_args(box=(64, 8), swizzle=2))  # 128 B under 64B: 128B holds it
    assert v.fix == ("make box[0] at most 32 (64 B), e.g. split the box into 2 boxes of at most 32 elements along "
                     "dimension 0, or use swizzle 128B (128 B span)")
    (v,) = check(f16_args(box=(24, 8), swizzle=1))  # 48 B under 32B: 64B is the narrowest that holds it
    assert v.fix.endswith("split the box into 2 boxes of at most 16 elements along dimension 0, or use swizzle 64B "
                          "(64 B span)")


def test_validate_lists_every_violation():
    a = f16_args(global_address=0x1008, swizzle=7, box=(7, 300), oob=5)
    with pytest.raises(EncodeRejected) as e:
        validate(a)
    rules = [v.rule for v in e.value.violations]
    assert set(rules) == {"global-address-16B", "swizzle-enum", "box-range", "box0-bytes-multiple-16",
                          "oob-fill-enum"}
    text = str(e.value)
    assert isinstance(e.value, LayoutError) and "5 rules broken" in text
    assert all(r in text for r in rules) and "fix:" in text
    assert validate(f16_args()) == f16_args()


def test_raw_out_of_range_values_do_not_crash():
    a = EncodeArgs(dtype=16, rank=7, global_address=1, dims=[0] * 7, strides=[1] * 6, box=[0] * 7,
                   elem_strides=[0] * 7, interleave=-1, swizzle=7, l2=9, oob=3)
    rules = {v.rule for v in check(a)}
    assert rules == {"dtype-enum", "rank-range", "global-address-16B", "global-dim-range", "stride-multiple-16",
                     "box-range", "elem-stride-range", "interleave-enum", "swizzle-enum", "l2-promotion-enum",
                     "oob-fill-enum"}


def test_arrays_shorter_than_rank_are_a_usage_error():
    with pytest.raises(LayoutError, match="shorter than the rank"):
        EncodeArgs(6, 3, 0, (8, 8), (16,), (8, 8), (1, 1))


def test_from_tensor_map():
    t = TensorMap("bf16", (256, 64), (512,), (64, 8), swizzle="128B", oob="nan")
    a = EncodeArgs.from_tensor_map(t, 0x7F00_0000_0100, 0x1000)
    assert (a.dtype, a.swizzle, a.oob, a.strides) == (9, 3, 1, (512,))
    assert check(a) == []
    with pytest.raises(EncodeRejected, match="inner-box-within-swizzle-span"):
        TensorMap("bf16", (256, 64), (512,), (128, 8), swizzle="128B")  # a TensorMap is always encodable


def test_sm90_rules_are_architecture_specific():
    a = f16_args(swizzle=4)
    assert [v.rule for v in check(a)] == ["swizzle-128B-atom-unsupported-sm90"]
    assert check(a, sm=100) == []


# ---------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------

ELEM = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
FLOATS = (6, 7, 8, 9, 10, 11, 12)
SPAN = {0: 0, 1: 32, 2: 64, 3: 128}


valid_args = encode_args  # the public strategy: valid on sm_90 by every rule


@given(valid_args())
def test_valid_sets_have_no_violation(a):
    assert check(a) == [], [str(v) for v in check(a)]
    assert advise(a) == [] or all(v.rule == "stride-covers-previous-dim" for v in advise(a))


def _replace(a, **kw):
    d = {k: getattr(a, k) for k in ("dtype", "rank", "global_address", "dims", "strides", "box", "elem_strides",
                                    "interleave", "swizzle", "l2", "oob", "map_address")}
    d.update(kw)
    return EncodeArgs(**d)


def _with(t, i, v):
    t = list(t)
    t[i] = v
    return t


BIG = st.integers(2**32 + 1, 2**64 - 1)


@st.composite
def mutated(draw):
    """(valid args with one field pushed out of its documented range, the rule that must name it)."""
    a = draw(valid_args())
    e = ELEM[a.dtype]
    i = draw(st.integers(0, a.rank - 1))
    options = {
        "dtype-enum": lambda: {"dtype": draw(st.one_of(st.integers(16, 2**31 - 1), st.integers(-(2**31), -1)))},
        "rank-range": lambda: {"rank": draw(st.one_of(st.just(0), st.integers(6, 2**32 - 1)))},
        "global-address-16B": lambda: {"global_address": a.global_address + draw(st.integers(1, 15))},
        "global-dim-range": lambda: {"dims": _with(a.dims, i, draw(st.one_of(st.just(0), BIG)))},
        "box-range": lambda: {"box": _with(a.box, i, draw(st.one_of(st.just(0), st.integers(257, 2**32 - 1))))},
        "elem-stride-range": lambda: {"elem_strides": _with(a.elem_strides, i, draw(
            st.one_of(st.just(0), st.integers(9, 2**32 - 1))))},
        "interleave-enum": lambda: {"interleave": draw(st.one_of(st.integers(3, 2**31 - 1), st.just(-1)))},
        "swizzle-enum": lambda: {"swizzle": draw(st.one_of(st.integers(7, 2**31 - 1), st.just(-1)))},
        "l2-promotion-enum": lambda: {"l2": draw(st.one_of(st.integers(4, 2**31 - 1), st.just(-1)))},
        "oob-fill-enum": lambda: {"oob": draw(st.one_of(st.integers(2, 2**31 - 1), st.just(-1)))},
    }
    if a.rank > 1:
        j = draw(st.integers(0, a.rank - 2))
        options["stride-multiple-16"] = lambda: {"strides": _with(
            a.strides, j, (a.strides[j] or 2**20) - draw(st.integers(1, 15)))}
        options["stride-below-2^40"] = lambda: {"strides": _with(a.strides, j, draw(st.integers(2**35, 2**58 - 1)) * 32)}
    if a.interleave == 2:
        options["global-address-32B-interleave32"] = lambda: {"global_address": a.global_address + 16}
        if a.rank > 1:
            options["stride-multiple-32-interleave32"] = lambda: {"strides": _with(a.strides, 0, a.strides[0] + 16)}
    if a.interleave:
        options["interleave-needs-rank-3"] = lambda: {"rank": draw(st.integers(1, 2))}
    if a.dtype not in FLOATS:
        options["oob-nan-needs-float-type"] = lambda: {"oob": 1}
    if a.rank >= 3:
        options["box-total-bytes"] = lambda: {"box": [a.box[0]] + [256] * (a.rank - 1),
                                              "elem_strides": [1] * a.rank}
    cap = SPAN[a.swizzle] // e if (a.swizzle and not a.interleave) else 256
    if e < 16:
        room = BOX_BYTES_MAX // (e * math.prod(a.box[1:]))  # stay within box-total-bytes
        bad = [b for b in range(1, min(cap, room) + 1) if (b * e) % 16]
        options["box0-bytes-multiple-16"] = lambda: {"box": _with(a.box, 0, draw(st.sampled_from(bad)))}
    if a.interleave == 0:
        if a.swizzle:
            room = BOX_BYTES_MAX // (e * math.prod(a.box[1:]))
            wide = [b for b in range(cap + 1, min(256, room) + 1) if (b * e) % 16 == 0]
            if wide:
                options["inner-box-within-swizzle-span"] = lambda: {"box": _with(a.box, 0, draw(st.sampled_from(wide)))}
        if a.box[0] * e <= 128:
            options["swizzle-128B-atom-unsupported-sm90"] = lambda: {"swizzle": draw(st.sampled_from((4, 5, 6)))}
    else:
        options["swizzle-128B-atom-unsupported-sm90"] = lambda: {"swizzle": draw(st.sampled_from((4, 5, 6)))}
    rule = draw(st.sampled_from(sorted(options)))
    return _replace(a, **options[rule]()), rule


@given(mutated())
def test_one_mutation_names_exactly_its_rule(case):
    a, rule = case
    got = [v.rule for v in check(a)]
    assert set(got) == {rule}, f"expected only {rule}, got {[str(v) for v in check(a)]}"
    assert all(isinstance(v, Violation) and v.fix and v.value for v in check(a))


def test_mutations_cover_every_rule_testable_on_sm90():
    # The property test above can produce every enforced rule except the packed-type ones.
    testable = set(RULES) - set(UNSETTLED_ON_SM90) - {"packed-type-unsupported-sm90"}
    src = Path(__file__).read_text().split("def mutated(draw):")[1].split("@given(mutated())")[0]
    assert {r for r in testable if f'"{r}"' not in src} == set()
