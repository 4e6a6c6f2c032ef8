"""Hardware profiles: data files in lapis/data/profiles, every value with its unit and source.

A value marked 'assumed' in its source has no measurement behind it. h200.json is fitted from the microbenchmark
captures (lapis.model.fit); b200.json and rtx5090.json hold datasheet values. Rates in the profile are per SM per
clock; `Profile.per_ns()` turns them into per-ns numbers (times clock_ghz).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from lapis.data import PROFILES
from lapis.errors import CaptureError, ScheduleError


@dataclass(frozen=True)
class Profile:
    name: str
    arch: str
    values: dict  # name -> {"value", "unit", "source"}

    def __getitem__(self, key: str) -> float:
        return self.values[key]["value"]

    def per_ns(self, per_clk_key: str) -> float:
        """A per-clock-per-SM rate as a per-ns-per-SM rate."""
        return self[per_clk_key] * self["clock_ghz"]

    @property
    def hbm_bytes_per_ns(self) -> float:
        return self["hbm_tb_s"] * 1e3  # TB/s = 1e12 B/s = 1e3 B/ns

    @property
    def peak_tensor_tflops(self) -> float:
        return self["sm_count"] * self.per_ns("tensor_flop_per_clk_sm") / 1e3


def profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.json"))


def load_profile(name: str) -> Profile:
    """The profile `name` (h200, b200, rtx5090). ScheduleError naming the available ones for another name, and for
    a value without its unit or source; CaptureError naming the file (and the key) for one that is not UTF-8 JSON,
    lacks name, arch or a values object, or holds a value that is not a finite number above zero (every value is a
    count, a size, a rate, a latency or a clock: a 0 would divide by zero, a negative or NaN one give wrong times)."""
    path = PROFILES / f"{name}.json"
    if name not in profiles():
        raise ScheduleError("unknown GPU profile", repr(name), "use one of " + ", ".join(profiles()))
    fix = f"restore it: git checkout -- lapis/data/profiles/{name}.json (h200's: python -m lapis.model.fit)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CaptureError("a GPU profile is a readable JSON file", f"{path}: {e}"[:300], fix) from None
    if (not isinstance(data, dict) or not isinstance(data.get("values"), dict) or not data["values"]
            or not all(isinstance(data.get(k), str) for k in ("name", "arch"))):
        raise CaptureError("a GPU profile holds name, arch and a non-empty values object", str(path), fix)
    for key, v in data["values"].items():
        if not isinstance(v, dict) or not {"value", "unit", "source"} <= set(v):
            raise ScheduleError("profile value without unit or source", f"{name}.{key}", "give value, unit, source")
        x = v["value"]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
            raise CaptureError("a profile value is a finite number above zero", f"{path}: {key} = {x!r}", fix)
    return Profile(data["name"], data["arch"], data["values"])
