"""Element types by the names kernel authors use, with their sizes.

Sizes are in bits and bytes. `tma` is the `CUtensorMapDataType` value of the
CUDA driver API (cuda.h, `CU_TENSOR_MAP_DATA_TYPE_*`) a TMA load of this type
uses; fp8 types have no TMA type of their own and travel as UINT8.
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.errors import LayoutError


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    tma: int  # CUtensorMapDataType value used to load it

    @property
    def bytes(self) -> int:
        return self.bits // 8

    @property
    def per_16b(self) -> int:
        """Elements per 16 B unit: PTX's T = 128 / sizeof_bits(element)."""
        return 128 // self.bits


# CUtensorMapDataType values (cuda.h): UINT8=0 UINT16=1 UINT32=2 INT32=3 UINT64=4
# INT64=5 FLOAT16=6 FLOAT32=7 FLOAT64=8 BFLOAT16=9 FLOAT32_FTZ=10 TFLOAT32=11 TFLOAT32_FTZ=12
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("e4m3", 8, 0),
        DType("e5m2", 8, 0),
        DType("u8", 8, 0),
        DType("s8", 8, 0),
        DType("f16", 16, 6),
        DType("bf16", 16, 9),
        DType("tf32", 32, 11),
        DType("f32", 32, 7),
    )
}


def dtype(name: str | DType) -> DType:
    """Look up a dtype by name (e4m3, e5m2, f16, bf16, tf32, f32, u8, s8).

    Raises LayoutError naming the accepted spellings.
    """
    if isinstance(name, DType):
        return name
    if not isinstance(name, str) or name not in DTYPES:  # a list or dict is unhashable: test the type first
        raise LayoutError("unknown dtype", repr(name), "use one of " + ", ".join(DTYPES))
    return DTYPES[name]
