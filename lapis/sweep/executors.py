"""Where sweep tasks run: `serial` (this process), `pool` (concurrent.futures.ProcessPoolExecutor, the
default), `dask-local` (a dask.distributed LocalCluster of worker processes) or `dask://HOST:PORT` (a running
Dask scheduler over tcp://; `dask://tls://HOST:PORT` over TLS with distributed.security.Security from Dask's
configuration: the way onto more machines; its workers need lapis importable).

Nothing waits forever on a scheduler: the address is checked first (`preflight`: a TCP connection, the TLS
handshake for tls://, and Dask's comm handshake, within CONNECT_TIMEOUT_S: a peer that does not answer, and one
that is not Dask, such as an HTTP server, are each a LapisError), then the Client connects within
CONNECT_TIMEOUT_S, a scheduler with no worker times out after WORKER_TIMEOUT_S, and a probe task (import
PROBE_MODULE on every worker, compare its version with this process's) after PROBE_TIMEOUT_S; each is a
LapisError naming the address and what to start.

What the Dask executors take from a cluster (plain_client): each task runs `plain_task` on the worker, which
returns the row as JSON text ({"row": ...}, or {"error": "Type: message"}); the Client asks for msgpack only
(deserializers=["msgpack"]), talks only to the scheduler (direct_to_workers=False), and while it runs, this
process decodes every message its comms read without unpickling anything: a pickled object (distributed's
__Pickled__ frames, or a sub-object serialized other than with msgpack) arrives as None, and
distributed.protocol.pickle.loads (and distributed.client's copy of it) refuses to run for it; the default
event handlers, whose `warn` unpickles its payload, are not subscribed. Each row is checked on arrival
(evaluate.check_row: a valid row, the key of the task sent, this process's stamp); a row that fails is
recomputed in this process and counted on stderr. A task whose error arrives pickled is a LapisError (its
error is not read; the workers' logs have it).

Every executor hands each finished row to `on_row` as it completes (the resume store appends it then), in
whatever order the rows finish: the table is sorted afterwards (lapis.sweep.table), so it is the same row for
row whichever executor ran it. A progress line goes to stderr throughout.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import socket
import ssl
import struct
import sys
import time
from collections import Counter

import lapis
from lapis.errors import LapisError, as_int
from lapis.sweep import evaluate as ev
from lapis.sweep.store import plain_json

EXECUTORS = ("serial", "pool", "dask-local", "dask://HOST:PORT")
SCHEMES = ("tcp", "tls")  # dask://HOST:PORT is tcp://; dask://tls://HOST:PORT
CONNECT_TIMEOUT_S = 10  # seconds: a scheduler that does not answer
WORKER_TIMEOUT_S = 30  # seconds: a scheduler with no worker connected
PROBE_TIMEOUT_S = 60  # seconds: every worker imports lapis (a cold worker imports numpy and simpy first)
CLOSE_TIMEOUT_S = 10  # seconds: closing the Client
PROBE_MODULE = "lapis"
PLAIN = ("msgpack",)  # the only serializer family the Client reads
MAX_PAYLOAD_CHARS = 1 << 20  # a row's JSON is about 1 KB
MAX_HANDSHAKE_BYTES = 1 << 16  # Dask's comm handshake is about 100 bytes
START_HINT = "start one with `dask scheduler` (and `dask worker {} --nthreads 1` on each machine with lapis " \
             "installed), or check the address"


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
    """Raises LapisError for a name not in EXECUTORS or a malformed dask:// address."""
    if name in EXECUTORS[:3]:
        return
    if not name.startswith("dask://"):
        raise LapisError("unknown executor", repr(name), "use " + ", ".join(EXECUTORS))
    dask_address(name)


