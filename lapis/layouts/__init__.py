"""Shared-memory layouts: element types, swizzle modes, canonical layouts, matrix descriptors.

Where each rule lives:
- dtypes.py: element sizes (PTX's T = 128 / bits).
- swizzle.py: the swizzle XOR on absolute smem byte addresses (PTX ISA 5.5.7).
- canonical.py: canonical wgmma/tcgen05 operand layouts, LBO and SBO (PTX ISA 9.7.15.5.1.2).
- descriptors/: the sm90 wgmma and sm100 tcgen05 matrix descriptors (PTX ISA 9.7.15.5.1.2.2, 9.7.16.4), what an
  MMA reads through them, and their agreement with TMA-placed tiles.
- consumers.py: what ldmatrix, ldmatrix.trans and LDS.128 read from a swizzled tile, lane by lane.
- bank_conflicts.py: shared-memory wavefronts of one warp-wide instruction.
- tma/: tensor maps, the cuTensorMapEncodeTiled rules, and where a tiled TMA load places each element.
- cute_input.py, show.py: CuTe layouts as CuTe prints them; printing a layout and its descriptor.

Imports stay light: numpy only until a canonical layout or descriptor is used.
"""

import importlib

# dtypes and swizzle are numpy-only, and `swizzle` names both a module and a function:
# bind the function eagerly so the submodule import cannot shadow it.
from lapis.layouts.dtypes import DTYPES, DType, dtype  # noqa: E402
from lapis.layouts.swizzle import B32, B64, B128, NONE, SWIZZLES, SwizzleMode, swizzle  # noqa: E402

# Public names and the module that defines each. Loaded on first use, so that
# `import lapis.layouts.tma` (what the GPU capture path needs) pulls in neither
# tensor_layouts nor the canonical-layout code.
_WHERE = {
    "CanonicalLayout": "canonical", "canonical_layout": "canonical",
    "WgmmaDescriptor": "descriptors.sm90", "DescriptorField": "descriptors.sm90", "descriptor_for": "descriptors.sm90",
    "base_offset_for": "descriptors.sm90", "layout_type": "descriptors.sm90",
    "swizzle_from_layout_type": "descriptors.sm90",
    "check_consumer": "consumers", "ConsumerVerdict": "consumers",
}



def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"lapis.layouts.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'lapis.layouts' has no attribute {name!r}")


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
    "check_consumer",
    "ConsumerVerdict",
]
