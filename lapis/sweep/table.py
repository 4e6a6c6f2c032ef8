"""The sweep table: rows in one canonical order, written as CSV with fixed float formatting, and the
configurations ranked across shapes with their Pareto front (max TFLOP/s, min shared memory).

Order: by configuration (lapis.sweep.space.sort_key), then by the shape's position in `--shapes`. Floats are
written with fixed digits (time 3 decimals in µs, TFLOP/s 2), so two runs that computed the same numbers write
the same bytes. A configuration is ranked by the geometric mean of its TFLOP/s over the shapes, among those
that fit at every shape; ties (equal means) go to the smaller shared-memory footprint, then the sort order.
"""

from __future__ import annotations

import csv
import io
import math

from lapis.sweep.space import config_text, sort_key

FLOAT_FORMAT = {"predicted_us": "{:.3f}", "tflops": "{:.2f}", "measured_us": "{:.3f}", "measured_tflops": "{:.2f}"}
COLUMNS = ("shape", "fits", "reason", "predicted_us", "tflops", "bound_by", "smem_bytes", "registers",
           "tmem_columns", "runnable", "kernel", "mode", "fast_method")


def config_of(row: dict) -> tuple:
    return tuple((k, v) for k, v in row["config"])


def sorted_rows(rows: list, shapes: list) -> list:
    pos = {s: i for i, s in enumerate(shapes)}
    return sorted(rows, key=lambda r: (sort_key(config_of(r)), pos.get(r["shape"], len(pos)), r["shape"]))


def _cell(col: str, v) -> str:
    if v is None:
        return ""
    if col in FLOAT_FORMAT:
        return FLOAT_FORMAT[col].format(v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def to_csv(rows: list, keys: list, extra: tuple = ()) -> str:
    """The table as CSV text: one column per swept key, then COLUMNS and `extra` (e.g. measured columns)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    cols = (*COLUMNS, *extra)
    w.writerow([*keys, *cols])
    for r in rows:
        cfg = dict(config_of(r))
        w.writerow([_cell(k, cfg.get(k)) for k in keys] + [_cell(c, r.get(c)) for c in cols])
    return out.getvalue()


def ranked(rows: list, shapes: list) -> list[dict]:
    """Per configuration that fits at every shape: its TFLOP/s per shape, their geometric mean, its shared
    memory and whether it is runnable at every shape; best first."""
    by = {}
    for r in rows:
        by.setdefault(config_of(r), {})[r["shape"]] = r
    out = []
    for cfg, per in by.items():
        got = [per.get(s) for s in shapes]
        if not all(g and g["fits"] for g in got):
            continue
        tf = [g["tflops"] for g in got]
        out.append(dict(config=config_text(cfg), sort=sort_key(cfg), tflops=tf,
                        geomean_tflops=math.exp(sum(map(math.log, tf)) / len(tf)),
                        smem_bytes=max(g["smem_bytes"] or 0 for g in got),
                        runnable=all(g["runnable"] for g in got), kernel=got[0]["kernel"]))
    out.sort(key=lambda c: (-round(c["geomean_tflops"], 9), c["smem_bytes"], c["sort"]))
    for c in out:
        del c["sort"]
    return out


def pareto(configs: list[dict]) -> list[dict]:
    """The configurations no other beats on both counts (TFLOP/s at least as high and shared memory at most
    as large, one of them strictly), by increasing shared memory."""
    front = [c for c in configs if not any(
        o["geomean_tflops"] >= c["geomean_tflops"] and o["smem_bytes"] <= c["smem_bytes"]
        and (o["geomean_tflops"] > c["geomean_tflops"] or o["smem_bytes"] < c["smem_bytes"]) for o in configs)]
    return sorted(front, key=lambda c: (c["smem_bytes"], -c["geomean_tflops"], c["config"]))


def top_text(configs: list[dict], shapes: list, k: int) -> str:
    """The k best configurations, one line each."""
    lines = [f"top {min(k, len(configs))} of {len(configs)} configurations that fit at every shape "
             f"(geometric mean TFLOP/s over {', '.join(shapes)}):"]
    for i, c in enumerate(configs[:k], 1):
        per = ", ".join(f"{t:.1f}" for t in c["tflops"])
        run = c["kernel"] if c["runnable"] else "not runnable"
        lines.append(f"{i:2d}. {c['config']}: {c['geomean_tflops']:.1f} TFLOP/s ({per}); smem {c['smem_bytes']} B; "
                     f"{run}")
    return "\n".join(lines)
