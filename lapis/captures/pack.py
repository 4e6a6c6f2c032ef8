"""Re-encode timelines .npz files into the packed format (lapis.captures.codec), losslessly.

    python -m lapis.captures.pack [FILE.npz ...]

Default: every timelines .npz under the shipped captures (lapis.captures.store.timeline_files). For each, writes
<stem>.packed beside it, whose header's source names the original: {"path": its path in the git repository,
"blob": its git blob id, "size": bytes, "commit": the commit that put that blob at that path (HEAD when git
cannot tell)}. It then decodes the packed file and checks every array against the original's (dtype, shape,
memory order, bytes). Needs a git checkout whose HEAD holds each original unchanged (commit it first); the
original stays: `git rm` it once the packed file is committed, and the index (lapis.captures.index) lists it
under "removed".
Errors: CaptureError naming the file.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

from lapis.captures.codec import decode_all, encode
from lapis.captures.safe import Npz, read_bytes, unchecked
from lapis.captures.store import SHIPPED, packed_path, timeline_files
from lapis.errors import CaptureError


def git_blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes (SHA-1 of "blob <size>\\0" + bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(cwd: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def source(npz: Path, data: bytes) -> dict:
    """The original's record: repository path, blob id, size, and a commit that holds it there."""
    top = _git(npz.parent, "rev-parse", "--show-toplevel")
    if not top:
        raise CaptureError("packing needs the git checkout that holds the original", str(npz),
                           "run it inside the repository")
    path, blob = npz.resolve().relative_to(Path(top).resolve()).as_posix(), git_blob_id(data)
    if _git(npz.parent, "rev-parse", f"HEAD:{path}") != blob:
        raise CaptureError("the original is committed unchanged at HEAD", f"{path} (blob {blob})",
                           "commit the file as captured, then pack it")
    # the commit that put this blob at this path: older than any branch that packs it, so a rebase keeps it
    commit = _git(top, "log", "--format=%H", "--reverse", f"--find-object={blob}", "HEAD", "--", path).split("\n")[0]
    if _git(top, "rev-parse", f"{commit}:{path}") != blob:
        commit = _git(top, "rev-parse", "HEAD")
    return dict(path=path, blob=blob, size=len(data), commit=commit)


def pack_file(npz: Path) -> Path:
    """Write npz's packed form beside it and check it decodes to the same arrays; the packed file's path."""
    npz = Path(npz)
    data = read_bytes(npz)
    with Npz(npz) as z:
        arrays = {k: z[k] for k in z.files}
    out = packed_path(npz)
    out.write_bytes(encode(arrays, source(npz, data)))
    with unchecked():  # the capture's capture.json lists the packed file only once the index is rewritten
        back = decode_all(out)
    same = list(back) == list(arrays) and all(
        b.dtype == a.dtype and b.shape == a.shape and b.flags.f_contiguous == a.flags.f_contiguous
        and b.tobytes(order="A") == a.tobytes(order="A") for a, b in zip(arrays.values(), back.values()))
    if not same:
        out.unlink()
        raise CaptureError("a packed file decodes to the original's arrays", str(npz), "report this codec bug")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.captures.pack", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="timelines .npz files (default: every one under the shipped captures)")
    a = ap.parse_args(argv)
    files = [Path(f) for f in a.files] or [f for f in timeline_files(SHIPPED) if f.is_file()]
    for f in files:
        out = pack_file(f)
        print(f"{f}: {f.stat().st_size} B -> {out.name}: {out.stat().st_size} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
