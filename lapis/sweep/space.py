"""The configuration space of a sweep: `--grid key=v1,v2,...` axes, their product (or a seeded random sample
of it), and the one canonical order every table is sorted in.

A configuration is a tuple of (key, value) pairs sorted by key; values are parsed as `lapis simulate --param`
parses them (integers, else floats; the names of simulate.CHOICES stay strings). Configurations sort by their
values in key order, numbers numerically and names alphabetically, so the order never depends on the order
rows were computed in, nor on the hash seed.
"""

from __future__ import annotations

import math
import random

from lapis.errors import ScheduleError
from lapis.pipeline_sim.simulate import check_params, parse_params


def parse_grid(items: list[str] | None, defaults: dict, schedule: str) -> dict[str, tuple]:
    """['stages=2,3', 'block_n=64,128'] -> {'block_n': (64, 128), 'stages': (2, 3)} (values deduplicated, sorted;
    spaces around keys and values stripped). Each value passes the simulator's own check (simulate.parse_params
    and check_params: counts whole and >= 1, finite numbers in range, names of CHOICES), as `lapis simulate
    --param` checks it. Raises ScheduleError for a malformed item, an axis without values or with an empty one
    ('2,,3', '2,3,'), a key given twice or one `schedule` does not have (its keys are the schedule module's
    DEFAULTS), or a value the simulator refuses."""
    axes: dict[str, tuple] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScheduleError("a sweep axis is key=v1,v2,...", repr(item), "e.g. --grid stages=2,3")
        if key in axes:
            raise ScheduleError("each sweep key is given once", key, f"put every value in one --grid {key}=...")
        if key not in defaults:
            raise ScheduleError(f"{schedule} has no parameter {key}", key, "use " + ", ".join(sorted(defaults)))
        given = [x.strip() for x in values.split(",")]
        if not any(given):
            raise ScheduleError("a sweep axis needs at least one value", repr(item), f"e.g. --grid {key}=2,3")
        if not all(given):
            raise ScheduleError("a sweep axis has no empty value between, before or after its commas", repr(item),
                                f"drop the extra comma: --grid {key}={','.join(v for v in given if v)}")
        vals = []
        for v in given:
            p = parse_params([f"{key}={v}"])
            check_params(schedule, p, defaults)  # converts whole floats of counts to int
            vals.append(p[key])
        axes[key] = tuple(sorted(set(vals), key=value_order))
    return dict(sorted(axes.items()))


def value_order(v) -> tuple:
    """Numbers before names, numbers by value, names alphabetically (a total order across types)."""
    return (1, v, 0.0) if isinstance(v, str) else (0, "", float(v))


def size(axes: dict) -> int:
    return math.prod(len(v) for v in axes.values())


def config_at(axes: dict, index: int) -> tuple:
    """The index-th configuration of the product in mixed radix, the last key fastest."""
    out = []
    for key, vals in reversed(list(axes.items())):
        index, r = divmod(index, len(vals))
        out.append((key, vals[r]))
    return tuple(reversed(out))


def configurations(axes: dict, sample: int | None = None, seed: int = 0) -> list[tuple]:
    """Every configuration of the product, or `sample` distinct ones drawn with random.Random(seed) (without
    building the product: its indices are sampled). Sorted by sort_key. Raises ScheduleError for sample < 1."""
    n = size(axes)
    if sample is None or sample >= n:
        picked = range(n)
    elif sample < 1:
        raise ScheduleError("--random takes a count >= 1", sample, "e.g. --random 50 --seed 0")
    else:
        picked = random.Random(seed).sample(range(n), sample)
    return sorted((config_at(axes, i) for i in picked), key=sort_key)


def sort_key(config: tuple) -> tuple:
    return tuple((k, value_order(v)) for k, v in config)


def config_text(config: tuple) -> str:
    """'block_n=128,stages=3': a configuration as one string (the resume key, the figure's labels)."""
    return ",".join(f"{k}={v}" for k, v in config)
