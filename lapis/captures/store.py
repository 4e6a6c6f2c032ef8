"""The capture store: what every reader of captures uses.

- The captures root: <root>/<kind>/<capture>/ folders (lapis/data/captures by default, SHIPPED).
- A capture folder's manifest: its original provenance file (lapis.captures.manifest.ORIGINALS).
- The index: the order readers take a kind's captures in and the current capture of each kernel
  (lapis.captures.index): lapis/data/index.json for the shipped root, built in memory for any other.
- Timelines: a capture names an .npz (timelines.npz, timelines/<variant>_<size>.npz); the store opens it, or,
  where only its packed form (<stem>.packed, lapis.captures.codec) is there, that, giving the same arrays.

Every file is read through lapis.captures.safe (regular files inside the capture folder, within its LIMITS); the
kinds' readers (manifest schemas, entries not compared) are lapis.captures.readers.
Errors: CaptureError naming the folder or file, with the fix.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from lapis.captures.codec import Packed
from lapis.captures.index import build_kind, folders, read_index
from lapis.captures.manifest import PACKED_SUFFIX, read_original
from lapis.captures.safe import Npz
from lapis.data import CAPTURES, INDEX
from lapis.errors import CaptureError

SHIPPED = CAPTURES


def captures_root(path: str | None = None, kinds: tuple = ("tma",)) -> Path:
    """The captures folder; CaptureError if it is missing or lacks a capture of any of `kinds`."""
    root = Path(path) if path else SHIPPED
    if not root.is_dir():
        raise CaptureError("captures folder not found", str(root), "pass --captures DIR holding tma/<capture>/")
    missing = [k for k in kinds if not manifests(root, k)]
    if missing:
        raise CaptureError("the captures folder lacks " + " and ".join(f"{k}/<capture>/manifest.json"
                                                                       for k in missing),
                           str(root), "pass --captures DIR holding them (lapis ships them in lapis/data/captures)")
    return root


@lru_cache(maxsize=4)
def _index(path: Path, mtime_ns: int) -> dict:
    return read_index(path)


def kind_index(root: Path, kind: str) -> dict:
    """One kind's index entry (lapis.captures.index). For the shipped root it comes from index.json, and a
    capture folder the index does not list (or a listed one that is gone) is a CaptureError."""
    root = Path(root)
    if not (root.exists() and root.resolve() == SHIPPED.resolve()):
        return build_kind(root, kind, details=False)
    if not INDEX.is_file():
        raise CaptureError("the shipped captures come with their index", str(INDEX),
                           "run python -m lapis.captures.index --write")
    entry = _index(INDEX, INDEX.stat().st_mtime_ns)["kinds"].get(kind) or build_kind(root, kind, details=False)
    listed, there = [c["name"] for c in entry["captures"]], [f.name for f in folders(root, kind)]
    if listed != there:
        raise CaptureError("the index lists every shipped capture folder", f"{kind}: index {listed}, folders {there}",
                           "run python -m lapis.captures.index --write")
    return entry


def manifests(root: Path, kind: str) -> list[Path]:
    """Capture folders of one kind holding a manifest.json ('tma', 'wgmma', ...), by name."""
    return [Path(root) / kind / c["name"] for c in kind_index(root, kind)["captures"]
            if c["original"] == "manifest.json"]


def read_manifest(folder: Path) -> dict:
    """The JSON of a capture folder's original provenance file (manifest.json, sanitizer.json, ...)."""
    return read_original(folder)


def load_capture(folder: Path, with_dumps: bool = True) -> tuple[dict, dict]:
    """A capture's manifest (its original file, with provenance) and its dumps (dumps.npz: key -> array, read as
    lapis.captures.safe.Npz); CaptureError naming the file if either is unreadable."""
    man = read_original(folder)
    dumps = {}
    if with_dumps:
        with Npz(Path(folder) / "dumps.npz", folder) as z:
            dumps = {k: z[k] for k in z.files}
    return man, dumps


def packed_path(path: Path) -> Path:
    """Where the packed form of an .npz lives: beside it, <stem>.packed."""
    return Path(path).with_suffix(PACKED_SUFFIX)


def has_timelines(path: Path) -> bool:
    """Whether the capture holds the timelines .npz `path` names, as itself or packed (an entry of either name,
    whatever it is: opening it refuses one that is not a regular file)."""
    return os.path.lexists(path) or os.path.lexists(packed_path(path))


def open_timelines(path: Path, folder: Path | None = None):
    """The arrays of the timelines .npz `path` names: name -> array, with `files`, as a context manager. Opens the
    .npz where it is there (a fresh capture; lapis.captures.safe.Npz), else its packed form (codec.Packed), both
    within lapis.captures.safe.LIMITS and inside `folder`, the capture folder (default: the file's own folder).
    FileNotFoundError when neither is there; a file that is not a regular file, too large or damaged raises
    CaptureError naming it (on open, or on reading the damaged array)."""
    path = Path(path)
    if os.path.lexists(path):
        return Npz(path, folder)
    if os.path.lexists(packed_path(path)):
        return Packed(packed_path(path), folder)
    raise FileNotFoundError(f"{path} (nor {packed_path(path).name}) is not in the capture")


def timeline_files(root: Path) -> list[Path]:
    """Every timelines file under a captures root (attention/*/timelines.*, gemm/*/timelines/*), as the .npz
    path each stands for, sorted."""
    root, out = Path(root), set()
    for pattern in ("*/*/timelines.npz", "*/*/timelines/*.npz"):
        out |= set(root.glob(pattern)) | {p.with_suffix(".npz") for p in root.glob(pattern[:-4] + PACKED_SUFFIX)}
    return sorted(out)
