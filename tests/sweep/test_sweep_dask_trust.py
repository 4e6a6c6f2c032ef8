"""lapis sweep on Dask without trust in the workers: what a rogue worker sends runs nothing in the lapis process
and wrong rows are recomputed here; a dask:// address that is silent or not Dask is a named error in time; TLS.

The rogue worker is a real distributed worker (in a cluster subprocess, on loopback, that exits when the test
module is done or after CLUSTER_LIFE_S) made rogue by the task it runs: the task rewires its worker to send a
payload whose unpickling writes a marker file named after the unpickling process's pid. Each channel is first
shown to be real (an unguarded distributed.Client in this process unpickles it and writes the marker), then
lapis's executor is shown to run nothing."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lapis.errors import LapisError
from lapis.sweep import evaluate as ev
from lapis.sweep import executors
from lapis.sweep.executors import run_tasks
from lapis.sweep.run import run_sweep

distributed = pytest.importorskip("distributed")
REPO = Path(__file__).resolve().parents[2]
CLUSTER_LIFE_S = 120
TASK = ev.Task("h200-s8-persistent", "h200", "1x2x512x128", (("stages", 2),), "fast")
CLUSTER = r"""
import os, sys, threading
import distributed
threading.Timer(float(sys.argv[1]), lambda: os._exit(0)).start()  # bounded in time, whatever happens
with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                              dashboard_address=None) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()  # until the test closes stdin (or exits)
    os._exit(0)
"""


@pytest.fixture(scope="module")
def cluster():
    """The dask:// address of a scheduler and one worker in a subprocess (the worker imports this lapis)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", CLUSTER, str(CLUSTER_LIFE_S)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        address = p.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), address
        yield address.replace("tcp://", "dask://")
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def rogue(marker_dir: Path):
    """Task functions that make the worker running them rogue: (raise_pickle, type_pickle, result_pickle).
    Made here, not at module level, so cloudpickle sends them by value (the worker cannot import this module)."""
    code = f"import os; open(os.path.join({str(marker_dir)!r}, 'ran-%d' % os.getpid()), 'w').close()"

    class Payload:
        def __reduce__(self):
            return exec, (code,)

    class Boom(BaseException):  # not an Exception: passes lapis's plain_task as a rogue worker would
        def __reduce__(self):
            return exec, (code,)

    def raise_pickle(task):
        """The exception channel: task-erred carries the pickled exception (the worker's own check that
        unpickles it first is skipped once)."""
        import distributed.protocol.pickle as dp
        real = dp.loads

        def skip_once(*args, **kwargs):
            dp.loads = real
        dp.loads = skip_once
        raise Boom()

    def type_pickle(task):
        """The type channel: task-finished carries pickle.dumps(type(result)), which the client unpickles."""
        import distributed.worker_state_machine as wsm
        real = wsm.pickle

        class Shim:
            def __getattr__(self, name):
                return getattr(real, name)

            def dumps(self, *args, **kwargs):
                wsm.pickle = real
                return real.dumps(Payload())
        wsm.pickle = Shim()
        return ev.evaluate(task)

    def result_pickle(task):
        """The result channel: the worker sends its result pickled, whatever serializers the client asked for."""
        import distributed.protocol.core as core
        real = core.serialize_and_split
        row = ev.evaluate(task)
        text = json.dumps({"row": row}, allow_nan=False)  # what plain_task returns

        def forced(x, serializers=None, **kwargs):
            if getattr(x, "data", x) in (text, row):  # the result (to_serialize wraps it), JSON text or a dict
                core.serialize_and_split = real
                return real(Payload(), serializers=("pickle",), **kwargs)
            return real(x, serializers=serializers, **kwargs)
        core.serialize_and_split = forced
        return row

    return raise_pickle, type_pickle, result_pickle


def ran_here(marker_dir: Path) -> bool:
    return (marker_dir / f"ran-{os.getpid()}").exists()


