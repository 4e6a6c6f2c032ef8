"""Every capture kind's reader (lapis.captures.readers) against damaged copies of a real shipped capture: each
attack is a CaptureError naming the file (and the field or array), within a second and within bounded memory,
never a hang, a raw zlib/zipfile/numpy/JSON error or a MemoryError."""

import gzip
import json
import os
import re
import shutil
import struct
import threading
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from lapis.captures import readers
from lapis.captures.codec import MAGIC
from lapis.captures.safe import INT, LIMITS, STR, check, read_gzip, read_json, regular
from lapis.captures.store import SHIPPED, open_timelines
from lapis.errors import CaptureError

PEAK_BYTES = 32 << 20  # what refusing an attack may allocate (tracemalloc peak): far below any limit it enforces


def read_all(z) -> None:
    for k in z.files:
        z[k]


def read_wgmma(root, folder):
    cap = readers.read_wgmma(folder)
    read_all(cap.arrays["inputs"])
    read_all(cap.arrays["d"])


def read_timed(reader, pattern):
    def read(root, folder):
        reader(folder)
        for p in sorted(folder.glob(pattern)):
            with open_timelines(p.with_suffix(".npz"), folder) as z:
                read_all(z)
    return read


MICRO = "micro/h200-2026-11-29-v2/micro/results.json"
# kind: (shipped capture, the files copied, its JSON file, its arrays file or None, read everything the validators do)
KINDS = {
    "tma": ("tma/h200-2026-11-29-d", ("manifest.json", "dumps.npz"), "manifest.json", "dumps.npz",
            lambda root, f: readers.read_tma(f)),
    "tma_encode": ("tma_encode/h200-2026-11-29", ("manifest.json",), "manifest.json", None,
                   lambda root, f: readers.read_tma_encode(f)),
    "wgmma": ("wgmma/h200-2026-11-29", ("manifest.json", "inputs.npz", "d.npz"), "manifest.json", "inputs.npz",
              read_wgmma),
    "bank": ("bank/h200-2026-11-29", ("manifest.json",), "manifest.json", None, lambda root, f: readers.read_bank(f)),
    "cutlass_oracle": ("cutlass_oracle/h200-2026-11-29-v2", ("manifest.json",), "manifest.json", None,
                       lambda root, f: readers.read_cutlass_oracle(f)),
    "micro": ("micro/h200-2026-11-29-v2", ("micro/manifest.json", "micro/results.json"), "micro/results.json",
              None, lambda root, f: readers.read_micro(root, MICRO)),
    "sanitizer": ("attention/h200-2026-11-30-s5-sanitize", ("sanitizer.json",), "sanitizer.json", None,
                  lambda root, f: readers.read_sanitizer(f)),
    "attention": ("attention/h200-2026-11-29-s3", ("manifest.json", "timelines.packed"), "manifest.json",
                  "timelines.packed", read_timed(readers.read_attention, "timelines.packed")),
    "gemm": ("gemm/h200-2026-11-29-n256", ("manifest.json", "timelines/ws_s4_c2_n256_4096.packed"),
             "manifest.json", "timelines/ws_s4_c2_n256_4096.packed", read_timed(readers.read_gemm, "timelines/*")),
}


def copy(tmp_path, kind):
    """(root, capture folder, read) of a fresh copy of the kind's shipped capture under tmp_path/captures."""
    src, files, *_, read = KINDS[kind]
    root = tmp_path / "captures"
    folder = root / src
    for f in files:
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHIPPED / src / f, folder / f)
    return root, folder, read


