"""Committed schedule predictions, so `lapis report` does not re-simulate what has not changed.

An entry is keyed by (schedule, gpu, shape, parameters, profile hash, model hash). The model hash covers the
simulator's own sources (lapis/pipeline_sim, lapis/model) and the data its costs read beside the profile
(MODEL_DATA: the Hopper kernels' consumer loops, FA2's compiled loops, the SMSP constants, the B200 chapter-to-loop
catalog), so an edited
schedule, cost or cost input makes its entries stale
instead of silently wrong; the key holds no version or install path, so a source tree and an installed wheel
read the same entries. Stale or missing entries are re-simulated. Other predictions the report shows (the
numerics' rescale frequency, the timeline comparisons) live in the same file under their own keys, made by
`cached()`. `python -m lapis.report.refresh` recomputes every entry the report reads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import lapis
from lapis.data import PREDICTIONS
from lapis.model.profile import PROFILES
from lapis.pipeline_sim.simulate import simulate

COMMITTED = PREDICTIONS
KEPT = ("predicted_us", "tflops", "roofline_tflops", "bound_by", "utilization", "events")


PACKAGE = Path(lapis.__file__).resolve().parent
# files the costs read beside the profile: lapis.model.consumer_loop.LOOPS, lapis.model.smsp's constants (sm_90
# through softmax_body, sm_100 for the B200 rows) and the B200 chapter-to-loop catalog. Captures the costs read
# are not all listed: they are immutable (lapis/data/capture_checksums.json).
MODEL_DATA = ("data/consumer_loops.json", "data/warp_loops.json", "data/smsp_pending.json",
              "data/captures/micro/h200-2026-12-01-pipes/pipes/results.json", "data/smsp_sm100.json",
              "catalog/attention_b200.py")


def _name(p: Path) -> str:
    """A file's name in the key: its path inside the lapis package (never where the checkout lives), else its
    file name."""
    try:
        return p.resolve().relative_to(PACKAGE).as_posix()
    except ValueError:
        return p.name


def digest(paths) -> str:
    """sha256 (16 hex digits) over the files' names inside the package and their bytes."""
    h = hashlib.sha256()
    for p in sorted(paths, key=_name):
        h.update(_name(p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=None)
def model_hash() -> str:
    return digest([*PACKAGE.glob("pipeline_sim/**/*.py"), *PACKAGE.glob("model/**/*.py"),
                   *(PACKAGE / f for f in MODEL_DATA)])


def profile_hash(gpu: str) -> str:
    return digest([PROFILES / f"{gpu}.json"])


def key(schedule: str, gpu: str, shape: str, params: dict) -> str:
    return json.dumps([schedule, gpu, shape, sorted(params.items()), profile_hash(gpu), model_hash()])


def load(path: Path = COMMITTED) -> dict:
    """The cache at `path` (gzipped JSON, as save writes it); {} where there is none."""
    return json.loads(gzip.decompress(path.read_bytes())) if path.exists() else {}


def predict(schedule: str, gpu: str, shape: str, params: dict | None = None, cache: dict | None = None,
            resimulate: bool = False) -> tuple[dict, bool]:
    """(summary, fresh): the cached summary when its key is current, else a new simulation (fresh=True),
    which is also stored in `cache`. The summary holds KEPT's keys of simulate()'s result."""
    params = params or {}
    k = key(schedule, gpu, shape, params)
    if cache is not None and not resimulate and k in cache:
        return cache[k], False
    r = simulate(schedule, gpu, shape, params)
    out = {f: r[f] for f in KEPT}
    if cache is not None:
        cache[k] = out
    return out, True


def cached(parts: list, compute, cache: dict | None, resimulate: bool = False) -> tuple[object, bool]:
    """(value, fresh) of a prediction other than a schedule's: the entry keyed by `parts` (JSON-able inputs that
    decide it) and the model hash when `cache` holds it and resimulate is False, else compute() (fresh=True),
    stored in `cache`."""
    k = json.dumps([*parts, model_hash()])
    if cache is not None and not resimulate and k in cache:
        return cache[k], False
    value = compute()
    if cache is not None:
        cache[k] = value
    return value, True


def save(cache: dict, path: Path = COMMITTED) -> int:
    """Write `cache` as the committed file: JSON with sorted keys, one key per line, gzipped with no timestamp (the
    bytes follow the cache; gzip keeps the tree's bytes down); returns how many entries."""
    text = json.dumps(cache, indent=0, sort_keys=True) + "\n"
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return len(cache)


def refresh(cases, path: Path = COMMITTED) -> int:
    """Re-simulate `cases` ((schedule, gpu, shape, params) tuples) into `path`; returns how many."""
    cache = {}
    for case in cases:
        predict(*case, cache=cache, resimulate=True)
    return save(cache, path)
