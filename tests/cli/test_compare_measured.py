"""`lapis compare --measured`: a user's schedule (examples/ws_gemm.py:WS_GEMM) against a measured file written
here, in the format of docs/timeline-format.md, from a simulated run of the same schedule recorded as the kernel
would record it (a begin at each span's start, an end at its finish; the tensor pipe's queue is invisible to a
warp, so a wait for the tensor pipe belongs to the op that follows it). A known delay in the written run must
come back as the first divergence."""

import json
import struct
from pathlib import Path

import numpy as np

from lapis.cli import main
from lapis.pipeline_sim.simulate import simulate
from lapis.pipeline_sim.trace import check_chrome

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = f"{ROOT / 'examples' / 'ws_gemm.py'}:WS_GEMM"
SHAPE = "2048x2048x512"
ROLES = ["producer", "consumer0", "consumer1"]
OPS = ["begin", "wait empty", "issue TMA", "wait full", "wgmma", "wait wgmma", "store C"]
CYCLES_PER_NS, C0, G0 = 2, 10_000, 7_000_000_000


def kernel_records(events, delay: dict | None = None) -> list:
    """Per role, (t_ns, role code, op code, complete, work, k) as a kernel records them: a begin at a span's
    start and an end at its finish. A warp runs its role in program order, while the simulator lets a role's
    asynchronous work overlap (a wgmma on the pipe while the warp waits for the next slot): an event that starts
    before the role's previous record is left out, as a kernel with one recording thread per role would not
    see it. A wait for the tensor pipe starts the next op (not a wait) of its role: a warp issues at once and
    the pipe queues the work. `delay`: {(role, op, work_item, k_index): ns} moves that op's begin, and every
    later record of its role, that much later."""
    out = []
    for r, role in enumerate(ROLES):
        mine = sorted((e for e in events if e.role == role), key=lambda e: (e.start_ns, e.id))
        last, start, shift = None, None, 0.0
        for e in mine:
            if e.op == "wait tensor":
                start = e.start_ns if start is None else start
                continue
            wait = e.kind == "wait"
            begin = e.start_ns if start is None or wait else start
            start = start if wait else None
            if last is not None and begin < last:
                continue
            shift += (delay or {}).get((role, e.op, e.work_item, e.k_index), 0.0)
            out.append((begin + shift, r, 0, False, e.work_item, e.k_index))
            out.append((e.end_ns + shift, r, OPS.index(e.op), wait, e.work_item, e.k_index))
            last = e.end_ns
    return out


def write_measured(path: Path, records: list, meta: dict, iter_every: int = 1) -> None:
    """One sampled CTA (CTA 0 of 4, every 2nd CTA sampled: rows for CTAs 0 and 2, the mask keeping row 0); with
    iter_every, the records of K indices >= 0 that are not multiples of it are left out, as the header skips
    them."""
    records = [x for x in records if x[5] < 0 or x[5] % iter_every == 0]
    roles, per = len(ROLES), {}
    slots = {}
    for t, r, op, complete, work, k in records:
        n = per.get(r, 0)
        per[r] = n + 1
        slots[1 + r + roles * n] = struct.pack("<QIIiHBB", C0 + round(t * CYCLES_PER_NS), 0, work, k, 5, r,
                                               op | (0x80 if complete else 0))
    capacity = max(slots) + 2
    end_ns = int(max(t for t, *_ in records)) + 100

    def anchor(cycles, ns):
        return struct.pack("<QIIIHBB", cycles, 0, ns & 0xFFFFFFFF, ns >> 32, 5, 0xFF, 0x7F)
    row = bytearray(capacity * 24)
    row[:24] = anchor(C0, G0)
    row[-24:] = anchor(C0 + end_ns * CYCLES_PER_NS, G0 + end_ns)
    for s, rec in slots.items():
        row[s * 24:(s + 1) * 24] = rec
    rows = 2
    head = b"LAPISTL1" + struct.pack("<IIIIIIIIIIQII", 1, 64, 24, capacity, rows, roles, 4, 0, 2, iter_every, 0b01,
                                     64, 64 + 8)
    data = head + struct.pack("<II", len(records), 0) + bytes(row) + bytes(capacity * 24)
    np.savez(path, buffer=np.frombuffer(data, np.uint8),
             meta=np.frombuffer(json.dumps(dict(roles=ROLES, ops=OPS, shape=SHAPE, **meta)).encode(), np.uint8))


