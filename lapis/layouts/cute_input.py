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

from lapis.errors import LayoutError
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.dtypes import dtype as _dtype

_SW = {(0, 4, 3): "none", (1, 4, 3): "32B", (2, 4, 3): "64B", (3, 4, 3): "128B"}
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
        raise LayoutError("CuTe swizzle must act on 16 B chunks of byte addresses (Sw<B,4,3>)", f"Sw<{b},{mm},{s}>",
                          "the swizzle in CuTe's smem layouts is on byte addresses: 128B is Sw<3,4,3> for every "
                          "element width (Sw<3,3,3> is the same swizzle on 2-byte element offsets)")
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
    return dict(swizzle=_SW[sw], elem_bits=elem_bits, shape=shape, stride=stride)


def _size(mode) -> int:
    return int(np.prod(_flat(mode)))


def _flat(t):
    return [x for m in t for x in _flat(m)] if isinstance(t, tuple) else [t]


def canonical_match(text: str, dtype: str | None = None) -> dict:
    """Is the CuTe layout a canonical wgmma/tcgen05 layout? Returns {canonical, layout or None, reason, ...}.

    Compares the layout's element offsets over the whole tile with each canonical candidate (both majors,
    both atom orders) of the same swizzle, element width and extents.
    """
    from tensor_layouts import Layout
    p = parse(text, dtype)
    dt = dtype or {8: "u8", 16: "bf16", 32: "f32"}.get(p["elem_bits"])
    if dt is None:
        raise LayoutError("unsupported element width", f"{p['elem_bits']}b", "use 8, 16 or 32-bit elements")
    rows, cols = _size(p["shape"][0]), _size(p["shape"][1])
    lay = Layout(p["shape"], p["stride"])
    mn, k = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    offsets = np.vectorize(lambda a, b: lay(int(a), int(b)))(mn, k) if rows * cols <= 65536 else None
    if offsets is None:
        raise LayoutError("tile too large to compare", f"{rows} x {cols}", "compare a smaller tile")
    e = p["elem_bits"] // 8
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
                return dict(canonical=True, layout=cand, major=major, order=order, parsed=p)
            r, c = (int(v) for v in diff[0])
            reasons.append(f"{major}-major {order}: element ({r}, {c}) is at {offsets[r, c] * e} B, the canonical "
                           f"layout puts it at {int(cand.offset_bytes(r, c))} B")
    return dict(canonical=False, layout=None, parsed=p,
                reason="; ".join(dict.fromkeys(reasons)) or "no canonical candidate")
