"""Where sweep tasks run: `serial` (this process), `pool` (concurrent.futures.ProcessPoolExecutor, the
default), `dask-local` (a dask.distributed LocalCluster of worker processes) or `dask://HOST:PORT` (a running
Dask scheduler, `distributed.Client("tcp://HOST:PORT")`: the way onto more machines; its workers need lapis
importable).

Every executor hands each finished row to `on_row` as it completes (the resume store appends it then), in
whatever order the rows finish: the table is sorted afterwards (lapis.sweep.table), so it is the same row for
row whichever executor ran it. A progress line goes to stderr throughout.
"""

from __future__ import annotations

import os
import sys
import time

from lapis.errors import LayoutError

EXECUTORS = ("serial", "pool", "dask-local", "dask://HOST:PORT")


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
    if name in EXECUTORS[:3] or (name.startswith("dask://") and ":" in name[len("dask://"):]):
        return
    raise LayoutError("unknown executor", repr(name), "use " + ", ".join(EXECUTORS))


def run_tasks(tasks: list, fn, executor: str = "pool", workers: int | None = None, on_row=None,
              progress: Progress | None = None) -> None:
    """Run fn(task) for every task on `executor`; on_row(row) for each result as it finishes.
    Raises LayoutError for an unknown executor, or when dask is needed and not installed."""
    check_executor(executor)
    workers = workers or os.cpu_count() or 1

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
        raise LayoutError("the dask executors need dask and distributed", executor,
                          "pip install 'lapis[sweep]' (or pip install dask distributed)") from None
    if executor == "dask-local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        cluster, client = None, Client("tcp://" + executor[len("dask://"):])
    try:
        for fut in as_completed(client.map(fn, tasks, pure=False)):
            done(fut.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