def run_json(capsys, *args):
    capsys.readouterr()
    rc = main(["compare", "--schedule", SCHEDULE, "--shape", SHAPE, "--json", *args])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else out.err)


def test_an_exact_run_matches_and_the_total_error_uses_the_plain_time(tmp_path, capsys):
    sim = simulate(SCHEDULE, "h200", SHAPE)
    f = tmp_path / "run.npz"
    write_measured(f, kernel_records(sim["_events"]), dict(plain_us=1.25 * sim["predicted_us"]))
    rc, r = run_json(capsys, "--measured", str(f))
    assert rc == 0
    assert abs(r["total_err_pct"] - (-20.0)) < 1e-9
    assert r["cta"] == 0 and r["sm"] == 5
    assert r["sampling"]["cta_every"] == 2 and r["sampling"]["ctas_sampled"] == 1
    assert abs(r["iteration_ns"]["err_pct"]) < 1.0
    assert r["first_divergence"]["diverged"] is False and r["first_divergence"]["matched"] > 20
    assert set(r["roles"]) == set(ROLES)
    # consumer0's busy time: its op spans as written (ops of one role never overlap here), to 1 ns a span
    recs = kernel_records(sim["_events"])
    ops = [(b[0], e[0]) for b, e in zip(recs[::2], recs[1::2]) if e[1] == 1 and not e[3]]
    assert abs(r["roles"]["consumer0"]["busy_ns_measured"] - sum(t1 - t0 for t0, t1 in ops)) <= len(ops)


def test_a_delay_is_named_as_the_first_divergence(tmp_path, capsys):
    sim = simulate(SCHEDULE, "h200", SHAPE)
    first_item = min(e.work_item for e in sim["_events"])
    f = tmp_path / "late.npz"
    write_measured(f, kernel_records(sim["_events"], {("consumer0", "wgmma", first_item, 3): 800.0}), {})
    rc, r = run_json(capsys, "--measured", str(f), "--figure", str(tmp_path / "g.png"), "--trace",
                     str(tmp_path / "t.json"))
    assert rc == 0
    d = r["first_divergence"]
    assert (d["diverged"], d["role"], d["op"], d["work_item"], d["k_index"]) == (True, "consumer0", "wgmma", 0, 3)
    assert abs(d["offset_ns"] - 800.0) < 2.0
    assert r["measured_total"].startswith("instrumented timeline span")
    assert (tmp_path / "g.png").stat().st_size > 10_000
    trace = json.loads((tmp_path / "t.json").read_text())
    assert check_chrome(trace) == []
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {"predicted SM 0", "measured SM 5"}


def test_text_output_and_bad_input(tmp_path, capsys):
    sim = simulate(SCHEDULE, "h200", SHAPE)
    f = tmp_path / "run.npz"
    write_measured(f, kernel_records(sim["_events"]), {})
    assert main(["compare", "--schedule", SCHEDULE, "--shape", SHAPE, "--measured", str(f)]) == 0
    out = capsys.readouterr().out
    assert "first divergence: none beyond" in out and "CTA 0 on SM 5" in out
    assert main(["compare", "--schedule", SCHEDULE, "--shape", "4096x4096x4096", "--measured", str(f)]) == 2
    assert "recorded at 2048x2048x512" in capsys.readouterr().err
    assert main(["compare", "--schedule", SCHEDULE, "--shape", SHAPE, "--measured", str(f), "--variant", "x"]) == 2
    assert "no capture options" in capsys.readouterr().err
    (tmp_path / "cut.bin").write_bytes(np.load(f)["buffer"].tobytes()[:-24])
    assert main(["compare", "--schedule", SCHEDULE, "--shape", SHAPE, "--measured", str(tmp_path / "cut.bin")]) == 2
    assert "truncated" in capsys.readouterr().err


