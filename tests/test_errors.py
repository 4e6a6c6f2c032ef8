"""lapis's error family: each domain raises its own class, every class is a LapisError and a ValueError, and
`lapis` turns each into exit status 2 with "lapis: error:" on stderr and no traceback."""

import importlib
import shutil

import pytest

from lapis.cli.main import main
from lapis.cli.output import check_out_file
from lapis.errors import CaptureError, LapisError, LayoutError, NotModelled, ScheduleError
from lapis.layouts.swizzle import swizzle
from lapis.layouts.tma import EncodeArgs, EncodeRejected, TensorMap, place_box, validate
from lapis.pipeline_sim.simulate import simulate
from lapis.captures.store import SHIPPED, load_capture

FAMILY = (LapisError, LayoutError, EncodeRejected, NotModelled, ScheduleError, CaptureError)
TMA_CAPTURE = "h200-2026-11-29"


def truncated_tma_capture(root):
    """A copy of a shipped TMA capture under root/tma/ whose dumps.npz is cut short (a fresh capture, without
    capture.json, so the archive's own checks find it)."""
    folder = root / "tma" / TMA_CAPTURE
    shutil.copytree(SHIPPED / "tma" / TMA_CAPTURE, folder, ignore=shutil.ignore_patterns("capture.json"))
    with open(folder / "dumps.npz", "r+b") as f:
        f.truncate(1000)
    return folder


def raised(fn, *args):
    with pytest.raises(LapisError) as e:
        fn(*args)
    return e.value


@pytest.mark.parametrize("cls", FAMILY)
def test_every_class_is_a_lapis_error_and_a_value_error(cls):
    assert issubclass(cls, LapisError) and issubclass(cls, ValueError)


@pytest.mark.parametrize("cls", [c for c in FAMILY if c is not EncodeRejected])  # built from rule violations
def test_every_message_names_the_rule_the_value_and_the_fix(cls):
    exc = cls("a rule", 3, "the fix")
    assert str(exc) == "a rule: got 3; fix: the fix" and isinstance(exc, ValueError)


def test_the_family_tree():
    assert issubclass(EncodeRejected, LayoutError)
    for cls in (NotModelled, ScheduleError, CaptureError):
        assert not issubclass(cls, LayoutError) and cls.__bases__ == (LapisError,)


def test_an_unknown_schedule_is_a_schedule_error():
    exc = raised(simulate, "no-such-schedule", "h200", "1x1x1")
    assert type(exc) is ScheduleError and exc.rule == "unknown schedule"


def test_a_shape_the_tiles_do_not_divide_is_a_schedule_error():
    exc = raised(simulate, "h200-s1-serial", "h200", "1x2x1000x128")
    assert type(exc) is ScheduleError and "multiple of the tiles" in exc.rule


def test_causal_masking_on_a_schedule_that_does_not_model_it_is_not_modelled():
    exc = raised(simulate, "h200-gemm-ws", "h200", "512x512x512", {"causal": 1})
    assert type(exc) is NotModelled and "causal masking is not modelled" in exc.fix


def test_a_truncated_npz_capture_is_a_capture_error(tmp_path):
    exc = raised(load_capture, truncated_tma_capture(tmp_path))
    assert type(exc) is CaptureError and exc.rule == "unreadable capture"


def test_a_bad_swizzle_is_a_layout_error():
    exc = raised(swizzle, "96B")
    assert type(exc) is LayoutError and exc.rule == "unknown swizzle mode"


def test_a_tensor_map_the_driver_rejects_is_encode_rejected():
    exc = raised(validate, EncodeArgs(dtype=6, rank=2, global_address=0x1000, dims=[64, 64], strides=[100],
                                      box=[64, 8], elem_strides=[1, 1]))
    assert type(exc) is EncodeRejected and isinstance(exc, LayoutError)


def test_an_interleaved_tma_placement_is_not_modelled():
    t = TensorMap("f16", (8, 4, 4), (16, 64), (8, 2, 2), interleave="16B")
    exc = raised(place_box, t, (0, 0, 0), 0)
    assert type(exc) is NotModelled


def test_an_output_path_in_a_missing_folder_is_a_plain_lapis_error(tmp_path):
    exc = raised(check_out_file, "--png", str(tmp_path / "missing" / "tile.png"), ".png")
    assert type(exc) is LapisError and exc.rule == "--png must name a .png file in an existing folder"


def cli_cases(tmp_path):
    """(argv, the class the command raises, what stderr names) for one input of each domain."""
    captures = tmp_path / "captures"
    truncated_tma_capture(captures)
    return [
        (["simulate", "--schedule", "no-such-schedule", "--shape", "1x1x1"], ScheduleError, "unknown schedule"),
        (["simulate", "--schedule", "h200-gemm-ws", "--shape", "512x512x512", "--causal"], NotModelled,
         "causal masking is not modelled"),
        (["validate", "layouts", "--captures", str(captures)], CaptureError, "unreadable capture"),
        (["layout", "show", "--cute", "garbage"], LayoutError, "not a CuTe layout"),
        (["tma", "place", "--dtype", "f16", "--dims", "8,4,4", "--strides", "16,64", "--box", "8,2,2",
          "--interleave", "16B", "--coords", "0,0,0", "--smem-base", "0"], NotModelled,
         "placement of interleaved tensor maps is not modelled"),
        (["layout", "show", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "64", "--cols", "64",
          "--figure", str(tmp_path / "missing" / "tile.png")], LapisError,
         "--figure must name a .png/.svg/.pdf file"),
    ]


def test_lapis_exits_2_for_each_class_with_a_named_error_and_no_traceback(tmp_path, capsys, monkeypatch):
    cli_main = importlib.import_module("lapis.cli.main")  # lapis.cli.main is also the function lapis.cli exports

    seen = []

    def recording_dispatch(args, dispatch=cli_main._dispatch):
        try:
            return dispatch(args)
        except LapisError as exc:
            seen.append(type(exc))
            raise

    monkeypatch.setattr(cli_main, "_dispatch", recording_dispatch)
    cases = cli_cases(tmp_path)
    assert {cls for _, cls, _ in cases} == {ScheduleError, NotModelled, CaptureError, LayoutError, LapisError}
    for argv, cls, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("lapis: error: ") and words in err and "Traceback" not in err, (argv, err)
        assert seen == [cls], argv
        seen.clear()


def test_a_long_value_is_cut_once_in_the_message_and_kept_whole_on_the_error():
    exc = ScheduleError("a rule", "x" * 100_000, "the fix")
    assert str(exc) == "a rule: got " + "x" * 400 + "... (100000 chars); fix: the fix"
    assert exc.value == "x" * 100_000
    assert str(LayoutError("r", "short", "f")) == "r: got short; fix: f"


def test_the_cli_echoes_a_100_kb_argument_cut(capsys):
    huge = "k" * 100_000
    assert main(["simulate", "--schedule", "h200-s8-persistent", "--shape", "1x2x512x128", "--param",
                 f"{huge}=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lapis: error: h200-s8-persistent has no parameter(s) ['" + "k" * 300)
    assert "... (100004 chars)" in err and len(err) < 2000  # the rule and the value, each cut to 400 characters
    assert main(["simulate", huge]) == 2  # argparse's own message is cut too
    err = capsys.readouterr().err
    assert "... (100" in err and len(err) < 2000
