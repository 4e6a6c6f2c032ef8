"""lapis.model.tensor_share: each pipe's share of the cycles contested with wgmma, from the beside capture, and the
shared-cycle simulation predicting the classes the shares were not taken from."""

import dataclasses
import json
import shutil
import statistics

import pytest

from lapis.errors import CaptureError, ScheduleError
from lapis.model import sass, smsp, tensor_share
from lapis.validate import micro

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def _values():
    doc = json.loads(tensor_share.BESIDE_CAPTURE.read_text())
    return {m["name"]: m for m in doc["measurements"]}


def test_shares_follow_the_single_class_streams():
    v, share = _values(), tensor_share.Share.from_capture()
    for pipe, cls_ in (("alu", "fmnmx"), ("xu", "ex2"), ("lsu", "shfl")):
        alone = 64 * v[f"beside.{cls_}.alone"]["value"]["median"]
        beside = 64 * v[f"beside.{cls_}.ss"]["value"]["median"]
        assert share.win[pipe] == pytest.approx(1 / (1 + 1 / beside - 1 / alone)), pipe
    # by hand from results.json: FMNMX 0.479 alone, 0.271 beside -> 0.38; back-to-back FMA always wins (no share)
    assert "fma" not in share.win and share.win["alu"] == pytest.approx(0.38, abs=0.01)
    assert share.win["lsu"] < 0.1
    # MUFU.EX2's stream left the tensor pipe at 1.002 of its rate; every other class took cycles from it
    wg = v["beside.wgmma.ss"]["value"]["median"]
    assert statistics.median(v["beside.ex2.ss"]["raw"]["follower_rate"]) / wg > 0.99
    assert share.free == frozenset({"xu"})


def test_a_capture_without_a_class_is_refused(tmp_path):
    doc = json.loads(tensor_share.BESIDE_CAPTURE.read_text())
    doc["measurements"] = [m for m in doc["measurements"] if m["name"] != "beside.fmnmx.ss"]
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match="beside.fmnmx.ss"):
        tensor_share.Share.from_capture(f)


@pytest.mark.parametrize("drop, median", [("density.ffma_c1.ss", None), ("density.fmnmx_c1.alone", None),
                                           (None, 0.5)])
def test_a_density_capture_without_a_one_chain_stream_is_refused(tmp_path, drop, median):
    """A density capture without a one-chain stream, or with a rate past the issue limit (0.5 units of 8
    instructions per clk: 4 warp-instructions), is a CaptureError naming the file and the measurement."""
    doc = json.loads(tensor_share.DENSITY_CAPTURE.read_text())
    doc["measurements"] = [m for m in doc["measurements"] if m["name"] != drop]
    if median is not None:
        next(m for m in doc["measurements"] if m["name"] == "density.ffma_c1.alone")["value"]["median"] = median
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CaptureError) as exc:
        tensor_share.Share.from_capture(density=f)
    assert str(f) in str(exc.value) and (drop or "density.ffma_c1.alone") in str(exc.value)


def test_a_body_without_control_bits_is_refused():
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R2, R3, R4 ;")]
    with pytest.raises(CaptureError, match="control bits"):
        tensor_share.run(body, consts, tensor_share.Share.from_capture(), 512, 0)


@needs_nvcc
@pytest.mark.parametrize("cls_", ["lop3", "f2fp"])
def test_classes_not_used_for_the_shares_are_predicted(cls_):
    """LOP3 and F2FP run on the ALU pipe, whose share came from FMNMX: their streams beside wgmma from shared
    memory are predictions (measured: LOP3 0.275 per clk and the tensor pipe at 0.735 of its rate; F2FP 0.274 and
    0.732)."""
    consts, _ = micro.constants()
    fns = micro.compiled(micro.KERNELS / "micro_beside_v1.cu")
    ins = fns[f"micro_beside_{cls_}"]
    lp = next(lp for lp in sass.loops(ins)
              if not {i.opcode for i in ins[lp.head:lp.tail + 1]} & {"HGMMA", "LDS", "BSSY"})
    body = [ins[k] for k in sass.loop_body(ins, lp, set())]
    ops = sum(i.opcode in ("LOP3", "F2FP") for i in body)
    v = _values()
    tile, unit = tensor_share.run(body, consts, tensor_share.Share.from_capture(), 512, 0)
    measured_cls = 64 * v[f"beside.{cls_}.ss"]["value"]["median"]
    measured_tensor = statistics.median(v[f"beside.{cls_}.ss"]["raw"]["follower_rate"]) / v["beside.wgmma.ss"][
        "value"]["median"]
    assert ops / tile == pytest.approx(measured_cls, rel=0.05)
    assert 512 / unit == pytest.approx(measured_tensor, rel=0.05)
    assert smsp.simulate(body, 1, consts) < tile  # alone it is faster


