"""Reading capture files without trusting them: the limits, the file checks, JSON, .npz and manifest schemas.

Every reader of a capture (lapis.captures.readers and the modules it serves) goes through here, so a damaged or
hostile capture folder gives a CaptureError naming the file (and the field or array) instead of blocking,
exhausting memory or raising a raw zlib, zipfile, numpy or JSON error.

LIMITS (bytes unless stated), checked before anything is allocated:

    json_bytes              16 MiB   a JSON file of a capture (manifest.json, results.json, sanitizer.json, ...)
    archive_bytes           64 MiB   an .npz or packed timelines file on disk
    array_bytes             64 MiB   one array: the shape an .npy header or packed header declares, times
                                     its item size; an .npz member's declared inflated size
    archive_inflated_bytes 256 MiB   every array read from one archive, inflated, together
    archive_members         65536    arrays (members) in one archive

A gzip-compressed file (`read_gzip`, e.g. a Proton trace stored as <name>.chrome_trace.gz) is held to its
kind's limit twice: the compressed bytes on disk, and the inflated bytes, counted while inflating, so a deflate
bomb stops at the limit plus one byte.

The shipped captures stay far below them (the largest JSON file 0.3 MB, archive 2.9 MB, array 16 MB, archive
inflated 76 MB, 350 members).

File checks (`regular`): a capture file must be a regular file, checked by name before it is opened (a FIFO,
device, socket or folder is refused), and a symbolic link (the file, or a folder on its way) must resolve
inside the capture folder it belongs to. Files are opened non-blocking and checked again on the open file.

Integrity (`verify`, run by `read_bytes` on every file it reads): a capture folder holding capture.json
(lapis.captures.manifest) has each of its files checked against the size and SHA-256 it lists before the bytes are
used; a file it does not list is refused. A shipped capture (under lapis.data.CAPTURES) must hold capture.json,
and that file must match the SHA-256 lapis/data/capture_checksums.json records for it, so a manifest cut down
together with its capture.json is refused too. Both checksum files are written by `python -m
lapis.captures.index --write`. A file is hashed once per process: the result is kept by real path, mtime and
size. A folder outside the shipped root without a listing (a capture.json of schema lapis.capture/1 with "files"
and "original": a fresh capture, not yet indexed, or one whose capture.json is the device's own, as a Proton
kernel's is) is read unchecked.

Schemas (`check`): a small description of the fields a reader uses: a dict of required keys ("key?" marks an
optional one; other keys are allowed), [item] for a list, Map(value) for a dict of any string keys, One(...)
for a fixed set of values, and the leaf types INT, NUM, POS, BOOL, STR, DICT, ANY.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
import zipfile
import zlib
from collections.abc import Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from lapis.data import CAPTURE_CHECKSUMS, CAPTURES
from lapis.errors import CaptureError

MiB = 1 << 20
LIMITS = {
    "json_bytes": 16 * MiB,
    "archive_bytes": 64 * MiB,
    "array_bytes": 64 * MiB,
    "archive_inflated_bytes": 256 * MiB,
    "archive_members": 65536,
}
FIX = "restore the capture from git (captures are never edited by hand)"
_CHUNK = 1 * MiB
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def _what(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def regular(path: str | Path, folder: str | Path | None = None) -> Path:
    """`path`, after checking by name that it is a regular file whose real path lies inside `folder` (default:
    its own folder). CaptureError naming it when it is missing, a FIFO, device, socket or folder, or a link
    that leads outside `folder`."""
    path = Path(path)
    base = Path(folder) if folder is not None else path.parent
    try:
        st = os.stat(path)  # follows links: the file that would be read
        real, inside = path.resolve(), base.resolve()
    except OSError as exc:
        raise CaptureError("a capture file the reader needs is there", f"{path} ({exc.strerror})", FIX) from None
    if real != inside and inside not in real.parents:
        raise CaptureError("a link in a capture points inside its capture folder", f"{path} -> {real} (outside "
                           f"{inside})", "replace the link by the file itself, or " + FIX)
    if not stat.S_ISREG(st.st_mode):
        raise CaptureError("a capture file is a regular file", f"{path} is {_what(st.st_mode)}", FIX)
    return path


def read_bytes(path: str | Path, folder: str | Path | None = None, limit: int = LIMITS["archive_bytes"]) -> bytes:
    """The bytes of a regular capture file (`regular`) of at most `limit` bytes; CaptureError naming it
    otherwise. Never blocks: the file is opened non-blocking and checked again once open."""
    path = regular(path, folder)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise CaptureError("a capture file can be opened", f"{path} ({exc.strerror})", FIX) from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CaptureError("a capture file is a regular file", f"{path} is {_what(st.st_mode)}", FIX)
        if st.st_size > limit:
            raise CaptureError(f"a capture file of this kind holds at most {limit} bytes",
                               f"{path}: {st.st_size} bytes", FIX)
        parts, size = [], 0
        while size <= limit:
            try:
                chunk = f.read(min(_CHUNK, limit + 1 - size))
            except OSError as exc:
                raise CaptureError("a capture file can be read", f"{path} ({exc.strerror})", FIX) from None
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    if size > limit:
        raise CaptureError(f"a capture file of this kind holds at most {limit} bytes",
                           f"{path}: more than {limit} bytes", FIX)
    data = b"".join(parts)
    if not _UNCHECKED.get():
        verify(path, folder, st, data)
    return data


def read_gzip(path: str | Path, folder: str | Path | None = None, limit: int = LIMITS["json_bytes"]) -> bytes:
    """The inflated bytes of a gzip-compressed capture file (one gzip member, RFC 1952): the file as `read_bytes`
    reads it (at most `limit` bytes on disk) and at most `limit` bytes inflated, counted while inflating.
    CaptureError naming the file when it is not gzip, is truncated or damaged (CRC), holds more than one member,
    or inflates past `limit`."""
    data = read_bytes(path, folder, limit)
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # 16 +: a gzip header and trailer, not raw zlib
    try:
        out = inflate.decompress(data, limit + 1)  # max_length: stops allocating one byte past the limit
    except zlib.error as exc:
        raise CaptureError("a .gz capture file is gzip-compressed (RFC 1952) and undamaged",
                           f"{path}: {exc}", FIX) from None
    if len(out) > limit:
        raise CaptureError(f"a capture file of this kind inflates to at most {limit} bytes",
                           f"{path}: {len(data)} bytes inflate to more than {limit}", FIX)
    if not inflate.eof:
        raise CaptureError("a .gz capture file is whole (it ends with its gzip trailer)",
                           f"{path}: the compressed stream stops early, after {len(out)} bytes inflated", FIX)
    if inflate.unused_data:
        raise CaptureError("a .gz capture file holds one gzip member",
                           f"{path}: {len(inflate.unused_data)} bytes follow the first member", FIX)
    return out


def read_json(path: str | Path, folder: str | Path | None = None, schema=None, kind: str = "capture") -> dict:
    """A capture's JSON object (at most LIMITS["json_bytes"]), checked against `schema` when given; CaptureError
    naming the file (and the field) when it is missing, not a regular file, too large, not JSON, not an object,
    or breaks the schema."""
    data = read_bytes(path, folder, LIMITS["json_bytes"])
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CaptureError("a capture's JSON file is readable", f"{path}: {exc.__class__.__name__}: {exc}",
                           FIX) from None
    if not isinstance(value, dict):
        raise CaptureError("a capture's JSON file holds an object", f"{path}: {type(value).__name__}", FIX)
    if schema is not None:
        check(value, schema, path, kind)
    return value


# ---------------------------------------------------------------- schemas

class Map:
    """A dict of any string keys whose values all follow `value`."""

    def __init__(self, value):
        self.value = value


class One:
    """One of a fixed set of values."""

    def __init__(self, *values):
        self.values = values


class Leaf:
    """A leaf type: `test(value)` says whether it fits; `what` names it in errors."""

    def __init__(self, what: str, test):
        self.what, self.test = what, test


def _finite(v) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # a JSON integer past a float's range (10**400)
        return False


INT = Leaf("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
NUM = Leaf("a finite number", _finite)
POS = Leaf("a positive finite number", lambda v: _finite(v) and v > 0)
BOOL = Leaf("true or false", lambda v: isinstance(v, bool))
STR = Leaf("a string", lambda v: isinstance(v, str))
DICT = Leaf("an object", lambda v: isinstance(v, dict))
ANY = Leaf("anything", lambda v: True)
# what every capture's provenance holds (lapis.captures.provenance; the validators print these)
PROVENANCE = {"gpu": STR, "date": STR, "commit": STR, "dirty": BOOL, "command": STR, "source_blobs": Map(STR)}


def a_capture(kind: str) -> str:
    """'a tma capture', 'an attention capture'; 'a capture' for the kind "capture" (a check of any kind's file)."""
    if kind == "capture":
        return "a capture"
    return ("an " if kind[:1] in "aeiou" else "a ") + kind + " capture"


def _expected(schema) -> str:
    if isinstance(schema, dict):
        return "an object"
    if isinstance(schema, list):
        return "a list"
    if isinstance(schema, Map):
        return "an object"
    if isinstance(schema, One):
        return "one of " + ", ".join(map(repr, schema.values))
    return schema.what


def _fail(value, schema, file, kind: str, where: str):
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise CaptureError(f"{a_capture(kind)}'s field {where or '(top level)'} is {_expected(schema)}",
                       f"{file}: {where or '(top level)'} = {shown} ({type(value).__name__})", FIX)


def check(value, schema, file, kind: str = "capture", where: str = "") -> None:
    """CaptureError naming `file` and the field (e.g. configs[3].result.status) where `value` breaks `schema`
    (module docstring): a missing required key, a wrong type or a value outside One(...)."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            _fail(value, schema, file, kind, where)
        for key, sub in schema.items():
            name = key.rstrip("?")
            at = f"{where}.{name}" if where else name
            if name in value:
                check(value[name], sub, file, kind, at)
            elif not key.endswith("?"):
                raise CaptureError(f"{a_capture(kind)} holds the field {at}", f"{file}: {at} is missing", FIX)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            _fail(value, schema, file, kind, where)
        for i, item in enumerate(value):
            check(item, schema[0], file, kind, f"{where}[{i}]")
    elif isinstance(schema, Map):
        if not isinstance(value, dict):
            _fail(value, schema, file, kind, where)
        for key, item in value.items():
            check(item, schema.value, file, kind, f"{where}.{key}" if where else key)
    elif isinstance(schema, One):
        if not any(value == v and type(value) is type(v) for v in schema.values):
            _fail(value, schema, file, kind, where)
    elif not schema.test(value):
        _fail(value, schema, file, kind, where)


def comparable(file, kind: str, total: int, not_compared: dict) -> None:
    """CaptureError naming `file` when none of its `total` entries can be compared (not_compared: reason ->
    count of the entries it left out, e.g. {"timeout": 3})."""
    left_out = sum(not_compared.values())
    if total - left_out <= 0:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(not_compared.items()) if n) or "it holds none"
        raise CaptureError(f"{a_capture(kind)} holds at least one entry lapis can compare",
                           f"{file}: {total} entries, none comparable ({why})",
                           "capture it again (lapis capture ...), or leave the folder out of --captures")


# ---------------------------------------------------------------- integrity

LISTING = "capture.json"  # lapis.captures.manifest.NAME (that module reads through this one)
LISTING_SCHEMA = "lapis.capture/1"  # lapis.captures.manifest.SCHEMA
FIX_CHANGED = ("restore the capture from git (git checkout -- <its folder>); if it was re-captured on purpose, "
               "run python -m lapis.captures.index --write")
_UNCHECKED: ContextVar[bool] = ContextVar("lapis_capture_unchecked", default=False)
_hashed: dict = {}    # (real path, mtime_ns, size) -> SHA-256 hex of the file's bytes
_listings: dict = {}  # (capture.json real path, mtime_ns, size) -> {path: (size, sha256)}


@contextmanager
def unchecked():
    """Read capture files without checking them against capture.json: only for the generator that rewrites
    capture.json from the files themselves (lapis.captures.index) and the packer checking what it just wrote."""
    token = _UNCHECKED.set(True)
    try:
        yield
    finally:
        _UNCHECKED.reset(token)


def _sha256(real: Path, st: os.stat_result, data: bytes) -> str:
    key = (str(real), st.st_mtime_ns, st.st_size)
    if key not in _hashed:
        _hashed[key] = hashlib.sha256(data).hexdigest()
    return _hashed[key]


def _changed(what: str, file, expected: str, found: str) -> CaptureError:
    return CaptureError(f"a capture file matches what {what} records for it",
                        f"{file}: expected {expected}, found {found}", FIX_CHANGED)


def _capture_folder(real: Path, path: Path, folder) -> Path | None:
    """The capture folder a file belongs to: <kind>/<name> under the shipped root, else `folder` (default: the
    file's folder, or its parent, whichever first holds a lapis capture.json), None for a shipped file outside
    any capture folder."""
    shipped = CAPTURES.resolve()
    if shipped in real.parents:
        rel = real.relative_to(shipped).parts
        return shipped / rel[0] / rel[1] if len(rel) >= 3 else None
    if folder is not None:
        return Path(folder).resolve()
    parent = path.parent.resolve()  # or its parent, where that holds the listing (gemm's timelines/, Proton's kernels)
    return next((d for d in (parent, parent.parent) if _listing(d) is not None), parent)


def _shipped_sha(cap: Path) -> str:
    """The SHA-256 capture_checksums.json records for a shipped capture's capture.json."""
    st = os.stat(CAPTURE_CHECKSUMS) if CAPTURE_CHECKSUMS.is_file() else None
    key = (str(CAPTURE_CHECKSUMS), st and st.st_mtime_ns, st and st.st_size)
    if key not in _listings:
        with unchecked():
            sums = read_json(CAPTURE_CHECKSUMS, schema={"captures": Map(STR)}, kind="checksums")["captures"]
        _listings[key] = sums
    name = cap.relative_to(CAPTURES.resolve()).as_posix()
    if name not in _listings[key]:
        raise CaptureError("capture_checksums.json lists every shipped capture", f"{name} is not in "
                           f"{CAPTURE_CHECKSUMS}", "run python -m lapis.captures.index --write")
    return _listings[key][name]


LISTED = {"files": [{"path": STR, "size": INT, "sha256": STR}]}


def _listing(cap: Path) -> dict | None:
    """{path: (size, sha256)} from a capture folder's capture.json, None where it has none (not shipped)."""
    file = cap / LISTING
    shipped = CAPTURES.resolve() in cap.parents
    if not os.path.lexists(file) and not shipped:
        return None
    try:
        st = os.stat(file)
        key = (str(file), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None  # read_bytes names what is wrong with it
    if key not in _listings:
        with unchecked():
            data = read_bytes(file, cap, LIMITS["json_bytes"])
        if shipped:
            expected, found = _shipped_sha(cap), _sha256(file, st, data)
            if found != expected:
                raise _changed(str(CAPTURE_CHECKSUMS), file, f"sha256 {expected}", f"sha256 {found}")
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise CaptureError("a capture's JSON file is readable", f"{file}: {exc.__class__.__name__}: {exc}",
                               FIX_CHANGED) from None
        if not shipped and not (isinstance(value, dict) and value.get("schema") == LISTING_SCHEMA
                                and "files" in value and "original" in value):
            _listings[key] = None  # a device-written capture.json of the same name (a Proton kernel's): no listing
            return None
        check(value, LISTED, file, "capture")
        _listings[key] = {f["path"]: (f["size"], f["sha256"]) for f in value["files"]}
    return _listings[key]


def verify(path: str | Path, folder, st: os.stat_result, data: bytes) -> None:
    """CaptureError naming the file, what capture.json (or capture_checksums.json) expects and what it found,
    when `data` (the bytes read from `path`, whose fstat is `st`) is not what its capture folder's capture.json
    lists (module docstring, Integrity)."""
    path = Path(path)
    real = path.resolve()
    cap = _capture_folder(real, path, folder)
    if cap is None:
        return
    if real == cap / LISTING:  # checked against capture_checksums.json when shipped, by reading its listing
        _listing(cap)
        return
    listing = _listing(cap)
    if listing is None:
        return
    rel = real.relative_to(cap).as_posix() if cap in real.parents else path.name
    if rel not in listing:
        raise CaptureError(f"{LISTING} lists every file of its capture", f"{path} is not in {cap / LISTING}",
                           "remove the file, or " + FIX_CHANGED)
    size, sha = listing[rel]
    if len(data) != size:
        raise _changed(LISTING, path, f"{size} bytes", f"{len(data)} bytes")
    found = _sha256(real, st, data)
    if found != sha:
        raise _changed(LISTING, path, f"sha256 {sha}", f"sha256 {found}")


# ---------------------------------------------------------------- .npz archives

def _npz_error(path, member: str, what: str) -> CaptureError:
    where = f"{path}, array {member!r}" if member else str(path)
    return CaptureError("unreadable capture", f"{where}: {what} (an .npz capture file holds numpy arrays within "
                        "lapis.captures.safe.LIMITS)", FIX)


class Npz(Mapping):
    """The arrays of one .npz capture file (name -> np.ndarray, `files` lists the names), read within LIMITS: the
    file is read whole (archive_bytes), every member's declared inflated size is checked on opening
    (array_bytes, and archive_inflated_bytes together), and each array's .npy header is read before its data, so
    a declared shape larger than array_bytes is refused before anything is allocated. Inflation stops at the
    member's declared size (zipfile) and the CRC-32 is checked. Object arrays are refused. A context manager,
    as numpy's NpzFile is. Every failure is a CaptureError naming the file and the array."""

    def __init__(self, path: str | Path, folder: str | Path | None = None):
        self.path = Path(path)
        data = read_bytes(self.path, folder, LIMITS["archive_bytes"])
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, NotImplementedError,
                RuntimeError) as exc:
            raise _npz_error(self.path, "", f"not a readable zip archive ({exc.__class__.__name__}: {exc})") from None
        if len(infos) > LIMITS["archive_members"]:
            raise _npz_error(self.path, "", f"{len(infos)} members, above the limit of {LIMITS['archive_members']}")
        self._infos, total = {}, 0
        for info in infos:
            name = info.filename.removesuffix(".npy")
            if info.file_size > LIMITS["array_bytes"]:
                raise _npz_error(self.path, name, f"declares {info.file_size} bytes inflated, above the limit of "
                                 f"{LIMITS['array_bytes']} bytes an array")
            total += info.file_size
            self._infos[name] = info
        if total > LIMITS["archive_inflated_bytes"]:
            raise _npz_error(self.path, "", f"declares {total} bytes inflated, above the limit of "
                             f"{LIMITS['archive_inflated_bytes']} bytes an archive")
        self.files = list(self._infos)
        self._used = 0

    def __contains__(self, name) -> bool:
        return name in self._infos

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._infos:
            raise _npz_error(self.path, name, "no such array in the file")
        info = self._infos[name]
        try:
            with self._zip.open(info) as f:
                return self._array(f, info, name)
        except CaptureError:
            raise
        except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError, RuntimeError,
                TypeError, SyntaxError) as exc:  # SyntaxError: a header whose dict does not parse
            raise _npz_error(self.path, name, f"{exc.__class__.__name__}: {exc}") from None

    def _array(self, f, info: zipfile.ZipInfo, name: str) -> np.ndarray:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(f)
        else:
            raise _npz_error(self.path, name, f".npy format version {version}; lapis reads 1.0 and 2.0")
        if dtype.hasobject:
            raise _npz_error(self.path, name, f"dtype {dtype} holds Python objects")
        if not all(isinstance(n, int) and n >= 0 for n in shape):
            raise _npz_error(self.path, name, f"shape {shape!r}")
        count = math.prod(shape)
        if count and not dtype.itemsize:
            raise _npz_error(self.path, name, f"dtype {dtype} has items of 0 bytes")
        nbytes = count * dtype.itemsize
        if nbytes > LIMITS["array_bytes"]:
            raise _npz_error(self.path, name, f"declares shape {shape} of {dtype} = {nbytes} bytes, above the limit "
                             f"of {LIMITS['array_bytes']} bytes an array")
        if self._used + nbytes > LIMITS["archive_inflated_bytes"]:
            raise _npz_error(self.path, name, f"reading it would inflate more than "
                             f"{LIMITS['archive_inflated_bytes']} bytes from the archive")
        payload = f.read(nbytes)
        if len(payload) != nbytes:
            raise _npz_error(self.path, name, f"holds {len(payload)} bytes of data, its header declares {nbytes}")
        if f.read(1):  # reading to the end also checks the member's CRC-32
            raise _npz_error(self.path, name, "holds more bytes than its header declares")
        self._used += nbytes
        if not count:
            return np.zeros(shape, dtype, order="F" if fortran else "C")
        return np.frombuffer(bytearray(payload), dtype).reshape(shape, order="F" if fortran else "C")

    def close(self) -> None:
        self._zip.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
