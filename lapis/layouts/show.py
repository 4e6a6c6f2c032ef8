"""Printing a canonical layout and its sm90 descriptor: `lapis layout show|desc|decode`.

Everything here is a view of `lapis.layouts.canonical` and
`lapis.layouts.descriptors.sm90`; no layout rule lives in this module. Units:

- addresses: absolute shared-memory bytes (the tile sits at `base`);
- mn, k, atom shapes: elements;
- enc: the descriptor's encoding, bytes >> 4 (16-B units).

LBO/SBO roles are quoted from PTX ISA 9.7.15.5.1.2.1.1 ("Leading dimension byte
offset") and 9.7.15.5.1.2.1.2 ("Stride dimension byte offset"); the byte map
shows which logical 16-B chunk each 16-B smem chunk holds after the swizzle
(PTX ISA 5.5.7).
"""

from __future__ import annotations


import numpy as np

from lapis.layouts.canonical import CanonicalLayout, library_swizzle
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, base_offset_for, descriptor_for
from lapis.layouts.descriptors.sm100 import umma_descriptor_for

__all__ = [
    "UNITS",
    "describe",
    "cute_call",
    "ptx_modes",
    "format_text",
    "lbo_role",
    "sbo_role",
    "k_steps",
    "map_line_bytes",
    "chunk_map",
    "chunk_label",
    "describe_descriptor",
    "cli_show",
    "cli_desc",
    "cli_decode",
]

UNITS = "addresses: absolute smem bytes; mn, k, atom shape: elements; enc = bytes >> 4 (16-B units)"
K_STEP_BYTES = 32  # K bytes one wgmma consumes: bf16 K=16, fp8 K=32, tf32 K=8
CHUNK = 16  # bytes the swizzle permutes as a unit
MAP_LINES = 16  # byte-map lines printed by format_text


# ---------------------------------------------------------------------------
# LBO / SBO in PTX's words (PTX ISA 9.7.15.5.1.2.1.1 and .2)
# ---------------------------------------------------------------------------


def lbo_role(layout: CanonicalLayout) -> str:
    """What the leading dimension byte offset means for this layout, PTX's words first."""
    s = layout.swizzle
    if layout.major == "K":
        if s.bits == 0:
            return ("K-major no-swizzle: offset from the first column to the second column of the 8x2 "
                    "core-matrix tile (K distance between core matrices)")
        return "unused for swizzled K-major (field = 1)"
    if s.bits == 0:
        return "MN-major interleave: offset from the first 8 columns to the next 8 columns (K distance between 8-row groups)"
    n = s.span_bytes // 16
    return (f"MN-major {s.name}: offset from the first {n} rows to the next {n} rows, PTX's rows being 16 B "
            f"units of MN (MN distance between {s.span_bytes} B swizzle atoms)")


def sbo_role(layout: CanonicalLayout) -> str:
    """What the stride dimension byte offset means for this layout, PTX's words first."""
    if layout.major == "K":
        return "K-major: offset from the first 8 rows to the next 8 rows (MN distance between 8-row groups)"
    if layout.swizzle.bits == 0:
        return ("MN-major interleave: offset from the first row to the next row "
                "(MN distance between 16-B groups of T elements)")
    g = layout.swizzle.rows
    return (f"MN-major {layout.swizzle.name}: offset from the first {g} columns to the next {g} columns "
            f"(K distance between {g}-row groups)")


# ---------------------------------------------------------------------------
# The two spellings of the tile's layout
# ---------------------------------------------------------------------------

# CUTLASS element types (cutlass/numeric_types.h) of lapis's dtypes, for the tile_to_shape call.
CUTLASS_TYPES = {"e4m3": "cutlass::float_e4m3_t", "e5m2": "cutlass::float_e5m2_t", "u8": "uint8_t", "s8": "int8_t",
                 "f16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t", "tf32": "cutlass::tfloat32_t", "f32": "float"}
_ATOM_NAMES = {"none": "INTER", "32B": "SW32", "64B": "SW64", "128B": "SW128"}


def cute_call(layout: CanonicalLayout) -> str:
    """The C++ CuTe call that builds the tile, e.g. `tile_to_shape(GMMA::Layout_K_SW128_Atom<bfloat16_t>{},
    Shape<_128,_64>{}, Step<_1,_2>{})` (atoms: cute/atom/mma_traits_sm90_gmma.hpp, mma_traits_sm100.hpp)."""
    t = CUTLASS_TYPES.get(layout.dtype.name, layout.dtype.name)
    if layout.swizzle.name == "128B_base32B":
        atom = f"UMMA::Layout_MN_SW128_32B_Atom<{t}>"
    else:
        atom = f"GMMA::Layout_{layout.major}_{_ATOM_NAMES[layout.swizzle.name]}_Atom<{t}>"
    step = "Step<_1,_2>" if layout.order == "mn-first" else "Step<_2,_1>"
    return f"tile_to_shape({atom}{{}}, Shape<_{layout.rows},_{layout.cols}>{{}}, {step}{{}})"


