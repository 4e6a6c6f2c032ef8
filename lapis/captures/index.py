"""The capture index: every capture by kind, the order the readers take them in, and the current capture of
each kernel; and the generator of capture.json files and lapis/data/index.json.

    python -m lapis.captures.index            # check: exit 1 listing every capture.json or index.json that differs
    python -m lapis.captures.index --write    # write them from the captures' own files

It also writes lapis/data/capture_checksums.json (schema "lapis.capture-checksums/1"): {"schema", "captures":
{"<kind>/<name>": SHA-256 of that capture's capture.json}}, which lapis.captures.safe checks before trusting a
shipped capture.json. The generator reads the files unchecked (lapis.captures.safe.unchecked): it is what
rewrites the listings after a capture changes on purpose.

index.json (schema "lapis.capture-index/1"; JSON without indentation, a key or value a line, to spare the tree's
bytes):

    {"schema", "kinds": {kind: {"rule": how readers choose, "captures": [{"name", "date" (the original's
     provenance date, ISO 8601), "original"}] by name, ...}}, "removed": [...]}

- attention: "manifests" (every bench run, check-only ones too), "timed" (those with plain-build medians) and
  "sanitizer" (sanitizer.json runs), each by the provenance date of that file, then name (folder names do not
  sort by time); "current": {"timed": the last
  timed capture, "kernels": {variant, or "<variant>:causal": the last timed capture that measured it},
  "sanitizer": {variant[:causal]: the last sanitizer run that covered it}}.
- gemm: "timed" (captures with plain-build medians, not check-only runs or ablations) by name; "current":
  {"timed": the last, "kernels": {variant: {shape MxNxK: the last timed capture that measured it}}}.
- every other kind: no capture supersedes another (RULES says who reads them); "current": {"kernels": {kernel or
  variant: [every capture of it]}}.
- "removed": files no longer in the tree, from each packed file's header: {"path", "blob", "size", "commit"
  (a commit that holds the blob), "packed" (the file that replaces it, in the repository)}.

For the shipped captures the readers read index.json (lapis.captures.store); for any other root they build
the same index in memory with `build_kind`, reading each capture through its kind's reader
(lapis.captures.readers). Errors: CaptureError naming the file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path, PurePosixPath

from lapis.captures.manifest import (
    NAME,
    ORIGINALS,
    capture_record,
    dumps,
    original,
    read_json,
    read_original,
)
from lapis.captures.readers import read_attention, read_gemm, read_sanitizer
from lapis.captures.safe import unchecked
from lapis.data import CAPTURE_CHECKSUMS, CAPTURES, INDEX
from lapis.errors import CaptureError

SCHEMA = "lapis.capture-index/1"
CHECKSUMS_SCHEMA = "lapis.capture-checksums/1"
RULES = {
    "attention": "bench and sanitizer runs by provenance date, then name; a later capture supersedes an earlier "
                 "one for the variants (and causal flag) it measured",
    "gemm": "timed runs by name; a later capture supersedes an earlier one for the (variant, shape) it measured",
    "micro": "the profile fit reads the results.json files lapis/data/fit_manifest.json lists; none supersedes "
             "another",
    "diagnostic": "lapis validate units reads the Nsight Compute ones (schema lapis.ncu-units/1) for its DRAM rows "
                  "of lapis/data/blind/ncu/l2_reuse.json, by kernel and shape; none supersedes another",
    "sweep": "no reader chooses among them (the README cites each by name); none supersedes another",
    "clock": "lapis.model.clock fits the newest capture by name (<capture>/clock/results.json); none supersedes "
             "another",
    "sass": "lapis.model.warp_loop reads fa2-h200-2026-12-02 (<capture>/fa2_sass/manifest.json and its SASS files) by "
            "path; no reader reads fa4-sm90-2026-12-03 (FA4's listings, compiled only; its tests do); none "
            "supersedes another",
    "proton": "lapis compare --measured reads one kernel's subfolder (<capture>/<case>/capture.json and its trace) "
              "by path; none supersedes another",
}
EVERY = "every capture is read, by name; none supersedes another"


def folders(root: Path, kind: str) -> list[Path]:
    """The capture folders of one kind (those holding an original provenance file), by name. A folder holding
    capture.json but no original (its manifest.json deleted) is a CaptureError naming it, not a folder to skip."""
    base = Path(root) / kind
    found, subs = [], sorted(d for d in base.iterdir() if d.is_dir()) if base.is_dir() else []
    for p in subs:
        if original(p):
            found.append(p)
        elif os.path.lexists(p / NAME):
            raise CaptureError("every capture folder holds its manifest.json (or its kind's original: one of "
                               + ", ".join(ORIGINALS[1:]) + "); capture.json only restates it",
                               f"{p}: capture.json is there, manifest.json is not",
                               "restore manifest.json from git, or capture again into a fresh folder and remove "
                               "this one")
    return found


def _date(data: dict) -> str:
    return data.get("provenance", {}).get("date", "")


def _timed_attention(man: dict) -> bool:
    return any("plain" in v for e in man["results"] for v in e["variants"].values())


def _timed_gemm(man: dict) -> bool:
    results = man.get("results") or []
    return any("median_us" in v.get("plain", {}) for e in results for v in e.get("variants", {}).values())


def _there(path: Path) -> bool:
    return os.path.lexists(path)  # whatever it is: reading it refuses a FIFO or an outside link by name


def _attention(base: Path, names: list[str]) -> dict:
    manifests, timed, sanitizer = [], [], []
    for n in names:
        if _there(base / n / "manifest.json"):
            man = read_attention(base / n).manifest
            manifests.append((_date(man), n))
            if _timed_attention(man):
                timed.append(((_date(man), n), man))
        if _there(base / n / "sanitizer.json"):
            s = read_sanitizer(base / n).manifest
            sanitizer.append(((_date(s), n), s))
    timed.sort(key=lambda x: x[0])
    sanitizer.sort(key=lambda x: x[0])
    kernels, clean = {}, {}
    for (_, n), man in timed:
        for e in man["results"]:
            for v in (v for v, rec in e["variants"].items() if "plain" in rec):
                kernels[f"{v}:causal" if e["causal"] else v] = n
    for (_, n), s in sanitizer:
        for key in s["summary"]["clean"]:
            clean[key.split("/")[1]] = n
    return dict(manifests=[n for _, n in sorted(manifests)], timed=[n for (_, n), _ in timed],
                sanitizer=[n for (_, n), _ in sanitizer],
                current=dict(timed=timed[-1][0][1] if timed else None, kernels=dict(sorted(kernels.items())),
                             sanitizer=dict(sorted(clean.items()))))


def _gemm(base: Path, names: list[str]) -> dict:
    timed, kernels = [], {}
    for n in names:
        if _there(base / n / "manifest.json"):
            man = read_gemm(base / n).manifest
            if _timed_gemm(man):
                timed.append(n)
                for e in man["results"]:
                    for v in (v for v, rec in e.get("variants", {}).items() if "median_us" in rec.get("plain", {})):
                        kernels.setdefault(v, {})[e["shape"]] = n
    return dict(timed=timed, current=dict(timed=timed[-1] if timed else None,
                                          kernels={v: kernels[v] for v in sorted(kernels)}))


def _every(root: Path, kind: str, names: list[str]) -> dict:
    kernels: dict = {}
    for n in names:
        for k in capture_record(kind, Path(root) / kind / n)["kernels"]:
            key = k.get("kernel") or k["variant"]
            if n not in kernels.setdefault(key, []):
                kernels[key].append(n)
    return dict(current=dict(kernels=dict(sorted(kernels.items()))))


def build_kind(root: Path, kind: str, details: bool = True) -> dict:
    """One kind's entry of the index (module docstring), from the folders under root/kind. details=False leaves
    out the kernels of kinds whose every capture is read (readers never ask for them; it reads less)."""
    found = folders(root, kind)
    names = [f.name for f in found]
    caps = [dict(name=f.name, date=_date(read_original(f)), original=original(f)) for f in found]
    out = dict(rule=RULES.get(kind, EVERY), captures=caps)
    if kind == "attention":
        out.update(_attention(Path(root) / kind, names))
    elif kind == "gemm":
        out.update(_gemm(Path(root) / kind, names))
    elif details:
        out.update(_every(root, kind, names))
    return out


def kinds(root: Path) -> list[str]:
    return sorted(p.name for p in Path(root).iterdir() if p.is_dir())


def build_index(root: Path = CAPTURES) -> dict:
    """The whole index of a captures root (module docstring)."""
    removed = []
    for kind in kinds(root):
        for folder in folders(root, kind):
            for p in capture_record(kind, folder).get("packed", []):
                o = p["original"]
                packed = PurePosixPath(o["path"]).parent / PurePosixPath(p["file"]).name
                removed.append(dict(path=o["path"], blob=o["blob"], size=o["size"], commit=o["commit"],
                                    packed=packed.as_posix()))
    return dict(schema=SCHEMA, kinds={k: build_kind(root, k) for k in kinds(root)},
                removed=sorted(removed, key=lambda r: r["path"]))


def read_index(path: Path = INDEX) -> dict:
    """index.json as written; CaptureError when it is missing or unreadable."""
    data = read_json(path)
    if data.get("schema") != SCHEMA:
        raise CaptureError(f"the index is schema {SCHEMA}", f"{path}: {data.get('schema')!r}",
                           "run python -m lapis.captures.index --write")
    return data


def generated(root: Path = CAPTURES, index: Path = INDEX, checksums: Path = CAPTURE_CHECKSUMS) -> dict[Path, str]:
    """path -> text of every file the generator writes: each capture folder's capture.json, the index and the
    checksums of the capture.json files (module docstring)."""
    with unchecked():
        out = {f / NAME: dumps(capture_record(kind, f)) for kind in kinds(root) for f in folders(root, kind)}
        out[Path(index)] = dumps(build_index(root))
    sums = {p.parent.relative_to(root).as_posix(): hashlib.sha256(text.encode()).hexdigest()
            for p, text in out.items() if p.name == NAME}
    out[Path(checksums)] = dumps(dict(schema=CHECKSUMS_SCHEMA, captures=dict(sorted(sums.items()))))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.captures.index", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write every capture.json and index.json")
    a = ap.parse_args(argv)
    stale = []
    for path, text in generated().items():
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
            if a.write:  # a new file renamed over the old: a kill leaves one or the other, never half a file
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_text(text)
                os.replace(tmp, path)
    for path in stale:
        print(f"{'wrote' if a.write else 'differs'}: {path}")
    return 0 if a.write or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
