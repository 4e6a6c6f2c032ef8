"""Simulator speed benchmark (prints numbers; not a test, asserts nothing).

For each (schedule, shape) it runs lapis.pipeline_sim.simulate.simulate(schedule, "h200", shape, {}) and reports
wall time, recorded timeline events, simpy steps processed, steps/s, and steps/s as a ratio of a bare simpy
event loop (N processes doing `yield env.timeout(1)`) run in the same process with the same number of steps.
simpy steps are counted in a separate run with simpy.Environment.step wrapped (patched here only), so the
timed runs carry no counting overhead.

Run from the repo root (lapis installed, or PYTHONPATH=.):  python benchmarks/simulate_speed.py
"""

import os
import platform
import sys
import time

import simpy

from lapis.pipeline_sim.simulate import default_gpu, simulate

FA4_SHAPES = ("8x16x4096x128", "4x16x8192x128", "2x16x16384x128")
# The case first: the B200 final schedule at 2x16x16384x128; then the Hopper ones.
CASES = [("b200-m4-tma-l2-promotion", "2x16x16384x128")]
CASES += [("h200-s8-persistent", s) for s in FA4_SHAPES] + [("h200-gemm-ws", "8192x8192x8192")]


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
    print("goal (issue 5): default mode under 2 s, --full under 60 s (--full not implemented yet)")
    simulate(CASES[0][0], gpu_of(CASES[0][0]), CASES[0][1], {})  # warm imports and caches
    hdr = ("schedule", "shape", "wall s", "tl events", "simpy steps", "steps/s", "ratio", "pred us", "TFLOP/s")
    fmt = "{:<26} {:<16} {:>7} {:>9} {:>11} {:>10} {:>6} {:>9} {:>8}"
    rows, total_wall = [], 0.0
    for sched, shape in CASES:
        gpu = gpu_of(sched)
        _, steps = count_steps(lambda: simulate(sched, gpu, shape, {}))
        r = min((simulate(sched, gpu, shape, {}) for _ in range(3)), key=lambda r: r["wall_s"])
        bare_s, bare_steps = bare_loop(steps)
        rate, bare_rate = steps / r["wall_s"], bare_steps / bare_s
        total_wall += r["wall_s"]
        rows.append((sched, shape, f"{r['wall_s']:.3f}", r["events"], steps, f"{rate:,.0f}",
                     f"{rate / bare_rate:.3f}", f"{r['predicted_us']:.1f}", f"{r['tflops']:.1f}"))
        rows[-1] += (f"{bare_steps:,} steps in {bare_s:.3f} s = {bare_rate:,.0f} steps/s",)
    print(f"\nbare simpy loop reference ({N_PROCS} processes, yield env.timeout(1)), one per row:")
    for row in rows:
        print(f"  {row[0]} {row[1]}: {row[-1]}")
    print("\n" + fmt.format(*hdr))
    for row in rows:
        print(fmt.format(*row[:-1]))
    print(f"\ntotal simulate wall (best of 3 each): {total_wall:.3f} s; ratio = simulate steps/s / bare steps/s")


if __name__ == "__main__":
    main()
