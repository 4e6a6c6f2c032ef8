"""The resume store under kills: a process appending rows to OUT/rows.jsonl, or compacting it, is killed at 50
seeded points, and the store read back afterwards holds every row it held before and every row whose add()
returned; only the row in flight may be missing.

Two kinds of kill point, drawn by random.Random(seed):
- a byte limit (RLIMIT_FSIZE with SIGXFSZ at its default action): the kernel kills the process the moment a file
  it writes would pass N bytes, inside a write, so a line or a compaction's new file is left cut short;
- an operation count: SIGKILL just before or just after the k-th os.write, os.fsync or os.replace of the store.
Half of the stores start with lines that fail their check (garbage, a bad checksum, a cut-short tail), so
opening them compacts, and the kills land in the compaction too."""

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lapis.sweep import store

REPO = Path(__file__).resolve().parents[2]
SEEDS = range(50)
DRIVER = r"""
import json, os, resource, signal, sys
from lapis.sweep import store

def child(spec, report):
    if spec["kind"] == "bytes":
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the default kills the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (spec["limit"], resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    else:
        count = [0]
        def hooked(real):
            def call(*args):
                count[0] += 1
                if count[0] == spec["op"] and spec["before"]:
                    os.kill(os.getpid(), signal.SIGKILL)
                out = real(*args)
                if count[0] == spec["op"]:
                    os.kill(os.getpid(), signal.SIGKILL)
                return out
            return call
        for name in ("write", "fsync", "replace"):
            setattr(os, name, hooked(getattr(os, name)))
    s = store.RowStore(spec["folder"])
    for row in spec["rows"]:
        s.add(row)
        report.write(row["key"] + "\n")  # io's own write, not os.write: not counted, not limited (a pipe)
    s.close()

out = []
for spec in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(spec, os.fdopen(w, "w", buffering=1))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        added = f.read().splitlines()
    status = os.waitpid(pid, 0)[1]
    out.append(dict(rc=os.waitstatus_to_exitcode(status), added=added))
print(json.dumps(out))
"""


def fake_row(i: int) -> dict:
    """A valid row (store.valid_row) with its own key and numbers."""
    return dict(key=f"h200-s8-persistent|h200|full|1x2x512x128|i={i},stages=2", shape="1x2x512x128",
                config=[["i", i], ["stages", 2]], mode="full", fits=True, reason="", predicted_us=10.0 + i / 7,
                tflops=100.0 / (1 + i), bound_by="tc", smem_bytes=1024 * i, registers=168, tmem_columns=None,
                runnable=False, kernel="not runnable: a test row", fast_method="",
                stamp=dict(profile="p" * 16, model="m" * 16, version="0.1.0"), wall_s=0.5, cpu_s=0.25)


def store_lines(rows: list[dict]) -> list[bytes]:
    return [store.line(r) for r in rows]


def scenario(seed: int, folder: Path) -> tuple[dict, list[dict]]:
    """Write the store the child opens; return the child's spec and the rows stored before it ran."""
    rng = random.Random(seed)
    before = [fake_row(i) for i in range(rng.randint(5, 40))]
    lines = store_lines(before)
    compacts = seed % 2 == 1
    if compacts:  # lines that fail their check among the good ones, and a cut-short tail
        bad = [b'{"format":"lapis.sweep-row/1","row":{},"sha256":"00"}\n', b"\xff garbage\n",
               store.line(fake_row(999)).replace(b'"tflops":', b'"tflops":1')]
        for b in bad:
            lines.insert(rng.randint(0, len(lines)), b)
    data = b"".join(lines) + (store.line(fake_row(998))[:37] if compacts else b"")
    (folder / store.ROWS_FILE).write_bytes(data)
    new = [fake_row(1000 + i) for i in range(rng.randint(1, 12))]
    spec = dict(folder=str(folder), rows=new)
    if rng.random() < 0.6:  # a compaction writes a new file from 0 bytes; appends start at the store's size
        grows = sum(len(store.line(r)) for r in new)
        start = 0 if compacts else len(data)
        spec.update(kind="bytes", limit=start + rng.randint(0, sum(map(len, store_lines(before))) + grows
                                                            if compacts else grows))
    else:
        spec.update(kind="ops", op=rng.randint(1, 6 + 2 * len(new)), before=rng.random() < 0.5)
    return spec, before


def run_children(specs: list[dict]) -> list[dict]:
    """Each spec run in a process forked from one fresh interpreter (no threads): {rc, added keys}."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-S", "-c", DRIVER], input=json.dumps(specs), capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.fixture
def ram_folder(tmp_path):
    """A folder on tmpfs where there is one (fsync costs nothing there; a kill is the same on any file system),
    else tmp_path."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="lapis-kills-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_kills_at_50_seeded_points_lose_no_row_but_the_one_in_flight(ram_folder):
    tmp_path = ram_folder
    killed = {"bytes": 0, "ops": 0, "opening a store to compact": 0}
    cases = []
    for seed in SEEDS:
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        cases.append((seed, folder, *scenario(seed, folder)))
    results = run_children([spec for _, _, spec, _ in cases])
    for (seed, folder, spec, before), res in zip(cases, results):
        rc, added = res["rc"], res["added"]
        assert rc in (0, -signal.SIGKILL, -signal.SIGXFSZ), (seed, rc)
        killed[spec["kind"]] += rc != 0
        killed["opening a store to compact"] += rc != 0 and seed % 2 == 1 and not added
        note = io.StringIO()
        s = store.RowStore(folder, stream=note)  # takes over the killed child's lock
        try:
            got = s.rows
            asked = [r["key"] for r in spec["rows"]]
            for r in before:  # nothing stored before the child ran is lost, compaction or not
                assert got.get(r["key"]) == r, (seed, spec, r["key"])
            for k in added:  # every add() that returned is durable
                assert got[k] == spec["rows"][asked.index(k)], (seed, spec, k)
            in_flight = asked[len(added):len(added) + 1]
            extra = set(got) - {r["key"] for r in before} - set(added)
            assert extra <= set(in_flight), (seed, spec, extra)  # at most the row in flight, and whole
            for k in extra:
                assert got[k] == spec["rows"][asked.index(k)]
        finally:
            s.close()
        assert not (folder / store.LOCK_FILE).exists()
        assert not list(folder.glob(store.COMPACT_PREFIX + "*"))  # a killed compaction's file is cleared
        again = store.RowStore(folder, stream=io.StringIO())  # the store as left is clean: nothing dropped
        assert again.dropped == 0 and again.rows == got
        again.close()
    # both kinds of kill happened, many times, and some while the store was being compacted
    assert killed["bytes"] >= 15 and killed["ops"] >= 10 and killed["opening a store to compact"] >= 5, killed
