"""A class stream at a controlled issue density beside wgmma (campaign version 7, kernels/micro_beside_v2.cu),
predicted from the single-instruction constants and the dense streams' shares (lapis.model.tensor_share).

Each class kernel's leader loop (the innermost loop with neither HGMMA nor the follower's flag read, LDS) runs CH
dependent chains of one class; the compiler unrolls it over several units, counted by the class's opcode
(mc.DENSITY_UNROLL x CH per unit). Predictions in cycles per unit:
- density.wgmma.ss: 8 wgmma m64n128k16 at the wgmma rate (wait_group 1 keeps the pipe fed: no completion gap);
- density.<class>_c<CH>.alone: lapis.model.smsp.simulate of the loop, one warp per SMSP;
- density.<class>_c<CH>.ss and .ss_tensor: the class's and the tensor pipe's cycles per unit from one
  tensor_share.run of the loop beside the wgmma job.
The one-chain streams alone and beside wgmma (CONSTANT_ROWS) are lapis.model.tensor_share's isolated shares: rows()
leaves them out, so every row it gives is a prediction.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from lapis.data import BLIND, CAPTURES
from lapis.errors import CaptureError
from lapis.model import micro_campaign as mc
from lapis.model import branch, smsp, tensor_share

SOURCE = "micro_beside_v2.cu"
CAPTURE = CAPTURES / "micro" / "h200-2026-12-03-density" / "micro" / "results.json"
BLIND_FILE = BLIND / "micro" / "density.json"  # committed before micro_beside_v2.cu first ran
SWEEP_SOURCE = "micro_beside_v3.cu"  # campaign version 9: the same states at more chain counts
SWEEP_CAPTURE = CAPTURES / "micro" / "h200-2026-12-04-sweep" / "micro" / "results.json"
SWEEP_BLIND_FILE = BLIND / "micro" / "sweep.json"  # committed before micro_beside_v3.cu first ran
OPCODE = {"ffma": "FFMA", "fmnmx": "FMNMX"}  # each class's SASS opcode (micro_beside_v1.cu's steps)
WGMMAS = 8  # wgmma m64n128k16 per ss unit
CONSTANT_ROWS = frozenset(f"density.{c}_c1.{s}" for c in tensor_share.SPARSE_CLASSES.values()  # the model reads them
                          for s in ("alone", "ss"))


def class_body(instrs: list, cls: str, chains: int) -> tuple[list, float]:
    """(the leader's class loop (lapis.model.branch.class_loop), class units per iteration of it) of a
    micro_beside_v2.cu or _v3.cu class kernel. CaptureError when the kernel has no loop with the class's opcode and
    neither HGMMA nor LDS, or its opcode count is not whole units."""
    body = branch.class_loop(instrs, OPCODE[cls])
    n = sum(i.opcode == OPCODE[cls] for i in body)
    per_unit = mc.DENSITY_UNROLL * chains
    if n % per_unit:
        raise CaptureError(f"a density loop holds whole units of {per_unit} {OPCODE[cls]}",
                           f"{n} in the loop at {body[0].address:#x}", "check kernels/micro_beside_v2.cu and _v3.cu")
    return body, n / per_unit


def predictions(functions: dict, consts: smsp.Constants, share: tensor_share.Share,
                gemm_cycles: float, kind: str = "density") -> dict[str, float]:
    """{measurement name (and <name>_tensor for the ss rows): predicted cycles per unit} for every measurement of
    campaign version 7 (kind "density": kernels micro_density_*, mc.DENSITY_CLASSES) or 9 (kind "sweep": kernels
    micro_sweep_*, mc.SWEEP_CLASSES), named <kind>.wgmma.ss and <kind>.<class>_c<CH>.<alone|ss> (module
    docstring); functions: the compiled micro_beside_v2.cu or _v3.cu ({kernel: instructions}); gemm_cycles: one ss
    unit's tensor-pipe cycles."""
    classes = {"density": mc.DENSITY_CLASSES, "sweep": mc.SWEEP_CLASSES}[kind]
    out = {f"{kind}.wgmma.ss": gemm_cycles}
    for cls, counts in classes.items():
        for ch in counts:
            body, units = class_body(functions[f"micro_{kind}_{cls}_c{ch}"], cls, ch)
            name = f"{kind}.{cls}_c{ch}"
            out[f"{name}.alone"] = smsp.simulate(body, 1, consts) / units
            soft, tensor = tensor_share.run(body, consts, share, gemm_cycles, 0.0)
            out[f"{name}.ss"], out[f"{name}.ss_tensor"] = soft / units, tensor
    return out


def rows(measured: dict, blind: dict[str, float], predicted: dict[str, float], capture: Path) -> list[dict]:
    """One row per version-7 measurement in `measured` ({name: ok record}) but CONSTANT_ROWS, and for each ss
    measurement a second row, <name>_tensor, for the wgmma follower: predicted and blind-predicted cycles per unit
    against the measured 1 / value.median (the follower's: 1 / the median of raw.follower_rate). CaptureError
    naming the capture and the measurement for a follower_rate that is not a non-empty list of finite numbers above
    zero (_follower)."""
    where = str(capture.relative_to(CAPTURES)) if capture.is_relative_to(CAPTURES) else str(capture)
    out = []
    for name, m in measured.items():
        if name in CONSTANT_ROWS:
            continue
        beside = bool(m["params"].get("follow"))
        state = "beside wgmma in flight" if beside else "alone"
        per = {name: 1.0 / m["value"]["median"]}
        if beside:
            per[f"{name}_tensor"] = 1.0 / statistics.median(_follower(m, name, capture))
        for n, cycles in per.items():
            out.append(dict(name=n, capture=where, state=state if n == name else "wgmma beside the class stream",
                            predicted=predicted[n], measured=cycles, error_pct=100.0 * (predicted[n] / cycles - 1),
                            blind_predicted=blind[n]))
    return out


def _follower(m: dict, name: str, capture: Path) -> list[float]:
    """m's raw.follower_rate (the wgmma follower's units per clk, one per repeat), or CaptureError naming the capture
    and the measurement unless raw is an object and follower_rate a non-empty list of finite numbers above zero whose
    median's inverse (the row's cycles) is finite."""
    raw = m.get("raw")
    rates = raw.get("follower_rate") if isinstance(raw, dict) else None
    if (not isinstance(rates, list) or not rates or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) and r > 0 for r in rates)
            or not math.isfinite(1.0 / statistics.median(rates))):
        got = f"follower_rate {rates!r}" if isinstance(raw, dict) else f"raw {raw!r}"
        raise CaptureError("a density measurement beside wgmma records the follower's units per clk in each repeat "
                           "(raw.follower_rate, finite numbers > 0 whose median has a finite inverse)",
                           f"{capture}: {name} {got}",
                           "restore the capture from git (captures are never edited by hand)")
    return rates
