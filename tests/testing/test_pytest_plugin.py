"""The lapis pytest plugin, run inside throwaway pytest sessions (pytester): the lapis_gpu marker, --lapis-gpu,
the skip reasons, and the session-scoped lapis_oracle fixture."""

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import lapis.testing.pytest_plugin  # noqa: F401 (loaded here, so the in-process sessions share numpy with this one)

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "lapis.testing.pytest_plugin"

SUITE = """
import pytest

@pytest.mark.lapis_gpu
def test_uses_the_oracle(lapis_oracle):
    assert lapis_oracle.ping()["backend"] == "model"
    pytest.ORACLES = getattr(pytest, "ORACLES", []) + [id(lapis_oracle)]

@pytest.mark.lapis_gpu
def test_shares_the_oracle(lapis_oracle):
    assert pytest.ORACLES == [id(lapis_oracle)]
    assert lapis_oracle.starts == 1

def test_plain():
    pass
"""


def plugin_args() -> list[str]:
    """-p for the plugin unless the installed lapis already registers it (pytest refuses it twice)."""
    installed = any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_lapis_gpu_tests_skip_without_the_option_and_say_how_to_run_them(suite):
    r = suite.runpytest(*plugin_args(), "-rs")
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines(["*pass --lapis-gpu to run it against the GPU oracle*"])


def test_with_the_option_and_no_gpu_they_skip_with_the_device_reason(suite, monkeypatch):
    monkeypatch.setenv("LAPIS_ORACLE_BACKEND", "gpu")  # this machine has no GPU (nor cupy)
    r = suite.runpytest(*plugin_args(), "--lapis-gpu", "-rs")
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines(["*no usable GPU for the lapis oracle*"])


def test_with_the_model_backend_they_run_on_one_session_oracle(suite, monkeypatch):
    monkeypatch.setenv("LAPIS_ORACLE_BACKEND", "model")
    r = suite.runpytest(*plugin_args(), "--lapis-gpu", "-p", "no:randomly")
    r.assert_outcomes(passed=3)


def test_the_marker_is_registered_as_lapis_gpu_never_gpu(suite):
    r = suite.runpytest(*plugin_args(), "--markers")
    r.stdout.fnmatch_lines(["@pytest.mark.lapis_gpu: property test checked against the GPU oracles*"])
    assert "@pytest.mark.gpu:" not in r.stdout.str()
    suite.runpytest(*plugin_args(), "--strict-markers").assert_outcomes(passed=1, skipped=2)


def test_the_option_is_in_the_help(suite):
    suite.runpytest(*plugin_args(), "--help").stdout.fnmatch_lines(["*--lapis-gpu*"])


def test_the_plugin_is_the_lapis_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"lapis": PLUGIN}
    assert any(d.startswith("hypothesis") for d in project["optional-dependencies"]["testing"])
