"""An SM sub-partition (SMSP) issue model: cycles per loop iteration from the loop body's SASS.

One SMSP holds `warps` resident warps and issues at most `issue_per_clk` warp-instructions per clock to pipes
of given throughput (warp-instructions per clock) and latency (cycles until a dependent instruction may issue).
For a loop body run by every warp, the cycles the SMSP spends per warp-iteration are the largest of

    issue     N / issue_per_clk                       (N: instructions of one iteration)
    pipe p    n_p / rate_p                            (n_p: its instructions on pipe p; lapis.model.sass.PIPE_OF)
    latency   T_warp / warps                          (T_warp: one warp alone, in-order issue, per iteration)

T_warp is the steady-state period of one warp issuing the body in order: each instruction issues one cycle after
the previous at the earliest and not before its source registers are ready (producer issue + latency of the
producer's pipe), over several iterations so loop-carried chains count. It is at least the RAW critical path x
latency. Combination: the plain max (no smoothing, nothing fitted); `bound` names the largest term.

Constants (Constants.load): the pipes capture once it exists; until then PENDING (lapis/data/smsp_pending.json),
a file marked pending whose rates come partly from lapis micro captures and partly from published figures.

    python -m lapis.model.smsp --micro     # predicted vs measured cycles of the softmax microbenchmarks

--micro compiles lapis/gpu/kernels/micro_softmax_v1.cu for sm_90a (nvcc, cuobjdump), takes each kernel's
outer loop, and compares with the softmax.* measurements of MICRO_CAPTURE: tiles/clk/SM R gives 1 / R SMSP cycles
per warp-iteration (each tile is one iteration of one warp on each of the 4 SMSPs). Nothing is fitted to them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lapis.data import CAPTURES, DATA
from lapis.errors import CaptureError
from lapis.model import sass

PENDING = DATA / "smsp_pending.json"
MICRO_CAPTURE = CAPTURES / "micro" / "h200-2026-11-30-v3" / "micro" / "results.json"
SOFTMAX_SOURCE = DATA.parent / "gpu" / "kernels" / "micro_softmax_v1.cu"
FLAVOURS = ("exp2f", "ex2", "ex2_cond", "emu8", "emu4")
COND_FLAVOURS = ("ex2_cond",)  # the O rescale's forward branch is taken every iteration (micro_softmax_v1.cu)
MAX_JSON_BYTES = 16 << 20


@dataclass(frozen=True)
class Constants:
    """Hardware constants of one SMSP: issue slots per clock, rate[pipe] (warp-instructions per clock), latency[pipe]
    (cycles); pending: True when they are not all from a pipes capture."""

    issue_per_clk: float
    rate: dict
    latency: dict
    pending: bool = True
    sources: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = PENDING) -> Constants:
        """Read a constants file ({issue_per_clk, rate, latency} of {value, source}); CaptureError if unreadable."""
        d = _read_json(path)
        try:
            rate = {p: float(v["value"]) for p, v in d["rate"].items()}
            latency = {p: float(v["value"]) for p, v in d["latency"].items()}
            issue = float(d["issue_per_clk"]["value"])
        except (KeyError, TypeError, ValueError) as e:
            raise CaptureError("SMSP constants file lacks issue_per_clk/rate/latency values", f"{path}: {e}",
                               "write {issue_per_clk: {value}, rate: {pipe: {value}}, latency: {pipe: {value}}}")
        srcs = {f"rate.{p}": v.get("source", "") for p, v in d["rate"].items()}
        return cls(issue, rate, latency, "PENDING" in str(d.get("status", "")), srcs)


@dataclass(frozen=True)
class Prediction:
    """SMSP cycles per warp-iteration (`cycles`), every bound term, and the name of the largest."""

    cycles: float
    bounds: dict
    bound: str


def _read_json(path: Path) -> dict:
    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
        raise CaptureError(f"JSON file missing or over {MAX_JSON_BYTES} bytes", str(path), "pass an existing file")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CaptureError("JSON file unreadable", f"{path}: {e}", "regenerate the file")


def warp_period(body: list[sass.Instruction], consts: Constants, iterations: int = 6) -> float:
    """Cycles per iteration of one warp issuing `body` alone, in order (see the module docstring)."""
    ready: dict[str, float] = {}
    t, starts = -1.0, []
    for _ in range(iterations):
        starts.append(t + 1)
        for ins in body:
            t = max([t + 1.0] + [ready.get(r, 0.0) for r in ins.srcs])
            for d in ins.dests:
                ready[d] = t + consts.latency[ins.pipe]
    return starts[-1] - starts[-2]


def predict(n_per_pipe: dict, warp_cycles: float, warps: int, consts: Constants) -> Prediction:
    """The max of issue, pipe and latency bounds (module docstring) for instruction counts per pipe of one
    iteration, one warp's in-order period `warp_cycles` and `warps` resident warps per SMSP."""
    if warps < 1:
        raise CaptureError("warps per SMSP must be at least 1", warps, "pass the resident warps per SMSP")
    unknown = set(n_per_pipe) - set(consts.rate)
    if unknown:
        raise CaptureError("instruction counts name pipes the constants lack", sorted(unknown),
                           f"use pipes of {sorted(consts.rate)}")
    bounds = {"issue": sum(n_per_pipe.values()) / consts.issue_per_clk,
              **{f"pipe.{p}": n / consts.rate[p] for p, n in n_per_pipe.items() if n},
              "latency": warp_cycles / warps}
    name = max(bounds, key=bounds.get)
    return Prediction(bounds[name], bounds, name)


