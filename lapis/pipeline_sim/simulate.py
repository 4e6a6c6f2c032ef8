"""`lapis simulate`: run a schedule on a GPU profile and summarize it (predicted time, bound, roles).

Schedules register here by name. So far (issue 5 is in progress): the warp-specialized Hopper GEMM.
"""

from __future__ import annotations

import time
from collections import defaultdict

from lapis.errors import LayoutError
from lapis.model import roofline
from lapis.model.profile import load_profile

SCHEDULES = {
    "h200-gemm-ws": ("warp-specialized GEMM: TMA producer warp, wgmma consumer warpgroups, K ring of full/empty "
                     "mbarriers (shape MxNxK)", "lapis.pipeline_sim.schedules.gemm_ws", "gemm"),
    "h200-s1-serial": ("one WG; TMA Q/K/V; wgmma QK^T; softmax in registers; wgmma PV; wait after every stage",
                       "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s2-ws-ring": ("a producer warp issues TMA; K/V ring with full/empty mbarriers",
                        "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s3-two-consumers": ("a producer + 2 consumer WGs, 64 rows each of one 128-row Q tile, sharing K/V",
                              "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s4-pingpong": ("named-barrier ping-pong: one WG's softmax overlaps the other's GEMMs",
                         "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s5-intra-overlap": ("inside a WG, QK^T of tile i+1 is issued before the softmax of tile i",
                              "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s6-exp2": ("scale folded into log2, ex2.approx.ftz; emulate_frac of exp2 on the FMA pipe",
                     "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s7-cond-rescale": ("O rescaled only when the row max moves more than threshold (log2 units)",
                             "lapis.pipeline_sim.schedules.attention_h200", "attention"),
    "h200-s8-persistent": ("persistent grid, one CTA per SM, static grid stride (launch overhead not modelled)",
                           "lapis.pipeline_sim.schedules.attention_h200", "attention"),
}


def parse_params(items: list[str]) -> dict:
    """['stages=3', 'consumer_wgs=1'] -> {'stages': 3, 'consumer_wgs': 1} (integers)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise LayoutError("a schedule parameter is key=value", repr(item), "e.g. --param stages=3")
        try:
            out[key] = int(value)
        except ValueError:
            raise LayoutError(f"parameter {key} must be an integer", repr(value), f"e.g. --param {key}=2") from None
    return out


def simulate(schedule: str, gpu: str, shape: str, params: dict | None = None, check_races: bool = False) -> dict:
    """Simulate `schedule` on profile `gpu` at `shape`; the JSON-able summary `lapis simulate --json` prints.

    check_races: also run the happens-before race check (lapis.pipeline_sim.races) over every K/V (or A+B)
    slot access; `races` is then a list of race descriptions (empty when clean), else None. It costs a graph
    node per barrier operation, so it suits the small shapes a protocol check needs.
    Raises LayoutError for an unknown schedule, parameter or shape, and deadlock.Deadlock on a hang."""
    import importlib
    if schedule not in SCHEDULES:
        raise LayoutError("unknown schedule", repr(schedule), "see lapis simulate --list")
    doc, module, kind = SCHEDULES[schedule]
    mod = importlib.import_module(module)
    unknown = set(params or {}) - set(mod.DEFAULTS)
    if unknown:
        raise LayoutError(f"{schedule} has no parameter(s) {sorted(unknown)}", sorted(unknown),
                          "use " + ", ".join(sorted(mod.DEFAULTS)))
    p = load_profile(gpu)
    t0 = time.time()
    if kind == "attention":
        r = mod.simulate(p, shape, params or {}, schedule, check_races)
        roof = roofline.attention(p, *mod.parse_shape(shape), causal=bool(r["params"].get("causal")))
    else:
        r = mod.simulate(p, shape, params or {}, check_races)
        roof = roofline.gemm(p, *mod.parse_shape(shape))
    wall = time.time() - t0
    # The representative SM's time is the kernel's time (the worst wave decides).
    ns = r["env_ns"]
    util = {u: busy / ns for u, busy in r["units"].items()}
    return dict(schedule=schedule, gpu=gpu, shape=shape, params=r["params"], predicted_us=ns / 1e3,
                tflops=r["flops"] / ns / 1e3, roofline_tflops=roof.tflops(), roofline_bound_by=roof.bound_by,
                bound_by=max(util, key=util.get), utilization=util, roles=role_summary(r["events"], ns),
                critical_path=critical_path(r["events"]), work=r["work"], fit=r["fit"],
                races=None if r["races"] is None else [str(x) for x in r["races"]],
                events=len(r["events"]), wall_s=wall, _events=r["events"])


def role_summary(events, total_ns: float) -> dict:
    """Per role: busy and wait fractions of the run, and what it waits on."""
    busy, wait, on = defaultdict(float), defaultdict(float), defaultdict(lambda: defaultdict(float))
    for e in events:
        d = e.end_ns - e.start_ns
        if e.kind == "wait":
            wait[e.role] += d
            on[e.role][e.op] += d
        elif e.role != "tma":
            busy[e.role] += d
    roles = sorted(set(busy) | set(wait))
    return {r: dict(busy=busy[r] / total_ns, wait=wait[r] / total_ns, waits_on=dict(on[r])) for r in roles}


def critical_path(events, top: int = 5) -> list:
    """The ops that take the most time in total (a first view of what bounds the run)."""
    total = defaultdict(float)
    for e in events:
        if e.kind != "wait":
            total[(e.role, e.op)] += e.end_ns - e.start_ns
    return [dict(role=r, op=o, total_ns=t) for (r, o), t in sorted(total.items(), key=lambda x: -x[1])[:top]]
