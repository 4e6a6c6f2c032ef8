"""CuTe layouts as CuTe prints them, and whether they are canonical.

Accepted spellings (one layout, mode 0 MN and mode 1 K, as for a wgmma operand):
  C++ CuTe print():  Sw<3,4,3> o smem_ptr[16b](unset) o ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))
                     Sw<3,4,3> o _0 o (_8,_64):(_64,_1)           (operator<<, or composition(Swizzle, Layout))
  CuTe DSL:          S<3,4,3> o 0 o ((8,16),(64,2)):((64,512),(1,8192))
  pycute:            SW_3_4_3 o 0 o ((8, 16), (64, 2)):((64, 512), (1, 8192))
with or without the `smem_ptr[..](unset)` / `o 0 o` middle part, `_8` or `8`, any spaces; a layout without a
swizzle is `shape:stride`. Units, as in CuTe: strides count elements; the swizzle acts on shared-memory byte
addresses (the smem_ptr of CuTe's GMMA/UMMA atoms, cute/atom/mma_traits_sm90_gmma.hpp), so Sw<3,4,3> is the 128B
swizzle for any element width. Without `smem_ptr[Nb]` the element width must come from the dtype; a swizzle that
cannot act on 16 B chunks of byte addresses (e.g. Sw<3,3,3>, the 128B swizzle written on 2-byte element offsets)
is rejected as ambiguous.

The parser reads the text once, token by token (time linear in its length), and refuses text longer than
MAX_CHARS, tuples nested deeper than MAX_DEPTH and integers longer than MAX_DIGITS with a LayoutError naming the
limit. Shapes, strides and maps are then handled by tensor-layouts.
"""

from __future__ import annotations

import re

import numpy as np
from tensor_layouts import Layout, congruent, cosize, flatten, size

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError
from lapis.layouts.canonical import (SMEM_SWIZZLES, CanonicalLayout, _layout_swizzle, library_swizzle,
                                     mode_offsets, same_function)
from lapis.layouts.descriptors.agreement import ideal_descriptors
from lapis.layouts.dtypes import dtype as _dtype

MAX_ELEMENTS = 65536  # every element of the tile is placed for the descriptor checks; larger tiles are refused
MAX_CHARS = 65536  # a CuTe print of a whole shared-memory tile is a few hundred characters
MAX_DEPTH = 16  # tuple nesting; CuTe's smem tiles nest 2 or 3 levels
MAX_DIGITS = 100  # int() of a longer digit run is slow (and refused past 4300 digits); past shared memory anyway
SMEM_BYTES = SMEM_BYTES_PER_SM
_HINT = ("write it as CuTe prints it: Sw<B,4,3> o smem_ptr[16b](unset) o (MN,K):(stride_mn,stride_k) (C++), "
         "S<B,4,3> o 0 o ... (CuTe DSL) or SW_B_4_3 o 0 o ... (pycute)")
# One token per match; each alternative is a fixed word or a single run of digits, so scanning is linear.
_TOKEN = re.compile(r"\s*(?:(?P<sw>Sw<|S<)|SW_(?P<pb>\d+)_(?P<pm>\d+)_(?P<ps>\d+)"
                    r"|smem_ptr\[(?P<bits>\d+)b\](?:\(unset\))?|(?P<int>_?\d+)|(?P<o>o)"
                    r"|(?P<punct>[(),:>])|(?P<bad>\S))")


def _snippet(text: str, at: int = 0) -> str:
    """A short piece of the input around character `at`, for error messages."""
    piece = text[max(0, at - 20):at + 40]
    return f"{piece!r} at character {at}"


