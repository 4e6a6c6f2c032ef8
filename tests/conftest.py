import os

import pytest
from hypothesis import HealthCheck, settings

# CI keeps the suite well under its 5-minute budget; `HYPOTHESIS_PROFILE=dev` digs deeper.
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def profiles_of_56d4f41(tmp_path, monkeypatch):
    """The profiles with h200 as of commit 56d4f41 and b200 and rtx5090 as of 3d7d3ee (their placeholder values
    before the public figures; tests/data), so pinned predictions outlive a re-fit or a re-sourcing."""
    import shutil
    from pathlib import Path

    from lapis.model import profile
    for f in profile.PROFILES.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    data = Path(__file__).parent / "data"
    shutil.copy(data / "h200_profile_56d4f41.json", tmp_path / "h200.json")
    for name in ("b200", "rtx5090"):
        shutil.copy(data / f"{name}_profile_3d7d3ee.json", tmp_path / f"{name}.json")
    monkeypatch.setattr(profile, "PROFILES", tmp_path)


@pytest.fixture(scope="session")
def kernel_cache():
    """A folder for lapis.gpu.harness.build's cubins that outlives the session: builds are keyed by the hash of
    the source, its local headers, the defines and nvcc's version, so a run rebuilds only what changed."""
    import getpass
    import tempfile
    from pathlib import Path
    path = Path(tempfile.gettempdir()) / f"lapis-test-kernels-{getpass.getuser()}"
    path.mkdir(exist_ok=True)
    return path


_REPORT: dict = {}  # the one `lapis report` run of the session: its process and output folder


def _start_report() -> None:
    """Start `lapis report --json` over the shipped captures into a new temporary folder, in the background."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path
    out = Path(tempfile.mkdtemp(prefix="lapis-test-report-"))
    proc = subprocess.Popen([sys.executable, "-m", "lapis.cli", "report", "--json", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    _REPORT.update(proc=proc, out=out)


def pytest_collection_finish(session):
    """Once the tests are collected (and selected), start the report if any of them reads it: it takes about a
    minute, mostly on one core, so it runs beside the tests (pytest runs them on one core) rather than before the
    first that needs it."""
    if any("report_run" in getattr(item, "fixturenames", ()) for item in session.items):
        _start_report()


def pytest_sessionfinish(session):
    """Stop a report run the session no longer waits for (a -x stop, an interrupt) and remove its folder."""
    import shutil
    proc = _REPORT.pop("proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()
    if "out" in _REPORT:
        shutil.rmtree(_REPORT.pop("out"), ignore_errors=True)


@pytest.fixture(scope="session")
def report_run():
    """(out folder, --json numbers) of one `lapis report` over the shipped captures, shared by the tests that read
    it: the report takes minutes, so the suite runs it once (started when the tests are collected)."""
    import json
    if "proc" not in _REPORT:
        _start_report()
    proc = _REPORT["proc"]
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    return _REPORT["out"], json.loads(stdout)


def proton_ws_gemm(folder, clock_mhz=2000, meta=None):
    """A Proton capture folder (capture.json + ws.chrome_trace) written here in the format Proton's
    StreamChromeTraceWriter writes (lapis/captures/proton.py): a warp-specialized GEMM's scopes with hand-set
    times. CTA 0 (Core 5, init first) runs 2 tiles, CTA 1 (Core 7, init 1000 ns later) 1 tile; per tile 4 K
    iterations of 500 ns then a 200 ns "store C", so a tile takes 2200 ns. In iteration k of a tile starting at
    t: consumers (warps 0 and 4) "wait full" [t, t+100], "wgmma" [t+100, t+150], "wait wgmma" [t+150, t+400];
    the producer (warp 8) "wait empty" [t, t+300], "issue TMA" [t+300, t+320]. Each warp wraps each tile in a
    "tile" scope; warp 0 also wraps the CTA's run in a "kernel" scope (a container); warp 1 records scopes no
    role owns. ts = (init offset + cycles since the CTA's first record) / 1000, dur = cycles / 1000, with
    clock_mhz cycles a µs; plus an M event and a "Kernel Call Path" bar, which the reader skips."""
    import json
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cyc = clock_mhz / 1000.0  # cycles per ns
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}},
              {"ph": "X", "cat": "call_path", "name": "ws", "pid": "Kernel Call Path", "tid": "path 0", "ts": 0,
               "dur": 9, "args": {}}]

    def scope(name, cta, sm, init_ns, warp, t0, t1, line=0):
        events.append({"cname": "good", "name": name, "cat": "ws_matmul_kernel", "ph": "X",
                       "pid": f"ws_matmul_kernel Core{sm} CTA{cta}", "tid": f"warp {warp} (line {line})",
                       "ts": (init_ns + t0 * cyc) / 1000.0, "dur": (t1 - t0) * cyc / 1000.0,
                       "args": {"Init Time (ns)": 7_000_000 + init_ns, "Frequency (MHz)": 1000.0,
                                "call_stack": ["ws"]}})

    for cta, sm, init_ns, tiles in ((0, 5, 0, 2), (1, 7, 1000, 1)):
        scope("kernel", cta, sm, init_ns, 0, 0, 2200 * tiles, line=1)
        for w in range(tiles):
            t0 = 2200 * w
            for warp in (0, 4, 8, 1):
                scope("tile", cta, sm, init_ns, warp, t0, t0 + 2200, line=2)
            for k in range(4):
                t = t0 + 500 * k
                for warp in (0, 4):
                    scope("wait full", cta, sm, init_ns, warp, t, t + 100)
                    scope("wgmma", cta, sm, init_ns, warp, t + 100, t + 150)
                    scope("wait wgmma", cta, sm, init_ns, warp, t + 150, t + 400)
                scope("wait empty", cta, sm, init_ns, 8, t, t + 300)
                scope("issue TMA", cta, sm, init_ns, 8, t + 300, t + 320)
                scope("other", cta, sm, init_ns, 1, t, t + 10)
            for warp in (0, 4):
                scope("store C", cta, sm, init_ns, warp, t0 + 2000, t0 + 2200)
    (folder / "ws.chrome_trace").write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    man = dict(schema="lapis.capture/1", kind="proton_timeline", status="ok", trace="ws.chrome_trace",
               kernel="ws_matmul_kernel", shape="2048x2048x512", grid=[132], clock_mhz=clock_mhz,
               roles={"consumer0": 0, "consumer1": 4, "producer": 8}, work_item_scope="tile", plain_us=100.0)
    man.update(meta or {})
    (folder / "capture.json").write_text(json.dumps({k: v for k, v in man.items() if v is not None}))
    return folder


@pytest.fixture
def proton_capture(tmp_path):
    """proton_ws_gemm's folder under tmp_path/proton (a function: call it with meta overrides)."""
    return lambda meta=None, clock_mhz=2000: proton_ws_gemm(tmp_path / "proton", clock_mhz, meta)
