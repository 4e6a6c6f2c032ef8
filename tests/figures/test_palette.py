"""One colour per op kind in every figure: the normalisation table, the fallback, and the colours the Gantt
figures (simulated, measured attention, predicted-against-measured GEMM) actually draw."""

import pytest
from matplotlib.colors import to_hex

from lapis.captures import attention as ac
from lapis.captures.store import captures_root, open_timelines, timeline_files
from lapis.figures.compare_gantt import compare_gantt
from lapis.figures.gantt import gantt
from lapis.figures.palette import (
    FALLBACK_COLOURS,
    INDEX_COLOURS,
    KIND_COLOURS,
    op_colour,
    op_kind,
    unmapped,
    variant_style,
)
from lapis.gpu.attention_plan import OPS, ROLES
from lapis.pipeline_sim.recorder import Event
from lapis.pipeline_sim.simulate import simulate
from lapis.validate.compare import compare_gemm

# Names as the simulator's schedules and the instrumented kernels write them, with the kind each must get.
EXPECTED = {
    "wgmma": "mma", "issue wgmma": "mma", "wgmma QK": "mma QK", "issue QK": "mma QK", "Q0K": "mma QK",
    "mma.sync QK": "mma QK", "wgmma PV": "mma PV", "issue PV": "mma PV", "P1V (early part)": "mma PV",
    "mma.sync PV": "mma PV", "softmax": "softmax", "softmax ex2": "softmax", "softmax FMA + O rescale": "softmax",
    "S0 pass 2: P high (mufu)": "softmax", "S pass 1: row max (tmem)": "softmax", "O rescale": "rescale",
    "O1 rescale (fma)": "rescale", "issue TMA": "TMA issue", "TMA K": "load", "TMA V": "load",
    "TMA Q (waited)": "load", "load A+B": "load", "cp.async K+V lands": "load", "ld.global K/V": "load",
    "Q from HBM": "load", "K/V from L2 (waited)": "load", "ldmatrix K (+Q)": "smem copy", "P via smem": "smem copy",
    "epilogue": "epilogue", "store O1": "epilogue", "O0 / rowsum": "epilogue", "O1 TMEM -> registers": "epilogue",
    "wait QK": "wait", "wait empty": "wait", "wait K/V (mbarrier)": "wait", "wait turn": "wait",
    "GEMM issue": "wgmma issue",
}


@pytest.mark.parametrize("name,kind", sorted(EXPECTED.items()))
def test_op_names_normalise_to_their_kind(name, kind):
    assert op_kind(name) == kind
    assert op_colour(name) == KIND_COLOURS[kind]


def test_kinds_have_distinct_colours_and_the_headline_ones_are_fixed():
    assert len(set(KIND_COLOURS.values())) == len(KIND_COLOURS)
    assert (KIND_COLOURS["softmax"], KIND_COLOURS["mma"], KIND_COLOURS["load"]) == ("#ff7f0e", "#1f77b4", "#2ca02c")


def test_every_op_name_of_the_captured_timelines_is_mapped():
    # the attention kernels' op table and the GEMM timelines' "ops" arrays; "start" only opens a role's first span
    names = set(OPS)
    for path in timeline_files(captures_root(None, kinds=())):
        if path.parent.name == "timelines":
            with open_timelines(path, path.parent.parent) as z:
                names |= {str(o) for o in z["ops"]}
    assert {"issue wgmma", "wait full", "issue QK", "O rescale"} <= names
    assert unmapped(names) == ["start"]


def test_every_op_name_the_simulator_records_is_mapped():
    names = set()
    for schedule, gpu, shape in (("h200-gemm-ws", "h200", "1024x1024x1024"),
                                 ("h200-s9-tuned", "h200", "1x1x1024x128"),
                                 ("h200-fa2-sync", "h200", "1x1x1024x128"),
                                 ("b200-k13-early-pv", "b200", "1x1x1024x128")):
        names |= {e.op for e in simulate(schedule, gpu, shape, {})["_events"]}
    assert len(names) > 20 and unmapped(names) == []


def test_unknown_names_get_a_listed_deterministic_fallback():
    assert op_kind("frobnicate") == "frobnicate" and unmapped(["frobnicate", "softmax"]) == ["frobnicate"]
    # CRC-32 of the name picks the fallback: the same in every process (no hash randomisation)
    assert op_colour("frobnicate") == FALLBACK_COLOURS[0x4415B300 % len(FALLBACK_COLOURS)] == op_colour("frobnicate")
    assert op_colour("frobnicate") not in KIND_COLOURS.values()
    fig = gantt([Event("a", "frobnicate", 0, 10)])
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["frobnicate (unmapped op name)"]


def test_long_legend_entries_are_cut_to_a_count():
    evs = [Event("softmax0", f"S0 pass {i}: row max (tmem)", 10 * i, 10 * i + 5) for i in range(5)]
    evs += [Event("tensor", "Q0K", 0, 5), Event("tensor", "wgmma QK", 5, 9)]
    legend = [t.get_text() for t in gantt(evs).axes[0].get_legend().get_texts()]
    assert legend == ["mma QK: Q0K, wgmma QK", "softmax: 5 ops (S0 pass 0: row max (tme…, …)"]


def test_variant_styles_differ_in_colour_and_marker_for_the_first_nine():
    styles = [variant_style(i) for i in range(81)]
    assert len({c for c, _ in styles[:9]}) == 9 and len({m for _, m in styles[:9]}) == 9
    assert len(set(styles)) == 81
    assert styles[9] == ("#1f77b4", "s")
    assert "#7f7f7f" not in INDEX_COLOURS  # grey means untouched memory in the layout figures


def _op_colours(fig) -> dict:
    out = {}
    for p in fig.axes[0].patches:
        gid = p.get_gid() or ""
        if gid.startswith("op:"):
            out.setdefault(op_kind(gid.split(":", 2)[2]), set()).add(to_hex(p.get_facecolor()))
    return out


def test_the_same_kind_has_the_same_colour_in_every_figure():
    sim = simulate("h200-s9-tuned", "h200", "1x1x2048x128", {})["_events"]
    root = captures_root(None, kinds=(ac.KIND,))
    row = next(r for r in ac.rows(root) if r["variant"] == "s9" and r["timeline_key"])
    measured = ac.sm_events(ac.timeline(root, row["timeline_key"], row["timeline_capture"]), 0, ROLES, OPS)[:400]
    c = compare_gemm("h200-gemm-ws", "2048x2048x2048", "ws_s4_c1_n128", keep_events=True)
    figures = [gantt(sim), gantt(measured), compare_gantt(c["_predicted_events"], c["_measured_events"])]
    seen = {}
    for fig in figures:
        for kind, colours in _op_colours(fig).items():
            seen.setdefault(kind, set()).update(colours)
    assert {"mma", "mma QK", "mma PV", "softmax", "rescale", "TMA issue", "load"} <= set(seen)
    assert seen == {k: {KIND_COLOURS[k]} for k in seen}
    assert seen["softmax"] == {"#ff7f0e"} and seen["mma"] == {"#1f77b4"}
    # the GEMM overlay: predicted "wgmma" and measured "issue wgmma" are one colour
    gemm = compare_gantt(c["_predicted_events"], c["_measured_events"])
    by_op = {}
    for p in gemm.axes[0].patches:
        if (p.get_gid() or "").startswith("op:"):
            by_op.setdefault(p.get_gid().split(":", 2)[2], set()).add(to_hex(p.get_facecolor()))
    assert by_op["wgmma"] == by_op["issue wgmma"] == {"#1f77b4"}
