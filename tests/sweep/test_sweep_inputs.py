"""lapis sweep refuses bad input before anything runs: worker counts, scheduler addresses, grid values the
simulator refuses, shapes, the output folder and the count options (a LapisError, ScheduleError for the
schedule's grid and shapes; exit status 2 on the CLI)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lapis.errors import LapisError, ScheduleError
from lapis.pipeline_sim.schedules.attention_h200 import DEFAULTS
from lapis.sweep.executors import check_executor, dask_address
from lapis.sweep.run import run_sweep
from lapis.sweep.space import parse_grid

S8 = "h200-s8-persistent"
TINY = "1x2x512x128"
REPO = Path(__file__).resolve().parents[2]


def sweep(tmp_path, **kw):
    args = dict(shapes=[TINY], grid=["stages=2"], executor="serial", out=tmp_path / "out", figure=False)
    args.update(kw)
    return run_sweep(S8, **args)


@pytest.mark.parametrize("executor", ["serial", "pool", "dask-local"])
@pytest.mark.parametrize("workers", [0, -2])
def test_worker_counts_below_one_are_refused(tmp_path, executor, workers):
    with pytest.raises(LapisError, match=f"--workers is a count of worker processes >= 1: got {workers}"):
        sweep(tmp_path, executor=executor, workers=workers)
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize("address", ["dask://:", "dask://host:notaport", "dask://:8786", "dask://host:0",
                                     "dask://host:65536", "dask://host"])
def test_malformed_scheduler_addresses_are_refused(address):
    with pytest.raises(LapisError, match="dask://HOST:PORT with a host and a port in 1..65535"):
        check_executor(address)


def test_a_scheduler_address_becomes_tcp():
    assert dask_address("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert dask_address("dask://[::1]:8786") == "tcp://[::1]:8786"


@pytest.mark.parametrize("item,rule", [
    ("stages=,", "a sweep axis needs at least one value"),
    ("stages=", "a sweep axis needs at least one value"),
    ("stages=0,-1", "stages is a count and must be a whole number >= 1"),
    ("stages=2.5", "stages is a count and must be a whole number >= 1"),
    ("threshold=nan", "threshold must be a finite number"),
    ("persistent_order=bogus", "persistent_order is one of"),
    ("causal=2", "causal must lie in"),
    ("=2", "a sweep axis is key=v1,v2"),
])
def test_grid_values_the_simulator_refuses_are_input_errors(item, rule):
    with pytest.raises(ScheduleError, match=rule):
        parse_grid([item], DEFAULTS, S8)


@pytest.mark.parametrize("item, fix", [("stages=2,,3", "--grid stages=2,3"), ("stages=2,3,", "--grid stages=2,3"),
                                       (" stages=,2", "--grid stages=2")])
def test_an_empty_grid_value_is_an_input_error(item, fix):
    with pytest.raises(ScheduleError) as e:
        parse_grid([item], DEFAULTS, S8)
    assert str(e.value) == ("a sweep axis has no empty value between, before or after its commas: "
                            f"got {item!r}; fix: drop the extra comma: {fix}")


def test_spaces_around_grid_keys_and_values_are_stripped():
    assert parse_grid(["stages =2, 3", " block_n= 64"], DEFAULTS, S8) == {"block_n": (64,), "stages": (2, 3)}
    assert parse_grid(["stages=2,2.0"], DEFAULTS, S8) == {"stages": (2,)}  # a whole float is the count 2


@pytest.mark.parametrize("shape,rule", [
    ("8x16x4096", "an attention shape is BxHxLxD"),
    ("abc", "an attention shape is BxHxLxD"),
    ("8x16x4096x128x1", "an attention shape is BxHxLxD"),
    ("0x1x128x128", "shape extents must be positive"),
])
def test_shapes_are_parsed_before_anything_runs(tmp_path, shape, rule):
    with pytest.raises(ScheduleError, match=rule):
        sweep(tmp_path, shapes=[TINY, shape])
    assert not (tmp_path / "out").exists()


def test_shapes_are_stripped_and_a_repeated_shape_is_refused(tmp_path):
    r = sweep(tmp_path, shapes=[" 1x2x512x128 "])
    assert r["shapes"] == [TINY] and r["rows"][0]["shape"] == TINY
    with pytest.raises(ScheduleError, match="each sweep shape is given once: got '1X2x512x128'"):
        sweep(tmp_path, shapes=[TINY, "1X2x512x128"])


def test_out_must_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file", tmp_path / "file" / "under"):
        with pytest.raises(LapisError, match="--out must be a folder"):
            sweep(tmp_path, out=out)
    for out in ("", "  "):
        with pytest.raises(LapisError, match="--out names the sweep's output folder"):
            sweep(tmp_path, out=out)


def test_top_and_check_counts(tmp_path):
    with pytest.raises(LapisError, match="--top prints a count of configurations >= 1: got 0"):
        sweep(tmp_path, top=0)
    with pytest.raises(LapisError, match="--check samples a count of rows >= 0: got -1"):
        sweep(tmp_path, check=-1, fast=True)
    assert not (tmp_path / "out").exists()


def cli(tmp_path, *extra):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "lapis", "sweep", "--schedule", S8, "--shapes", TINY,
                           "--executor", "serial", "--out", str(tmp_path / "out"), *extra],
                          capture_output=True, text=True, env=env, cwd=REPO)


def test_cli_refuses_bad_counts_and_provenance_alone(tmp_path):
    for extra, rule in ((["--validate-top", "0"], "--validate-top times a count of configurations >= 1"),
                        (["--provenance", "p.json"], "--provenance goes with --validate-top"),
                        (["--workers", "-2", "--executor", "pool"], "--workers is a count of worker processes"),
                        (["--grid", "stages=,"], "a sweep axis needs at least one value")):
        r = cli(tmp_path, *extra)
        assert r.returncode == 2 and rule in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
    assert not (tmp_path / "out").exists()