def refused(fn, *names):
    """Run fn in a thread (a blocked open cannot hang the suite) under tracemalloc: CaptureError naming every one of
    `names`, allocating under PEAK_BYTES (the join's 120 s is a hang guard, not a speed check). Returns the error."""
    box = {}

    def run():
        tracemalloc.start()
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 (the test asserts which)
            box["exc"] = exc
        box["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(120)
    assert not th.is_alive(), "the reader blocked"
    exc = box.get("exc")
    assert isinstance(exc, CaptureError), f"{type(exc).__name__}: {exc}"
    for name in names:
        assert str(name) in str(exc), (name, str(exc))
    assert box["peak"] < PEAK_BYTES, box["peak"]
    return exc


# ------------------------------------------------------------------ attacks on any file

def fifo(path):
    path.unlink()
    os.mkfifo(path)
    return "is a FIFO"


def dev_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")
    return "/dev/zero"


def outside_link(path):
    outside = next(p for p in path.parents if p.name == "captures").parent / ("outside-" + path.name)
    shutil.move(path, outside)
    path.symlink_to(outside)
    return "points inside its capture folder"


def empty(path):
    path.write_bytes(b"")
    return ""


def flipped(path):
    data = bytearray(path.read_bytes())
    i = 0 if path.suffix == ".json" else len(data) // 2
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return ""


def oversized(path):
    """A sparse file past the limit of its kind (JSON or archive): refused by size before a byte is read."""
    limit = LIMITS["json_bytes"] if path.suffix == ".json" else LIMITS["archive_bytes"]
    with open(path, "r+b") as f:
        f.truncate(limit + 1)
    return f"at most {limit} bytes"


FILE_ATTACKS = [fifo, dev_zero, outside_link, empty, flipped, oversized]
CASES = [(k, "json") for k in KINDS] + [(k, "arrays") for k in KINDS if KINDS[k][3]]


@pytest.mark.parametrize("attack", FILE_ATTACKS, ids=lambda a: a.__name__)
@pytest.mark.parametrize("kind,which", CASES)
def test_a_damaged_file_is_a_capture_error_naming_it(tmp_path, kind, which, attack):
    root, folder, read = copy(tmp_path, kind)
    target = folder / KINDS[kind][2 if which == "json" else 3]
    why = attack(target)
    refused(lambda: read(root, folder), target, why)


# ------------------------------------------------------------------ archives: bombs and huge shapes

def npy_header(shape, descr="|u1") -> bytes:
    head = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    head += b" " * (-(10 + len(head) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head


def zero_stream(header: bytes, mib: int, wbits: int) -> bytes:
    """A deflate stream (raw for wbits -15, zlib for 15) of `header` then `mib` MiB of zeros, built in
    milliseconds: after a full flush every MiB of zeros compresses to the same ~1 KB."""
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    head = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    chunk = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return head + chunk * mib + c.flush(zlib.Z_FINISH)


def zip_bytes(members) -> bytes:
    """A zip of (name, raw deflate bytes, CRC-32, declared inflated size) members, written by hand so that a
    member may lie about its size."""
    out, central, offset = [], [], 0
    for name, data, crc, size in members:
        n = name.encode()
        local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size, len(n), 0)
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data), size,
                                   len(n), 0, 0, 0, 0, 0, offset) + n)
        out += [local, n, data]
        offset += len(local) + len(n) + len(data)
    directory = b"".join(central)
    return b"".join(out) + directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                                                   len(directory), offset, 0)


def with_member(path, name, data, crc, size):
    """Rewrite the .npz at `path` with every member as it was (its deflate bytes copied) but `name`, which becomes
    (data, crc, size)."""
    blob, members = path.read_bytes(), []
    for info in zipfile.ZipFile(path).infolist():
        if info.filename != name + ".npy":
            n, extra = struct.unpack_from("<HH", blob, info.header_offset + 26)
            start = info.header_offset + 30 + n + extra
            members.append((info.filename, blob[start:start + info.compress_size], info.CRC, info.file_size))
    path.write_bytes(zip_bytes([(name + ".npy", data, crc, size)] + members))


def first_member(path) -> str:
    return zipfile.ZipFile(path).namelist()[0].removesuffix(".npy")


def npz_bomb(path):
    """3 MB that inflate to 3 GB, declared as such: refused from the zip's directory, before inflating."""
    name = first_member(path)
    head = npy_header((3000 << 20,))
    data = zero_stream(head, 3000, -15)
    with_member(path, name, data, 0, len(head) + (3000 << 20))
    return name


