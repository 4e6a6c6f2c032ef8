"""The TMA placement campaign: which boxes the capture kernel loads on the GPU.

Pure standard library, and independent of lapis's model: a configuration is
only the raw `cuTensorMapEncodeTiled` arguments (innermost-first lists, strides
in bytes, enum values of cuda.h), the box coordinates and where in shared
memory each box goes. The model never chooses or sees these before the capture.

`dst_offsets` are bytes from the start of the dumped region, whose first byte
sits on a 1024 B boundary; GUARD bytes before the first box and after the last
one are part of the dump and must keep the sentinel.
"""

from __future__ import annotations

import math

GUARD = 1024
SPAN = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}  # CUtensorMapSwizzle -> bytes
ELEM = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
U8, U16, U32, S32, U64, S64, F16, F32, F64, BF16, F32FTZ, TF32, TF32FTZ = range(13)


def loaded(box, es, interleave=0):
    """Elements TMA loads per dimension: ceil(box/es); es[0] ignored without interleave (cuda.h)."""
    return [b if (i == 0 and interleave == 0) else math.ceil(b / e) for i, (b, e) in enumerate(zip(box, es))]


def box_bytes(cfg) -> int:
    return math.prod(loaded(cfg["box"], cfg["elem_strides"], cfg["interleave"])) * ELEM[cfg["dtype"]]


def footprint_bound(cfg) -> int:
    """Bytes one box may occupy: rows padded to the swizzle span, to be safe."""
    n = loaded(cfg["box"], cfg["elem_strides"], cfg["interleave"])
    row = max(n[0] * ELEM[cfg["dtype"]], SPAN[cfg["swizzle"]])
    return row * math.prod(n[1:])


