"""CPU checks of lapis/gpu/capture_fa2_sass.py's command line: bad paths, a file that is no ELF library, cuobjdump
missing or hanging, each a named error (exit 2) before any output is written."""

import json
import os
import sys

import pytest

from lapis.gpu import capture_fa2_sass as fa2

ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(56)  # an ELF64 header's identification bytes, the rest zero


@pytest.fixture
def fake(tmp_path):
    """(a library whose first bytes are an ELF header's, a bin folder) in tmp_path."""
    lib = tmp_path / "libtorch_cuda.so"
    lib.write_bytes(ELF)
    (tmp_path / "bin").mkdir()
    return lib, tmp_path / "bin"


def _cuobjdump(bin_dir, body):
    tool = bin_dir / "cuobjdump"
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)


def _run(capsys, argv):
    with pytest.raises(SystemExit) as e:  # argparse's error, or main's exit status
        raise SystemExit(fa2.main(argv))
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("edit, why", [
    (lambda lib, t: ["--lib", str(t / "missing.so")], "not a file"),
    (lambda lib, t: ["--lib", str(t)], "not a file"),
    (lambda lib, t: (lib.write_bytes(b"plain text"), ["--lib", str(lib)])[1], "ELF"),
    (lambda lib, t: ["--lib", str(lib), "--wheel", str(t / "missing.whl")], "wheel"),
    (lambda lib, t: ((t / "p.json").write_text("{"), ["--lib", str(lib), "--provenance", str(t / "p.json")])[1],
     "provenance"),
    (lambda lib, t: ["--lib", str(lib), "--timeout", "nan"], "timeout"),
    (lambda lib, t: ["--lib", str(lib), "--timeout", "0"], "timeout"),
], ids=["lib-missing", "lib-folder", "lib-not-elf", "wheel-missing", "provenance-not-json", "timeout-nan",
        "timeout-zero"])
def test_bad_arguments_are_exit_2(tmp_path, fake, monkeypatch, capsys, edit, why):
    lib, bin_dir = fake
    _cuobjdump(bin_dir, "exit 0")
    monkeypatch.setenv("PATH", str(bin_dir))
    code, err = _run(capsys, ["--out", str(tmp_path / "out")] + edit(lib, tmp_path))
    assert code == 2 and why in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_is_a_file_is_exit_2(tmp_path, fake, monkeypatch, capsys):
    lib, bin_dir = fake
    _cuobjdump(bin_dir, "exit 0")
    monkeypatch.setenv("PATH", str(bin_dir))
    (tmp_path / "out").write_text("a file")
    code, err = _run(capsys, ["--out", str(tmp_path / "out"), "--lib", str(lib)])
    assert code == 2 and "--out" in err and (tmp_path / "out").read_text() == "a file"


def test_no_cuobjdump_on_path_is_exit_2(tmp_path, fake, monkeypatch, capsys):
    lib, bin_dir = fake
    monkeypatch.setenv("PATH", str(bin_dir))  # an empty folder
    code, err = _run(capsys, ["--out", str(tmp_path / "out"), "--lib", str(lib)])
    assert code == 2 and "cuobjdump not on PATH" in err
    assert not (tmp_path / "out").exists()


def test_a_hung_cuobjdump_is_exit_2_after_the_timeout(tmp_path, fake, monkeypatch, capsys):
    lib, bin_dir = fake
    _cuobjdump(bin_dir, '[ "$1" = --version ] && echo "Build cuda_13.5" && exit 0\nexec sleep 30')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    code, err = _run(capsys, ["--out", str(tmp_path / "out"), "--lib", str(lib), "--timeout", "0.5"])
    assert code == 2 and "0.5 s" in err


def test_a_library_without_flash_kernels_is_exit_1_with_an_empty_manifest(tmp_path, fake, monkeypatch, capsys):
    """cuobjdump extracts no sm_90 image: the manifest records the scan and no kernel."""
    lib, bin_dir = fake
    _cuobjdump(bin_dir, 'echo "Build cuda_13.5"')
    monkeypatch.setenv("PATH", str(bin_dir))
    assert fa2.main(["--out", str(tmp_path / "out"), "--lib", str(lib)]) == 1
    man = json.loads((tmp_path / "out" / "fa2_sass" / "manifest.json").read_text())
    assert man["kernels"] == {} and man["scanned"][0]["bytes"] == len(ELF)
    assert man["provenance"]["cuobjdump"] == ["Build cuda_13.5"]


def test_no_lib_without_torch_is_exit_2(tmp_path, fake, monkeypatch, capsys):
    _, bin_dir = fake
    _cuobjdump(bin_dir, "exit 0")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    monkeypatch.setattr(fa2.capture_tma, "provenance", lambda *a: {})
    code, err = _run(capsys, ["--out", str(tmp_path / "out")])
    assert code == 2 and "--lib" in err
