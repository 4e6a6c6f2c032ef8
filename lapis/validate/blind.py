"""Blind predictions: the simulator's numbers for real kernels, committed before the kernels' first timed run.

The sets are the catalog's: a variant's `blind` (lapis/catalog/attention.py, lapis/catalog/gemm.py) names the set
that predicts it; a kernel lapis did not write names its set in lapis/catalog/third_party.py. Each file lapis/data/blind/<name>.json holds one entry per (variant, shape): the schedule and
parameters that mirror the kernel, the predicted time (µs) and TFLOP/s, and the profile and model hashes it came from. The git history
shows the file landing before the capture it predicts; a CPU test keeps the file consistent with the code that
wrote it (a re-run with the same profile and model must reproduce it), and `lapis compare` reads it.

    python -m lapis.validate.blind attention_h200_s4   # writes lapis/data/blind/attention_h200_s4.json (a new set)
    python -m lapis.validate.blind --overwrite attention_h200   # re-made before its capture only
"""

from __future__ import annotations

import json
import math
import sys
from datetime import date
from functools import partial
from pathlib import Path

import lapis
from lapis.catalog import attention, gemm, third_party
from lapis.data import BLIND
from lapis.errors import CaptureError
from lapis.pipeline_sim.predictions import model_hash, profile_hash
from lapis.pipeline_sim.simulate import simulate
from lapis.pipeline_sim.work_order import ORDERS


def cases(name: str) -> list[dict]:
    """The cases of set `name`: every catalog variant (or causal build) whose `blind` names it, in table order; a
    GEMM variant at its set's cube sizes (gemm.BLIND_SIZES, else DEFAULT_SIZES), an attention variant at
    attention.DEFAULT_SHAPES; params: the simulator parameters the kernel fixes (the catalog's sim_params). A set of
    lapis.catalog.third_party (kernels lapis did not write) holds that table's cases."""
    out = []
    for n, v in gemm.VARIANTS.items():
        if v["blind"] == name:
            out += [dict(variant=n, schedule=v["schedule"], gpu="h200", shape=f"{s}x{s}x{s}", params=gemm.sim_params(v))
                    for s in gemm.BLIND_SIZES.get(name, gemm.DEFAULT_SIZES)]
    for n, v in attention.VARIANTS.items():
        for causal, build in ((False, v), (True, v["causal_build"])):
            if build is not None and build["blind"] == name:
                out += [dict(variant=n, **(dict(causal=True) if causal else {}), schedule=v["schedule"], gpu="h200",
                             shape=s, params=attention.sim_params(v, causal)) for s in attention.DEFAULT_SHAPES]
    return out + third_party.cases(name)


def set_names(variants: dict) -> tuple[str, ...]:
    """The sets a catalog table's variants (and causal builds) name, in table order."""
    builds = [b for v in variants.values() for b in (v, v.get("causal_build")) if b is not None]
    return tuple(dict.fromkeys(b["blind"] for b in builds if b["blind"]))


SETS = {name: partial(cases, name) for name in set_names(gemm.VARIANTS) + set_names(attention.VARIANTS)
        + third_party.set_names()}


def predict(cases: list[dict]) -> list[dict]:
    out = []
    for c in cases:
        r = simulate(c["schedule"], c["gpu"], c["shape"], c["params"])
        out.append(dict(c, predicted_us=round(r["predicted_us"], 3), tflops=round(r["tflops"], 1),
                        bound_by=r["bound_by"], profile_hash=profile_hash(c["gpu"]), model_hash=model_hash()))
    return out


def write(name: str) -> Path:
    """Predict set `name` and write lapis/data/blind/<name>.json. Raises KeyError for an unknown set."""
    entries = predict(SETS[name]())
    path = BLIND / f"{name}.json"
    path.write_text(json.dumps(dict(name=name, lapis_version=lapis.__version__, date=date.today().isoformat(),
                                    entries=entries), indent=1) + "\n")
    return path


def load(name: str) -> dict:
    """Set `name`'s file, checked (read)."""
    return read(BLIND / f"{name}.json")


