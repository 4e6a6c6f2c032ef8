"""The timeline wire format of harness.cuh: per-CTA rows of 24-byte records, and their decoding into events.

A record (RECORD_DTYPE, little-endian, C layout, 24 bytes): t_ns (SM cycles on the device, absolute
%globaltimer ns once anchored), cta, work_item, k_index, sm, role code, op code (bit 7, KIND_COMPLETE, marks an
observed completion). Each CTA row opens and closes with a clock anchor (op ANCHOR_OP) that pairs %clock64 with
%globaltimer. Source: lapis/gpu/kernels/harness.cuh (Timeline). Numpy only: it runs on any machine.
"""

from __future__ import annotations

import numpy as np

from lapis.errors import CaptureError

RECORD_DTYPE = np.dtype([("t_ns", "<u8"), ("cta", "<u4"), ("work_item", "<u4"), ("k_index", "<i4"),
                         ("sm", "<u2"), ("role", "u1"), ("op", "u1")])
KIND_COMPLETE = 0x80  # bit 7 of Record.op: the record is an observed completion (a wait returned)
# Clock anchors (harness.cuh ANCHOR): slot 0 and slot capacity-1 of each CTA's row pair %globaltimer ns
# (work_item low, k_index high 32 bits) with %clock64 cycles (t_ns). Kernels' op codes stay below ANCHOR_OP.
ANCHOR_OP, ANCHOR_ROLE, ANCHOR_SLOTS = 0x7F, 0xFF, 2
# Role codes a row interleaves (harness.cuh MAX_ROLES): record n of role r in slot 1 + r + roles * n.
MAX_ROLES = 8



def timeline_slots(capacity: int) -> int:
    """Slots per CTA row to allocate and pass as HarnessArgs.capacity: `capacity` record slots + ANCHOR_SLOTS."""
    return int(capacity) + ANCHOR_SLOTS


def role_slots(per_role: int, roles: int) -> int:
    """Record slots (timeline_slots' `capacity`) that hold `per_role` records of each of `roles` roles. Record n
    of role r goes to record slot r + roles * n (harness.cuh Timeline::record), so every role's share is
    `per_role` records only when the row has roles * per_role slots, whatever the other roles record."""
    return int(per_role) * int(roles)


def _holes(records: np.ndarray) -> np.ndarray:
    """bool, records' shape: all-zero records (slots no record reached: the host zeroed the rows)."""
    return ((records["t_ns"] == 0) & (records["cta"] == 0) & (records["work_item"] == 0) & (records["k_index"] == 0)
            & (records["sm"] == 0) & (records["role"] == 0) & (records["op"] == 0))