def dask_address(name: str) -> str:
    """'dask://HOST:PORT' -> 'tcp://HOST:PORT'; 'dask://tcp://HOST:PORT' and 'dask://tls://HOST:PORT' keep their
    scheme. HOST non-empty and PORT an integer in 1..65535, else LapisError."""
    rest, scheme = name[len("dask://"):], "tcp"
    if "://" in rest:
        scheme, _, rest = rest.partition("://")
    host, sep, port = rest.rpartition(":")
    if scheme not in SCHEMES or not sep or not host.strip() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise LapisError("a Dask scheduler is dask://HOST:PORT with a host and a port in 1..65535 "
                         "(dask://tls://HOST:PORT over TLS)", repr(name),
                         "e.g. dask://localhost:8786 (`dask scheduler` listens on 8786)")
    return f"{scheme}://{host}:{int(port)}"


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
              progress: Progress | None = None, check=ev.check_row) -> None:
    """Run fn(task) for every task on `executor`; on_row(row) for each result as it finishes. On the Dask
    executors each row is checked with check(task, row) (a reason, '' when good) and recomputed here when it fails.
    Raises LapisError for an unknown executor, a worker count < 1, when dask is needed and not installed, when a
    dask:// scheduler cannot be reached or is not Dask, has no worker or its workers cannot import lapis, or when
    a task fails on a Dask worker."""
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
        _dask(tasks, fn, executor, workers, done, check)


def _pool(tasks, fn, workers, done) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver: the workers start from a clean interpreter, not a fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver")) as ex:
        for f in as_completed([ex.submit(fn, t) for t in tasks]):
            done(f.result())


def _dask(tasks, fn, executor, workers, done, check) -> None:
    try:
        from distributed import LocalCluster
    except ImportError:
        raise LapisError("the dask executors need dask and distributed", executor,
                         "pip install 'lapis[sweep]' (or pip install dask distributed)") from None
    if executor == "dask-local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        address, security = cluster.scheduler_address, None
    else:
        cluster, address = None, dask_address(executor)
        security = dask_security(address)
        preflight(address, security)
    try:
        with plain_client(address, security) as client:
            if cluster is None:
                _ready(client, executor)
            _collect(client, tasks, fn, done, check)
    finally:
        if cluster is not None:
            cluster.close()


def dask_security(address: str):
    """distributed.security.Security from Dask's configuration (distributed.comm.tls.ca-file,
    distributed.comm.tls.client.cert and .key, distributed.comm.require-encryption), or None for a tcp://
    address where no encryption is required. Raises LapisError for tls:// without a CA file and client
    certificate, or tcp:// where the configuration requires encryption."""
    from distributed.security import Security
    sec = Security()
    tls = address.startswith("tls://")
    if tls and not (sec.tls_ca_file and sec.tls_client_cert):
        raise LapisError("a tls:// Dask scheduler needs Dask's TLS configuration: a CA file and a client "
                         "certificate", address, "set distributed.comm.tls.ca-file, distributed.comm.tls.client.cert "
                         "and .key in a Dask config file (~/.config/dask/*.yaml, or a folder named by $DASK_CONFIG), "
                         "or as DASK_DISTRIBUTED__COMM__TLS__CA_FILE=... in the environment")
    if not tls and sec.require_encryption:
        raise LapisError("Dask's configuration requires encryption (distributed.comm.require-encryption)", address,
                         "give the scheduler as dask://tls://HOST:PORT")
    return sec if tls else None


def _tls_context(address: str, security) -> ssl.SSLContext:
    try:
        return security.get_connection_args("client")["ssl_context"]
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise LapisError("Dask's TLS configuration cannot be loaded", f"{address}: {type(exc).__name__}: {exc}",
                         "check the files named by distributed.comm.tls.ca-file, .client.cert and .client.key") \
            from None


def _handshake() -> bytes:
    """Dask's comm handshake as a client sends it: one msgpack frame after its lengths (struct "Q")."""
    import msgpack
    frame = msgpack.dumps({"compression": None, "python": tuple(sys.version_info[:3]), "pickle-protocol": 5},
                          use_bin_type=True)
    body = struct.pack("QQ", 1, len(frame)) + frame
    return struct.pack("Q", len(body)) + body


def _is_handshake(body: bytes) -> bool:
    """Whether `body` (the bytes after the length) is Dask's handshake: frame lengths, then a msgpack map with
    the handshake's keys."""
    import msgpack
    try:
        (n,) = struct.unpack_from("Q", body)
        sizes = struct.unpack_from(f"{n}Q", body, 8) if 1 <= n <= 16 else ()
        first = body[8 + 8 * n:8 + 8 * n + sizes[0]] if sizes else b""
        info = msgpack.loads(first, raw=False, strict_map_key=False) if first else None
    except (struct.error, ValueError, TypeError, msgpack.UnpackException):
        return False
    return isinstance(info, dict) and {"compression", "python", "pickle-protocol"} <= set(info)