def read(path: Path) -> dict:
    """A blind set's file {name, date (YYYY-MM-DD), entries: [{variant, schedule, shape, params (causal 0 or 1 where
    given, persistent_order one of lapis.pipeline_sim.work_order.ORDERS), predicted_us (µs) and tflops (finite,
    > 0)}, ...]}, one entry per (variant, schedule, shape, causal), each a case of the set the file names (SETS:
    its variant, schedule and shape as the catalog makes them), the name the file's own (<name>.json). CaptureError
    naming the file and the first entry that breaks the rule: a committed prediction is a record, so the fix is git,
    never an edit."""
    fix = f"restore it from git (git checkout -- {path.name}); a blind file is never edited by hand"
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CaptureError("a blind set is one readable JSON file", f"{path}: {e}", fix) from None
    name, when = (d.get("name"), d.get("date")) if isinstance(d, dict) else (None, None)
    if not isinstance(name, str) or not _iso_date(when):
        raise CaptureError("a blind set is {name, date YYYY-MM-DD, entries}",
                           f"{path}: a {type(d).__name__} with name {name!r:.60}, date {when!r:.60}", fix)
    if name != path.stem or name not in SETS:
        raise CaptureError("a blind set's name is its file's and one of the catalog's sets",
                           f"{path}: name {name!r:.60}", fix + f" (the sets: {', '.join(SETS)})")
    entries, seen, known = d.get("entries"), set(), {entry_key(c) for c in SETS[name]()}
    if not isinstance(entries, list) or not entries:
        raise CaptureError("a blind set has a non-empty list of entries", f"{path}: entries {entries!r:.60}", fix)
    for i, e in enumerate(entries):
        bad = _entry_fault(e)
        key = None if bad else entry_key(e)
        if bad is None and key in seen:
            bad = f"a second entry for {key}"
        elif bad is None and key not in known:
            bad = f"{key} is not a case of set {name} (lapis.validate.blind.cases)"
        if bad:
            raise CaptureError("each blind entry names its variant, schedule, shape and params (causal 0 or 1) once, "
                               "with a predicted_us (µs) and tflops that are finite numbers above 0",
                               f"{path}: entry {i}: {bad}", fix)
        seen.add(key)
    return d


def entry_key(e: dict) -> tuple:
    """The case a blind entry predicts: (variant, schedule, shape, causal)."""
    return e["variant"], e["schedule"], e["shape"], bool(e["params"].get("causal", 0))


def _iso_date(x) -> bool:
    try:
        return isinstance(x, str) and date.fromisoformat(x).isoformat() == x
    except ValueError:
        return False


def _entry_fault(e) -> str | None:
    if not isinstance(e, dict):
        return f"{type(e).__name__}, not an object"
    missing = [k for k in ("variant", "schedule", "shape") if not isinstance(e.get(k), str)]
    if missing or not isinstance(e.get("params"), dict):
        return f"no text {missing} or no params object"
    for field in ("predicted_us", "tflops"):
        t = e.get(field)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            return f"{field} {t!r}"
    if e["params"].get("causal", 0) not in (0, 1) or isinstance(e["params"].get("causal"), float):
        return f"params.causal {e['params']['causal']!r} (0 or 1)"
    order = e["params"].get("persistent_order", ORDERS[0])
    if not isinstance(order, str) or order not in ORDERS:
        return f"params.persistent_order {order!r:.40} (one of {', '.join(ORDERS)})"
    return None


def main(argv: list[str]) -> int:
    """`python -m lapis.validate.blind [--overwrite] NAME...`: exit 2, writing nothing, for no name, an
    unknown name, or a set whose file exists without --overwrite (a committed blind prediction is a record:
    re-made after its capture it is no longer blind)."""
    names = [a for a in argv if a != "--overwrite"]
    bad = [n for n in names if n not in SETS]
    exists = [n for n in names if (BLIND / f"{n}.json").exists()] if "--overwrite" not in argv else []
    if not names or bad or exists:
        why = (f"unknown prediction set(s) {bad}; use one of {', '.join(sorted(SETS))}" if bad else
               f"{', '.join(f'lapis/data/blind/{n}.json' for n in exists)} exists: a blind prediction is a record; "
               "add --overwrite only before the capture it predicts" if exists else
               f"name the set(s) to predict: {', '.join(sorted(SETS))}")
        print(f"python -m lapis.validate.blind: {why}", file=sys.stderr)
        return 2
    for n in names:
        print(f"wrote {write(n)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
