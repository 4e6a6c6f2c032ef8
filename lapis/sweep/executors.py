"""Where sweep tasks run: `serial` (this process), `pool` (concurrent.futures.ProcessPoolExecutor, the
default), `dask-local` (a dask.distributed LocalCluster of worker processes) or `dask://HOST:PORT` (a running
Dask scheduler, `distributed.Client("tcp://HOST:PORT")`: the way onto more machines; its workers need lapis
importable).

Nothing waits forever on a scheduler: connecting times out after CONNECT_TIMEOUT_S, a scheduler with no worker
after WORKER_TIMEOUT_S, and a probe task (import PROBE_MODULE on every worker, compare its version with this
process's) after PROBE_TIMEOUT_S; each is a LapisError naming the address and what to start.

Every executor hands each finished row to `on_row` as it completes (the resume store appends it then), in
whatever order the rows finish: the table is sorted afterwards (lapis.sweep.table), so it is the same row for
row whichever executor ran it. A progress line goes to stderr throughout.
"""

from __future__ import annotations

import os
import sys
import time

import lapis
from lapis.errors import LapisError, as_int

EXECUTORS = ("serial", "pool", "dask-local", "dask://HOST:PORT")
CONNECT_TIMEOUT_S = 10  # seconds: a scheduler that does not answer
WORKER_TIMEOUT_S = 30  # seconds: a scheduler with no worker connected
PROBE_TIMEOUT_S = 60  # seconds: every worker imports lapis (a cold worker imports numpy and simpy first)
PROBE_MODULE = "lapis"


class Progress:
    """'sweep: 12/40 rows, 3.1 rows/s, ETA 9 s' on stderr: redrawn in place on a terminal, else every tenth."""

    def __init__(self, total: int, label: str = "sweep", stream=None):
        self.total, self.label, self.done, self.t0 = total, label, 0, time.perf_counter()
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.every = max(1, total // 10)

    def step(self) -> None:
        self.done += 1
        if self.tty or self.done % self.every == 0 or self.done == self.total:
            rate = self.done / max(time.perf_counter() - self.t0, 1e-9)
            eta = (self.total - self.done) / rate
            line = f"{self.label}: {self.done}/{self.total} rows, {rate:.1f} rows/s, ETA {eta:.0f} s"
            self.stream.write(f"\r{line}" if self.tty else line + "\n")
            if self.tty and self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()


def check_executor(name: str) -> None:
    """Raises LapisError for a name not in EXECUTORS or a malformed dask://HOST:PORT."""
    if name in EXECUTORS[:3]:
        return
    if not name.startswith("dask://"):
        raise LapisError("unknown executor", repr(name), "use " + ", ".join(EXECUTORS))
    dask_address(name)


def dask_address(name: str) -> str:
    """'dask://HOST:PORT' -> 'tcp://HOST:PORT' with HOST non-empty and PORT an integer in 1..65535, else
    LapisError."""
    host, sep, port = name[len("dask://"):].rpartition(":")
    if not sep or not host.strip() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise LapisError("a Dask scheduler is dask://HOST:PORT with a host and a port in 1..65535", repr(name),
                         "e.g. dask://localhost:8786 (`dask scheduler` listens on 8786)")
    return f"tcp://{host}:{int(port)}"


def check_workers(workers) -> int:
    """The worker count: None -> the CPU count; an integer >= 1 as given; else LapisError (0 is not 'all')."""
    if workers is None:
        return os.cpu_count() or 1
    n = as_int(workers, "--workers", error=LapisError)
    if n < 1:
        raise LapisError("--workers is a count of worker processes >= 1", n,
                         "give --workers 1 or more, or leave it out for the CPU count")
    return n


def run_tasks(tasks: list, fn, executor: str = "pool", workers: int | None = None, on_row=None,
              progress: Progress | None = None) -> None:
    """Run fn(task) for every task on `executor`; on_row(row) for each result as it finishes.
    Raises LapisError for an unknown executor, a worker count < 1, when dask is needed and not installed, or
    when a dask:// scheduler cannot be reached, has no worker or its workers cannot import lapis."""
    check_executor(executor)
    workers = check_workers(workers)

    def done(row):
        if on_row:
            on_row(row)
        if progress:
            progress.step()

    if not tasks:
        return
    if executor == "serial":
        for t in tasks:
            done(fn(t))
    elif executor == "pool":
        _pool(tasks, fn, workers, done)
    else:
        _dask(tasks, fn, executor, workers, done)


def _pool(tasks, fn, workers, done) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: the workers start from a clean interpreter, not a fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver")) as ex:
        for f in as_completed([ex.submit(fn, t) for t in tasks]):
            done(f.result())


def _dask(tasks, fn, executor, workers, done) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise LapisError("the dask executors need dask and distributed", executor,
                         "pip install 'lapis[sweep]' (or pip install dask distributed)") from None
    if executor == "dask-local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        cluster, client = None, _connect(Client, executor)
    try:
        if cluster is None:
            _ready(client, executor)
        for fut in as_completed(client.map(fn, tasks, pure=False)):
            done(fut.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _connect(Client, executor: str):
    address = dask_address(executor)
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as exc:  # distributed raises OSError("Timed out trying to connect ...")
        raise LapisError(f"no Dask scheduler answered within {CONNECT_TIMEOUT_S} s", address,
                         "start one with `dask scheduler` (and `dask worker " + address + " --nthreads 1` on each "
                         f"machine with lapis installed), or check the address ({type(exc).__name__})") from None


def _probe(name: str) -> str:
    """Run on each worker: the version of the package `name` (lapis) as that worker imports it."""
    import importlib
    return importlib.import_module(name).__version__


def _ready(client, executor: str) -> None:
    """At least one worker, and every worker imports lapis at this process's version; else LapisError."""
    try:
        client.wait_for_workers(1, timeout=WORKER_TIMEOUT_S)
    except (OSError, TimeoutError):
        raise LapisError(f"the Dask scheduler has no worker after {WORKER_TIMEOUT_S} s", executor,
                         f"start workers with `dask worker {dask_address(executor)} --nthreads 1` on machines with "
                         "lapis installed") from None
    from distributed import wait
    workers = sorted(client.scheduler_info()["workers"])
    futs = [client.submit(_probe, PROBE_MODULE, workers=[w], allow_other_workers=False, pure=False) for w in workers]
    try:
        wait(futs, timeout=PROBE_TIMEOUT_S)
    except TimeoutError:
        raise LapisError(f"the Dask workers did not run a probe task within {PROBE_TIMEOUT_S} s", executor,
                         "check that the workers are alive and not busy (their logs say why)") from None
    got = {w: f.exception() or f.result() for w, f in zip(workers, futs)}
    bad = {w: v for w, v in got.items() if v != lapis.__version__}
    if bad:
        w, v = sorted(bad.items())[0]
        what = f"{type(v).__name__}: {v}" if isinstance(v, BaseException) else f"lapis {v}"
        raise LapisError(f"Dask workers must import {PROBE_MODULE} {lapis.__version__}", f"{len(bad)} of "
                         f"{len(got)} worker(s), e.g. {w}: {what}", "pip install the same lapis on every worker "
                         "machine (pip install '.[sweep]')")
