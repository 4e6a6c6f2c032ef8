"""examples/test_my_layouts.py on the CPU (LAPIS_ORACLE_BACKEND=model): it passes as written, and with the planted
layout bug (LAPIS_EXAMPLE_BUG=sbo, an SBO of 512 B instead of 1024 B) property (b) fails within its 200 examples,
naming the SBO, while (a) and (c), which do not read the descriptor, still pass."""

import importlib.metadata
from pathlib import Path

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "test_my_layouts.py"
PLUGIN = "lapis.testing.pytest_plugin"


def run(pytester, monkeypatch, bug: str | None):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("LAPIS_ORACLE_BACKEND", "model")
    if bug:
        monkeypatch.setenv("LAPIS_EXAMPLE_BUG", bug)
    else:
        monkeypatch.delenv("LAPIS_EXAMPLE_BUG", raising=False)
    installed = any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))
    args = ([] if installed else ["-p", PLUGIN]) + ["--lapis-gpu", "-p", "no:cacheprovider",
                                                    "--hypothesis-show-statistics", "--rootdir", str(ROOT)]
    return pytester.runpytest_subprocess(str(EXAMPLE), *args, timeout=600)


def test_the_planted_sbo_bug_is_found_by_the_descriptor_property(pytester, monkeypatch):
    r = run(pytester, monkeypatch, "sbo")
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "FAILED" in out and "test_b_my_descriptor_reads_what_the_tma_wrote" in out.split("short test summary")[1]
    assert "SBO should be 1024 B = 8 rows x 128 B (descriptor has 512 B)" in out


def test_the_suite_passes_as_written(pytester, monkeypatch):
    r = run(pytester, monkeypatch, None)
    r.assert_outcomes(passed=3)
    assert r.stdout.str().count("200 passing, 0 failing") == 3
