"""What ldmatrix, ldmatrix.trans and LDS.128 read from a swizzled tile, lane by lane (`lapis layout check
--consumer`).

The consumer wants a row-major logical tile: element (r, c) at the un-swizzled byte offset r * pitch + c * e from
the buffer start `base` (e bytes per element, pitch bytes per row). It computes the swizzle XOR one of two ways:
- "absolute": on the shared-memory byte address, address = Swizzle(base + offset) (CuTe Swizzle<3,4,3> on the
  byte address, as CUTLASS does; the same XOR TMA applies, PTX ISA 5.5.7);
- "relative": on the offset from the buffer start, address = base + Swizzle(offset) (hand-written address math
  `row ^ col_chunk` with row counted from the buffer). This equals "absolute" only when base is on the swizzle
  repeat boundary (8 rows x the span).

Fragment/thread mappings (PTX ISA 9.7.14.5.15 ldmatrix, 16-bit elements; CUTLASS SM75_U32x4_LDSM_N/_T):
- ldmatrix .x4: four 8x8 matrices; matrix i covers rows 8 * (i % 2) .. +8 and columns 8 * (i // 2) .. +8 of
  the 16x16 tile at (row0, col0); lane 8 * i + j supplies the 16 B address of row j of matrix i. Lane t
  receives, in register i, row t // 4 and columns 2 * (t % 4) + h (h = 0, 1: the register's halves).
- ldmatrix .x4.trans: the same addresses; lane t receives, in register i, column t // 4 of rows 2 * (t % 4) + h
  (each 8x8 matrix transposed).
- LDS.128: thread t reads 16 B at the address of logical (row0 + t // n, col0 + (t % n) * 16 / e), n = the
  threads per tile row (pitch / 16); register j is bytes 4j .. 4j + 3.

The check compares what each lane reads with the logical element it wants and names the first wrong one.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from lapis.errors import LayoutError, as_int
from lapis.layouts.swizzle import SWIZZLES

CONSUMERS = ("ldmatrix", "ldmatrix.trans", "lds128")
XOR_MODES = ("absolute", "relative")
LANES = 32


@dataclass(frozen=True)
class ConsumerVerdict:
    """ok, or the first wrong element: lane, register (32-bit), half (the b16 within the register, ldmatrix;
    the element within the register, LDS), wanted (r, c) and read: the (r, c) found there, None for bytes the
    tile does not hold."""

    consumer: str
    xor: str
    ok: bool
    lane: int | None = None
    register: int | None = None
    half: int | None = None
    wanted: tuple | None = None
    read: tuple | None = None

    def summary(self) -> str:
        if self.ok:
            return f"{self.consumer} with the XOR on {self.xor} addresses reads every element it wants"
        got = f"element {self.read}" if self.read is not None else "bytes outside the tile"
        return (f"{self.consumer} with the XOR on {self.xor} addresses: lane {self.lane} register {self.register}"
                f" (element {self.half}) wants logical (row, col) {self.wanted} but reads {got}")


def consumer_address(r, c, base: int, pitch: int, elem_bytes: int, swizzle: str, xor: str) -> int:
    """The smem byte address the consumer computes for logical element (r, c)."""
    sw = SWIZZLES[swizzle]
    off = r * pitch + c * elem_bytes
    return int(sw.apply(base + off)) if xor == "absolute" else base + int(sw.apply(off))


def wanted_reads(consumer: str, pitch: int, elem_bytes: int, row0: int = 0, col0: int = 0):
    """(lane, register, element, wanted (r, c), (r, c) whose address the lane's read starts from, byte offset
    from that address) for every element one warp-wide instruction delivers."""
    if consumer.startswith("ldmatrix"):
        trans = consumer.endswith(".trans")
        for t in range(LANES):
            for i in range(4):
                for h in range(2):
                    rr, cc = (2 * (t % 4) + h, t // 4) if trans else (t // 4, 2 * (t % 4) + h)
                    r, c = row0 + rr + 8 * (i % 2), col0 + 8 * (i // 2)
                    yield t, i, h, (r, c + cc), (r, c), cc * elem_bytes
        return
    n = pitch // 16
    v = 16 // elem_bytes
    for t in range(LANES):
        r, c = row0 + t // n, col0 + (t % n) * v
        for k in range(v):
            yield t, k * elem_bytes // 4, k % max(1, 4 // elem_bytes), (r, c + k), (r, c), k * elem_bytes


def check_consumer(where: dict, consumer: str, xor: str, swizzle: str, base: int, pitch: int, elem_bytes: int,
                   row0: int = 0, col0: int = 0) -> ConsumerVerdict:
    """Does every lane of `consumer` read the logical element it wants from the placement `where` ({absolute
    smem address of an element's first byte: (r, c)}, e.g. lapis.layouts.descriptors.agreement.tile_map)?

    base: the buffer start the consumer counts from (bytes); pitch: its un-swizzled row pitch (bytes);
    swizzle: none, 32B, 64B or 128B. Raises LayoutError for an unknown consumer or XOR mode, ldmatrix on
    elements other than 16-bit, or a tile too small for one instruction; and for arguments of the wrong type
    (`where` empty or not {int: (int, int)}, a name that is not a string, a number that is not an integer,
    elem_bytes not 1, 2, 4 or 8).
    """
    _check_types(where, base, pitch, elem_bytes, row0, col0)
    _check_request(where, consumer, xor, swizzle, pitch, elem_bytes, row0, col0)
    for lane, reg, h, want, origin, extra in wanted_reads(consumer, pitch, elem_bytes, row0, col0):
        got = where.get(consumer_address(*origin, base, pitch, elem_bytes, swizzle, xor) + extra)
        if got != want:
            return ConsumerVerdict(consumer, xor, False, lane, reg, h, want, got)
    return ConsumerVerdict(consumer, xor, True)


def _whole(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_types(where, base, pitch, e, row0, col0) -> None:
    """LayoutError for arguments of the wrong type: `where` a non-empty {int address: (row, col)} dict, the
    rest integers, elem_bytes positive."""
    if not isinstance(where, dict) or not where:
        raise LayoutError("where is a non-empty dict {smem address: (row, col)} of a placed tile",
                          f"{type(where).__name__} of {len(where) if hasattr(where, '__len__') else '?'} entries",
                          "pass a tile placement, e.g. lapis.layouts.descriptors.agreement.tile_map(...)")
    for addr, rc in where.items():
        if not (_whole(addr) and isinstance(rc, tuple) and len(rc) == 2 and all(map(_whole, rc))):
            raise LayoutError("where maps integer smem addresses to (row, col) integer pairs",
                              f"{addr!r}: {rc!r}", "pass a tile placement, e.g. agreement.tile_map(...)")
    for name, v in (("base", base), ("pitch", pitch), ("elem_bytes", e), ("row0", row0), ("col0", col0)):
        as_int(v, name)
    if e not in (1, 2, 4, 8):
        raise LayoutError("elem_bytes is the element size in bytes: 1, 2, 4 or 8", repr(e), "e.g. 2 for bf16")


def _check_request(where, consumer, xor, swizzle, pitch, e, row0, col0) -> None:
    for name, v in (("consumer", consumer), ("xor", xor), ("swizzle", swizzle)):
        if not isinstance(v, str):
            raise LayoutError(f"{name} is a name (a string)", f"{type(v).__name__} {v!r}",
                              f"pass {name} as a string, e.g. "
                              + {"consumer": "'ldmatrix'", "xor": "'absolute'", "swizzle": "'128B'"}[name])
    if consumer not in CONSUMERS:
        raise LayoutError("unknown consumer", repr(consumer), "use one of " + ", ".join(CONSUMERS))
    if xor not in XOR_MODES:
        raise LayoutError("the consumer computes its XOR on absolute addresses or buffer-relative offsets",
                          repr(xor), "use absolute or relative")
    if swizzle not in SWIZZLES:
        raise LayoutError("consumer reads are modelled for the wgmma swizzle modes", repr(swizzle),
                          "use one of " + ", ".join(SWIZZLES))
    if consumer.startswith("ldmatrix") and e != 2:
        raise LayoutError("ldmatrix loads 8x8 matrices of 16-bit elements", f"{e}-byte elements",
                          "use LDS.128 (--consumer lds128) for other element sizes", "PTX ISA 9.7.14.5.15")
    if pitch % 16 or pitch <= 0:
        raise LayoutError("a consumer row pitch is a positive multiple of 16 B", pitch, "use the tile's row bytes")
    rows = 1 + max(r for r, _ in where.values())
    cols = 1 + max(c for _, c in where.values())
    need = (16, 16) if consumer.startswith("ldmatrix") else (LANES * 16 // pitch or 1, pitch // e)
    if row0 + need[0] > rows or col0 + need[1] > cols or row0 < 0 or col0 < 0:
        raise LayoutError(f"one {consumer} reads a {need[0]}x{need[1]} block the tile does not hold",
                          f"rows {row0}..{row0 + need[0] - 1}, cols {col0}..{col0 + need[1] - 1} of a "
                          f"{rows}x{cols} tile", "load a larger tile or move the block inside it")
