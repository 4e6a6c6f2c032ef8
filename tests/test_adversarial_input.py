"""Bad input found by adversarial testing: each is refused with the rule, the value and a fix (exit 2), quickly,
with no traceback; never a silently wrong result nor a run that takes minutes."""


import pytest

from lapis.cli import main

SIMULATE_CASES = [
    # argparse read '-1x128x128' as an option: "expected one argument", no rule named
    (["h200-gemm-ws", "--shape", "-1x128x128"], "GEMM extents must be positive"),
    (["h200-s2-ws-ring", "--shape", "-1x1x128x128"], "shape extents must be positive"),
]


@pytest.mark.parametrize("argv, message", SIMULATE_CASES)
def test_simulate_refuses_with_the_rule(argv, message, capsys):
    assert main(["simulate", "--schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--trace", "--png"])
def test_an_output_the_os_refuses_is_named_not_a_traceback(flag, capsys):
    """/proc is a folder, looks writable to root, and refuses new files: the write used to raise."""
    suffix = ".json" if flag == "--trace" else ".png"
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", flag, "/proc/t" + suffix]) == 2
    err = capsys.readouterr().err
    assert f"{flag} could not be written" in err and "Traceback" not in err


def test_compare_png_and_report_out_the_os_refuses(capsys):
    assert main(["compare", "--schedule", "h200-gemm-ws", "--shape", "4096x4096x4096", "--png", "/proc/c.png"]) == 2
    assert "--png could not be written" in capsys.readouterr().err
    assert main(["report", "--out", "/proc/lapis-report"]) == 2
    assert "--out must be a folder lapis can write" in capsys.readouterr().err