def test_each_rogue_channel_is_real_for_an_unguarded_client(cluster, tmp_path):
    """The payloads work: a distributed.Client as it comes unpickles each of them in this process."""
    for fn in rogue(tmp_path):
        with distributed.Client(cluster.replace("dask://", "tcp://"), set_as_default=False) as client:
            fut = client.submit(executors.plain_task, TASK, fn=fn, pure=False)
            try:
                fut.result(timeout=30)
            except BaseException:
                pass
            for _ in range(600):  # key-in-memory arrives on the report stream: wait for it, not for a set time
                if ran_here(tmp_path):
                    break
                time.sleep(0.05)
        assert ran_here(tmp_path), fn.__name__
        (tmp_path / f"ran-{os.getpid()}").unlink()


def test_a_rogue_worker_runs_nothing_in_the_client(cluster, tmp_path, capsys):
    raise_pickle, type_pickle, result_pickle = rogue(tmp_path)
    rows = []
    with pytest.raises(LapisError, match="a sweep task failed on the Dask cluster: got task .*its error arrived "
                                         "pickled and was not read"):
        run_tasks([TASK], raise_pickle, cluster, 1, on_row=rows.append)
    run_tasks([TASK], type_pickle, cluster, 1, on_row=rows.append)  # the pickled type is not read: the row is
    run_tasks([TASK], result_pickle, cluster, 1, on_row=rows.append)  # refused, and recomputed here
    assert "1 row(s) from the Dask workers failed their check and were recomputed here, e.g. " \
           f"{TASK.key()}: not a row as JSON text" in capsys.readouterr().err
    assert not ran_here(tmp_path)
    want = ev.evaluate(TASK)
    assert [{k: v for k, v in r.items() if k not in ("wall_s", "cpu_s")} for r in rows] \
        == 2 * [{k: v for k, v in want.items() if k not in ("wall_s", "cpu_s")}]


def test_a_pickled_result_is_refused_by_the_plain_client(cluster, tmp_path):
    *_, result_pickle = rogue(tmp_path)
    with executors.plain_client(cluster.replace("dask://", "tcp://")) as client:
        got = client.submit(executors.plain_task, TASK, fn=result_pickle, pure=False).result(timeout=30)
        assert got is None and client.lapis_refusals.kinds["pickle"] >= 1
    assert not ran_here(tmp_path)


def wrong(kind):
    def fn(task):
        row = ev.evaluate(task)
        try:
            distributed.get_worker()
        except ValueError:  # recomputed in the test's process: the honest row
            return row
        if kind == "another key":
            row = ev.evaluate(ev.Task(task.schedule, task.gpu, task.shape, (("stages", 3),), task.mode))
        elif kind == "another stamp":
            row["stamp"] = dict(row["stamp"], model="0" * 16)
        elif kind == "not a valid row":
            row["tflops"] = -1.0
        elif kind == "not JSON":
            return "a row"
        return row
    return fn


@pytest.mark.parametrize("kind,why", [("another key", "the row of another key"),
                                      ("another stamp", "made under another profile, model or lapis version"),
                                      ("not a valid row", "not a valid row")])
def test_a_wrong_row_from_a_worker_is_recomputed_here_and_counted(cluster, capsys, kind, why):
    rows = []
    run_tasks([TASK], wrong(kind), cluster, 1, on_row=rows.append)
    assert rows[0]["key"] == TASK.key() and rows[0]["stamp"] == ev.stamp("h200") and rows[0]["tflops"] > 0
    assert f"1 row(s) from the Dask workers failed their check and were recomputed here, e.g. {TASK.key()}: " \
           f"{why}" in capsys.readouterr().err


class Peer:
    """A loopback server for one test: `silent` accepts and never answers; `http` answers like an HTTP server.
    It stops when the test ends, or after `life_s`."""

    def __init__(self, kind: str, life_s: float = 30):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.kind, self.conns, self.end = kind, [], time.monotonic() + life_s
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while time.monotonic() < self.end:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(conn)
            if self.kind == "http":
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass
        self.close()

    def close(self):
        self.end = 0
        for c in self.conns + [self.sock]:
            c.close()


@pytest.fixture
def peer():
    made = []
    yield lambda kind: made.append(Peer(kind)) or made[-1]
    for p in made:
        p.close()


