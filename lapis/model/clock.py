"""The SM clock a kernel runs at under the power limit, from its predicted unit activity, fitted to a clock capture.

The capture (lapis.gpu.capture_clock, kernel lapis/gpu/kernels/micro_clock.cu; a capture folder in the "clock" kind of
lapis.data.CAPTURES holds its clock/results.json) holds points where the tensor pipe (wgmma) and the FMA pipe (FFMA) were
held at set duties on every SM, each with the probed clock (clock64 cycles / %globaltimer ns, MHz) and the rates
achieved (tensor FLOP per cycle per SM, FFMA warp-instructions per cycle per SMSP). A unit's busy fraction at a
point is its rate over the largest rate the capture reached for that unit (both per cycle, so the clock cancels).

Form: clock_mhz = min(ceiling, c0 + a_tensor x busy_tensor + a_fma x busy_fma). ceiling is the highest probed
clock of the capture (the boost clock, reached while the power stays under the limit); c0 and the slopes are a
least-squares fit (numpy.linalg.lstsq) to the power-limited points, those more than CEILING_TOL below the
ceiling. Why this form: the board's power rises about linearly with each unit's duty, and once it reaches the
limit the firmware trades clock for power, so the clock falls about linearly with the duties past a knee and
stays at the ceiling before it. Where the power-limited points do not determine the three coefficients (fewer
than three, or no spread in one of the duties), the fit is one plane through every point, capped at the ceiling
(form "linear"), and says so.

A kernel's activity (activity()): the simulator's utilization (lapis.pipeline_sim.simulate: busy ns of each
unit / kernel ns): "tensor" for the tensor pipe; "fma" where the schedule models the FMA pipe, else "softmax"
(the fraction of time any softmax job runs on the SM: an upper bound of the FMA pipe's busy fraction).
Without a capture there is no model: load() returns None and the CLI says "no clock capture".
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lapis.data import CAPTURES
from lapis.errors import CaptureError

CLOCK_CAPTURES = CAPTURES / "clock"
RESULTS = Path("clock") / "results.json"  # inside one capture folder
UNITS = ("tensor", "fma")
RATE_KEY = {"tensor": "tensor_flop_per_clk_sm", "fma": "ffma_per_clk_smsp"}
CEILING_TOL = 0.01  # a point within 1% of the ceiling is not power-limited
MAX_JSON_BYTES = 16 << 20
# MHz a probed SM clock can read: NVIDIA's datacenter GPUs clock between a few hundred MHz (the lowest application
# clocks) and about 2.1 GHz (boost); wider, for other parts, but a clock of 1 MHz or 1 THz is a broken record
PROBE_MHZ = (100.0, 5000.0)
# The most a point's rates can read: twice the peaks of the pipes micro_clock.cu drives (wgmma is sm_90a only):
# 4096 dense bf16 wgmma FLOP/clk/SM (lapis/data/profiles/h200.json, tensor_flop_per_clk_sm) and 1 FFMA
# warp-instruction/clk/SMSP (32 FP32 lanes per SMSP). Past them the record is broken, not a fast GPU.
RATE_MAX = {"tensor_flop_per_clk_sm": 2 * 4096.0, "ffma_per_clk_smsp": 2 * 1.0}


@dataclass(frozen=True)
class ClockModel:
    """min(ceiling_mhz, intercept_mhz + sum of slope_mhz[u] x busy_u); busy_u in [0, 1]."""
    form: str  # "capped-linear" (fitted to the power-limited points) or "linear" (to every point)
    ceiling_mhz: float
    intercept_mhz: float
    slope_mhz: dict
    points: int  # points of the capture
    fitted_points: int  # those the plane was fitted to
    rms_residual_mhz: float  # over every point, of the capped prediction
    source: str

    def fitted(self, probe_mhz: float) -> bool:
        """Whether a capture point probed at `probe_mhz` is one the plane was fitted to: every point for the
        "linear" form, the power-limited ones (power_limited) for "capped-linear"."""
        return self.form == "linear" or bool(power_limited(probe_mhz, self.ceiling_mhz))

    def predict(self, tensor: float, fma: float) -> float:
        """Clock in MHz with the tensor and FMA pipes busy these fractions of the time (clipped to [0, 1])."""
        busy = dict(tensor=tensor, fma=fma)
        plane = self.intercept_mhz + sum(self.slope_mhz[u] * min(max(float(busy[u]), 0.0), 1.0) for u in UNITS)
        return min(self.ceiling_mhz, plane)

    def predict_utilization(self, utilization: dict) -> float:
        """Clock in MHz for a simulation's utilization dict (activity())."""
        return self.predict(**activity(utilization))


