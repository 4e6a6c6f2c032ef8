"""The packed array format: a lossless, compact re-encoding of an .npz of numpy arrays (the captures' timelines).

A packed file holds named arrays; decoding one gives exactly the array np.load gave from the .npz: the same
dtype, shape, memory order and bytes. Layout, all integers little-endian:

    MAGIC (8 bytes, b"LAPISPK1") | header length n (uint32) | CRC-32 of the header (uint32) | header (n bytes of
    UTF-8 JSON) | column blocks

    header = {"format": "lapis.packed/1", "source": {...} (what the arrays were read from, free-form),
              "blocks_crc32": CRC-32 of the column blocks,
              "arrays": [{"name", "dtype" (numpy descr, as in an .npy header), "shape", "fortran_order",
                          "sha256" (of the array's bytes in memory order), "columns": [column, ...]}]}
    column = {"field": a field name of a structured dtype, or null for the whole item,
              "delta": bool, "offset", "length" (bytes, from the start of the column blocks)}

An array is split into columns: one per field where the dtype is structured with plain fields that tile the
item exactly, else one column of whole items. A column's values, in memory order, are optionally delta-encoded
(item i becomes item i - item i-1, read as unsigned integers of the item's size, modulo 2**bits; kept only
where it compresses smaller), byte-shuffled (every item's byte 0, then every byte 1, ...) and compressed with
zlib level 9. The two CRC-32s (checked on opening) and each array's SHA-256 (checked on every decode) catch a
damaged file.

Reading stays within lapis.captures.safe.LIMITS: the file is a regular file of at most archive_bytes (checked by
name before it is opened), its header at most json_bytes and archive_members arrays, an array's declared shape
at most array_bytes (checked before anything is allocated), a column inflates to at most its declared size, and
the arrays decoded from one file at most archive_inflated_bytes together.

Errors: CaptureError naming the file, for anything that cannot be decoded exactly (never a raw zlib, JSON or
numpy error); ValueError from `encode` for an array it cannot store (object dtype).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.lib.format import descr_to_dtype, dtype_to_descr

from lapis.captures.safe import LIMITS, read_bytes
from lapis.errors import CaptureError

MAGIC = b"LAPISPK1"
FORMAT = "lapis.packed/1"
_PREFIX = struct.Struct("<II")  # header length, header CRC-32
LEVEL = 9


def array_sha256(a: np.ndarray) -> str:
    """SHA-256 (hex) of an array's bytes in memory order (the payload of its .npy)."""
    return hashlib.sha256(a.tobytes(order="A")).hexdigest()


def _fields(dtype: np.dtype) -> list[str] | None:
    """The field names to store as columns (plain fields that tile the item exactly), or None for whole items."""
    if not dtype.names:
        return None
    spans = sorted((off, sub.itemsize) for sub, off, *_ in dtype.fields.values())
    plain = all(sub.names is None and sub.subdtype is None for sub, *_ in dtype.fields.values())
    tiled = all(off == sum(size for _, size in spans[:i]) for i, (off, _) in enumerate(spans)) \
        and sum(size for _, size in spans) == dtype.itemsize
    return list(dtype.names) if plain and tiled else None


def _shuffle(raw: bytes, size: int) -> bytes:
    if size <= 1 or not raw:
        return raw
    return np.frombuffer(raw, np.uint8).reshape(-1, size).T.tobytes()


def _unshuffle(raw: bytes, size: int) -> bytes:
    if size <= 1 or not raw:
        return raw
    return np.frombuffer(raw, np.uint8).reshape(size, -1).T.tobytes()


def _delta(raw: bytes, size: int, inverse: bool = False) -> bytes:
    u = np.frombuffer(raw, f"<u{size}")
    if inverse:
        return np.cumsum(u, dtype=u.dtype).tobytes()  # wraps modulo 2**bits, as the encoding did
    out = u.copy()
    out[1:] -= u[:-1]
    return out.tobytes()


def _column(raw: bytes, size: int) -> tuple[bytes, bool]:
    """A column's compressed bytes (items of `size` bytes), and whether they are delta-encoded."""
    best = (zlib.compress(_shuffle(raw, size), LEVEL), False)
    if size in (2, 4, 8) and len(raw) > size:
        delta = zlib.compress(_shuffle(_delta(raw, size), size), LEVEL)
        best = min(best, (delta, True), key=lambda x: len(x[0]))
    return best


def _spans(dtype: np.dtype) -> list[tuple[str | None, int, int]]:
    """(field or None, byte offset in the item, size) of each column."""
    fields = _fields(dtype)
    if fields is None:
        return [(None, 0, dtype.itemsize)]
    return [(f, dtype.fields[f][1], dtype.fields[f][0].itemsize) for f in fields]


def encode(arrays: Mapping[str, np.ndarray], source: dict | None = None) -> bytes:
    """The packed bytes of `arrays` (name -> array, in order). ValueError for an object array."""
    entries, blocks, offset = [], [], 0
    for name, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.hasobject:
            raise ValueError(f"{name}: object arrays cannot be packed")
        fortran = bool(a.flags.f_contiguous and not a.flags.c_contiguous)
        items = np.frombuffer(a.tobytes(order="F" if fortran else "C"), np.uint8).reshape(a.size, a.dtype.itemsize)
        columns = []
        for field, start, size in _spans(a.dtype):
            data, delta = _column(items[:, start:start + size].tobytes(), size)
            columns.append(dict(field=field, delta=delta, offset=offset, length=len(data)))
            blocks.append(data)
            offset += len(data)
        entries.append(dict(name=name, dtype=dtype_to_descr(a.dtype), shape=list(a.shape), fortran_order=fortran,
                            sha256=array_sha256(a), columns=columns))
    body = b"".join(blocks)
    header = json.dumps(dict(format=FORMAT, source=source or {}, blocks_crc32=zlib.crc32(body), arrays=entries),
                        separators=(",", ":")).encode()
    return MAGIC + _PREFIX.pack(len(header), zlib.crc32(header)) + header + body


