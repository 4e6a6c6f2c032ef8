"""CuTe layouts as CuTe prints them, and whether they are canonical.

Accepted forms (CuTe's printer; `_8` is a static 8):
  Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)
  Sw<3,4,3> o (_8,_64):(_64,_1)            with an element type given separately (--dtype)
Units, as in CuTe: strides count elements; the swizzle acts on shared-memory byte addresses (the
`smem_ptr` in CuTe's GMMA/UMMA atoms), so Sw<3,4,3> is the 128B swizzle for any element width. Without
`smem_ptr[Nb]` the element width must come from the dtype; a swizzle that cannot act on 16 B chunks of
byte addresses (e.g. Sw<3,3,3>, the 128B swizzle written on 2-byte element offsets) is rejected as
ambiguous. Mode 0 is MN and mode 1 is K, as for a wgmma operand.
"""

from __future__ import annotations

import re

import numpy as np

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError
from lapis.layouts.canonical import CanonicalLayout, _layout_swizzle
from lapis.layouts.descriptors.agreement import ideal_descriptors
from lapis.layouts.dtypes import dtype as _dtype

_SW = {(0, 4, 3): "none", (1, 4, 3): "32B", (2, 4, 3): "64B", (3, 4, 3): "128B", (2, 5, 2): "128B_base32B"}
MAX_ELEMENTS = 65536  # a tile this large is compared element by element; larger ones are refused
SMEM_BYTES = SMEM_BYTES_PER_SM
_FORM = re.compile(r"^\s*(?:Sw<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\s*o\s*)?"
                   r"(?:smem_ptr\[(\d+)b\](?:\([^)]*\))?\s*o\s*)?(.+?)\s*:\s*(.+?)\s*$")
_HINT = "write it as CuTe prints a GMMA atom: Sw<B,4,3> o smem_ptr[16b](unset) o (MN,K):(stride_mn,stride_k)"


def parse_tuple(text: str):
    """'(_8,(_2,4))' -> (8, (2, 4)); '_64' -> 64."""
    tokens = re.findall(r"\(|\)|,|_?\d+|\S", text)
    pos = 0

    def item():
        nonlocal pos
        if pos >= len(tokens):
            raise LayoutError("CuTe layout: unexpected end", text, _HINT)
        t = tokens[pos]
        pos += 1
        if t == "(":
            parts = [item()]
            while tokens[pos] == ",":
                pos += 1
                parts.append(item())
            if tokens[pos] != ")":
                raise LayoutError("CuTe layout: expected ')'", text, _HINT)
            pos += 1
            return tuple(parts)
        if re.fullmatch(r"_?\d+", t):
            return int(t.lstrip("_"))
        raise LayoutError("CuTe layout: unexpected token", repr(t), _HINT)

    try:
        value = item()
    except IndexError:
        raise LayoutError("CuTe layout: unbalanced parentheses", text, _HINT) from None
    if pos != len(tokens):
        raise LayoutError("CuTe layout: trailing text", " ".join(tokens[pos:]), _HINT)
    return value


def parse(text: str, dtype: str | None = None) -> dict:
    """{swizzle, elem_bits, shape, stride} of a CuTe layout string (units: module docstring)."""
    m = _FORM.match(text)
    if not m:
        raise LayoutError("not a CuTe layout", repr(text), _HINT)
    b, mm, s, bits, shape, stride = m.groups()
    sw = (int(b), int(mm), int(s)) if b is not None else (0, 4, 3)
    if sw not in _SW:
        raise LayoutError("CuTe swizzle is not a canonical smem swizzle on byte addresses", f"Sw<{b},{mm},{s}>",
                          "use Sw<0..3,4,3> (none, 32B, 64B, 128B) or tcgen05's Sw<2,5,2>; the swizzle acts on byte "
                          "addresses (Sw<3,3,3> is the 128B swizzle written on 2-byte element offsets)")
    elem_bits = int(bits) if bits else None
    if dtype is not None:
        dt = _dtype(dtype)
        if elem_bits is not None and elem_bits != dt.bits:
            raise LayoutError("smem_ptr element width and --dtype disagree", f"{elem_bits}b vs {dt.name}",
                              "drop one of them or make them agree")
        elem_bits = dt.bits
    if elem_bits is None:
        raise LayoutError("CuTe layout units are ambiguous: no element width", repr(text),
                          "give smem_ptr[16b] in the layout or --dtype (strides are in elements)")
    shape, stride = parse_tuple(shape), parse_tuple(stride)
    if not (isinstance(shape, tuple) and isinstance(stride, tuple) and len(shape) == len(stride) == 2):
        raise LayoutError("a wgmma operand layout has two modes, (MN, K)", f"{shape}:{stride}",
                          "write (MN, K):(stride_mn, stride_k)")
    if not _congruent(shape, stride):
        raise LayoutError("CuTe shape and stride must have the same nesting", f"{shape}:{stride}",
                          "give one stride per shape entry")
    if any(n < 1 for n in _flat(shape)):
        raise LayoutError("CuTe shape entries must be positive", shape, "use extents >= 1")
    if _size(shape) > MAX_ELEMENTS:
        raise LayoutError("tile too large for shared memory", f"{_size(shape)} elements",
                          f"a wgmma/tcgen05 operand tile has at most {MAX_ELEMENTS} elements")
    reach = sum((n - 1) * st for n, st in zip(_flat(shape), _flat(stride)))
    if reach * (elem_bits // 8 or 1) >= SMEM_BYTES:
        raise LayoutError("the layout reaches past shared memory", f"{reach} elements from its start",
                          "strides are in elements; keep the tile inside 228 KiB")
    return dict(swizzle=_SW[sw], elem_bits=elem_bits, shape=shape, stride=stride)


def _size(mode) -> int:
    out = 1
    for n in _flat(mode):  # Python ints: no int64 wrap-around
        out *= n
    return out


def _congruent(a, b) -> bool:
    if isinstance(a, tuple) != isinstance(b, tuple):
        return False
    return not isinstance(a, tuple) or (len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b)))


