"""lapis sweep: the configuration space, rows that do not fit, runnable marks, the Pareto front, fast mode
against the full simulation, and resume (lapis/sweep)."""

import json

import pytest

from lapis.errors import ScheduleError
from lapis.pipeline_sim.schedules.attention_h200 import DEFAULTS
from lapis.pipeline_sim.simulate import simulate
from lapis.sweep import evaluate as ev
from lapis.sweep.fast import simulate_fast
from lapis.sweep.run import run_sweep
from lapis.sweep.space import configurations, parse_grid
from lapis.sweep.store import ROWS_FILE
from lapis.sweep.table import pareto

S8 = "h200-s8-persistent"
TINY = "1x2x512x128"


def test_grid_is_parsed_sorted_and_enumerated_last_key_fastest():
    axes = parse_grid(["stages=3,2,3", "block_n=128,64", "persistent_order=lpt,grid_stride"], DEFAULTS, S8)
    assert axes == {"block_n": (64, 128), "persistent_order": ("grid_stride", "lpt"), "stages": (2, 3)}
    cfgs = configurations(axes)
    assert len(cfgs) == 8
    assert cfgs[0] == (("block_n", 64), ("persistent_order", "grid_stride"), ("stages", 2))
    assert cfgs[1] == (("block_n", 64), ("persistent_order", "grid_stride"), ("stages", 3))
    assert cfgs[-1] == (("block_n", 128), ("persistent_order", "lpt"), ("stages", 3))


def test_random_sample_is_seeded_distinct_and_sorted():
    axes = parse_grid(["block_n=16,32,48,64,80,96,112,128", "stages=1,2,3,4"], DEFAULTS, S8)
    a, b = configurations(axes, 10, seed=7), configurations(axes, 10, seed=7)
    assert a == b and len(set(a)) == 10 and a == sorted(a)
    assert configurations(axes, 10, seed=8) != a
    with pytest.raises(ScheduleError, match="--random"):
        configurations(axes, 0)


def test_unknown_or_repeated_keys_are_refused():
    with pytest.raises(ScheduleError, match="no parameter blockn"):
        parse_grid(["blockn=64"], DEFAULTS, S8)
    with pytest.raises(ScheduleError, match="given once"):
        parse_grid(["stages=2", "stages=3"], DEFAULTS, S8)


def test_configurations_that_do_not_fit_are_kept_with_the_simulators_reason(tmp_path):
    r = run_sweep(S8, [TINY], ["stages=2,3", "block_n=64,72,192", "consumer_wgs=3", "regs_consumer=160,256"],
                  executor="serial", out=tmp_path, figure=False)
    assert len(r["rows"]) == 12 and r["fits"] == 0
    by = {tuple(v for _, v in row["config"]): row for row in r["rows"]}
    # Q 192 x 128 x 2 B + 3 stages x (K + V) 2 x 192 x 128 x 2 B = 49152 + 294912 = 344064 B > 227 KiB (232448 B);
    # s8's second Q slot is dropped where it does not fit
    assert "1 x Q 49152 B + 3 stages x K+V 98304 B = 344064 B > 232448 B" in by[(192, 3, 160, 3)]["reason"]
    # setmaxnreg: 128 x (32 producer + 3 x 256 consumer) = 102400 registers > 65536
    assert "102400 registers > 65536" in by[(64, 3, 256, 2)]["reason"]
    assert "multiple of 16" in by[(72, 3, 160, 2)]["reason"]
    assert "L = 512, block_m 192" in by[(64, 3, 160, 2)]["reason"]  # 512 rows are not whole 192-row Q tiles
    assert all(not row["fits"] and row["kernel"] == "not runnable: does not fit" for row in r["rows"])
    lines = (tmp_path / "sweep.csv").read_text().splitlines()
    assert len(lines) == 13 and lines[0].startswith("block_n,consumer_wgs,regs_consumer,stages,shape,fits,reason")


