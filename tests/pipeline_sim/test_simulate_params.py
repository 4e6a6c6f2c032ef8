"""Bad schedule input is refused up front with the rule, the value and a fix; never a traceback."""

import pytest

from lapis.cli import main
from lapis.pipeline_sim.simulate import parse_params

CASES = [
    (["h200-s4-pingpong", "--shape", "0x16x4096x128"], "shape extents must be positive"),
    (["b200-k07-compute-pipeline", "--shape", "0x16x4096x128"], "shape extents must be positive"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_k=0"], "block_k is a count"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "block_n=-128"], "got -128"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "consumer_wgs=1.5"], "whole number"),
    (["h200-s4-pingpong", "--shape", "1x16x1024x128", "--param", "stages=0"], "stages is a count"),
    (["h200-s6-exp2", "--shape", "1x16x4096x128", "--param", "emulate_frac=25"], "emulate_frac must lie in [0, 1]"),
    (["h200-s7-cond-rescale", "--shape", "1x16x1024x128", "--param", "threshold=-1"], "threshold must lie"),
    (["h200-s7-cond-rescale", "--shape", "1x16x1024x128", "--param", "causal=2"], "causal must lie in [0, 1]"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--causal"], "causal masking is not modelled"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--param", "stages=abc"], "must be a number"),
    (["h200-gemm-ws", "--shape", "512x512x512", "--trace", "/nonexistent/t.json"], "--trace must name a .json"),
]


@pytest.mark.parametrize("argv, message", CASES)
def test_bad_input_is_named(argv, message, capsys):
    assert main(["simulate", "--schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "fix:" in err


def test_fractions_are_accepted_where_a_parameter_is_one():
    assert parse_params(["emulate_frac=0.25", "stages=3", "threshold=0.5"]) == dict(
        emulate_frac=0.25, stages=3, threshold=0.5)
    assert main(["simulate", "--schedule", "h200-s6-exp2", "--shape", "1x16x1024x128", "--param",
                 "emulate_frac=0.25"]) == 0


def test_a_run_past_the_event_bound_ends_with_a_named_error(monkeypatch, capsys):
    from lapis.pipeline_sim import recorder
    monkeypatch.setattr(recorder, "MAX_EVENTS", 500)  # this run records 1019 events on its SM
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x4096"]) == 2
    assert "more than 500 tile-level events" in capsys.readouterr().err
    monkeypatch.setattr(recorder, "MAX_EVENTS", 10**6)
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x4096"]) == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "3", [3], True])
def test_params_of_the_wrong_kind_are_refused_in_python(value):
    from lapis.errors import ScheduleError
    from lapis.pipeline_sim.simulate import simulate
    with pytest.raises(ScheduleError, match="must be a finite number"):
        simulate("h200-gemm-ws", "h200", "512x512x512", {"stages": value})


def test_nan_on_the_command_line_and_unwritable_outputs(capsys, tmp_path):
    assert main(["simulate", "--schedule", "h200-s6-exp2", "--shape", "1x1x128x128", "--param",
                 "emulate_frac=nan"]) == 2
    assert "finite number" in capsys.readouterr().err
    (tmp_path / "d.png").mkdir()
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "512x512x512", "--figure",
                 str(tmp_path / "d.png")]) == 2
    assert "--figure must name a regular file, and this is a folder" in capsys.readouterr().err


def test_schedules_stay_on_their_own_architecture(capsys):
    assert main(["simulate", "--schedule", "h200-s3-two-consumers", "--shape", "1x1x256x128", "--gpu", "b200"]) == 2
    assert "written for sm90 hardware" in capsys.readouterr().err
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "512x512x512", "--gpu",
                 "../profiles/h200"]) == 2
    assert "unknown GPU profile" in capsys.readouterr().err


def test_a_prediction_above_the_roofline_is_flagged(monkeypatch, capsys):
    from types import SimpleNamespace

    from lapis.model import roofline
    monkeypatch.setattr(roofline, "gemm", lambda *a: SimpleNamespace(tflops=lambda: 1.0, bound_by="hbm"))
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "512x512x512"]) == 0
    assert "beats the roofline" in capsys.readouterr().err


def test_arguments_of_the_wrong_type_are_named():
    import pytest as _pytest

    from lapis.errors import ScheduleError
    from lapis.pipeline_sim.simulate import simulate as _simulate
    with _pytest.raises(ScheduleError, match="params is a dict"):
        _simulate("h200-s9-tuned", "h200", "1x2x1024x128", [1, 2])
    with _pytest.raises(ScheduleError, match="max_events is a positive integer"):
        _simulate("h200-s9-tuned", "h200", "1x2x1024x128", max_events=0)


@pytest.mark.parametrize("kw,words", [
    ({"cut": "x"}, "cut is None or a function"), ({"progress": 5}, "progress is None or a function"),
    ({"check_races": "yes"}, "check_races is True or False: got str 'yes'"), ({"full": 1}, "full is True or False"),
    ({"stall_s": -1}, "stall_s (the wall-clock seconds"), ({"stall_s": float("nan")}, "stall_s (the wall-clock"),
])
def test_simulate_refuses_arguments_of_the_wrong_type_before_running(kw, words):
    from lapis.errors import ScheduleError
    from lapis.pipeline_sim.simulate import simulate
    with pytest.raises(ScheduleError) as e:
        simulate("h200-s8-persistent", "h200", "1x2x512x128", **kw)
    assert words in str(e.value)


