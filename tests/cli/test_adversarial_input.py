"""Bad input found by adversarial testing: each is refused with the rule, the value and a fix (exit 2), quickly,
with no traceback; never a silently wrong result nor a run that takes minutes."""

import json

import pytest

from lapis.cli import main

SIMULATE_CASES = [
    # a head dimension no 16-bit MMA can step through (k16): was simulated silently
    (["h200-s2-ws-ring", "--shape", "1x1x128x7"], "got D = 7"),
    (["b200-k01-baseline", "--shape", "1x1x128x100"], "got D = 100"),
    # sm120 named L although L divided the tiles and D was at fault
    (["sm120-m01-tensor-cores", "--shape", "1x1x128x100"], "got D = 100"),
    # wgmma N and K: were simulated silently
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_n=7"], "block_n is wgmma's N"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_n=264"], "got 264"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_k=8"], "block_k is stepped by wgmma's K"),
    # 9 warpgroups = 1152 threads, and 512 accumulator registers per thread: were simulated silently
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "consumer_wgs=8", "--param", "block_m=512",
      "--param", "stages=1", "--param", "mma_in_flight=0"], "at most 1024 threads"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_m=256", "--param", "consumer_wgs=1",
      "--param", "block_n=256", "--param", "stages=2"], "= 512"),
    # named the stage rule ("use stages >= 0") for a negative or fractional mma_in_flight
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "mma_in_flight=-1"], "mma_in_flight is a count"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "mma_in_flight=1.5"], "whole number >= 0"),
    # argparse read '-1x128x128' as an option: "expected one argument", no rule named
    (["h200-gemm-ws", "--shape", "-1x128x128"], "GEMM extents must be positive"),
    (["h200-s2-ws-ring", "--shape", "-1x1x128x128"], "shape extents must be positive"),
]


@pytest.mark.parametrize("argv, message", SIMULATE_CASES)
def test_simulate_refuses_with_the_rule(argv, message, capsys):
    assert main(["simulate", "--schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["h200-gemm-ws", "--shape", "1000000x1000000x1000000"],       # took 35 s to reach the in-run bound
    ["h200-gemm-ws", "--shape", "99999999999999999999x1x1"],      # MemoryError traceback
    ["h200-s2-ws-ring", "--shape", "100000x100000x1024x128"],      # ran past a minute building work lists
    ["h200-s2-ws-ring", "--shape", "100000000x1x256x128"],
])
def test_huge_shapes_are_refused_before_any_work_list_is_built(argv, capsys, monkeypatch):
    from lapis.pipeline_sim import engine

    def no_run(*a, **k):
        raise AssertionError("the run started: the refusal must come first")
    monkeypatch.setattr(engine, "run", no_run)
    assert main(["simulate", "--schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert "exceeds the simulator's event bound" in err and "at least" in err


def test_the_size_bound_is_a_lower_bound(monkeypatch):
    """2048x2048x4096 on h200-gemm-ws: 256 tiles on 132 SMs, so the busiest SM runs 2 tiles x 64 K blocks = 128
    K blocks; the up-front check passes at a bound of 128 and refuses at 127 (the run itself records more)."""
    from lapis.errors import ScheduleError
    from lapis.pipeline_sim import recorder
    from lapis.pipeline_sim.simulate import check_size
    prm = dict(block_m=128, block_n=128, block_k=64)
    monkeypatch.setattr(recorder, "MAX_EVENTS", 128)
    check_size("gemm", (2048, 2048, 4096), prm, 132)
    monkeypatch.setattr(recorder, "MAX_EVENTS", 127)
    with pytest.raises(ScheduleError, match="at least 128 tile-level events"):
        check_size("gemm", (2048, 2048, 4096), prm, 132)


@pytest.mark.parametrize("flag", ["--trace", "--figure"])
def test_an_output_the_os_refuses_is_named_not_a_traceback(flag, capsys, monkeypatch):
    """/proc is a folder, looks writable to root, and refuses new files: refused before the simulation runs."""
    from lapis.cli import simulate as cli_simulate
    monkeypatch.setattr(cli_simulate, "simulate", lambda *a, **k: pytest.fail("simulated before the path check"))
    suffix = ".json" if flag == "--trace" else ".png"
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", flag, "/proc/t" + suffix]) == 2
    err = capsys.readouterr().err
    assert f"{flag} must be in a folder lapis can write, and '/proc' refuses new files" in err
    assert "Traceback" not in err


def test_a_write_that_fails_after_the_run_is_named(tmp_path, capsys, monkeypatch):
    """A disk that fills during the run: the OS error is named after the flag, not a traceback."""
    from lapis.cli import simulate as cli_simulate

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(cli_simulate, "write_chrome", full)
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", "--trace",
                 str(tmp_path / "t.json")]) == 2
    assert "--trace could not be written (No space left on device)" in capsys.readouterr().err


