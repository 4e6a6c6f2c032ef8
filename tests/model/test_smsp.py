"""lapis.model.smsp: the bound model's and the issue simulation's arithmetic (with textbook constants, never as a
prediction), constants files, and the softmax microbenchmark loop bodies it reads."""

import dataclasses
import json
import re
import shutil
import subprocess

import pytest

from lapis.errors import CaptureError, ScheduleError
from lapis.model import contend, sass, smsp, tensor_share

# H100 textbook figures, for arithmetic only: 1 issue/clk, FP32 32 lanes (1/clk), INT 16 lanes (0.5/clk),
# MUFU 4 lanes (1/8 clk) per SMSP.
BOOK = smsp.Constants(1.0, {"fma": 1.0, "alu": 0.5, "xu": 0.125, "lsu": 0.25, "tensor": 0.125, "adu": 0.5,
                            "uniform": 1.0, "cbu": 0.5},
                      {"fma": 4, "alu": 4, "xu": 18, "lsu": 24, "tensor": 32, "adu": 4, "uniform": 2, "cbu": 4})


def ins(text, stall=1, write_sb=None, wait_mask=0):
    return dataclasses.replace(sass.parse_instruction(text),
                               control=sass.Control(stall, False, write_sb, None, wait_mask, 0))


def test_bounds_and_their_max():
    p = smsp.predict({"fma": 100, "xu": 20}, warp_cycles=300, warps=1, consts=BOOK)
    assert p.bounds == {"issue": 120, "pipe.fma": 100, "pipe.xu": 160, "latency": 300}
    assert (p.cycles, p.bound) == (300, "latency")
    p = smsp.predict({"fma": 100, "xu": 20}, warp_cycles=300, warps=2, consts=BOOK)
    assert (p.cycles, p.bound) == (160, "pipe.xu")
    p = smsp.predict({"fma": 50, "alu": 100}, warp_cycles=300, warps=4, consts=BOOK)
    assert (p.cycles, p.bound) == (200, "pipe.alu")


def test_bad_inputs_are_named_errors():
    with pytest.raises(CaptureError, match="at least 1"):
        smsp.predict({"fma": 1}, 10, 0, BOOK)
    with pytest.raises(CaptureError, match="pipes the constants lack"):
        smsp.predict({"cbu": 1}, 10, 1, dataclasses.replace(BOOK, rate={"fma": 1.0}))
    with pytest.raises(CaptureError, match="control bits"):
        smsp.simulate([sass.parse_instruction("FMUL R1, R2, R2")], 1, BOOK)


def test_simulation_pipe_bound():
    body = [ins(f"MUFU.EX2 R{k}, R{k}") for k in range(8)]  # independent: only the pipe's 8 cycles each
    assert smsp.simulate(body, 1, BOOK) == pytest.approx(64)
    assert smsp.simulate(body, 4, BOOK) == pytest.approx(64)  # the pipe is shared: per warp-iteration
    with pytest.raises(CaptureError, match="pipes the constants lack"):
        smsp.simulate(body, 1, dataclasses.replace(BOOK, rate={"fma": 1.0}))


def test_simulation_hides_stalls_with_more_warps():
    body = [ins(f"FFMA R{k}, R{k}, R{k}, R{k}", stall=4) for k in range(10)]  # the compiler's 4-cycle spacing
    assert smsp.simulate(body, 1, BOOK) == pytest.approx(40)
    assert smsp.simulate(body, 2, BOOK) == pytest.approx(20)
    assert smsp.simulate(body, 8, BOOK) == pytest.approx(10)  # issue-bound: one instruction per clock


def test_simulation_waits_on_scoreboards():
    body = [ins("MUFU.EX2 R1, R0", write_sb=0), ins("FADD R0, R1, R1", wait_mask=1)]
    assert smsp.simulate(body, 1, BOOK) == pytest.approx(19)  # MUFU latency 18, then the FADD's issue slot


def test_fractional_rates_lose_cycles_in_proportion():
    body = [ins(f"FMUL R{k}, R{k}, R{k}") for k in range(100)]
    slow = dataclasses.replace(BOOK, rate={**BOOK.rate, "fma": 0.8})
    assert smsp.simulate(body, 1, slow) == pytest.approx(125, abs=1)


