"""The command a capture's provenance records (lapis.gpu.capture_tma.command_line): as run, never doubled."""

import inspect

import pytest

from lapis.gpu import capture_tma


@pytest.mark.parametrize("program, argv, command", [
    # sys.argv[1:] of `lapis capture tma ...` repeats the subcommand: recorded once
    ("lapis capture tma", ["capture", "tma", "--out", "/root/out", "--tags", "tf32-round"],
     "lapis capture tma --out /root/out --tags tf32-round"),
    ("lapis capture tma", ["--out", "/root/out", "--what", "all"], "lapis capture tma --out /root/out --what all"),
    ("lapis capture wgmma", ["run", "--inputs", ".wgmma-inputs"], "lapis capture wgmma run --inputs .wgmma-inputs"),
    ("python -m lapis.gpu.race", ["--out", "/root/out dir"], "python -m lapis.gpu.race --out '/root/out dir'"),
])
def test_the_command_is_recorded_as_run(program, argv, command):
    assert capture_tma.command_line(program, argv) == command


def test_every_caller_names_its_program():
    """No default program: `lapis capture tma` was recorded for the wgmma campaign ("lapis capture tma wgmma run")."""
    assert inspect.signature(capture_tma.provenance).parameters["program"].default is inspect.Parameter.empty
