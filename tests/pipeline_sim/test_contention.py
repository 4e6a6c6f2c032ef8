"""The SM contention model (lapis.pipeline_sim.contention) and the costs the Hopper schedules take from it."""

import json
from pathlib import Path

import pytest
import simpy

from lapis.errors import ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim.contention import Contention
from lapis.pipeline_sim.schedules import attention_h200 as ah

CONTEND = Path(__file__).resolve().parents[2] / "lapis/data/captures/micro/h200-2026-11-30-contend-launch/micro/results.json"
CONSUMER_LOOPS = Path(__file__).resolve().parents[2] / "lapis/data/consumer_loops.json"


def run(jobs, **factors):
    """jobs: (start ns, kind, work ns); returns each job's end time."""
    env = simpy.Environment()
    c = Contention(env, **{**dict(softmax_under_gemm=1.0, softmax_pair=1.0, pipe_under_softmax=1.0), **factors})
    ends = {}

    def job(i, start, kind, work):
        yield env.timeout(start)
        yield from c.run(kind, work)
        ends[i] = env.now
    for i, j in enumerate(jobs):
        env.process(job(i, *j))
    env.run()
    return ends, c


def test_a_job_alone_takes_its_work():
    ends, c = run([(5, "softmax", 100.0)], softmax_pair=0.5)
    assert ends[0] == pytest.approx(105.0) and c.busy["softmax"] == pytest.approx(100.0)


def test_two_softmax_jobs_share_and_the_survivor_speeds_up():
    # both at 0.5 while together: job 0 (work 100) ends at 200 having done 100, job 1 (work 150) has 50 left
    # and does it alone by 250
    ends, c = run([(0, "softmax", 100.0), (0, "softmax", 150.0)], softmax_pair=0.5)
    assert ends == {0: pytest.approx(200.0), 1: pytest.approx(250.0)}
    assert c.busy["softmax"] == pytest.approx(250.0)


def test_a_late_second_job_slows_the_first_from_its_start():
    # job 0 alone for 40 (60 left), then at 0.5 with job 1 until job 0 ends at 160; job 1 (work 100) did 60 by
    # then and finishes its 40 alone at 200
    ends, _ = run([(0, "softmax", 100.0), (40, "softmax", 100.0)], softmax_pair=0.5)
    assert ends == {0: pytest.approx(160.0), 1: pytest.approx(200.0)}


def test_the_pipe_slows_beside_a_softmax_and_the_softmax_beside_wgmma_in_flight():
    env = simpy.Environment()
    c = Contention(env, softmax_under_gemm=0.5, softmax_pair=1.0, pipe_under_softmax=0.8)
    ends = {}

    def gemm():
        c.gemm_issued()
        yield from c.run("pipe", 80.0)  # 0.8 while the softmax runs: 100 ns
        ends["pipe"] = env.now
        c.gemm_done()

    def softmax():
        yield from c.run("softmax", 100.0)  # 0.5 for 100 ns (50 done), then alone: 150
        ends["softmax"] = env.now
    env.process(gemm())
    env.process(softmax())
    env.run()
    assert ends == {"pipe": pytest.approx(100.0), "softmax": pytest.approx(150.0)}


def test_bad_factors_and_kinds_are_named():
    env = simpy.Environment()
    with pytest.raises(ScheduleError, match="rate relative to alone"):
        Contention(env, softmax_under_gemm=0.0, softmax_pair=1.0, pipe_under_softmax=1.0)
    c = Contention(env, softmax_under_gemm=1.0, softmax_pair=1.0, pipe_under_softmax=1.0)
    with pytest.raises(ScheduleError, match="softmax or a tensor-pipe job"):
        next(c.run("mufu", 1.0))