def test_warp_period_from_registers():
    body = [sass.parse_instruction(t) for t in ("MUFU.EX2 R1, R0", "FADD R0, R1, R1")]
    assert smsp.warp_period(body, BOOK) == 22  # 18 + 4 per iteration: the loop-carried chain


def test_pending_constants_are_marked():
    c = smsp.Constants.load()
    assert c.pending
    # the rates the file says come from a micro capture: lanes (FLOP for mma.sync) per clk per SM over 4 SMSPs
    got = json.loads((smsp.CAPTURES / "micro" / "h200-2026-11-29" / "micro" / "results.json").read_text())
    v = {m["name"]: m["value"]["median"] for m in got["measurements"] if m.get("value")}
    assert c.rate["fma"] == pytest.approx(v["fma.rate"] / 128, rel=1e-3)
    assert c.rate["xu"] == pytest.approx(v["ex2.rate"] / 128, rel=1e-3)
    assert c.rate["tensor"] == pytest.approx(v["mma_sync.rate"] / 4096 / 4, rel=1e-3)
    assert set(smsp.PIPE_CLASS) <= set(c.rate) and set(c.rate) == set(c.latency)


def test_bad_constants_file(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"rate": {}}))
    with pytest.raises(CaptureError, match="issue_per_clk"):
        smsp.Constants.load(f)
    with pytest.raises(CaptureError, match="missing"):
        smsp.Constants.load(tmp_path / "none.json")


def test_constants_from_a_pipes_capture(tmp_path):
    ms = [dict(name=f"pipes.ffma.tput.w{w}", kind="tput", cls="ffma", warps_per_smsp=w, status="ok",
               value=dict(median=v)) for w, v in ((1, 0.3), (8, 0.97), (16, 1.65))]
    ms.append(dict(name="pipes.ffma.lat", kind="lat", cls="ffma", warps_per_smsp=1, status="ok",
                   value=dict(median=4.5)))
    f = tmp_path / "results.json"
    f.write_text(json.dumps(dict(measurements=ms)))
    c = smsp.Constants.from_pipes_capture(f)
    # the 8-warp point (one CTA per SM); the 16-warp one reads above the issue limit and is left out
    assert (c.rate["fma"], c.latency["fma"]) == (0.97, 4.5)
    assert c.rate["xu"] == smsp.Constants.load().rate["xu"] and c.pending  # four pipes still unmeasured


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.fixture(scope="module")
def softmax():
    return smsp.softmax_sass()


@needs_nvcc
def test_softmax_loop_bodies(softmax):
    # 64 scores per thread and 2 row corrections: 66 exponentials per tile, all on MUFU but emu8/emu4's
    # 64/8 and 64/4 on the FMA pipe
    ex2 = {fl: sum(i.opcode == "MUFU" for i in smsp.softmax_body(softmax[f"micro_softmax_{fl}_wg1"], fl))
           for fl in smsp.FLAVOURS}
    assert ex2 == {"exp2f": 66, "ex2": 66, "ex2_cond": 66, "emu8": 58, "emu4": 50}
    # the O rescale (64 FMULs) runs every tile but for ex2_cond, whose rows never move after the first tile
    fmul = {fl: sum(i.opcode == "FMUL" for i in smsp.softmax_body(softmax[f"micro_softmax_{fl}_wg1"], fl))
            for fl in ("ex2", "ex2_cond")}
    assert fmul["ex2"] >= 64 > fmul["ex2_cond"]
    assert all(i.opcode == "F2FP" for i in smsp.softmax_body(softmax["micro_softmax_ex2_wg1"], "ex2")
               if i.opcode.startswith("F2F"))


@needs_nvcc
def test_micro_table_rows(softmax):
    rows = smsp.micro_table(BOOK, softmax)
    assert [r["name"] for r in rows] == [f"softmax.{fl}.wg{w}" for fl in smsp.FLAVOURS for w in (1, 2)]
    assert rows[0]["measured"] == pytest.approx(1 / 0.0012576915, rel=1e-6)  # tiles/clk/SM of the capture
    assert all(r["simulated"] >= r["instructions"] - 1e-9 for r in rows)  # one issue slot per instruction