class _Tokens:
    """The tokens of a CuTe layout string: (kind, value, position); kind is sw, pysw, ptr, int, o, a punctuation
    character, or end."""

    def __init__(self, text: str):
        if len(text) > MAX_CHARS:
            raise LayoutError(f"CuTe layout: longer than {MAX_CHARS} characters", f"{len(text)} characters",
                              "give one layout as CuTe prints it (a whole smem tile is a few hundred characters)")
        self.text, self.items, self.i = text, [], 0
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup
            if kind == "bad":
                hint = "dynamic values (?) have no number: print the layout where they are known, or write them" \
                    if m.group("bad") == "?" else _HINT
                raise LayoutError("not a CuTe layout: unexpected character", _snippet(text, m.start("bad")), hint)
            if kind == "sw":
                self.items.append(("sw", m.group("sw"), m.start()))
            elif kind in ("pb", "pm", "ps"):
                self.items.append(("pysw", tuple(self._int(m.group(g), m.start()) for g in ("pb", "pm", "ps")),
                                   m.start()))
            elif kind == "bits":
                self.items.append(("ptr", self._int(m.group("bits"), m.start()), m.start()))
            elif kind == "int":
                self.items.append(("int", self._int(m.group("int").lstrip("_"), m.start()), m.start()))
            elif kind == "o":
                self.items.append(("o", "o", m.start()))
            else:
                self.items.append((m.group("punct"), m.group("punct"), m.start()))
        self.items.append(("end", "", len(text)))

    def _int(self, digits: str, at: int) -> int:
        if len(digits) > MAX_DIGITS:
            raise LayoutError(f"CuTe layout: an integer longer than {MAX_DIGITS} digits",
                              _snippet(self.text, at), "shapes and strides of a shared-memory tile are small")
        return int(digits)

    def peek(self, ahead: int = 0) -> str:
        return self.items[min(self.i + ahead, len(self.items) - 1)][0]

    def take(self, kind: str | None = None):
        k, v, at = self.items[self.i]
        if kind is not None and k != kind:
            want = {"end": "the end of the layout"}.get(kind, repr(kind))
            raise LayoutError(f"not a CuTe layout: expected {want}", _snippet(self.text, at), _HINT)
        self.i = min(self.i + 1, len(self.items) - 1)
        return v

    def int_tuple(self, depth: int = 0):
        """An integer or a parenthesized tuple of them, nested at most MAX_DEPTH deep."""
        if self.peek() == "int":
            return self.take()
        at = self.items[self.i][2]
        self.take("(")
        if depth >= MAX_DEPTH:
            raise LayoutError(f"CuTe layout: tuples nested deeper than {MAX_DEPTH} levels",
                              _snippet(self.text, at), "CuTe's smem tiles nest 2 or 3 levels; flatten the layout")
        parts = [self.int_tuple(depth + 1)]
        while self.peek() == ",":
            self.take(",")
            parts.append(self.int_tuple(depth + 1))
        self.take(")")
        return tuple(parts)


def parse_tuple(text: str):
    """'(_8,(_2,4))' -> (8, (2, 4)); '_64' -> 64."""
    tokens = _Tokens(text)
    value = tokens.int_tuple()
    tokens.take("end")
    return value


def _parse_form(text: str):
    """(swizzle (B, M, S) or None, smem_ptr bits or None, shape, stride) of a CuTe layout string."""
    t = _Tokens(text)
    sw = bits = None
    if t.peek() == "sw":
        t.take()
        b = t.take("int")
        t.take(",")
        m = t.take("int")
        t.take(",")
        s = t.take("int")
        t.take(">")
        sw = (b, m, s)
        t.take("o")
    elif t.peek() == "pysw":
        sw = t.take()
        t.take("o")
    if t.peek() == "ptr":
        bits = t.take()
        t.take("o")
    elif t.peek() == "int" and t.peek(1) == "o":  # the offset of composition(Swizzle, offset, Layout)
        at = t.items[t.i][2]
        if t.take() != 0:
            raise LayoutError("CuTe layout: a non-zero offset between the swizzle and the layout",
                              _snippet(text, at), "give the tile's smem address with --base / --smem-base "
                              "and an offset of 0 (the layout of the tile itself)")
        t.take("o")
    shape = t.int_tuple()
    t.take(":")
    stride = t.int_tuple()
    t.take("end")
    return sw, bits, shape, stride