def _descr(d):
    """The descr as np.lib.format wrote it: JSON turns its tuples into lists."""
    return [tuple(_descr(x) for x in f) if isinstance(f, list) else f for f in d] if isinstance(d, list) else d


class Packed(Mapping):
    """The arrays of one packed file, decoded on access (name -> np.ndarray); `files` lists the names, as
    numpy's NpzFile does. A context manager, like NpzFile. `folder`: the capture folder the file must lie in
    (lapis.captures.safe.regular; default its own folder). Reads within the module docstring's limits; every
    failure is a CaptureError naming the file (and the array)."""

    def __init__(self, path: str | Path, folder: str | Path | None = None):
        self.path = Path(path)
        self._data = read_bytes(self.path, folder, LIMITS["archive_bytes"])
        self._used = 0
        head = len(MAGIC) + _PREFIX.size
        if len(self._data) < head or self._data[:len(MAGIC)] != MAGIC:
            raise self._error("does not start with the packed format's magic bytes")
        n, crc = _PREFIX.unpack_from(self._data, len(MAGIC))
        if n > LIMITS["json_bytes"]:
            raise self._error(f"declares a header of {n} bytes, above the limit of {LIMITS['json_bytes']}")
        header = self._data[head:head + n]
        if len(header) != n or zlib.crc32(header) != crc:
            raise self._error("has a damaged header (CRC-32 mismatch or truncated)")
        try:
            meta = json.loads(header)
            self.source = meta["source"]
            self._arrays = {e["name"]: e for e in meta["arrays"]}
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise self._error(f"has an unreadable header ({exc.__class__.__name__}: {exc})") from None
        if meta.get("format") != FORMAT:
            raise self._error(f"is format {meta.get('format')!r}, not {FORMAT}")
        self._blocks = head + n
        if zlib.crc32(self._data[self._blocks:]) != meta.get("blocks_crc32"):
            raise self._error("has damaged column blocks (CRC-32 mismatch or truncated)")
        if len(self._arrays) > LIMITS["archive_members"]:
            raise self._error(f"holds {len(self._arrays)} arrays, above the limit of {LIMITS['archive_members']}")
        self.files = list(self._arrays)

    def _error(self, what: str) -> CaptureError:
        return CaptureError("a packed capture file decodes exactly to its recorded arrays", f"{self.path} {what}",
                            "restore the file from git (captures are never edited by hand)")

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            raise KeyError(f"{name} is not in {self.path}")
        e = self._arrays[name]
        try:
            a = self._decode(e)
        except CaptureError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, zlib.error, SyntaxError) as exc:
            raise self._error(f"cannot decode array {name!r} ({exc.__class__.__name__}: {exc})") from None
        if array_sha256(a) != e["sha256"]:
            raise self._error(f"decodes array {name!r} to bytes whose SHA-256 differs from the recorded one")
        return a

    def _decode(self, e: dict) -> np.ndarray:
        dtype, shape = descr_to_dtype(_descr(e["dtype"])), tuple(e["shape"])
        if dtype.hasobject or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise ValueError(f"dtype {dtype} or shape {shape!r} is not an array's")
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes > LIMITS["array_bytes"] or self._used + nbytes > LIMITS["archive_inflated_bytes"]:
            raise self._error(f"declares array {e['name']!r} of shape {shape} of {dtype} = {nbytes} bytes, above "
                              f"the limit of {LIMITS['array_bytes']} bytes an array (or "
                              f"{LIMITS['archive_inflated_bytes']} a file)")
        if count and not dtype.itemsize:
            raise ValueError(f"dtype {dtype} has items of 0 bytes")
        self._used += nbytes
        items = np.zeros((count, dtype.itemsize), np.uint8)
        spans = {f: (start, size) for f, start, size in _spans(dtype)}
        if [c["field"] for c in e["columns"]] != list(spans):
            raise ValueError("the columns are not the dtype's")
        for c in e["columns"]:
            (start, size), at = spans[c["field"]], self._blocks + c["offset"]
            if c["offset"] < 0 or c["length"] < 0 or at + c["length"] > len(self._data):
                raise ValueError("a column runs past the end of the file")
            inflate = zlib.decompressobj()
            raw = inflate.decompress(self._data[at:at + c["length"]], size * count + 1)  # never past its size
            if len(raw) > size * count:
                raise ValueError(f"a column inflates past the {size * count} bytes its array declares")
            if len(raw) != size * count or not inflate.eof:
                raise ValueError(f"a column holds {len(raw)} bytes, not {size * count}")
            raw = _unshuffle(raw, size)
            items[:, start:start + size] = np.frombuffer(_delta(raw, size, inverse=True) if c["delta"] else raw,
                                                         np.uint8).reshape(count, size)
        if dtype.itemsize == 0:
            return np.zeros(shape, dtype, order="F" if e["fortran_order"] else "C")
        flat = np.frombuffer(bytearray(items.tobytes()), dtype)
        return flat.reshape(shape, order="F" if e["fortran_order"] else "C")

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def sha256(self) -> dict:
        """name -> the recorded SHA-256 of each array (from the header, nothing decoded)."""
        return {n: e["sha256"] for n, e in self._arrays.items()}

    def close(self) -> None:
        self._data = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def decode_all(path: str | Path) -> dict:
    """name -> array of every array in a packed file; CaptureError naming the file when any fails."""
    with Packed(path) as p:
        return {n: p[n] for n in p.files}