def test_cli_bad_constants_is_exit_2(tmp_path, capsys):
    assert smsp.main(["--micro", "--constants", str(tmp_path / "none.json")]) == 2
    assert "fix:" in capsys.readouterr().err


def test_sm100_constants_cite_a_source_for_every_value():
    doc = json.loads(smsp.SM100.read_text())
    entries = [("issue_per_clk", doc["issue_per_clk"])] + [
        (f"{kind}.{pipe}", v) for kind in ("rate", "latency") for pipe, v in doc[kind].items()]
    assert {n for n, _ in entries} >= {f"{k}.{p}" for k in ("rate", "latency") for p in sass.PIPES}
    for name, v in entries:
        assert v["kind"] in ("document", "assumed"), name
        if v["kind"] == "assumed":
            assert v["source"].startswith("assumed:") or v["source"].startswith("assumed ("), name
        else:
            assert any(d in v["source"] for d in ("CUDA C++ Programming Guide", "whitepaper", "PTX ISA")), name
    c = smsp.Constants.load(smsp.SM100)
    assert set(c.sources) == {n for n, _ in entries} and all(c.sources.values())
    assert not c.pending
    # the guide's cc 10.0 results/clk/SM over 4 SMSPs x 32 lanes: FP32 FMA 128, integer 64, MUFU 16, shuffle 32
    assert (c.rate["fma"], c.rate["alu"], c.rate["xu"], c.rate["lsu"]) == (1.0, 0.5, 0.125, 0.25)
    assert c.issue_per_clk == 1.0 and c.latency["fma"] == 4


def test_capture_loop_names_one_loop_or_raises():
    manifest = smsp.DATA / "captures" / "seeds" / "b200-481f9aa" / "manifest.json"
    loop = smsp.capture_loop(manifest, "k04", "softmax", 0)
    assert loop["instructions"] == 1371 and loop["chain_first"] == 140.0
    with pytest.raises(CaptureError, match="unique"):
        smsp.capture_loop(manifest, "k04", "softmax", 1)  # k04 has no nested softmax loop
    with pytest.raises(CaptureError, match="unique"):
        smsp.capture_loop(manifest, "k99", "softmax", 0)
    consts = dataclasses.replace(BOOK, rate={**BOOK.rate, "tmem": 1.0}, latency={**BOOK.latency, "tmem": 16})
    # captured without chain_links and warp_cycles: chain 140 x 4 cycles = 560 over 2 warps = 280 < issue 1371
    bare = {k: v for k, v in loop.items() if k not in ("chain_links", "warp_cycles")}
    p = smsp.loop_prediction(bare, 2, consts)
    assert p.bound == "issue" and p.cycles == 1371 and p.bounds["latency"] == 280
    # the shipped loop's chain links: 71 fma + 66 alu + 1 adu at 4, 1 MUFU at 18, 1 TMEM load at 16 = 586 cycles;
    # one warp alone under the compiled control bits takes 2587: the period, 2587 / 2 warps = 1293.5 < issue 1371
    assert loop["chain_links"] == {"fma": 71, "alu": 66, "xu": 1, "tmem": 1, "adu": 1}
    assert smsp.chain_cycles(loop, consts) == loop["chain_cycles"] == 586
    p = smsp.loop_prediction(loop, 2, consts)
    assert loop["warp_cycles"] == 2587 and p.bound == "issue" and p.cycles == 1371 and p.bounds["latency"] == 1293.5


@pytest.mark.parametrize("raised, words", [
    (subprocess.TimeoutExpired("nvcc", 600), "nvcc finishes compiling micro_softmax.cu within 600 s: got still "
                                             "running after 600 s (killed)"),
    (PermissionError(13, "Permission denied"), "nvcc can be started compiling micro_softmax.cu"),
    (subprocess.CalledProcessError(1, "nvcc", stderr="error: unknown arch"), "exit status 1: error: unknown arch")])
