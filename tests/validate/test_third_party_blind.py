"""The committed blind predictions for kernels lapis did not write (lapis/catalog/third_party.py): FA2 (torch SDPA's
flash backend), FA4's sm90 forward and cuDNN's sm90 flash fprop. The case lists are written here from the kernels'
sources and launches; the files must hold them and reproduce from the code (the cheap cases re-simulated)."""

import pytest

from lapis.pipeline_sim.predictions import model_hash
from lapis.pipeline_sim.simulate import simulate
from lapis.validate.blind import SETS, cases, load

SHORT = ("16x16x2048", "32x16x1024")
FA4_SHAPES = ("8x16x4096", "4x16x8192", "2x16x16384")
FA2 = {64: dict(block_m=128, block_n=128, warps=4), 128: dict(block_m=128, block_n=64, warps=4),
       256: dict(block_m=64, block_n=64, warps=4)}
FA4 = {64: dict(block_m=192, block_n=128, stages=2, consumer_wgs=3, regs_producer=32, regs_consumer=160),
       128: dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240),
       256: dict(block_m=128, block_n=80, stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240)}
CUDNN = dict(block_m=128, block_n=128, stages=3, consumer_wgs=2, regs_producer=24, regs_consumer=240)


def case(variant, schedule, shape, params, causal=False):
    return dict(variant=variant, **(dict(causal=True) if causal else {}), schedule=schedule, gpu="h200", shape=shape,
                params=dict(params, **(dict(causal=1) if causal else {})))


FA2_CASES = ([case("flash2", "h200-flash2", f"{s}x128", FA2[128], True) for s in FA4_SHAPES + SHORT]
             + [case("flash2", "h200-flash2", f"{s}x128", FA2[128]) for s in SHORT]
             + [case("flash2", "h200-flash2", f"{s}x{d}", FA2[d]) for d in (64, 256) for s in FA4_SHAPES])
FA4_CASES = ([case("fa4_sm90", "h200-fa4-sm90", f"{s}x128", FA4[128], c) for c in (False, True)
              for s in FA4_SHAPES + SHORT]
             + [case("fa4_sm90", "h200-fa4-sm90", f"{s}x{d}", FA4[d]) for d in (64, 256) for s in FA4_SHAPES])
CUDNN_CASES = [case("cudnn_fprop", "h200-cudnn-fprop", f"{s}x128", CUDNN, c) for c in (False, True)
               for s in FA4_SHAPES + SHORT]


@pytest.mark.parametrize("name, expected", [("flash2_h200", FA2_CASES), ("fa4_sm90_h200", FA4_CASES),
                                            ("cudnn_h200", CUDNN_CASES)])
def test_third_party_sets_hold_the_kernels_cases_and_the_files_hold_them(name, expected):
    assert name in SETS and cases(name) == expected
    entries = load(name)["entries"]
    keys = ("variant", "causal", "schedule", "gpu", "shape", "params")
    assert [{k: e[k] for k in keys if k in e} for e in entries] == expected
    for e in entries:
        b, h, seq, d = map(int, e["shape"].split("x"))
        flop = 4 * b * h * seq * seq * d / (2 if e.get("causal") else 1)
        assert e["tflops"] == pytest.approx(flop / e["predicted_us"] / 1e6, abs=0.1)
        assert len(e["profile_hash"]) == 16 and len(e["model_hash"]) == 16


# defaults changed after the blind files were written, as they were then
WRITTEN_UNDER = {("flash2_h200", False): dict(loop_smsp=0), ("flash2_h200", True): dict(loop_smsp=0),
                 ("cudnn_h200", True): dict(persistent_order="heavy_first")}
# sets whose cost model changed by design after they were written, and by how much at most (relative)
# (set, causal) -> bound
REMODELLED = {("fa4_sm90_h200", False): 0.03,  # FA4 costed from its own loop's SASS: 32x16x1024x128 347.2 -> 341.1 µs
              ("fa4_sm90_h200", True): 0.03,
              # the L2 model (lapis.pipeline_sim.l2_reuse): heavy_first at 512 heads fetches nearly every K/V load
              # from HBM (reuse 1.01), so the causal entry made under it went 287.25 -> 369.1 µs
              ("cudnn_h200", True): 0.29,
              # a taken branch's redirect and the tensor pipe's hold after it (lapis.model.branch), in the
              # cycle simulation cuDNN's softmax is costed with: 32x16x1024x128 458.9 -> 454.0 µs
              ("cudnn_h200", False): 0.02}


@pytest.mark.parametrize("name, shape", [("flash2_h200", "32x16x1024x128"), ("fa4_sm90_h200", "32x16x1024x128"),
                                         ("cudnn_h200", "32x16x1024x128")])
def test_the_cheap_blind_entries_reproduce_from_the_code(name, shape):
    """Exactly while the model is the one that made them (model_hash); once the model has changed (the persistent
    schedules' Q slots moved cuDNN's 32x16x1024 prediction from 458.925 to 458.43 µs), within 1%, with the defaults
    the files were made under where a default has changed since (WRITTEN_UNDER: FA2's count model, cuDNN's causal
    heavy_first order; the compiled loop and the measured grid_stride order came after the blind files), or within
    REMODELLED's bound where the set's cost model has changed since by design."""
    for e in load(name)["entries"]:
        if e["shape"] == shape:
            case = (name, bool(e.get("causal")))
            params = dict(e["params"], **WRITTEN_UNDER.get(case, {}))
            now = simulate(e["schedule"], "h200", shape, params)["predicted_us"]
            tolerance = dict(abs=5e-4) if e["model_hash"] == model_hash() else dict(rel=REMODELLED.get(case, 0.01))
            assert now == pytest.approx(e["predicted_us"], **tolerance)