def test_iteration_sampling_keeps_the_iteration_time_per_iteration(tmp_path, capsys):
    sim = simulate(SCHEDULE, "h200", SHAPE)
    f = tmp_path / "every2.npz"
    write_measured(f, kernel_records(sim["_events"]), {}, iter_every=2)
    rc, r = run_json(capsys, "--measured", str(f))
    assert rc == 0 and r["sampling"]["iter_every"] == 2
    assert abs(r["iteration_ns"]["err_pct"]) < 1.0  # gaps of 2 K blocks count as 2 iterations
    d = r["first_divergence"]
    assert d["diverged"] is False and d["matched"] > 10
    assert d["k_index"] < 0 or d["k_index"] % 2 == 0  # only recorded iterations match


def test_a_proton_capture_folder_compares_like_a_timeline_file(proton_capture, capsys):
    """tests/conftest.py proton_ws_gemm: CTA 0 (SM 5) runs 2 tiles in 4400 ns, 4 K iterations of 500 ns each;
    every record spans 4400 ns (CTA 1's single tile ends inside it). A plain time of 5 µs is the total."""
    rc, r = run_json(capsys, "--measured", str(proton_capture(dict(plain_us=5.0))))
    assert rc == 0
    assert (r["cta"], r["sm"], r["kernel"]) == (0, 5, "ws_matmul_kernel")
    assert r["measured_us"] == 5.0 and r["measured_total"].startswith("plain build")
    assert r["sampling"]["ctas_sampled"] == 2 and r["sampling"]["grid_ctas"] == 132
    assert r["iteration_ns"]["measured"] == 500.0
    assert r["time_base"] == "SM cycles at 2000 MHz (capture.json clock_mhz)"
    c0, p = r["roles"]["consumer0"], r["roles"]["producer"]
    # consumer0: inside wgmma 8 x 50 ns and store C 2 x 200 ns; in its waits 8 x (100 + 250) ns
    assert c0["busy_ns_measured"] == 800.0 and c0["busy_measured"] == 800 / 4400
    assert c0["waiting_measured"] == 2800 / 4400
    assert p["busy_ns_measured"] == 160.0 and p["waiting_measured"] == 2400 / 4400
    assert r["first_divergence"]["matched"] > 0


def test_a_plain_time_far_above_the_instrumented_span_is_not_the_kernel_s(proton_capture, capsys):
    """conftest's plain_us, 100 µs, is 22.7x the 4.4 µs the records span (more than PLAIN_OVER_SPAN = 2): a
    host-bound launch loop was timed, so the span is the total and the report says why."""
    rc, r = run_json(capsys, "--measured", str(proton_capture()))
    assert rc == 0 and r["measured_us"] == 4.4
    assert r["measured_total"] == ("instrumented timeline span: the meta's plain_us, 100.0 µs, is 22.7x it, a "
                                   "host-bound launch time, not the kernel's")


def test_the_committed_capture_counts_busy_alike_on_both_sides(capsys):
    """lapis/data/captures/user_timeline/h200-2026-12-01 at 4096^3: busy is the time inside a role's ops on both
    sides; the predicted wait of consumer1 for the tensor pipe (consumer0 holds it) is queued, not busy."""
    f = ROOT / "lapis" / "data" / "captures" / "user_timeline" / "h200-2026-12-01" / "ws_gemm_timeline.npz"
    capsys.readouterr()
    assert main(["compare", "--schedule", SCHEDULE, "--shape", "4096x4096x4096", "--measured", str(f), "--json"]) == 0
    roles = json.loads(capsys.readouterr().out)["roles"]
    two = {r: {k: round(v, 2) for k, v in x.items() if isinstance(v, float) and not k.startswith("busy_ns")}
           for r, x in roles.items()}
    # each consumer's wgmma holds the tensor pipe as long as the other's: the same busy fraction
    assert two["consumer0"]["busy_predicted"] == two["consumer1"]["busy_predicted"] == 0.34
    assert (two["consumer0"]["queued_predicted"], two["consumer1"]["queued_predicted"]) == (0.0, 0.32)
    # measured, CTA 0 (SM 128), the instrumented build: wgmma + store C spans, and the wait spans
    assert [two[r]["busy_measured"] for r in ("consumer0", "consumer1", "producer")] == [0.34, 0.31, 0.29]
    assert [two[r]["waiting_measured"] for r in ("consumer0", "consumer1", "producer")] == [0.44, 0.47, 0.42]
    assert "queued_measured" not in roles["consumer0"]
    assert round(roles["consumer0"]["busy_ns_measured"]) == 159641
    assert round(roles["consumer1"]["busy_ns_err_pct"], 1) == -41.5


