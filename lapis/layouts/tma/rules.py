"""What `cuTensorMapEncodeTiled` accepts: named rules on the raw driver arguments.

The checker works on the integers the driver takes (`EncodeArgs`), not on a
`TensorMap`, so out-of-range values (swizzle=7, dtype=16, rank=0, interleave=-1)
come back as named violations instead of crashing a constructor.

Each rule is a small function registered in `RULES` under a stable kebab-case id;
its docstring says what it checks, and it records where the rule comes from:
the driver's own documentation (the comment above `cuTensorMapEncodeTiled`,
cuda.h of CUDA 13.0) or, where the documentation is silent or wrong, what the
H200 driver 580.159.04 did (capture lapis/data/captures/tma_encode/h200-2026-11-29,
627 parameter sets, replayed by tests/test_tma_rules.py with no disagreement).

- `check(args, sm=90)` lists every violated rule, `validate(args)` raises
  `EncodeRejected` (a LayoutError) naming them all.
- A rule that needs another argument's value (an element size, the interleave
  mode, box[0]) only runs when that argument is itself valid, so one bad value
  gives one violation, under the rule that owns it.
- Stricter variants report only their extra part: an address 8 B past a 32 B
  boundary breaks `global-address-16B`; one 16 B past breaks
  `global-address-32B-interleave32` (fixes name the full alignment needed).
- `ADVISORIES` holds documented requirements the driver does NOT enforce at
  encode time (observed on the H200); `advise(args)` lists them. They are not
  part of `check`, which predicts the driver's answer.
- Two rules are specific to sm_90 (`sm=90`, the default): the packed
  16U4/16U6 types and the 128B_ATOM_* swizzles are rejected there, whatever the
  other arguments. For other architectures they are not applied (no capture of them).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError, as_int
from lapis.layouts.tma.types import INTERLEAVE_CODES, L2_CODES, OOB_CODES, SWIZZLE_CODES, SWIZZLE_SPAN, TMA_TYPE_BY_CODE

DOC = "cuTensorMapEncodeTiled, cuda.h (CUDA 13.0)"
DRIVER = "580.159.04"
OBSERVED = f"observed on H200 driver {DRIVER}"
CAPTURE = "lapis/data/captures/tma_encode/h200-2026-11-29"

MAX_RANK = 5
MAX_DIM = 2**32
MAX_STRIDE = 2**40  # exclusive
MAX_BOX = 256
MAX_ELEM_STRIDE = 8

PACK8, PACK16, PACK6 = 13, 14, 15  # 16U4_ALIGN8B, 16U4_ALIGN16B, 16U6_ALIGN16B
PACKED = (PACK8, PACK16, PACK6)
PACKED_ALIGN16 = (PACK16, PACK6)
IL_NONE, IL_16B, IL_32B = 0, 1, 2
SW_NONE, SW_32B = 0, 1
SW_ATOMS = (4, 5, 6)  # 128B_ATOM_32B, 128B_ATOM_32B_FLIP_8B, 128B_ATOM_64B
# Swizzles cuda.h allows per packed type (16U6: load & store, 128B_ATOM_64B store only; 16U4_ALIGN16B: load only).
PACKED_SWIZZLES = {PACK6: (0, 3, 4, 6), PACK16: (0, 3, 4)}

_SW_NAME = {v: k for k, v in SWIZZLE_CODES.items()}
_IL_NAME = {v: k for k, v in INTERLEAVE_CODES.items()}


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class EncodeArgs:
    """The arguments of cuTensorMapEncodeTiled as raw integers, innermost dimension first.

    dtype, interleave, swizzle, l2, oob: CUtensorMap* enum codes (any int).
    global_address, map_address: byte addresses (only their alignment matters).
    dims, box, elem_strides: `rank` entries; strides: bytes, rank - 1 entries.
    For a rank outside 1..5 the lists are checked as given (any length).
    """

    dtype: int
    rank: int
    global_address: int
    dims: tuple
    strides: tuple
    box: tuple
    elem_strides: tuple
    interleave: int = 0
    swizzle: int = 0
    l2: int = 0
    oob: int = 0
    map_address: int = 0

    def __post_init__(self):
        # Read every value as the driver does: dims and strides are cuuint64_t, box, elem_strides and
        # the rank cuuint32_t, addresses 64-bit (so -128 arrives as 2^64 - 128); enums are C ints.
        for name, bits in (("dims", 64), ("strides", 64), ("box", 32), ("elem_strides", 32)):
            vals = getattr(self, name)
            if not isinstance(vals, (list, tuple)) and not hasattr(vals, "__iter__"):
                raise LayoutError(f"{name} must be a list of integers", repr(vals), f"pass a list for {name}")
            object.__setattr__(self, name, tuple(as_int(v, f"{name}[{i}]") % 2**bits for i, v in enumerate(vals)))
        for name, bits in (("rank", 32), ("global_address", 64), ("map_address", 64)):
            object.__setattr__(self, name, as_int(getattr(self, name), name) % 2**bits)
        for name in ("dtype", "interleave", "swizzle", "l2", "oob"):
            object.__setattr__(self, name, as_int(getattr(self, name), name))
        if self.rank_ok:  # the driver reads rank entries (rank - 1 strides) from each array
            short = [f"{n} has {len(getattr(self, n))}" for n, k in
                     (("dims", self.rank), ("strides", self.rank - 1), ("box", self.rank), ("elem_strides", self.rank))
                     if len(getattr(self, n)) < k]
            if short:
                raise LayoutError("EncodeArgs arrays shorter than the rank", f"rank {self.rank}: " + ", ".join(short),
                                  "pass rank entries for dims, box and elem_strides and rank - 1 strides")

    @classmethod
    def from_case(cls, case: dict, base: int = 0) -> EncodeArgs:
        """From one case of an encode capture (lapis/gpu/encode_campaign.py).

        The capture's pointers are `addr_offset` bytes past a 256 B-aligned allocation
        and `map_offset` past a 64 B-aligned CUtensorMap; `base` (256 B aligned) stands for both.
        """
        if base % 256:
            raise LayoutError("from_case base must be 256 B aligned", hex(base), "pass a multiple of 256")
        address = 0 if case.get("null_address") else base + case["addr_offset"]
        return cls(case["dtype"], case["rank"], address, case["dims"], case["strides"],
                   case["box"], case["elem_strides"], case["interleave"], case["swizzle"], case["l2"],
                   case["oob"], base + case.get("map_offset", 0))

    @classmethod
    def from_tensor_map(cls, tmap, global_address: int, map_address: int = 0) -> EncodeArgs:
        """The driver arguments that encode `tmap` (a lapis.layouts.tma.TensorMap) for a tensor at `global_address`."""
        return cls(tmap.dtype.code, tmap.rank, global_address, tmap.dims, tmap.strides, tmap.box,
                   tmap.elem_strides, INTERLEAVE_CODES[tmap.interleave], SWIZZLE_CODES[tmap.swizzle],
                   L2_CODES[tmap.l2], OOB_CODES[tmap.oob], map_address)

    # -- derived values, None where the argument they need is invalid --------

    @property
    def rank_ok(self) -> bool:
        return 1 <= self.rank <= MAX_RANK

    def _n(self, values: tuple, extra: int = 0) -> tuple:
        """The entries the driver reads: `rank (+ extra)` of them, or all given for an invalid rank."""
        return values[:self.rank + extra] if self.rank_ok else values

    @property
    def dims_used(self) -> tuple:
        return self._n(self.dims)

    @property
    def strides_used(self) -> tuple:
        return self._n(self.strides, -1)

    @property
    def box_used(self) -> tuple:
        return self._n(self.box)

    @property
    def elem_strides_used(self) -> tuple:
        return self._n(self.elem_strides)

    @property
    def dtype_ok(self) -> bool:
        return self.dtype in TMA_TYPE_BY_CODE

    @property
    def interleave_ok(self) -> bool:
        return self.interleave in _IL_NAME

    @property
    def swizzle_ok(self) -> bool:
        return self.swizzle in _SW_NAME

    @property
    def box0(self) -> int | None:
        """box[0] when it is present and within 1..256, else None."""
        b = self.box_used
        return b[0] if b and 1 <= b[0] <= MAX_BOX else None

    def inner_bytes(self, n: int) -> Fraction:
        """Bytes of n consecutive dimension-0 elements of the (valid) data type.

        16U4_ALIGN8B packs 16 values in 8 B; the ALIGN16B types spread 16 values over 16 B
        (cuda.h: 8 B / 12 B of data plus a gap), so one value per byte. Other types: their size.
        The packed sizes are a reading of cuda.h, unverified: sm_90 rejects these types outright.
        """
        if self.dtype == PACK8:
            return Fraction(n, 2)
        if self.dtype in PACKED_ALIGN16:
            return Fraction(n)
        return Fraction(n * TMA_TYPE_BY_CODE[self.dtype].bits, 8)

    def elem_bytes_text(self) -> str:
        t = TMA_TYPE_BY_CODE[self.dtype]
        if self.dtype == PACK8:
            return "1/2 B (16U4_ALIGN8B)"
        if self.dtype in PACKED_ALIGN16:
            return f"1 B ({t.name}: 16 values per 16 B)"
        return f"{t.bits // 8} B"


# ---------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Violation:
    """One broken rule: its id, the offending value (a sentence), the fix, and where the rule comes from."""

    rule: str
    value: str
    fix: str
    source: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.value}; fix: {self.fix} [{self.source}]"


@dataclass(frozen=True)
class Rule:
    """A named requirement of cuTensorMapEncodeTiled.

    source: DOC (cuda.h) or OBSERVED (a behaviour the documentation does not state).
    driver: the driver the rule was checked against (the H200 capture).
    sm: the architectures it applies to (None: all).
    """

    id: str
    doc: str
    source: str
    fn: Callable = field(repr=False)
    driver: str = DRIVER
    sm: tuple | None = None
    enforced: bool = True

    @property
    def observed(self) -> bool:
        return self.source == OBSERVED

    def applies(self, sm: int) -> bool:
        return self.sm is None or sm in self.sm

    def __call__(self, args: EncodeArgs) -> list[Violation]:
        return [Violation(self.id, value, fix, self.source) for value, fix in self.fn(args)]


RULES: dict[str, Rule] = {}
ADVISORIES: dict[str, Rule] = {}


def _rule(rule_id: str, source: str = DOC, sm: tuple | None = None, enforced: bool = True):
    """Register a rule. The function yields (value, fix) pairs, one per violation."""
    def deco(fn):
        table = RULES if enforced else ADVISORIES
        if rule_id in RULES or rule_id in ADVISORIES:
            raise ValueError(f"duplicate rule id {rule_id}")
        table[rule_id] = Rule(rule_id, inspect.cleandoc(fn.__doc__), source,
                              lambda a: list(fn(a)), sm=sm, enforced=enforced)
        return fn
    return deco


def _enum_rule(rule_id: str, what: str, codes: dict, attr: str):
    names = ", ".join(f"{v} ({k})" for k, v in codes.items())

    def fn(a):
        v = getattr(a, attr)
        if v not in codes.values():
            yield f"{what} = {v} is not a valid code", f"use one of {names}"
    fn.__doc__ = f"`{attr}` is a valid {what} enum code: {min(codes.values())}..{max(codes.values())}."
    _rule(rule_id)(fn)


def _first_below(v: int, m: int) -> int:
    return v - v % m


# -- the data type and the rank ----------------------------------------------

@_rule("dtype-enum")
def _dtype_enum(a):
    """`dtype` is a CUtensorMapDataType code: 0 (UINT8) .. 15 (16U6_ALIGN16B)."""
    if not a.dtype_ok:
        yield f"dtype = {a.dtype} is not a CUtensorMapDataType code", "use 0..15 (e.g. 6 FLOAT16, 9 BFLOAT16)"


@_rule("packed-type-unsupported-sm90", source=OBSERVED, sm=(90,))
def _packed_sm90(a):
    """The packed types 16U4_ALIGN8B, 16U4_ALIGN16B and 16U6_ALIGN16B (13, 14, 15) are rejected on sm_90.

    cuda.h lists them without an architecture; the H200 rejected all 117 capture cases
    using them, including the ones valid by every documented rule (e.g. cases 15-17).
    """
    if a.dtype in PACKED:
        yield (f"dtype = {a.dtype} ({TMA_TYPE_BY_CODE[a.dtype].name}) on sm_90",
               "unpack to UINT8 (2 x U4 per byte): sm_90 rejects the packed types")


@_rule("rank-range")
def _rank_range(a):
    """`rank` is 1..5."""
    if not a.rank_ok:
        yield f"rank = {a.rank} is outside 1..{MAX_RANK}", f"use 1..{MAX_RANK} dimensions (fold extra ones)"


# -- enums -------------------------------------------------------------------

_enum_rule("interleave-enum", "interleave", INTERLEAVE_CODES, "interleave")
_enum_rule("swizzle-enum", "swizzle", SWIZZLE_CODES, "swizzle")
_enum_rule("l2-promotion-enum", "L2 promotion", L2_CODES, "l2")
_enum_rule("oob-fill-enum", "OOB fill", OOB_CODES, "oob")


@_rule("swizzle-128B-atom-unsupported-sm90", source=OBSERVED, sm=(90,))
def _atom_sm90(a):
    """The 128B_ATOM_32B, 128B_ATOM_32B_FLIP_8B and 128B_ATOM_64B swizzles (4, 5, 6) are rejected on sm_90.

    cuda.h lists them without an architecture; the H200 rejected all 134 capture cases
    using them, including ones valid by every documented rule (e.g. case 233: f16 box[0] = 32, 64 B).
    """
    if a.swizzle in SW_ATOMS:
        yield f"swizzle = {a.swizzle} ({_SW_NAME[a.swizzle]}) on sm_90", "use 3 (128B) on Hopper"


@_rule("interleave-needs-rank-3")
def _interleave_rank(a):
    """With interleave 16B or 32B, `rank` is at least 3 (checked for ranks 1..5)."""
    if a.interleave_ok and a.interleave != IL_NONE and a.rank_ok and a.rank < 3:
        yield (f"interleave {_IL_NAME[a.interleave]} with rank {a.rank}",
               "add unit dimensions up to rank 3, or use interleave none")


# -- the global address --------------------------------------------------------

def _address_alignment(a) -> int:
    need = 16
    if a.interleave == IL_32B or a.dtype in PACKED_ALIGN16:
        need = 32
    return need


@_rule("global-address-16B")
def _addr16(a):
    """`global_address` is 16 B aligned."""
    if a.global_address % 16:
        need = _address_alignment(a)
        yield (f"global address {hex(a.global_address)} is not 16 B aligned (+{a.global_address % 16} B)",
               f"align the tensor's start to {need} B, e.g. {hex(_first_below(a.global_address, need))}")


@_rule("global-address-32B-interleave32")
def _addr32_il(a):
    """With interleave 32B, `global_address` is 32 B aligned (reported when it is 16 B but not 32 B aligned)."""
    if a.interleave == IL_32B and a.global_address % 16 == 0 and a.global_address % 32:
        yield (f"global address {hex(a.global_address)} is not 32 B aligned with interleave 32B",
               f"align the tensor's start to 32 B, e.g. {hex(_first_below(a.global_address, 32))}")


@_rule("global-address-32B-packed16")
def _addr32_packed(a):
    """With 16U4_ALIGN16B or 16U6_ALIGN16B, `global_address` is 32 B aligned (reported when 16 B but not 32 B)."""
    if a.dtype in PACKED_ALIGN16 and a.global_address % 16 == 0 and a.global_address % 32:
        name = TMA_TYPE_BY_CODE[a.dtype].name
        yield (f"global address {hex(a.global_address)} is not 32 B aligned with {name}",
               f"align the tensor's start to 32 B, e.g. {hex(_first_below(a.global_address, 32))}")


# -- global dimensions -------------------------------------------------------

@_rule("global-dim-range")
def _dim_range(a):
    """Every `dims[i]` is 1..2^32."""
    for i, d in enumerate(a.dims_used):
        if not 1 <= d <= MAX_DIM:
            yield f"dims[{i}] = {d} is outside 1..2^32", "use a non-zero size of at most 2^32 (split the tensor)"


@_rule("packed16-dim0-multiple-128")
def _dim0_packed16(a):
    """With 16U4_ALIGN16B or 16U6_ALIGN16B, `dims[0]` is a multiple of 128."""
    d = a.dims_used
    if a.dtype in PACKED_ALIGN16 and d and 1 <= d[0] <= MAX_DIM and d[0] % 128:
        yield (f"dims[0] = {d[0]} is not a multiple of 128 for {TMA_TYPE_BY_CODE[a.dtype].name}",
               f"pad dims[0] to {d[0] + 128 - d[0] % 128}")


@_rule("packed8-dim0-even")
def _dim0_packed8(a):
    """With 16U4_ALIGN8B, `dims[0]` is even."""
    d = a.dims_used
    if a.dtype == PACK8 and d and 1 <= d[0] <= MAX_DIM and d[0] % 2:
        yield f"dims[0] = {d[0]} is odd for 16u4_align8b", f"pad dims[0] to {d[0] + 1}"


# -- global strides ----------------------------------------------------------

@_rule("stride-multiple-16")
def _stride16(a):
    """Every `strides[i]` (bytes) is a multiple of 16."""
    need = 32 if (a.interleave == IL_32B or a.dtype in PACKED_ALIGN16) else 16
    for i, s in enumerate(a.strides_used):
        if s % 16:
            yield (f"strides[{i}] = {s} B is not a multiple of 16 B",
                   f"pad the row pitch to a multiple of {need} B, e.g. {s + need - s % need}")


@_rule("stride-below-2^40")
def _stride_max(a):
    """Every `strides[i]` is below 2^40 bytes."""
    for i, s in enumerate(a.strides_used):
        if s >= 2**63:
            yield (f"strides[{i}] = {s - 2**64} B is negative (the driver reads it as cuuint64_t {s})",
                   "use positive strides; flip the dimension by moving the base address instead")
        elif s >= MAX_STRIDE:
            yield f"strides[{i}] = {s} B is not below 2^40 B", "split the tensor so no stride reaches 1 TiB"


@_rule("stride-multiple-32-interleave32")
def _stride32_il(a):
    """With interleave 32B, every stride is a multiple of 32 B (reported for multiples of 16 that are not of 32)."""
    if a.interleave == IL_32B:
        for i, s in enumerate(a.strides_used):
            if s % 16 == 0 and s % 32:
                yield (f"strides[{i}] = {s} B is not a multiple of 32 B with interleave 32B",
                       f"pad it to {s + 16}")


@_rule("stride-multiple-32-packed16")
def _stride32_packed(a):
    """With 16U4_ALIGN16B or 16U6_ALIGN16B, every stride is a multiple of 32 B (reported as above)."""
    if a.dtype in PACKED_ALIGN16:
        for i, s in enumerate(a.strides_used):
            if s % 16 == 0 and s % 32:
                yield (f"strides[{i}] = {s} B is not a multiple of 32 B for {TMA_TYPE_BY_CODE[a.dtype].name}",
                       f"pad it to {s + 16}")


# -- the box -----------------------------------------------------------------

@_rule("box-range")
def _box_range(a):
    """Every `box[i]` is 1..256."""
    for i, b in enumerate(a.box_used):
        if not 1 <= b <= MAX_BOX:
            yield f"box[{i}] = {b} is outside 1..{MAX_BOX}", f"use a box of 1..{MAX_BOX} elements and loop over boxes"


@_rule("box0-bytes-multiple-16")
def _box0_bytes(a):
    """box[0] x element size is a multiple of 16 B. cuda.h states it for interleave none; the H200 driver
    enforces it for 16B and 32B interleave too (capture h200-2026-11-29-c: f16 box[0] 4, 6, 12 rejected)."""
    b0 = a.box0
    if b0 is None or not a.dtype_ok or not a.interleave_ok:
        return
    nbytes = a.inner_bytes(b0)
    if nbytes % 16:
        per16 = 16 / a.inner_bytes(1)
        yield (f"box[0] x {a.elem_bytes_text()} = {nbytes} B is not a multiple of 16 B",
               f"make box[0] a multiple of {per16}")


BOX_BYTES_MAX = SMEM_BYTES_PER_SM  # the shared memory of one sm_90 SM


@_rule("box-total-bytes", source=OBSERVED)
def _box_total(a):
    """The elements a box traverses, ceil(box[i] / elem_strides[i]) per dimension with elem_strides[0]
    counted too, fit 228 KiB (233472 B, one sm_90 SM's shared memory). Observed on the H200: 233472 B accepted,
    237568 B and larger rejected (captures h200-2026-11-29-c, -d); the exact limit between the two is not
    probed."""
    if not (a.rank_ok and a.dtype_ok) or any(b is None or not 1 <= b <= MAX_BOX for b in a.box_used) \
            or any(not 1 <= s <= MAX_ELEM_STRIDE for s in a.elem_strides_used):
        return  # box-range and elem-stride-range name bad entries on their own
    total = a.inner_bytes(math.prod(-(-b // s) for b, s in zip(a.box_used, a.elem_strides_used)))
    if total > BOX_BYTES_MAX:
        yield (f"the box traverses {total} B (ceil(box / elem_strides) elements), more than {BOX_BYTES_MAX} B "
               "(228 KiB)", "split the box into several loads")


@_rule("packed16-box0-128")
def _box0_packed16(a):
    """With 16U4_ALIGN16B or 16U6_ALIGN16B, box[0] is 128."""
    b0 = a.box0
    if a.dtype in PACKED_ALIGN16 and b0 is not None and b0 != 128:
        yield f"box[0] = {b0} for {TMA_TYPE_BY_CODE[a.dtype].name}", "use box[0] = 128"


@_rule("inner-box-within-swizzle-span")
def _inner_span(a):
    """With interleave none and a swizzle, box[0] x element size is at most the swizzle span (32/64/128 B).

    The fix names the narrowest wider swizzle whose span holds the row, where one does; past 128 B (the widest
    span) it says to narrow box[0] or split the row into several boxes."""
    b0 = a.box0
    if b0 is None or not a.dtype_ok or a.interleave != IL_NONE or not a.swizzle_ok or a.swizzle == SW_NONE:
        return
    span = SWIZZLE_SPAN[_SW_NAME[a.swizzle]]
    nbytes = a.inner_bytes(b0)
    if nbytes > span:
        fit, sw = int(span / a.inner_bytes(1)), _SW_NAME[a.swizzle]
        narrow = (f"make box[0] at most {fit} ({span} B), e.g. split the box into {-(-b0 // fit)} boxes of at most "
                  f"{fit} elements along dimension 0")
        wider = next((n for n in ("64B", "128B") if SWIZZLE_SPAN[n] >= nbytes), None)
        yield (f"box[0] x {a.elem_bytes_text()} = {nbytes} B exceeds the {span} B span of swizzle {sw}",
               f"{narrow}, or use swizzle {wider} ({SWIZZLE_SPAN[wider]} B span)" if wider else
               f"{narrow}; no swizzle spans {nbytes} B (the widest, 128B, spans 128 B)")


# -- element strides ---------------------------------------------------------

@_rule("elem-stride-range")
def _es_range(a):
    """Every `elem_strides[i]` is 1..8, including elem_strides[0] (which is then ignored without interleave)."""
    for i, e in enumerate(a.elem_strides_used):
        if not 1 <= e <= MAX_ELEM_STRIDE:
            yield f"elem_strides[{i}] = {e} is outside 1..{MAX_ELEM_STRIDE}", "use 1..8 (1 for a dense box)"


# -- combinations --------------------------------------------------------------

@_rule("packed6-interleave-none")
def _packed6_il(a):
    """16U6_ALIGN16B needs interleave none."""
    if a.dtype == PACK6 and a.interleave_ok and a.interleave != IL_NONE:
        yield f"interleave {_IL_NAME[a.interleave]} with 16u6_align16b", "use interleave none"


@_rule("packed-swizzle-subset")
def _packed_swizzle(a):
    """16U6_ALIGN16B takes swizzle none/128B/128B_ATOM_32B/128B_ATOM_64B; 16U4_ALIGN16B none/128B/128B_ATOM_32B."""
    allowed = PACKED_SWIZZLES.get(a.dtype)
    if allowed and a.swizzle_ok and a.swizzle not in allowed:
        yield (f"swizzle {_SW_NAME[a.swizzle]} with {TMA_TYPE_BY_CODE[a.dtype].name}",
               "use one of " + ", ".join(_SW_NAME[s] for s in allowed))


@_rule("oob-nan-needs-float-type")
def _oob_nan(a):
    """OOB fill NAN_REQUEST_ZERO_FMA (1) needs a floating-point, non-packed type (FLOAT16 .. TFLOAT32_FTZ)."""
    if a.oob == 1 and a.dtype_ok and not TMA_TYPE_BY_CODE[a.dtype].is_float:
        yield (f"OOB fill nan with dtype {a.dtype} ({TMA_TYPE_BY_CODE[a.dtype].name})",
               "use OOB fill none (zero) for integer and packed types")


# ---------------------------------------------------------------------------
# Advisories: documented, not enforced by cuTensorMapEncodeTiled (H200, 580.159.04)
# ---------------------------------------------------------------------------

@_rule("tensor-map-64B", enforced=False)
def _map64(a):
    """The CUtensorMap itself is 64 B aligned.

    The H200 driver encoded into buffers 8, 16, 32 and 48 B past a 64 B boundary; the
    alignment matters where the kernel reads the map (a __grid_constant__ parameter or
    a 64 B-aligned copy in global memory), not at encode time.
    """
    if a.map_address % 64:
        yield (f"tensor map at {hex(a.map_address)} is not 64 B aligned",
               "declare the CUtensorMap alignas(64) (kernel parameters already are)")


@_rule("interleave32-needs-swizzle32", enforced=False)
def _il32_sw32(a):
    """With interleave 32B, swizzle is 32B.

    The H200 driver accepted interleave 32B with swizzle none, 64B and 128B (capture
    cases 224-226); what TMA then does with such a map is not verified.
    """
    if a.interleave == IL_32B and a.swizzle_ok and a.swizzle != SW_32B:
        yield f"interleave 32B with swizzle {_SW_NAME[a.swizzle]}", "use swizzle 32B with interleave 32B"


@_rule("stride-covers-previous-dim", enforced=False)
def _stride_covers(a):
    """strides[0] >= dims[0] x element size and strides[i] >= strides[i-1] x dims[i] (no overlapping rows).

    cuda.h's pseudo-code builds the strides this way; the H200 driver accepted strides
    smaller than the dimension below (capture cases of probe stride-covers-dim), so
    overlapping or broadcast views encode fine (cases 138-142).
    """
    if not a.dtype_ok or a.interleave != IL_NONE:
        return
    d, s = a.dims_used, a.strides_used
    prev = a.inner_bytes(d[0]) if d else 0
    for i, st in enumerate(s):
        if st < prev:
            yield (f"strides[{i}] = {st} B is below the {prev} B spanned by dimension {i}",
                   "check the strides: rows overlap")
        prev = st * (d[i + 1] if i + 1 < len(d) else 1)


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------

class EncodeRejected(LayoutError):
    """cuTensorMapEncodeTiled would return CUDA_ERROR_INVALID_VALUE; `.violations` lists why."""

    def __init__(self, violations):
        self.violations = tuple(violations)
        vs = self.violations
        super().__init__(", ".join(v.rule for v in vs), "; ".join(v.value for v in vs),
                         "; ".join(v.fix for v in vs), "; ".join(sorted({v.source for v in vs})))
        plural = "s" if len(vs) != 1 else ""
        lines = [f"cuTensorMapEncodeTiled would reject these arguments ({len(vs)} rule{plural} broken):"]
        lines += [f"  - {v}" for v in vs]
        self.message = "\n".join(lines)
        self.args = (self.violations,)


def _as_args(args) -> EncodeArgs:
    if isinstance(args, EncodeArgs):
        return args
    if isinstance(args, dict):
        missing = [k for k in ("dtype", "rank", "addr_offset", "dims", "strides", "box", "elem_strides",
                               "interleave", "swizzle", "l2", "oob") if k not in args]
        if missing:
            raise LayoutError("a capture case needs every cuTensorMapEncodeTiled argument", f"missing {missing}",
                              "pass EncodeArgs(...) or a complete case")
        return EncodeArgs.from_case(args)
    raise LayoutError("check() takes EncodeArgs or a capture case dict", type(args).__name__,
                      "build EncodeArgs(dtype, rank, global_address, dims, strides, box, elem_strides, ...)")


def check(args, sm: int = 90) -> list[Violation]:
    """Every enforced rule that `args` (EncodeArgs or a capture case dict) breaks on architecture `sm`."""
    sm = as_int(sm, "sm")
    a = _as_args(args)
    return [v for r in RULES.values() if r.applies(sm) for v in r(a)]


def advise(args) -> list[Violation]:
    """Documented requirements the driver does not enforce at encode time (ADVISORIES) that `args` breaks."""
    a = _as_args(args)
    return [v for r in ADVISORIES.values() for v in r(a)]


def validate(args, sm: int = 90) -> EncodeArgs:
    """Return the EncodeArgs if the driver would accept them, else raise EncodeRejected listing every rule."""
    a = _as_args(args)
    vs = check(a, sm)
    if vs:
        raise EncodeRejected(vs)
    return a


def rule_table(include_advisories: bool = True) -> list[dict]:
    """Rows (id, checks, source, driver, sm, enforced) for printing the rule table."""
    rows = []
    for r in list(RULES.values()) + (list(ADVISORIES.values()) if include_advisories else []):
        rows.append({"id": r.id, "checks": " ".join(r.doc.split("\n\n")[0].split()), "source": r.source, "driver": r.driver,
                     "sm": "all" if r.sm is None else ",".join(f"sm_{s}" for s in r.sm), "enforced": r.enforced})
    return rows
