"""The schedule layer's shape: short functions, every built-in schedule an object in the registry, roles at the
top level of their modules, and traces Perfetto shows right for every schedule."""

import ast
import json
from pathlib import Path

import pytest

from lapis.cli import main
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.simulate import SCHEDULES
from lapis.pipeline_sim.trace import check_chrome, flow_pairs

PIPELINE_SIM = Path(__file__).resolve().parents[2] / "lapis" / "pipeline_sim"
MAX_LINES = 80
# One role that waits for its own loads: no barrier passes anything from one role to another, so no flow to draw.
NO_HAND_OFF = {"h200-s1-serial": "one warpgroup loads Q, K, V itself and waits for each (the kernel's s1)"}
# the sm120 TMA ring (m06 on, and the refused moves on m07): at the small shape every K/V tile lands (TMA latency
# 130 ns, the rtx5090 profile's) before a warp asks for it, so no mbarrier wait, and no hand-off, is drawn
NO_HAND_OFF.update({name: "the TMA ring's tiles land before the math waits for them" for name in (
    "sm120-m06-tma", "sm120-m07-register-tiling", "sm120-r2-fast-exp", "sm120-r3-ring-d3", "sm120-r3-ring-d4")})


def test_no_function_in_pipeline_sim_is_longer_than_80_lines():
    long = []
    for path in PIPELINE_SIM.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(PIPELINE_SIM)}:{node.name} {n} lines")
    assert long == []


def test_every_built_in_schedule_is_a_schedule_object_run_by_the_engine():
    assert len(SCHEDULES) == 44  # 39 and the five sm120 schedules of the Emmy write-up's refused moves
    assert all(isinstance(s, Schedule) and s.launch is not None for s in SCHEDULES.values())


def small(s: Schedule) -> str:
    return "512x512x1024" if s.shape == "gemm" else "1x2x1024x64" if s.arch == "sm120" else "1x2x1024x128"


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_writes_a_trace_with_names_and_flows(name, tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["simulate", "--schedule", name, "--shape", small(SCHEDULES[name]), "--trace", str(path)]) == 0
    trace = json.loads(path.read_text())
    assert check_chrome(trace) == []
    if name in NO_HAND_OFF:
        assert flow_pairs(trace) == 0, NO_HAND_OFF[name]
    else:
        assert flow_pairs(trace) > 0, "no barrier hand-off drawn"
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {(e["pid"], e.get("tid")) for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {(e["pid"], None) for e in xs} <= names
