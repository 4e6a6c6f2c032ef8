"""`lapis sweep` throughput benchmark (prints numbers; not a test, asserts nothing).

Sweeps h200-s8-persistent at the three FA4 shapes, in fast mode (a 32-configuration grid) and full mode
(8 configurations), each serially and on a 2-worker process pool, into a fresh output folder (nothing resumed).
Prints rows/s and configurations/s (a configuration is one row per shape), the scaling efficiency of the pool
(rate with 2 workers / (2 x the serial rate)), the fast-mode error on the rows both modes computed, and what a
cluster run (`--executor dask://HOST:PORT`) would need for a large sweep at the measured per-row cost.
Wall times include starting the workers and their first-call caches (imports, the rescale frequency per
block_n), as a user's sweep pays them.

Run from the repo root (lapis installed, or PYTHONPATH=.):  python benchmarks/sweep_speed.py
"""

import os
import platform
import tempfile
import time

from lapis.sweep.run import run_sweep

SCHEDULE = "h200-s8-persistent"
SHAPES = ["8x16x4096x128", "4x16x8192x128", "2x16x16384x128"]
FULL_GRID = ["stages=2,3", "block_n=64,128", "consumer_wgs=2", "threshold=0,8", "emulate_frac=0"]
FAST_GRID = FULL_GRID[:4] + ["emulate_frac=0,0.1,0.2,0.3"]  # its emulate_frac=0 rows are FULL_GRID's
BIG_SWEEP = 10_000  # configurations of the cluster estimate
TARGET_S = 600  # ... finished within this wall time


def burn(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def machine_scaling(n: int = 10_000_000) -> float:
    """What 2 processes get on this machine now: a pure-Python loop's 2-process rate / 2 x its serial rate (other
    load on a shared machine shows here first)."""
    from concurrent.futures import ProcessPoolExecutor
    t0 = time.perf_counter()
    burn(n), burn(n)
    serial = time.perf_counter() - t0
    with ProcessPoolExecutor(2) as ex:
        list(ex.map(burn, [1, 1]))  # workers started before the clock
        t0 = time.perf_counter()
        list(ex.map(burn, [n, n]))
        pooled = time.perf_counter() - t0
    return serial / (2 * pooled)


def measure(grid: list, fast: bool, executor: str, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        r = run_sweep(SCHEDULE, SHAPES, grid, fast=fast, executor=executor, workers=workers, out=out, check=0,
                      figure=False)
    c = r["counts"]
    walls = sorted(row["wall_s"] for row in r["rows"])  # per row, in its worker
    return dict(rows=c["computed"], configs=r["configurations"], wall_s=c["wall_s"],
                median_row_s=walls[len(walls) // 2], walls=walls, cpu_s=sum(row["cpu_s"] for row in r["rows"]),
                rows_per_s=c["computed"] / c["wall_s"], configs_per_s=r["configurations"] / c["wall_s"],
                us={row["key"].split("|", 2)[2].split("|", 1)[1]: row["predicted_us"] for row in r["rows"]})


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}")
    base = machine_scaling()
    print(f"load average {os.getloadavg()[0]:.1f}; a bare 2-process pure-Python loop scales at {base:.2f} here now "
          "(the most the sweep can get on this machine at this moment)")
    print(f"{SCHEDULE} at {', '.join(SHAPES)}")
    res = {}
    for mode, grid in (("fast", FAST_GRID), ("full", FULL_GRID)):
        for executor, workers in (("serial", 1), ("pool", 2)):
            m = res[mode, workers] = measure(grid, mode == "fast", executor, workers)
            print(f"{mode:4s} {executor:6s} x{workers}: {m['configs']} configurations, {m['rows']} rows in "
                  f"{m['wall_s']:6.1f} s: {m['rows_per_s']:6.2f} rows/s, {m['configs_per_s']:6.2f} configurations/s "
                  f"({1e3 / m['rows_per_s']:.0f} ms per row; median row {1e3 * m['median_row_s']:.0f} ms "
                  f"in its worker; {1e3 * m['cpu_s'] / m['rows']:.0f} ms of CPU per row)")
        eff = res[mode, 2]["rows_per_s"] / (2 * res[mode, 1]["rows_per_s"])
        print(f"{mode:4s} scaling efficiency with 2 workers: {eff:.2f} ({eff / base:.2f} of the bare loop's)")
    fast, full = res["fast", 1]["us"], res["full", 1]["us"]
    errs = [abs(fast[k] / full[k] - 1) for k in full if k in fast and full[k] and fast[k]]
    if errs:
        print(f"fast-mode error on the {len(errs)} rows both modes computed: max {100 * max(errs):.3f}%, "
              f"mean {100 * sum(errs) / len(errs):.3f}% (predicted time)")
    for mode in ("fast", "full"):
        # a worker's core-seconds per row: the CPU time the rows took (another job's load on a shared machine
        # stretches the wall clock, less the CPU time), plus the serial run's wall time outside the rows
        m = res[mode, 1]
        per_row = (m["cpu_s"] + max(0.0, m["wall_s"] - sum(m["walls"]))) / m["rows"]
        # workers on machines of their own: the efficiency relative to the bare loop's (this machine's load aside)
        eff = min(1.0, res[mode, 2]["rows_per_s"] / (2 * res[mode, 1]["rows_per_s"]) / base)
        cpu_s = BIG_SWEEP * len(SHAPES) * per_row
        workers = -(-cpu_s // (TARGET_S * eff))
        print(f"cluster, {mode}: {BIG_SWEEP} configurations x {len(SHAPES)} shapes = {cpu_s / 3600:.1f} core-hours at "
              f"{per_row * 1e3:.0f} ms per row; within {TARGET_S} s: about {workers:.0f} single-threaded Dask workers "
              f"(at {eff:.2f} scaling efficiency); each needs lapis importable and about 0.1 GB of memory "
              "(peak RSS 85 MB: full mode at 2x16x16384x128)")


if __name__ == "__main__":
    main()