def test_a_tool_that_hangs_or_fails_is_a_named_capture_error(monkeypatch, raised, words):
    timeouts = []

    def run(args, **kw):
        timeouts.append(kw.get("timeout"))
        raise raised
    monkeypatch.setattr(smsp, "_tool", lambda name: f"/opt/cuda/bin/{name}")
    monkeypatch.setattr(smsp.subprocess, "run", run)
    with pytest.raises(CaptureError) as e:
        smsp.softmax_sass(smsp.SOFTMAX_SOURCE.with_name("micro_softmax.cu"))
    assert words in str(e.value) and "fix:" in str(e.value)
    assert timeouts == [600]


@pytest.mark.parametrize("kind, pipe, value, words", [
    ("rate", "xu", -1, "rate.xu -1.0"),        # b200 rows then costed their softmax on the FMA pipe, silently
    ("rate", "xu", 1e9, "rate.xu 1000000000.0"),
    ("rate", "fma", 0, "rate.fma 0.0"),        # was a ZeroDivisionError blamed on the schedule
    ("latency", "xu", -100, "latency.xu -100.0"),
    ("issue_per_clk", None, 0, "issue_per_clk 0.0"),
])
def test_an_impossible_constant_is_a_capture_error_naming_it(tmp_path, kind, pipe, value, words):
    d = json.loads(smsp.SM100.read_text())
    (d[kind][pipe] if pipe else d[kind])["value"] = value
    f = tmp_path / "sm100.json"
    f.write_text(json.dumps(d))
    with pytest.raises(CaptureError, match="SMSP constants: issue_per_clk in .*: got .*" + words.replace(".", r"\.")):
        smsp.Constants.load(f)


def test_a_nan_constant_and_a_rate_table_that_is_a_list_are_capture_errors(tmp_path):
    f = tmp_path / "sm100.json"
    f.write_text(smsp.SM100.read_text().replace('"value": 0.125', '"value": NaN'))
    with pytest.raises(CaptureError, match=r"rate\.xu nan"):
        smsp.Constants.load(f)
    d = json.loads(smsp.SM100.read_text())
    d["rate"] = []  # was an AttributeError blamed on the schedule
    f.write_text(json.dumps(d))
    with pytest.raises(CaptureError, match="lacks issue_per_clk/rate/latency values"):
        smsp.Constants.load(f)


def _pipes_capture(tmp_path, tput, lat):
    """A pipes capture holding only the ldsm class: its 8-warp throughput and its latency."""
    ms = [dict(name="pipes.ldsm.tput.w8", kind="tput", cls="ldsm", warps_per_smsp=8, status="ok",
               value=dict(median=tput)),
          dict(name="pipes.ldsm.lat", kind="lat", cls="ldsm", warps_per_smsp=1, status="ok", value=dict(median=lat))]
    f = tmp_path / "results.json"
    f.write_text(json.dumps(dict(measurements=ms)))
    return f


def test_the_shared_memory_path_from_a_pipes_capture(tmp_path):
    """An LDSM.x4 moves four wavefronts: 0.25 ldmatrix.x4 per clock is one wavefront per clock."""
    c = smsp.Constants.from_pipes_capture(_pipes_capture(tmp_path, 0.25, 33.0), waits=None)
    assert c.smem_cycles_per_wavefront == 1.0 and c.op_latency == {"LDSM": 33.0}


def test_the_mbarrier_wait_latency_comes_from_the_bar_capture(tmp_path):
    """micro/h200-2026-12-02-bar measured 48.03 cycles per try_wait on a complete phase; less the loop's 2 issue
    cycles the TRYWAIT's predicate is ready 46.03 cycles after issue (the lsu pipe's latency is 24)."""
    c = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    assert c.op_latency["SYNCS"] == pytest.approx(46.03, abs=0.005) and c.latency["lsu"] < 25
    assert "bar.try_wait.t384" in c.sources["op_latency.SYNCS"]
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps({"measurements": [{"name": "bar.try_wait.t384", "status": "ok",
                                                 "value": {"median": 1.0}}]}))
    with pytest.raises(CaptureError, match="bar.try_wait.t384"):
        smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE, waits=bad)