def _corrupt(tmp_path, name, edit):
    doc = json.loads(tensor_share.BESIDE_CAPTURE.read_text())
    edit(next(m for m in doc["measurements"] if m["name"] == name))
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    return f


@pytest.mark.parametrize("median", [0, -1, float("nan"), "0.01", None])
def test_a_rate_that_is_no_positive_number_is_refused(tmp_path, median):
    f = _corrupt(tmp_path, "beside.ffma.alone", lambda m: m["value"].__setitem__("median", median))
    with pytest.raises(CaptureError, match=r"finite number of units per clock above zero.*beside.ffma.alone"):
        tensor_share.Share.from_capture(f)


def test_a_nan_wgmma_rate_is_refused_not_read_as_no_free_pipe(tmp_path):
    f = _corrupt(tmp_path, "beside.wgmma.ss", lambda m: m["value"].__setitem__("median", float("nan")))
    with pytest.raises(CaptureError, match="beside.wgmma.ss"):
        tensor_share.Share.from_capture(f)


def test_a_class_rate_above_the_issue_rate_is_refused(tmp_path):
    f = _corrupt(tmp_path, "beside.ffma.ss", lambda m: m["value"].__setitem__("median", 1.0))  # 64 per clock
    with pytest.raises(CaptureError, match="warp-instructions per clock.*beside.ffma.ss 64.0"):
        tensor_share.Share.from_capture(f)


def test_a_class_rate_below_a_thousandth_of_an_issue_per_clock_is_refused_not_run_to_the_cycle_cap(tmp_path):
    """A stream rate of 1e-300 units per clock once made a share near 1e-300: validate micro then simulated to
    MAX_CYCLES (50 million cycles) and said only that the simulation did not end."""
    f = _corrupt(tmp_path, "beside.ffma.ss", lambda m: m["value"].__setitem__("median", 1e-300))
    with pytest.raises(CaptureError) as exc:
        tensor_share.Share.from_capture(f)
    assert str(exc.value) == (f"a class stream issues 0.001 to 2.0 warp-instructions per clock (median x 64 per unit): "
                              f"got {f}: beside.ffma.ss 6.4e-299; fix: recapture it: benchmarks/h200_beside.sh")
    doc = json.loads(tensor_share.DENSITY_CAPTURE.read_text())
    next(m for m in doc["measurements"] if m["name"] == "density.fmnmx_c1.ss")["value"]["median"] = 1e-4
    d = tmp_path / "density.json"
    d.write_text(json.dumps(doc))
    with pytest.raises(CaptureError) as exc:
        tensor_share.Share.from_capture(density=d)
    assert str(exc.value).endswith(f"(median x 8 per unit): got {d}: density.fmnmx_c1.ss 0.0008; fix: recapture it: "
                                   "bash benchmarks/h200_micro.sh density")


@pytest.mark.parametrize("rates", [None, [], [float("nan")] * 3, ["x"]])
def test_a_follower_rate_that_is_no_list_of_numbers_is_refused(tmp_path, rates):
    def edit(m):
        if rates is None:
            m["raw"].pop("follower_rate")
        else:
            m["raw"]["follower_rate"] = rates
    f = _corrupt(tmp_path, "beside.fmnmx.ss", edit)
    with pytest.raises(CaptureError, match="follower_rate"):
        tensor_share.Share.from_capture(f)


@pytest.mark.parametrize("doc", [[1, 2], {"measurements": 5}, {"measurements": ["x"]}, {"measurements": [{}]}])
def test_a_capture_of_another_shape_is_refused(tmp_path, doc):
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match=r"\{measurements: \[\{name"):
        tensor_share.Share.from_capture(f)


def _ffma_body():
    return [sass.parse_instruction("FFMA R1, R2, R3, R4 ;", control=sass.Control(4, False, None, None, 0, 0))]


def test_an_empty_body_is_refused():
    consts, _ = micro.constants()
    with pytest.raises(CaptureError, match="needs a loop body"):
        tensor_share.run([], consts, tensor_share.Share.from_capture(), 512, 0)


@pytest.mark.parametrize("kw", [{"slots": -5}, {"slots": float("nan")}, {"slots": float("inf")}, {"gap": -100},
                                {"gap": float("nan")}, {"iterations": 1}, {"iterations": 0}, {"iterations": 2.5}])
