"""Triton Proton's intra-kernel (instrumentation-mode) trace of small Triton and Gluon kernels, for
lapis.captures.proton. Runs on the H200 image's python3 (Triton 3.6, torch); started by benchmarks/h200_proton.sh.

Each kernel is one attempt, written to OUT/proton/<name>/:
    <name>.chrome_trace   Proton's trace as written by proton.finalize() (when the attempt got that far)
    capture.json          the manifest lapis.captures.proton reads: status "ok" | "unsupported" | "failed",
                          error (exception text and traceback tail), the Proton mode, roles (role -> warp id),
                          work_item_scope, wait_ops, shape, grid, plain_us (the uninstrumented build, one CUDA
                          graph replay of 20 launches over 20; plain_timing says how), clock_mhz
                          (nvidia-smi clocks.sm while the plain build ran), versions and provenance;
                          h200_proton.sh adds exit_status and log_tail (what the process printed)
An attempt that raises never stops the others: "unsupported" when the error names Proton or instrumentation
(the docs quote it), "failed" otherwise.

Kernels:
    triton_add       Triton DSL vector add (pl.enable_semantic("triton"); scopes load, add, store), 1 role
    gluon_ws_matmul  Gluon persistent warp-specialized GEMM, C = A.B (fp16, fp32 accumulators), 128x128x64
                     tiles, a 4-slot TMA ring: the worker partition (1 warp, warp 8) is the producer
                     ("wait empty", "issue TMA"), the default partition (8 warps, two warpgroups, 64 rows
                     each) the consumers ("wait full", "wgmma", "wait wgmma", "store C"), each tile inside a
                     "tile" scope: the roles, ops and parameters of examples/ws_gemm.py:WS_GEMM
    gluon_matmul     Gluon pipelined (not specialized) GEMM of Proton's intra-kernel tutorial (matmul_dsl.py)
    gluon_ws_matmul_all  the WS GEMM at 1024x1024x512 with every warp recorded: which warps run what
Proton mode: warp granularity, a shared-memory circular buffer (Proton's defaults). The WS GEMM samples warps
0, 4, 10 (one per role: sampling_strategy="selective") to keep the trace small: warp 10, not 8, is the
producer (WS_WARPS; 2026-12-01 sampled 0, 4, 8 and warp 8, an idle padding warp, recorded nothing).
trace_summary lists the scopes each warp recorded (warp_scopes), and remaps a role to the warp that recorded
its scopes when the trace shows it elsewhere (roles_note).
"""

import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/lapis-proton")) / "proton"
PROGRAM = "bash benchmarks/h200_proton.sh"

try:  # the GPU image has these; the CPU machines do not (python -c checks import this file)
    import torch
    import triton
    import triton.language as tl
    import triton.profiler as proton
    import triton.profiler.language as pl
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                   warpgroup_mma_init, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    IMPORT_ERROR = None
except Exception as exc:  # noqa: BLE001 -- recorded in every manifest
    IMPORT_ERROR = f"{exc.__class__.__name__}: {exc}"