@pytest.mark.parametrize("tput, lat, words", [
    (0.0, 33.0, "smem_cycles_per_wavefront"),    # was a ZeroDivisionError
    (-0.25, 33.0, "smem_cycles_per_wavefront"),  # a negative backlog: shared memory never waited on
    (1e-12, 33.0, "smem_cycles_per_wavefront"),  # 2.5e11 cycles a wavefront: simulate ran that many cycles
    (float("nan"), 33.0, "smem_cycles_per_wavefront"),
    (0.25, float("nan"), "op_latency.LDSM"),    # NaN scoreboards never hold a warp back
    (0.25, 1e12, "op_latency.LDSM"),            # simulate waited 1e12 cycles on one ldmatrix
    (0.25, -5.0, "op_latency.LDSM"),
], ids=["tput-zero", "tput-negative", "tput-tiny", "tput-nan", "lat-nan", "lat-huge", "lat-negative"])
def test_an_impossible_shared_memory_constant_is_a_capture_error(tmp_path, tput, lat, words):
    f = _pipes_capture(tmp_path, tput, lat)
    with pytest.raises(CaptureError, match=r"SMSP constants: .*" + words.replace(".", r"\.")) as e:
        smsp.Constants.from_pipes_capture(f)
    assert str(f) in str(e.value)


def test_a_rate_too_small_to_simulate_is_a_capture_error(tmp_path):
    """A pipe accepting one warp-instruction in 1e12 cycles: simulate would run 1e12 cycles per instruction."""
    d = json.loads(smsp.SM100.read_text())
    d["rate"]["xu"]["value"] = 1e-12
    f = tmp_path / "sm100.json"
    f.write_text(json.dumps(d))
    with pytest.raises(CaptureError, match=r"rate\.xu 1e-12"):
        smsp.Constants.load(f)


# the fix names every missing disassembler's wheel at once (one install, not one failure per tool)
@pytest.mark.parametrize("name, wheel", [("cuobjdump", "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"),
                                        ("nvcc", "nvidia-cuda-nvcc nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm"),
                                        ("nvdisasm", "nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump")])
def test_a_missing_tool_names_the_path_the_wheel_folders_and_the_wheel(monkeypatch, tmp_path, name, wheel):
    (tmp_path / "nvidia" / "cu13" / "bin").mkdir(parents=True)  # a wheel folder without the tool
    spec = type("Spec", (), {"submodule_search_locations": [str(tmp_path / "nvidia")]})()
    monkeypatch.setattr(smsp.importlib.util, "find_spec", lambda mod: spec)
    monkeypatch.setenv("PATH", "/nowhere/bin")
    with pytest.raises(CaptureError) as e:
        smsp._tool(name)
    assert str(e.value) == (f"{name} must be on PATH or in an nvidia wheel's bin folder (nvidia/cu*/bin): got {name}: "
                            f"in none of {tmp_path}/nvidia/cu*/bin and not on PATH (/nowhere/bin); fix: pip install "
                            f"{wheel} (a source checkout's pip install \".[test]\" brings the cuobjdump and nvdisasm "
                            "wheels), or put CUDA's bin folder (e.g. /usr/local/cuda/bin) on PATH")


def test_a_missing_tool_without_any_nvidia_wheel_says_so(monkeypatch):
    monkeypatch.setattr(smsp.importlib.util, "find_spec", lambda mod: None)
    monkeypatch.setenv("PATH", "/nowhere/bin")
    with pytest.raises(CaptureError) as e:
        smsp._tool("cuobjdump")
    assert "got cuobjdump: not on PATH (/nowhere/bin), and no nvidia wheel is installed; fix: pip install " \
           "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (a source checkout's" in str(e.value)


@pytest.mark.parametrize("missing", ["cuobjdump", "nvdisasm"])
def test_a_missing_cuobjdump_or_nvdisasm_is_reported_before_nvcc_compiles(monkeypatch, missing):
    """cuobjdump -sass runs nvdisasm: without it the disassembly would fail only after nvcc's compile."""
    def tool(name):
        if name == missing:
            raise CaptureError(f"{name} must be on PATH", "missing", f"pip install {smsp.TOOL_WHEELS[name]}")
        return f"/opt/cuda/bin/{name}"
    ran = []
    monkeypatch.setattr(smsp, "_tool", tool)
    monkeypatch.setattr(smsp.subprocess, "run", lambda args, **kw: ran.append(args))
    with pytest.raises(CaptureError, match=f"{missing} must be on PATH"):
        smsp.softmax_sass()
    assert ran == []  # nvcc never started


