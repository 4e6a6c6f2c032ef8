"""Blind predictions: the simulator's numbers for real kernels, committed before the kernels' first timed run.

Each file lapis/data/blind/<name>.json holds one entry per (variant, shape): the schedule and parameters that mirror
the kernel, the predicted time (µs) and TFLOP/s, and the profile and model hashes it came from. The git history
shows the file landing before the capture it predicts; a CPU test keeps the file consistent with the code that
wrote it (a re-run with the same profile and model must reproduce it), and `lapis compare` reads it.

    python -m lapis.validate.blind attention_h200_s4   # writes lapis/data/blind/attention_h200_s4.json (a new set)
    python -m lapis.validate.blind --overwrite attention_h200   # re-made before its capture only
"""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path

import lapis
from lapis.catalog import attention, gemm
from lapis.data import BLIND
from lapis.pipeline_sim.predictions import model_hash, profile_hash
from lapis.pipeline_sim.simulate import simulate


def gemm_ws_cases() -> list[dict]:
    """The GEMM kernel's benchmark cases (lapis.gpu.bench_gemm defaults) on schedule h200-gemm-ws."""
    return [dict(variant=v, schedule="h200-gemm-ws", gpu="h200", shape=f"{n}x{n}x{n}", params=dict(gemm.VARIANTS[v]))
            for v in gemm.DEFAULT_VARIANTS for n in gemm.DEFAULT_SIZES]


def gemm_ws_n256_cases() -> list[dict]:
    """The opt-in block_n 256 GEMM variant at 4096^3 and 8192^3 (added after the first capture, before its own)."""
    return [dict(variant="ws_s4_c2_n256", schedule="h200-gemm-ws", gpu="h200", shape=f"{n}x{n}x{n}",
                 params=dict(gemm.VARIANTS["ws_s4_c2_n256"])) for n in (4096, 8192)]


def _attention_cases(variants: tuple) -> list[dict]:
    av = attention.VARIANTS
    return [dict(variant=v, schedule=av[v]["schedule"], gpu="h200", shape=s, params=attention.sim_params(av[v]))
            for v in variants if v in av for s in attention.DEFAULT_SHAPES]


def attention_h200_cases() -> list[dict]:
    """The Hopper attention kernels s1, s2 (lapis.gpu.bench_attention) at its five shapes, non-causal."""
    return _attention_cases(("s1", "s2"))


def attention_h200_s3s4_cases() -> list[dict]:
    """s3 (two consumer warpgroups) at the five shapes, committed before its first timed run (set
    attention_h200_s3s4; s1 and s2 are attention_h200, s4 has its own set, attention_h200_s4)."""
    return _attention_cases(("s3",))


def attention_h200_s4_cases() -> list[dict]:
    """s4 (named-barrier ping-pong of the two consumer warpgroups) at the five shapes, committed before its first
    timed run; a set of its own so that attention_h200_s3s4.json (s3's record) stays as committed."""
    return _attention_cases(("s4",))


def attention_h200_s5_cases() -> list[dict]:
    """s5 (s4 + QK_j issued ahead of softmax_j, overlapping PV_{j-1}) at the five shapes, before its first timed run."""
    return _attention_cases(("s5",))


def attention_h200_s6s7_cases() -> list[dict]:
    """s6 (exp2 in log2 units, ex2.approx.ftz) at emulate_frac 0, 1/8, 1/4, and s7 (conditional O rescale,
    threshold 8) at the five shapes, committed before their first timed run."""
    return _attention_cases(("s6", "s6_emu8", "s6_emu4", "s7"))


def attention_h200_s8_cases() -> list[dict]:
    """s8 (s7 on a persistent grid: 132 CTAs, grid-stride work items) at the five shapes, before its first timed run."""
    return _attention_cases(("s8",))


def attention_h200_s9_cases() -> list[dict]:
    """s9 (s8 at the tuned defaults: 3 stages, one Q slot) at the five shapes, before its first timed run."""
    return _attention_cases(("s9",))


def attention_h200_s9_causal_cases() -> list[dict]:
    """s9's causal build (causal = 1, heaviest Q tiles first) at the five shapes, before its first timed run."""
    v = attention.VARIANTS["s9"]
    return [dict(variant="s9", causal=True, schedule=v["schedule"], gpu="h200", shape=s,
                 params=attention.sim_params(v, True)) for s in attention.DEFAULT_SHAPES]


SETS = {"gemm_ws": gemm_ws_cases, "gemm_ws_n256": gemm_ws_n256_cases, "attention_h200": attention_h200_cases,
        "attention_h200_s3s4": attention_h200_s3s4_cases, "attention_h200_s4": attention_h200_s4_cases,
        "attention_h200_s5": attention_h200_s5_cases, "attention_h200_s6s7": attention_h200_s6s7_cases,
        "attention_h200_s8": attention_h200_s8_cases, "attention_h200_s9": attention_h200_s9_cases,
        "attention_h200_s9_causal": attention_h200_s9_causal_cases}


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
    return json.loads((BLIND / f"{name}.json").read_text())


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
