"""TMA: tensor maps, the rules cuTensorMapEncodeTiled enforces, and where a tiled load places each element.

- types.py: cuda.h's TMA enumerations (data types, swizzle, interleave, L2 promotion, OOB fill).
- rules.py: the named cuTensorMapEncodeTiled rules (EncodeArgs, check, validate, EncodeRejected).
- tensor_map.py: TensorMap, place_box and load_box (the smem bytes of cp.async.bulk.tensor).
- boundary.py: the warning for a swizzled destination off its repeat boundary (which consumers it breaks).

The names below are importable from lapis.layouts.tma directly. Imports stay numpy-only, so the GPU capture
path can use them on a host without simpy or tensor-layouts.
"""

from lapis.errors import NotModelled
from lapis.layouts.tma.boundary import BoundaryWarning, boundary_warning, boundary_warnings
from lapis.layouts.tma.rules import EncodeArgs, EncodeRejected, check, validate
from lapis.layouts.tma.tensor_map import BoxPlacement, TensorMap, load_box, place_box, wide_tile_boxes
from lapis.layouts.tma.types import (
    INTERLEAVE_CODES,
    L2_CODES,
    OOB_CODES,
    SWIZZLE_CODES,
    SWIZZLE_SPAN,
    TMA_TYPES,
    TmaType,
    check_lengths,
    tma_type,
)

__all__ = ["BoundaryWarning", "BoxPlacement", "EncodeArgs", "EncodeRejected", "INTERLEAVE_CODES", "L2_CODES",
           "NotModelled", "OOB_CODES", "SWIZZLE_CODES", "SWIZZLE_SPAN", "TMA_TYPES", "TensorMap", "TmaType",
           "boundary_warning", "boundary_warnings", "check",
           "check_lengths", "load_box", "place_box", "tma_type", "validate", "wide_tile_boxes"]
