"""One grammar for every `lapis` subcommand: one name per idea, one set of exit codes, --json and --version,
figures in png/svg/pdf, "µs" and "bound: <unit>", usage lines that start with `lapis <sub>`, and output paths
refused before any work."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from lapis.cli.main import main
from lapis.cli.parser import DEPRECATED_OPTIONS, DEPRECATED_VALUES, EXIT_CODES, FORWARDED, build_parser, deprecations

REPO = Path(__file__).resolve().parents[2]
LAYOUT = ["--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "8", "--cols", "64"]
GOOD_MAP = ["--dtype", "bf16", "--dims", "128,64", "--strides", "256", "--box", "64,8", "--swizzle", "128B"]
BAD_MAP = ["--dtype", "bf16", "--dims", "128,64", "--strides", "250", "--box", "72,8", "--swizzle", "128B"]
# Names that differ only by a plural or a unit suffix but are two ideas (so the look-alike check lets them be).
DISTINCT = {frozenset({"--figure", "--figures"}): "one figure file; a folder of figures (validate timelines)",
            frozenset({"--shape", "--shapes"}): "one shape (simulate, compare); a list of shapes (sweep, bench)",
            frozenset({"--variant", "--variants"}): "one captured variant (compare); a list to build (capture, bench)"}


def leaves(parser: argparse.ArgumentParser, path=()):
    """(path, parser) of every subcommand that takes options, the forwarded lapis.gpu parsers included."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        if path in FORWARDED:
            yield from leaves(importlib.import_module(FORWARDED[path]).build_parser(), path + ("(module)",))
        return
    for name, sub in subs[0].choices.items():
        if not name.startswith("_"):  # _worker: internal to a campaign
            yield from leaves(sub, path + (name,))


ALL = list(leaves(build_parser()))
CLI_LEAVES = [(p, ap) for p, ap in ALL if "(module)" not in p]


def public(action) -> list[str]:
    return [s for s in action.option_strings if s.startswith("--") and s not in DEPRECATED_OPTIONS]


def test_every_subcommand_is_walked():
    names = {" ".join(p) for p, _ in CLI_LEAVES}
    assert {"report", "layout show", "layout check", "tma check", "tma place", "capture gemm", "bench attention",
            "compare", "simulate", "sweep", "validate timelines", "validate units", "validate seeds",
            "validate micro"} <= names
    assert len(names) == 21


def test_one_public_name_per_idea():
    flags_by_dest, look_alikes = {}, {}
    for path, ap in ALL:
        dests = {}
        for action in ap._actions:
            names = public(action)
            if action.help == argparse.SUPPRESS and action.option_strings:
                assert not names, f"{path}: hidden option {action.option_strings} is not in DEPRECATED_OPTIONS"
                continue
            assert len(names) <= 1, f"{path}: {names} are two names of one option"
            for name in names:
                assert dests.setdefault(action.dest, name) == name, f"{path}: {name} and {dests[action.dest]}"
                flags_by_dest.setdefault((path[0], action.dest), set()).add(name)
                look_alikes.setdefault(re.sub(r"[-_]", "", name).removesuffix("s"), set()).add(name)
            assert not set(action.option_strings) & set(DEPRECATED_OPTIONS.values()) or names
    for (cmd, dest), names in flags_by_dest.items():
        assert len(names) == 1, f"lapis {cmd}: {sorted(names)} set one value ({dest})"
    for key, names in look_alikes.items():
        assert len(names) == 1 or frozenset(names) in DISTINCT, f"{sorted(names)} look like one idea"
    for old in DEPRECATED_OPTIONS:  # the old spellings are public nowhere
        assert not any(old in public(a) for _, ap in ALL for a in ap._actions)


def test_one_spelling_of_each_swizzle_mode():
    spellings = set()
    for path, ap in CLI_LEAVES:
        for action in ap._actions:
            if "--swizzle" in action.option_strings:
                spellings |= set(action.choices)
                assert "128B_atom32B" in action.choices, path  # layout and tma spell it as the driver does
    assert not spellings & set(DEPRECATED_VALUES["--swizzle"])