def test_a_tensor_job_that_cannot_run_is_refused(kw):
    consts, _ = micro.constants()
    args = {"slots": 512, "gap": 0, **kw}
    with pytest.raises(ScheduleError, match=next(iter(kw))):
        tensor_share.run(_ffma_body(), consts, tensor_share.Share.from_capture(), **args)


@pytest.mark.parametrize("w", [0.0, -1.0, 5.0, float("nan")])
def test_a_share_outside_zero_one_is_refused_not_run_to_the_cycle_cap(w):
    consts, _ = micro.constants()
    share = tensor_share.Share({"fma": w}, frozenset(), "hand-made")
    with pytest.raises(ScheduleError, match=r"share of contested cycles is in \(0, 1\]"):
        tensor_share.run(_ffma_body(), consts, share, 512, 0)


@pytest.mark.parametrize("sparse", [0.0, float("nan"), -0.5, 2.0, True, "0.4"])
def test_an_isolated_share_outside_zero_one_is_refused_not_run_to_the_cycle_cap(sparse):
    """share.sparse as share.win: 0 or NaN never issues an isolated instruction (the run ended only at MAX_CYCLES),
    2 or True issued one every cycle whatever the tensor pipe (5 cycles an iteration, as with no tensor job)."""
    consts, _ = micro.constants()
    share = tensor_share.Share({"fma": 0.87}, frozenset(), "hand-made", {"fma": sparse})
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    with pytest.raises(ScheduleError) as exc:
        tensor_share.run(body, consts, share, 4, 0)
    assert str(exc.value) == (r"a pipe's share of contested cycles is in (0, 1] (share.sparse): got hand-made: "
                              f"{{'fma': {sparse!r}}}; fix: build the shares with Share.from_capture")


def test_isolated_shares_that_are_no_dict_are_refused():
    consts, _ = micro.constants()
    share = tensor_share.Share({"fma": 0.87}, frozenset(), "hand-made", None)
    with pytest.raises(ScheduleError) as exc:
        tensor_share.run(_ffma_body(), consts, share, 4, 0)
    assert str(exc.value) == (r"a pipe's share of contested cycles is in (0, 1] (share.sparse): got hand-made: None; "
                              "fix: build the shares with Share.from_capture")


def test_a_scoreboard_wait_costs_the_pipe_latency():
    """One FFMA per iteration writing scoreboard 0 and waiting on it: with no tensor job each issue waits the fma
    latency of the pipes capture (4.54 cycles, h200-2026-12-01-pipes) rounded up to the next cycle: 5 cycles."""
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    assert tensor_share.run(body, consts, tensor_share.Share.from_capture(), 0, 0) == (5.0, float("inf"))


def test_an_isolated_instruction_waits_and_leaves_the_tensor_pipe_its_cycle():
    """One FFMA per iteration waiting 5 cycles on its own scoreboard: it is ready 5 cycles after the SMSP's last
    contested issue (>= SPARSE_GAP), so beside a tensor job of 4 slots it waits with the density capture's one-chain
    FFMA share (0.374: FFMA on one chain 0.2279 per clk alone, 0.1653 beside wgmma, 8 per unit) and the tensor pipe
    never loses a cycle: 4 cycles per unit, and the warp's iteration is 5 + (1 / 0.374 - 1) = 6.67 cycles."""
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    share = tensor_share.Share.from_capture()
    assert share.sparse["fma"] == pytest.approx(1 / (1 + 1 / (8 * 0.02064) - 1 / (8 * 0.02852)), rel=0.01)
    soft, per_unit = tensor_share.run(body, consts, share, 4, 0, iterations=40)
    assert per_unit == 4.0 and soft == pytest.approx(5 + 1 / share.sparse["fma"] - 1, abs=0.1)


def test_two_warps_interleave_their_latency_waits():
    """Two warps of that FFMA share the SMSP's issue port: alone still 5 cycles per iteration per warp. Beside the
    tensor job the two are ready in the same cycle; one issues isolated (the tensor pipe keeps the cycle), the
    other is then back to back with it and takes a cycle from the tensor pipe: one cycle lost per round, so a
    4-slot unit takes 4 x round / (round - 1) cycles."""
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    share = tensor_share.Share.from_capture()
    assert tensor_share.run(body, consts, share, 0, 0, warps=2) == (5.0, float("inf"))
    soft, per_unit = tensor_share.run(body, consts, share, 4, 0, iterations=40, warps=2)
    assert 5.0 < soft < 5 + 1 / share.sparse["fma"] and per_unit == pytest.approx(4 * soft / (soft - 1), rel=0.02)


