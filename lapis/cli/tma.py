"""`lapis tma check` and `lapis tma place`: the tensor-map rules and the placement of one box.

Lists on the command line are comma-separated and innermost-first, like the
driver's arrays: --dims and --box in elements, --strides in bytes (rank - 1 of
them, for dimensions 1..rank-1).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from lapis.errors import LayoutError
from lapis.layouts.tma import (
    INTERLEAVE_CODES,
    L2_CODES,
    OOB_CODES,
    SWIZZLE_CODES,
    TensorMap,
    boundary_warnings,
    check_lengths,
    place_box,
    tma_type,
)
from lapis.layouts.tma.rules import EncodeArgs, check

DEFAULT_ADDR = 0x7F0000000000  # a 256 B-aligned device pointer, when --addr is not given


def integer(text: str) -> int:
    """An argparse type: an integer in decimal or 0x hex that fits 64 bits (sizes, addresses, descriptors)."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer (decimal or 0x hex), got {text!r}") from None
    if not -(2**63) <= value < 2**64:
        raise argparse.ArgumentTypeError(f"expected a 64-bit value, got {text} (more than 64 bits)")
    return value


def ints(text: str) -> list[int]:
    """'64,8' -> [64, 8]; empty -> []. Accepts 0x hex and negative values."""
    if not text or not text.strip():
        return []
    try:
        return [int(t.strip(), 0) for t in text.split(",")]
    except ValueError:
        raise LayoutError("a list must be comma-separated integers", repr(text), "write e.g. 128,64 (no empty "
                          "entries)") from None