def preflight(address: str, security=None) -> None:
    """Check that a Dask scheduler answers at `address` (tcp:// or tls://) before a Client is made: connect,
    shake hands (TLS, then Dask's comm handshake: read at most MAX_HANDSHAKE_BYTES), all within
    CONNECT_TIMEOUT_S. Raises LapisError when nothing answers in time (a closed port, a peer that accepts and
    stays silent), the TLS handshake fails, or the peer is not Dask (an HTTP server answers with text)."""
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S

    def left() -> float:
        return max(0.001, deadline - time.monotonic())

    def silent(what: str) -> LapisError:
        return LapisError(f"no Dask scheduler answered within {CONNECT_TIMEOUT_S} s", address,
                          f"{START_HINT.format(address)} ({what})")

    def not_dask(got: bytes) -> LapisError:
        return LapisError("the peer is not a Dask scheduler (it did not answer with Dask's handshake)",
                          f"{address} sent {got[:40]!r}", "check the host and port: `dask scheduler` listens on "
                          "8786 by default (its dashboard, an HTTP server, is another port)")

    try:
        sock = socket.create_connection((host, int(port)), timeout=left())
    except socket.timeout:
        raise silent("the connection timed out") from None
    except OSError as exc:
        raise silent(exc.strerror or type(exc).__name__) from None
    try:
        if scheme == "tls":
            sock.settimeout(left())
            try:
                sock = _tls_context(address, security).wrap_socket(sock, server_hostname=host)
            except socket.timeout:
                raise silent("no TLS handshake") from None
            except (ssl.SSLError, OSError) as exc:
                raise LapisError("the TLS handshake with the Dask scheduler failed", f"{address}: {exc}",
                                 "check Dask's TLS configuration (distributed.comm.tls.ca-file, .client.cert, "
                                 ".client.key) against the scheduler's certificate") from None
        got = b""
        try:
            sock.settimeout(left())
            sock.sendall(_handshake())
            while len(got) < 8 or len(got) < 8 + struct.unpack_from("Q", got)[0]:
                if len(got) >= 8 and struct.unpack_from("Q", got)[0] > MAX_HANDSHAKE_BYTES:
                    raise not_dask(got)
                sock.settimeout(left())
                chunk = sock.recv(4096)
                if not chunk:
                    raise not_dask(got) if got else silent("it closed the connection without a word")
                got += chunk
        except socket.timeout:
            raise (not_dask(got) if got else silent("it accepted the connection and sent nothing")) from None
        except OSError as exc:
            raise silent(exc.strerror or type(exc).__name__) from None
        if not _is_handshake(got[8:8 + struct.unpack_from("Q", got)[0]]):
            raise not_dask(got)
    finally:
        sock.close()


class _Refusals:
    """What the guard of a plain_client refused: counts by serializer family ('pickle', 'dask', ...)."""

    def __init__(self):
        self.kinds: Counter = Counter()

    def refuse(self, kind: str):
        self.kinds[str(kind)] += 1
        return None


class PickleRefused(TypeError):
    """Raised inside distributed's code (which catches it) when it would unpickle data a cluster sent."""


_GUARD: contextvars.ContextVar = contextvars.ContextVar("lapis_plain_client", default=None)