@pytest.mark.parametrize("warps", [0, -1, 1.5])
def test_a_warp_count_below_one_is_refused(warps):
    consts, _ = micro.constants()
    with pytest.raises(ScheduleError, match="warps"):
        tensor_share.run(_ffma_body(), consts, tensor_share.Share.from_capture(), 512, 0, warps=warps)


@pytest.mark.parametrize("iterations", [2, 3, 5, 7])
def test_two_warps_time_whole_rounds_for_any_iteration_count(iterations):
    """The scoreboard-bound FFMA of test_two_warps_interleave_their_latency_waits: 5 cycles per iteration per warp
    whatever the iteration count; an odd count once timed one warp's iteration more than the other's (4.0)."""
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    share = tensor_share.Share.from_capture()
    assert tensor_share.run(body, consts, share, 0, 0, iterations=iterations, warps=2) == (5.0, float("inf"))
    assert tensor_share.run(body, consts, share, 0, 0, iterations=iterations, warps=3) == (5.0, float("inf"))


@pytest.mark.parametrize("warps", [17, 64, 10**6])
def test_more_warps_than_an_smsp_holds_are_refused_before_running(warps):
    consts, _ = micro.constants()
    with pytest.raises(ScheduleError) as exc:
        tensor_share.run(_ffma_body(), consts, tensor_share.Share.from_capture(), 512, 0, warps=warps)
    assert str(exc.value) == ("the shared-cycle simulation runs 1 to 16 warps per SMSP (64 resident warps per SM on "
                              f"sm_90): got {warps}; fix: pass the softmax warps per SMSP (1 or 2)")


@pytest.mark.parametrize("warps", [True, 2.0])
def test_a_warp_count_that_is_not_an_int_is_refused(warps):
    consts, _ = micro.constants()
    with pytest.raises(ScheduleError) as exc:
        tensor_share.run(_ffma_body(), consts, tensor_share.Share.from_capture(), 512, 0, warps=warps)
    assert str(exc.value) == f"warps must be an integer: got {warps!r}; fix: pass a whole number for warps"


def test_sixteen_warps_run():
    consts, _ = micro.constants()
    body = [sass.parse_instruction("FFMA R1, R1, R3, R4 ;", control=sass.Control(1, False, 0, None, 1, 0))]
    # 16 warps of one FFMA each: the fma pipe, not the 5-cycle scoreboard wait, bounds them: 16 issues a round at
    # the pipes capture's 0.9707 FFMA per clock (h200-2026-12-01-pipes) are 16.48 cycles
    soft, _ = tensor_share.run(body, consts, tensor_share.Share.from_capture(), 0, 0, warps=16)
    assert soft == pytest.approx(16 / 0.9706682267895075, abs=0.05)


def test_the_density_and_beside_constants_reproduce_in_a_second_run():
    """micro/h200-2026-12-03-density-run2 (one process, a later device call): every density measurement, and the
    dense FFMA and FMNMX streams alone and beside wgmma of micro/h200-2026-12-02-beside (another day), within 0.5% of
    the captures the model reads, class rate and the wgmma follower's rate both."""
    run2 = _by_name(tensor_share.DENSITY_CAPTURE.parent.parent.parent / "h200-2026-12-03-density-run2" / "micro"
                    / "results.json")
    firsts = {**_by_name(tensor_share.DENSITY_CAPTURE), **_by_name(tensor_share.BESIDE_CAPTURE)}
    assert len(run2) == 16 and sum(n.startswith("density.") for n in run2) == 11
    for name, m in run2.items():
        assert m["value"]["median"] == pytest.approx(firsts[name]["value"]["median"], rel=0.005), name
        if m["params"].get("follow"):
            assert statistics.median(m["raw"]["follower_rate"]) == pytest.approx(
                statistics.median(firsts[name]["raw"]["follower_rate"]), rel=0.005), name


def _by_name(path):
    return {m["name"]: m for m in json.loads(path.read_text())["measurements"] if m["status"] == "ok"}


def _loop(*texts_stalls):
    """A loop body at consecutive addresses from 0; a BRA last jumps back to the first (taken)."""
    return [dataclasses.replace(sass.parse_instruction(t), address=16 * k,
                                control=sass.Control(st, False, None, None, 0, 0))
            for k, (t, st) in enumerate(texts_stalls)]


NO_SHARES = tensor_share.Share({}, frozenset(), "test: every pipe always wins", {})