def _bar(tmp_path, text):
    f = tmp_path / "results.json"
    f.write_text(text)
    return f


def _try_wait(median, status="ok"):
    return json.dumps({"measurements": [{"name": "bar.try_wait.t384", "status": status, "value": {"median": median}}]})


@pytest.mark.parametrize("text, words", [
    (_try_wait(48.03, status="failed"), "status 'failed'"),
    (json.dumps({"measurements": [{"name": "bar.hop.reg.t384", "status": "ok", "value": {"median": 35.3}}]}),
     "no such measurement"),
    (_try_wait(float("inf")), "inf"),
    (_try_wait(float("nan")), "nan"),
    (_try_wait(1e300), "at most 1000"),
    (_try_wait(True), "True"),
    (_try_wait("48"), "'48'"),
    (json.dumps({"measurements": [{"name": "bar.try_wait.t384", "status": "ok", "value": 48.03}]}), "None"),
    (json.dumps({"measurements": {"bar.try_wait.t384": 48.03}}), "measurements"),
    (json.dumps([48.03]), "measurements"),
    ("48.03 cycles", "JSON file unreadable"),
])
def test_a_bar_capture_without_a_usable_try_wait_is_refused(tmp_path, text, words):
    with pytest.raises(CaptureError, match=re.escape(words)):
        smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE, waits=_bar(tmp_path, text))
    assert smsp.wait_latency(_bar(tmp_path, _try_wait(48.03))) == pytest.approx(46.03, abs=1e-9)


@needs_nvcc
def test_two_warps_average_over_their_starting_phase():
    """Two warps of micro_mix_softmax_v3.cu's ex2 tile: started together (the default, one phase) the simulation
    keeps them in step, 1644 cycles a pair, 24% above contend.ex2.ss (1325,
    micro/h200-2026-11-30-contend-launch) and 14% above contend3.ex2.ss (1448, micro/h200-2026-12-02-contend3).
    Over 8 starting phases the mean comes within 10% of the two captures' mean (1386.5 cycles a pair, by hand
    from their results.json); one warp has no phase."""
    from lapis.validate import micro
    consts, _ = micro.constants()
    fns = micro.compiled(micro.KERNELS / micro.CONTEND_SOURCE)
    body = micro.softmax_body(fns["micro_contend_ex2"], "ex2")
    in_step, mean = 2 * smsp.simulate(body, 2, consts), 2 * smsp.simulate(body, 2, consts, phases=smsp.PHASES)
    assert in_step == pytest.approx(1.24 * 1325, rel=0.01) and mean < in_step
    assert abs(mean / 1386.5 - 1) < 0.10
    assert smsp.simulate(body, 1, consts, phases=1) == smsp.simulate(body, 1, consts, phases=8)


def test_a_phase_count_below_one_is_refused():
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, None, None, 0, 0))]
    with pytest.raises(CaptureError, match="phases >= 1"):
        smsp.simulate(body, 2, smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE), phases=0)


@pytest.mark.parametrize("warps", [1, 2])
@pytest.mark.parametrize("phases, rule", [
    (1.5, "phases must be an integer"), (True, "phases must be an integer"), ("2", "phases must be an integer"),
    (None, "phases must be an integer"), (float("nan"), "phases must be an integer"),
    (-1, "phases >= 1"), (65, "1 to 64 starting phases"), (10**9, "1 to 64 starting phases")])
def test_a_phase_count_that_is_no_whole_number_from_1_to_64_is_refused(warps, phases, rule):
    """One warp has no phase, but a bad count is refused for it too (1.5 and 10**9 once ran as 1 there); with two
    warps 1.5 was a TypeError, True ran as one phase and 10**9 ran for hours."""
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, None, None, 0, 0))]
    with pytest.raises(CaptureError) as exc:
        smsp.simulate(body, warps, smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE), phases=phases)
    msg = str(exc.value)
    assert rule in msg and (f"got {phases!r};" in msg or f"got ({warps}, 8, {phases});" in msg) and "; fix: pass" in msg