def _plain_loads(frames, refusals: _Refusals):
    """A message read by a plain_client's comm (distributed.protocol.core.loads without pickle): msgpack, with
    distributed's msgpack-serialized sub-objects decoded; a pickled object, or one serialized otherwise, is
    None."""
    import msgpack
    from distributed.protocol.compression import decompress
    from distributed.protocol.serialize import merge_and_deserialize, msgpack_decode_default
    opts = dict(use_list=False, strict_map_key=False, raw=False)

    def hook(obj: dict):
        if "__Pickled__" in obj:
            return refusals.refuse("pickle")
        if "__Serialized__" in obj:
            off = obj["__Serialized__"]
            if isinstance(off, bool) or not isinstance(off, int) or not 0 < off < len(frames):
                return refusals.refuse("serialized")
            sub = None
            try:
                sub = msgpack.loads(frames[off], **opts)
                sub_frames = list(frames[off + 1:off + 1 + int(sub.get("num-sub-frames", 0))])
                if "compression" in sub:
                    sub_frames = decompress(sub, sub_frames)
                return merge_and_deserialize(sub, sub_frames, deserializers=PLAIN)
            except Exception:  # a family other than msgpack (TypeError), or a malformed header
                return refusals.refuse(sub.get("serializer") if isinstance(sub, dict) else "serialized")
        if "__Enum__" in obj or "__Set__" in obj:  # an enum of distributed.scheduler.allowed-imports; a set
            return msgpack_decode_default(obj)
        return obj

    return msgpack.loads(frames[0], object_hook=hook, **opts)


def _guard_distributed() -> None:
    """Install, once per process, the wrappers that make distributed's reads plain inside a plain_client
    (_GUARD set in the caller's context; everywhere else they call through): distributed.comm.tcp.from_frames
    (tcp:// and tls:// comms) decodes with _plain_loads; distributed.protocol.pickle.loads and distributed.client's
    `loads` raise PickleRefused. Raises LapisError when this distributed lacks one of them."""
    import distributed.client as dclient
    import distributed.comm.tcp as tcp
    import distributed.protocol.pickle as dpickle
    if getattr(tcp.from_frames, "lapis_plain", False):
        return
    targets = [(tcp, "from_frames"), (dpickle, "loads"), (dclient, "loads")]
    missing = [f"{m.__name__}.{n}" for m, n in targets if not callable(getattr(m, n, None))]
    if missing or not isinstance(getattr(dclient.Client, "_default_event_handlers", None), dict):
        import distributed
        raise LapisError("lapis reads a Dask cluster's messages without pickle through distributed's comm and "
                         "pickle functions, and this distributed lacks some", f"distributed {distributed.__version__}: "
                         f"{missing or 'Client._default_event_handlers'}", "install distributed>=2024.1 as "
                         "pyproject.toml's sweep extra pins it (pip install '.[sweep]')")
    real_frames = tcp.from_frames

    async def from_frames(frames, deserialize=True, deserializers=None, allow_offload=True):
        refusals = _GUARD.get()
        if refusals is None:
            return await real_frames(frames, deserialize=deserialize, deserializers=deserializers,
                                     allow_offload=allow_offload)
        return _plain_loads(frames, refusals)

    def refusing(real):
        @functools.wraps(real)
        def loads(*args, **kwargs):
            refusals = _GUARD.get()
            if refusals is None:
                return real(*args, **kwargs)
            refusals.refuse("pickle")
            raise PickleRefused("lapis reads no pickle from a Dask cluster")
        return loads

    from_frames.lapis_plain = True
    dpickle.loads, dclient.loads = refusing(dpickle.loads), refusing(dclient.loads)
    tcp.from_frames = from_frames


@functools.cache
def _client_class():
    from distributed import Client

    class PlainClient(Client):
        """A Client that subscribes to none of the default event topics (print, warn: warn unpickles)."""

        def subscribe_topic(self, topic, handler):
            if handler not in Client._default_event_handlers.values():
                super().subscribe_topic(topic, handler)

    return PlainClient


@contextlib.contextmanager
def plain_client(address: str, security=None):
    """A distributed Client on the scheduler at `address` that reads only plain data (see the module
    docstring), closed on exit. Yields the Client; its refusals are counted in `client.lapis_refusals`.
    Raises LapisError when the scheduler does not answer within CONNECT_TIMEOUT_S."""
    _guard_distributed()
    refusals = _Refusals()
    token = _GUARD.set(refusals)  # the Client's coroutines start in this context and keep it
    try:
        try:
            client = _client_class()(address, timeout=f"{CONNECT_TIMEOUT_S}s", security=security,
                                     deserializers=list(PLAIN), direct_to_workers=False)
        except (OSError, TimeoutError) as exc:  # distributed raises OSError("Timed out trying to connect ...")
            raise LapisError(f"no Dask scheduler answered within {CONNECT_TIMEOUT_S} s", address,
                             f"{START_HINT.format(address)} ({type(exc).__name__})") from None
        client.lapis_refusals = refusals
        try:
            yield client
        finally:
            client.close(timeout=CLOSE_TIMEOUT_S)
    finally:
        _GUARD.reset(token)