def test_runnable_marks_the_instantiated_kernel_only(tmp_path):
    r = run_sweep(S8, [TINY], ["stages=2,3", "block_n=64,128"], executor="serial", out=tmp_path, figure=False)
    by = {tuple(v for _, v in row["config"]): row for row in r["rows"]}
    # the simulator's s8 resolves setmaxnreg 24/240; the kernels set 40/232 (bench_attention.VARIANTS["s8"])
    split = " (kernel's setmaxnreg split 40/232)"
    assert by[(128, 2)]["runnable"] and by[(128, 2)]["kernel"] == "attn_s8_persistent_s2_n128_c2" + split
    assert by[(128, 3)]["runnable"] and by[(128, 3)]["kernel"] == "attn_s9_tuned_s3_n128_c2" + split  # s8's loop
    assert not by[(64, 2)]["runnable"] and by[(64, 2)]["fits"]
    assert "attn_s8_persistent_s2_n64_c2 is not instantiated" in by[(64, 2)]["kernel"]
    gemm = ev.evaluate(ev.Task("h200-gemm-ws", "h200", "256x256x256", (), "full"))
    assert gemm["fits"] and not gemm["runnable"] and "no kernel for h200-gemm-ws" in gemm["kernel"]


def test_pareto_front_of_known_points():
    pts = [dict(config=c, geomean_tflops=t, smem_bytes=s) for c, t, s in
           (("a", 100, 10), ("b", 120, 20), ("c", 110, 30), ("d", 120, 25), ("e", 130, 40), ("f", 90, 5))]
    assert [p["config"] for p in pareto(pts)] == ["f", "a", "b", "e"]


@pytest.mark.parametrize("schedule,shape,params", [
    (S8, "4x16x4096x128", dict(stages=3)),
    (S8, "4x16x4096x128", dict(causal=1, persistent_order="lpt")),
    ("h200-s1-serial", "4x16x4096x128", {}),
    ("b200-k14-persistent", "4x16x4096x128", {}),
])
def test_fast_mode_against_the_full_simulation(schedule, shape, params):
    """Stated bound: fast mode is within 0.5% of the full simulation's time on these rows. Measured (2026-11-30):
    s8 and b200 k14 agree to 1e-13 (their steady state is linear in items and tiles); s8 causal with lpt is
    0.20% off (items of unequal length, capped in the short runs), s1 (two CTA slots per SM) 0.10%; s1 is 1.4%
    off at 8x16x4096x128 (README)."""
    gpu = "b200" if schedule.startswith("b200") else "h200"
    fast, full = simulate_fast(schedule, gpu, shape, params), simulate(schedule, gpu, shape, params)
    assert fast["fast"] in ("items+tiles", "units")  # extrapolated, not the full run
    assert abs(fast["predicted_us"] / full["predicted_us"] - 1) < 5e-3
    assert fast["bound_by"] == full["bound_by"]  # busy times are extrapolated alike
    assert all(abs(fast["utilization"][u] - v) < 5e-3 for u, v in full["utilization"].items())


def test_fast_mode_simulates_a_list_that_ends_on_a_piece_in_full():
    """A split unit's piece ends its SM's list with a merge (store_piece) that the items + tiles fit cannot carry:
    fast mode runs the full simulation and says so."""
    params = dict(stages=2, q_slots=2, persistent_order="split_tail")
    fast, full = simulate_fast(S8, "h200", "32x16x1024x128", params), simulate(S8, "h200", "32x16x1024x128", params)
    assert fast["fast"] == "exact" and fast["predicted_us"] == full["predicted_us"]


def test_fast_sweep_reports_its_measured_error(tmp_path):
    r = run_sweep(S8, ["4x16x4096x128"], ["stages=2,3"], fast=True, executor="serial", out=tmp_path, check=2,
                  figure=False)
    fc = r["fast_check"]
    assert fc["sample"] == 2 and fc["max_abs_error"] < 5e-3
    for x in fc["rows"]:
        full = simulate(S8, "h200", x["shape"], dict(stages=int(x["config"].split("=")[1])))
        assert x["full_us"] == full["predicted_us"]
    assert json.loads((tmp_path / "summary.json").read_text())["fast_check"]["sample"] == 2


