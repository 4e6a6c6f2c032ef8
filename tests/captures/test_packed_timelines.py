"""The packed timelines (lapis.captures.codec): each decodes to the arrays its capture.json records, and to the
original .npz in git byte for byte; the codec round-trips any array exactly; a damaged file is a CaptureError
naming it."""

import io
import json
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lapis.captures.codec import MAGIC, Packed, array_sha256, decode_all, encode
from lapis.captures.store import SHIPPED, has_timelines, open_timelines, packed_path
from lapis.data import INDEX
from lapis.errors import CaptureError

ROOT = Path(__file__).resolve().parents[2]
PACKED = sorted(SHIPPED.rglob("*.packed"))
SMALL = SHIPPED / "gemm/h200-2026-11-29/timelines/ws_s4_c1_n128_2048.packed"


def records() -> list[tuple[Path, dict]]:
    """(capture folder, packed entry) of every packed file the capture.json files record."""
    out = []
    for cj in sorted(SHIPPED.glob("*/*/capture.json")):
        out += [(cj.parent, p) for p in json.loads(cj.read_text()).get("packed", [])]
    return out


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.flags.f_contiguous == b.flags.f_contiguous
            and a.tobytes(order="A") == b.tobytes(order="A"))


def test_every_packed_file_is_recorded_and_decodes_to_the_recorded_sha256s():
    recs = records()
    assert PACKED and sorted(folder / p["file"] for folder, p in recs) == PACKED
    for folder, p in recs:
        got = decode_all(folder / p["file"])
        assert list(got) == list(p["arrays"]), p["file"]
        assert {n: array_sha256(a) for n, a in got.items()} == p["arrays"], folder / p["file"]


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True)


def test_every_packed_file_decodes_to_its_original_in_git_byte_for_byte():
    if shutil.which("git") is None or git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not in a git checkout: the originals live only in the repository's history")
    removed = json.loads(INDEX.read_text())["removed"]
    assert len(removed) == len(PACKED)
    for r in removed:
        if git("cat-file", "-e", r["blob"]).returncode != 0:
            pytest.skip(f"this checkout lacks the original's blob {r['blob']} ({r['path']}): a shallow clone?")
        # the recorded commit holds the blob at the recorded path, and the original left the tree
        assert git("rev-parse", f"{r['commit']}:{r['path']}").stdout.decode().strip() == r["blob"], r
        assert not (ROOT / r["path"]).exists() and (ROOT / r["packed"]).is_file()
        data = git("cat-file", "blob", r["blob"]).stdout
        assert len(data) == r["size"]
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            original = {k: z[k] for k in z.files}
        packed = decode_all(ROOT / r["packed"])
        assert list(packed) == list(original), r["path"]
        for name, a in original.items():
            assert same(packed[name], a), (r["path"], name)


FIELD_TYPES = ["<u8", "<i4", ">u4", "<u2", ">i2", "u1", "i1", "<f8", ">f4", "?", "<U3", "S2", "<c8", "V3"]


@st.composite
def arrays(draw) -> np.ndarray:
    """Any array of a plain or structured dtype (padded, nested or with sub-arrays too), any shape and memory
    order, holding arbitrary bytes."""
    if draw(st.booleans()):
        dtype = np.dtype(draw(st.sampled_from(FIELD_TYPES)))
    else:
        names = draw(st.lists(st.text("abcxyz_", min_size=1, max_size=4), min_size=1, max_size=5, unique=True))
        fields = [(n, draw(st.sampled_from(FIELD_TYPES))) for n in names]
        if draw(st.booleans()):  # a sub-array field and a nested structure
            fields[0] = (fields[0][0], fields[0][1], (2,))
            fields.append(("nested_", [("p", "<u4"), ("q", "u1")]))
        dtype = np.dtype(fields, align=draw(st.booleans()))
    shape = tuple(draw(st.lists(st.integers(0, 6), max_size=3)))
    n = int(np.prod(shape, dtype=np.int64))
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    a = np.frombuffer(raw, dtype).reshape(shape).copy()
    return np.asfortranarray(a) if draw(st.booleans()) else a