def written(records: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """bool [ctas, capacity]: the saved slots that hold records: within each CTA's count and not a hole.

    records: RECORD_DTYPE [ctas, capacity] as saved (anchored_to_ns: each row's records first); counts: uint32
    [ctas], records attempted. A CTA lost counts - written.sum(1) records to overflow. Rows saved before the
    roles were interleaved have no holes within their count, so this is the prefix min(counts, capacity)."""
    records, counts = np.asarray(records), np.asarray(counts)
    kept = np.minimum(counts, records.shape[1])
    return (np.arange(records.shape[1])[None, :] < kept[:, None]) & ~_holes(records)


def anchored_to_ns(raw: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device rows -> saved records: each CTA's %clock64 cycles mapped to %globaltimer ns; anchors dropped.

    raw: RECORD_DTYPE [ctas, slots] as the kernel wrote it (slot 0 and slot slots-1: the CTA's opening and
    closing anchors; records in slots 1.., the roles interleaved, holes all-zero; t_ns in SM cycles). counts:
    uint32 [ctas], records attempted (anchors excluded), unchanged by the conversion. Each row is compacted:
    its records move to the front in slot order (which keeps each role's records in their order), the holes
    to the back. Each record within the CTA's count then gets
    t_ns = g0 + round((c - c0) * (g1 - g0) / (c1 - c0)) from its CTA's anchors (c: cycles, g: ns; integer
    arithmetic, halves rounded up). Linear in between: assumes the SM clock constant over the CTA's life;
    %clock64 is per SM, hence per-CTA anchors (PTX ISA special registers %clock64, %globaltimer).
    Returns (records RECORD_DTYPE [ctas, slots - 2], t_ns absolute ns, slots past a CTA's count untouched,
    holes all-zero at the back;
    clock_mhz float64 [ctas], the CTA's mean SM clock, NaN when its anchors share one globaltimer tick).
    Raises CaptureError when a row lacks its anchors, or its clock did not advance between them.
    """
    raw, counts = np.asarray(raw), np.asarray(counts)
    if raw.ndim != 2 or raw.shape[1] < ANCHOR_SLOTS:
        raise CaptureError("timeline rows hold two anchor slots", f"shape {raw.shape}",
                           "allocate timeline_slots(capacity) records per CTA")
    a0, a1 = raw[:, 0], raw[:, -1]
    bad = np.flatnonzero((a0["op"] != ANCHOR_OP) | (a1["op"] != ANCHOR_OP))
    if bad.size:
        k = int(bad[0])
        raise CaptureError("each CTA row opens and closes with a clock anchor (op 0x7F)",
                           f"CTA {k}: first op {int(a0['op'][k]):#x}, last op {int(a1['op'][k]):#x}",
                           "pass timeline_slots(capacity) as HarnessArgs.capacity and read back after the kernel "
                           "ran Timeline::finish (a trapped launch writes no anchors)")

    def ns(a):
        return (a["work_item"].astype(np.int64) | (a["k_index"].astype(np.int64) << 32))

    c0, g0 = a0["t_ns"].astype(np.int64), ns(a0)
    dc, dg = a1["t_ns"].astype(np.int64) - c0, ns(a1) - g0
    # cycles x ns below 2^62 keeps the products in int64 (a CTA of ~2 s at 1.98 GHz reaches it)
    bad = np.flatnonzero((dc <= 0) | (dg < 0) | (dc.astype(np.float64) * dg >= 2.0 ** 62))
    if bad.size:
        k = int(bad[0])
        raise CaptureError("a CTA's closing anchor comes after its opening one (clock and globaltimer both "
                           "advance) and within ~1 s", f"CTA {k}: {int(dc[k])} cycles, {int(dg[k])} ns apart",
                           "call Timeline::init before the CTA's records and Timeline::finish after them")
    records = raw[:, 1:-1]
    records = np.take_along_axis(records, np.argsort(_holes(records), axis=1, kind="stable"), axis=1)
    valid = written(records, counts)
    c = records["t_ns"].astype(np.int64) - c0[:, None]
    t = g0[:, None] + (c * dg[:, None] + dc[:, None] // 2) // dc[:, None]
    records["t_ns"] = np.where(valid, t, records["t_ns"].astype(np.int64)).astype(np.uint64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mhz = np.where(dg > 0, 1e3 * dc / np.maximum(dg, 1), np.nan)
    return records, mhz


def decode_timeline(records: np.ndarray, counts: np.ndarray, roles, ops, t0_ns: int | None = None) -> dict:
    """Records -> simulator-schema events.

    records: RECORD_DTYPE array [ctas, capacity] as saved (anchored_to_ns; only each (CTA, role)'s order
    matters); counts: uint32 [ctas], records each CTA attempted (those not written overflowed: counted, not
    written). Slots past a CTA's count and holes (all-zero records) are skipped. roles/ops: names by code.
    Each record ends an activity of its role that began at the role's previous record (the first record of
    each role, op "start", only opens it). Its kind bit decides the span's kind: an issue record closes an
    "issue" span (the role was issuing: TMA, wgmma, stores); a completion record closes a "wait" span, whose
    end is when the completion (TMA bytes landed, wgmma done, slot released) was observed.
    Times: ns from t0_ns (default: the earliest record). Returns {events: [dict], overflow: {cta: lost}},
    lost = counts - records written (> 0 only).
    """
    records, counts = np.asarray(records), np.asarray(counts)
    valid = written(records, counts)
    flat = records[valid]  # row-major: CTA by CTA, each in slot order
    if t0_ns is None:
        t0_ns = int(flat["t_ns"].min()) if flat.size else 0
    events, last = [], {}
    # the fields as Python ints, column by column: reading a structured array record by record costs ~10x more
    columns = (flat[f].tolist() for f in ("cta", "role", "op", "t_ns", "sm", "work_item", "k_index"))
    for cta, role, op, t_ns, sm, work_item, k_index in zip(*columns):
        key = (cta, role)
        op_code, t = op & 0x7F, t_ns - t0_ns
        if key in last and op_code != 0:
            events.append(dict(role=roles[role], op=ops[op_code], start_ns=float(last[key]), end_ns=float(t),
                               sm=sm, cta=cta, work_item=work_item, k_index=k_index,
                               kind="wait" if op & KIND_COMPLETE else "issue", flow_from=None, id=len(events)))
        last[key] = t
    lost = counts.astype(np.int64) - valid.sum(axis=1)
    overflow = {int(c): int(n) for c, n in enumerate(lost) if n > 0}
    return dict(events=events, overflow=overflow, t0_ns=t0_ns)