def npz_lying_bomb(path):
    """The same 3 MB, declared as 1000 bytes: inflation stops at the declared size, the CRC-32 fails."""
    name = first_member(path)
    head = npy_header((1000,))
    with_member(path, name, zero_stream(head, 3000, -15), 12345, len(head) + 1000)
    return name


def npz_huge_shape(path):
    """An .npy header declaring 1 TiB: refused from the header, before allocating."""
    name = first_member(path)
    raw = npy_header((1 << 40,)) + bytes(16)
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    with_member(path, name, c.compress(raw) + c.flush(), zlib.crc32(raw), len(raw))
    return name


def packed_file(shape, blocks: bytes) -> bytes:
    header = json.dumps(dict(format="lapis.packed/1", source={}, blocks_crc32=zlib.crc32(blocks), arrays=[dict(
        name="records", dtype="|u1", shape=shape, fortran_order=False, sha256="0" * 64,
        columns=[dict(field=None, delta=False, offset=0, length=len(blocks))])])).encode()
    return MAGIC + struct.pack("<II", len(header), zlib.crc32(header)) + header + blocks


def packed_bomb(path):
    """A column of 3 MB that inflates to 3 GB, its array declared as 1000 bytes (valid CRCs)."""
    path.write_bytes(packed_file([1000], zero_stream(b"", 3000, 15)))
    return "records"


def packed_huge_shape(path):
    path.write_bytes(packed_file([1 << 40], zlib.compress(bytes(16))))
    return "records"


ARCHIVE_ATTACKS = {".npz": [npz_bomb, npz_lying_bomb, npz_huge_shape], ".packed": [packed_bomb, packed_huge_shape]}
ARCHIVE_CASES = [(k, a) for k in KINDS if KINDS[k][3] for a in ARCHIVE_ATTACKS[Path(KINDS[k][3]).suffix]]


@pytest.mark.parametrize("kind,attack", ARCHIVE_CASES, ids=lambda x: getattr(x, "__name__", x))
def test_a_bomb_or_a_huge_declared_shape_is_refused_before_it_is_inflated(tmp_path, kind, attack):
    root, folder, read = copy(tmp_path, kind)
    target = folder / KINDS[kind][3]
    array = attack(target)
    refused(lambda: read(root, folder), target, repr(array) if target.suffix == ".npz" else array)


