"""Timelines a user's kernel recorded with lapis_timeline.cuh: the dumped buffer -> lapis's timeline events.

The wire format (docs/timeline-format.md; lapis/gpu/kernels/lapis_timeline.cuh): one little-endian buffer of a
64-byte header block (HEADER_DTYPE: magic "LAPISTL1", version, record and row sizes, the launch's CTAs and what
was sampled), uint32 counts[rows] padded to 8 bytes, then rows[rows][capacity] of 24-byte records
(lapis.captures.timeline.RECORD_DTYPE, the rows of lapis's own kernels byte for byte): slot 0 and slot
capacity-1 the CTA's clock anchors (%clock64 cycles paired with %globaltimer ns), record n of role r in slot
1 + r + roles * n, t_ns in SM cycles.

Files: a raw `.bin` (the buffer as copied back from the device; role and op names from a `.json` beside it with
the same stem, when there is one), or an `.npz` holding `buffer` (uint8, the same bytes) and optionally `meta`
(uint8, UTF-8 JSON: {"roles": [names by code], "ops": [names by code], "provenance": {...}, ...}).

`harness_buffer(rows, counts, roles)` wraps the rows of lapis's own kernels in a header block, so this decoder
reads them too. `read(path)` -> dict: header (dict), events (dicts of lapis.pipeline_sim.recorder.Event's fields, times in ns
from the earliest record), ctas (the sampled CTAs), clock_mhz per CTA, roles, ops, meta. Every check (LIMITS
of lapis.captures.safe, sizes, offsets, the sampling rule, anchors, record fields) raises CaptureError naming
the file, the rule and the value: a malformed, truncated or overflowed buffer never gives a traceback or a
silently shorter timeline. Numpy only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lapis.captures import safe
from lapis.captures.timeline import (ANCHOR_OP, ANCHOR_ROLE, ANCHOR_SLOTS, KIND_COMPLETE, MAX_ROLES, RECORD_DTYPE,
                                     anchored_to_ns)
from lapis.errors import CaptureError

MAGIC = b"LAPISTL1"
VERSION = 1
BEGIN_OP = 0  # op 0 opens a role's span and closes none (lapis_timeline.cuh BEGIN, harness.cuh START)
HEADER_DTYPE = np.dtype([("magic", "S8"), ("version", "<u4"), ("header_bytes", "<u4"), ("record_bytes", "<u4"),
                         ("capacity", "<u4"), ("rows", "<u4"), ("roles", "<u4"), ("grid_ctas", "<u4"),
                         ("cta_first", "<u4"), ("cta_every", "<u4"), ("iter_every", "<u4"), ("cta_mask", "<u8"),
                         ("counts_offset", "<u4"), ("rows_offset", "<u4")])
assert HEADER_DTYPE.itemsize == 64
FIX = ("dump the whole buffer the kernel wrote (lapis_timeline.cuh buffer_bytes(rows, capacity) bytes, zeroed "
       "before the launch), after the launch finished")


def rows_offset(rows: int) -> int:
    """Bytes from the buffer's start to its first row: the header block and counts[rows], padded to 8 bytes."""
    return HEADER_DTYPE.itemsize + (4 * int(rows) + 7) // 8 * 8


def buffer_bytes(rows: int, capacity: int) -> int:
    """The buffer's size in bytes (lapis_timeline.cuh buffer_bytes)."""
    return rows_offset(rows) + int(rows) * int(capacity) * RECORD_DTYPE.itemsize


def sampled_ctas(h: dict) -> dict:
    """{row j: CTA} of the rows the header's sampling fills: CTA cta_first + j * cta_every, below grid_ctas,
    with bit (j % 64) of cta_mask set (lapis_timeline.cuh sampled_row)."""
    out = {}
    for j in range(h["rows"]):
        c = h["cta_first"] + j * h["cta_every"]
        if c < h["grid_ctas"] and (h["cta_mask"] >> (j % 64)) & 1:
            out[j] = c
    return out


def _fail(path, rule: str, value, fix: str = FIX) -> CaptureError:
    return CaptureError(rule, f"{path}: {value}", fix)