def test_deprecated_spellings_still_work_and_say_so(capsys):
    assert main(["layout", "show", *LAYOUT, "--smem-base", "0x400"]) == 0
    new = capsys.readouterr().out
    assert main(["layout", "show", *LAYOUT, "--base", "0x400"]) == 0
    old = capsys.readouterr()
    assert old.out == new and "lapis: --base is deprecated; use --smem-base" in old.err
    mn = ["layout", "show", "--major", "MN", "--dtype", "bf16", "--rows", "64", "--cols", "8", "--json"]
    assert main([*mn, "--swizzle", "128B_atom32B"]) == 0
    new = capsys.readouterr().out
    assert main([*mn, "--swizzle=128B_base32B"]) == 0
    old = capsys.readouterr()
    assert old.out == new and "--swizzle 128B_base32B is deprecated; use --swizzle 128B_atom32B" in old.err
    argv, notes = deprecations(["capture", "gemm", "--runs", "5", "--timeout=9", "--png", "x.png"])
    assert argv == ["capture", "gemm", "--repeats", "5", "--timeout-s=9", "--figure", "x.png"]
    assert notes == ["--runs is deprecated; use --repeats", "--timeout is deprecated; use --timeout-s",
                     "--png is deprecated; use --figure"]
    gemm = importlib.import_module("lapis.gpu.bench_gemm").build_parser()
    assert gemm.parse_args(["--runs", "7"]).runs == 7 and gemm.parse_args(["--repeats", "7"]).runs == 7
    micro = importlib.import_module("lapis.gpu.capture_micro").build_parser()
    assert micro.parse_args(["--out", "o", "--item-timeout-s", "3"]).item_timeout_s == 3.0
    assert micro.parse_args(["--out", "o", "--timeout-s", "3"]).item_timeout_s == 3.0


def test_abbreviations_are_not_second_names(capsys):
    assert main(["layout", "show", *LAYOUT, "--smem", "0x400"]) == 2
    assert "unrecognized arguments: --smem" in capsys.readouterr().err


def test_help_lists_every_exit_code(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for meaning, code in EXIT_CODES.items():
        assert re.search(rf"^  {code}  ", out, flags=re.M), (code, meaning)
    assert "  3  deadlock" in out and "  4  race" in out and "  1  a check found a problem" in out
    # a prediction's error is a finding, not a failure: the accuracy reports and compare exit 0 whatever it is
    assert "micro) and compare exit 0 whatever their errors" in " ".join(out.split())


def test_exit_0_ok_and_1_a_map_the_driver_rejects(capsys):
    assert main(["tma", "check", *GOOD_MAP]) == EXIT_CODES["ok"] == 0
    assert main(["tma", "check", *BAD_MAP]) == EXIT_CODES["check failed"] == 1
    assert "would reject this tensor map (2 rule(s))" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["tma", "check", "--dtype", "bf16", "--dims", "64,,8", "--box", "64,8"], "comma-separated integers"),
    (["tma", "check", "--dtype", "bf17", "--dims", "64", "--box", "64"], "bf17"),
    (["tma", "check", "--dtype", "bf16", "--dims", "64"], "--box"),  # argparse: a required option missing
])
def test_exit_2_malformed_input(argv, words, capsys):
    assert main(argv) == EXIT_CODES["bad input"] == 2
    err = capsys.readouterr().err
    assert words in err and "error" in err and "Traceback" not in err


def test_exit_3_deadlock_and_4_race(monkeypatch, capsys):
    """Model faults put into the ring (a consumer that never releases; one that releases before its MMA read)."""
    from lapis.pipeline_sim import TmaPipeline
    wait, release = TmaPipeline.consumer_wait, TmaPipeline.consumer_release
    monkeypatch.setattr(TmaPipeline, "consumer_release", lambda self, st, role: None)
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x4096"]) == EXIT_CODES["deadlock"] == 3
    assert "lapis simulate: deadlock: consumer0 waits on ring.full[" in capsys.readouterr().err

    def wait_then_release(self, st, role):
        ev = wait(self, st, role)
        ev.callbacks.append(lambda _: release(self, st, role))
        return ev
    monkeypatch.setattr(TmaPipeline, "consumer_wait", wait_then_release)
    assert main(["simulate", "--schedule", "h200-s4-pingpong", "--shape", "1x2x1024x128", "--races"]) == 4
    assert "lapis simulate: race on " in capsys.readouterr().err


def test_every_subcommand_takes_json():
    for path, ap in CLI_LEAVES:
        assert any("--json" in a.option_strings for a in ap._actions), path


def gpu_present() -> bool:
    from lapis.gpu.harness import gpu_present as present
    return present()