def make(dtype, dims, box, coords, *, swizzle=0, es=None, strides=None, interleave=0, l2=0, oob=0,
         offset=0, boxes=None, tag=""):
    """One configuration. `boxes` (list of (coords, dst)) overrides the single box."""
    rank = len(dims)
    e = ELEM[dtype]
    if strides is None:  # dense, each stride rounded up to 16 B
        strides, s = [], dims[0] * e
        for i in range(1, rank):
            s = -(-s // 16) * 16
            strides.append(s)
            s *= dims[i]
    cfg = dict(dtype=dtype, rank=rank, dims=list(dims), strides=list(strides), box=list(box),
               elem_strides=list(es or [1] * rank), interleave=interleave, swizzle=swizzle, l2=l2,
               oob=oob, tag=tag)
    fp = -(-footprint_bound(cfg) // 1024) * 1024
    if boxes is None:
        boxes = [(list(coords), GUARD + offset)]
    cfg["coords"] = [list(c) for c, _ in boxes]
    cfg["dst_offsets"] = [d for _, d in boxes]
    cfg["region_bytes"] = max(cfg["dst_offsets"]) + fp + GUARD
    return cfg


def foundation():
    """2-D boxes, 4 swizzles x 1/2/4-byte types x every 128 B phase of the repeat."""
    out = []
    for sw in (0, 1, 2, 3):
        for dt in (U8, BF16, F32):
            e = ELEM[dt]
            inner = (SPAN[sw] or 64) // e
            for off in range(0, 1024, 128):
                out.append(make(dt, [inner * 3, 48], [inner, 16], [inner, 16], swizzle=sw, offset=off,
                                tag="foundation"))
    return out


def probes_2d():
    """Inner box narrower than the span, and destinations off the 128 B grid."""
    out = []
    for sw, inner_bytes in ((3, 64), (3, 32), (3, 16), (2, 32), (2, 16), (1, 16)):
        for off in (0, 384):
            out.append(make(BF16, [160, 40], [inner_bytes // 2, 16], [8, 8], swizzle=sw, offset=off,
                            tag="narrow-box"))
    for sw in (0, 1, 2, 3):
        for off in (16, 32, 64, 80):
            out.append(make(BF16, [192, 32], [(SPAN[sw] or 64) // 2, 8], [0, 0], swizzle=sw, offset=off,
                            tag="off-grid-dst"))
    return out


def ranks():
    """Ranks 1, 3, 4, 5 in every swizzle mode, with 1/2/4/8-byte types."""
    out = []
    for sw in (0, 1, 2, 3):
        for dt in (U8, F16, U32, F64):
            e = ELEM[dt]
            inner = max((SPAN[sw] or 32) // e, 16 // e)
            out.append(make(dt, [inner * 5], [inner], [inner], swizzle=sw, tag="rank"))
            out.append(make(dt, [inner * 2, 6, 5], [inner, 4, 3], [inner // 2 if sw == 0 else 0, 1, 2],
                            swizzle=sw, offset=256, tag="rank"))
            out.append(make(dt, [inner, 5, 4, 3], [inner, 3, 2, 2], [0, 2, 1, 1], swizzle=sw, tag="rank"))
            out.append(make(dt, [inner, 3, 3, 2, 3], [inner, 2, 3, 2, 2], [0, 1, 0, 0, 1], swizzle=sw,
                            offset=640, tag="rank"))
    return out


def element_strides():
    """Element strides > 1 on outer dimensions, and on dimension 0 (documented as ignored)."""
    out = []
    for sw in (0, 3):
        for es in ([1, 2], [1, 3], [1, 8], [2, 1], [4, 2]):
            out.append(make(BF16, [128, 64], [64, 16], [0, 3], swizzle=sw, es=es, tag="elem-stride"))
        for es in ([1, 2, 3], [1, 5, 2], [1, 1, 7]):
            out.append(make(F32, [32, 20, 24], [32, 8, 16], [0, 1, 2], swizzle=sw, es=es, tag="elem-stride"))
    out.append(make(U64, [16, 10, 10, 10], [16, 4, 6, 5], [0, 0, 1, 2], swizzle=3, es=[1, 2, 3, 4],
                    tag="elem-stride"))
    return out


def box_limits():
    """Boxes at the 256-element limit and the largest inner rows."""
    out = []
    out.append(make(U8, [512, 4], [256, 4], [128, 0], tag="box-limit"))
    out.append(make(BF16, [64, 300], [64, 256], [0, 20], swizzle=3, tag="box-limit"))
    out.append(make(U8, [128, 256], [128, 256], [0, 0], swizzle=3, tag="box-limit"))
    out.append(make(F32, [8, 256, 4], [8, 256, 2], [0, 0, 1], swizzle=1, tag="box-limit"))
    out.append(make(U16, [256, 4, 256], [256, 2, 8], [0, 1, 100], tag="box-limit"))
    out.append(make(U32, [4, 4, 4, 4, 256], [4, 2, 2, 2, 256], [0, 1, 1, 1, 0], tag="box-limit"))
    return out


def out_of_bounds():
    """Boxes partly outside the tensor: negative and past-the-end coordinates, zero and NaN fill."""
    out = []
    cases = ([-8, 0], [-32, -4], [48, 20], [56, -3], [-64, 30], [0, -15])
    for dt in (BF16, F16, F32, F64, U16, U8):
        e = ELEM[dt]
        for oob in (0, 1):
            for i, c in enumerate(cases):
                if (i + dt + oob) % 2:  # half the grid keeps the campaign small
                    continue
                inner = min(128 // e, 64)
                out.append(make(dt, [inner, 24], [inner, 8], [c[0] * inner // 64, c[1]], swizzle=3,
                                oob=oob, tag="oob"))
    out.append(make(F32, [20, 9, 7], [32, 4, 4], [-5, 7, -2], swizzle=3, oob=1, tag="oob"))
    out.append(make(BF16, [40, 10, 6], [64, 8, 4], [-16, -2, 4], swizzle=3, oob=0, tag="oob"))
    return out


def atom_modes():
    """The 128B_ATOM_* swizzles (sm100-era modes): does sm_90a run them?"""
    out = []
    for sw in (4, 5, 6):
        for off in (0, 256, 512):
            out.append(make(BF16, [192, 32], [64, 16], [64, 8], swizzle=sw, offset=off, tag="atom"))
    return out


def dtypes_all():
    """Every non-packed data type once, SW64, at an off-boundary destination."""
    out = []
    for dt in range(13):
        e = ELEM[dt]
        out.append(make(dt, [64 // e * 2, 12], [64 // e, 8], [64 // e, 2], swizzle=2, offset=128 * (dt % 4),
                        tag="dtype"))
    return out


def interleave():
    """Interleaved layouts (NC/8HWC8 style); rank >= 3."""
    out = []
    for il, sw in ((1, 0), (1, 3), (2, 1)):
        c = 8 if il == 1 else 16
        out.append(make(F16, [c, 6, 5], [c, 4, 2], [0, 1, 2], interleave=il, swizzle=sw, tag="interleave"))
    return out


def multi_box():
    """A 128-wide bf16 K-major tile loaded as two 64-wide SW128 boxes (two atoms columns)."""
    out = []
    for rows, off in ((64, 0), (32, 128)):
        a = GUARD + off
        out.append(make(BF16, [256, 96], [64, rows], None, swizzle=3,
                        boxes=[([64, 8], a), ([128, 8], a + rows * 128)], tag="multi-box"))
    return out


def mixed(n=80, seed=2026):
    """Seeded random valid configurations over every knob at once."""
    import random
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        dt = rng.randrange(13)
        e = ELEM[dt]
        sw = rng.choice((0, 1, 2, 3))
        rank = rng.randint(1, 5)
        span = SPAN[sw] or 256
        inner = rng.choice([k for k in (16, 32, 48, 64, 96, 128, 256) if k <= span]) // e
        box = [inner] + [rng.randint(1, 12) for _ in range(rank - 1)]
        es = [1] + [rng.choice((1, 1, 2, 3)) for _ in range(rank - 1)]
        dims = [inner + rng.randint(0, 3) * 16 // e] + [b + rng.randint(0, 6) for b in box[1:]]
        coords = [rng.randint(-inner // 2, dims[0] - inner // 2)] + [rng.randint(-2, d - 1) for d in dims[1:]]
        oob = rng.choice((0, 1)) if dt in (F16, F32, F64, BF16, F32FTZ, TF32, TF32FTZ) else 0
        cfg = make(dt, dims, box, coords, swizzle=sw, es=es, oob=oob, offset=128 * rng.randrange(8),
                   tag="mixed")
        if cfg["region_bytes"] <= 64 * 1024:
            out.append(cfg)
    return out


def tf32_rounding():
    """TF32 loads round 32-bit values: boxes over the ties 4096 (even), 12288 (odd), 20480 (even)."""
    out = []
    for dt in (TF32, TF32FTZ):
        for start in (4064, 12256, 20448):
            out.append(make(dt, [24576], [64], [start], swizzle=0, tag="tf32-round"))
    return out


def aligned_mixed(n=130, seed=7):
    """Seeded random valid configurations whose box start is 16 B aligned along dimension 0
    (the first campaign showed the H200 faults otherwise), with padded strides."""
    import random
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        dt = rng.randrange(13)
        e = ELEM[dt]
        sw = rng.choice((0, 1, 2, 3))
        rank = rng.randint(1, 5)
        span = SPAN[sw] or 256
        inner = rng.choice([k for k in (16, 32, 48, 64, 96, 128, 192, 256) if k <= span]) // e
        box = [inner] + [rng.randint(1, 16) for _ in range(rank - 1)]
        es = [rng.choice((1, 2))] + [rng.choice((1, 1, 2, 3, 5)) for _ in range(rank - 1)]
        unit = 16 // e
        dims = [inner + unit * rng.randint(0, 4)] + [b + rng.randint(-2, 6) for b in box[1:]]
        dims = [max(d, 1) for d in dims]
        strides, s = [], dims[0] * e
        for d in dims[1:]:
            s = -(-s // 16) * 16 + 16 * rng.choice((0, 0, 1, 3))  # some padding between rows
            strides.append(s)
            s *= d
        c0 = unit * rng.randint(-inner // unit, dims[0] // unit)
        coords = [c0] + [rng.randint(-3, d) for d in dims[1:]]
        oob = rng.choice((0, 1)) if dt in (F16, F32, F64, BF16, F32FTZ, TF32, TF32FTZ) else 0
        cfg = make(dt, dims, box, coords, swizzle=sw, es=es, strides=strides, oob=oob,
                   offset=128 * rng.randrange(8), tag="mixed-aligned")
        if cfg["region_bytes"] <= 96 * 1024:
            out.append(cfg)
    return out


TF32_SPECIALS = [0x7FFFFFFF, 0xFFFFFFFF, 0x7F801001, 0x7F800001, 0x7F7FFFFF, 0x3F801000, 0x7FC01000, 0xFF800FFF,
                 0x7FBFF000, 0x00001000, 0x3F803000, 0x80001001, 0x7F800000, 0x7FC00000, 0x12345678, 0xFFFFF000,
                 0xFF7FF000, 0x00000FFF, 0x80000000, 0x00800FFF]


def special_values():
    """NaN, infinity and rounding-overflow bit patterns through the 32-bit float types."""
    out = []
    for dt in (TF32, TF32FTZ, F32, F32FTZ):
        c = make(dt, [40], [40], [0], tag="special-values")
        c["values"] = TF32_SPECIALS
        out.append(c)
    return out


def elem_stride_limits():
    """Boxes whose traversed size (ceil(box/es), es[0] included) fits 228 KiB while box does not; and an
    element stride on dimension 0, which the driver counts at encode but the load ignores."""
    out = []
    for es in ([1, 2, 1], [1, 8, 8], [2, 2, 1], [8, 1, 1]):
        box = [256, 256, 4] if es != [8, 1, 1] else [256, 64, 4]
        out.append(make(U8, [256, 256, 8], box, [0, 0, 0], es=es, tag="es-limit"))
    return out


def campaign():
    """Every configuration, each tagged with the question it answers."""
    cfgs = (foundation() + probes_2d() + ranks() + element_strides() + box_limits() + out_of_bounds()
            + atom_modes() + dtypes_all() + interleave() + multi_box() + mixed()
            + tf32_rounding() + aligned_mixed() + special_values() + elem_stride_limits())
    for i, c in enumerate(cfgs):
        c["id"] = i
    return cfgs


if __name__ == "__main__":
    import collections
    cs = campaign()
    print(len(cs), collections.Counter(c["tag"] for c in cs), max(c["region_bytes"] for c in cs))