def parse(text: str, dtype: str | None = None) -> dict:
    """{swizzle, elem_bits, shape, stride} of a CuTe layout string (spellings and units: module docstring)."""
    b, bits, shape, stride = _parse_form(text)
    sw = b if b is not None else (0, 4, 3)
    if sw not in SMEM_SWIZZLES:
        raise LayoutError("CuTe swizzle is not a canonical smem swizzle on byte addresses", "Sw<{},{},{}>".format(*sw),
                          "use Sw<0..3,4,3> (none, 32B, 64B, 128B) or tcgen05's Sw<2,5,2>; the swizzle acts on byte "
                          "addresses (Sw<3,3,3> is the 128B swizzle written on 2-byte element offsets)")
    elem_bits = bits
    if dtype is not None:
        dt = _dtype(dtype)
        if elem_bits is not None and elem_bits != dt.bits:
            raise LayoutError("smem_ptr element width and --dtype disagree", f"{elem_bits}b vs {dt.name}",
                              "drop one of them or make them agree")
        elem_bits = dt.bits
    if elem_bits is None:
        raise LayoutError("CuTe layout units are ambiguous: no element width", _snippet(text),
                          "give smem_ptr[16b] in the layout or --dtype (strides are in elements)")
    if not (isinstance(shape, tuple) and isinstance(stride, tuple) and len(shape) == len(stride) == 2):
        raise LayoutError("a wgmma operand layout has two modes, (MN, K)", f"{shape}:{stride}",
                          "write (MN, K):(stride_mn, stride_k)")
    if not congruent(shape, stride):
        raise LayoutError("CuTe shape and stride must have the same nesting", f"{shape}:{stride}",
                          "give one stride per shape entry")
    if any(n < 1 for n in flatten(shape)):
        raise LayoutError("CuTe shape entries must be positive", shape, "use extents >= 1")
    if size(shape) > MAX_ELEMENTS:
        raise LayoutError("tile too large for shared memory", f"{size(shape)} elements",
                          f"a wgmma/tcgen05 operand tile has at most {MAX_ELEMENTS} elements")
    reach = cosize(Layout(shape, stride)) - 1  # the largest element offset
    if reach * (elem_bits // 8 or 1) >= SMEM_BYTES:
        raise LayoutError("the layout reaches past shared memory", f"{reach} elements from its start",
                          "strides are in elements; keep the tile inside 228 KiB")
    return dict(swizzle=SMEM_SWIZZLES[sw], elem_bits=elem_bits, shape=shape, stride=stride)


def canonical_match(text: str, dtype: str | None = None) -> dict:
    """Is the CuTe layout a canonical wgmma/tcgen05 layout? Returns {canonical, layout or None, reason, ...}.

    Compares the layout's map with each canonical candidate (both majors, both atom orders) of the same
    swizzle, element width and extents (same_function: tensor-layouts coalesces each mode). A mismatch is
    reported at its first element in row-major (mn, k) order.
    """
    p = parse(text, dtype)
    dt = dtype or {8: "u8", 16: "bf16", 32: "f32"}.get(p["elem_bits"])
    if dt is None:
        raise LayoutError("unsupported element width", f"{p['elem_bits']}b", "use 8, 16 or 32-bit elements")
    given = Layout(p["shape"], p["stride"])
    rows, cols = size(p["shape"][0]), size(p["shape"][1])
    tables = mode_offsets(given)
    offsets = tables[0][:, None] + tables[1][None, :]
    e = p["elem_bits"] // 8
    reasons = []
    for major in ("K", "MN"):
        for order in ("mn-first", "k-first"):
            try:
                cand = CanonicalLayout(major, p["swizzle"], dt, rows, cols, order)
            except LayoutError as exc:
                reasons.append(f"{major}-major: {exc.rule}")
                continue
            if same_function(given, cand.layout):
                return dict(canonical=True, layout=cand, major=major, order=order, parsed=p, offsets=offsets)
            r, c = _first_difference(tables, mode_offsets(cand.layout))
            reasons.append(f"{major}-major {order}: element ({r}, {c}) is at {offsets[r, c] * e} B, the canonical "
                           f"layout puts it at {int(cand.offset_bytes(r, c))} B")
    padded = _canonical_with_free_strides(p, offsets, e)
    if padded:
        return dict(canonical=True, layout=None, major=padded, order=None, parsed=p, offsets=offsets,
                    reason="canonical with LBO/SBO other than the dense atom stacking (atoms padded or spread)")
    return dict(canonical=False, layout=None, parsed=p, offsets=offsets,
                reason="; ".join(dict.fromkeys(reasons)) or "no canonical candidate")


def _first_difference(a, b) -> tuple[int, int]:
    """The first (mn, k), row-major, where two layouts given by their mode tables differ.

    Offset(mn, k) = t0[mn] + t1[k] and t0[0] = t1[0] = 0, so row 0 differs exactly where the K tables do;
    if they agree, the first difference is in column 0, at the first MN index where the MN tables differ.
    """
    k = np.flatnonzero(a[1] != b[1])
    if k.size:
        return 0, int(k[0])
    return int(np.flatnonzero(a[0] != b[0])[0]), 0


def element_offsets(p: dict) -> np.ndarray:
    """(MN, K) element offsets of a parsed layout, evaluated by tensor-layouts mode by mode."""
    t0, t1 = mode_offsets(Layout(p["shape"], p["stride"]))
    return t0[:, None] + t1[None, :]


def placement(p: dict, offsets: np.ndarray, base: int) -> dict:
    """{absolute smem address: (mn, k)} of a parsed layout at `base` (the tensor-layouts Swizzle on absolute
    byte addresses)."""
    sw = library_swizzle(_layout_swizzle(p["swizzle"]))
    e = p["elem_bits"] // 8
    addr = np.asarray(sw(base + offsets * e), dtype=np.int64)
    rows, cols = offsets.shape
    return {int(addr[r, k]): (r, k) for r in range(rows) for k in range(cols)}


def _canonical_with_free_strides(p, offsets, e):
    """The major-ness if some descriptor (any LBO/SBO) reads every K-step of the tile as laid out, else None."""
    where = placement(p, offsets, 0)
    rows, cols = offsets.shape
    steps = cols * e // 32
    if steps < 1 or rows % 8:
        return None
    for major in ("MN",) if p["swizzle"] == "128B_base32B" else ("K", "MN"):  # 32 B atomicity: MN-major only
        if ideal_descriptors(where, p["swizzle"], major, rows, e, steps) is not None:
            return major
    return None