def predict_loop(body: list[sass.Instruction], warps: int, consts: Constants) -> Prediction:
    """predict() for a loop body given as SASS instructions."""
    return predict(dict(sass.pipe_mix(body)), warp_period(body, consts), warps, consts)


# ------------------------------------------------------------------------------------------ --micro --

def _tool(name: str) -> str:
    """nvcc / cuobjdump: on PATH, else the nvidia-cuda-cuobjdump wheel's bin folder."""
    if shutil.which(name):
        return shutil.which(name)
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else None) or []:
        for d in sorted(Path(root).glob("cu*/bin")):
            if (d / name).exists():
                return str(d / name)
    raise CaptureError(f"{name} not found", "PATH and the nvidia wheels", f"install the CUDA toolkit ({name})")


def softmax_sass(source: Path = SOFTMAX_SOURCE) -> dict[str, list[sass.Instruction]]:
    """The micro_softmax kernels' SASS (sm_90a), compiled here."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "softmax.cubin"
        subprocess.run([_tool("nvcc"), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o",
                        str(cubin), str(source)], check=True, capture_output=True, timeout=600)
        text = subprocess.run([_tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                              text=True, timeout=120).stdout
    return sass.parse_cuobjdump(text)


def softmax_body(instrs: list[sass.Instruction], flavour: str) -> list[sass.Instruction]:
    """One iteration of the kernel's tile loop (its longest loop): the rescale branch taken for COND_FLAVOURS."""
    found = sass.loops(instrs)
    if not found:
        raise CaptureError("no backward branch in the softmax kernel", flavour, "check the kernel's SASS")
    lp = max(found, key=lambda x: x.tail - x.head)
    fwd = {i.address for i in instrs[lp.head:lp.tail] if i.opcode == "BRA" and i.target > i.address}
    return [instrs[k] for k in sass.loop_body(instrs, lp, fwd if flavour in COND_FLAVOURS else set())]


def micro_table(consts: Constants, functions=None, capture: Path = MICRO_CAPTURE) -> list[dict]:
    """Predicted vs measured SMSP cycles per warp-iteration of every softmax.<flavour>.wg<1|2> measurement."""
    functions = functions or softmax_sass()
    measured = {m["name"]: m for m in _read_json(capture)["measurements"]}
    rows = []
    for fl in FLAVOURS:
        body = softmax_body(functions[f"micro_softmax_{fl}_wg1"], fl)
        period = warp_period(body, consts)
        for wg in (1, 2):
            m = measured.get(f"softmax.{fl}.wg{wg}")
            if not m or m.get("status") != "ok":
                continue
            p = predict(dict(sass.pipe_mix(body)), period, wg, consts)  # wg warpgroups: wg warps per SMSP
            meas = 1.0 / m["value"]["median"]
            rows.append(dict(name=m["name"], instructions=len(body), predicted=p.cycles, bound=p.bound,
                             measured=meas, error_pct=100 * (p.cycles / meas - 1), bounds=p.bounds))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.smsp", description=__doc__.splitlines()[0])
    ap.add_argument("--micro", action="store_true", help="predict the softmax microbenchmarks (compiles here)")
    ap.add_argument("--constants", default=str(PENDING), help="constants file (default: the pending one)")
    a = ap.parse_args(argv)
    if not a.micro:
        ap.print_help()
        return 0
    consts = Constants.load(Path(a.constants))
    if consts.pending:
        print("CONSTANTS PENDING (lapis/data/smsp_pending.json): not a pipes capture; no claim", file=sys.stderr)
    rows = micro_table(consts)
    print(f"{'measurement':<22} {'instr':>5} {'predicted':>9} {'measured':>9} {'error':>7}  bound   (SMSP cycles per "
          "warp-iteration)")
    for r in rows:
        print(f"{r['name']:<22} {r['instructions']:>5} {r['predicted']:>9.0f} {r['measured']:>9.0f} "
              f"{r['error_pct']:>+6.1f}%  {r['bound']}")
    errs = [abs(r["error_pct"]) for r in rows]
    print(f"mean |error| {sum(errs) / len(errs):.1f}%, max {max(errs):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
