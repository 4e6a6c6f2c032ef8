"""The encode campaign: parameter sets for the real `cuTensorMapEncodeTiled`.

Pure standard library and independent of lapis's rule checker, so that a rule
lapis lacks still gets probed. Two parts:

- boundary cases: for each documented requirement (cuda.h, CUDA 13.0, the
  `cuTensorMapEncodeTiled` comment), values just inside and just outside it,
  everything else valid. The `probe` label is the intention; the driver's answer
  is the truth.
- random cases drawn from ranges wider than the documented limits (rank 0-6,
  dims 0 to 2^33, boxes 0-300, out-of-range enum values).

A case is the raw arguments: `dtype`, `rank`, `addr_offset` (bytes past a
256 B-aligned device allocation), innermost-first `dims`, `strides` (bytes,
rank-1 of them), `box`, `elem_strides`, enums `interleave`, `swizzle`, `l2`,
`oob`, and `map_offset` (bytes past a 64 B-aligned host CUtensorMap buffer).
"""

from __future__ import annotations

import random

F16, PACK8, PACK16, PACK6 = 6, 13, 14, 15
ELEM = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
FLOATS = (6, 7, 8, 9, 10, 11, 12)


def base(dtype=F16, rank=2, **kw):
    """A valid case for any data type and rank 1-5 (interleave none)."""
    if dtype in (PACK16, PACK6):
        dims, box, row = [256] + [8] * (rank - 1), [128] + [4] * (rank - 1), 256
    elif dtype == PACK8:
        dims, box, row = [256] + [8] * (rank - 1), [64] + [4] * (rank - 1), 128
    else:
        e = ELEM.get(dtype, 2)
        dims, box, row = [256 // e] + [8] * (rank - 1), [64 // e] + [4] * (rank - 1), 256
    strides, s = [], row
    for d in dims[1:]:
        strides.append(s)
        s *= d
    case = dict(dtype=dtype, rank=rank, addr_offset=0, dims=dims, strides=strides, box=box,
                elem_strides=[1] * rank, interleave=0, swizzle=0, l2=0, oob=0, map_offset=0)
    case.update(kw)
    return case


def interleaved(il=1, sw=0, rank=3, **kw):
    """A valid interleaved case: dims[0] spans 16 B (16B) or 32 B (32B) of f16."""
    c = 8 if il == 1 else 16
    dims = [c] + [8] * (rank - 1)
    strides, s = [], c * 2 if il == 1 else 32
    for d in dims[1:]:
        strides.append(s)
        s *= d
    return base(F16, rank, dims=dims, strides=strides, box=[c] + [4] * (rank - 1), interleave=il,
                swizzle=sw, **kw)


def with_dim(i, value, c=None):
    c = c or base()
    c = dict(c, dims=list(c["dims"]))
    c["dims"][i] = value
    return c


def with_list(key, i, value, c=None):
    c = c or base()
    c = dict(c)
    c[key] = list(c[key])
    c[key][i] = value
    return c


def probe(rule, inside, outside):
    return [dict(c, probe=rule, side="inside") for c in inside] + \
           [dict(c, probe=rule, side="outside") for c in outside]


def boundary_cases():
    P = []
    P += probe("rank", [base(rank=r) for r in (1, 2, 3, 4, 5)],
               [dict(base(rank=5), rank=r) for r in (0, 6, 7, 8)] + [dict(base(rank=1), rank=0)])
    P += probe("dtype", [base(dtype=d) for d in (0, 3, 5, 9, 12, 13, 14, 15)],
               [base(dtype=d) for d in (16, 17, 31, 100, -1)])
    P += probe("global-address-16B", [base(addr_offset=o) for o in (0, 16, 48, 96, 240)],
               [base(addr_offset=o) for o in (1, 4, 8, 12, 24)])
    P += probe("global-address-32B-interleave32", [interleaved(2, 1, addr_offset=o) for o in (0, 32, 64, 96, 128)],
               [interleaved(2, 1, addr_offset=o) for o in (16, 48, 80, 112, 144)])
    P += probe("global-address-32B-packed16",
               [base(d, addr_offset=o) for d in (PACK16, PACK6) for o in (0, 32, 64)][:5],
               [base(d, addr_offset=o) for d in (PACK16, PACK6) for o in (16, 48, 80)][:5])
    P += probe("global-dim-range", [with_dim(1, v) for v in (1, 2, 2**31, 2**32 - 1, 2**32)],
               [with_dim(1, v) for v in (0, 2**32 + 1, 2**32 + 16, 2**33, 2**40)])
    P += probe("global-dim0-range", [with_dim(0, v) for v in (1, 8, 128, 2**20, 2**32)],
               [with_dim(0, v) for v in (0, 2**32 + 1, 2**33, 2**34, 2**36)])
    P += probe("packed16-dim0-multiple-128", [with_dim(0, v, base(PACK16)) for v in (128, 256, 384, 1024, 2048)],
               [with_dim(0, v, base(PACK6)) for v in (64, 129, 200, 96, 130)])
    P += probe("packed8-dim0-even", [with_dim(0, v, base(PACK8)) for v in (64, 130, 256, 258, 1000)],
               [with_dim(0, v, base(PACK8)) for v in (65, 129, 255, 257, 999)])
    P += probe("stride-multiple-16", [with_list("strides", 0, v) for v in (256, 272, 288, 1024, 4096)],
               [with_list("strides", 0, v) for v in (264, 257, 260, 1000, 300)])
    P += probe("stride-below-2^40", [with_list("strides", 0, v, base(rank=3)) for v in
                                      (2**40 - 16, 2**39, 2**36, 2**40 - 256, 2**32)],
               [with_list("strides", 0, v, base(rank=3)) for v in (2**40, 2**40 + 16, 2**41, 2**44, 2**48)])
    P += probe("stride-multiple-32-interleave32",
               [with_list("strides", 0, v, interleaved(2, 1)) for v in (32, 64, 96, 512, 4096)],
               [with_list("strides", 0, v, interleaved(2, 1)) for v in (48, 80, 112, 272, 4112)])
    P += probe("stride-multiple-32-packed16",
               [with_list("strides", 0, v, base(PACK16)) for v in (256, 288, 320, 512, 1024)],
               [with_list("strides", 0, v, base(PACK6)) for v in (272, 304, 336, 528, 1040)])
    P += probe("stride-covers-dim", [with_list("strides", 0, v) for v in (256, 512)] +
               [with_list("strides", 1, v, base(rank=3)) for v in (2048, 4096, 8192)],
               [with_list("strides", 0, v) for v in (16, 128, 240)] +
               [with_list("strides", 1, v, base(rank=3)) for v in (256, 1024)])
    P += probe("box-range", [with_list("box", 1, v) for v in (1, 2, 128, 255, 256)],
               [with_list("box", 1, v) for v in (0, 257, 300, 512, 65536)])
    P += probe("box0-range", [with_list("box", 0, v, base(0)) for v in (16, 32, 128, 240, 256)],
               [with_list("box", 0, v, base(0)) for v in (0, 272, 288, 512, 1024)])
    P += probe("box0-bytes-multiple-16", [with_list("box", 0, v) for v in (8, 16, 24, 64, 128)],
               [with_list("box", 0, v) for v in (1, 4, 7, 12, 100)])
    P += probe("packed16-box0-128", [base(PACK16), base(PACK6), base(PACK16, rank=3), base(PACK6, rank=1),
                                     base(PACK16, rank=4)],
               [with_list("box", 0, v, base(d)) for d, v in ((PACK16, 64), (PACK6, 256), (PACK16, 32),
                                                             (PACK6, 96), (PACK16, 192))])
    P += probe("elem-stride-range", [with_list("elem_strides", 1, v) for v in (1, 2, 5, 7, 8)],
               [with_list("elem_strides", 1, v) for v in (0, 9, 10, 16, 255)])
    P += probe("elem-stride0-ignored", [with_list("elem_strides", 0, v) for v in (1, 2, 8)],
               [with_list("elem_strides", 0, v) for v in (0, 9, 16)])
    P += probe("interleave-enum", [interleaved(1, 0), interleaved(2, 1), base(rank=3), interleaved(1, 3),
                                   interleaved(1, 2)],
               [dict(base(rank=3), interleave=v) for v in (3, 4, 5, -1, 100)])
    P += probe("interleave-rank-3", [interleaved(1, 0, rank=r) for r in (3, 4, 5)] + [interleaved(2, 1, rank=4),
                                                                                       interleaved(2, 1, rank=5)],
               [interleaved(1, 0, rank=5) | dict(rank=r, dims=[8] * r, strides=[16 * 8 ** i for i in range(r - 1)],
                                                  box=[8] * r, elem_strides=[1] * r) for r in (1, 2)] +
               [dict(interleaved(2, 1, rank=3), rank=2, dims=[16, 8], strides=[32], box=[16, 4],
                     elem_strides=[1, 1])] +
               [dict(interleaved(1, 3, rank=3), rank=2, dims=[8, 8], strides=[16], box=[8, 4],
                     elem_strides=[1, 1])] +
               [dict(interleaved(1, 0, rank=3), rank=1, dims=[8], strides=[], box=[8], elem_strides=[1])])
    P += probe("interleave32-needs-swizzle32", [interleaved(2, 1, rank=r) for r in (3, 4, 5)] +
               [interleaved(2, 1, l2=2), interleaved(2, 1, oob=1)],
               [interleaved(2, s) for s in (0, 2, 3, 4, 6)])
    P += probe("swizzle-enum", [dict(base(), swizzle=s) for s in (0, 1, 2, 3, 6)],
               [dict(base(), swizzle=s) for s in (7, 8, 10, -1, 255)])
    P += probe("inner-box-within-span",
               [dict(base(0), swizzle=s, box=[b, 4]) for s, b in ((1, 32), (2, 64), (3, 128), (4, 128), (5, 96))],
               [dict(base(0), swizzle=s, box=[b, 4]) for s, b in ((1, 48), (2, 80), (3, 144), (6, 256), (1, 64))])
    P += probe("l2-promotion-enum", [dict(base(), l2=v) for v in (0, 1, 2, 3, 3)][:4] + [base(rank=5, l2=3)],
               [dict(base(), l2=v) for v in (4, 5, 8, -1, 100)])
    P += probe("oob-fill-enum", [dict(base(), oob=v) for v in (0, 1)] + [base(7, oob=1), base(9, oob=1),
                                                                         base(8, oob=1)],
               [dict(base(), oob=v) for v in (2, 3, 4, -1, 100)])
    P += probe("oob-nan-float-only", [base(d, oob=1) for d in (6, 7, 10, 11, 12)],
               [base(d, oob=1) for d in (0, 1, 2, 3, 5, PACK8, PACK16)])
    P += probe("packed6-interleave-none", [base(PACK6), base(PACK6, rank=3), base(PACK6, rank=5)],
               [dict(base(PACK6, rank=3), interleave=1), dict(base(PACK6, rank=3), interleave=2, swizzle=1)])
    P += probe("packed-swizzle-subset",
               [base(PACK6, swizzle=s) for s in (0, 3, 4, 6)] + [base(PACK16, swizzle=s) for s in (0, 3, 4)],
               [base(PACK6, swizzle=s) for s in (1, 2, 5)] + [base(PACK16, swizzle=s) for s in (1, 2, 5, 6)])
    P += probe("tensor-map-64B", [base(map_offset=o) for o in (0, 64, 128)],
               [base(map_offset=o) for o in (8, 16, 32, 48)])
    return P


def random_cases(n=320, seed=11):
    """Every parameter drawn from ranges wider than the documented limits."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rank = rng.choice((0, 1, 2, 2, 3, 3, 4, 5, 5, 6))
        m = max(rank, 1)
        dt = rng.choice(list(range(16)) + [16, 20])
        dims = [rng.choice((0, 1, rng.randint(1, 300), 2 ** rng.randint(0, 33), 2 ** 32, 2 ** 32 + 1))
                for _ in range(m)]
        strides = [rng.choice((16 * rng.randint(0, 2 ** 20), rng.randint(0, 2 ** 16), 2 ** rng.randint(4, 41)))
                   for _ in range(m - 1)]
        box = [rng.choice((rng.randint(0, 300), 2 ** rng.randint(0, 8))) for _ in range(m)]
        es = [rng.choice((1, 1, rng.randint(0, 9))) for _ in range(m)]
        out.append(dict(dtype=dt, rank=rank, addr_offset=rng.choice((0, 0, 16, 32, 8, 1)), dims=dims,
                        strides=strides, box=box, elem_strides=es, interleave=rng.choice((0, 0, 0, 1, 2, 3)),
                        swizzle=rng.choice((0, 1, 2, 3, 4, 5, 6, 7)), l2=rng.choice((0, 1, 2, 3, 4)),
                        oob=rng.choice((0, 0, 1, 2)), map_offset=0, probe="random", side="random"))
    return out


def follow_up_cases():
    """Questions the boundary and random cases leave open: interleaved box/dims widths, a limit on a box's
    total bytes, and a null global address."""
    P = []
    for il, b0s in ((1, (16, 64, 256, 4)), (2, (8, 32, 64))):
        for b0 in b0s:
            for d0 in (16, 128):
                c = interleaved(il, 1 if il == 2 else 0)
                c["box"] = [b0] + c["box"][1:]
                c["dims"] = [d0] + c["dims"][1:]
                c["strides"] = [max(d0 * 2, c["strides"][0])] + [max(d0 * 2, c["strides"][0]) * 8 ** i
                                                                  for i in range(1, len(c["strides"]))]
                P.append(dict(c, probe="interleave-box-width", side="probe"))
    for box in ([32, 256], [32, 256, 256], [32, 256, 256, 256], [32, 256, 256, 256, 256], [8, 256, 256]):
        r = len(box)
        c = base(7, rank=r, dims=[32] + [512] * (r - 1), box=box)
        strides, s = [], 128
        for d in c["dims"][1:]:
            strides.append(s)
            s *= d
        P.append(dict(c, strides=strides, probe="box-total-bytes", side="probe"))
    P.append(dict(base(), null_address=True, probe="null-global-address", side="probe"))
    return P


def _dense(dtype, box):
    """A valid dense tensor twice the box along the outer dimensions."""
    e = ELEM[dtype]
    dims = [box[0]] + [2 * b for b in box[1:]]
    strides, s = [], dims[0] * e
    for d in dims[1:]:
        s = -(-s // 16) * 16
        strides.append(s)
        s *= d
    return base(dtype, len(box), dims=dims, strides=strides, box=list(box))


def box_size_grid():
    """Bracket the limit on a box's total bytes between 32 KiB (accepted) and 2 MiB (rejected), and the box[0]
    width rule under interleave."""
    P = [_dense(0, [16, 256, k]) for k in range(1, 257, 3)]
    P += [_dense(0, [256, 256, k]) for k in range(1, 33)]
    P += [_dense(7, [8, 128, k]) for k in range(1, 257, 8)]
    P += [_dense(0, [16, 16, 16, k, 2]) for k in (1, 2, 4, 8, 16, 32, 64)]
    P = [dict(c, probe="box-total-bytes", side="probe") for c in P]
    for il, dt, b0s in ((1, F16, (2, 4, 6, 8, 12, 24)), (2, F16, (4, 8, 12, 24, 40)), (1, 0, (8, 16, 24, 32))):
        for b0 in b0s:
            c = interleaved(il, 1 if il == 2 else 0)
            P.append(dict(c, dtype=dt, box=[b0] + c["box"][1:], probe="interleave-box-width", side="probe"))
    return P


def elem_stride_box_limit():
    """Does the 228 KiB box limit count ceil(box / elem_strides), elem_strides[0] included?"""
    P = []
    for es in ([1, 1, 1], [1, 2, 1], [2, 1, 1], [8, 1, 1], [1, 8, 8], [4, 1, 1], [1, 1, 2], [2, 2, 2]):
        P.append(dict(_dense(0, [256, 256, 4]), elem_strides=es, probe="box-total-elem-strides", side="probe"))
    for es in ([1, 1, 1], [2, 1, 1], [1, 2, 1]):
        P.append(dict(_dense(7, [64, 256, 4]), elem_strides=es, probe="box-total-elem-strides", side="probe"))
    return P


def campaign():
    cases = boundary_cases() + random_cases() + follow_up_cases() + box_size_grid() + elem_stride_box_limit()
    for i, c in enumerate(cases):
        c["id"] = i
    return cases


if __name__ == "__main__":
    import collections
    cs = campaign()
    print(len(cs), collections.Counter(c["side"] for c in cs))