def test_compare_png_and_report_out_the_os_refuses(capsys):
    assert main(["compare", "--schedule", "h200-gemm-ws", "--shape", "4096x4096x4096", "--figure", "/proc/c.png"]) == 2
    assert "--figure must be in a folder lapis can write" in capsys.readouterr().err
    assert main(["report", "--out", "/proc/lapis-report"]) == 2
    assert "--out must be a folder lapis can write" in capsys.readouterr().err


def _manifest(tmp_path, edit):
    from lapis.model.fit import MANIFEST
    m = json.loads(MANIFEST.read_text())
    edit(m["h200"])
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(m))
    return str(path)


@pytest.mark.parametrize("edit, message", [
    (lambda e: e["captures"].append("micro/missing/micro/results.json"), "a capture the manifest lists cannot be read"),
    (lambda e: e.pop("captures"), "missing ['captures']"),
])
def test_fit_refuses_a_broken_manifest(edit, message, tmp_path, capsys):
    from lapis.model.fit import main as fit_main
    out = tmp_path / "h200.json"
    assert fit_main(["--manifest", _manifest(tmp_path, edit), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_fit_refuses_an_unreadable_manifest_and_an_unwritable_out(tmp_path, capsys):
    from lapis.model.fit import main as fit_main
    (tmp_path / "bad.json").write_text("{not json")
    assert fit_main(["--manifest", str(tmp_path / "bad.json"), "--out", str(tmp_path / "p.json")]) == 2
    assert "cannot be read as JSON" in capsys.readouterr().err
    assert fit_main(["--out", "/proc/h200.json"]) == 2
    assert "--out could not be written" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    ([], "name the set(s) to predict"),                      # used to rewrite every blind file
    (["nope"], "unknown prediction set(s) ['nope']"),        # used to raise KeyError
    (["gemm_ws", "nope"], "unknown prediction set(s)"),      # used to rewrite gemm_ws.json, then raise
    (["gemm_ws"], "lapis/data/blind/gemm_ws.json exists"),        # a committed blind record is kept
])
def test_blind_predictions_refuse_before_writing(argv, message, capsys, monkeypatch):
    from lapis.validate import blind as blind_predictions
    monkeypatch.setattr(blind_predictions, "write", lambda n: pytest.fail(f"wrote {n}"))
    assert blind_predictions.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("module, words", [("bench_gemm", "lapis capture gemm: needs an NVIDIA GPU"),
                                           ("capture_micro", "lapis capture micro: needs an NVIDIA GPU")])
def test_gpu_entry_points_without_a_gpu_exit_2_with_a_message_not_a_traceback(module, words, tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    from lapis.gpu.harness import gpu_present
    if gpu_present():
        pytest.skip("a GPU is present: this checks the machine without one")
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", f"lapis.gpu.{module}", "--out", str(tmp_path / "o"), "--provenance",
                        str(tmp_path / "p.json")], capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_causal_flag_and_param_must_agree(capsys):
    from lapis.cli import main
    assert main(["simulate", "--schedule", "h200-s9-tuned", "--shape", "1x2x1024x128", "--param", "causal=0",
                 "--causal"]) == 2
    assert "--causal and --param causal disagree" in capsys.readouterr().err


def test_a_trace_write_interrupted_halfway_leaves_the_previous_trace(tmp_path, monkeypatch):
    # the trace was written in place: a kill while json.dump ran left half a JSON file over the previous trace
    from lapis.pipeline_sim import trace
    out = tmp_path / "t.json"
    out.write_text('{"traceEvents": []}')

    def interrupted(obj, f):
        f.write('{"traceEvents": [{"name": ')
        raise KeyboardInterrupt
    monkeypatch.setattr(trace.json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", "--trace", str(out)])
    assert out.read_text() == '{"traceEvents": []}' and [p.name for p in tmp_path.iterdir()] == ["t.json"]