@given(st.lists(arrays(), min_size=1, max_size=4), st.booleans())
def test_the_codec_round_trips_any_array_exactly(tmp_path_factory, given_arrays, through_npz):
    path = tmp_path_factory.mktemp("codec") / "a.packed"
    named = {f"k{i}/x": a for i, a in enumerate(given_arrays)}
    if through_npz:  # as the captures are packed: what np.load gives from an .npz
        buf = io.BytesIO()
        np.savez(buf, **named)
        buf.seek(0)
        with np.load(buf, allow_pickle=False) as z:
            named = {k: z[k] for k in z.files}
    path.write_bytes(encode(named, {"what": "test"}))
    back = decode_all(path)
    assert list(back) == list(named)
    for k, a in named.items():
        assert same(back[k], a), (k, a.dtype, a.shape)
    assert Packed(path).source == {"what": "test"}


def test_encoding_monotonic_timestamps_is_compact_and_exact(tmp_path):
    t = np.cumsum(np.random.default_rng(0).integers(0, 50, 100_000)).astype("<u8") + (1 << 60)
    (tmp_path / "t.packed").write_bytes(encode({"t": t}))
    assert (tmp_path / "t.packed").stat().st_size < t.nbytes / 6
    assert same(decode_all(tmp_path / "t.packed")["t"], t)


def damaged(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_a_damaged_packed_file_is_a_capture_error_naming_it(tmp_path):
    good = SMALL.read_bytes()
    n = int.from_bytes(good[8:12], "little")
    cases = {f"flip{i}": good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1:] for i in range(0, len(good), 7)}
    cases.update({"flip_last": good[:-1] + bytes([good[-1] ^ 1]), "empty": b"", "magic_only": MAGIC,
                  "not_packed": b"PK\x03\x04" + good[4:]})
    cases.update({f"cut{k}": good[:k] for k in (4, 12, 20, 16 + n // 2, 16 + n, 16 + n + 10, len(good) - 1)})
    for name, data in cases.items():
        p = damaged(tmp_path, name + ".packed", data)
        with pytest.raises(CaptureError, match=re.escape(str(p))):
            decode_all(p)


def test_a_header_that_lies_is_caught_by_the_array_sha256(tmp_path):
    """A header rewritten with a valid CRC but a wrong shape: the decode fails or the SHA-256 differs."""
    good = SMALL.read_bytes()
    n = int.from_bytes(good[8:12], "little")
    meta = json.loads(good[16:16 + n])
    meta["arrays"][1]["shape"] = [meta["arrays"][1]["shape"][0] - 1]
    header = json.dumps(meta, separators=(",", ":")).encode()
    p = damaged(tmp_path, "lie.packed", MAGIC + len(header).to_bytes(4, "little") +
                zlib.crc32(header).to_bytes(4, "little") + header + good[16 + n:])
    with pytest.raises(CaptureError, match=re.escape(str(p))):
        decode_all(p)


def test_the_store_reads_a_fresh_npz_as_is_and_else_its_packed_form(tmp_path):
    a = {"records": np.arange(12, dtype="<u8").reshape(3, 4), "ops": np.array(["x", "yz"])}
    np.savez(tmp_path / "t.npz", **a)
    with open_timelines(tmp_path / "t.npz") as z:
        assert not isinstance(z, Packed) and all(same(z[k], v) for k, v in a.items())
    packed_path(tmp_path / "t.npz").write_bytes(encode(a))
    (tmp_path / "t.npz").unlink()
    assert has_timelines(tmp_path / "t.npz")
    with open_timelines(tmp_path / "t.npz") as z:
        assert isinstance(z, Packed) and z.files == list(a) and all(same(z[k], v) for k, v in a.items())
    assert not has_timelines(tmp_path / "u.npz")
    with pytest.raises(FileNotFoundError):
        open_timelines(tmp_path / "u.npz")