def test_resume_after_a_kill_recomputes_nothing_finished(tmp_path, monkeypatch):
    calls = []
    real = ev.simulate_row
    monkeypatch.setattr(ev, "simulate_row", lambda t: calls.append(t.key()) or real(t))
    args = (S8, [TINY, "1x2x1024x128"], ["stages=2,3", "block_n=64,128"])
    first = run_sweep(*args, executor="serial", out=tmp_path, figure=False)
    assert len(calls) == 8
    store = tmp_path / ROWS_FILE
    lines = store.read_text().splitlines()
    store.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # killed while writing the fourth row
    calls.clear()
    again = run_sweep(*args, executor="serial", out=tmp_path, figure=False)
    finished = {json.loads(x)["row"]["key"] for x in lines[:3]}
    assert len(calls) == 5 and not finished & set(calls)
    assert again["csv"] == first["csv"] and again["counts"]["resumed"] == 3 and again["dropped_partial_lines"] == 1
    calls.clear()
    run_sweep(*args, executor="serial", out=tmp_path, figure=False)
    assert calls == []


def test_validate_top_adds_measured_columns_for_runnable_rows_only(tmp_path, monkeypatch):
    """The GPU path's plumbing, with bench_attention replaced by a stand-in that writes the manifest a GPU run
    writes (results[].variants[name].plain.median_us); the real run needs the H200."""
    import csv

    from lapis.gpu import bench_attention, harness
    from lapis.sweep.validate import validate_top
    shapes = [TINY, "1x2x1024x128"]
    r = run_sweep(S8, shapes, ["stages=2,3"], executor="serial", out=tmp_path, figure=False)
    seen = []

    def fake_main(argv):
        seen.append(argv)
        out = tmp_path / "validate"
        out.mkdir()
        res = [dict(shape=s, variants={"s8": dict(plain=dict(median_us=us)), "s9": dict(plain=dict(median_us=2 * us))})
               for s, us in zip(shapes, (10.0, 40.0))]
        (out / "manifest.json").write_text(json.dumps(dict(results=res)))
        return 0

    monkeypatch.setattr(harness, "gpu_present", lambda: True)
    monkeypatch.setattr(bench_attention, "main", fake_main)
    path = validate_top(r, 2, tmp_path)
    assert seen == [["--out", str(tmp_path / "validate"), "--variants", "s8,s9", "--shapes", ",".join(shapes)]]
    rows = list(csv.DictReader(path.open()))
    got = {(x["stages"], x["shape"]): (x["measured_us"], x["measured_tflops"]) for x in rows}
    # 4 B H L^2 D FLOPs over the measured time: 4*1*2*512^2*128 / 10 us = 26.84 TFLOP/s; 4*2*1024^2*128 / 40 us
    assert got[("2", TINY)] == ("10.000", "26.84") and got[("2", "1x2x1024x128")] == ("40.000", "26.84")
    assert got[("3", TINY)] == ("20.000", "13.42")  # stages 3: the s9 build (s8's loop at 3 stages), 20 us


def test_runnable_needs_the_kernels_work_order_and_names_a_different_split(tmp_path):
    r = run_sweep(S8, [TINY], ["persistent_order=grid_stride,lpt", "q_tiles_per_cta=1,2", "regs_producer=40",
                               "regs_consumer=232,200"], executor="serial", out=tmp_path, figure=False)
    by = {tuple(v for _, v in row["config"]): row for row in r["rows"]}
    assert all(row["fits"] for row in r["rows"]) and len(r["rows"]) == 8
    # keys sorted: persistent_order, q_tiles_per_cta, regs_consumer, regs_producer
    assert by[("grid_stride", 1, 232, 40)]["kernel"] == "attn_s8_persistent_s2_n128_c2"  # the kernel's own split
    assert by[("grid_stride", 1, 200, 40)]["runnable"]
    split = " (kernel's setmaxnreg split 40/232)"  # bench_attention.VARIANTS["s8"]: 40/232, not the row's 40/200
    assert by[("grid_stride", 1, 200, 40)]["kernel"] == "attn_s8_persistent_s2_n128_c2" + split
    assert not by[("lpt", 1, 232, 40)]["runnable"]
    assert by[("lpt", 1, 232, 40)]["kernel"] == "not runnable: the kernels fix persistent_order grid_stride (got lpt)"
    assert not by[("grid_stride", 2, 232, 40)]["runnable"]
    assert by[("grid_stride", 2, 232, 40)]["kernel"] == "not runnable: the kernels fix q_tiles_per_cta 1 (got 2)"


