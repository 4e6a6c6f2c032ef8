"""The capture store: capture.json and index.json are exactly what the generator writes from the captures' own
files, the index names the captures the readers take, and the tracked tree fits its size budget."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import lapis
from lapis.captures import attention as ac
from lapis.captures import gemm as gc
from lapis.captures import index, store
from lapis.captures.manifest import ORIGINALS, nested, read_original
from lapis.data import INDEX
from lapis.errors import CaptureError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = store.SHIPPED
BUDGET_BYTES = 30_000_000  # GPU runs copy the tree under a 64 MiB limit, beside what they build


def test_every_capture_json_and_the_index_are_what_the_generator_writes():
    written = index.generated()
    folders = {f for k in index.kinds(SHIPPED) for f in (SHIPPED / k).iterdir() if f.is_dir()}
    assert {p.parent for p in written if p.name == "capture.json"} == folders  # every capture folder has one
    for path, text in written.items():
        assert path.read_text() == text, f"{path}: run python -m lapis.captures.index --write"


def test_capture_json_restates_the_original_which_stays():
    for cj in sorted(SHIPPED.glob("*/*/capture.json")):
        rec = json.loads(cj.read_text())
        subs = nested(cj.parent)  # proton/<date>/: one device-written capture.json a kernel, the first is original
        assert rec["schema"] == "lapis.capture/1" and rec["original"] in (
            ORIGINALS if not subs else (f"{subs[0]}/capture.json",))
        assert rec["provenance"] == read_original(cj.parent)["provenance"], cj
        assert {"gpu", "driver", "date", "command", "commit", "dirty", "source_blobs"} <= set(rec["provenance"]), cj
        paths = {f["path"] for f in rec["files"]}
        assert rec["original"] in paths and "capture.json" not in paths


def test_the_index_names_the_captures_the_readers_take():
    cur = json.loads(INDEX.read_text())["kinds"]
    att = cur["attention"]["current"]
    assert ac.timed(SHIPPED).name == att["timed"]
    assert {(f"{r['variant']}:causal" if r["causal"] else r["variant"]): r["capture"].split("/")[1]
            for r in ac.rows(SHIPPED)} == att["kernels"]
    assert {v: c["capture"] for v, c in ac.sanitizer_clean(SHIPPED).items()} == att["sanitizer"]
    g = cur["gemm"]["current"]
    assert gc.latest(SHIPPED).name == g["timed"]
    assert {(v, shape): f.name for f, shape, v in gc.cases(SHIPPED)} == \
        {(v, shape): c for v, by in g["kernels"].items() for shape, c in by.items()}
    for kind in ("tma", "tma_encode", "wgmma", "cutlass_oracle", "bank"):  # every one is read
        assert [f.name for f in store.manifests(SHIPPED, kind)] == [c["name"] for c in cur[kind]["captures"]]


def test_any_other_root_gets_the_same_index_in_memory(tmp_path):
    for kind in ("attention", "gemm"):
        for f in SHIPPED.glob(f"{kind}/*/*.json"):
            (tmp_path / f.relative_to(SHIPPED)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, tmp_path / f.relative_to(SHIPPED))
        assert store.kind_index(tmp_path, kind) == json.loads(INDEX.read_text())["kinds"][kind]


def test_the_shipped_index_refuses_a_capture_folder_it_does_not_list(tmp_path, monkeypatch):
    shutil.copytree(SHIPPED / "bank", tmp_path / "captures" / "bank")
    (tmp_path / "index.json").write_text(json.dumps(index.build_index(tmp_path / "captures")))
    monkeypatch.setattr(store, "SHIPPED", tmp_path / "captures")
    monkeypatch.setattr(store, "INDEX", tmp_path / "index.json")
    assert len(store.manifests(tmp_path / "captures", "bank")) == 2
    shutil.copytree(SHIPPED / "bank" / "h200-2026-11-29", tmp_path / "captures" / "bank" / "h200-2026-12-01")
    with pytest.raises(CaptureError, match="the index lists every shipped capture folder.*--write"):
        store.manifests(tmp_path / "captures", "bank")


def test_a_removed_original_is_listed_with_the_commit_that_holds_it():
    idx = json.loads(INDEX.read_text())
    packed = {p.relative_to(ROOT).as_posix() for p in SHIPPED.rglob("*.packed")}
    assert packed and {r["packed"] for r in idx["removed"]} == packed
    for r in idx["removed"]:
        assert len(r["blob"]) == len(r["commit"]) == 40 and r["size"] > 0
        assert not (ROOT / r["path"]).exists(), r["path"]  # the original left the tree; git history holds it


def tracked_bytes() -> tuple[int, str]:
    """(bytes, what was measured): the files git tracks in this checkout, or, outside one, the package's files."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True) if shutil.which("git") else None
    if r is not None and r.returncode == 0 and r.stdout:
        files = [ROOT / f for f in r.stdout.decode().split("\0") if f]
        return sum(f.stat().st_size for f in files if f.is_file()), "git ls-files"
    package = Path(lapis.__file__).parent
    return sum(f.stat().st_size for f in package.rglob("*") if f.is_file()), str(package)


def test_the_tracked_tree_fits_the_budget():
    size, what = tracked_bytes()
    assert size <= BUDGET_BYTES, f"{what}: {size / 1e6:.1f} MB > {BUDGET_BYTES / 1e6:.0f} MB"


@pytest.mark.parametrize("provenance, rule, value", [
    ({"gpu": "NVIDIA H200", "date": "2026-12-01T20:00:00+00:00", "commit": "0" * 40, "dirty": "no",
      "command": "python -m lapis.gpu.race --out x", "source_blobs": {}},
     "a capture's field provenance.dirty is true or false", "provenance.dirty = 'no' (str)"),
    ({"gpu": "NVIDIA H200", "date": "2026-12-01T20:00:00+00:00", "dirty": False,
      "command": "python -m lapis.gpu.race --out x", "source_blobs": {}},
     "a capture holds the field provenance.commit", "provenance.commit is missing"),
])
def test_read_original_names_the_provenance_field_it_refuses(tmp_path, provenance, rule, value):
    (tmp_path / "manifest.json").write_text(json.dumps({"provenance": provenance}))
    with pytest.raises(CaptureError) as e:
        read_original(tmp_path)
    assert (e.value.rule, e.value.value) == (rule, f"{tmp_path}/manifest.json: {value}")