JSON_SAMPLES = {  # cheap invocations; the error ones answer with {"ok": false, "exit_code": 2, "error": ...}
    "report": (["report", "--captures", "{tmp}", "--out", "{tmp}/r"], 2),
    "layout show": (["layout", "show", *LAYOUT], 0),
    "layout desc": (["layout", "desc", "--arch", "sm90", *LAYOUT], 0),
    "layout decode": (["layout", "decode", "--arch", "sm90", "0x4000004000010040"], 0),
    "layout check": (["layout", "check", "--dtype", "bf16", "--dims", "4096,4096", "--strides", "8192", "--box",
                      "64,64", "--swizzle", "128B", "--smem-base", "0x400", "--coords", "128,256", "--major", "K",
                      "--rows", "64", "--desc", "0x4000004000010040"], 0),
    "tma check": (["tma", "check", *GOOD_MAP], 0),
    "tma place": (["tma", "place", *GOOD_MAP, "--smem-base", "0", "--coords", "0,0"], 0),
    "capture tma": (["capture", "tma", "--out", "{tmp}/c"], 2),
    "capture wgmma": (["capture", "wgmma", "run", "--inputs", "{tmp}", "--out", "{tmp}/c"], 2),
    "capture micro": (["capture", "micro", "--out", "{tmp}/c"], 2),
    "capture gemm": (["capture", "gemm", "--out", "{tmp}/c"], 2),
    "bench attention": (["bench", "attention", "--out", "{tmp}/c"], 2),
    "compare": (["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"], 0),
    "simulate": (["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256"], 0),
    "sweep": (["sweep", "--schedule", "h200-gemm-ws", "--shapes", "256x256x256", "--grid", "stages=2,3",
               "--executor", "serial", "--out", "{tmp}/sw"], 0),
    "validate layouts": (["validate", "layouts"], 0),
    "validate mma": (["validate", "mma", "--captures", "{tmp}"], 2),
    "validate timelines": (["validate", "timelines", "--captures", "{tmp}"], 2),
    "validate units": (["validate", "units"], 0),
    "validate seeds": (["validate", "seeds"], 0),
    "validate micro": (["validate", "micro"], 0 if shutil.which("nvcc") else 2),  # compiles the microbenchmarks
}


def test_json_samples_cover_every_subcommand():
    assert set(JSON_SAMPLES) == {" ".join(p) for p, _ in CLI_LEAVES}


@pytest.mark.parametrize("name", sorted(JSON_SAMPLES))
def test_json_is_all_that_goes_to_stdout(name, tmp_path, capsys):
    argv, code = JSON_SAMPLES[name]
    if code == 2 and name.split()[0] in ("capture", "bench") and gpu_present():
        pytest.skip("a GPU is present: this would start a campaign")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--json"]) == code
    out = json.loads(capsys.readouterr().out)  # the whole of stdout is one JSON document
    if code == 2:
        assert out["ok"] is False and out["exit_code"] == 2 and out["error"]
    else:
        assert isinstance(out, (dict, list)) and out


def test_a_usage_error_with_json_answers_in_json(capsys):
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", "--nope", "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out) == {"ok": False, "exit_code": 2,
                                   "error": "lapis simulate: error: unrecognized arguments: --nope"}
    assert "usage: lapis simulate" in out.err


def test_a_forwarded_command_under_json_keeps_its_own_output_off_stdout(capfd):
    """`capture gemm --sources` prints the kernel sources (no GPU needed); under --json they go to stderr."""
    assert main(["capture", "gemm", "--sources", "--json"]) == 0
    out = capfd.readouterr()
    assert json.loads(out.out) == {"ok": True, "exit_code": 0} and "lapis/gpu/kernels/gemm_ws.cu" in out.err


def test_version_is_the_package_version(capsys):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    import lapis
    want = project.get("version") or lapis.__version__
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert capsys.readouterr().out.strip() == f"lapis {want}"
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"lapis {want}"


MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_figures_take_png_svg_and_pdf(suffix, tmp_path, capsys):
    tile, gantt = tmp_path / f"tile{suffix}", tmp_path / f"gantt{suffix.upper()}"
    assert main(["layout", "show", *LAYOUT, "--figure", str(tile)]) == 0
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256", "--figure", str(gantt)]) == 0
    assert tile.read_bytes().startswith(MAGIC[suffix]) and gantt.read_bytes().startswith(MAGIC[suffix])


