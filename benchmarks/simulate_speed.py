"""Simulator speed benchmark (prints numbers; not a test, asserts nothing).

For each (schedule, shape, params, mode) it runs lapis.pipeline_sim.simulate.simulate on the schedule's own
profile, in default mode (the representative SM) or full mode (every SM, `lapis simulate --full`; SMs with
identical work lists simulated once), and reports wall time, recorded timeline events (the slowest SM's),
simpy steps processed, steps/s, and steps/s as a ratio of a bare simpy event loop (N processes doing
`yield env.timeout(1)`) run in the same process with the same number of steps. simpy steps are counted in a
separate run with simpy.Environment.step wrapped (patched here only), so the timed runs carry no counting
overhead. Runs are best of 3, or a single run where the first takes over REPEAT_BELOW_S.

Run from the repo root (lapis installed, or PYTHONPATH=.):  python benchmarks/simulate_speed.py
"""

import os
import platform
import sys
import time

import simpy

from lapis.pipeline_sim.simulate import default_gpu, simulate

FA4_SHAPES = ("8x16x4096x128", "4x16x8192x128", "2x16x16384x128")
# The B200 final schedule first: at 2x16x16384x128 in default and full mode; then causal full
# runs, where the SMs' work lists differ (so grouping identical SMs helps less); then the Hopper ones.
FINAL = ("b200-m4-tma-l2-promotion", "2x16x16384x128", {})
CAUSAL = {"causal": 1}
CASES = [FINAL + (False,), FINAL + (True,), ("h200-s8-persistent", "8x16x4096x128", CAUSAL, True),
         ("b200-m4-tma-l2-promotion", "2x16x16384x128", CAUSAL, True)]
CASES += [("h200-s8-persistent", s, {}, False) for s in FA4_SHAPES] + [("h200-gemm-ws", "8192x8192x8192", {}, False)]
CASES += [("b200-k14-persistent", "2x16x16384x128", {}, False)]  # a long shape: 14 work items per SM
GOALS = {False: 2.0, True: 60.0}  # seconds: a default-mode run under 2 s, a --full run under 60 s
REPEAT_BELOW_S = 10.0


def gpu_of(schedule: str) -> str:
    return default_gpu(schedule)
N_PROCS = 32


def count_steps(fn):
    """Run fn() with simpy.Environment.step wrapped; return (result, number of steps)."""
    orig, calls = simpy.Environment.step, [0]

    def step(self):
        calls[0] += 1
        return orig(self)

    simpy.Environment.step = step
    try:
        return fn(), calls[0]
    finally:
        simpy.Environment.step = orig


def bare_loop(total_steps: int, n: int = N_PROCS) -> tuple[float, int]:
    """N processes each yielding env.timeout(1); ~total_steps steps. Returns (wall s, exact steps)."""
    iters = max(1, total_steps // n - 2)  # each process also costs an Initialize and a termination step

    def proc(env):
        for _ in range(iters):
            yield env.timeout(1)

    def run():
        env = simpy.Environment()
        for _ in range(n):
            env.process(proc(env))
        t0 = time.perf_counter()
        env.run()
        return time.perf_counter() - t0

    _, steps = count_steps(run)
    return min(run() for _ in range(3)), steps


def main():
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()} ({sys.implementation.name}), "
          f"simpy {simpy.__version__}")
    print("goal: the final B200 schedule at 2x16x16384x128 under 2 s in default mode, under 60 s --full")
    simulate(FINAL[0], gpu_of(FINAL[0]), FINAL[1], {})  # warm imports and caches
    hdr = ("schedule", "shape", "mode", "wall s", "SMs/lists", "tl events", "simpy steps", "steps/s", "ratio",
           "pred us", "TFLOP/s")
    fmt = "{:<26} {:<16} {:<12} {:>7} {:>9} {:>9} {:>11} {:>10} {:>6} {:>9} {:>8}"
    rows, goals = [], []
    for sched, shape, prm, full in CASES:
        gpu = gpu_of(sched)
        mode = ("causal " if prm.get("causal") else "") + ("full" if full else "default")
        first, steps = count_steps(lambda: simulate(sched, gpu, shape, prm, full=full))
        reps = 3 if first["wall_s"] < REPEAT_BELOW_S else 1
        r = min((simulate(sched, gpu, shape, prm, full=full) for _ in range(reps)), key=lambda r: r["wall_s"])
        bare_s, bare_steps = bare_loop(steps)
        rate, bare_rate = steps / r["wall_s"], bare_steps / bare_s
        g = r["grid"]
        rows.append((sched, shape, mode, f"{r['wall_s']:.3f}", f"{g['sms_simulated']}/{g['work_lists']}",
                     r["events"], steps, f"{rate:,.0f}", f"{rate / bare_rate:.3f}", f"{r['predicted_us']:.1f}",
                     f"{r['tflops']:.1f}"))
        rows[-1] += (f"{bare_steps:,} steps in {bare_s:.3f} s = {bare_rate:,.0f} steps/s (best of {reps})",)
        if (sched, shape, prm) == FINAL:
            goals.append(f"{mode} {r['wall_s']:.2f} s (goal < {GOALS[full]:.0f} s: "
                         f"{'met' if r['wall_s'] < GOALS[full] else 'MISSED'})")
    print(f"\nbare simpy loop reference ({N_PROCS} processes, yield env.timeout(1)), one per row:")
    for row in rows:
        print(f"  {row[0]} {row[1]} {row[2]}: {row[-1]}")
    print("\n" + fmt.format(*hdr))
    for row in rows:
        print(fmt.format(*row[:-1]))
    print(f"\n{FINAL[0]} at {FINAL[1]}: " + "; ".join(goals))
    print("ratio = simulate steps/s / bare steps/s; SMs/lists = SMs simulated / distinct work lists run")


if __name__ == "__main__":
    main()