def power_limited(mhz, ceiling: float):
    """Whether a probed clock (MHz; a number or an array) is more than CEILING_TOL below the ceiling."""
    return np.asarray(mhz) < ceiling * (1 - CEILING_TOL)


def activity(utilization: dict) -> dict:
    """{"tensor", "fma"} busy fractions from lapis.pipeline_sim.simulate's utilization (module docstring)."""
    fma = utilization["fma"] if "fma" in utilization else utilization.get("softmax", 0.0)
    return dict(tensor=float(utilization.get("tensor", 0.0)), fma=float(fma))


def read_points(path: Path) -> list[dict]:
    """The "ok" points of a clock capture's results.json; CaptureError if the file is missing, not a regular file,
    unreadable, or holds no usable point (each needs tensor_duty, fma_duty, probe_mhz within PROBE_MHZ and the two
    rates >= 0), or a point whose rate is above RATE_MAX."""
    path = Path(path)
    try:
        if path.exists() and not path.is_file():  # a FIFO would block read_text for ever, a device too
            raise CaptureError("a clock capture's results.json is a regular file", f"{path}: "
                               f"{'a directory' if path.is_dir() else 'not a regular file (FIFO, device, socket)'}",
                               "pass the results.json lapis.gpu.capture_clock wrote")
        if path.stat().st_size > MAX_JSON_BYTES:
            raise CaptureError(f"a clock capture's results.json is at most {MAX_JSON_BYTES} bytes", str(path),
                               "pass the results.json lapis.gpu.capture_clock wrote")
        doc = json.loads(path.read_text())
        raw = doc["points"]
    except CaptureError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CaptureError("a clock capture is a results.json with a list of points (lapis.gpu.capture_clock)",
                           f"{path}: {type(exc).__name__}: {exc}", "pass the file the capture wrote, or re-capture "
                           "with benchmarks/h200_clock.sh") from None
    if not isinstance(raw, list):
        raise CaptureError("a clock capture's points are a list", f"{path}: {type(raw).__name__}",
                           "re-capture with benchmarks/h200_clock.sh")
    out = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or p.get("status") != "ok":
            continue
        vals = [p.get(k) for k in ("tensor_duty", "fma_duty", "probe_mhz", *RATE_KEY.values())]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in vals) \
                or not PROBE_MHZ[0] <= vals[2] <= PROBE_MHZ[1] or min(vals[3:]) < 0:
            raise CaptureError(f"each clock point has finite tensor_duty, fma_duty, probe_mhz > 0 (within "
                               f"[{PROBE_MHZ[0]:.0f}, {PROBE_MHZ[1]:.0f}] MHz) and rates >= 0",
                               f"{path}: point {i}: {dict(zip(('tensor_duty', 'fma_duty', 'probe_mhz', *RATE_KEY.values()), vals))}",
                               "re-capture with benchmarks/h200_clock.sh")
        for key, most in RATE_MAX.items():
            if p[key] > most:
                raise CaptureError(f"a clock point's {key} is at most {most:g} (twice the peak of the pipe)",
                                   f"{path}: point {i}: {key} {p[key]:g}", "drop the point or re-capture with "
                                   "benchmarks/h200_clock.sh (lapis.gpu.capture_clock)")
        out.append(p)
    if len(out) < 3:
        raise CaptureError("a clock fit needs at least 3 measured points", f"{path}: {len(out)} with status ok",
                           "re-capture with benchmarks/h200_clock.sh")
    return out


def busy(points: list[dict], source: str = "the capture") -> np.ndarray:
    """(points x 2) busy fractions, columns UNITS: each unit's rate over its largest rate in `points`."""
    cols = []
    for u in UNITS:
        rate = np.array([float(p[RATE_KEY[u]]) for p in points])
        if rate.max() <= 0:
            raise CaptureError(f"a clock capture keeps the {u} pipe busy at some point", f"{source}: every "
                               f"{RATE_KEY[u]} is 0", "re-capture with benchmarks/h200_clock.sh")
        cols.append(rate / rate.max())
    return np.stack(cols, axis=1)


