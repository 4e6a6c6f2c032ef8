"""No built-in schedule predicts more than its roofline (lapis.model.roofline), at the shapes most likely to
expose a missing bound: the three FA4 shapes, tiny L (Q/O traffic held to HBM), one head, and a full grid."""

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from lapis.errors import ScheduleError
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.simulate import SCHEDULES, default_gpu, simulate
from lapis.report.schedules import FA4_SHAPES

SMALL = ("64x64x128x128", "1x1x128x128", "1x1x4096x128", "16x16x2048x128")
# sm120 schedules simulate every warp of every CTA on the busiest SM, ~10x slower: the same L and D with fewer
# heads (the roofline's ratio to the simulation depends on L, D and how full the SMs are, which these keep)
SM120_SHAPES = {"8x16x4096x128": "1x2x4096x128", "4x16x8192x128": "1x1x8192x128",
                "2x16x16384x128": "1x1x16384x128", "16x16x2048x128": "2x16x2048x128"}
CAUSAL_SHAPES = SMALL[:3]  # causal reads the same bytes for half the FLOPs: where an HBM bound could slip
GEMM_SHAPES = ("128x128x128", "4096x4096x4096", "8192x8192x1024")


def _cases():
    for name, s in SCHEDULES.items():
        if s.shape == "gemm":
            yield from ((name, shape, {}) for shape in GEMM_SHAPES)
            continue
        causal = "causal" in s.defaults
        for shape in SMALL + (() if name.startswith(("h200", "b200")) else FA4_SHAPES):
            shape = SM120_SHAPES.get(shape, shape) if name.startswith("sm120") else shape
            yield name, shape, {}
            if causal and shape in CAUSAL_SHAPES:
                yield name, shape, {"causal": 1}


def _beaten(case: tuple) -> tuple | None:
    """(name, shape, params, TFLOP/s, roofline TFLOP/s) where the case's prediction beats its roofline, else None."""
    name, shape, prm = case
    try:
        r = simulate(name, default_gpu(name), shape, prm)
    except ScheduleError:  # a shape the schedule's tiles do not divide
        return None
    if r["beats_roofline"] or r["tflops"] > r["roofline_tflops"]:
        return name, shape, prm, r["tflops"], r["roofline_tflops"]
    return None


def test_no_schedule_beats_its_roofline():
    # the cases are independent simulations: one worker process per core (pytest itself uses one)
    with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=multiprocessing.get_context("fork")) as pool:
        beaten = [b for b in pool.map(_beaten, list(_cases())) if b is not None]
    assert not beaten


@pytest.mark.parametrize("shape", FA4_SHAPES)
def test_no_h200_or_b200_schedule_beats_its_roofline_at_the_fa4_shapes(shape):
    # the committed prediction cache holds these (re-simulated here when stale, so the check is current)
    cache = predictions.load()
    for name in SCHEDULES:
        if name.startswith(("h200-s", "b200-")):
            r, _ = predictions.predict(name, default_gpu(name), shape, {}, cache)
            assert r["tflops"] <= r["roofline_tflops"], name


def test_the_q_read_keeps_sm120_under_hbm_at_tiny_l():
    # L = 128: every byte is read once, so the HBM roofline binds; m03/m04 once predicted 126-127 TFLOP/s here
    for name in ("sm120-m03-c-to-a-repack", "sm120-m04-q-hoist"):
        r = simulate(name, "rtx5090", "64x64x128x128")
        assert r["roofline_bound_by"] == "hbm" and r["tflops"] < r["roofline_tflops"]
        assert any(e.op == "Q from HBM (waited)" for e in r["_events"])
