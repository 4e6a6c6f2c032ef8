"""The capture store: what every reader of captures uses.

- The captures root: <root>/<kind>/<capture>/ folders (lapis/data/captures by default, SHIPPED).
- A capture folder's manifest: manifest.json, with the capture's provenance.

Errors: CaptureError naming the folder or file, with the fix.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from lapis.data import CAPTURES
from lapis.errors import CaptureError

SHIPPED = CAPTURES
FIX = "restore the capture from git (captures are never edited by hand)"


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


def manifests(root: Path, kind: str) -> list[Path]:
    """Capture folders of one kind holding a manifest.json ('tma', 'wgmma', ...), by name."""
    return sorted(p.parent for p in (Path(root) / kind).glob("*/manifest.json"))


def load_capture(folder: Path, with_dumps: bool = True) -> tuple[dict, dict]:
    """A capture's manifest (with provenance) and its dumps (dumps.npz: key -> array); CaptureError if either is
    unreadable."""
    try:
        man = json.loads((Path(folder) / "manifest.json").read_text())
        man["provenance"]["gpu"]  # every capture names its hardware
        dumps = {}
        if with_dumps:
            with np.load(Path(folder) / "dumps.npz", allow_pickle=False) as z:
                dumps = {k: z[k] for k in z.files}
        return man, dumps
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
        raise CaptureError("unreadable capture", f"{folder}: {exc.__class__.__name__}: {exc}", FIX) from None