def parse_header(data: bytes, path="buffer") -> dict:
    """The header block of a buffer as a dict of ints, checked against the format and the buffer's length."""
    if len(data) < HEADER_DTYPE.itemsize:
        raise _fail(path, "a timeline buffer starts with its 64-byte header block", f"{len(data)} bytes (truncated)")
    raw = np.frombuffer(data[:HEADER_DTYPE.itemsize], HEADER_DTYPE)[0]
    if bytes(raw["magic"]) != MAGIC:
        raise _fail(path, f"a timeline buffer starts with the magic {MAGIC.decode()}", repr(bytes(raw["magic"])),
                    FIX + "; CTA 0 writes the header block at Recorder::finish (a trapped launch writes none)")
    h = {k: int(raw[k]) for k in HEADER_DTYPE.names if k != "magic"}
    checks = (("version", h["version"] == VERSION, f"version {VERSION}"),
              ("header_bytes", h["header_bytes"] == HEADER_DTYPE.itemsize, "64"),
              ("record_bytes", h["record_bytes"] == RECORD_DTYPE.itemsize, "24"),
              ("roles", 1 <= h["roles"] <= MAX_ROLES, f"1..{MAX_ROLES}"),
              ("capacity", h["capacity"] > ANCHOR_SLOTS, f"> {ANCHOR_SLOTS} (two anchors and a record)"),
              ("cta_every", h["cta_every"] >= 1, ">= 1"), ("iter_every", h["iter_every"] >= 1, ">= 1"),
              ("counts_offset", h["counts_offset"] == HEADER_DTYPE.itemsize, "64"),
              ("rows_offset", h["rows_offset"] == rows_offset(h["rows"]), f"{rows_offset(h['rows'])} for "
               f"{h['rows']} rows"))
    for field, ok, want in checks:
        if not ok:
            raise _fail(path, f"header field {field} is {want}", f"{field} = {h[field]}")
    if h["rows"] * h["capacity"] * RECORD_DTYPE.itemsize > safe.LIMITS["array_bytes"]:
        raise _fail(path, f"a timeline's rows hold at most {safe.LIMITS['array_bytes']} bytes (lapis.captures.safe"
                    ".LIMITS)", f"{h['rows']} rows x {h['capacity']} slots", "sample fewer CTAs or records")
    want = buffer_bytes(h["rows"], h["capacity"])
    if len(data) != want:
        raise _fail(path, "a timeline buffer is as long as its header says (64 + counts + rows x capacity x 24 "
                    "bytes)", f"{len(data)} bytes, the header says {want}" + (" (truncated)" if len(data) < want
                                                                              else " (trailing bytes)"))
    return h


