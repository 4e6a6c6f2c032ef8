"""Do the TMA loads and the MMA descriptors agree? (`lapis layout check`)

The TMA side decides where each element lands in shared memory; each wgmma
K-step reads through its descriptor. This module follows both models: it places
the tile with `tma.place_box`, reads it back with `mma_read.operand_addresses`,
and reports whether every K-step reads the intended logical elements. When not,
it names the first wrong element and the cause, by deriving the descriptor the
TMA plan calls for and trying each differing field: a field is an error exactly
when it changes what the MMA reads (a harmless difference, e.g. LBO on swizzled
K-major, which the H200 ignores, is reported as harmless).

Logical coordinates: (r, k) of the operand, r along M (A) or N (B). The tensor
map's dimension 0 is the contiguous logical axis: K for a K-major tile, MN for
an MN-major one; `origin` is the tile's corner in tensor coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import itemgetter

import numpy as np

from lapis.errors import LayoutError, as_int
from lapis.layouts.descriptors.mma_read import K_BYTES, operand_addresses
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
from lapis.layouts.descriptors.sm100 import UmmaDescriptor
from lapis.layouts.swizzle import B128_BASE32B, SWIZZLES
from lapis.layouts.tma import TensorMap, place_box


@dataclass
class StepVerdict:
    step: int
    ok: bool
    first_wrong: tuple | None = None  # (r, k) read wrongly
    read: tuple | None = None  # what was read there instead: (r, k), or None for bytes no box wrote
    causes: list = field(default_factory=list)  # (field, message) that change the read
    harmless: list = field(default_factory=list)  # (field, message) that differ but read the same


@dataclass
class Agreement:
    ok: bool
    steps: list

    def summary(self) -> str:
        lines = []
        for s in self.steps:
            if s.ok:
                lines.append(f"K-step {s.step}: reads the intended tile" +
                             (f" (harmless: {'; '.join(m for _, m in s.harmless)})" if s.harmless else ""))
            else:
                got = f"element {s.read}" if s.read else "bytes outside the tile"
                lines.append(f"K-step {s.step}: first wrong element {s.first_wrong} reads {got}; "
                             + ("; ".join(m for _, m in s.causes) or "cause not found among the descriptor fields"))
        return "\n".join(lines)


def tile_map(tmap: TensorMap, boxes: list, origin: tuple, major: str) -> dict:
    """{absolute smem address of an element's first byte: (r, k)} for the loaded tile."""
    where = {}
    for coords, dst in boxes:
        p = place_box(tmap, coords, dst)
        n = np.indices(p.smem_addr.shape).reshape(tmap.rank, -1)[::-1]  # innermost-first box indices
        g0 = coords[0] + n[0] - origin[0]
        g1 = coords[1] + n[1] * tmap.elem_strides[1] - origin[1]
        r, k = (g1, g0) if major == "K" else (g0, g1)
        # out-of-bounds elements are written too (zero or NaN fill); whole columns to Python ints at once
        where.update(zip(p.smem_addr.ravel().astype(np.int64).tolist(),
                         zip(r.astype(np.int64).tolist(), k.astype(np.int64).tolist())))
    return where


def cute_map(layout, base: int) -> dict:
    """{absolute smem address: (r, k)} of a canonical layout placed at `base` (e.g. parsed from CuTe)."""
    r, k = np.meshgrid(np.arange(layout.rows), np.arange(layout.cols), indexing="ij")
    addr = layout.address(r, k, base)
    return {int(a): (int(i), int(j)) for a, i, j in zip(addr.ravel(), r.ravel(), k.ravel())}


def check_reads(where: dict, swizzle: str, major: str, rows: int, descs: list, transpose: bool,
                elem_bytes: int, plan: str = "the TMA", arch: str = "sm90") -> Agreement:
    """The core check over any placement map {address: (r, k)} whose data follows `swizzle` at absolute addresses.

    Raises LayoutError when the request cannot be a wgmma: rows outside 8..256 (64 for A), more K-steps than the
    tile holds, more rows than the tile has, or a transposed read of a non-16-bit operand (sm90).
    """
    _check_request(where, rows, descs, transpose, elem_bytes, arch)
    ideal = ideal_descriptors(where, swizzle, major, rows, elem_bytes, len(descs), arch)
    steps = []
    for s, d in enumerate(descs):
        verdict = _step(where, d, s, rows, elem_bytes, transpose)
        if ideal is not None and not verdict.ok:
            _explain(verdict, where, d, ideal[s], s, rows, elem_bytes, transpose, major, plan)
        elif ideal is not None:  # reads as intended: any field that differs from the ideal is not read
            verdict.harmless = [(name, f"{name} {_show(getattr(d, name))} is not read here (the ideal "
                                       f"{_show(getattr(ideal[s], name))} reads the same)")
                                for name, _ in _field_changes(d, ideal[s], s, major, plan)]
        elif ideal is None and not verdict.ok:
            verdict.causes.append(("layout", f"{plan} does not lay the tile out canonically (no descriptor reads it "
                                             "as intended): check the box rows against the swizzle span"))
        steps.append(verdict)
    return Agreement(all(v.ok for v in steps), steps)


def _check_request(where, rows, descs, transpose, e, arch="sm90") -> None:
    rows = as_int(rows, "rows")
    if not (8 <= rows <= 256 and rows % 8 == 0):
        raise LayoutError("wgmma operand rows must be 64 (A) or N = 8..256 in steps of 8 (B)", rows,
                          "use --rows 64 for A or the instruction's N for B", "PTX ISA 9.7.15.5")
    tile_rows = 1 + max(where.values())[0]  # tuples compare by r first
    tile_k = 1 + max(map(itemgetter(1), where.values()))
    if rows > tile_rows:
        raise LayoutError("the MMA reads more rows than the tile holds", f"{rows} rows of a {tile_rows}-row tile",
                          f"use --rows <= {tile_rows} or load a taller tile")
    k_el = K_BYTES // e
    if len(descs) * k_el > tile_k:
        raise LayoutError("more K-steps than the tile holds", f"{len(descs)} descriptors x {k_el} elements of K "
                          f"for a K extent of {tile_k}", f"give at most {tile_k // k_el} descriptors")
    if transpose and e != 2 and arch == "sm90":
        raise LayoutError("sm90 wgmma transposes (imm-trans) only f16/bf16 operands", f"{e}-byte elements",
                          "load tf32 and fp8 operands K-major (tcgen05, --arch sm100, also transposes them)",
                          "PTX ISA 9.7.15.5.1")


def check_agreement(tmap: TensorMap, boxes: list, origin: tuple, major: str, rows: int, descs: list,
                    transpose: bool, arch: str = "sm90") -> Agreement:
    """Does K-step s of a wgmma reading through descs[s] see the tile the TMA boxes wrote?

    boxes: [(coords, dst)] loads into shared memory (absolute addresses, innermost-first coordinates);
    origin: tile corner in tensor coordinates; major: 'K' or 'MN' as the tile lies in global memory;
    rows: 64 for A, N for B; transpose: the instruction's imm-trans flag.
    """
    if tmap.rank != 2:
        raise LayoutError("the agreement checker takes 2-D tiles", f"rank {tmap.rank}", "use a rank-2 tensor map")
    return check_reads(tile_map(tmap, boxes, origin, major), tmap.swizzle, major, rows, descs, transpose,
                       tmap.dtype.bytes, "the TMA", arch)


def _reads(where, d, rows, e, transpose):
    addr = operand_addresses(d, rows, e, transpose)
    return [[where.get(a) for a in row] for row in np.asarray(addr).astype(np.int64).tolist()]


def _step(where, d, s, rows, e, transpose) -> StepVerdict:
    k_el = K_BYTES // e
    got = _reads(where, d, rows, e, transpose)
    for r in range(rows):
        for j in range(k_el):
            if got[r][j] != (r, s * k_el + j):
                return StepVerdict(s, False, (r, s * k_el + j), got[r][j])
    return StepVerdict(s, True)


def ideal_descriptors(where, swizzle: str, major, rows, e, steps, arch: str = "sm90"):
    """The descriptors the placement calls for, derived from where the tile landed and verified by reading the
    tile back through them; None if no descriptor reads it as intended (the placement is not canonical).
    Unused strides are 0 (CUTLASS's convention), swizzled K-major LBO 16 B (encoded 1)."""
    sw = B128_BASE32B if swizzle == B128_BASE32B.name else SWIZZLES.get(swizzle)
    if sw is None:
        return None
    # un-swizzled addresses (the XOR is an involution), every address in one numpy call
    pre = dict(zip(where.values(), sw.apply(np.fromiter(where, np.int64, len(where))).tolist()))
    k_el, t, g = K_BYTES // e, 16 // e, sw.rows

    def gap(a, b):
        return pre[b] - pre[a] if b in pre else 0  # a stride across a single group is unused: 0

    try:
        if major == "K":
            sbo = gap((0, 0), (8, 0)) if rows > 8 else 0
            lbo = gap((0, 0), (0, t)) if sw.bits == 0 else 16
        else:
            span_el = (sw.span_bytes // e) if sw.bits else t
            mn_step = gap((0, 0), (span_el, 0)) if rows > span_el else 0
            k_step = gap((0, 0), (0, g)) if k_el > g else 0
            sbo, lbo = (mn_step, k_step) if sw.bits == 0 else (k_step, mn_step)
        Desc = UmmaDescriptor if sw is B128_BASE32B or arch == "sm100" else WgmmaDescriptor
        ideal = [Desc(pre[(0, s * k_el)], lbo, sbo, 0, sw) for s in range(steps)]
    except (KeyError, LayoutError):
        return None
    ok = all(_step(where, d, s, rows, e, major == "MN").ok for s, d in enumerate(ideal))
    return ideal if ok else None


def _explain(v: StepVerdict, where, d, ideal, s, rows, e, transpose, major, plan) -> None:
    """Leave one out: start from the ideal descriptor and put back one of the user's differing fields; the field
    is a cause when that alone changes what the MMA reads, else harmless (the tensor core does not read it)."""
    want_trans = major == "MN"
    if transpose != want_trans:
        v.causes.append(("transpose", f"{plan} wrote a {major}-major tile but the instruction "
                                      f"{'transposes' if transpose else 'does not transpose'} (imm-trans must be "
                                      f"{int(want_trans)})"))
    good = _reads(where, ideal, rows, e, want_trans)
    for name, message in _field_changes(d, ideal, s, major, plan):
        mixed = replace(ideal, **{name: getattr(d, name)})
        changed = _reads(where, mixed, rows, e, want_trans) != good
        (v.causes if changed else v.harmless).append((name, message if changed else
                                                      f"{name} {_show(getattr(d, name))} is not read here"))


def _show(v) -> str:
    return v.name if hasattr(v, "name") else (hex(v) if isinstance(v, int) and v > 9 else str(v))


def _field_changes(d, ideal, s, major, plan):
    span, g = ideal.swizzle.span_bytes, ideal.swizzle.rows
    if d.swizzle != ideal.swizzle:
        yield "swizzle", f"descriptor swizzle {d.swizzle.name} but {plan} wrote {ideal.swizzle.name}"
    if d.sbo != ideal.sbo:
        why = f" = {g} rows x {span} B" if (major == "K" and ideal.swizzle.bits and ideal.sbo == g * span) else ""
        yield "sbo", f"SBO should be {ideal.sbo} B{why} (descriptor has {d.sbo} B)"
    if d.lbo != ideal.lbo:
        yield "lbo", f"LBO should be {ideal.lbo} B (descriptor has {d.lbo} B)"
    if d.start_address != ideal.start_address:
        yield "start_address", (
            f"K-step {s} start address must be {ideal.start_address:#x} (descriptor has {d.start_address:#x}; "
            f"each K-step advances {K_BYTES} B of K)")
    if d.base_offset != ideal.base_offset:
        yield "base_offset", (f"base offset must be 0, not {d.base_offset}: {plan} swizzles absolute addresses "
                              "and the H200 subtracts the field from the address row bits")