def _cycles(name, side):
    m = next(m for m in json.loads(CONTEND.read_text())["measurements"] if m["name"] == name)
    vals = [m["params"]["iters"] / c for c in m["raw"]["cycles"]] if side == "lead" else m["raw"]["follower_rate"]
    return 1.0 / sorted(vals)[len(vals) // 2]


def test_the_profile_holds_the_gemm_pair_alone_and_no_softmax_state():
    p = load_profile("h200")
    assert p["gemm_pair_cycles"] == pytest.approx(_cycles("contend.exp2f.t", "lead"), rel=1e-3)
    # two warpgroups keep the tensor pipe at its peak: 2 x 2 x 64 x 128 x 128 FLOP per pair at 4096 FLOP/clk
    assert p["gemm_pair_cycles_two_wgs"] == pytest.approx(2 * 4 * 64 * 128 * 128 / p["tensor_flop_per_clk_sm"], rel=0.01)
    # the softmax states are predicted from SASS (lapis.model.contend), never fitted
    assert not [k for k in p.values if k.startswith(("softmax_cycles_", "gemm_pair_cycles_under_softmax_"))]


def _reference(flavour):
    return json.loads(CONSUMER_LOOPS.read_text())["micro_reference"][flavour]["contend"]


def test_schedule_costs_follow_the_flavour_and_the_emulated_fraction():
    p = load_profile("h200")
    s6 = ah.VARIANTS["h200-s6-exp2"]
    ex2, emu8, emu4 = (_reference(f) for f in ("ex2", "emu8", "emu4"))

    def cost(flags, emulate=0.0, rows=64, bn=128):
        c = ah.softmax_costs(p, flags, dict(emulate_frac=emulate, consumer_wgs=2), rows, bn, 128)
        return dict(c, tile_ns=c["softmax_ns"] + c["rescale_ns"] * (not flags.get("cond_rescale")))
    ghz = p["clock_ghz"]
    # the microbenchmark's tile: softmax + one O rescale (64 x 128 multiplies at the FMA rate) for the
    # always-rescale flavours; ex2_cond's holds none (its scores' max never moves in the microbenchmark)
    rescale = 64 * 128 / p["fma_per_clk_sm"] / ghz
    assert cost(s6)["rescale_ns"] == pytest.approx(rescale)
    assert cost(ah.VARIANTS["h200-s5-intra-overlap"])["tile_ns"] == pytest.approx(_reference("exp2f")["tile"] / ghz)
    assert cost(s6)["tile_ns"] == pytest.approx(ex2["tile"] / ghz)
    s7 = ah.softmax_costs(p, ah.VARIANTS["h200-s7-cond-rescale"], dict(emulate_frac=0, consumer_wgs=2), 64, 128, 128)
    assert s7["softmax_ns"] == pytest.approx(_reference("ex2_cond")["tile"] / ghz)
    assert cost(s6, 0.125)["tile_ns"] == pytest.approx(emu8["tile"] / ghz)
    assert cost(s6, 0.0625)["tile_ns"] == pytest.approx((ex2["tile"] + emu8["tile"]) / 2 / ghz)
    # past 1/4: emu4 plus the cubic's 6 FMA-pipe ops per extra emulated score
    extra = 0.25 * 64 * 128 * 6 / p["fma_per_clk_sm"]
    assert cost(s6, 0.5)["tile_ns"] == pytest.approx((emu4["tile"] + extra) / ghz)
    # a 64 x 64 tile's softmax costs half the 64 x 128 one's; its O rescale (64 x d) does not shrink
    half = ah.softmax_costs(p, s6, dict(emulate_frac=0, consumer_wgs=2), 64, 64, 128)
    assert half["softmax_ns"] == pytest.approx((ex2["tile"] / ghz - rescale) / 2)
    assert half["rescale_ns"] == pytest.approx(rescale)
    f = cost(s6)["factors"]
    assert f["softmax_pair"] == pytest.approx(ex2["tile"] / ex2["pair"])
    assert f["softmax_under_gemm"] == pytest.approx(ex2["tile"] / ex2["under_gemm"])
    assert f["pipe_under_softmax"] == pytest.approx((ex2["gemm"] - ex2["gap"]) / (ex2["gemm_under_softmax"] - ex2["gap"]))
    # the GEMM pair's result lands its completion gap after the pipe: wgmma.latency.n128.rs (108.5 cycles) less one
    # wgmma's 64.6 pipe cycles (micro/h200-2026-11-29, the clock capture's rate; by hand)
    assert cost(s6)["wgmma_latency_ns"] == pytest.approx(43.9 / ghz, abs=0.1 / ghz)
    # a kernel with its own loop takes the rates of its own softmax side (lapis/data/consumer_loops.json: s9)
    s9 = dict(ah.VARIANTS["h200-s9-tuned"], gemm_turn="h200-s9-tuned")
    own = json.loads(CONSUMER_LOOPS.read_text())["loops"]["s9"]["softmax_side"]["contend"]
    f9 = ah.softmax_costs(p, s9, dict(emulate_frac=0, consumer_wgs=2), 64, 128, 128)["factors"]
    assert f9["softmax_pair"] == pytest.approx(own["tile"] / own["pair"])
    assert f9["softmax_under_gemm"] == pytest.approx(own["tile"] / own["under_gemm"])


def test_the_ex2_tile_in_the_contend_states_is_what_validate_micro_scores():
    """The committed ex2 reference, read by hand from lapis/data/consumer_loops.json: a tile alone 1051 cycles,
    1510 beside another softmax (phase mean), 1479 beside the GEMM pair, which takes 1205 beside it (1078 alone)."""
    ex2 = _reference("ex2")
    assert (round(ex2["tile"]), round(ex2["pair"]), round(ex2["under_gemm"]), round(ex2["gemm_under_softmax"]),
            round(ex2["gemm"])) == (1051, 1510, 1479, 1205, 1078)


def _first_start(events, role_suffix, item):
    return min(e.start_ns for e in events if e.role.endswith(role_suffix) and e.work_item == item
               and e.kind != "wait")


def _last_end(events, item):
    return max(e.end_ns for e in events if e.work_item == item and e.role != "tma")


def test_a_slot_runs_one_cta_at_a_time_with_the_measured_turnover():
    from lapis.pipeline_sim.simulate import simulate
    p = load_profile("h200")
    # s4 keeps one CTA per SM: the SM's second CTA starts no role, not even the producer's Q load, before every
    # role of the first is done (its last op, the O store, completes one HBM latency after its bytes) and the SM
    # has turned over
    ev = simulate("h200-s4-pingpong", "h200", "4x16x1024x128", {})["_events"]  # 512 CTAs: 4 per SM
    items = sorted({e.work_item for e in ev if e.work_item is not None})
    first, second = items[0], items[1]
    start = min(_first_start(ev, r, second) for r in ("producer", "consumer0", "consumer1"))
    done = _last_end(ev, first) + p["tma_latency_hbm_ns"]
    assert start == pytest.approx(done + p["cta_turnover_ns"], abs=1e-6)
    # the persistent s8 is one CTA: its producer loads the next work item's Q before the consumers finish this one
    ev8 = simulate("h200-s8-persistent", "h200", "4x16x1024x128", {})["_events"]
    items8 = sorted({e.work_item for e in ev8 if e.work_item is not None})
    assert _first_start(ev8, "producer", items8[1]) < _last_end(ev8, items8[0])


def test_q_loads_see_the_hbm_latency_and_kv_loads_the_mean_of_their_hits_and_fetches():
    from lapis.pipeline_sim.simulate import simulate
    p = load_profile("h200")
    assert p["tma_latency_hbm_ns"] > p["tma_latency_ns"]
    ev = sorted(simulate("h200-s1-serial", "h200", "1x1x1024x128", {})["_events"], key=lambda e: e.start_ns)
    ops = [e for e in ev if e.kind != "wait" and e.role != "tma"]
    # s1 waits for each load: the next op starts one latency after the load's bytes are in (nothing queues on
    # one SM): Q comes from HBM; the head's 16 Q tiles (s1's 64 rows) read its 8 K/V pairs (128 rows), each fetched
    # once (128 loads, 8 from HBM, l2_reuse): 1/16 of the K and V loads at HBM's latency, the rest at L2's
    q = next(i for i, e in enumerate(ops) if e.op == "TMA Q (waited)")
    assert ops[q + 1].start_ns - ops[q].end_ns == pytest.approx(p["tma_latency_hbm_ns"], rel=1e-9)
    kv = next(i for i, e in enumerate(ops) if e.op == "TMA K (waited)")
    mean = p["tma_latency_ns"] + (p["tma_latency_hbm_ns"] - p["tma_latency_ns"]) / 16
    assert ops[kv + 1].start_ns - ops[kv].end_ns == pytest.approx(mean, rel=1e-9)
    # V_j is the second copy on the load path: it moves right after K_j's bytes, while QK_j runs (load_kv issues
    # both; the warpgroup waits for V_j only before PV_j)
    v = next(e for e in ev if e.op == "TMA V" and e.k_index == ops[kv].k_index)
    qk = ops[kv + 1]
    assert qk.op == "wgmma QK" and v.start_ns == pytest.approx(ops[kv].end_ns, rel=1e-9)
    assert v.start_ns < qk.end_ns


def test_bad_work_factors_and_unmatched_completions_are_refused():
    env = simpy.Environment()
    for bad in (float("nan"), float("inf"), "1", None):
        with pytest.raises(ScheduleError, match="finite rate relative to alone"):
            Contention(env, softmax_under_gemm=1.0, softmax_pair=bad, pipe_under_softmax=1.0)
    c = Contention(env, softmax_under_gemm=0.5, softmax_pair=1.0, pipe_under_softmax=1.0)
    for bad in (float("nan"), float("inf"), "5"):
        with pytest.raises(ScheduleError, match="finite number of ns"):
            next(c.run("softmax", bad))
    with pytest.raises(ScheduleError, match="needs a wgmma group in flight"):
        c.gemm_done()


def test_a_profile_without_the_launch_measurement_is_named():
    from lapis.model.profile import Profile
    p = load_profile("h200")
    lacking = Profile(p.name, p.arch, {k: v for k, v in p.values.items() if k != "cta_turnover_ns"})
    dims = (1, 2, 1024, 128)
    prm, _ = ah.resolve_run("h200-s7-cond-rescale", p, dims, {})
    with pytest.raises(ScheduleError, match="the launch microbenchmark") as e:
        ah.AttentionCosts.of(lacking, dims, prm, ah.VARIANTS["h200-s7-cond-rescale"])
    assert "cta_turnover_ns" in str(e.value)


@pytest.mark.parametrize("key", ["bar_hop_cycles_reg", "bar_sync_present_cycles"])
def test_a_profile_without_the_bar_measurements_names_the_bar_capture(key):
    """s19's turn waits on a bar.sync written with a register id: its hand-over is bar_hop_cycles_reg, both values
    fitted from micro/h200-2026-12-02-bar, which the refit must list (not the contend and launch capture)."""
    from lapis.model.profile import Profile
    p = load_profile("h200")
    name = "h200-s9-tuned"
    flags = dict(ah.VARIANTS[name], gemm_turn=name)
    prm, _ = ah.resolve_run(name, p, (8, 16, 4096, 128),
                            dict(stages=2, q_slots=2, kernel_loop="s19", late_v=1, side_warps=1))
    lacking = Profile(p.name, p.arch, {k: v for k, v in p.values.items() if k != key})
    with pytest.raises(ScheduleError, match="bar.sync hand-over microbenchmarks") as e:
        ah.turn_handover(lacking, flags, prm)
    assert f"h200.{key} = None" in str(e.value)
    assert "fit with micro/h200-2026-12-02-bar in lapis/data/fit_manifest.json" in str(e.value)


def test_emulating_past_a_quarter_costs_the_softmax_not_the_pipe():
    p = load_profile("h200")
    s6 = ah.VARIANTS["h200-s6-exp2"]
    quarter, half = (ah.softmax_costs(p, s6, dict(emulate_frac=e, consumer_wgs=2), 64, 128, 128) for e in (0.25, 0.5))
    assert half["factors"]["pipe_under_softmax"] == quarter["factors"]["pipe_under_softmax"]
    assert half["softmax_ns"] > quarter["softmax_ns"]


def test_every_causal_schedule_costs_the_diagonal_mask():
    from lapis.pipeline_sim.simulate import simulate
    for name in ("h200-s1-serial", "h200-s3-two-consumers", "h200-s4-pingpong", "h200-s5-intra-overlap"):
        # one Q tile and one K/V tile: the only tile is the diagonal, the same work but for the mask
        r, c = (simulate(name, "h200", "1x1x128x128", dict(block_m=128 if "s1" not in name else 64, causal=k))
                for k in (0, 1))
        busy = [x["utilization"]["softmax"] * x["predicted_us"] for x in (r, c)]
        assert busy[1] > busy[0], name


def test_the_probe_captures_sources_are_the_committed_probe_build():
    # their provenance recorded a stale commit (the device copy's git metadata lagged): provenance-commit.json,
    # kept beside the capture, names the commit that added the clock probe as the first holding every source blob
    folder = Path(__file__).resolve().parents[2] / "lapis/data/captures/attention/h200-2026-11-30-probe"
    prov = json.loads((folder / "manifest.json").read_text())["provenance"]
    kept = json.loads((folder / "provenance-commit.json").read_text())
    assert (kept["recorded_commit"], kept["recorded_dirty"]) == (prov["commit"], prov["dirty"])
    assert kept["recorded_commit"].startswith("ecf7d88") and kept["first"].startswith("3c5e3fa")
    assert kept["commits_holding_every_source_blob"][0] == kept["first"]


def test_the_kept_probe_commit_is_what_the_git_history_says():
    """The same answer from the history itself (lapis.captures.provenance.match_capture walks every commit):
    what this checks is the git metadata, so it needs a checkout holding that history."""
    import shutil
    import subprocess

    from lapis.captures.provenance import match_capture
    repo = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(repo), "cat-file", "-e", "3c5e3fa^{commit}"],
                                                     capture_output=True).returncode != 0:
        pytest.skip("no git checkout holding the history (an sdist or a shallow clone): the history is what it checks")
    folder = repo / "lapis/data/captures/attention/h200-2026-11-30-probe"
    got = match_capture(str(folder))
    kept = json.loads((folder / "provenance-commit.json").read_text())
    assert got["recorded_commit"].startswith("ecf7d88") and got["first"].startswith("3c5e3fa")
    assert kept["commits_holding_every_source_blob"][0] == got["first"]