def add_map_args(p, required: bool = True) -> None:
    p.add_argument("--dtype", required=required, help="u8 u16 u32 s32 u64 s64 f16 f32 f64 bf16 f32_ftz tf32 tf32_ftz "
                   "16u4_align8b 16u4_align16b 16u6_align16b (e4m3, e5m2, s8 load as u8)")
    p.add_argument("--dims", required=required, help="tensor size per dimension, elements, innermost first: 128,64")
    p.add_argument("--strides", default="", help="bytes between consecutive indices of dims 1..rank-1, innermost "
                   "first: 256")
    p.add_argument("--box", required=required, help="box size per dimension, elements, innermost first: 64,8")
    p.add_argument("--elem-strides", help="traversal step per dimension, in elements, innermost first (default "
                   "all 1); [0] is ignored without interleave")
    p.add_argument("--interleave", default="none", choices=list(INTERLEAVE_CODES),
                   help="CU_TENSOR_MAP_INTERLEAVE_* (default none)")
    p.add_argument("--swizzle", default="none", choices=list(SWIZZLE_CODES),
                   help="CU_TENSOR_MAP_SWIZZLE_*: the smem swizzle span (default none)")
    p.add_argument("--l2", default="none", choices=list(L2_CODES), help="CU_TENSOR_MAP_L2_PROMOTION_* (default none)")
    p.add_argument("--oob", default="zero", choices=list(OOB_CODES),
                   help="out-of-bounds fill: zero, or nan (FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; float types only)")
    p.add_argument("--addr", type=integer, default=DEFAULT_ADDR,
                   help="global address of the tensor (default: a 256 B-aligned pointer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def encode_args(a) -> EncodeArgs:
    dims = ints(a.dims)
    es = ints(a.elem_strides) if a.elem_strides else [1] * len(dims)
    check_lengths(len(dims), len(ints(a.strides)), len(ints(a.box)), len(es),
                  ("--dims", "--strides", "--box", "--elem-strides"))
    return EncodeArgs(tma_type(a.dtype).code, len(dims), a.addr, dims, ints(a.strides), ints(a.box),
                      ints(a.elem_strides) if a.elem_strides else [1] * len(dims), INTERLEAVE_CODES[a.interleave],
                      SWIZZLE_CODES[a.swizzle], L2_CODES[a.l2], OOB_CODES[a.oob])


def cli_check(a) -> int:
    """`lapis tma check`: exit 0 when every rule holds, 1 when the driver would reject the map (a check found a
    problem), 2 on malformed input (a LapisError from the list parsing and length checks)."""
    violations = check(encode_args(a))
    if a.json:
        print(json.dumps({"ok": not violations, "units": "dims/box: elements; strides: bytes; innermost first",
                          "violations": [v.__dict__ for v in violations]}, indent=1))
    elif violations:
        print(f"cuTensorMapEncodeTiled would reject this tensor map ({len(violations)} rule(s)):")
        for v in violations:
            print(f"  - {v}")
    else:
        print("ok: every cuTensorMapEncodeTiled rule lapis knows holds (lapis tma place shows the smem layout)")
    return 1 if violations else 0


def tensor_map_from_args(a) -> TensorMap:
    """The TensorMap the map flags describe (LayoutError naming every broken encode rule)."""
    encode_args(a)  # list-length checks with flag names
    return TensorMap(a.dtype, ints(a.dims), ints(a.strides), ints(a.box), ints(a.elem_strides) or None,
                     a.interleave, a.swizzle, a.l2, a.oob)


def print_warnings(warnings) -> list[str]:
    """Each warning on stderr (stdout stays the result, parseable with --json); returns them as strings."""
    out = [str(w) for w in warnings]
    for w in out:
        print(w, file=sys.stderr)
    return out


def cli_place(a) -> int:
    """`lapis tma place`: exit 0 (a destination off its swizzle repeat boundary is a warning on stderr and in
    --json's "warnings"); 2 when the map is one the driver rejects (placement needs a map it takes)."""
    if check(encode_args(a)):
        cli_check(a)
        return 2
    tmap = tensor_map_from_args(a)
    p = place_box(tmap, ints(a.coords), a.smem_base)
    out = placement_summary(p)
    out["warnings"] = print_warnings(boundary_warnings(tmap.swizzle, [p.dst]))
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(format_placement(out))
    return 0


def placement_summary(p) -> dict:
    """Every loaded element's smem byte offset, and the footprint bytes TMA leaves untouched."""
    t, e = p.tmap, p.tmap.dtype.bytes
    idx = np.indices(p.smem_addr.shape).reshape(t.rank, -1)[::-1].T  # innermost-first box indices
    step = np.array((1,) + t.elem_strides[1:])
    written = np.zeros(t.smem_footprint, bool)
    offs = p.smem_addr.ravel() - p.dst
    for k in range(e):
        written[offs + k] = True
    elements = [dict(box_index=[int(x) for x in j], coords=[int(c) for c in np.array(p.coords) + j * step],
                     smem_offset=int(o), filled=bool(g < 0))
                for j, o, g in zip(idx, offs, p.global_offset.ravel())]
    return dict(units="smem_offset: bytes from --smem-base; coords: elements, innermost first",
                smem_base=p.dst, element_bytes=e, row_pitch=t.row_pitch, footprint_bytes=t.smem_footprint,
                box_bytes=t.box_bytes, filled_elements=int((p.global_offset < 0).sum()),
                untouched_ranges=_ranges(~written), elements=elements)


def _ranges(mask: np.ndarray) -> list[list[int]]:
    """[start, end) byte ranges where mask is true."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return [[int(s), int(t)] for s, t in zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0])]


def _some(ranges: list, n: int = 6) -> str:
    if not ranges:
        return "none"
    more = f" and {len(ranges) - n} more (--json lists all)" if len(ranges) > n else ""
    return ", ".join(f"[{a}, {b})" for a, b in ranges[:n]) + more


def format_placement(s: dict, max_rows: int = 16) -> str:
    lines = [f"box at smem {hex(s['smem_base'])}: {s['box_bytes']} B delivered over a {s['footprint_bytes']} B "
             f"footprint (row pitch {s['row_pitch']} B); {s['filled_elements']} elements out of bounds (filled); "
             f"untouched bytes: {_some(s['untouched_ranges'])}",
             "box_index (innermost first) -> tensor coords : smem byte offset"]
    for el in s["elements"][:max_rows]:
        tag = "  (filled)" if el["filled"] else ""
        lines.append(f"  {el['box_index']} -> {el['coords']} : +{el['smem_offset']}{tag}")
    if len(s["elements"]) > max_rows:
        lines.append(f"  ... {len(s['elements']) - max_rows} more (--json lists all)")
    return "\n".join(lines)