if IMPORT_ERROR is None:
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        with pl.scope("load"):
            x = tl.load(x_ptr + offs, mask=mask)
            y = tl.load(y_ptr + offs, mask=mask)
        with pl.scope("add"):
            z = x + y
        with pl.scope("store"):
            tl.store(out_ptr + offs, z, mask=mask)

    @gluon.constexpr_function
    def wgmma_layout(block_m, block_n, num_warps):
        # one m64nNk16 wgmma per warpgroup, warpgroups stacked along M (Proton's example_dsl.py picks the same)
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                         instr_shape=[16, min(block_n, 256), 16])

    @gluon.jit
    def ws_producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, tiles_n):
        STAGES: gl.constexpr = a_bufs.shape[0]
        BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
        k_blocks = a_desc.shape[1] // BLOCK_K
        it = 0
        for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
            off_m = (tile // tiles_n) * BLOCK_M
            off_n = (tile % tiles_n) * BLOCK_N
            pl.enter_scope("tile")
            for kb in range(k_blocks):
                s = it % STAGES
                with pl.scope("wait empty"):
                    # a fresh barrier's "previous phase" (parity 1) counts as complete: the first lap passes
                    mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                with pl.scope("issue TMA"):
                    mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
                    tma.async_copy_global_to_shared(a_desc, [off_m, kb * BLOCK_K], ready.index(s), a_bufs.index(s))
                    tma.async_copy_global_to_shared(b_desc, [kb * BLOCK_K, off_n], ready.index(s), b_bufs.index(s))
                it += 1
            pl.exit_scope("tile")

    @gluon.jit
    def ws_consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, num_tiles, tiles_n, k_blocks,
                    num_warps: gl.constexpr):
        STAGES: gl.constexpr = a_bufs.shape[0]
        BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
        BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
        layout: gl.constexpr = wgmma_layout(BLOCK_M, BLOCK_N, num_warps)
        it = 0
        for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
            off_m = (tile // tiles_n) * BLOCK_M
            off_n = (tile % tiles_n) * BLOCK_N
            pl.enter_scope("tile")
            # a plain tensor: each iteration's warpgroup_mma_wait hands back a tensor, the loop's carried type
            acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout)
            for kb in range(k_blocks):
                s = it % STAGES
                with pl.scope("wait full"):
                    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                with pl.scope("wgmma"):
                    acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
                with pl.scope("wait wgmma"):
                    # one K block in flight: the previous block's wgmma is done, so its slot goes back
                    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=kb > 0)
                it += 1
            with pl.scope("wait wgmma"):
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES))
            with pl.scope("store C"):
                tma.store_wait(pendings=0)  # the previous tile's C store has left c_smem
                c_smem.store(acc.to(c_desc.dtype))
                fence_async_shared()
                tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
            pl.exit_scope("tile")
        tma.store_wait(pendings=0)

    @gluon.jit
    def ws_matmul_kernel(a_desc, b_desc, c_desc, num_tiles, tiles_n, STAGES: gl.constexpr,
                         num_warps: gl.constexpr):
        dtype: gl.constexpr = a_desc.dtype
        a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
        c_smem = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=1)
        k_blocks = a_desc.shape[1] // a_desc.block_type.shape[1]
        gl.warp_specialize([
            (ws_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, num_tiles, tiles_n, k_blocks, num_warps)),
            (ws_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, tiles_n)),
        ], [1], [24])

    @gluon.jit
    def pipelined_matmul_kernel(a_desc, b_desc, c_desc, num_warps: gl.constexpr):
        BLOCK_M: gl.constexpr = c_desc.block_type.shape[0]
        BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        dtype: gl.constexpr = a_desc.dtype
        K = a_desc.shape[1]
        pl.enter_scope("tile")
        a_smem = gl.allocate_shared_memory(dtype, [2] + a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(dtype, [2] + b_desc.block_type.shape, b_desc.layout)
        index = 0
        off_m = gl.program_id(axis=0) * BLOCK_M
        off_n = gl.program_id(axis=1) * BLOCK_N
        layout: gl.constexpr = wgmma_layout(BLOCK_M, BLOCK_N, num_warps)
        acc = warpgroup_mma_init(gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=layout))
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        phase = 0
        for k in range(0, K, BLOCK_K):
            a = a_smem.index(index)
            b = b_smem.index(index)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            with pl.scope("issue TMA"):
                tma.async_copy_global_to_shared(a_desc, [off_m, k], bar, a)
                tma.async_copy_global_to_shared(b_desc, [k, off_n], bar, b)
            with pl.scope("wait full"):
                mbarrier.wait(bar, phase=phase)
            phase ^= 1
            with pl.scope("wait wgmma"):
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            with pl.scope("wgmma"):
                acc = warpgroup_mma(a, b, acc, is_async=True)
            index ^= 1
        with pl.scope("wait wgmma"):
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.invalidate(bar)
        with pl.scope("store C"):
            c_smem = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)
            c_smem.store(acc.to(dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
            tma.store_wait(pendings=0)
        pl.exit_scope("tile")


def descriptors(a, b, c, bm, bn, bk):
    lay = lambda shape: gl.NVMMASharedLayout.get_default_for(shape, gl.float16)  # noqa: E731
    return (TensorDescriptor.from_tensor(a, [bm, bk], lay([bm, bk])),
            TensorDescriptor.from_tensor(b, [bk, bn], lay([bk, bn])),
            TensorDescriptor.from_tensor(c, [bm, bn], lay([bm, bn])))


def case_triton_add():
    n, block = 1 << 18, 1024
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    z = torch.empty_like(x)
    grid = (triton.cdiv(n, block), )

    def launch():
        return add_kernel[grid](x, y, z, n, BLOCK=block, num_warps=4)

    def check():
        torch.testing.assert_close(z, x + y)

    return dict(launch=launch, check=check, kernel="add_kernel", shape=str(n), grid=list(grid), num_warps=4,
                roles={"thread_block": 0}, work_item_scope=None, semantic="triton",
                mode=dict(), flops=None)


# Warps of the WS GEMM as Triton 3.6 lays them out (TritonGPUAllocateWarpGroups, read off the compiled kernel's
# warpGroupStartIds [10, 8, 11] with the Triton 3.6.0 wheel, no GPU needed): the 8 default warps (0-7) are the
# consumers; the 1-warp worker partition (24 registers) is padded to a whole warpgroup for setmaxnreg, so the
# kernel runs 12 warps: idle padding partitions on warps 8-9 and 11, the producer on warp 10.
WS_WARPS = dict(total=12, roles={"consumer0": 0, "consumer1": 4, "producer": 10})


def case_gluon_ws_matmul(m=2048, n=2048, k=512, sampled="0,4,10"):
    bm, bn, bk, stages = 128, 128, 64, 4
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    da, db, dc = descriptors(a, b, c, bm, bn, bk)
    tiles, tiles_n = (m // bm) * (n // bn), n // bn
    ctas = min(tiles, torch.cuda.get_device_properties(0).multi_processor_count)

    def launch():
        return ws_matmul_kernel[(ctas, )](da, db, dc, tiles, tiles_n, STAGES=stages, num_warps=8)

    def check():
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)

    return dict(launch=launch, check=check, kernel="ws_matmul_kernel", shape=f"{m}x{n}x{k}", grid=[ctas],
                num_warps=WS_WARPS["total"], roles=dict(WS_WARPS["roles"]), work_item_scope="tile",
                semantic="gluon", mode=dict(sampling_strategy="selective", sampling_options=sampled) if sampled
                else dict(),
                params=dict(block_m=bm, block_n=bn, block_k=bk, stages=stages, consumers=2),
                schedule="examples/ws_gemm.py:WS_GEMM", flops=2.0 * m * n * k)


def case_gluon_matmul():
    m, n, k = 512, 512, 1024
    bm, bn, bk = 128, 128, 128
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    da, db, dc = descriptors(a, b, c, bm, bn, bk)
    grid = (m // bm, n // bn)

    def launch():
        return pipelined_matmul_kernel[grid](da, db, dc, num_warps=4)

    def check():
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)

    return dict(launch=launch, check=check, kernel="pipelined_matmul_kernel", shape=f"{m}x{n}x{k}",
                grid=list(grid), num_warps=4, roles={"consumer0": 0}, work_item_scope="tile", semantic="gluon",
                mode=dict(), flops=2.0 * m * n * k)


def case_gluon_ws_matmul_all():
    """The WS GEMM with every warp recorded (no selective sampling), at 1024x1024x512 so the trace stays small."""
    return case_gluon_ws_matmul(1024, 1024, 512, sampled=None)



CASES = {"triton_add": case_triton_add, "gluon_ws_matmul": case_gluon_ws_matmul, "gluon_matmul": case_gluon_matmul,
         "gluon_ws_matmul_all": case_gluon_ws_matmul_all}


def sm_clock_samples(stop: threading.Event, out: list) -> None:
    """nvidia-smi clocks.sm (MHz) every ~50 ms until `stop` is set."""
    while not stop.is_set():
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=5)
            out.append(float(r.stdout.split()[0]))
        except Exception:  # noqa: BLE001 -- a missing sample only shortens the list
            pass
        stop.wait(0.05)


GRAPH_LAUNCHES = 20  # launches per CUDA graph replay: one replay is timed, so the host's launch cost is not


def graph_of(launch):
    """A CUDA graph of GRAPH_LAUNCHES launches (replayed, the GPU runs them back to back), or None with the reason
    when capture fails. A Python launch of these small kernels takes ~25 µs of host time, longer than the
    kernel: launches timed one by one measured the host (2026-12-01: 25-55 µs against 1-9 µs on the GPU)."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch()  # warm up outside the capture: compile, load the module
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(GRAPH_LAUNCHES):
                launch()
        torch.cuda.synchronize()
        return g, None
    except Exception as exc:  # noqa: BLE001 -- the launch loop still times it, and the manifest says why
        torch.cuda.synchronize()
        return None, f"{exc.__class__.__name__}: {exc}"[:500]


def time_plain(launch, seconds: float = 1.0) -> dict:
    """The uninstrumented build: µs per launch (median of CUDA-event timings of one CUDA graph replay of
    GRAPH_LAUNCHES launches, else of a loop of 10 Python launches) and the SM clock meanwhile."""
    launch()
    torch.cuda.synchronize()
    graph, graph_error = graph_of(launch)
    per = GRAPH_LAUNCHES if graph is not None else 10
    samples, stop = [], threading.Event()
    th = threading.Thread(target=sm_clock_samples, args=(stop, samples), daemon=True)
    th.start()
    times, t_end = [], time.time() + seconds
    while time.time() < t_end and len(times) < 5000:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        if graph is not None:
            graph.replay()
        else:
            for _ in range(per):
                launch()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / per)
    stop.set()
    th.join(timeout=10)
    times.sort()
    samples.sort()
    return dict(plain_us=times[len(times) // 2], plain_runs=per * len(times),
                plain_timing=f"CUDA graph of {per} launches, one replay timed" if graph is not None else
                f"loop of {per} Python launches (graph capture failed: {graph_error})",
                clock_mhz=samples[len(samples) // 2] if samples else None, clock_samples=len(samples))


def classify(text: str) -> str:
    low = text.lower()
    return "unsupported" if any(w in low for w in ("proton", "instrument", "scope", "semantic")) else "failed"


def attempt(name: str, git_file: str | None) -> dict:
    """One kernel under Proton's instrumentation mode -> its manifest (module docstring)."""
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    man = dict(schema="lapis.capture/1", kind="proton_timeline", name=name, status="failed", error=None,
               trace=None, time_base="cycles scaled by clock_mhz (lapis.captures.proton)")
    man["versions"] = dict(python=sys.version.split()[0])
    if IMPORT_ERROR is not None:
        man.update(status="unsupported" if "profiler" in IMPORT_ERROR or "proton" in IMPORT_ERROR else "failed",
                   error=f"import: {IMPORT_ERROR}")
        return man
    man["versions"].update(triton=triton.__version__, torch=torch.__version__, cuda=torch.version.cuda)
    stage = "setup"
    try:
        case = CASES[name]()
        launch, check = case.pop("launch"), case.pop("check")
        man.update({k: v for k, v in case.items() if k not in ("mode", "semantic")})
        stage = "plain build"
        compiled = launch()  # the CompiledKernel: its num_warps counts every partition's warps, padding included
        man["compiled_num_warps"] = getattr(getattr(compiled, "metadata", None), "num_warps", None)
        torch.cuda.synchronize()
        check()
        man.update(time_plain(launch))
        print(f"{name}: plain {man['plain_us']:.2f} us, SM clock {man['clock_mhz']} MHz", flush=True)
        stage = "proton instrumentation"
        if case["semantic"] == "triton":
            pl.enable_semantic("triton")
        mode = proton.mode.Default(**case["mode"])
        man["mode"] = str(mode)
        stem = str(folder / name)
        proton.start(stem, data="trace", backend="instrumentation", mode=mode)
        try:
            t0 = time.perf_counter()
            launch()
            torch.cuda.synchronize()
            man["instrumented_launch_s"] = time.perf_counter() - t0  # compile included
        finally:
            proton.finalize()
        check()
        traces = sorted(p.name for p in folder.iterdir() if "chrome_trace" in p.name
                        or (p.suffix == ".json" and p.name != "capture.json"))
        man["files"] = traces
        if not traces:
            raise RuntimeError(f"proton.finalize() wrote no trace in {folder}: {sorted(os.listdir(folder))}")
        man["trace"] = traces[0]
        man.update(trace_summary(folder / traces[0], case["roles"]))
        man["status"] = "ok"
    except BaseException as exc:  # noqa: BLE001 -- fail soft: the manifest says why
        text = f"{stage}: {exc.__class__.__name__}: {exc}"
        man.update(status="unsupported" if stage == "proton instrumentation" and classify(
            traceback.format_exc()) == "unsupported" else "failed", error=text[:4000],
                   traceback=traceback.format_exc()[-6000:])
        print(f"{name}: {man['status']}: {text[:2000]}", flush=True)
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        try:
            if IMPORT_ERROR is None and name == "triton_add":
                pl.disable_semantic("triton")
        except Exception:  # noqa: BLE001
            pass
    return man


PRODUCER_SCOPES = {"wait empty", "issue TMA"}  # the WS GEMM's producer records these; its consumers do not


def trace_summary(path: Path, roles: dict) -> dict:
    """What the trace holds (events, kernels, CTAs, the scopes each warp recorded: warp_scopes), and roles
    remapped when Proton numbers the sampled warps by their order in sampling_options instead of by warp id, or
    when the producer's scopes come from another warp than the one its role names."""
    doc = json.loads(path.read_text())
    ev = [e for e in doc.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    pids = sorted({str(e.get("pid")) for e in ev})
    tids = sorted({str(e.get("tid")) for e in ev})
    warps = sorted({int(t.split()[1]) for t in tids if t.startswith("warp ") and t.split()[1].isdigit()})
    out = dict(trace_bytes=path.stat().st_size, x_events=len(ev), tracks=len(pids), warps_seen=warps,
               scopes=sorted({str(e.get("name")) for e in ev}), first_event=ev[0] if ev else None,
               display_time_unit=doc.get("displayTimeUnit"))
    by_warp: dict = {}
    for e in ev:
        t = str(e.get("tid", "")).split()
        if len(t) > 1 and t[0] == "warp" and t[1].isdigit():
            by_warp.setdefault(int(t[1]), set()).add(str(e.get("name")))
    out["warp_scopes"] = {w: sorted(by_warp[w]) for w in sorted(by_warp)}
    want = list(roles.values())
    producers = [w for w in sorted(by_warp) if by_warp[w] & PRODUCER_SCOPES and w not in want]
    if "producer" in roles and roles["producer"] not in by_warp and producers:
        out["roles"] = dict(roles, producer=producers[0])
        out["roles_note"] = (f"the producer's scopes come from warp {producers[0]}, not warp {roles['producer']}: "
                             "role remapped")
    elif warps and not set(want) <= set(warps) and len(warps) == len(want):
        out["roles"] = dict(zip(roles, warps))
        out["roles_note"] = f"trace warps {warps} are the sampled warps {want} in order: roles remapped"
    return out


def main(argv):
    git_file = argv[1] if len(argv) > 1 and argv[1] else None
    names = argv[2:] or list(CASES)
    OUT.mkdir(parents=True, exist_ok=True)
    prov = dict(command=" ".join([PROGRAM] + argv[1:]))
    try:
        from lapis.gpu.capture_tma import provenance  # GPU host: cupy is on the device image only
        prov = provenance(git_file, argv[1:], PROGRAM)
    except Exception as exc:  # noqa: BLE001 -- provenance without the GPU facts, saying why
        prov["provenance_error"] = f"{exc.__class__.__name__}: {exc}"
        if git_file and Path(git_file).exists():
            prov.update(json.loads(Path(git_file).read_text()))
    summary = {}
    for name in names:
        man = attempt(name, git_file)
        man["provenance"] = prov
        (OUT / name).mkdir(parents=True, exist_ok=True)
        (OUT / name / "capture.json").write_text(json.dumps(man, indent=1, default=str))
        summary[name] = {k: man.get(k) for k in ("status", "error", "plain_us", "clock_mhz", "x_events",
                                                 "trace_bytes", "warps_seen", "scopes")}
        print(f"== {name}: {json.dumps(summary[name], default=str)[:1500]}", flush=True)


if __name__ == "__main__":
    main(sys.argv)
