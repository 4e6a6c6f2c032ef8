"""Which sweep rows a real kernel can run: the Hopper attention kernels of lapis/gpu/kernels/attention_h200.cu.

The kernel is one template, attention<STAGES, BN, CONSUMER_WGS, WS, Features<...>>, but a configuration is runnable
only where an entry point is instantiated: a variant of the catalog (lapis/catalog/attention.py), whose `sweep` names
the schedules whose rows may run on it (s8's persistent loop at 3 stages is the s9 build). A row is runnable when
one of them has the row's stages, block_n, consumer_wgs and block_m (and, where the variant fixes them,
emulate_frac and threshold; its GEMM turn's late_v, cross_item and kernel_loop, the schedule's defaults where the
variant names none) and the work order the kernels take: one Q tile per CTA (q_tiles_per_cta 1) and items
dealt grid-stride (persistent_order grid_stride; the non-causal s8/s9 loop). The kernel's setmaxnreg split is its
own (s3-s7: 24/240, s8, s9: 40/232): a row whose split differs is still run, and its kernel column says
"NAME (kernel's setmaxnreg split P/C)" so a measured time is never read as the row's split (kernel_of gives NAME
back). The template's own limits (its static_asserts) are named when they are what stands in the way:
- BN is 64 or 128 (attention_plan.h plans K/V tiles for those two);
- CONSUMER_WGS is 1, or 2 with a producer warpgroup; block_m = 64 x CONSUMER_WGS (one wgmma m64 per warpgroup);
- the kernels have no masked tail; D = 128; causal rows are not validated (`lapis bench attention --causal` times
  s9's causal build).
"""

from __future__ import annotations

from lapis.catalog.attention import VARIANTS, kernel_name, sim_params
from lapis.errors import ScheduleError
from lapis.gpu.bench_attention import check_shape

TEMPLATE_BLOCK_N = (64, 128)  # attention_h200.cu KV<BN>: static_assert(BN == 64 || BN == 128)
TEMPLATE_CONSUMER_WGS = (1, 2)  # Config: static_assert(CONSUMER_WGS == 1 || (CONSUMER_WGS == 2 && WS))
GEOMETRY = ("stages", "block_n", "consumer_wgs", "block_m")
FIXED = ("emulate_frac", "threshold")  # compared only where the variant fixes them
WORK_ORDER = dict(persistent_order="grid_stride", q_tiles_per_cta=1)  # what every kernel's loop does
SPLIT = ("regs_producer", "regs_consumer")  # setmaxnreg budgets, where the kernel sets them
TURN = dict(late_v=0, cross_item=0, kernel_loop="own")  # the GEMM turn's order and SASS, where a kernel fixes others


def kernel_of(text: str) -> str:
    """A runnable row's kernel column without the split note: the kernel's name."""
    return text.split(" (", 1)[0]


def kernels_of(schedule: str) -> tuple[str, ...]:
    """The variants a row of `schedule` may run on (their `sweep` names it): the schedule's own first."""
    names = [n for n, v in VARIANTS.items() if schedule in v["sweep"]]
    return tuple(sorted(names, key=lambda n: VARIANTS[n]["schedule"] != schedule))


def runnable(schedule: str, params: dict, shape: str) -> tuple[bool, str]:
    """(True, kernel name) or (False, why not). params: the resolved parameters of a fitting row (the
    simulator's `params`: block_m, block_n, stages, consumer_wgs, causal, ...)."""
    names = kernels_of(schedule)
    if not names:
        return False, f"no kernel for {schedule} (lapis/gpu/kernels/attention_h200.cu: the h200 s1..s9 schedules)"
    if params.get("causal"):
        return False, "causal rows are not validated here (lapis bench attention --causal times s9's causal build)"
    for k, fixed in WORK_ORDER.items():
        if params.get(k, fixed) != fixed:
            return False, f"the kernels fix {k} {fixed} (got {params[k]})"
    want = {k: params.get(k) for k in GEOMETRY}
    if want["block_n"] not in TEMPLATE_BLOCK_N:
        return False, f"block_n {want['block_n']}: attention_plan.h plans K/V tiles for block_n 64 and 128 only"
    if want["consumer_wgs"] not in TEMPLATE_CONSUMER_WGS:
        return False, f"consumer_wgs {want['consumer_wgs']}: the kernel template takes 1 or 2 consumer warpgroups"
    turn = {}  # a kernel of the row's geometry whose GEMM turn differs: its name -> the turn it has
    for name in names:
        v, kp = VARIANTS[name], sim_params(VARIANTS[name])  # kp: the parameters the kernel fixes
        same_turn = all(params.get(k, d) == kp.get(k, d) for k, d in TURN.items())
        if {k: kp[k] for k in GEOMETRY} == want and not same_turn:
            turn[kernel_name(v)] = {k: kp.get(k, d) for k, d in TURN.items()}
        if {k: kp[k] for k in GEOMETRY} == want and all(params.get(k) == kp[k] for k in FIXED if k in kp) \
                and same_turn:
            try:
                check_shape(v, shape)
            except ScheduleError as exc:  # D or L the kernel cannot take
                return False, str(exc)
            split = [kp.get(k) for k in SPLIT]
            note = (f" (kernel's setmaxnreg split {split[0]}/{split[1]})"
                    if None not in split and split != [params.get(k) for k in SPLIT] else "")
            return True, kernel_name(v) + note
    if turn:
        got = {k: params.get(k, d) for k, d in TURN.items()}
        return False, "; ".join(f"{n} takes GEMM turns with {t}, the row {got}" for n, t in turn.items())
    have = ", ".join(kernel_name(VARIANTS[n]) for n in names)
    return False, (f"{kernel_name(dict(VARIANTS[names[0]], **want))} is not instantiated "
                   f"(attention_h200.cu instantiates {have} for {schedule})")
