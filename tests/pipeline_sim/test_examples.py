"""The two schedules in examples/, written with the public API only: they run from their files, through the CLI
and the sweep, predict what their structure implies, and the simulator catches a planted deadlock and race."""

import ast
import json
from pathlib import Path

import pytest

from lapis.cli import main
from lapis.pipeline_sim import TmaPipeline
from lapis.pipeline_sim.deadlock import Deadlock
from lapis.pipeline_sim.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GEMM, FA3 = f"{EXAMPLES}/ws_gemm.py:WS_GEMM", f"{EXAMPLES}/fa3_attention.py:FA3"
SMALL = {GEMM: "1024x1024x512", FA3: "1x4x1024x128"}


def test_examples_import_only_the_public_api():
    """The schedule examples use the public schedule API alone; the property-test example uses the layouts'
    public modules, the strategies and the GPU oracle a user's own suite would."""
    schedules = {"lapis.pipeline_sim", "lapis.errors"}
    layouts = {"lapis.gpu.oracle", "lapis.layouts.canonical", "lapis.layouts.descriptors.agreement",
               "lapis.layouts.descriptors.sm90", "lapis.layouts.tma", "lapis.testing.strategies"}
    public = {"ws_gemm.py": schedules, "fa3_attention.py": schedules, "test_my_layouts.py": layouts}
    assert {p.name for p in EXAMPLES.glob("*.py")} - {"run_ws_gemm_timeline.py"} == set(public)
    for name, allowed in public.items():
        tree = ast.parse((EXAMPLES / name).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert {m for m in mods if m and m.startswith("lapis")} <= allowed, name


def test_the_persistent_gemm_is_the_built_in_gemm_without_its_ring_drains():
    """Same costs, same ring; the persistent CTA keeps its ring across tiles, so it is at most a few % faster."""
    ex = simulate(GEMM, "h200", "8192x8192x8192")
    built_in = simulate("h200-gemm-ws", "h200", "8192x8192x8192")
    assert 0.95 < ex["predicted_us"] / built_in["predicted_us"] < 1.0
    # a 4-stage ring hides everything but the busiest unit: it is busy for the whole run
    assert max(ex["utilization"].values()) > 0.97 and ex["work"]["k_blocks"] == 128


def test_the_fa3_mainloop_keeps_the_tensor_pipe_busy_when_the_softmax_is_shorter_than_the_gemms():
    """Two warpgroups' GEMMs (QK and PV, 2 x 64 rows) take longer than one softmax tile, so ping-pong hides the
    softmax: the tensor pipe is the busiest unit, and the run is within 10% of its busy time."""
    r = simulate(FA3, "h200", "8x16x4096x128")
    assert r["bound_by"] == "tensor" and r["utilization"]["tensor"] > 0.9
    assert r["utilization"]["softmax"] < r["utilization"]["tensor"]


def test_a_softmax_longer_than_the_gemms_bounds_the_fa3_mainloop():
    """With 40 FMA-pipe ops per score the softmax tile outlasts the other warpgroup's GEMMs: softmax-bound."""
    r = simulate(FA3, "h200", "8x16x4096x128", {"fma_ops": 40})
    assert r["bound_by"] == "softmax" and r["utilization"]["softmax"] > 0.9


@pytest.mark.parametrize("name", [GEMM, FA3])
def test_examples_run_from_the_cli_with_races_and_a_trace(name, tmp_path, capsys):
    from lapis.pipeline_sim.trace import check_chrome, flow_pairs
    trace = tmp_path / "t.json"
    assert main(["simulate", "--schedule", name, "--shape", SMALL[name], "--races", "--trace", str(trace)]) == 0
    assert "races: 0 found" in capsys.readouterr().out
    t = json.loads(trace.read_text())
    assert check_chrome(t) == [] and flow_pairs(t) > 0


def test_the_sweep_runs_a_schedule_from_a_file(tmp_path, capsys):
    assert main(["sweep", "--schedule", GEMM, "--shapes", "1024x1024x1024", "--grid", "stages=3,4",
                 "--executor", "serial", "--out", str(tmp_path / "sw"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["configurations"] == 2 and out["fits"] == 2


@pytest.mark.parametrize("name, ring", [(GEMM, "ring"), (FA3, "K")])
def test_a_consumer_that_never_releases_deadlocks_with_its_wait_cycle(name, ring, monkeypatch):
    monkeypatch.setattr(TmaPipeline, "consumer_release", lambda self, st, role: None)
    with pytest.raises(Deadlock) as e:
        simulate(name, "h200", SMALL[name])
    text = str(e.value)
    assert f"producer waits on {ring}.empty[" in text and ".full[" in text and "for producer" in text


@pytest.mark.parametrize("name, ring", [(GEMM, "ring"), (FA3, "V")])
def test_a_consumer_that_releases_at_its_wait_races_with_the_next_copy(name, ring, monkeypatch):
    """Released as soon as the bytes landed (before the MMA read them): the next copy into the slot is unordered
    with the read."""
    wait, release = TmaPipeline.consumer_wait, TmaPipeline.consumer_release

    def wait_then_release(self, st, role):
        ev = wait(self, st, role)
        ev.callbacks.append(lambda _: release(self, st.copy(), role))
        return ev

    monkeypatch.setattr(TmaPipeline, "consumer_wait", wait_then_release)
    monkeypatch.setattr(TmaPipeline, "consumer_release", lambda self, st, role: None)
    races = simulate(name, "h200", SMALL[name], check_races=True)["races"]
    assert any(f"race on {ring}[" in r and "writes token" in r and "reads token" in r for r in races), races[:3]


def test_a_name_the_file_does_not_define_is_told_the_ones_it_does(tmp_path, capsys):
    assert main(["simulate", "--schedule", f"{EXAMPLES}/ws_gemm.py:NOPE", "--shape", SMALL[GEMM]]) == 2
    err = capsys.readouterr().err
    assert (f"the NAME of path/to/file.py:NAME is a Schedule the file defines: got {EXAMPLES}/ws_gemm.py defines "
            f"no name 'NOPE'; fix: name one of the Schedules the file defines: {GEMM}") in err
    assert "NoneType" not in err
    # a name bound to something else, in a file that defines no Schedule
    (tmp_path / "mine.py").write_text("STAGES = 3\n")
    assert main(["simulate", "--schedule", f"{tmp_path}/mine.py:STAGES", "--shape", SMALL[GEMM]]) == 2
    err = capsys.readouterr().err
    assert f"got {tmp_path}/mine.py's STAGES is 3 (int), not a Schedule; fix: define one in the file" in err
