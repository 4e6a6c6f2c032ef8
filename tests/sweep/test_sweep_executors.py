"""lapis sweep gives the same table row for row under every executor and every hash seed; the CLI's outputs,
and --validate-top without a GPU (a clear error, the predicted table left as it was)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lapis.errors import LapisError, ScheduleError
from lapis.sweep.run import run_sweep

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--schedule", "h200-s8-persistent", "--shapes", "1x2x512x128,1x2x1024x128", "--grid", "stages=2,3",
        "--grid", "block_n=64,128,256", "--grid", "consumer_wgs=2,3"]


def sweep(tmp_path, executor):
    return run_sweep("h200-s8-persistent", ["1x2x512x128", "1x2x1024x128"],
                     ["stages=2,3", "block_n=64,128,256", "consumer_wgs=2,3"], executor=executor, workers=2,
                     out=tmp_path / executor, figure=False)


def test_serial_pool_and_dask_local_give_the_same_table(tmp_path):
    pytest.importorskip("distributed")
    serial = sweep(tmp_path, "serial")
    assert serial["counts"]["rows"] == 24 and 0 < serial["fits"] < 24  # both kinds of row are in the table
    for executor in ("pool", "dask-local"):
        other = sweep(tmp_path, executor)
        assert other["counts"]["computed"] == 24
        assert other["csv"] == serial["csv"], executor
        assert [r["key"] for r in other["rows"]] == [r["key"] for r in serial["rows"]]


def cli(args, tmp_path, seed, *extra):
    env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "lapis", "sweep", *args, "--out", str(tmp_path), *extra],
                          capture_output=True, text=True, env=env, cwd=REPO)


def test_cli_output_is_the_same_under_two_hash_seeds(tmp_path):
    runs = [cli(ARGS, tmp_path / f"seed{s}", s, "--json", "--executor", "serial", "--fast", "--check", "2")
            for s in (0, 12345)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert "sweep (fast): 24/24 rows" in r.stderr  # the progress line
    a, b = (json.loads(r.stdout) for r in runs)
    assert [x["key"] for x in a["rows"]] == [x["key"] for x in b["rows"]]
    assert a["top"] == b["top"] and a["pareto"] == b["pareto"]
    assert (tmp_path / "seed0" / "sweep.csv").read_text() == (tmp_path / "seed12345" / "sweep.csv").read_text()
    assert (tmp_path / "seed0" / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a["fast_check"]["sample"] == 2


def test_cli_text_output_and_validate_top_without_gpu(tmp_path):
    r = cli(ARGS, tmp_path, 0, "--executor", "serial")
    assert r.returncode == 0, r.stderr
    assert "24 rows (24 computed" in r.stdout and "top " in r.stdout and "Pareto front" in r.stdout
    table = (tmp_path / "sweep.csv").read_text()
    v = cli(ARGS, tmp_path, 0, "--executor", "serial", "--validate-top", "1")
    assert v.returncode == 2 and "--validate-top runs real kernels and needs an NVIDIA GPU" in v.stderr
    assert "24 rows (0 computed in" in v.stdout  # resumed: nothing recomputed
    assert (tmp_path / "sweep.csv").read_text() == table and not (tmp_path / "validated.csv").exists()


def test_cli_refuses_an_unknown_key_and_executor(tmp_path):
    r = cli(["--schedule", "h200-s8-persistent", "--shapes", "1x2x512x128", "--grid", "blockn=64"], tmp_path, 0)
    assert r.returncode == 2 and "h200-s8-persistent has no parameter blockn" in r.stderr
    r = cli(["--schedule", "h200-s8-persistent", "--shapes", "1x2x512x128", "--executor", "ray"], tmp_path, 0)
    assert r.returncode == 2 and "unknown executor" in r.stderr


def test_a_running_dask_scheduler_by_address(tmp_path):
    """dask://HOST:PORT connects a Client to a scheduler already running (here a threaded LocalCluster with two
    threads in one worker: the sweep's lock keeps fast mode's short runs apart from full ones)."""
    distributed = pytest.importorskip("distributed")
    args = ("h200-s8-persistent", ["1x2x1024x128", "4x16x4096x128"], ["stages=2,3"])
    serial = run_sweep(*args, fast=True, check=2, executor="serial", out=tmp_path / "serial", figure=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address.replace("tcp://", "dask://")
        remote = run_sweep(*args, fast=True, check=2, executor=address, out=tmp_path / "remote", figure=False)
    def checked(r):
        return [(x["config"], x["shape"], x["fast_us"], x["full_us"]) for x in r["fast_check"]["rows"]]
    assert remote["csv"] == serial["csv"] and checked(remote) == checked(serial)


def test_a_schedule_on_another_architecture_is_refused_once(tmp_path):
    with pytest.raises(ScheduleError, match="written for sm90 hardware"):
        run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=2"], gpu="b200", executor="serial", out=tmp_path)


def unused_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_scheduler_at_the_address_times_out_with_a_clear_error(tmp_path, monkeypatch):
    from lapis.sweep import executors
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 2)
    port = unused_port()
    with pytest.raises(LapisError, match=f"no Dask scheduler answered within 2 s: got tcp://127.0.0.1:{port}.*"
                                         "start one with `dask scheduler`"):
        run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=2"], executor=f"dask://127.0.0.1:{port}",
                  out=tmp_path, figure=False)


def test_a_scheduler_without_workers_or_whose_workers_lack_lapis_is_refused(tmp_path, monkeypatch):
    from lapis.sweep import executors
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "WORKER_TIMEOUT_S", 2)
    args = ("h200-s8-persistent", ["1x2x512x128"], ["stages=2"])
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        address = cluster.scheduler_address.replace("tcp://", "dask://")
        with pytest.raises(LapisError, match="the Dask scheduler has no worker after 2 s.*`dask worker"):
            run_sweep(*args, executor=address, out=tmp_path / "a", figure=False)
    monkeypatch.setattr(executors, "PROBE_MODULE", "lapis_not_installed")  # a worker whose import fails
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address.replace("tcp://", "dask://")
        with pytest.raises(LapisError, match="Dask workers must import lapis_not_installed 0.1.0: got 1 of 1 "
                                             "worker.*ModuleNotFoundError"):
            run_sweep(*args, executor=address, out=tmp_path / "b", figure=False)
    assert not (tmp_path / "b" / "rows.jsonl").exists()  # no row ran