@pytest.mark.parametrize("taken, hold, iteration", [(0.0, 0.0, 14), (4.0, 16.0, 33)])
def test_an_fma_streak_yields_only_after_the_taken_branch(taken, hold, iteration):
    """8 independent FFMA (stall 1) and a BRA (stall 6) back to the first, beside a wgmma always in flight, every
    pipe winning every contested cycle: the first FFMA issues when the branch's stall and redirect are over (6 + 4
    cycles); each later FFMA, back to back after an FFMA, waits out the hold (16 cycles of wgmma in flight after
    the redirect): by hand 33 cycles an iteration against 14, and the tensor pipe advances in the cycles no FFMA or
    BRA issues in (9 a loop): 24 of 33, 5 of 14."""
    body = _loop(*[(f"FFMA R{k}, R{k}, R20, R21 ;", 1) for k in range(8)], ("BRA 0x0 ;", 6))
    consts = dataclasses.replace(micro.constants()[0], taken_branch=taken, branch_hold=hold)
    tile, unit = tensor_share.run(body, consts, NO_SHARES, iteration - 9, 0.0)
    assert (tile, unit) == (iteration, iteration)


def test_an_fma_instruction_after_an_alu_one_is_no_streak_the_hold_stops():
    """LOP3, VIADD (the FMA pipe) back to back, BRA: the VIADD follows an ALU instruction, so the hold after the
    branch does not stop it: 12 cycles an iteration (4 issues and the branch's 6 + 4) with the hold or without."""
    body = _loop(("LOP3.LUT R1, R2, R3, R4, 0x96, !PT ;", 1), ("VIADD R5, R5, 0x1 ;", 1), ("BRA 0x0 ;", 6))
    base = dataclasses.replace(micro.constants()[0], taken_branch=4.0)
    for hold in (0.0, 16.0):
        assert tensor_share.run(body, dataclasses.replace(base, branch_hold=hold), NO_SHARES, 100, 0.0)[0] == 12


@needs_nvcc
def test_the_branch_constants_are_derived_from_the_captures():
    """lapis/data/smsp_pending.json's taken_branch and branch_hold are what lapis.model.branch derives from the
    one-chain FFMA stream alone and the dense FFMA stream beside wgmma: 4 and 16 cycles."""
    from lapis.model import branch
    filed = smsp.Constants.load()
    assert branch.derive(micro.compiled) == {"taken_branch": filed.taken_branch, "branch_hold": filed.branch_hold}
    assert (filed.taken_branch, filed.branch_hold) == (4.0, 16.0)


@pytest.mark.parametrize("edit, words", [
    (dict(taken_branch=float("nan")), "taken_branch nan"), (dict(branch_hold=-1.0), "branch_hold -1.0"),
    (dict(branch_hold=1e6), "branch_hold 1000000.0")])
def test_branch_constants_run_refuses_are_named(edit, words):
    """The shared-cycle simulation checks the constants as simulate does: a NaN redirect ran 50 M cycles to a
    message that did not name it; a negative or huge hold gave numbers."""
    body = _loop(("FFMA R1, R1, R20, R21 ;", 1), ("BRA 0x0 ;", 6))
    consts = dataclasses.replace(micro.constants()[0], **edit)
    with pytest.raises(CaptureError, match=words):
        tensor_share.run(body, consts, NO_SHARES, 100, 0.0)


def test_a_body_with_addresses_on_some_instructions_only_is_refused():
    body = [sass.parse_instruction("FFMA R1, R1, R20, R21 ;", control=sass.Control(1, False, None, None, 0, 0))]
    body += _loop(("FFMA R2, R2, R20, R21 ;", 1), ("BRA 0x0 ;", 6))
    with pytest.raises(CaptureError, match="1 of 3 without one"):
        tensor_share.run(body, micro.constants()[0], NO_SHARES, 100, 0.0)


@pytest.mark.parametrize("name, capture", [("density.ffma_c1.alone", "DENSITY_CAPTURE"),
                                           ("beside.ffma.ss", "BESIDE_CAPTURE")])
def test_branch_constants_from_a_capture_without_their_measurement_are_refused(tmp_path, monkeypatch, name, capture):
    from lapis.model import branch
    doc = json.loads(getattr(tensor_share, capture).read_text())
    doc["measurements"] = [m for m in doc["measurements"] if m["name"] != name]
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    monkeypatch.setattr(tensor_share, capture, f)
    with pytest.raises(CaptureError, match=f"no {name}"):
        branch.derive(lambda p: pytest.fail(f"compiled {p} before reading the captures"))