@pytest.mark.parametrize("argv", [["layout", "show", *LAYOUT], ["simulate", "--schedule", "h200-gemm-ws", "--shape",
                                                                 "256x256x256"],
                                  ["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"]])
def test_an_unknown_figure_suffix_is_refused_naming_the_allowed_ones(argv, tmp_path, capsys):
    assert main([*argv, "--figure", str(tmp_path / "x.jpg")]) == 2
    assert "--figure takes a file ending in .png, .svg, .pdf" in capsys.readouterr().err
    assert not (tmp_path / "x.jpg").exists()


def test_microseconds_and_one_word_for_what_bounds_a_run(capsys):
    run = ["simulate", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"]
    assert main([*run, "--json"]) == 0
    bound = json.loads(capsys.readouterr().out)["bound_by"]
    assert main(run) == 0
    text = capsys.readouterr().out
    assert f"; bound: {bound} (" in text and " µs" in text and not re.search(r"\d us\b", text)
    assert "-bound" not in text and "busiest unit" not in text
    assert main(["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048", "--json"]) == 0
    bound = json.loads(capsys.readouterr().out)["bound_by"]
    assert main(["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"]) == 0
    text = capsys.readouterr().out
    assert f"TFLOP/s, bound: {bound})" in text and "-bound" not in text and not re.search(r"\d us\b", text)


def test_every_usage_line_starts_with_lapis_and_the_subcommand(capsys):
    for path, ap in ALL:
        words = [p for p in path if p != "(module)"]
        if "(module)" in path and path[1] == "wgmma":
            words = words[:2] + words[3:]  # the module's prepare/run are its own subcommands
        assert ap.format_usage().startswith("usage: lapis " + " ".join(words)), (path, ap.format_usage())
    assert main(["capture", "gemm", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: lapis capture gemm")
    assert main(["bench", "attention", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: lapis bench attention")


def hostile(kind: str, tmp_path: Path, suffix: str) -> str:
    p = tmp_path / f"{kind}{suffix}"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "symlink":
        (tmp_path / "real").write_text("keep")
        p.symlink_to(tmp_path / "real")
    elif kind == "directory":
        p.mkdir()
    elif kind == "file":
        p.write_text("keep")
    return str(p)


WRITERS = [  # (argv, flag, suffix, the heavy function that must not run)
    (["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256"], "--trace", ".json",
     ("lapis.cli.simulate", "simulate")),
    (["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256"], "--figure", ".svg",
     ("lapis.cli.simulate", "simulate")),
    (["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"], "--figure", ".pdf",
     ("lapis.cli.compare", "compare_gemm")),
    (["compare", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048"], "--trace", ".json",
     ("lapis.cli.compare", "compare_gemm")),
    (["layout", "show", *LAYOUT], "--figure", ".png", ("lapis.cli.layout", "canonical_layout")),
    (["report"], "--out", "", ("lapis.cli.report", "build_report")),
    (["sweep", "--schedule", "h200-gemm-ws", "--shapes", "256x256x256"], "--out", "", ("lapis.cli.sweep", "run_sweep")),
    (["validate", "timelines"], "--figures", "", ("lapis.cli.validate", "validate_timelines")),
    (["capture", "tma"], "--out", "", None),
    (["capture", "gemm"], "--out", "", None),
    (["bench", "attention"], "--out", "", None),
]


# every writer against every hostile path, but an existing folder for a folder output and an existing file for a
# file output: those are fine outputs
HOSTILE = [(*w, kind) for w in WRITERS for kind in ("fifo", "symlink", "directory", "file", "nul", "long")
           if kind != ("directory" if w[2] == "" else "file")]


@pytest.mark.parametrize("argv, flag, suffix, heavy, kind", HOSTILE)
def test_output_paths_are_refused_before_any_work(argv, flag, suffix, heavy, kind, tmp_path, capsys, monkeypatch):
    if heavy:
        module = importlib.import_module(heavy[0])
        monkeypatch.setattr(module, heavy[1], lambda *a, **k: pytest.fail("work started before the path check"))
    path = {"nul": f"{tmp_path}/a\0b{suffix}", "long": f"{tmp_path}/{'x' * 300}{suffix}"}.get(kind) or \
        hostile(kind, tmp_path, suffix)
    assert main([*argv, flag, path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lapis: error: " + flag) and "Traceback" not in err, err
    if kind in ("fifo", "symlink", "file"):  # left as they were
        assert os.path.lexists(path) and (kind == "fifo" or Path(path).read_text() == "keep")
