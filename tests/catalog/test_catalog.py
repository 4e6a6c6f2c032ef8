"""The kernel catalog (lapis/catalog/attention.py, lapis/catalog/gemm.py) is the one place a variant is defined: the
kernels' instantiation lists are generated from it and checked in, every entry names its whole template and a
schedule that takes its parameters, and a variant added to the table alone reaches the bench, the simulator and the
sweep."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lapis.catalog import attention, gemm, generate, third_party
from lapis.data import BLIND
from lapis.errors import ScheduleError
from lapis.gpu import attention_plan
from lapis.pipeline_sim.simulate import SCHEDULES, check_params, simulate

ROOT = Path(__file__).resolve().parents[2]
META = ("entry", "schedule", "sim", "blind", "sweep", "diagnostic")
GEMM_SHAPE = "512x512x512"


def test_the_checked_in_instantiation_lists_are_the_generators_output():
    assert generate.stale() == [], "run python -m lapis.catalog.generate"
    r = subprocess.run([sys.executable, "-m", "lapis.catalog.generate", "--check"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_the_generator_notices_a_stale_file(tmp_path):
    for name, make in generate.FILES.items():
        (tmp_path / name).write_text(make())
    assert generate.stale(tmp_path) == []
    (tmp_path / "gemm_ws_variants.inc").write_text(generate.gemm_inc().replace("4, 2, 256", "4, 2, 128"))
    assert generate.stale(tmp_path) == ["gemm_ws_variants.inc"]


def test_the_kernels_include_the_generated_lists_and_write_no_instantiation_by_hand():
    for cu, inc, macro in (("attention_h200.cu", "attention_variants.inc", "LAPIS_ATTENTION("),
                           ("gemm_ws.cu", "gemm_ws_variants.inc", "LAPIS_GEMM_WS(")):
        src = (generate.KERNELS / cu).read_text()
        assert f'#include "{inc}"' in src
        assert [x for x in src.splitlines() if x.startswith(macro)] == []


def test_every_entry_names_its_whole_template_and_its_role():
    for v in attention.VARIANTS.values():
        assert set(v) == set(attention.TEMPLATE + attention.FEATURES + META + ("causal_build",))
        assert v["causal"] is False  # the causal build is the entry's causal_build
        assert isinstance(v["ws"], bool) and v["emu"] in (0, 2, 4) and v["q_slots"] in (1, 2)
    for v in gemm.VARIANTS.values():
        assert set(v) == set(gemm.TEMPLATE + ("outputs",) + META)
        assert v["outputs"] and set(v["outputs"]) <= set(gemm.OUTPUTS)
    names = [attention.kernel_name(v, c) for v in attention.VARIANTS.values()
             for c in (False, True) if not c or v["causal_build"]]
    names += [gemm.kernel_name(v, o) for v in gemm.VARIANTS.values() for o in v["outputs"]]
    assert len(names) == len(set(names)) == 52


def test_s14_is_s13_with_the_descriptor_increments_alone():
    s13, s14 = attention.VARIANTS["s13"], attention.VARIANTS["s14"]
    assert {k for k in s13 if s13[k] != s14[k]} == {"entry", "desc_inc", "blind", "causal_build", "sim"}
    # the simulator costs each from its own compiled loop, nothing else differs
    assert {k for k in s13["sim"] if s13["sim"][k] != s14["sim"][k]} == {"kernel_loop"}
    assert (s13["sim"]["kernel_loop"], s14["sim"]["kernel_loop"]) == ("s13", "s14")
    assert (s13["desc_inc"], s14["desc_inc"]) == (False, True)
    assert [k for k, v in attention.VARIANTS.items() if v["desc_inc"]] == [
        "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s14) == "attn_s14_desc_inc_s2_n128_c2"
    assert attention.kernel_name(s14, causal=True) == "attn_s14_desc_inc_causal_s2_n128_c2"
    assert (s14["blind"], s14["causal_build"]["blind"]) == ("attention_h200_s14", "attention_h200_s14")


def test_s15_is_s14_with_the_late_v_wait_alone():
    s14, s15 = attention.VARIANTS["s14"], attention.VARIANTS["s15"]
    assert {k for k in s14 if s14[k] != s15[k]} == {"entry", "late_v", "blind", "causal_build", "sim"}
    # the simulator runs its turn in the kernel's order (late_v) from its own compiled loop
    assert {k: v for k, v in s15["sim"].items() if s14["sim"].get(k) != v} == {"kernel_loop": "s15", "late_v": 1}
    assert [k for k, v in attention.VARIANTS.items() if v["late_v"]] == ["s15", "s16", "s17", "s18", "s19", "s20",
                                                                               "s21", "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s15) == "attn_s15_late_v_s2_n128_c2"
    assert attention.kernel_name(s15, causal=True) == "attn_s15_late_v_causal_s2_n128_c2"
    assert (s15["blind"], s15["causal_build"]["blind"]) == ("attention_h200_s15", "attention_h200_s15")


def test_s16_is_s15_with_the_early_pack_alone():
    s15, s16 = attention.VARIANTS["s15"], attention.VARIANTS["s16"]
    assert {k for k in s15 if s15[k] != s16[k]} == {"entry", "early_pack", "blind", "causal_build", "sim"}
    # its own compiled loop; its softmax side costed as s15's, two softmax warps per SMSP (the default)
    assert {k: v for k, v in s16["sim"].items() if s15["sim"].get(k) != v} == {"kernel_loop": "s16"}
    assert "side_warps" not in s16["sim"]
    assert [k for k, v in attention.VARIANTS.items() if v["early_pack"]] == ["s16", "s17", "s18", "s19", "s20", "s21",
                                                                                   "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s16) == "attn_s16_early_pack_s2_n128_c2"
    assert attention.kernel_name(s16, causal=True) == "attn_s16_early_pack_causal_s2_n128_c2"
    assert (s16["blind"], s16["causal_build"]["blind"]) == ("attention_h200_s16", "attention_h200_s16")


def test_s17_is_s16_with_the_one_sync_turn_wait_alone():
    s16, s17 = attention.VARIANTS["s16"], attention.VARIANTS["s17"]
    assert {k for k in s16 if s16[k] != s17[k]} == {"entry", "one_sync", "blind", "causal_build", "sim"}
    # its own compiled loop; the simulator parameters otherwise s16's
    assert {k: v for k, v in s17["sim"].items() if s16["sim"].get(k) != v} == {"kernel_loop": "s17"}
    assert [k for k, v in attention.VARIANTS.items() if v["one_sync"]] == [
        "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s17) == "attn_s17_one_sync_s2_n128_c2"
    assert attention.kernel_name(s17, causal=True) == "attn_s17_one_sync_causal_s2_n128_c2"
    assert (s17["blind"], s17["causal_build"]["blind"]) == ("attention_h200_s17", "attention_h200_s17")


def test_s18_is_s17_with_the_hoisted_barrier_addresses_alone():
    s17, s18 = attention.VARIANTS["s17"], attention.VARIANTS["s18"]
    assert {k for k in s17 if s17[k] != s18[k]} == {"entry", "bar_hoist", "blind", "causal_build", "sim"}
    # its own compiled loop; the simulator parameters otherwise s17's
    assert {k: v for k, v in s18["sim"].items() if s17["sim"].get(k) != v} == {"kernel_loop": "s18"}
    assert [k for k, v in attention.VARIANTS.items() if v["bar_hoist"]] == [
        "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s18) == "attn_s18_bar_hoist_s2_n128_c2"
    assert attention.kernel_name(s18, causal=True) == "attn_s18_bar_hoist_causal_s2_n128_c2"
    assert (s18["blind"], s18["causal_build"]["blind"]) == ("attention_h200_s18", "attention_h200_s18")


def test_s19_is_s18_with_the_turns_waits_tested_early_alone():
    s18, s19 = attention.VARIANTS["s18"], attention.VARIANTS["s19"]
    assert {k for k in s18 if s18[k] != s19[k]} == {"entry", "early_test", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s19["sim"].items() if s18["sim"].get(k) != v} == {"kernel_loop": "s19"}
    assert [k for k, v in attention.VARIANTS.items() if v["early_test"]] == ["s19"]
    assert attention.kernel_name(s19) == "attn_s19_early_test_s2_n128_c2"
    assert attention.kernel_name(s19, causal=True) == "attn_s19_early_test_causal_s2_n128_c2"
    assert (s19["blind"], s19["causal_build"]["blind"]) == ("attention_h200_s19", "attention_h200_s19")


def test_s20_is_s18_with_the_turns_waits_as_spins_alone():
    s18, s20 = attention.VARIANTS["s18"], attention.VARIANTS["s20"]
    assert {k for k in s18 if s18[k] != s20[k]} == {"entry", "spin_wait", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s20["sim"].items() if s18["sim"].get(k) != v} == {"kernel_loop": "s20"}
    assert [k for k, v in attention.VARIANTS.items() if v["spin_wait"]] == [
        "s20", "s21", "s22", "s23", "s24", "s25", "s26"]
    assert not s20["early_test"]
    assert attention.kernel_name(s20) == "attn_s20_spin_wait_s2_n128_c2"
    assert attention.kernel_name(s20, causal=True) == "attn_s20_spin_wait_causal_s2_n128_c2"
    assert (s20["blind"], s20["causal_build"]["blind"]) == ("attention_h200_s20", "attention_h200_s20")


def test_s21_is_s20_with_the_producers_waits_asleep_alone():
    s20, s21 = attention.VARIANTS["s20"], attention.VARIANTS["s21"]
    assert {k for k in s20 if s20[k] != s21[k]} == {"entry", "sleep_acquire", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s21["sim"].items() if s20["sim"].get(k) != v} == {"kernel_loop": "s21"}
    assert [k for k, v in attention.VARIANTS.items() if v["sleep_acquire"]] == [
        "s21", "s22", "s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s21) == "attn_s21_sleep_acquire_s2_n128_c2"
    assert attention.kernel_name(s21, causal=True) == "attn_s21_sleep_acquire_causal_s2_n128_c2"
    assert (s21["blind"], s21["causal_build"]["blind"]) == ("attention_h200_s21", "attention_h200_s21")


def test_emulate_frac_is_the_kernels_emu_share():
    """EMU 4 sends 1/8 of the exponentials through the cubic, EMU 2 1/4 (attention_h200.cu Features)."""
    for v in attention.VARIANTS.values():
        frac = attention.sim_params(v).get("emulate_frac")
        assert frac == ((1 / (2 * v["emu"]) if v["emu"] else 0.0) if v["exp2"] else None)


def test_diagnostic_variants_are_never_predicted_nor_swept():
    for table in (attention.VARIANTS, gemm.VARIANTS):
        for v in table.values():
            if v["diagnostic"]:
                assert v["blind"] is None and v["sweep"] == ()


def test_every_blind_set_and_sweep_schedule_the_catalog_names_exists():
    sets = [v["blind"] for t in (attention.VARIANTS, gemm.VARIANTS) for v in t.values() if v["blind"]]
    sets += [v["causal_build"]["blind"] for v in attention.VARIANTS.values() if v["causal_build"]]
    sets += [k["blind"] for k in third_party.KERNELS.values()]  # kernels lapis did not write
    assert sorted(set(sets)) == sorted(p.stem for p in BLIND.glob("*.json"))
    for v in attention.VARIANTS.values():
        assert all(s in SCHEDULES for s in v["sweep"])
        assert not v["sweep"] or v["sweep"][0] == v["schedule"]


CASES = ([(n, v["schedule"], attention.sim_params(v, c), attention.SMALL_SHAPE)
          for n, v in attention.VARIANTS.items() for c in (False, True) if not c or v["causal_build"]]
         + [(n, v["schedule"], gemm.sim_params(v), GEMM_SHAPE) for n, v in gemm.VARIANTS.items()])


@pytest.mark.parametrize("name, schedule, params, shape", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_entrys_schedule_is_registered_and_takes_its_parameters(name, schedule, params, shape):
    assert schedule in SCHEDULES
    check_params(schedule, dict(params), SCHEDULES[schedule].defaults)
    r = simulate(schedule, "h200", shape, dict(params))
    assert r["predicted_us"] > 0
    assert {k: r["params"][k] for k in params} == params


ADDED = '''
VARIANTS["s9_n64"] = dict(VARIANTS["s9"], entry="s9_tuned_n64", block_n=64, blind=None, sweep=("h200-s9-tuned",),
                          causal_build=None)
'''
CHECK = '''
import json
from lapis.catalog import attention
from lapis.gpu import bench_attention
from lapis.pipeline_sim.simulate import simulate
from lapis.sweep.runnable import runnable
v = bench_attention.VARIANTS["s9_n64"]
r = simulate(v["schedule"], "h200", attention.SMALL_SHAPE, attention.sim_params(v))
print(json.dumps(dict(kernel=bench_attention.kernel_name(v), listed="s9_n64" in bench_attention.VARIANTS,
                      params=r["params"], runnable=runnable(v["schedule"], r["params"], "8x16x4096x128"),
                      s9=runnable("h200-s9-tuned", dict(r["params"], block_n=128), "8x16x4096x128"))))
'''


def without_shipped_data(folder, names) -> list:
    """copytree's ignore: caches, the shipped captures and the prediction cache (lapis/data), never the code
    package lapis/captures of the same name."""
    data = Path(folder).name == "data"
    return [n for n in names if n == "__pycache__" or (data and n in ("captures", "predictions.json.gz"))]


def test_a_variant_added_to_the_catalog_alone_reaches_the_bench_the_simulator_and_the_sweep(tmp_path):
    """s9 at block_n 64 under a new entry point: one table entry, then the generator."""
    shutil.copytree(ROOT / "lapis", tmp_path / "lapis", ignore=without_shipped_data)
    with open(tmp_path / "lapis" / "catalog" / "attention.py", "a") as f:
        f.write(ADDED)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    gen = subprocess.run([sys.executable, "-m", "lapis.catalog.generate"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert gen.returncode == 0, gen.stderr
    inc = (tmp_path / "lapis" / "gpu" / "kernels" / "attention_variants.inc").read_text()
    assert ("LAPIS_ATTENTION(attn_s9_tuned_n64_s3_n64_c2, 3, 64, 2, true, true, true, true, 0, true, true, 1, false, "
            "false, false, 1, false, false, false, false, false, false, false, false, false, "
            "false, false, false)  // s9_n64\n") in inc
    assert inc.startswith(generate.attention_inc())  # the other entry points, unchanged and in order
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["kernel"] == "attn_s9_tuned_n64_s3_n64_c2" and got["listed"]
    assert (got["params"]["block_n"], got["params"]["stages"], got["params"]["consumer_wgs"]) == (64, 3, 2)
    assert got["runnable"] == [True, "attn_s9_tuned_n64_s3_n64_c2"]
    assert got["s9"] == [True, "attn_s9_tuned_s3_n128_c2"]  # the entries already there still map


def test_every_entry_and_causal_build_keeps_the_templates_rules():
    for v in attention.VARIANTS.values():
        attention.check_template(v)
        if v["causal_build"]:
            attention.check_template(v, causal=True)


def test_the_catalogs_rules_are_the_kernels_static_asserts():
    """Each rule's message is a static_assert message of attention_h200.cu, and every static_assert of its Features
    struct has a rule."""
    import re
    src = (generate.KERNELS / "attention_h200.cu").read_text()
    asserted = re.findall(r'static_assert\((?:[^;]*?),\s*"([^"]+)"\);', src)
    features = src[src.index("struct Features {"):src.index("};", src.index("struct Features {"))]
    rules = [rule for _, rule in attention.RULES]
    assert set(rules) <= set(asserted)
    assert set(re.findall(r'static_assert\((?:[^;]*?),\s*"([^"]+)"\);', features)) <= set(rules)
    assert len(rules) == 25


def test_the_generated_lists_header_names_the_features_template_parameters_in_order():
    """The header comment of attention_variants.inc names Features' parameters as attention_h200.cu declares them
    (it lacked SLEEP_ACQUIRE, the 19th value of every line)."""
    import re
    src = (generate.KERNELS / "attention_h200.cu").read_text()
    declared = src[src.rindex("template <", 0, src.index("struct Features {")):src.index("struct Features {")]
    names = re.findall(r"(?:bool|int) (\w+)_", declared)
    assert names[-4:] == ["CROSS", "EARLY_ITEM", "DESC64", "SPLIT_TAIL"] and len(names) == 23
    header = generate.attention_inc().splitlines()[1]
    assert header.endswith(f"Features<{', '.join(names)}>)")
    assert (generate.KERNELS / "attention_variants.inc").read_text().splitlines()[1] == header


def test_a_sleep_acquire_entry_outside_the_persistent_gemm_turn_producer_is_refused_by_name():
    for base in ("s3", "s7"):  # s3: no GEMM turns; s7: GEMM turns, one item a CTA
        with pytest.raises(ScheduleError, match="the sleeping waits are of the persistent GEMM-turn producer") as e:
            attention.check_template(dict(attention.VARIANTS[base], sleep_acquire=True))
        assert "'sleep_acquire': True" in str(e.value)


@pytest.mark.parametrize("change, rule", [
    (dict(early_test=True), "the spin waits replace s18's turn waits"),
    (dict(bar_hoist=False), "the spin waits replace s18's turn waits"),
    (dict(late_v=False), "the spin waits replace s18's turn waits"),
])
def test_a_spin_wait_entry_that_nvcc_would_refuse_is_refused_by_name(change, rule):
    bad = dict(attention.VARIANTS["s20"], **change)
    with pytest.raises(ScheduleError, match=rule) as e:
        attention.check_template(bad)
    assert "s20_spin_wait" in str(e.value) and "'spin_wait': True" in str(e.value)


def test_the_early_test_rule_still_holds_without_spin_wait():
    with pytest.raises(ScheduleError, match="the early tests use s18's held addresses"):
        attention.check_template(dict(attention.VARIANTS["s19"], late_v=False))
    with pytest.raises(ScheduleError, match="the causal build is of the persistent overlap kernel"):
        attention.check_template(attention.VARIANTS["s4"], causal=True)


def test_the_generator_refuses_an_entry_before_writing_the_list(monkeypatch):
    monkeypatch.setitem(attention.VARIANTS, "s21", dict(attention.VARIANTS["s20"], entry="s21_both", early_test=True))
    with pytest.raises(ScheduleError, match="the spin waits replace s18's turn waits"):
        generate.attention_inc()


def test_s22_is_s21_with_two_softmax_chains_alone():
    s21, s22 = attention.VARIANTS["s21"], attention.VARIANTS["s22"]
    assert {k for k in s21 if s21[k] != s22[k]} == {"entry", "chains", "blind", "causal_build", "sim"}
    # its own loop costs it (two chains in its SASS), not the simulator's softmax_chains scaling
    assert {k: v for k, v in s22["sim"].items() if s21["sim"].get(k) != v} == {"kernel_loop": "s22"}
    assert (s21["chains"], s22["chains"]) == (1, 2) and "softmax_chains" not in s22["sim"]
    assert attention.kernel_name(s22) == "attn_s22_two_chains_s2_n128_c2"
    assert attention.kernel_name(s22, causal=True) == "attn_s22_two_chains_causal_s2_n128_c2"
    assert (s22["blind"], s22["causal_build"]["blind"]) == ("attention_h200_s22", "attention_h200_s22")


def test_s23_is_s22_with_the_gemm_turns_running_on_across_items_alone():
    s22, s23 = attention.VARIANTS["s22"], attention.VARIANTS["s23"]
    assert {k for k in s22 if s22[k] != s23[k]} == {"entry", "cross", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s23["sim"].items() if s22["sim"].get(k) != v} == {"kernel_loop": "s23", "cross_item": 1}
    assert [k for k, v in attention.VARIANTS.items() if v["cross"]] == ["s23", "s24", "s25", "s26"]
    assert attention.kernel_name(s23) == "attn_s23_cross_s2_n128_c2"
    assert attention.kernel_name(s23, causal=True) == "attn_s23_cross_causal_s2_n128_c2"
    assert (s23["blind"], s23["causal_build"]["blind"]) == ("attention_h200_s23", "attention_h200_s23")


@pytest.mark.parametrize("base", ["s7", "s5"])
def test_a_cross_item_entry_outside_the_persistent_overlap_turn_is_refused_by_name(base):
    with pytest.raises(ScheduleError, match="the cross-item turn is of the persistent overlap turn") as e:
        attention.check_template(dict(attention.VARIANTS[base], cross=True))
    assert "'cross': True" in str(e.value)


def test_s24_is_s23_with_the_item_boundarys_scalar_work_early_alone():
    s23, s24 = attention.VARIANTS["s23"], attention.VARIANTS["s24"]
    assert {k for k in s23 if s23[k] != s24[k]} == {"entry", "early_item", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s24["sim"].items() if s23["sim"].get(k) != v} == {"kernel_loop": "s24"}
    assert [k for k, v in attention.VARIANTS.items() if v["early_item"]] == ["s24", "s25", "s26"]
    assert attention.kernel_name(s24) == "attn_s24_early_item_s2_n128_c2"
    assert attention.kernel_name(s24, causal=True) == "attn_s24_early_item_causal_s2_n128_c2"
    assert (s24["blind"], s24["causal_build"]["blind"]) == ("attention_h200_s24", "attention_h200_s24")


def test_an_early_item_entry_outside_the_cross_item_work_list_loop_is_refused_by_name():
    for base, change in (("s22", {}), ("s23", {"worklist": False})):
        with pytest.raises(ScheduleError, match="the early item work is of s23's cross-item loop over a work list"):
            attention.check_template(dict(attention.VARIANTS[base], early_item=True, **change))


def test_s25_is_s24_with_the_64_bit_descriptor_adds_alone():
    s24, s25 = attention.VARIANTS["s24"], attention.VARIANTS["s25"]
    assert {k for k in s24 if s24[k] != s25[k]} == {"entry", "desc64", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s25["sim"].items() if s24["sim"].get(k) != v} == {"kernel_loop": "s25"}
    assert [k for k, v in attention.VARIANTS.items() if v["desc64"]] == ["s25", "s26"]
    assert attention.kernel_name(s25) == "attn_s25_desc64_s2_n128_c2"
    assert attention.kernel_name(s25, causal=True) == "attn_s25_desc64_causal_s2_n128_c2"
    assert (s25["blind"], s25["causal_build"]["blind"]) == ("attention_h200_s25", "attention_h200_s25")


def test_a_desc64_entry_without_the_descriptor_increments_is_refused_by_name():
    with pytest.raises(ScheduleError, match="the 64-bit descriptor adds replace s14's low-word increments") as e:
        attention.check_template(dict(attention.VARIANTS["s13"], desc64=True))
    assert "'desc64': True" in str(e.value)


@pytest.mark.parametrize("key, value", [("desc64", 1), ("desc64", "yes"), ("desc64", None), ("cross", 0),
                                        ("chains", 2.0), ("stages", True)])
def test_a_template_parameter_of_the_wrong_type_is_refused_by_name(key, value):
    with pytest.raises(ScheduleError, match="are integers and its other template parameters True or False") as e:
        attention.check_template(dict(attention.VARIANTS["s24"], **{key: value}))
    assert f"'{key}': {value!r}" in str(e.value)


def test_the_generator_refuses_a_repeated_kernel_name_and_writes_nothing(monkeypatch, capsys):
    inc = attention_plan.KERNELS / "attention_variants.inc"
    before = inc.read_text()
    monkeypatch.setitem(attention.VARIANTS, "s99", dict(attention.VARIANTS["s25"]))  # s25's entry names again
    assert generate.main([]) == 2
    err = capsys.readouterr().err
    assert "each catalog entry point has its own kernel name" in err and "attn_s25_desc64_s2_n128_c2" in err
    assert inc.read_text() == before


def test_s26_is_s25_with_the_split_tail_alone():
    s25, s26 = attention.VARIANTS["s25"], attention.VARIANTS["s26"]
    assert {k for k in s25 if s25[k] != s26[k]} == {"entry", "split_tail", "blind", "causal_build", "sim"}
    assert {k: v for k, v in s26["sim"].items() if s25["sim"].get(k) != v} == {
        "kernel_loop": "s26", "persistent_order": "split_tail"}
    assert [k for k, v in attention.VARIANTS.items() if v["split_tail"]] == ["s26"]
    assert attention.kernel_name(s26) == "attn_s26_split_tail_s2_n128_c2"
    assert attention.kernel_name(s26, causal=True) == "attn_s26_split_tail_causal_s2_n128_c2"
    assert (s26["blind"], s26["causal_build"]["blind"]) == ("attention_h200_s26", "attention_h200_s26")


def test_a_split_tail_entry_outside_the_early_item_loop_is_refused_by_name():
    with pytest.raises(ScheduleError, match="the split tail's pieces end s24's cross-item loop over a work list") as e:
        s23 = attention.VARIANTS["s23"]
        attention.check_template(dict(s23, split_tail=True, sim=dict(s23["sim"], persistent_order="split_tail")))
    assert "'split_tail': True" in str(e.value)


def test_a_split_tail_flag_without_its_order_or_the_order_without_the_flag_is_refused_by_name():
    from lapis.gpu.bench_attention import worklist
    s25, s26 = attention.VARIANTS["s25"], attention.VARIANTS["s26"]
    for bad in (dict(s25, sim=dict(s25["sim"], persistent_order="split_tail")), dict(s26, split_tail=False)):
        for check in (attention.check_template, lambda v: worklist(v, "8x16x4096x128", False)):
            with pytest.raises(ScheduleError, match="split_tail flag and its sim persistent_order=split_tail go"):
                check(bad)
