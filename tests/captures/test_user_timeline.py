"""The user-timeline decoder (lapis.captures.user_timeline) on buffers written here by a writer that follows
docs/timeline-format.md with struct.pack alone: decoded spans, sampling, and every malformed input a
CaptureError."""

import json
import struct

import numpy as np
import pytest

from lapis.captures import safe, user_timeline
from lapis.errors import CaptureError

MASK_ALL = (1 << 64) - 1


def anchor(cta: int, cycles: int, ns: int, sm: int) -> bytes:
    return struct.pack("<QIIiHBB", cycles, cta, ns & 0xFFFFFFFF, struct.unpack("<i", struct.pack("<I", ns >> 32))[0],
                       sm, 0xFF, 0x7F)


def write(rows: dict, *, roles: int, capacity: int, grid_ctas: int, nrows: int, cta_first=0, cta_every=1,
          iter_every=1, mask=MASK_ALL, counts=None, magic=b"LAPISTL1", version=1, rows_offset=None) -> bytes:
    """rows: {row j: (cta, sm, (c0, g0), (c1, g1), [(cycles, role, op, complete, work, k), ...])}, the records
    of each role in its order; they go to slot 1 + role + roles * n."""
    ro = 64 + (4 * nrows + 7) // 8 * 8 if rows_offset is None else rows_offset
    head = magic + struct.pack("<IIIIIIIIIIQII", version, 64, 24, capacity, nrows, roles, grid_ctas, cta_first,
                               cta_every, iter_every, mask, 64, ro)
    cnt = [0] * nrows
    body = bytearray(nrows * capacity * 24)
    for j, (cta, sm, (c0, g0), (c1, g1), recs) in rows.items():
        base = j * capacity * 24
        body[base:base + 24] = anchor(cta, c0, g0, sm)
        body[base + (capacity - 1) * 24:base + capacity * 24] = anchor(cta, c1, g1, sm)
        n = [0] * roles
        for cycles, role, op, complete, work, k in recs:
            slot = 1 + role + roles * n[role]
            n[role] += 1
            cnt[j] += 1
            if slot < capacity - 1:
                body[base + slot * 24:base + (slot + 1) * 24] = struct.pack(
                    "<QIIiHBB", cycles, cta, work, k, sm, role, op | (0x80 if complete else 0))
    cnt = counts if counts is not None else cnt
    pad = b"\0" * ((4 * nrows + 7) // 8 * 8 - 4 * nrows)
    return head + struct.pack(f"<{nrows}I", *cnt) + pad + bytes(body)


# CTA 0 on SM 3: 2 cycles per ns (anchors 1000 cycles <-> 5e9 ns, 21000 <-> 5e9 + 10000)
A0, A1 = (1000, 5_000_000_000), (21000, 5_000_010_000)
ROW0 = (0, 3, A0, A1, [(1200, 0, 0, 0, 7, -1), (1400, 1, 0, 0, 7, 0), (1800, 0, 1, 1, 7, 0),
                       (2600, 1, 2, 0, 7, 0), (3000, 0, 2, 0, 7, 0)])
ROLES, OPS = ["producer", "consumer"], ["begin", "wait empty", "wgmma"]


def spans(d):
    return [(e["role"], e["op"], e["start_ns"], e["end_ns"], e["work_item"], e["k_index"], e["kind"], e["cta"],
             e["sm"]) for e in d["events"]]


def test_decode_turns_cycles_into_spans_by_role():
    d = user_timeline.decode(write({0: ROW0}, roles=2, capacity=10, grid_ctas=1, nrows=1), ROLES, OPS)
    # t0 = the earliest record: cycle 1200 -> 100 ns after g0; each cycle is 0.5 ns
    assert sorted(spans(d)) == sorted([
        ("producer", "wait empty", 0.0, 300.0, 7, 0, "wait", 0, 3),
        ("producer", "wgmma", 300.0, 900.0, 7, 0, "issue", 0, 3),
        ("consumer", "wgmma", 100.0, 700.0, 7, 0, "issue", 0, 3)])
    assert d["ctas"] == [0] and d["clock_mhz"] == {0: 2000.0}
    assert d["t0_ns"] == 5_000_000_100 - 5_000_000_000 + 5_000_000_000  # absolute ns of the first record
    assert d["header"]["roles"] == 2 and d["header"]["capacity"] == 10


def test_cta_sampling_rows_and_mask():
    row_c4 = (4, 9, A0, A1, [(1200, 0, 0, 0, 1, -1), (1600, 0, 1, 1, 1, 0)])
    # every 2nd CTA from 2: rows 0 (CTA 2), 1 (CTA 4), 2 (CTA 6); mask 0b010 keeps only row 1
    data = write({1: row_c4}, roles=2, capacity=6, grid_ctas=7, nrows=3, cta_first=2, cta_every=2, mask=0b010)
    d = user_timeline.decode(data, ROLES, OPS)
    assert d["ctas"] == [4]
    assert spans(d) == [("producer", "wait empty", 0.0, 200.0, 1, 0, "wait", 4, 9)]
    assert user_timeline.sampled_ctas(d["header"]) == {1: 4}


def test_iteration_sampling_drops_spans_across_skipped_iterations():
    # iter_every 2: k 0 and 2 recorded, k 1 skipped; the span closing at k 2's record opened at k 0's: dropped
    recs = [(1200, 0, 0, 0, 0, 0), (1400, 0, 1, 1, 0, 0), (1800, 0, 1, 1, 0, 2), (2000, 0, 0, 0, 0, 2),
            (2400, 0, 1, 1, 0, 2)]
    data = write({0: (0, 0, A0, A1, recs)}, roles=1, capacity=8, grid_ctas=1, nrows=1, iter_every=2)
    assert [(e["start_ns"], e["end_ns"], e["k_index"]) for e in user_timeline.decode(data)["events"]] == [
        (0.0, 100.0, 0), (400.0, 600.0, 2)]
    # the same records unsampled: the straddling span is kept
    data = write({0: (0, 0, A0, A1, recs)}, roles=1, capacity=8, grid_ctas=1, nrows=1, iter_every=1)
    assert len(user_timeline.decode(data)["events"]) == 3


def test_default_names_and_npz_and_bin_files(tmp_path):
    data = write({0: ROW0}, roles=2, capacity=10, grid_ctas=1, nrows=1)
    assert {e["role"] for e in user_timeline.decode(data)["events"]} == {"role0", "role1"}
    npz = tmp_path / "t.npz"
    np.savez(npz, buffer=np.frombuffer(data, np.uint8),
             meta=np.frombuffer(json.dumps(dict(roles=ROLES, ops=OPS, shape="1x2x3")).encode(), np.uint8))
    d = user_timeline.read(npz)
    assert d["meta"]["shape"] == "1x2x3" and {e["op"] for e in d["events"]} == {"wait empty", "wgmma"}
    binf = tmp_path / "t.bin"
    binf.write_bytes(data)
    (tmp_path / "t.json").write_text(json.dumps(dict(roles=ROLES, ops=OPS)))
    assert spans(user_timeline.read(binf)) == spans(d)


def bad(data, match):
    with pytest.raises(CaptureError, match=match):
        user_timeline.decode(data, ROLES, OPS)


def test_truncated_and_trailing_bytes():
    data = write({0: ROW0}, roles=2, capacity=10, grid_ctas=1, nrows=1)
    bad(data[:-1], "truncated")
    bad(data[:40], "truncated")
    bad(data + b"\0" * 8, "trailing bytes")


def test_header_fields_are_checked():
    kw = dict(roles=2, capacity=10, grid_ctas=1, nrows=1)
    bad(write({0: ROW0}, magic=b"LAPISTL2", **kw), "magic")
    bad(write({0: ROW0}, version=2, **kw), "version")
    bad(write({0: ROW0}, rows_offset=64, **kw), "rows_offset")
    bad(write({0: ROW0}, roles=9, capacity=10, grid_ctas=1, nrows=1), "roles")
    bad(write({0: ROW0}, cta_every=0, **kw), "cta_every")


def test_overflow_is_an_error():
    # capacity 6: 4 record slots, the producer's third record (slot 1 + 0 + 2 * 2 = 5) does not fit
    bad(write({0: ROW0}, roles=2, capacity=6, grid_ctas=1, nrows=1), "overflowed")


def test_rows_and_records_are_checked():
    kw = dict(roles=2, capacity=10, grid_ctas=1, nrows=1)
    bad(write({0: ROW0}, counts=[4], **kw), "at least the records written")
    no_anchor = bytearray(write({0: ROW0}, **kw))
    no_anchor[72:96] = b"\0" * 24  # row 0, slot 0
    bad(bytes(no_anchor), "clock anchors")
    wrong_cta = (5, 3, A0, A1, ROW0[4])  # row 0 belongs to CTA 0
    bad(write({0: wrong_cta}, **kw), "role i % roles of the row's CTA")
    # a row the mask leaves out holds data
    bad(write({0: ROW0}, roles=2, capacity=10, grid_ctas=2, nrows=2, mask=0b10), "stay zero")
    backwards = (0, 3, A1, A0, ROW0[4])
    bad(write({0: backwards}, **kw), "closing anchor comes after")
    unnamed = (0, 3, A0, A1, [(1200, 0, 0, 0, 7, -1), (1800, 0, 9, 1, 7, 0)])
    bad(write({0: unnamed}, **kw), "every role and op code has a name")


def test_files_are_read_within_limits(tmp_path, monkeypatch):
    data = write({0: ROW0}, roles=2, capacity=10, grid_ctas=1, nrows=1)
    f = tmp_path / "t.bin"
    f.write_bytes(data)
    monkeypatch.setitem(safe.LIMITS, "archive_bytes", len(data) - 1)
    with pytest.raises(CaptureError, match="at most"):
        user_timeline.read(f)
    monkeypatch.undo()
    monkeypatch.setitem(safe.LIMITS, "array_bytes", 10 * 24 - 1)
    with pytest.raises(CaptureError, match="rows hold at most"):
        user_timeline.read(f)


def test_npz_members_are_checked(tmp_path):
    data = np.frombuffer(write({0: ROW0}, roles=2, capacity=10, grid_ctas=1, nrows=1), np.uint8)
    f = tmp_path / "t.npz"
    np.savez(f, records=data)
    with pytest.raises(CaptureError, match="'buffer'"):
        user_timeline.read(f)
    np.savez(f, buffer=data.view(np.uint16))
    with pytest.raises(CaptureError, match="1-D uint8"):
        user_timeline.read(f)
    np.savez(f, buffer=data, meta=np.frombuffer(b"{not json", np.uint8))
    with pytest.raises(CaptureError, match="UTF-8 JSON"):
        user_timeline.read(f)
    np.savez(f, buffer=data, meta=np.frombuffer(json.dumps(dict(roles=[1, 2])).encode(), np.uint8))
    with pytest.raises(CaptureError, match="list of names"):
        user_timeline.read(f)
    (tmp_path / "x.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CaptureError):
        user_timeline.read(tmp_path / "x.npz")


def test_lapis_kernel_rows_decode_as_the_harness_decodes_them():
    """harness.cuh rows (one per CTA, no header block; CTA 1 not sampled: anchors and a count of 0) read through
    harness_buffer give the spans lapis.captures.timeline.decode_timeline gives for the same rows."""
    from lapis.captures.timeline import RECORD_DTYPE, anchored_to_ns, decode_timeline
    row2 = (2, 4, A0, A1, [(1300, 0, 0, 0, 3, -1), (1500, 1, 0, 0, 3, -1), (1900, 0, 1, 1, 3, 0),
                           (2900, 1, 2, 0, 3, 0)])
    empty1 = (1, 8, A0, A1, [])
    body = write({0: ROW0, 1: empty1, 2: row2}, roles=2, capacity=10, grid_ctas=3, nrows=3)
    raw = np.frombuffer(body, RECORD_DTYPE, 30, 80).reshape(3, 10)
    counts = np.frombuffer(body, "<u4", 3, 64)
    d = user_timeline.decode(user_timeline.harness_buffer(raw, counts, roles=2, cta_every=2), ROLES, OPS)
    records, _ = anchored_to_ns(raw[::2], counts[::2])
    ref = decode_timeline(records, counts[::2], ROLES, OPS)
    assert d["events"] == ref["events"] and len(d["events"]) == 5 and d["ctas"] == [0, 2]
    with pytest.raises(CaptureError, match="one count per CTA"):
        user_timeline.harness_buffer(raw, counts[:2], roles=2)