def test_a_parameter_given_twice_is_refused_naming_it(capsys):
    from lapis.errors import ScheduleError
    with pytest.raises(ScheduleError, match="each schedule parameter is given once: got 'stages'"):
        parse_params(["stages=2", "block_n=64", "stages=3"])
    assert main(["simulate", "--schedule", "h200-s8-persistent", "--shape", "1x2x512x128", "--param", "stages=2",
                 "--param", "stages=3"]) == 2
    assert "lapis: error: each schedule parameter is given once: got 'stages'" in capsys.readouterr().err


@pytest.mark.parametrize("param, rule", [("q_slots=1.5", "q_slots is a count"),
                                         ("softmax_chains=2.5", "softmax_chains is a count")])
def test_q_slots_and_softmax_chains_are_counts(param, rule, capsys):
    assert main(["simulate", "--schedule", "h200-s9-tuned", "--shape", "1x1x512x128", "--param", param]) == 2
    err = capsys.readouterr().err
    assert rule in err and "whole number" in err and "fix the schedule" not in err


@pytest.mark.parametrize("param, key, value", [("q_slots=2.0", "q_slots", 2), ("softmax_chains=4.0", "softmax_chains", 4)])
def test_a_whole_float_count_runs_as_the_integer(param, key, value):
    from lapis.pipeline_sim.simulate import simulate
    r = simulate("h200-s8-persistent", "h200", "1x1x512x64", parse_params([param]))
    assert r["params"][key] == value and type(r["params"][key]) is int


@pytest.mark.parametrize("schedule, bad, fix", [
    ("h200-s9-tuned", "kernel_loop=zzz", "e.g. --param kernel_loop=own (the schedule's default)"),  # was s4, refused
    ("h200-s8-persistent", "persistent_order=zzz", "e.g. --param persistent_order=grid_stride (the schedule's default)"),
])
def test_an_unknown_name_is_answered_with_a_value_the_schedule_takes(schedule, bad, fix, capsys):
    assert main(["simulate", "--schedule", schedule, "--shape", "1x16x1024x128", "--param", bad]) == 2
    assert fix in capsys.readouterr().err


@pytest.mark.parametrize("item, fix", [
    ("mix=yes", "fix: --param mix=0 or --param mix=1 (its only values)"),
    ("causal=on", "fix: --param causal=0 or --param causal=1 (its only values)"),
    ("emulate_frac=half", "fix: e.g. --param emulate_frac=0"),
    ("regs_consumer=max", "fix: e.g. --param regs_consumer=24"),
    ("stages=abc", "fix: e.g. --param stages=2")])
def test_a_value_that_is_not_a_number_gets_a_valid_suggestion(item, fix):
    from lapis.errors import ScheduleError
    with pytest.raises(ScheduleError) as e:
        parse_params([item])
    key, _, value = item.partition("=")
    assert str(e.value) == f"parameter {key} must be a number: got {value!r}; {fix}"


def test_the_suggested_mix_values_are_the_ones_b200_accepts(capsys):
    argv = ["simulate", "--schedule", "b200-k04-warp-specialization", "--shape", "1x1x256x128", "--param"]
    assert main([*argv, "mix=yes"]) == 2
    assert "fix: --param mix=0 or --param mix=1" in capsys.readouterr().err
    assert main([*argv, "mix=2"]) == 2
    assert "fix: use mix=0 or mix=1" in capsys.readouterr().err
    assert main([*argv, "mix=0"]) == 0 and main([*argv, "mix=1"]) == 0


def test_a_count_below_one_is_told_a_value_the_schedule_takes(capsys):
    # block_n=2 passes the count check but not FA2's multiple-of-16 rule: the fix names the schedule's default
    assert main(["simulate", "--schedule", "h200-flash2", "--shape", "1x1x256x128", "--param", "block_n=0"]) == 2
    err = capsys.readouterr().err
    assert "block_n is a count" in err and "fix: e.g. --param block_n=64 (the schedule's default)" in err
    assert main(["simulate", "--schedule", "h200-flash2", "--shape", "1x1x256x128", "--param", "block_n=64"]) == 0
    # a count the schedule derives (default None) has no single value to suggest: leave it out
    assert main(["simulate", "--schedule", "h200-s9-tuned", "--shape", "1x1x256x128", "--param",
                 "ctas_per_sm=0"]) == 2
    assert "fix: leave ctas_per_sm out: the schedule derives it" in capsys.readouterr().err


def test_numpy_numbers_are_numbers():
    import numpy as np

    from lapis.pipeline_sim.simulate import check_params, simulate
    params = {"stages": np.int64(3), "block_k": np.float32(64.0)}
    check_params("h200-gemm-ws", params, {"stages": 4, "block_k": 64})
    assert params == {"stages": 3, "block_k": 64} and type(params["stages"]) is int and type(params["block_k"]) is int
    params = {"threshold": np.float32(0.5)}
    check_params("h200-s7-cond-rescale", params, {"threshold": 8.0})
    assert params == {"threshold": 0.5} and type(params["threshold"]) is float
    r = simulate("h200-gemm-ws", "h200", "512x512x512", {"stages": np.int32(3)})
    assert r["params"]["stages"] == 3 and r["predicted_us"] == simulate("h200-gemm-ws", "h200", "512x512x512",
                                                                        {"stages": 3})["predicted_us"]
