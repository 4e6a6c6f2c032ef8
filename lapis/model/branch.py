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
import sys

from lapis.errors import CaptureError, LapisError
from lapis.model import contend, instruction_mix, sass, smsp, tensor_share
from lapis.model import micro_campaign as mc

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
    iteration. CaptureError when the body has no taken branch, or the result is below zero or above
    smsp.LATENCY_MAX."""
    n = sum(smsp.taken_branches(body))
    base = smsp.simulate(body, 1, dataclasses.replace(consts, taken_branch=0.0))
    extra = round((measured_per_unit * units - base) / n) if n else -1
    if not 0 <= extra <= smsp.LATENCY_MAX:
        raise CaptureError(f"a loop alone takes its control bits' cycles and 0 to {smsp.LATENCY_MAX:g} more a taken "
                           "branch", f"{n} taken branches, {measured_per_unit * units:.1f} cycles measured, "
                           f"{base:.1f} simulated", "check the capture and the kernel's SASS")
    return float(extra)


def branch_hold(body: list[sass.Instruction], measured_tensor: float, consts: smsp.Constants,
                share: tensor_share.Share) -> float:
    """The hold, 0 to MAX_HOLD whole cycles, whose tensor_share.run of `body` (one warp) beside a unit of
    UNIT_WGMMAS wgmmas gives the tensor pipe's cycles per unit nearest measured_tensor. CaptureError when the
    nearest is an end of that range (the measurement lies outside what a hold explains)."""
    slots = contend.gemm_cycles(UNIT_WGMMAS)

    def miss(h: int) -> float:
        return abs(tensor_share.run(body, dataclasses.replace(consts, branch_hold=float(h)), share, slots, 0.0)[1]
                   - measured_tensor)
    best = min(range(MAX_HOLD + 1), key=miss)
    if best in (0, MAX_HOLD):
        raise CaptureError(f"a branch hold that gives the measured wgmma follower lies inside 0 to {MAX_HOLD} cycles",
                           f"{measured_tensor:.1f} cycles per unit measured: best hold {best}",
                           "check beside.ffma.ss in the beside capture")
    return float(best)


def _ok(path, names: tuple[str, ...]) -> dict:
    """{name: record} of the capture's ok measurements; CaptureError naming the file when one of `names` is not
    there with status ok."""
    found = {m["name"]: m for m in tensor_share._measurements(path) if m.get("status") == "ok"}
    missing = [n for n in names if n not in found]
    if missing:
        raise CaptureError("the captures the branch constants come from hold their measurement with status ok",
                           f"{path}: no {', '.join(missing)}", "restore the capture from git")
    return found


def derive(compile_=instruction_mix.compiled) -> dict[str, float]:
    """{taken_branch, branch_hold} from the captures tensor_share reads (module docstring), with the pipes capture's
    constants (smsp.Constants.from_pipes_capture) and tensor_share.Share.from_capture's shares. CaptureError for a
    measurement that is missing, not a finite number above zero, or gives a constant out of range."""
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    name, path = "density.ffma_c1.alone", tensor_share.DENSITY_CAPTURE  # both captures read before any compile
    alone = tensor_share._positive(_ok(path, (name,))[name].get("value"), name, path)
    name, path = "beside.ffma.ss", tensor_share.BESIDE_CAPTURE
    follower = statistics.median(tensor_share._follower(_ok(path, (name,))[name], name, path))
    if not follower > 0:
        raise CaptureError("the wgmma follower beside the dense FFMA stream ran (units per clock above zero)",
                           f"{path}: {name} follower_rate median {follower!r}", "restore the capture from git")
    c1 = class_loop(compile_(instruction_mix.KERNELS / DENSITY_SOURCE)["micro_density_ffma_c1"], "FFMA")
    units = sum(i.opcode == "FFMA" for i in c1) / mc.DENSITY_UNROLL  # one chain: DENSITY_UNROLL FFMA a unit
    tb = taken_branch(c1, 1.0 / alone, units, consts)
    dense = class_loop(compile_(instruction_mix.KERNELS / BESIDE_SOURCE)["micro_beside_ffma"], "FFMA")
    hold = branch_hold(dense, 1.0 / follower, dataclasses.replace(consts, taken_branch=tb),
                       tensor_share.Share.from_capture())
    return {"taken_branch": tb, "branch_hold": hold}


def main() -> int:
    """Print the derived constants beside the file's; exit 2 with the error's one line for a LapisError."""
    try:
        filed, derived = smsp.Constants.load(), derive()
    except LapisError as e:
        print(f"lapis.model.branch: {e}", file=sys.stderr)
        return 2
    for k, v in derived.items():
        print(f"{k}: derived {v:g} cycles, {smsp.PENDING.name} {getattr(filed, k):g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
