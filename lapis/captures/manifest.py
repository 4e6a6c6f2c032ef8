"""One manifest schema for every capture: capture.json, generated from the capture's own files.

A capture folder <root>/<kind>/<name>/ keeps its provenance in one original file, the first of ORIGINALS it
holds, or, in a folder of one device call's per-kernel captures (proton/<date>/<kernel case>/capture.json, as
benchmarks/h200_proton.py writes them), the first such <subfolder>/capture.json by name (NESTED); capture.json
beside it restates it (schema "lapis.capture/1"):

    {"schema": "lapis.capture/1", "kind", "name",
     "provenance": the original's "provenance" object, as recorded (gpu, driver, cuda..., date, command, commit,
                   dirty, source_blobs, ...),
     "original": the original's path in the folder,
     "provenance_commit": provenance-commit.json, where the folder has one (the commits that hold every source
                          blob of a capture whose recorded commit was wrong),
     "files": [{"path", "size" (bytes), "sha256"} of every file of the folder but capture.json, by path],
     "kernels": [what it measured: {"variant", "shape"[, "causal"]}, {"variant", "ablation", "size"},
                 {"kernel": source path} or, for NESTED captures, {"kernel": the kernel's name, "shape", "capture":
                 its subfolder, "status": its run's status}],
     "packed": [{"file", "original": {"path" (in the repository), "blob" (git blob id), "size" (bytes), "commit"
                 (a commit that holds it)}, "arrays": {name: SHA-256 of its bytes}} for each packed timelines
                file (lapis.captures.codec), read from its header]}

capture.json is written by `python -m lapis.captures.index --write`, never by hand; the original stays.
Files are read through lapis.captures.safe (regular files inside the capture folder, within its LIMITS).
Errors: CaptureError naming the folder or file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from lapis.captures import safe
from lapis.captures.codec import Packed
from lapis.errors import CaptureError
from lapis.model import clock

SCHEMA = "lapis.capture/1"
NAME = "capture.json"
ORIGINALS = ("manifest.json", "micro/manifest.json", "pipes/manifest.json", "clock/manifest.json",
             "fa2_sass/manifest.json", "props.json",
             "sanitizer.json", "timeline_cost.json", "summary.json")
COMMIT_MATCH = "provenance-commit.json"
PACKED_SUFFIX = ".packed"
NESTED = "capture.json"  # <subfolder>/capture.json: a device-written per-kernel manifest (benchmarks/h200_proton.py)
FIX = "restore the capture from git (captures are never edited by hand)"


def nested(folder: Path) -> list[str]:
    """The folder's per-kernel subfolders holding a NESTED capture.json, by name ([] for a plain capture)."""
    folder = Path(folder)
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and os.path.lexists(p / NESTED)) \
        if folder.is_dir() else []


def original(folder: Path) -> str | None:
    """The folder's original provenance file (a path inside it): the first of ORIGINALS it holds, else the first
    NESTED <subfolder>/capture.json by name; None when it holds neither. An entry of that name counts whatever
    it is (a FIFO, a link), so that reading it refuses it by name."""
    name = next((name for name in ORIGINALS if os.path.lexists(Path(folder) / name)), None)
    subs = nested(folder) if name is None else []
    return f"{subs[0]}/{NESTED}" if subs else name


def read_json(path: Path, folder: Path | None = None) -> dict:
    """A capture's JSON object (lapis.captures.safe.read_json: a regular file inside `folder`, default its own
    folder, of at most LIMITS["json_bytes"]); CaptureError naming it when it is missing, unreadable or not an
    object."""
    return safe.read_json(path, folder)


def read_original(folder: Path) -> dict:
    """The JSON of the folder's original provenance file; CaptureError when it has none, or its provenance lacks
    a field of lapis.captures.safe.PROVENANCE (gpu, date, commit, dirty, command, source_blobs) or has another
    type."""
    name = original(folder)
    if name is None:
        raise CaptureError("a capture folder holds one of " + ", ".join(ORIGINALS), str(folder), FIX)
    data = read_json(Path(folder) / name, folder)
    if not isinstance(data.get("provenance"), dict):
        raise CaptureError("a capture's original file records its provenance", f"{folder}/{name}", FIX)
    safe.check(data["provenance"], safe.PROVENANCE, Path(folder) / name, "capture", "provenance")
    return data