def test_the_phase_cap_names_the_rule_value_and_fix():
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, None, None, 0, 0))]
    with pytest.raises(CaptureError) as exc:
        smsp.simulate(body, 2, smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE), phases=10**9)
    assert str(exc.value) == ("simulate averages over 1 to 64 starting phases (each is two full simulations of the "
                              "warps): got 1000000000; fix: pass phases=smsp.PHASES (8) or at most 64")


@pytest.mark.parametrize("kw", [{"warps": 1.5}, {"warps": True}, {"iterations": 8.0}])
def test_a_warp_or_iteration_count_that_is_not_an_int_is_refused(kw):
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, None, None, 0, 0))]
    args = {"warps": 2, **kw}
    with pytest.raises(CaptureError) as exc:
        smsp.simulate(body, consts=smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE), **args)
    what, v = next(iter(kw.items()))
    assert str(exc.value) == f"{what} must be an integer: got {v!r}; fix: pass a whole number for {what}"


def test_sixty_four_phases_run():
    """Two warps of one FFMA with stall count 4 never meet on the issue port at any starting phase: each issues
    every 4 cycles, 2 SMSP cycles per warp-iteration (one warp alone: 4)."""
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(4, False, None, None, 0, 0))]
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    assert smsp.simulate(body, 2, consts, phases=64) == 2.0 and smsp.simulate(body, 1, consts, phases=64) == 4.0


def test_a_pipe_bound_tile_costs_twice_its_time_in_a_pair():
    # 16 independent MUFU: the xu pipe (1/8 per clock) is the whole tile, so two tiles started at any offset share
    # it for their overlap and each tile in the pair costs both tiles' pipe time
    body = [ins(f"MUFU.EX2 R{k}, R{k + 32}") for k in range(16)]
    alone = smsp._issue_all(body, 1, BOOK, 1)
    assert alone == 121  # 15 x 8 cycles of pipe backlog to the last issue, then the cycle it issues in
    # a second warp starting s cycles later issues its last MUFU on cycle 31 x 8 = 248 (both done at 249) while s
    # is at most 128: 128 - s extra cycles over 121 - s of overlap; s = round(k x 121 / 16)
    starts = [round(k * 121 / 16) for k in range(16)]
    expected = 121 * (1 + sum(128 - s for s in starts) / sum(121 - s for s in starts))
    assert smsp.tile_pair(body, BOOK) == pytest.approx(expected)
    assert 2 * alone < expected < 2.12 * alone


def test_a_latency_bound_tile_costs_its_own_time_in_a_pair():
    # FFMAs each stalling 4 cycles: one warp issues every 4th cycle, so a second warp fills the gaps for free
    body = [ins(f"FFMA R{k}, R{k}, R40, R41", stall=4) for k in range(16)]
    alone = smsp._issue_all(body, 1, BOOK, 1)
    assert smsp.tile_pair(body, BOOK) == pytest.approx(alone, rel=0.01)


def test_the_pair_of_two_restarted_tiles_ignores_the_phase_free_warps_lock_into():
    # one ALU block then one MUFU block: free-running warps settle into a phase that depends on where they start;
    # restarted tiles average over every start offset, so the cost lies between the alone and the serialised tile
    body = ([ins(f"FMNMX R{k}, R{k}, R40, !PT", stall=2) for k in range(24)]
            + [ins(f"MUFU.EX2 R{k + 24}, R{k}") for k in range(12)])
    alone = smsp._issue_all(body, 1, BOOK, 1)
    pair = smsp.tile_pair(body, BOOK)
    assert alone < pair < 2 * alone
    assert smsp.tile_pair(body, BOOK, offsets=1) >= pair  # starting together is the worst start


@pytest.mark.parametrize("offsets", [0, 65, 2.5, True])
def test_a_pair_offset_count_outside_1_to_64_is_refused(offsets):
    body = [ins("FFMA R1, R1, R3, R4")]
    with pytest.raises(CaptureError, match="start offsets|offsets"):
        smsp.tile_pair(body, BOOK, offsets=offsets)