def test_the_deflate_bomb_is_3_mb_that_inflate_to_3_gb():
    data = zero_stream(npy_header((3000 << 20,)), 3000, -15)
    assert len(data) < 4 << 20
    d = zlib.decompressobj(-15)
    assert len(d.decompress(data[:len(data) // 1000], 1 << 30)) > 2 << 20  # inflates ~1000 to 1


# ------------------------------------------------------------------ manifests: types, fields, nothing to compare

def at(doc, path):
    """The container holding path's last key, and that key (path: keys and list indices)."""
    for k in path[:-1]:
        doc = doc[k]
    return doc, path[-1]


# kind: (a field whose type is made wrong, the value given, the field as the error names it)
WRONG_TYPE = {
    "tma": (["configs", 0, "dims"], "8", "configs[0].dims"),
    "tma_encode": (["cases", 0, "dtype"], "bf16", "cases[0].dtype"),
    "wgmma": (["cases", 0, "n"], "64", "cases[0].n"),
    "bank": (["patterns", 0, "offsets"], 5, "patterns[0].offsets"),
    "cutlass_oracle": (["layouts", 0, "steps"], "2", "layouts[0].steps"),
    "micro": (["measurements", 0, "status"], 1, "measurements[0].status"),
    "sanitizer": (["summary", "clean"], [], "summary.clean"),
    "attention": (["results", 1, "causal"], "no", "results[1].causal"),
    "gemm": (["results", 0, "shape"], 4096, "results[0].shape"),
}
# kind: (a required field removed, the field as the error names it)
MISSING = {
    "tma": (["configs", 0, "result"], "configs[0].result"),
    "tma_encode": (["cases", 0, "result"], "cases[0].result"),
    "wgmma": (["cases", 0, "desc_a"], "cases[0].desc_a"),
    "bank": (["patterns", 0, "kernel"], "patterns[0].kernel"),
    "cutlass_oracle": (["layouts", 0, "sm100"], "layouts[0].sm100"),
    "micro": (["measurements"], "measurements"),
    "sanitizer": (["summary"], "summary"),
    "attention": (["results", 1, "variants", "s3", "plain", "median_us"], "results[1].variants.s3.plain.median_us"),
    "gemm": (["provenance", "gpu"], "provenance.gpu"),
}


def edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("kind", KINDS)
def test_a_field_of_the_wrong_type_is_named(tmp_path, kind):
    root, folder, read = copy(tmp_path, kind)
    path, value, name = WRONG_TYPE[kind]
    target = folder / KINDS[kind][2]
    edit(target, lambda d: at(d, path)[0].__setitem__(path[-1], value))
    refused(lambda: read(root, folder), target, name, repr(value))


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_field_is_named(tmp_path, kind):
    root, folder, read = copy(tmp_path, kind)
    path, name = MISSING[kind]
    target = folder / KINDS[kind][2]
    edit(target, lambda d: at(d, path)[0].pop(path[-1]))
    refused(lambda: read(root, folder), target, name, "is missing")


def all_timed_out(doc):
    for c in doc["configs"]:
        c["result"]["status"] = "timeout"


# kind: how to make every entry one it cannot compare (a kind without statuses: no entry at all)
NOTHING_TO_COMPARE = {
    "tma": all_timed_out,
    "tma_encode": lambda d: d["cases"].clear(),
    "wgmma": lambda d: [c["result"].update(status="timeout") for c in d["cases"]],
    "bank": lambda d: [p.pop("measured") for p in d["patterns"]],
    "cutlass_oracle": lambda d: d["layouts"].clear(),
    "micro": lambda d: [m.update(status="timeout") for m in d["measurements"]],
    "sanitizer": lambda d: d["summary"]["clean"].clear(),
}


@pytest.mark.parametrize("kind", NOTHING_TO_COMPARE)
def test_a_capture_with_nothing_to_compare_is_refused(tmp_path, kind):
    root, folder, read = copy(tmp_path, kind)
    target = folder / KINDS[kind][2]
    edit(target, NOTHING_TO_COMPARE[kind])
    refused(lambda: read(root, folder), target, "holds at least one entry lapis can compare", "none comparable")


@pytest.mark.parametrize("kind", ["tma", "wgmma", "bank", "micro", "attention", "gemm"])
def test_entries_not_measured_are_counted_by_reason(tmp_path, kind):
    root, folder, _ = copy(tmp_path, kind)
    target = folder / KINDS[kind][2]
    change, want = {
        "tma": (lambda d: d["configs"][0]["result"].update(status="timeout"), {"timeout": 1}),
        "wgmma": (lambda d: d["cases"][0]["result"].update(status="fault"), {"fault": 1}),
        "bank": (lambda d: d["patterns"][0].pop("measured"), {"not measured": 1}),
        "micro": (lambda d: d["measurements"][0].update(status="timeout"), {"timeout": 1}),
        "attention": (lambda d: d["results"][1]["variants"]["s3"].pop("plain"), {"no plain-build time": 1}),
        "gemm": (lambda d: d["results"][0]["variants"]["ws_s4_c2_n256"].pop("plain"), {"no plain-build time": 1}),
    }[kind]
    reader = {"micro": lambda f: readers.read_micro(root, MICRO)}.get(kind, readers.READERS.get(kind))
    assert reader(folder).not_compared == {}
    edit(target, change)
    assert reader(folder).not_compared == want


def test_every_shipped_capture_passes_its_reader():
    assert {"tma", "wgmma", "attention", "gemm", "ncu"} <= {p.name for p in SHIPPED.iterdir()}
    for kind, read in readers.READERS.items():
        for folder in sorted((SHIPPED / kind).iterdir()) if (SHIPPED / kind).is_dir() else []:
            if (folder / "manifest.json").exists():
                # tma's 2 interleaved timeouts; the head-dim race asked s9 (head dim 128 only) at its 6 other rows
                # and the s22 race ran without FA4's wheels (its 10 rows skipped)
                want = {"h200-2026-12-02-hd-post": {"attention_h200.cu is built": 6},
                        "h200-2026-12-03-s22": {"FA4's sm90 forward": 10}}.get(folder.name)
                assert read(folder).not_compared in (({}, {"timeout": 2}) if want is None else (want,)), folder
    for folder in sorted((SHIPPED / "attention").glob("*/sanitizer.json")):
        readers.read_sanitizer(folder.parent)
    for rel in sorted(SHIPPED.glob("micro/*/micro/results.json")):
        readers.read_micro(SHIPPED, rel.relative_to(SHIPPED).as_posix())


# ------------------------------------------------------------------ the helpers themselves

def test_a_link_inside_the_capture_folder_is_read(tmp_path):
    (tmp_path / "a.json").write_text('{"x": 1}')
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    assert regular(tmp_path / "b.json", tmp_path) == tmp_path / "b.json"
    assert read_json(tmp_path / "b.json", tmp_path) == {"x": 1}


def test_deep_nesting_and_non_objects_are_capture_errors(tmp_path):
    for name, text in (("deep.json", "[" * 100_000 + "]" * 100_000), ("list.json", "[1]"), ("nan.txt", "\xff")):
        (tmp_path / name).write_bytes(text.encode("latin-1"))
        refused(lambda: read_json(tmp_path / name), tmp_path / name)


def test_the_schema_names_the_field_and_refuses_bools_as_integers(tmp_path):
    schema = {"a": [{"b": INT}], "c?": STR}
    check({"a": [{"b": 1}]}, schema, "f")
    for doc, where in (({"a": [{"b": True}]}, "a[0].b"), ({"a": [{}]}, "a[0].b"), ({"a": {}}, "a"),
                       ({"a": [], "c": 3}, "c")):
        with pytest.raises(CaptureError, match=re.escape(f"f: {where} ")):
            check(doc, schema, "f")


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize("content, words", [
    (gz(b"x" * 2000), "inflates to at most 1000 bytes"),  # a 2000-byte member, 1000 allowed
    (gz(b"{}")[:-6], "stops early"),  # the trailer cut
    (gz(b"{}") + gz(b"{}"), "one gzip member"),
    (b"{}", "gzip-compressed (RFC 1952)"),
    (gz(b"{}")[:-8] + b"\0\0\0\0\2\0\0\0", "gzip-compressed (RFC 1952) and undamaged"),  # CRC-32 wrong
])
def test_a_gzip_file_is_inflated_within_its_limit_or_refused(tmp_path, content, words):
    f = tmp_path / "t.chrome_trace.gz"
    f.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        read_gzip(f, limit=1000)
    assert words in str(err.value) and "t.chrome_trace.gz" in str(err.value)
    f.write_bytes(gz(b"y" * 1000))
    assert read_gzip(f, limit=1000) == b"y" * 1000  # exactly the limit inflates


def test_a_gzip_bomb_stops_one_byte_past_the_limit(tmp_path):
    """64 MiB of zeros deflate to ~64 KB; read with the JSON limit (16 MiB) it allocates about 16 MiB, not 64."""
    f = tmp_path / "bomb.json.gz"
    f.write_bytes(gz(bytes(64 << 20)))
    assert f.stat().st_size < 100_000
    tracemalloc.start()
    with pytest.raises(CaptureError, match="inflates to at most 16777216 bytes"):
        read_gzip(f)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 << 20
