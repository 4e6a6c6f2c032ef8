"""The kernels' SASS equals the committed digests (tests/data/sass/kernels.json, written by `python -m lapis.gpu.sass`):
every function of every build, in cuobjdump's order, has the committed instruction encodings, so a change to the
sources that should change no instruction (the generated instantiation lists, the pipeline helpers) changes none.
Skipped, with the reason, without nvcc, cuobjdump, nvdisasm or the CUTLASS headers, or under an nvcc release other
than the digests'."""

import json
import shutil
from pathlib import Path

import pytest

from lapis.gpu import sass

DIGESTS = Path(__file__).resolve().parents[1] / "data" / "sass" / "kernels.json"


def test_digests_split_cuobjdump_output_by_function():
    text = ("\tcode for sm_90a\n\t\tFunction : k2\n  /*0000*/ NOP ; /* 0x0000000000007918 */\n"
            "  /* 0x000fc00000000000 */\n\t\tFunction : k1\n  /*0000*/ EXIT ; /* 0x000000000000794d */\n")
    (k2, h2), (k1, h1) = sass.digests(text)
    assert (k2, k1) == ("k2", "k1") and h1 != h2
    assert sass.digests(text.replace("NOP", "NOP  ")) == [[k2, h2], [k1, h1]]  # the encodings, not the text


def test_differences_name_the_build_and_the_function():
    a = dict(builds={"x.cu": {"plain": [["f", "1"], ["g", "2"]]}})
    assert sass.differences(a, a) == []
    b = dict(builds={"x.cu": {"plain": [["f", "1"], ["g", "3"]]}})
    assert sass.differences(a, b) == ["x.cu plain: SASS differs in ['g']"]
    c = dict(builds={"x.cu": {"plain": [["g", "2"], ["f", "1"]]}})
    assert sass.differences(a, c) == ["x.cu plain: functions ['f', 'g'] -> ['g', 'f']"]


def test_only_the_cute_oracles_are_built_with_the_cutlass_headers(tmp_path):
    # the others are built by harness.build (no CUTLASS include folder), sharing the tests' and benches' cubins
    assert {p.name for p in sass.KERNELS.glob("*.cu") if sass.includes_cutlass(p)} == {
        "cutlass_desc_oracle_v1.cu", "cutlass_desc_oracle_v2.cu"}
    for text, uses in [("#include <cute/tensor.hpp>\n", True), ("  #include<cutlass/numeric_types.h>\n", True),
                       ('#include "harness.cuh"\n', False), ("// #include <cute/tensor.hpp>\n", False),
                       ("#include <cuda/barrier>\n", False)]:
        (tmp_path / "k.cu").write_text(text)
        assert sass.includes_cutlass(tmp_path / "k.cu") is uses, text


@pytest.mark.nvcc
def test_every_kernel_build_has_the_committed_sass(kernel_cache):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    if sass.tool_dir() is None:
        pytest.skip("cuobjdump/nvdisasm missing: pip install '.[test]' (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)")
    if sass.cutlass_include() is None:
        pytest.skip("CUTLASS headers missing (the descriptor oracles include CuTe): pip install '.[test]'")
    expected = json.loads(DIGESTS.read_text())
    if sass.nvcc_version() != expected["nvcc"]:
        pytest.skip(f"the digests are of {expected['nvcc']}, nvcc here is {sass.nvcc_version()}")
    got = sass.collect(cache=kernel_cache)
    assert sass.differences(expected, got) == []
    assert set(expected["builds"]) == {p.name for p in sass.KERNELS.glob("*.cu")}


@pytest.mark.parametrize("argv, code, words", [(["--help"], 0, "usage: python -m lapis.gpu.sass"),
                                                ([], 2, "the following arguments are required: FILE.json"),
                                                (["a.json", "b.json"], 2, "unrecognized arguments: b.json")])
def test_the_command_line_prints_usage_and_writes_no_file_named_like_an_option(argv, code, words, tmp_path,
                                                                                monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sass, "collect", lambda: pytest.fail("collected before the arguments were checked"))
    with pytest.raises(SystemExit) as e:
        sass.main(argv)
    out = capsys.readouterr()
    assert e.value.code == code and words in out.out + out.err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, words", [
    (["--check", "nope.json"], "--check reads a digests file: a JSON object with nvcc and builds"),
    (["--check", "bad.json"], "--check reads a digests file: got bad.json: JSONDecodeError"),
    (["--check", "list.json"], "--check reads a digests file: a JSON object"),
    (["."], "FILE.json is a file in an existing folder: got ."),
    (["no/such/dir/out.json"], "FILE.json is a file in an existing folder: got no/such/dir/out.json"),
])
def test_a_file_that_cannot_be_read_or_written_is_refused_before_the_build(argv, words, tmp_path, monkeypatch,
                                                                           capsys):
    # each of these built every kernel first (minutes), then raised a traceback
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "list.json").write_text("[]")
    monkeypatch.setattr(sass, "collect", lambda: pytest.fail("collected before the file was checked"))
    assert sass.main(argv) == 2
    assert words in capsys.readouterr().err
