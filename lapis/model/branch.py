"""The two branch constants of lapis/data/smsp_pending.json (smsp.BRANCH_KEYS), derived from single-class streams.

- taken_branch: cycles a taken BRA delays its warp beyond its stall count. FFMA on one dependent chain alone
  (density.ffma_c1.alone, kernels/micro_beside_v2.cu) runs its loop, one taken branch per iteration, in more cycles
  than its control bits give: the difference, in whole cycles (smsp.simulate steps whole cycles).
- branch_hold: cycles after a taken branch's redirect in which the tensor pipe keeps the SMSP while a wgmma is in
  flight. FFMA on eight independent chains (beside.ffma.ss, kernels/micro_beside_v1.cu) always has an instruction
  ready, and back-to-back FMA issue wins every contested cycle (tensor_share.STREAK_PIPES), so the wgmma beside it
  advances only at the loop's taken branch: the hold is the whole number of cycles, 0 to MAX_HOLD, with which
  tensor_share.run gives the wgmma follower's measured cycles per unit.

Nothing else is read. `python -m lapis.model.branch` prints both beside the file's values (nvcc and cuobjdump).
"""

from __future__ import annotations

import dataclasses
import statistics

from lapis.errors import CaptureError
from lapis.model import contend, instruction_mix, sass, smsp, tensor_share

MAX_HOLD = 64  # cycles: a hold past one wgmma m64n128k16's time on the pipe is not a branch's
BESIDE_SOURCE = "micro_beside_v1.cu"
DENSITY_SOURCE = "micro_beside_v2.cu"
UNIT_WGMMAS = 8  # wgmma m64n128k16 per ss unit (micro_beside_v1.cu)


def class_loop(instrs: list[sass.Instruction], opcode: str) -> list[sass.Instruction]:
    """The leader's class loop of a micro_beside kernel: the first loop with `opcode` and neither HGMMA nor the
    follower's flag read (LDS). CaptureError when there is none."""
    for lp in sass.loops(instrs):
        body = instrs[lp.head:lp.tail + 1]
        ops = [i.opcode for i in body]
        if opcode in ops and "HGMMA" not in ops and "LDS" not in ops:
            return body
    raise CaptureError(f"a micro_beside class kernel has a loop of {opcode} without HGMMA or LDS",
                       f"{len(instrs)} instructions", "check kernels/micro_beside_v1.cu and _v2.cu")


def taken_branch(body: list[sass.Instruction], measured_per_unit: float, units: float,
                 consts: smsp.Constants) -> float:
    """Whole cycles a taken branch adds: (measured cycles per iteration - smsp.simulate's without it) over the
    iteration's taken branches. body: one warp's loop; measured_per_unit: cycles per unit alone; units: units per
    iteration. CaptureError when the body has no taken branch or the result is below zero."""
    n = sum(smsp.taken_branches(body))
    base = smsp.simulate(body, 1, dataclasses.replace(consts, taken_branch=0.0))
    extra = round((measured_per_unit * units - base) / n) if n else -1
    if extra < 0:
        raise CaptureError("a loop alone takes at least its control bits' cycles, with a taken branch per iteration",
                           f"{n} taken branches, {measured_per_unit * units:.1f} cycles measured, {base:.1f} simulated",
                           "check the capture and the kernel's SASS")
    return float(extra)


def branch_hold(body: list[sass.Instruction], measured_tensor: float, consts: smsp.Constants,
                share: tensor_share.Share) -> float:
    """The hold, 0 to MAX_HOLD whole cycles, whose tensor_share.run of `body` (one warp) beside a unit of
    UNIT_WGMMAS wgmmas gives the tensor pipe's cycles per unit nearest measured_tensor."""
    slots = contend.gemm_cycles(UNIT_WGMMAS)

    def miss(h: int) -> float:
        return abs(tensor_share.run(body, dataclasses.replace(consts, branch_hold=float(h)), share, slots, 0.0)[1]
                   - measured_tensor)
    return float(min(range(MAX_HOLD + 1), key=miss))


def derive(compile_=instruction_mix.compiled) -> dict[str, float]:
    """{taken_branch, branch_hold} from the captures tensor_share reads (module docstring), with the pipes capture's
    constants (smsp.Constants.from_pipes_capture) and tensor_share.Share.from_capture's shares."""
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    found = {m["name"]: m for m in tensor_share._measurements(tensor_share.DENSITY_CAPTURE) if m.get("status") == "ok"}
    if "density.ffma_c1.alone" not in found:
        raise CaptureError("the density capture holds density.ffma_c1.alone", str(tensor_share.DENSITY_CAPTURE),
                           "restore the capture from git")
    c1 = class_loop(compile_(instruction_mix.KERNELS / DENSITY_SOURCE)["micro_density_ffma_c1"], "FFMA")
    units = sum(i.opcode == "FFMA" for i in c1) / 8  # one chain: 8 FFMA per unit (micro_beside_v1.cu UNROLL)
    tb = taken_branch(c1, 1.0 / found["density.ffma_c1.alone"]["value"]["median"], units, consts)
    beside = {m["name"]: m for m in tensor_share._measurements(tensor_share.BESIDE_CAPTURE)
              if m.get("status") == "ok"}
    dense = class_loop(compile_(instruction_mix.KERNELS / BESIDE_SOURCE)["micro_beside_ffma"], "FFMA")
    follower = tensor_share._follower(beside["beside.ffma.ss"], "beside.ffma.ss", tensor_share.BESIDE_CAPTURE)
    hold = branch_hold(dense, 1.0 / statistics.median(follower), dataclasses.replace(consts, taken_branch=tb),
                       tensor_share.Share.from_capture())
    return {"taken_branch": tb, "branch_hold": hold}


if __name__ == "__main__":
    filed = smsp.Constants.load()
    for k, v in derive().items():
        print(f"{k}: derived {v:g} cycles, {smsp.PENDING.name} {getattr(filed, k):g}")
