"""One sweep row: a configuration simulated at one shape, or the reason it does not fit.

A Task is plain data (picklable: a process pool or a Dask worker runs `evaluate(task)`). The row holds the
predicted time (µs) and TFLOP/s, the busiest unit (`bound_by`), the resources the configuration takes (shared
memory in bytes, registers per CTA, TMEM columns on sm100) and whether a kernel can run it
(lapis.sweep.runnable: `kernel` names it, or says "not runnable: why"). A configuration the simulator refuses
(a ScheduleError: shared memory over the CTA's limit, a register split over the file, tiles that do not divide L,
a block_n wgmma cannot take, ...; or NotModelled: a mechanism the schedule does not model) or that deadlocks is a
row with fits = False and the simulator's message as its reason: never dropped. A shape over the simulator's event bound (simulate.check_size) is not a hardware
limit: its reason starts with "simulator limit:" and its kernel column says so.

Each row carries `stamp` (stamp(): the GPU profile's hash, the simulator's model hash and the lapis version,
lapis.pipeline_sim.predictions), so a resumed sweep recomputes rows made under another profile or model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import lapis
from lapis.errors import NotModelled, ScheduleError
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.deadlock import Deadlock
from lapis.sweep.fast import simulate_fast, simulate_full  # noqa: F401 (simulate_full re-exported)
from lapis.sweep.runnable import runnable
from lapis.sweep.space import config_text
from lapis.sweep.store import COUNTS, valid_row

EVENT_BOUND_RULE = "the run exceeds the simulator's event bound"  # simulate.check_size's rule
SIMULATOR_LIMIT = "simulator limit: "


@dataclass(frozen=True)
class Task:
    schedule: str
    gpu: str
    shape: str
    config: tuple  # ((key, value), ...) sorted by key (lapis.sweep.space)
    mode: str  # "full": simulate(); "fast": lapis.sweep.fast.simulate_fast()

    def key(self) -> str:
        """The row's identity in the resume store: everything that decides its numbers."""
        return f"{self.schedule}|{self.gpu}|{self.mode}|{self.shape}|{config_text(self.config)}"


def stamp(gpu: str) -> dict:
    """What a row's numbers depend on besides its key: profile hash, model hash, lapis version."""
    return dict(profile=predictions.profile_hash(gpu), model=predictions.model_hash(), version=lapis.__version__)


def check_row(task: Task, row) -> str:
    """Why `row`, which came from elsewhere (a Dask worker), is not to be taken as the task's row: '' when it is a
    valid row (store.valid_row) with the task's key, made under this process's stamp."""
    if not valid_row(row):
        return "not a valid row"
    if row["key"] != task.key():
        return f"the row of another key ({row['key'][:200]!r})"
    if row["stamp"] != stamp(task.gpu):
        return f"made under another profile, model or lapis version ({str(row['stamp'])[:200]})"
    return ""


def simulate_row(task: Task) -> dict:
    """The simulator's summary for the task. Raises what simulate() raises."""
    if task.mode == "fast":
        return simulate_fast(task.schedule, task.gpu, task.shape, dict(task.config))
    return simulate_full(task.schedule, task.gpu, task.shape, dict(task.config))


NO_PREDICTION = "no finite prediction"  # a row's reason when the simulator's numbers cannot be ranked


def _finite_positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _count(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 and v == int(v)


def evaluate(task: Task) -> dict:
    """The task's row (a JSON-able dict: key, shape, config, mode, fits, reason, numbers, runnable; wall_s and
    cpu_s, the seconds it took in its worker, wall clock and CPU). A run whose predicted_us or tflops is not a
    finite positive number is not a fit: its reason starts NO_PREDICTION, so it is never ranked."""
    row = dict(key=task.key(), shape=task.shape, config=[list(kv) for kv in task.config], mode=task.mode,
               fits=False, reason="", predicted_us=None, tflops=None, bound_by="", smem_bytes=None,
               registers=None, tmem_columns=None, runnable=False, kernel="", fast_method="", stamp=stamp(task.gpu))
    t0, c0 = time.perf_counter(), time.process_time()
    r = None
    try:
        r = simulate_row(task)
    except (ScheduleError, NotModelled) as exc:  # the simulator refuses the configuration
        limit = exc.rule == EVENT_BOUND_RULE  # the simulator's own bound, not the GPU's
        row["reason"] = (SIMULATOR_LIMIT if limit else "") + str(exc)
    except Deadlock as exc:
        row["reason"] = f"deadlock: {exc}"
    else:
        fit = r.get("fit") if isinstance(r.get("fit"), dict) else {}
        bad = [f"{k} = {r.get(k)!r}" for k in ("predicted_us", "tflops") if not _finite_positive(r.get(k))] + \
            [f"{k} = {fit[k]!r}" for k in COUNTS if fit.get(k) is not None and not _count(fit[k])]
        if bad:  # never ranked: a NaN sorts anywhere, an infinity first; nor stored (JSON holds no NaN)
            row["reason"] = f"{NO_PREDICTION}: {', '.join(bad)} (a schedule's costs, its fit or the fast " \
                            "extrapolation gave NaN, an infinity or a value out of range)"
            r = None
    if r is not None:
        fit = r["fit"]
        row.update(fits=True, predicted_us=r["predicted_us"], tflops=r["tflops"], bound_by=r["bound_by"],
                   smem_bytes=fit.get("smem_bytes"), registers=fit.get("registers"),
                   tmem_columns=fit.get("tmem_columns"), fast_method=r.get("fast", ""))
        ok, why = runnable(task.schedule, r["params"], task.shape)
        row.update(runnable=ok, kernel=why if ok else f"not runnable: {why}")
    if not row["fits"]:
        limited = row["reason"].startswith(SIMULATOR_LIMIT)
        row["kernel"] = "not runnable: " + ("not simulated (simulator limit)" if limited else NO_PREDICTION
                                            if row["reason"].startswith(NO_PREDICTION) else "does not fit")
    row["wall_s"], row["cpu_s"] = time.perf_counter() - t0, time.process_time() - c0  # kept out of the CSV
    return row