def ptx_modes(layout: CanonicalLayout) -> str:
    """What each mode of the PTX core-matrix form counts, e.g. `(8 rows, 16 MN atoms), (8 elements,
    8 16-B chunks, 2 K atoms)` for K-major (PTX ISA 9.7.15.5.1.2 canonical-layout table)."""
    (mn, k), _ = layout._shape_stride()
    rows = f"{layout.swizzle.rows} rows"
    if layout.major == "K":
        return f"({rows}, {mn[1]} MN atoms), ({k[0]} elements, {k[1]} 16-B chunks, {k[2]} K atoms)"
    return f"({mn[0]} elements, {mn[1]} 16-B chunks, {mn[2]} MN atoms), ({rows}, {k[1]} K atoms)"


# ---------------------------------------------------------------------------
# describe: everything about one tile, JSON-able
# ---------------------------------------------------------------------------


def k_steps(layout: CanonicalLayout, base: int = 0) -> list[dict]:
    """Start address (absolute bytes, pre-swizzle) of every MMA K-step, 32 B of K each.

    A tile whose K extent is not a whole number of steps gets a last, partial
    step (e.g. an MN-major bf16 tile with 8 K rows).
    """
    per = K_STEP_BYTES // layout.elem_bytes
    n = -(-layout.cols // per)
    return [{"step": i, "start_address": layout.kstep_start(i, base=base)} for i in range(n)]


def describe(layout: CanonicalLayout, base: int = 0) -> dict:
    """The tile's geometry, layout, LBO/SBO and K-steps as a JSON-able dict.

    `cute` is what C++ CuTe prints for the tile built by `cute_call`; `ptx_core_matrices` is the same map in
    PTX's core-matrix form (elements, pre-swizzle).

    Bytes are absolute smem addresses or byte distances; `encoded` is what the
    sm90 descriptor stores (bytes >> 4; LBO is written as 1 where PTX says it
    is unused). `base_offset` follows the PTX formula (PTX ISA 9.7.15.5.1.2.2).
    """
    d = any_descriptor(layout, base)  # validates base and the field ranges
    return {
        "major": layout.major,
        "swizzle": layout.swizzle.name,
        "dtype": layout.dtype.name,
        "rows": layout.rows,
        "cols": layout.cols,
        "order": layout.order,
        "base": base,
        "units": UNITS,
        "atom": {"shape": list(layout.atom_shape), "bytes": layout.atom_bytes},
        "cute": layout.cute(),
        "cute_call": cute_call(layout),
        "ptx_core_matrices": layout.ptx_text(),
        "footprint_bytes": layout.footprint_bytes,
        "lbo": {"bytes": layout.lbo_bytes if d.lbo else None, "encoded": d.lbo >> 4, "role": lbo_role(layout)},
        "sbo": {"bytes": layout.sbo_bytes if d.sbo else None, "encoded": d.sbo >> 4, "role": sbo_role(layout)},
        "k_step_elements": K_STEP_BYTES // layout.elem_bytes,
        "k_steps": k_steps(layout, base),
        "base_offset": 0,
        "base_offset_if_tile_anchored": base_offset_for(layout.swizzle, base),
        "repeat_bytes": layout.swizzle.repeat_bytes,
    }


# ---------------------------------------------------------------------------
# The chunk map: which logical 16-B chunk sits at each 16-B smem chunk
# ---------------------------------------------------------------------------


def map_line_bytes(layout: CanonicalLayout) -> int:
    """Bytes per drawn line: one swizzle span (one atom row); 128 B (one core matrix) without swizzle.

    Every swizzled atom is then 8 lines. Note the XOR's row index is address
    bits 7.. (128-B lines), so 64B/32B atom rows share their phase in pairs/fours.
    """
    return 128 if layout.swizzle.bits == 0 else layout.swizzle.span_bytes


def chunk_map(layout: CanonicalLayout, base: int = 0, lines: int | None = None):
    """Logical owner of every 16-B chunk of smem from the tile's first line.

    Lines are `map_line_bytes` wide and start at `base` rounded down to a line,
    so columns are absolute chunk positions. Returns (line_addrs, mn, k, inside):
    line_addrs (lines,) absolute bytes; mn, k (lines, chunks) elements of the
    chunk's first element (-1 outside the tile); inside (lines, chunks) bool.
    A chunk holds mn, k .. k+T-1 (K-major) or mn .. mn+T-1, k (MN-major).
    """
    w = map_line_bytes(layout)
    start = base - base % w
    total = -(-(base + layout.footprint_bytes - start) // w)
    n = total if lines is None else min(lines, total)
    addrs = start + np.arange(n * (w // CHUNK), dtype=np.int64) * CHUNK
    off = np.asarray(library_swizzle(layout.swizzle)(addrs)) - base  # the XOR is an involution
    inside = (off >= 0) & (off < layout.footprint_bytes)
    mn = np.full(addrs.shape, -1, dtype=np.int64)
    k = np.full(addrs.shape, -1, dtype=np.int64)
    if inside.any():
        mn[inside], k[inside] = layout.element_at(addrs[inside], base)
    shape = (n, w // CHUNK)
    return start + np.arange(n, dtype=np.int64) * w, mn.reshape(shape), k.reshape(shape), inside.reshape(shape)


def chunk_label(layout: CanonicalLayout, mn: int, k: int) -> str:
    """`r3:k16-23` (K-major: row mn, K elements) or `k3:mn8-15` (MN-major: K row, MN elements)."""
    t = layout.dtype.per_16b
    if layout.major == "K":
        return f"r{mn}:k{k}-{k + t - 1}"
    return f"k{k}:mn{mn}-{mn + t - 1}"


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------


def layout_title(layout: CanonicalLayout, base: int) -> str:
    return (f"{layout.major}-major {layout.swizzle.name} {layout.dtype.name} {layout.rows}x{layout.cols} "
            f"({layout.order}) at smem {base:#x}")


def _offset_line(name: str, byte_value: int | None, enc: int, role: str) -> str:
    # Unused: PTX's swizzled K-major LBO (written 1, as CUTLASS does), or a stride across a single group
    # (written 0, as CUTLASS does); the tensor core reads neither.
    shown = "unused" if byte_value is None else f"{byte_value} B ({byte_value:#x})"
    return f"{name}:  {shown:<18} enc {enc:<5} {role}"


def format_text(layout: CanonicalLayout, base: int = 0, lines: int | None = MAP_LINES) -> str:
    """A human printout: header, the layout as CuTe prints it and in PTX's core-matrix form, atom, LBO/SBO
    (bytes | enc), K-steps, byte map."""
    info = describe(layout, base)
    am, ak = layout.atom_shape
    steps = " ".join(f"{s['step']}:{s['start_address']:#x}" for s in info["k_steps"])
    out = [
        layout_title(layout, base),
        f"units: {UNITS}",
        f"CuTe (tile_to_shape): {info['cute']}",
        f"  = {info['cute_call']}",
        f"PTX core matrices:    {info['ptx_core_matrices']}",
        f"  = {ptx_modes(layout)}; elements, pre-swizzle",
        (f"atom:  {am} x {ak} (mn x k) = {layout.atom_bytes} B; {layout.atoms[0]} x {layout.atoms[1]} atoms; "
         f"footprint {layout.footprint_bytes} B; swizzle repeat {info['repeat_bytes']} B"),
        _offset_line("LBO", info["lbo"]["bytes"], info["lbo"]["encoded"], info["lbo"]["role"]),
        _offset_line("SBO", info["sbo"]["bytes"], info["sbo"]["encoded"], info["sbo"]["role"]),
        (f"base offset: 0 (the swizzle is on absolute addresses, as TMA writes it; H200: a non-zero field "
         f"shifts the pattern; {info['base_offset_if_tile_anchored']} only for a pattern anchored at the base)"),
        f"K-steps ({K_STEP_BYTES} B = {info['k_step_elements']} elements of K each), start addresses: {steps}",
        "",
    ]
    return "\n".join(out + _byte_map_lines(layout, base, lines))


def _byte_map_lines(layout: CanonicalLayout, base: int, lines: int | None) -> list[str]:
    """The byte map, `lines` lines of it (None: all), with a marker for what is left out."""
    addrs, mn, k, inside = chunk_map(layout, base, lines)
    total = len(chunk_map(layout, base)[0]) if lines is not None else len(addrs)
    cells = [[chunk_label(layout, int(m), int(q)) if ok else "." for m, q, ok in zip(rm, rk, ri)]
             for rm, rk, ri in zip(mn, k, inside)]
    width = max(len(c) for row in cells for c in row)
    aw = len(f"{int(addrs[-1]):#x}")
    w = map_line_bytes(layout)
    what = "row mn:k elements" if layout.major == "K" else "K row k:mn elements"
    head = [(f"byte map: {len(addrs)} line(s) of {w} B from {int(addrs[0]):#x}; each cell is one 16-B smem chunk "
             f"and the logical chunk it holds ({what})"),
            " " * aw + "  " + " ".join(f"+{c * CHUNK:#04x}".ljust(width) for c in range(w // CHUNK))]
    body = [f"{int(a):#0{aw}x}  " + " ".join(c.ljust(width) for c in row).rstrip() for a, row in zip(addrs, cells)]
    more = [f"... {total - len(addrs)} more line(s): --lines all prints the whole tile"] if total > len(addrs) else []
    return head + body + more


# ---------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------


def describe_descriptor(d: WgmmaDescriptor) -> dict:
    """A descriptor as JSON: hex, value, swizzle and every field (bytes or null, encoded)."""
    return {
        "arch": "sm90" if isinstance(d, WgmmaDescriptor) else "sm100",
        "hex": f"{d.encode():#018x}",
        "value": d.encode(),
        "swizzle": d.swizzle.name,
        "fields": [f._asdict() for f in d.fields()],
    }


def any_descriptor(layout, base: int, step: int = 0):
    """The sm90 descriptor, or the sm100 one for tcgen05-only layouts (128B with 32 B atomicity)."""
    if layout.swizzle.name == "128B_base32B":
        return umma_descriptor_for(layout, base, step)
    return descriptor_for(layout, base, step, wgmma_operand=False)
