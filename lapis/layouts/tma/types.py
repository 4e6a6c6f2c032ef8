"""TMA's enumerations as cuda.h defines them: data types, swizzle, interleave, L2 promotion and OOB fill codes.

Shared by the tensor map (lapis.layouts.tma.tensor_map) and the encode rules (lapis.layouts.tma.rules). Sizes:
`TmaType.bits` per element, SWIZZLE_SPAN in bytes, SMEM_BYTES in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError

_CUDA_H = "cuTensorMapEncodeTiled, CUDA driver API (cuda.h 13.0)"
_H200 = "H200 TMA dumps, lapis/data/captures/tma"


@dataclass(frozen=True)
class TmaType:
    name: str
    code: int  # CUtensorMapDataType
    bits: int
    is_float: bool
    packed: bool = False

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)


TMA_TYPES: dict[str, TmaType] = {t.name: t for t in (
    TmaType("u8", 0, 8, False), TmaType("u16", 1, 16, False), TmaType("u32", 2, 32, False),
    TmaType("s32", 3, 32, False), TmaType("u64", 4, 64, False), TmaType("s64", 5, 64, False),
    TmaType("f16", 6, 16, True), TmaType("f32", 7, 32, True), TmaType("f64", 8, 64, True),
    TmaType("bf16", 9, 16, True), TmaType("f32_ftz", 10, 32, True), TmaType("tf32", 11, 32, True),
    TmaType("tf32_ftz", 12, 32, True), TmaType("16u4_align8b", 13, 4, False, True),
    TmaType("16u4_align16b", 14, 4, False, True), TmaType("16u6_align16b", 15, 6, False, True),
)}
TMA_TYPE_BY_CODE = {t.code: t for t in TMA_TYPES.values()}
# Layout dtypes that TMA moves as raw bytes (fp8 and s8 travel as UINT8).
TMA_ALIASES = {"e4m3": "u8", "e5m2": "u8", "s8": "u8"}

SWIZZLE_CODES = {"none": 0, "32B": 1, "64B": 2, "128B": 3, "128B_atom32B": 4, "128B_atom32B_flip8B": 5,
                 "128B_atom64B": 6}
SWIZZLE_SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128, "128B_atom32B": 128, "128B_atom32B_flip8B": 128,
                "128B_atom64B": 128}
INTERLEAVE_CODES = {"none": 0, "16B": 1, "32B": 2}
L2_CODES = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
OOB_CODES = {"zero": 0, "nan": 1}
ANY_GLOBAL_ADDRESS = 1 << 40  # a 256 B-aligned tensor address, where a TensorMap needs one for the rules
SMEM_BYTES = SMEM_BYTES_PER_SM  # no box lands beyond one SM's shared memory
TF32_NAN = 0x7FFFE000  # what a TFLOAT32 load writes for any NaN input (H200)
NAN_FILL_16 = 0x7FF7  # FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA pattern, per 16 bits (H200)


def tma_type(name: str | int | TmaType) -> TmaType:
    """A TMA data type by name (u8 ... 16u6_align16b, or e4m3/e5m2/s8) or CUtensorMapDataType code."""
    if isinstance(name, TmaType):
        return name
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        if int(name) in TMA_TYPE_BY_CODE:
            return TMA_TYPE_BY_CODE[int(name)]
    elif isinstance(name, str) and TMA_ALIASES.get(name, name) in TMA_TYPES:
        return TMA_TYPES[TMA_ALIASES.get(name, name)]
    raise LayoutError("unknown TMA data type", repr(name), "use one of " + ", ".join(TMA_TYPES), _CUDA_H)


def code_name(table: dict, value, what: str) -> str:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        for k, v in table.items():
            if v == int(value):
                return k
    elif isinstance(value, str) and value in table:
        return value
    raise LayoutError(f"unknown {what}", repr(value), "use one of " + ", ".join(table), _CUDA_H)


def check_lengths(rank: int, n_strides: int, n_box: int, n_elem_strides: int, flags=("dims", "strides", "box",
                                                                                  "elem_strides")) -> None:
    """One dims, box and elem_strides entry per dimension and rank - 1 strides, rank 1..5 (cuda.h)."""
    d, s, b, e = flags
    if not 1 <= rank <= 5:
        raise LayoutError("tensor rank must be 1..5", f"{rank} {d} entries", "give 1 to 5 dimensions", _CUDA_H)
    for name, n, want in ((s, n_strides, rank - 1), (b, n_box, rank), (e, n_elem_strides, rank)):
        if n != want:
            raise LayoutError(f"{name} needs {want} value(s) for rank {rank} ({d} has {rank})", f"{n} value(s)",
                              f"give {want} comma-separated value(s), innermost first", _CUDA_H)