def harness_buffer(raw: np.ndarray, counts: np.ndarray, roles: int, cta_every: int = 1, iter_every: int = 1) -> bytes:
    """Rows of a lapis kernel (harness.cuh, one per CTA, as read back from the device: RECORD_DTYPE [ctas,
    capacity], t_ns in cycles; counts uint32 [ctas]) as this format's buffer, so `decode` reads them: the same
    rows with a header block in front (cta_first 0, every mask bit set). With -DLAPIS_TIMELINE_CTA_EVERY=N
    (cta_every) only every Nth CTA's row is kept: the others hold anchors only."""
    raw, counts = np.asarray(raw, RECORD_DTYPE), np.asarray(counts, np.uint32)
    if raw.ndim != 2 or counts.shape != raw.shape[:1] or cta_every < 1 or iter_every < 1:
        raise CaptureError("harness rows are RECORD_DTYPE [ctas, capacity] with one count per CTA, sampled every "
                           ">= 1 CTA and iteration", f"rows {raw.shape}, counts {counts.shape}, cta_every "
                           f"{cta_every}, iter_every {iter_every}", "pass the rows and counts as read back")
    rows, ro = raw[::cta_every], rows_offset(-(-raw.shape[0] // cta_every))
    head = np.zeros((), HEADER_DTYPE)
    head["magic"], head["version"], head["header_bytes"], head["record_bytes"] = MAGIC, VERSION, 64, 24
    head["capacity"], head["rows"], head["roles"], head["grid_ctas"] = raw.shape[1], rows.shape[0], roles, raw.shape[0]
    head["cta_every"], head["iter_every"], head["cta_mask"] = cta_every, iter_every, (1 << 64) - 1
    head["counts_offset"], head["rows_offset"] = 64, ro
    cnt = counts[::cta_every].astype("<u4").tobytes()
    return head.tobytes() + cnt + bytes(ro - 64 - len(cnt)) + np.ascontiguousarray(rows).tobytes()


def _check_rows(path, h: dict, raw: np.ndarray, counts: np.ndarray, used: dict) -> None:
    """Rows outside the sampling are empty; each sampled row's records sit in their role's slots, name its CTA,
    and none was lost to overflow."""
    unused = np.setdiff1d(np.arange(h["rows"]), np.fromiter(used, int, len(used)))
    if unused.size and (counts[unused].any() or raw[unused].view(np.uint8).any()):
        j = int(next(j for j in unused if counts[j] or raw[j].view(np.uint8).any()))
        raise _fail(path, "rows the header's sampling leaves out stay zero", f"row {j} holds data")
    for j, c in used.items():
        row = raw[j, 1:-1]
        filled = row.view(np.uint8).reshape(row.size, -1).any(axis=1)
        slots = np.flatnonzero(filled)
        bad = slots[(row["cta"][slots] != c) | (row["role"][slots] != slots % h["roles"])
                    | ((row["op"][slots] & 0x7F) == ANCHOR_OP)]
        if bad.size:
            s = int(bad[0])
            raise _fail(path, "record slot 1 + i of a row holds role i % roles of the row's CTA (not an anchor)",
                        f"row {j} (CTA {c}) slot {s + 1}: role {int(row['role'][s])}, CTA {int(row['cta'][s])}, "
                        f"op {int(row['op'][s]):#x}")
        if counts[j] < slots.size:
            raise _fail(path, "counts[j] (records attempted) is at least the records written in row j",
                        f"row {j} (CTA {c}): count {int(counts[j])}, {slots.size} written")
        if counts[j] > slots.size:
            raise _fail(path, "no record overflowed its row (records past a role's share are counted, not written)",
                        f"row {j} (CTA {c}): {int(counts[j])} records attempted, {slots.size} written",
                        "give each role more slots (lapis_timeline.cuh make_args per_role), or sample fewer "
                        "iterations (iter_every)")


def decode(data: bytes, roles=None, ops=None, path="buffer") -> dict:
    """A dumped buffer -> {header, events, ctas, clock_mhz, t0_ns, roles, ops} (module docstring).

    roles / ops: names by code (default "role<r>" / "op<o>"). A record closes its role's span that opened at the
    role's previous record (op 0, BEGIN, only opens); the span is an "issue" span or, with the kind bit
    (KIND_COMPLETE), a "wait" span. With iter_every > 1 a span is kept only when it opened at a BEGIN record or
    at a record of the same k_index, so no span straddles a skipped iteration. Raises CaptureError (module
    docstring)."""
    h = parse_header(data, path)
    counts = np.frombuffer(data, "<u4", h["rows"], h["counts_offset"]).copy()
    raw = np.frombuffer(data, RECORD_DTYPE, h["rows"] * h["capacity"], h["rows_offset"]).reshape(
        h["rows"], h["capacity"]).copy()
    used = sampled_ctas(h)
    _check_rows(path, h, raw, counts, used)
    rows = np.fromiter(used, int, len(used))
    a0, a1 = raw[rows, 0], raw[rows, -1]
    bad = np.flatnonzero((a0["op"] != ANCHOR_OP) | (a1["op"] != ANCHOR_OP) | (a0["role"] != ANCHOR_ROLE)
                         | (a1["role"] != ANCHOR_ROLE) | (a0["cta"] != a1["cta"])
                         | (a0["cta"] != np.fromiter(used.values(), np.uint32, len(used))))
    if bad.size:
        j = int(rows[bad[0]])
        raise _fail(path, "each sampled row opens and closes with its CTA's clock anchors (op 0x7F, role 0xFF)",
                    f"row {j} (CTA {used[j]}): ops {int(a0['op'][bad[0]]):#x}, {int(a1['op'][bad[0]]):#x}, CTAs "
                    f"{int(a0['cta'][bad[0]])}, {int(a1['cta'][bad[0]])}",
                    FIX + "; every sampled CTA calls Recorder::init and Recorder::finish")
    try:
        records, mhz = anchored_to_ns(raw[rows], counts[rows])
    except CaptureError as exc:
        raise _fail(path, exc.rule, exc.value, exc.fix) from None
    roles = list(roles) if roles else [f"role{r}" for r in range(h["roles"])]
    ops = list(ops) if ops else [f"op{o}" for o in range(ANCHOR_OP)]
    out = _spans(records, counts[rows], roles, ops, h["iter_every"], path)
    return dict(header=h, ctas=[int(c) for c in used.values()],
                clock_mhz={int(c): float(m) for c, m in zip(used.values(), mhz)}, roles=roles, ops=ops, **out)


def _spans(records: np.ndarray, counts: np.ndarray, roles: list, ops: list, iter_every: int, path) -> dict:
    """Records (anchored, each row's records first) -> span events in ns from the earliest record."""
    flat = records[np.arange(records.shape[1])[None, :] < counts[:, None]]
    t0 = int(flat["t_ns"].min()) if flat.size else 0
    events, last = [], {}
    for r in flat:
        role, code, k = int(r["role"]), int(r["op"]) & 0x7F, int(r["k_index"])
        if role >= len(roles) or code >= len(ops):
            raise _fail(path, "every role and op code has a name", f"role {role}, op {code} (names for "
                        f"{len(roles)} roles and {len(ops)} ops)", "list every code's name in the file's meta")
        key, t = (int(r["cta"]), role), int(r["t_ns"]) - t0
        prev = last.get(key)
        if prev is not None and code != BEGIN_OP and (iter_every == 1 or prev[1] == BEGIN_OP or prev[2] == k):
            events.append(dict(role=roles[role], op=ops[code], start_ns=float(prev[0]), end_ns=float(t),
                               sm=int(r["sm"]), cta=int(r["cta"]), work_item=int(r["work_item"]), k_index=k,
                               kind="wait" if int(r["op"]) & KIND_COMPLETE else "issue", flow_from=None,
                               id=len(events)))
        last[key] = (t, code, k)
    return dict(events=events, t0_ns=t0)


def _meta_json(blob, path) -> dict:
    try:
        meta = json.loads(bytes(np.asarray(blob, np.uint8)).decode())
    except (ValueError, TypeError) as exc:
        raise _fail(path, "the meta member is UTF-8 JSON", f"{exc.__class__.__name__}: {exc}",
                    "write meta as np.frombuffer(json.dumps(...).encode(), np.uint8)") from None
    if not isinstance(meta, dict):
        raise _fail(path, "the meta member is a JSON object", type(meta).__name__, "write a dict")
    for key in ("roles", "ops"):
        v = meta.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise _fail(path, f"meta's {key} is a list of names by code", repr(v)[:80], "list the names as strings")
    return meta


def read(path) -> dict:
    """Decode a dumped timeline file (.bin or .npz; module docstring) -> `decode`'s dict plus meta and file."""
    path = Path(path)
    if path.suffix == ".npz":
        with safe.Npz(path) as z:
            if "buffer" not in z:
                raise _fail(path, "a timeline .npz holds the buffer as the uint8 array 'buffer'",
                            f"members {z.files}", FIX)
            buf = z["buffer"]
            meta = _meta_json(z["meta"], path) if "meta" in z else {}
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise _fail(path, "'buffer' is a 1-D uint8 array", f"{buf.dtype} {buf.shape}", FIX)
        data = buf.tobytes()
    else:
        data = safe.read_bytes(path, limit=safe.LIMITS["archive_bytes"])
        side = path.with_suffix(".json")
        meta = safe.read_json(side, kind="timeline") if side.is_file() else {}
        meta = _meta_json(np.frombuffer(json.dumps(meta).encode(), np.uint8), side) if meta else {}
    out = decode(data, meta.get("roles"), meta.get("ops"), path)
    out.update(meta=meta, file=str(path))
    return out