def _flat(t):
    return [x for m in t for x in _flat(m)] if isinstance(t, tuple) else [t]


def canonical_match(text: str, dtype: str | None = None) -> dict:
    """Is the CuTe layout a canonical wgmma/tcgen05 layout? Returns {canonical, layout or None, reason, ...}.

    Compares the layout's element offsets over the whole tile with each canonical candidate (both majors,
    both atom orders) of the same swizzle, element width and extents.
    """
    p = parse(text, dtype)
    dt = dtype or {8: "u8", 16: "bf16", 32: "f32"}.get(p["elem_bits"])
    if dt is None:
        raise LayoutError("unsupported element width", f"{p['elem_bits']}b", "use 8, 16 or 32-bit elements")
    rows, cols = _size(p["shape"][0]), _size(p["shape"][1])
    offsets = element_offsets(p)
    e = p["elem_bits"] // 8
    mn, k = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    reasons = []
    for major in ("K", "MN"):
        for order in ("mn-first", "k-first"):
            try:
                cand = CanonicalLayout(major, p["swizzle"], dt, rows, cols, order)
            except LayoutError as exc:
                reasons.append(f"{major}-major: {exc.rule}")
                continue
            diff = np.argwhere(cand.offset_bytes(mn, k) != offsets * e)
            if not diff.size:
                return dict(canonical=True, layout=cand, major=major, order=order, parsed=p, offsets=offsets)
            r, c = (int(v) for v in diff[0])
            reasons.append(f"{major}-major {order}: element ({r}, {c}) is at {offsets[r, c] * e} B, the canonical "
                           f"layout puts it at {int(cand.offset_bytes(r, c))} B")
    padded = _canonical_with_free_strides(p, offsets, e)
    if padded:
        return dict(canonical=True, layout=None, major=padded, order=None, parsed=p, offsets=offsets,
                    reason="canonical with LBO/SBO other than the dense atom stacking (atoms padded or spread)")
    return dict(canonical=False, layout=None, parsed=p, offsets=offsets,
                reason="; ".join(dict.fromkeys(reasons)) or "no canonical candidate")


def element_offsets(p: dict) -> np.ndarray:
    """(MN, K) element offsets of a parsed layout, computed mode by mode (exact Python ints)."""
    def mode_offsets(shape, stride):
        idx = np.arange(_size(shape), dtype=np.int64)
        shape, stride = _flat(shape), _flat(stride)
        out = np.zeros_like(idx)
        for n, st in zip(shape, stride):  # CuTe's colexicographic order: the first entry varies fastest
            out += (idx % n) * st
            idx //= n
        return out
    return mode_offsets(p["shape"][0], p["stride"][0])[:, None] + mode_offsets(p["shape"][1], p["stride"][1])[None]


def placement(p: dict, offsets: np.ndarray, base: int) -> dict:
    """{absolute smem address: (mn, k)} of a parsed layout at `base` (the swizzle on absolute byte addresses)."""
    sw = _layout_swizzle(p["swizzle"])
    e = p["elem_bits"] // 8
    addr = np.asarray(sw.apply(base + offsets * e), dtype=np.int64)
    rows, cols = offsets.shape
    return {int(addr[r, k]): (r, k) for r in range(rows) for k in range(cols)}


def _canonical_with_free_strides(p, offsets, e):
    """The major-ness if some descriptor (any LBO/SBO) reads every K-step of the tile as laid out, else None."""
    where = placement(p, offsets, 0)
    rows, cols = offsets.shape
    steps = cols * e // 32
    if steps < 1 or rows % 8:
        return None
    for major in ("K", "MN"):
        if ideal_descriptors(where, p["swizzle"], major, rows, e, steps) is not None:
            return major
    return None