def _nested_kernels(folder: Path) -> list[dict]:
    out = []
    for sub in nested(folder):
        m = read_json(folder / sub / NESTED, folder)
        out.append(dict(kernel=m.get("kernel") or sub, shape=m.get("shape"), capture=sub, status=m.get("status")))
    return out


def _kernels(kind: str, folder: Path, man: dict) -> list[dict]:
    """What a capture measured, from its own files (module docstring, "kernels"), sorted."""
    if original(folder).endswith("/" + NESTED):
        return _nested_kernels(folder)
    if kind == "sweep":
        man = read_json(folder / "validate" / "manifest.json", folder)
    out = []
    results = man.get("results")
    for e in results if isinstance(results, list) else []:  # a dict of results (per sampling) names no kernel
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("variants"), dict):
            out += [dict(variant=v, shape=e["shape"], **({"causal": e["causal"]} if "causal" in e else {}))
                    for v in e["variants"]]
        elif isinstance(e.get("kernels"), dict):  # a race: kernels timed side by side
            out += [dict(variant=k, shape=e["shape"], causal=e["causal"]) for k in e["kernels"]]
        elif "variant" in e:
            out.append(dict(variant=e["variant"], ablation=e.get("ablation"), size=e.get("size")))
    if isinstance(man.get("summary"), dict):  # a sanitizer run
        s = man["summary"]
        for key in s.get("clean", {}):
            variant, _, flag = key.split("/")[1].partition(":")
            out.append(dict(variant=variant, shape=s.get("shape"), causal=flag == "causal"))
    if not out:
        kernels = man.get("kernels") or ([man["kernel"]] if "kernel" in man else [])
        out = [dict(kernel=k) for k in kernels]
    unique = {json.dumps(k, sort_keys=True): k for k in out}
    return [unique[k] for k in sorted(unique)]


def _files(folder: Path) -> list[dict]:
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if rel != NAME and not p.is_dir():  # a FIFO, socket or device is read (and refused by name), not skipped
            data = safe.read_bytes(p, folder)
            out.append(dict(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return out


def _packed(folder: Path, files: list[dict]) -> list[dict]:
    out = []
    for f in files:
        if f["path"].endswith(PACKED_SUFFIX):
            with Packed(folder / f["path"], folder) as p:
                out.append(dict(file=f["path"], original=p.source, arrays=p.sha256()))
    return out


def capture_record(kind: str, folder: Path) -> dict:
    """The capture.json of one capture folder (module docstring), computed from its files. CaptureError for a file
    that is not a regular one inside the folder, and for a clock capture whose clock/results.json
    lapis.model.clock.read_points refuses (missing, unreadable, implausible points)."""
    folder = Path(folder)
    man = read_original(folder)
    rec = dict(schema=SCHEMA, kind=kind, name=folder.name, provenance=man["provenance"], original=original(folder))
    if (folder / COMMIT_MATCH).is_file():
        rec["provenance_commit"] = read_json(folder / COMMIT_MATCH, folder)
    files = _files(folder)
    if kind == "clock":  # lapis.model.clock fits the newest by name: a listed results.json it cannot fit is refused
        clock.read_points(folder / clock.RESULTS)
    rec.update(files=files, kernels=_kernels(kind, folder, man))
    packed = _packed(folder, files)
    if packed:
        rec["packed"] = packed
    return rec


def dumps(rec: dict) -> str:
    """capture.json's (and the checksum file's) text: JSON without indentation or a space after a key's colon, a
    key or value a line (diffs stay readable at about 91% of the indented bytes: the tree's byte budget), one
    trailing newline."""
    return json.dumps(rec, indent=0, separators=(",", ":")) + "\n"