@pytest.mark.parametrize("body, words", [([], "non-empty list"), ("FFMA", "non-empty list"), (None, "non-empty list"),
                                         (["FFMA R1, R1, R3, R4"], "non-empty list")])
def test_a_body_that_is_not_instructions_is_refused(body, words):
    with pytest.raises(CaptureError, match=words):
        smsp.simulate(body, 1, BOOK)


@pytest.mark.parametrize("rate, latency", [(0.0, 18), (-1.0, 18), (float("nan"), 18), (1e6, 18),
                                           (0.125, float("inf")), (0.125, float("nan")), (0.125, -50)])
def test_constants_no_smsp_could_have_are_refused_before_simulating(rate, latency):
    body = [ins(f"MUFU.EX2 R{k}, R{k + 32}") for k in range(4)]
    bad = dataclasses.replace(BOOK, rate={**BOOK.rate, "xu": rate}, latency={**BOOK.latency, "xu": latency})
    with pytest.raises(CaptureError, match="SMSP constants"):
        smsp.simulate(body, 1, bad)
    with pytest.raises(CaptureError, match="SMSP constants"):
        smsp.tile_pair(body, bad)
    with pytest.raises(CaptureError, match="lapis.model.smsp.Constants"):
        smsp.simulate(body, 1, None)


@pytest.mark.parametrize("resync", ["no", 1, None, 2.5])
def test_contend_takes_resync_as_a_bool_only(resync):
    body = [ins(f"MUFU.EX2 R{k}, R{k + 32}") for k in range(4)]
    with pytest.raises(ScheduleError, match="resync is True"):
        contend.of(body, BOOK, tensor_share.Share.from_capture(), resync=resync)


def test_a_json_file_it_cannot_read_is_a_capture_error_naming_it(tmp_path, monkeypatch):
    """A capture without read permission (or an I/O error) gave a PermissionError traceback through validate micro."""
    from pathlib import Path
    f = tmp_path / "results.json"
    f.write_text("{}")
    real = Path.read_text

    def deny(self, *a, **k):
        if self == f:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)
    monkeypatch.setattr(Path, "read_text", deny)
    with pytest.raises(CaptureError, match=f"JSON file unreadable: got {f}: PermissionError"):
        smsp._read_json(f)


def test_a_taken_branch_delays_its_warp_by_the_redirect():
    """3 FFMA (stall 1) and a BRA (stall 6) back to the first: 9 cycles an iteration by the control bits, 13 with a
    taken branch's 4-cycle redirect; a BRA whose next instruction on the path is the next address falls through and
    costs nothing more; one parsed without an address is not counted."""
    def at(k, text, stall=1):
        return dataclasses.replace(ins(text, stall), address=16 * k)
    loop = [at(k, f"FFMA R{k}, R{k}, R4, R5 ;") for k in range(3)] + [at(3, "BRA 0x0 ;", 6)]
    assert smsp.taken_branches(loop) == [False, False, False, True]
    assert smsp.simulate(loop, 1, BOOK) == 9
    assert smsp.simulate(loop, 1, dataclasses.replace(BOOK, taken_branch=4.0)) == 13
    through = loop + [at(4, "FFMA R3, R3, R4, R5 ;")]
    assert smsp.taken_branches(through) == [False] * 5
    assert smsp.simulate(through, 1, dataclasses.replace(BOOK, taken_branch=4.0)) == 10
    assert smsp.taken_branches([ins("BRA 0x0 ;", 6)]) == [False]


@pytest.mark.parametrize("key, value", [("taken_branch", -1), ("branch_hold", float("nan")), ("taken_branch", 1e9)])
def test_a_branch_constant_outside_0_to_the_latency_cap_is_refused(tmp_path, key, value):
    doc = json.loads(smsp.PENDING.read_text())
    doc[key]["value"] = value
    f = tmp_path / "constants.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match=f"{key} {value}"):
        smsp.Constants.load(f)
    del doc[key]  # absent: no cost (the sm_100 file has neither)
    f.write_text(json.dumps(doc))
    assert getattr(smsp.Constants.load(f), key) == 0.0