PROTON_H200 = ROOT / "lapis" / "data" / "captures" / "proton" / "h200-2026-12-01"


def printed(capsys, folder, shape) -> list[str]:
    capsys.readouterr()
    assert main(["compare", "--schedule", SCHEDULE, "--shape", shape, "--measured", str(PROTON_H200 / folder)]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_h200_proton_ws_gemm_compares_its_consumers_and_names_the_producer_not_recorded(capsys):
    """The Gluon WS GEMM (Triton 3.6, H200, 2026-12-01), at the schedule's defaults (its capture.json params):
    warp 8 left no record, so the producer is predicted only; the plain time (54.7 µs, a Python launch loop)
    is 8.5x the 6.4 µs the records span, so the span is the total."""
    out = printed(capsys, "gluon_ws_matmul", "2048x2048x512")
    assert out[1].endswith("compared: CTA 0 on SM 124") and out[1].startswith("sampled 132 of 132 CTAs")
    assert out[2] == ("total time: predicted 8.8 µs, measured 6.4 µs (instrumented timeline span: the meta's "
                      "plain_us, 54.7 µs, is 8.5x it, a host-bound launch time, not the kernel's): error +35.9%")
    assert out[3] == "steady-state K iteration: predicted 477 ns, measured 298 ns: error +60.0%"
    assert out[7] == "  consumer0  0.40 / 0.23  0.58 / 0.38    0.01  3509 ns / 1434 ns (+144.6%)"
    assert out[8] == "  consumer1  0.40 / 0.23  0.33 / 0.37    0.27  3509 ns / 1397 ns (+151.1%)"
    assert out[9] == "  producer   0.00 /    -  0.74 /    -    0.00  0 ns / - (-) not recorded"
    assert out[10].startswith("  not recorded: producer: warp 8 recorded no scope (the trace holds warps [0, 4])")
    assert out[11] == ("first divergence: consumer0 wgmma of work item 0, K 1: measured -190 ns (-64% of an "
                       "iteration) off the prediction, 36 milestones matched")


def test_the_h200_proton_pipelined_gemm_compares_its_one_warpgroup(capsys):
    """Proton's tutorial Gluon GEMM (no warp specialization: one warpgroup issues its own TMA) against the WS
    schedule at its defaults: consumer0 meets the kernel's warpgroup; consumer1 and the producer have no warp
    in the kernel (not in its roles), so they are predicted only."""
    out = printed(capsys, "gluon_matmul", "512x512x1024")
    assert out[1].endswith("compared: CTA 0 on SM 128") and out[1].startswith("sampled 16 of 16 CTAs")
    assert out[2] == ("total time: predicted 5.4 µs, measured 8.7 µs (instrumented timeline span: the meta's "
                      "plain_us, 25.4 µs, is 2.9x it, a host-bound launch time, not the kernel's): error -37.7%")
    assert out[3] == "steady-state K iteration: predicted 313 ns, measured 910 ns: error -65.6%"
    assert out[7] == "  consumer0  0.47 / 0.44  0.07 / 0.47    0.43  2567 ns / 3769 ns (-31.9%)"
    assert out[8] == "  consumer1  0.47 /    -  0.07 /    -    0.46  2567 ns / - (-)"
    assert not any(line.startswith("  not recorded") for line in out)


def test_the_h200_proton_ws_gemm_with_its_producer_on_warp_10(capsys):
    """The re-run sampling warps 0, 4 and 10 (capture proton/h200-2026-12-01-producer: the producer recorded; the
    plain build timed as a CUDA graph replay, 9.3 µs, so the plain time is the total)."""
    out = printed(capsys, "../h200-2026-12-01-producer/gluon_ws_matmul", "2048x2048x512")
    assert out[2] == "total time: predicted 8.8 µs, measured 9.3 µs (plain build (meta plain_us)): error -5.7%"
    assert out[3] == "steady-state K iteration: predicted 477 ns, measured 302 ns: error +58.0%"
    assert out[9] == "  producer   0.00 / 0.09  0.74 / 0.49    0.00  0 ns / 598 ns (-100.0%)"
    assert not any(line.startswith("  not recorded") for line in out)
