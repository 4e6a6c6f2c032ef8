"""Which sweep rows a real kernel can run: the Hopper attention kernels of lapis/gpu/kernels/attention_h200.cu.

The kernel is one template, attention<STAGES, BN, CONSUMER_WGS, WS, PP>, but a configuration is runnable only
where an entry point is instantiated and lapis.gpu.bench_attention can launch it (its VARIANTS). The template's
own limits (its static_asserts) are named when they are what stands in the way:
- BN is 64 or 128 (attention_plan.h plans K/V tiles for those two);
- CONSUMER_WGS is 1, or 2 with a producer warpgroup; block_m = 64 x CONSUMER_WGS (one wgmma m64 per warpgroup);
- the kernels have no masked tail and no causal mask; D = 128.
Schedules after s4 (s5..s9) have no kernel of their own: the nearest the .cu implements is s4's ping-pong, so
their rows name that kernel (the measured number is s4's mechanism at those parameters, not s8's).
"""

from __future__ import annotations

KERNEL_OF_SCHEDULE = {"h200-s1-serial": "s1", "h200-s2-ws-ring": "s2", "h200-s3-two-consumers": "s3",
                      **{f"h200-s{i}-{n}": "s4" for i, n in ((4, "pingpong"), (5, "intra-overlap"), (6, "exp2"),
                                                            (7, "cond-rescale"), (8, "persistent"), (9, "tuned"))}}
TEMPLATE_BLOCK_N = (64, 128)  # attention_h200.cu KV<BN>: static_assert(BN == 64 || BN == 128)
TEMPLATE_CONSUMER_WGS = (1, 2)  # Config: static_assert(CONSUMER_WGS == 1 || (CONSUMER_WGS == 2 && WS))


def runnable(schedule: str, params: dict, shape: str) -> tuple[bool, str]:
    """(True, kernel name) or (False, why not). params: the resolved parameters of a fitting row (the
    simulator's `params`: block_m, block_n, stages, consumer_wgs, causal, ...)."""
    from lapis.gpu import bench_attention as bench
    name = KERNEL_OF_SCHEDULE.get(schedule)
    if name is None:
        return False, f"no kernel for {schedule} (lapis/gpu/kernels/attention_h200.cu: s1..s4 only)"
    if params.get("causal"):
        return False, "the kernels are non-causal"
    v = bench.VARIANTS[name]
    want = {k: params.get(k) for k in ("stages", "block_n", "consumer_wgs", "block_m")}
    if want["block_n"] not in TEMPLATE_BLOCK_N:
        return False, f"block_n {want['block_n']}: attention_plan.h plans K/V tiles for block_n 64 and 128 only"
    if want["consumer_wgs"] not in TEMPLATE_CONSUMER_WGS:
        return False, f"consumer_wgs {want['consumer_wgs']}: the kernel template takes 1 or 2 consumer warpgroups"
    have = {k: v[k] for k in want}
    if want != have:
        return False, (f"{bench.kernel_name(dict(v, **want))} is not instantiated (attention_h200.cu instantiates "
                       f"{bench.kernel_name(v)} for {schedule})")
    split = {k: v[k] for k in ("regs_producer", "regs_consumer") if k in v}
    if any(params.get(k) != x for k, x in split.items()):
        return False, (f"{bench.kernel_name(v)} fixes its setmaxnreg split at {split['regs_producer']}/"
                       f"{split['regs_consumer']}")
    try:
        bench.check_shape(v, shape)
    except ValueError as exc:  # LayoutError: D or L the kernel cannot take
        return False, str(exc)
    return True, bench.kernel_name(v)