def plain_task(task, fn) -> str:
    """Run on a Dask worker: fn(task) as JSON text, {"row": row}, or {"error": "Type: message"} when it raises:
    plain data the client reads without unpickling."""
    try:
        return json.dumps({"row": fn(task)}, allow_nan=False)
    except Exception as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


def _text(payload, keys=("row", "error")) -> dict | None:
    """A plain_task (or probe) result parsed (plain_json): a dict of one of `keys`; None when it is not such JSON
    text."""
    if not isinstance(payload, str) or len(payload) > MAX_PAYLOAD_CHARS:
        return None
    try:
        msg = plain_json(payload)
    except (ValueError, RecursionError):
        return None
    return msg if isinstance(msg, dict) and len(msg) == 1 and next(iter(msg)) in keys else None


def _failed(client, fut, what: str) -> LapisError:
    refused = dict(client.lapis_refusals.kinds)
    why = f"its error arrived pickled and was not read (refused: {refused})" if refused else f"status {fut.status}"
    return LapisError(f"a {what} failed on the Dask cluster", f"task {fut.key}: {why}",
                      "the scheduler's and workers' logs say why (lapis unpickles nothing a cluster sends)")


def _collect(client, tasks, fn, done, check) -> None:
    """Map plain_task over the tasks; hand each checked row to done(). A row that fails its check is recomputed
    here, and the count goes to stderr."""
    from distributed import as_completed
    futs = client.map(plain_task, tasks, fn=fn, pure=False)
    task_of = {f.key: t for f, t in zip(futs, tasks)}
    redone = []
    for fut in as_completed(futs):
        task = task_of[fut.key]
        if fut.status != "finished":
            raise _failed(client, fut, "sweep task")
        msg = _text(fut.result())
        if msg is not None and "error" in msg:
            raise LapisError("a sweep task raised on a Dask worker", f"{task.key()}: {str(msg['error'])[:500]}",
                             "run the same configuration with --executor serial to see it here")
        why = "not a row as JSON text" if msg is None else check(task, msg["row"])
        if why:
            redone.append(f"{task.key()}: {why}")
        done(fn(task) if why else msg["row"])
        fut.release()
    if redone:
        sys.stderr.write(f"lapis sweep: {len(redone)} row(s) from the Dask workers failed their check and were "
                         f"recomputed here, e.g. {redone[0]}\n")


def probe(name: str) -> str:
    """Run on each worker: {"version": the version of package `name` (lapis) as that worker imports it}, or
    {"error": "Type: message"}, as JSON text."""
    import importlib
    try:
        return json.dumps({"version": str(importlib.import_module(name).__version__)})
    except Exception as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


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
    futs = [client.submit(probe, PROBE_MODULE, workers=[w], allow_other_workers=False, pure=False) for w in workers]
    try:
        wait(futs, timeout=PROBE_TIMEOUT_S)
    except TimeoutError:
        raise LapisError(f"the Dask workers did not run a probe task within {PROBE_TIMEOUT_S} s", executor,
                         "check that the workers are alive and not busy (their logs say why)") from None
    got = {}
    for w, f in zip(workers, futs):
        if f.status != "finished":
            raise _failed(client, f, "probe task")
        msg = _text(f.result(), ("version", "error")) or {"error": "an answer that is not the probe's JSON"}
        got[w] = msg.get("version", msg.get("error"))
        if "version" not in msg:
            got[w] = f"error {got[w]}"
    bad = {w: v for w, v in got.items() if v != lapis.__version__}
    if bad:
        w, v = sorted(bad.items())[0]
        what = str(v)[:300] if str(v).startswith("error ") else f"lapis {str(v)[:40]}"
        raise LapisError(f"Dask workers must import {PROBE_MODULE} {lapis.__version__}", f"{len(bad)} of "
                         f"{len(got)} worker(s), e.g. {w}: {what}", "pip install the same lapis on every worker "
                         "machine (pip install '.[sweep]')")
