"""Hardware profiles: data files in lapis/data/profiles, every value with its unit and source.

A value marked 'assumed' in its source has no measurement behind it. h200.json is fitted from the microbenchmark
captures (lapis.model.fit); b200.json and rtx5090.json hold datasheet values. Rates in the profile are per SM per
clock; `Profile.per_ns()` turns them into per-ns numbers (times clock_ghz).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lapis.data import PROFILES
from lapis.errors import ScheduleError


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
    """The profile `name` (h200, b200, rtx5090); ScheduleError naming the available ones."""
    path = PROFILES / f"{name}.json"
    if name not in profiles():
        raise ScheduleError("unknown GPU profile", repr(name), "use one of " + ", ".join(profiles()))
    data = json.loads(path.read_text())
    for key, v in data["values"].items():
        if not {"value", "unit", "source"} <= set(v):
            raise ScheduleError("profile value without unit or source", f"{name}.{key}", "give value, unit, source")
    return Profile(data["name"], data["arch"], data["values"])