def fit(points: list[dict], source: str = "the capture") -> ClockModel:
    """The ClockModel of these points (read_points), form chosen as the module docstring says. CaptureError when
    the fitted plane falls below PROBE_MHZ's floor at a corner of the duty square (a clock the capture cannot
    have meant: busy cycles would turn into a negative or near-zero time)."""
    x = busy(points, source)
    mhz = np.array([float(p["probe_mhz"]) for p in points])
    ceiling = float(mhz.max())
    design = np.column_stack([np.ones(len(mhz)), x])
    limited = power_limited(mhz, ceiling)
    if limited.sum() >= design.shape[1] and np.linalg.matrix_rank(design[limited]) == design.shape[1]:
        form, rows = "capped-linear", limited
    else:  # the knee is not determined: one plane through every point
        form, rows = "linear", np.ones(len(mhz), dtype=bool)
    coef, *_ = np.linalg.lstsq(design[rows], mhz[rows], rcond=None)
    model = ClockModel(form=form, ceiling_mhz=ceiling, intercept_mhz=float(coef[0]),
                       slope_mhz={u: float(c) for u, c in zip(UNITS, coef[1:])}, points=len(mhz),
                       fitted_points=int(rows.sum()), rms_residual_mhz=0.0, source=source)
    corners = {(t, f): model.predict(t, f) for t in (0.0, 1.0) for f in (0.0, 1.0)}
    if min(corners.values()) < PROBE_MHZ[0]:  # the clock model would turn busy cycles into a negative time
        raise CaptureError(f"a clock fit predicts at least {PROBE_MHZ[0]:.0f} MHz at every duty", f"{source}: "
                           + ", ".join(f"{mhz:.0f} MHz at tensor {t:.0f} fma {f:.0f}" for (t, f), mhz in corners.items()),
                           "check the capture's probe_mhz and rates, or re-capture with benchmarks/h200_clock.sh")
    pred = np.array([model.predict(*xi) for xi in x])
    return ClockModel(**{**asdict(model), "rms_residual_mhz": float(np.sqrt(np.mean((pred - mhz) ** 2)))})


def latest_capture(root: Path = CLOCK_CAPTURES) -> Path | None:
    """The results.json of the last capture folder (by name: <gpu>-<date>...) under root, or None."""
    found = sorted(Path(root).glob(f"*/{RESULTS.as_posix()}")) if Path(root).is_dir() else []
    return found[-1] if found else None


def load(path: Path | None = None, root: Path = CLOCK_CAPTURES) -> ClockModel | None:
    """The model fitted to `path` (a results.json; CaptureError when unusable), or to the newest capture under
    root; None when there is no clock capture (never a made-up clock)."""
    path = latest_capture(root) if path is None else Path(path)
    if path is None:
        return None
    return fit(read_points(path), str(path))


def main(argv=None) -> int:
    """`python -m lapis.model.clock [results.json]`: the fit and each point's residual, a "*" before the points the
    plane was fitted to; exit 2 without a capture."""
    ap = argparse.ArgumentParser(prog="python -m lapis.model.clock", description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", help="a clock capture's results.json (default: the newest under "
                    f"{CLOCK_CAPTURES})")
    a = ap.parse_args(argv)  # --help prints the usage, an unknown option is a usage error (exit 2)
    try:
        model = load(Path(a.results) if a.results else None)
        if model is None:
            print(f"no clock capture under {CLOCK_CAPTURES} (capture one: benchmarks/h200_clock.sh)", file=sys.stderr)
            return 2
        points = read_points(Path(model.source))
    except CaptureError as exc:
        print(f"python -m lapis.model.clock: {exc}", file=sys.stderr)
        return 2
    s = model.slope_mhz
    print(f"{model.form}: clock_mhz = min({model.ceiling_mhz:.0f}, {model.intercept_mhz:.1f} {s['tensor']:+.1f} x "
          f"busy_tensor {s['fma']:+.1f} x busy_fma); fitted to {model.fitted_points} of {model.points} points, "
          f"rms residual {model.rms_residual_mhz:.1f} MHz ({model.source})")
    print("  (* the point is one the plane was fitted to)")
    for p, xi in zip(points, busy(points, model.source)):
        mark = "*" if model.fitted(float(p["probe_mhz"])) else " "
        print(f"{mark} tensor {p['tensor_duty']:.2f} fma {p['fma_duty']:.2f}: busy {xi[0]:.3f} {xi[1]:.3f}  measured "
              f"{p['probe_mhz']:6.0f} MHz  model {model.predict(*xi):6.0f} MHz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
