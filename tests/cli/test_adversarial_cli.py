"""Every `lapis` subcommand against hostile values: each option gets a missing value, an empty string, a negative,
zero, huge (1e30, 2**70), NaN, inf, a word where a number goes, an undecodable byte (os.fsdecode(b"\\xff")), and
path options a folder, a FIFO, a symbolic link and a place the OS refuses. Values outside an option's domain exit 2
with a named error; values inside it exit with a documented code; nothing raises and nothing prints a traceback.

In-process (lapis.cli.main.main), hypothesis-drawn and derandomized, from small cheap base commands: the bad value
is refused before any simulation runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lapis.cli.main import main
from lapis.cli.parser import EXIT_CODES

VALUES = {"empty": "", "negative": "-1", "zero": "0", "huge_float": "1e30", "huge_int": str(2**70), "nan": "nan",
          "inf": "inf", "word": "abc", "undecodable": os.fsdecode(b"\xff")}
CATEGORIES = ("missing", *VALUES)
PATHS = ("directory", "fifo", "symlink", "refused")  # for options that name an output file or folder
NUMBERS = frozenset({"negative", "zero", "huge_float", "huge_int", "nan", "inf"})


@dataclass(frozen=True)
class Opt:
    flag: str
    ok: frozenset = frozenset()  # categories inside the option's domain: any documented exit code
    kind: str = "value"          # value, file (an output file; `suffix`), folder (an output folder), positional
    fmt: str = "{}"              # how the value is written, e.g. "block_n={}" for --param
    suffix: str = ""


@dataclass(frozen=True)
class Cmd:
    base: tuple
    opts: tuple = field(default_factory=tuple)


LAYOUT = ("--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "8", "--cols", "64")
LAYOUT_OPTS = (Opt("--cute"), Opt("--major"), Opt("--swizzle"), Opt("--dtype"), Opt("--rows"), Opt("--cols"),
               Opt("--smem-base", ok=frozenset({"zero"})), Opt("--order"))
MAP = ("--dtype", "bf16", "--dims", "128,64", "--strides", "256", "--box", "64,8", "--swizzle", "128B")
# a number where the driver takes a list may be a map it rejects (exit 1): --strides -1, --box 0 ...
MAP_OPTS = (Opt("--dtype"), Opt("--dims", ok=NUMBERS - {"huge_float", "nan", "inf"}),
            Opt("--strides", ok=NUMBERS - {"huge_float", "nan", "inf"}),
            Opt("--box", ok=NUMBERS - {"huge_float", "nan", "inf"}),
            Opt("--elem-strides", ok=NUMBERS - {"huge_float", "nan", "inf"} | {"empty"}), Opt("--interleave"),
            Opt("--swizzle"),
            Opt("--l2"), Opt("--oob", ok=frozenset({"nan"})), Opt("--addr", ok=frozenset({"zero", "negative"})))
SMALL_GEMM = ("--schedule", "h200-gemm-ws", "--shape", "256x256x256")

COMMANDS = {
    "layout show": Cmd(("layout", "show", *LAYOUT), (*LAYOUT_OPTS, Opt("--figure", kind="file", suffix=".png"),
                                                     Opt("--lines", ok=frozenset({"huge_int"})))),
    "layout desc": Cmd(("layout", "desc", "--arch", "sm90", *LAYOUT),
                       (*LAYOUT_OPTS, Opt("--arch"), Opt("--step", ok=frozenset({"zero"})))),
    "layout decode": Cmd(("layout", "decode", "--arch", "sm90"),
                         (Opt("value", kind="positional", ok=frozenset({"zero"})), Opt("--arch"))),
    "layout check": Cmd(("layout", "check", *MAP[:-2], "--box", "64,64", "--swizzle", "128B", "--smem-base", "0x400",
                         "--coords", "0,0", "--major", "K", "--rows", "64", "--desc", "0x4000004000010040"),
                        (Opt("--smem-base", ok=frozenset({"zero"})), Opt("--coords", ok=frozenset({"zero"})),
                         Opt("--rows"), Opt("--desc", ok=frozenset({"zero"})), Opt("--trans", ok=frozenset({"zero"})),
                         Opt("--tile-cols"), Opt("--arch"), Opt("--major"), Opt("--cute"))),
    "tma check": Cmd(("tma", "check", *MAP), MAP_OPTS),
    "tma place": Cmd(("tma", "place", *MAP, "--smem-base", "0", "--coords", "0,0"),
                     (*MAP_OPTS, Opt("--smem-base", ok=frozenset({"zero"})),
                      Opt("--coords", ok=frozenset({"zero", "negative"})))),
    "simulate": Cmd(("simulate", *SMALL_GEMM),
                    (Opt("--schedule"), Opt("--shape"), Opt("--gpu"), Opt("--param", fmt="block_n={}"),
                     Opt("--param", fmt="{}"), Opt("--trace", kind="file", suffix=".json"),
                     Opt("--figure", kind="file", suffix=".png"))),
    "compare": Cmd(("compare", "--schedule", "h200-gemm-ws", "--shape", "4096x4096x4096", "--variant", "nope"),
                   (Opt("--schedule"), Opt("--shape"), Opt("--captures"), Opt("--trace", kind="file", suffix=".json"),
                    Opt("--figure", kind="file", suffix=".png"))),
    "sweep": Cmd(("sweep", "--schedule", "h200-gemm-ws", "--shapes", "256x256x256", "--grid", "stages=2",
                  "--executor", "serial", "--out", "sw"),
                 (Opt("--schedule"), Opt("--gpu"), Opt("--shapes"), Opt("--grid", fmt="stages={}"),
                  Opt("--random"), Opt("--seed", ok=frozenset({"zero"})), Opt("--check", ok=frozenset({"zero"})),
                  Opt("--executor"), Opt("--workers"), Opt("--top"), Opt("--validate-top"), Opt("--provenance"),
                  Opt("--out", kind="folder"))),
    "report": Cmd(("report", "--captures", "nowhere"), (Opt("--captures"), Opt("--out", kind="folder"))),
    "validate layouts": Cmd(("validate", "layouts", "--captures", "nowhere"), (Opt("--captures"),)),
    "validate mma": Cmd(("validate", "mma", "--captures", "nowhere"), (Opt("--captures"),)),
    "validate timelines": Cmd(("validate", "timelines", "--captures", "nowhere"),
                              (Opt("--captures"), Opt("--figures", kind="folder"))),
    "capture tma": Cmd(("capture", "tma", "--out", "cap"), (Opt("--out", kind="folder"), Opt("--what"),
                                                            Opt("--tags"), Opt("--provenance"))),
    "capture wgmma": Cmd(("capture", "wgmma", "run", "--inputs", "nowhere", "--out", "cap"),
                         (Opt("--inputs"), Opt("--out", kind="folder"))),
    "capture micro": Cmd(("capture", "micro", "--out", "cap"),
                         (Opt("--out", kind="folder"), Opt("--repeats"), Opt("--timeout-s"), Opt("--budget-s"),
                          Opt("--only"))),
    "capture gemm": Cmd(("capture", "gemm", "--out", "cap"),
                        (Opt("--out", kind="folder"), Opt("--sizes"), Opt("--variants"), Opt("--repeats"),
                         Opt("--warmup"), Opt("--min-seconds"), Opt("--timeout-s"))),
    "bench attention": Cmd(("bench", "attention", "--out", "cap"),
                           (Opt("--out", kind="folder"), Opt("--shapes"), Opt("--variants"), Opt("--repeats"),
                            Opt("--warmup"), Opt("--min-seconds"), Opt("--timeout-s"))),
}
GPU_COMMANDS = {"capture tma", "capture wgmma", "capture micro", "capture gemm", "bench attention"}


def gpu_present() -> bool:
    from lapis.gpu.harness import gpu_present as present
    return present()


def path_value(category: str, suffix: str, tmp) -> str:
    """A path the OS takes but lapis must not write to: a folder, a FIFO, a link, or one /proc refuses."""
    target = tmp / f"p-{category}{suffix}"
    if category == "directory":
        target.mkdir(exist_ok=True)
    elif category == "fifo" and not target.exists():
        os.mkfifo(target)
    elif category == "symlink" and not target.exists():
        (tmp / "real").write_text("x")
        target.symlink_to(tmp / "real")
    elif category == "refused":
        return f"/proc/lapis-test{suffix}"  # looks writable to root; the kernel refuses new entries
    return str(target)


def argv_with(cmd: Cmd, opt: Opt, value: str | None) -> list[str]:
    """The base command with `opt` replaced by `value` (None: the flag given with no value at all)."""
    base, out, i = list(cmd.base), [], 0
    while i < len(base):
        if base[i] == opt.flag and opt.flag not in ("--param", "--grid", "--desc"):
            i += 2
            continue
        out.append(base[i])
        i += 1
    if opt.kind == "positional":
        return out if value is None else [*out, value]
    return [*out, opt.flag] if value is None else [*out, f"{opt.flag}={opt.fmt.format(value)}"]


def run(argv, capsys):
    try:
        code = main(argv)
    except BaseException as exc:  # noqa: BLE001 - the point: nothing may escape main()
        pytest.fail(f"{argv!r} raised {type(exc).__name__}: {exc}")
    out = capsys.readouterr()
    assert isinstance(code, int) and code in EXIT_CODES.values(), (argv, code)
    assert "Traceback" not in out.err + out.out, (argv, out.err)
    return code, out


def expect(cmd_name: str, opt: Opt, category: str, code: int, out, argv) -> None:
    legal = category in opt.ok or (opt.kind == "folder" and category == "directory")  # an existing folder is fine
    if legal and cmd_name not in GPU_COMMANDS:
        return  # a legal value: any documented exit code (checked by run)
    assert code == EXIT_CODES["bad input"], (argv, code, out.err[-400:])
    assert "error" in out.err or "needs an NVIDIA GPU" in out.err, (argv, out.err)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative output folders (sw, cap) land in the test's own folder


def _guard_gpu(name):
    if name in GPU_COMMANDS and gpu_present():
        pytest.skip("a GPU is present: these inputs would start real campaigns")


@pytest.mark.parametrize("name", sorted(COMMANDS))
@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_values_exit_2_or_a_documented_code(name, data, capsys, tmp_path):
    _guard_gpu(name)
    cmd = COMMANDS[name]
    opt = data.draw(st.sampled_from(cmd.opts), label="option")
    category = data.draw(st.sampled_from(CATEGORIES), label="category")
    if opt.kind in ("file", "folder") and category not in ("missing", "empty", "undecodable"):
        category = data.draw(st.sampled_from(PATHS), label="path")  # a path option gets hostile paths
        argv = argv_with(cmd, opt, path_value(category, opt.suffix, tmp_path))
    else:
        argv = argv_with(cmd, opt, None if category == "missing" else VALUES[category])
    code, out = run(argv, capsys)
    expect(name, opt, category, code, out, argv)


@pytest.mark.parametrize("name", sorted(COMMANDS))
@settings(max_examples=10, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), junk=st.text(max_size=12))
def test_arbitrary_text_never_escapes(name, data, junk, capsys):
    """Any text in any option: a documented exit code and no traceback (whether it is legal is the option's)."""
    _guard_gpu(name)
    cmd = COMMANDS[name]
    opt = data.draw(st.sampled_from([o for o in cmd.opts if o.kind not in ("file", "folder")] or list(cmd.opts)))
    run(argv_with(cmd, opt, junk), capsys)


@pytest.mark.parametrize("name", ["report.md", "report.json"])
def test_report_refuses_an_out_folder_whose_report_file_is_a_folder_before_any_work(tmp_path, capsys, name):
    (tmp_path / name).mkdir()
    assert main(["report", "--out", str(tmp_path)]) == EXIT_CODES["bad input"]
    err = capsys.readouterr().err
    assert f"{name} there is not a regular file" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written