@pytest.mark.parametrize("kind,rule", [
    ("silent", "no Dask scheduler answered within 1 s: got tcp://127.0.0.1:{port}; fix: start one with `dask "
               "scheduler`.*it accepted the connection and sent nothing"),
    ("http", r"the peer is not a Dask scheduler \(it did not answer with Dask's handshake\): got "
             r"tcp://127.0.0.1:{port} sent b'HTTP/1.1 400 Bad Request"),
])
def test_a_silent_or_http_peer_is_a_named_error_within_the_timeout(tmp_path, monkeypatch, peer, kind, rule):
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1)
    p = peer(kind)
    with pytest.raises(LapisError, match=rule.format(port=p.port)):
        run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=2"], executor=f"dask://127.0.0.1:{p.port}",
                  out=tmp_path, figure=False)


def openssl_certs(folder: Path) -> dict:
    """A CA and one certificate it signed (EC P-256, valid a day), for every role of a test cluster."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=lapis test CA")
    run("req", *ec, "-keyout", "key.pem", "-out", "req.csr", "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", "req.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "cert.pem", "-days", "1")
    return {k: str(folder / v) for k, v in (("ca", "ca.pem"), ("cert", "cert.pem"), ("key", "key.pem"))}


def test_a_tls_scheduler_with_dask_security_from_the_dask_config(tmp_path, monkeypatch):
    import dask
    from distributed.security import Security
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificates")
    c = openssl_certs(tmp_path)
    roles = {f"tls_{r}_{k}": c[k] for r in ("scheduler", "worker", "client") for k in ("cert", "key")}
    sec = Security(tls_ca_file=c["ca"], require_encryption=True, **roles)
    args = ("h200-s8-persistent", ["1x2x512x128"], ["stages=2,3"])
    serial = run_sweep(*args, fast=True, check=0, executor="serial", out=tmp_path / "serial", figure=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls",
                                  host="127.0.0.1", security=sec, dashboard_address=None) as cluster:
        hostport = cluster.scheduler_address.removeprefix("tls://")
        with pytest.raises(LapisError, match="a tls:// Dask scheduler needs Dask's TLS configuration.*fix: set "
                                             "distributed.comm.tls.ca-file"):
            run_sweep(*args, fast=True, executor=f"dask://tls://{hostport}", out=tmp_path / "a", figure=False)
        config = {"distributed.comm.tls.ca-file": c["ca"], "distributed.comm.tls.client.cert": c["cert"],
                  "distributed.comm.tls.client.key": c["key"], "distributed.comm.require-encryption": True}
        with dask.config.set(config):
            with pytest.raises(LapisError, match="Dask's configuration requires encryption.*dask://tls://HOST:PORT"):
                run_sweep(*args, fast=True, executor=f"dask://{hostport}", out=tmp_path / "b", figure=False)
            tls = run_sweep(*args, fast=True, check=0, executor=f"dask://tls://{hostport}", out=tmp_path / "c",
                            figure=False)
    assert tls["csv"] == serial["csv"] and tls["counts"]["computed"] == 2


def test_a_tls_handshake_with_the_wrong_ca_is_a_named_error(tmp_path, monkeypatch):
    import dask
    from distributed.security import Security
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificates")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good, other = openssl_certs(tmp_path / "a"), openssl_certs(tmp_path / "b")
    roles = {f"tls_{r}_{k}": good[k] for r in ("scheduler", "worker", "client") for k in ("cert", "key")}
    sec = Security(tls_ca_file=good["ca"], require_encryption=True, **roles)
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 2)
    config = {"distributed.comm.tls.ca-file": other["ca"], "distributed.comm.tls.client.cert": other["cert"],
              "distributed.comm.tls.client.key": other["key"]}
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tls", host="127.0.0.1", security=sec,
                                  dashboard_address=None) as cluster, dask.config.set(config):
        address = cluster.scheduler_address
        with pytest.raises(LapisError, match=f"the TLS handshake with the Dask scheduler failed: got {address}: "
                                             ".*CERTIFICATE_VERIFY_FAILED"):
            executors.preflight(address, executors.dask_security(address))