def test_a_shape_over_the_event_bound_is_a_simulator_limit_not_a_fit_failure(tmp_path):
    # s8 at 132x16x65536x128: 132*16*512 Q tiles / 132 SMs = 8192 per SM, x 2 MMAs x 512 K/V tiles = 8,388,608
    # events > 1,000,000 (recorder.MAX_EVENTS)
    r = run_sweep(S8, [TINY, "132x16x65536x128"], ["stages=2"], fast=True, check=0, executor="serial",
                  out=tmp_path, figure=False)
    big = [row for row in r["rows"] if row["shape"] == "132x16x65536x128"][0]
    assert not big["fits"] and big["reason"].startswith("simulator limit: the run exceeds the simulator's event bound")
    assert "8,388,608" in big["reason"]
    assert big["kernel"] == "not runnable: not simulated (simulator limit)"
    assert r["simulator_limit"] == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_nan_or_infinite_prediction_is_marked_never_ranked(tmp_path, monkeypatch, bad):
    """A simulator answer that is not a finite positive number (a user schedule's NaN cost, a fast
    extrapolation gone wrong) makes the row a non-fit with its reason; the other configuration is ranked alone."""
    real = ev.simulate_row

    def one_bad(task):
        r = real(task)
        return dict(r, tflops=bad) if dict(task.config)["stages"] == 2 else r
    monkeypatch.setattr(ev, "simulate_row", one_bad)
    res = run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=1,2"], executor="serial", out=tmp_path,
                    figure=False)
    assert [c["config"] for c in res["ranked"]] == ["stages=1"]
    rows = [json.loads(x)["row"] for x in (tmp_path / ROWS_FILE).read_text().splitlines()]
    bad_row = next(r for r in rows if r["config"] == [["stages", 2]])
    assert not bad_row["fits"] and bad_row["tflops"] is None and bad_row["kernel"] == "not runnable: no finite prediction"
    assert bad_row["reason"].startswith(f"no finite prediction: tflops = {bad!r}")


def test_a_nan_in_the_schedules_fit_is_marked_not_stored_as_nan(tmp_path, monkeypatch):
    real = ev.simulate_row

    def nan_fit(task):
        r = real(task)
        return dict(r, fit=dict(r["fit"], smem_bytes=float("nan"))) if dict(task.config)["stages"] == 2 else r
    monkeypatch.setattr(ev, "simulate_row", nan_fit)
    res = run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=1,2"], executor="serial", out=tmp_path,
                    figure=False)
    assert [c["config"] for c in res["ranked"]] == ["stages=1"]
    rows = [json.loads(x)["row"] for x in (tmp_path / ROWS_FILE).read_text().splitlines()]
    assert next(r for r in rows if r["config"] == [["stages", 2]])["reason"].startswith(
        "no finite prediction: smem_bytes = nan")


def test_a_row_whose_gemm_turn_no_sweepable_kernel_has_is_not_runnable():
    """s8's kernel waits for V before QK and drains its turns at each item's end: a row with late_v 1, cross_item 1
    or another kernel's loop is not what it runs (s15..s23 take no sweep rows)."""
    from lapis.sweep.runnable import runnable
    base = dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, q_slots=2, emulate_frac=0.0, threshold=8.0,
                regs_producer=40, regs_consumer=232)
    assert runnable("h200-s8-persistent", base, TINY) == (True, "attn_s8_persistent_s2_n128_c2")
    for k, v in (("cross_item", 1), ("late_v", 1), ("kernel_loop", "s22")):
        ok, why = runnable("h200-s8-persistent", dict(base, **{k: v}), TINY)
        assert not ok and why.startswith("attn_s8_persistent_s2_n128_c2 takes GEMM turns with {'late_v': 0, "
                                         "'cross_item': 0, 'kernel_loop': 'own'}, the row {")
        assert f"{k!r}: {v!r}" in why
