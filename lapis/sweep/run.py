"""`lapis sweep` as a function: every configuration x shape simulated (or read back from the resume store),
the table, the ranking, the Pareto figure and, in fast mode, the measured fast-mode error.

Files written to `out`: rows.jsonl (the resume store, lapis.sweep.store), sweep.csv (the table), pareto.png
and summary.json (the ranking, the front, the fast-mode check, the counts).

Fast-mode check: `check` rows that fit are drawn with random.Random(seed) from the fast table and simulated in
full (those rows are stored too, so a resume does not redo them); the error is fast / full - 1 of the predicted
time, reported as its largest magnitude and the mean magnitude over the sample.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from lapis.errors import LapisError, ScheduleError, as_int
from lapis.figures.pareto import pareto_figure
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedule import lookup
from lapis.sweep import evaluate as ev
from lapis.sweep import table
from lapis.sweep.executors import Progress, check_executor, check_workers, run_tasks
from lapis.sweep.space import configurations, parse_grid
from lapis.sweep.store import RowStore

GPUS = ("h200", "b200", "rtx5090")


def tasks_for(schedule: str, gpu: str, shapes: list, configs: list, mode: str) -> list:
    return [ev.Task(schedule, gpu, s, c, mode) for c in configs for s in shapes]


def compute(tasks: list, store: RowStore, executor: str, workers, label: str) -> dict:
    """Run the tasks not yet in the store, or stored under another profile, model or lapis version (stale);
    return counts and the wall time of what ran."""
    stamps = {g: ev.stamp(g) for g in {t.gpu for t in tasks}}
    todo = [t for t in tasks if not store.current(t.key(), stamps[t.gpu])]
    stale = sum(t.key() in store for t in todo)
    t0 = time.perf_counter()
    run_tasks(todo, ev.evaluate, executor, workers, on_row=store.add, progress=Progress(len(todo), label))
    return dict(rows=len(tasks), computed=len(todo), resumed=len(tasks) - len(todo), stale=stale,
                wall_s=time.perf_counter() - t0)


def parse_shapes(shapes: list, parse) -> list[str]:
    """The shapes in canonical form ('8x16x4096x128': spaces stripped, extents as ints), each parsed by the
    schedule module's parse_shape with positive extents. Raises ScheduleError for none, a malformed or
    non-positive shape, or one given twice."""
    if not shapes:
        raise ScheduleError("a sweep needs at least one shape", shapes, "e.g. --shapes 8x16x4096x128")
    out = []
    for s in shapes:
        dims = parse(str(s).replace(" ", ""))
        if min(dims) < 1:
            raise ScheduleError("shape extents must be positive", repr(s), "use extents >= 1, e.g. 8x16x4096x128")
        text = "x".join(map(str, dims))
        if text in out:
            raise ScheduleError("each sweep shape is given once", repr(s), f"drop the repeated {text} from --shapes")
        out.append(text)
    return out


def output_folder(out) -> Path:
    """OUT as a folder, made if missing. Raises LapisError for an empty path, a file, or a path under a file."""
    if not str(out).strip():
        raise LapisError("--out names the sweep's output folder", repr(str(out)), "e.g. --out lapis-sweep")
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise LapisError("--out must be a folder (it holds rows.jsonl, sweep.csv, summary.json)", str(folder),
                         "pick a path that is not a file nor under one") from None
    return folder


def check_counts(top: int, check: int) -> None:
    if as_int(top, "--top", error=LapisError) < 1:
        raise LapisError("--top prints a count of configurations >= 1", top, "e.g. --top 5")
    if as_int(check, "--check", error=LapisError) < 0:
        raise LapisError("--check samples a count of rows >= 0", check, "e.g. --check 3 (0: no fast-mode check)")


def fast_check(rows: list, schedule: str, gpu: str, store: RowStore, executor: str, workers, sample: int,
               seed: int) -> dict | None:
    fitting = sorted((r for r in rows if r["fits"]), key=lambda r: r["key"])
    if not fitting or sample < 1:
        return None
    picked = sorted(random.Random(seed).sample(fitting, min(sample, len(fitting))), key=lambda r: r["key"])
    tasks = [ev.Task(schedule, gpu, r["shape"], table.config_of(r), "full") for r in picked]
    counts = compute(tasks, store, executor, workers, "fast-mode check (full simulation)")
    out = []
    for r, t in zip(picked, tasks):
        full = store.rows[t.key()]
        out.append(dict(config=r["key"].split("|", 4)[4], shape=r["shape"], fast_us=r["predicted_us"],
                        full_us=full["predicted_us"], error=r["predicted_us"] / full["predicted_us"] - 1,
                        fast_wall_s=r["wall_s"], full_wall_s=full["wall_s"]))
    errs = [abs(x["error"]) for x in out]
    return dict(sample=len(out), max_abs_error=max(errs), mean_abs_error=sum(errs) / len(errs), rows=out,
                computed=counts["computed"])


def run_sweep(schedule: str, shapes: list, grid: list | None = None, gpu: str | None = None,
              sample: int | None = None, seed: int = 0, fast: bool = False, executor: str = "pool",
              workers: int | None = None, out: str | Path = "lapis-sweep", check: int = 3, top: int = 5,
              figure: bool = True) -> dict:
    """Sweep `schedule` over the --grid axes at `shapes`; see the module docstring for what is written.
    Returns summary.json's content plus `rows` (the sorted table) and `csv` (its text).
    Raises, before anything runs, ScheduleError for an unknown schedule, GPU or key, a grid value the simulator
    refuses or a bad shape list (parse_shapes), and LapisError for an unknown executor, a worker count < 1,
    top < 1, check < 0 or an --out that is not a folder (output_folder)."""
    s = lookup(schedule)
    gpu = gpu or s.gpu
    if gpu not in GPUS:
        raise ScheduleError("unknown GPU profile", repr(gpu), "use " + ", ".join(GPUS))
    if load_profile(gpu).arch != s.arch:  # simulate() would refuse every row for it: say so once
        raise ScheduleError(f"{s.name} is written for {s.arch} hardware", f"--gpu {gpu} ({load_profile(gpu).arch})",
                            f"use --gpu {s.gpu}")
    shapes = parse_shapes(shapes, s.parse_shape)
    check_executor(executor)
    check_workers(workers)
    check_counts(top, check)
    axes = parse_grid(grid, s.defaults, schedule)
    configs = configurations(axes, sample, seed)
    folder = output_folder(out)
    store = RowStore(folder)
    mode = "fast" if fast else "full"
    tasks = tasks_for(schedule, gpu, shapes, configs, mode)
    counts = compute(tasks, store, executor, workers, f"sweep ({mode})")
    rows = table.sorted_rows([store.rows[t.key()] for t in tasks], shapes)
    checked = fast_check(rows, schedule, gpu, store, executor, workers, check, seed) if fast else None
    ranked = table.ranked(rows, shapes)
    front = table.pareto(ranked)
    csv_text = table.to_csv(rows, list(axes))
    (folder / "sweep.csv").write_text(csv_text)
    files = dict(csv=str(folder / "sweep.csv"), rows=str(store.path), summary=str(folder / "summary.json"))
    if figure and ranked:
        files["figure"] = str(folder / "pareto.png")
        pareto_figure(ranked, front, files["figure"], f"{schedule} on {gpu} ({mode}): {len(ranked)} configurations "
                      f"fit at {len(shapes)} shape(s)")
    summary = dict(schedule=schedule, gpu=gpu, shapes=list(shapes), axes={k: list(v) for k, v in axes.items()},
                   mode=mode, configurations=len(configs), counts=counts, fits=sum(r["fits"] for r in rows),
                   runnable=sum(bool(r["runnable"]) for r in rows), top=ranked[:top], pareto=front,
                   fast_check=checked, files=files, dropped_partial_lines=store.dropped,
                   simulator_limit=sum(r["reason"].startswith(ev.SIMULATOR_LIMIT) for r in rows))
    (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return dict(summary, rows=rows, csv=csv_text, ranked=ranked)
