"""Shared-memory layouts: element types, swizzle modes, canonical layouts, matrix descriptors.

Where each rule lives:
- dtypes.py: element sizes (PTX's T = 128 / bits).
- swizzle.py: the swizzle XOR on absolute smem byte addresses (PTX ISA 5.5.7).
- canonical.py: canonical wgmma/tcgen05 operand layouts, LBO and SBO (PTX ISA 9.7.15.5.1.2).
- descriptor_sm90.py: the 64-bit wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2).

Imports stay light: numpy and tensor_layouts only.
"""

from lapis.layouts.canonical import CanonicalLayout, canonical_layout
from lapis.layouts.descriptor_sm90 import (
    DescriptorField,
    WgmmaDescriptor,
    base_offset_for,
    descriptor_for,
    layout_type,
    swizzle_from_layout_type,
)
from lapis.layouts.dtypes import DTYPES, DType, dtype
from lapis.layouts.swizzle import B32, B64, B128, NONE, SWIZZLES, SwizzleMode, swizzle

__all__ = [
    "DType",
    "DTYPES",
    "dtype",
    "SwizzleMode",
    "SWIZZLES",
    "NONE",
    "B32",
    "B64",
    "B128",
    "swizzle",
    "CanonicalLayout",
    "canonical_layout",
    "WgmmaDescriptor",
    "DescriptorField",
    "descriptor_for",
    "base_offset_for",
    "layout_type",
    "swizzle_from_layout_type",
]
