"""The wgmma campaign: shared-memory images and descriptors for kernels/wgmma_capture_v1.cu.

Built on the CPU with lapis (the images are what a TMA load would write, placed
by the canonical-layout model that the TMA dumps confirm; the descriptors come
from `descriptor_for`), saved as inputs beside the capture, and run unchanged on
the GPU. The hardware's D is the evidence; `lapis.layouts.descriptors.mma_read` must predict
it from the image and the descriptors alone.

Every case tests one operand: its elements hold distinct values, and the other
operand is one-hot, so D shows the tested operand element by element:
A tested: B[n, k] = 1 iff k == n % K  ->  D[m, n] = A[m, n % K];
B tested: A[m, k] = 1 iff k == m % K  ->  D[m, n] = B[n, m % K]    (K per instruction).
fp8 has fewer distinct values than a tile has elements: two runs carry the two
base-125 digits of each element's index. Deliberate mismatches corrupt the tested
operand only (descriptor swizzle, swapped LBO/SBO, base offset, K advance, transpose).
"""

from __future__ import annotations

import numpy as np

from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, base_offset_for, descriptor_for
from lapis.layouts.swizzle import swizzle

IMAGE_BYTES = 160 * 1024
TEST_OFF, PARTNER_OFF = 8 * 1024, 96 * 1024  # region offsets (the region is 1024 B aligned)
K_INSTR = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32}
ELEM = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1}
ONE = {"bf16": 0x3F80, "f16": 0x3C00, "tf32": 0x3F800000, "e4m3": 0x38}
POISON = {"bf16": 0x5555, "f16": 0x5555, "tf32": 0x4B4BC000, "e4m3": 0x55}
N_VALUES = (8, 16, 64, 128, 256)
SWIZZLES = ("none", "32B", "64B", "128B")


def values(dtype: str, count: int) -> np.ndarray:
    """`count` distinct finite bit patterns of dtype, none equal to the poison or to 1.0."""
    if dtype == "e4m3":
        pool = np.array([v for v in range(1, 0x7F) if v not in (POISON["e4m3"], ONE["e4m3"])], np.uint64)
        return pool  # digits: see digit_values
    start = {"bf16": 0x3C00, "f16": 0x1C00, "tf32": 0x30000}[dtype]
    v = np.arange(start, start + count + 2, dtype=np.uint64)
    if dtype == "tf32":
        v = v << np.uint64(13)  # TF32: the low 13 bits are zero
    v = v[(v != POISON[dtype]) & (v != ONE[dtype])]
    return v[:count]


def digit_values(ids: np.ndarray, run: int) -> np.ndarray:
    pool = values("e4m3", 0)
    return pool[(ids // len(pool) ** run) % len(pool)]


def k_tile(major: str, swizzle: str, dtype: str) -> int:
    """K extent of the tested tile: two MMA K-steps, or one whole K-major atom if that is wider."""
    e, kin = ELEM[dtype], K_INSTR[dtype]
    atom_k = (int(swizzle[:-1]) if swizzle != "none" else 16) // e if major == "K" else 8
    return max(2 * kin, atom_k)


def write(image: np.ndarray, layout: CanonicalLayout, base: int, matrix: np.ndarray) -> None:
    """Place matrix (rows x cols, raw element values) at `base` as `layout` lays it out."""
    e = layout.elem_bytes
    mn, k = np.meshgrid(np.arange(layout.rows), np.arange(layout.cols), indexing="ij")
    addr = layout.address(mn, k, base)
    for b in range(e):
        image[addr + b] = ((matrix >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.uint8)


def one_hot(rows: int, cols: int, dtype: str, shift: int = 0) -> np.ndarray:
    """rows x cols with 1.0 where (col % K) == (row + shift) % K ... per the campaign's partner rule."""
    kin = K_INSTR[dtype]
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.where(c % kin == (r + shift) % kin, ONE[dtype], 0).astype(np.uint64)


def poisoned(dtype: str) -> np.ndarray:
    e = ELEM[dtype]
    return np.resize(np.array([POISON[dtype]], f"<u{e}").view(np.uint8), IMAGE_BYTES).copy()


def build_case(dtype: str, test: str, major: str, swizzle: str, n: int, *, phase: int = 0, run: int = 0,
               corrupt=None, lbo_override=None, base_offset_override=None, shift=0, tag="canonical",
               order=None, k_atoms=1):
    """One case: image, descriptors and the metadata a replay needs. Returns (meta, image) or None
    when the tested tile is not canonical (an MN extent narrower than the swizzle atom)."""
    rows = 64 if test == "A" else n
    kt = k_tile(major, swizzle, dtype) * k_atoms
    try:
        lay = CanonicalLayout(major, swizzle, dtype, rows, kt, order)
    except Exception:
        return None
    steps = kt // K_INSTR[dtype]
    image = poisoned(dtype)
    ids = np.arange(rows * kt, dtype=np.uint64).reshape(rows, kt)
    tested = digit_values(ids, run) if dtype == "e4m3" else values(dtype, rows * kt)[ids.astype(np.int64)]
    t_base = TEST_OFF + phase
    write_layout = lay
    if corrupt and corrupt[0] == "image-swizzle":  # TMA wrote another swizzle than the descriptor says
        write_layout = CanonicalLayout(major, corrupt[1], dtype, rows, k_tile(major, corrupt[1], dtype)
                                       if k_tile(major, corrupt[1], dtype) >= kt else kt)
    write(image, write_layout, t_base, tested if write_layout.cols == kt else
          np.pad(tested, ((0, 0), (0, write_layout.cols - kt))))
    p_rows = n if test == "A" else 64
    partner = CanonicalLayout("K", "128B", dtype, p_rows, max(kt, 128 // ELEM[dtype]))
    hot = one_hot(p_rows, partner.cols, dtype, shift) if test == "A" else one_hot(p_rows, partner.cols, dtype)
    write(image, partner, PARTNER_OFF, hot)
    t_desc = [descriptor_for(lay, t_base, s) for s in range(steps)]
    p_desc = [descriptor_for(partner, PARTNER_OFF, s) for s in range(steps)]
    t_desc = [_corrupt(d, s, lay, t_base, corrupt, lbo_override, base_offset_override) for s, d in enumerate(t_desc)]
    trans_test = int(major == "MN")
    if corrupt and corrupt[0] == "transpose":
        trans_test = 1 - trans_test
    ta, tb = (trans_test, 0) if test == "A" else (0, trans_test)
    da, db = (t_desc, p_desc) if test == "A" else (p_desc, t_desc)
    meta = dict(dtype=dtype, n=n, ta=ta, tb=tb, steps=steps, test=test, major=major, swizzle=swizzle,
                order=lay.order,
                rows=rows, k_tile=kt, test_base=t_base, partner_base=PARTNER_OFF, run=run, shift=shift,
                corrupt=list(corrupt) if corrupt else None, tag=tag,
                desc_a=[d.encode() for d in da], desc_b=[d.encode() for d in db])
    return meta, image


def _corrupt(d: WgmmaDescriptor, step: int, lay, base, corrupt, lbo_override, base_offset_override):
    fields = dict(start_address=d.start_address, lbo=d.lbo, sbo=d.sbo, base_offset=d.base_offset,
                  swizzle=d.swizzle)
    if lbo_override is not None:
        fields["lbo"] = lbo_override
    if base_offset_override is not None:
        fields["base_offset"] = base_offset_override
    kind = corrupt[0] if corrupt else None
    if kind == "swap-lbo-sbo":
        fields["lbo"], fields["sbo"] = d.sbo, d.lbo
    elif kind == "k-advance":  # the start address advances by corrupt[1] bytes per step instead
        fields["start_address"] = lay.kstep_start(0, base=base) + step * corrupt[1]
    elif kind == "desc-swizzle":
        fields["swizzle"] = swizzle(corrupt[1])
    return WgmmaDescriptor(**fields)


def campaign():
    """(meta, image) for every case, with ids."""
    out = []

    def add(*a, **kw):
        c = build_case(*a, **kw)
        if c is not None:
            out.append(c)

    for dtype in ("bf16", "f16"):
        for sw in SWIZZLES:
            for major in ("K", "MN"):
                add(dtype, "A", major, sw, 16)
                for n in N_VALUES:
                    add(dtype, "B", major, sw, n)
                add(dtype, "A", major, sw, 8, shift=0)
                add(dtype, "A", major, sw, 8, shift=8, tag="canonical-second-half")
    for dtype in ("tf32", "e4m3"):
        for sw in SWIZZLES:
            runs = (0, 1) if dtype == "e4m3" else (0,)
            for run in runs:
                add(dtype, "A", "K", sw, 64 if dtype == "e4m3" else 8, run=run)
                for n in (8, 64, 256):
                    add(dtype, "B", "K", sw, n, run=run)
    # Base offsets: tiles off their swizzle repeat, with the PTX formula and with 0.
    for sw in ("32B", "64B", "128B"):
        for major in ("K", "MN"):
            for phase in (128, 384, 512, 896):
                if phase >= int(sw[:-1]) * 8:
                    continue
                add("bf16", "A", major, sw, 16, phase=phase, tag="base-offset-formula",
                    base_offset_override=base_offset_for(sw, TEST_OFF + phase))
                add("bf16", "A", major, sw, 16, phase=phase, base_offset_override=0, tag="base-offset-zero")
    # LBO on swizzled K-major: PTX says unused.
    for sw in ("32B", "64B", "128B"):
        for lbo in (0, 16 * 0x155, 16 * 0x3FFF, 1024):
            add("bf16", "A", "K", sw, 16, lbo_override=lbo, tag="lbo-ignored?")
    # Deliberate mismatches: each corrupts the tested operand only.
    for major in ("K", "MN"):
        for sw, other in (("128B", "64B"), ("64B", "128B"), ("32B", "128B"), ("128B", "32B"), ("64B", "32B")):
            add("bf16", "A", major, sw, 16, corrupt=("desc-swizzle", other), tag="mismatch")
            add("bf16", "A", major, other, 16, corrupt=("image-swizzle", sw), tag="mismatch")
        for sw in SWIZZLES:
            add("bf16", "A", major, sw, 16, corrupt=("swap-lbo-sbo",), tag="mismatch")
            add("bf16", "B", major, sw, 64, corrupt=("swap-lbo-sbo",), tag="mismatch")
            add("bf16", "A", major, sw, 16, corrupt=("transpose",), tag="mismatch")
    for sw in SWIZZLES:
        for adv in (0, 16, 64):
            add("bf16", "A", "K", sw, 16, corrupt=("k-advance", adv), tag="mismatch")
        add("bf16", "A", "MN", sw, 16, corrupt=("k-advance", 512), tag="mismatch")
    # Second H200 run: tiles two atoms deep in K (K-steps that cross atoms) in both stacking orders,
    # tested B tiles off their repeat boundary, more N for tf32 and fp8.
    for dtype in ("bf16", "f16"):
        for sw in SWIZZLES:
            for major in ("K", "MN"):
                for order in ("mn-first", "k-first"):
                    add(dtype, "A", major, sw, 16, order=order, k_atoms=2, tag="canonical-2atoms")
    for sw in ("32B", "64B", "128B"):
        for major in ("K", "MN"):
            for n in (64, 128):
                for phase in (128, 512):
                    if phase < int(sw[:-1]) * 8:
                        add("bf16", "B", major, sw, n, phase=phase, base_offset_override=0, tag="canonical-offset")
    for dtype in ("tf32", "e4m3"):
        for sw in SWIZZLES:
            for n in (16, 128):
                for run in ((0, 1) if dtype == "e4m3" else (0,)):
                    add(dtype, "B", "K", sw, n, run=run, tag="canonical-more-n")
    for i, (meta, _) in enumerate(out):
        meta["id"] = i
    return out


if __name__ == "__main__":
    import collections
    cs = campaign()
    print(len(cs), collections.Counter(m["tag"] for m, _ in cs))


def tested_matrix(meta: dict) -> np.ndarray:
    """The tested operand's logical values (rows x k_tile, raw bits), as build_case wrote them."""
    rows, kt, dtype = meta["rows"], meta["k_tile"], meta["dtype"]
    ids = np.arange(rows * kt, dtype=np.uint64).reshape(rows, kt)
    return digit_values(ids, meta["run"]) if dtype == "e4m3" else values(dtype, rows * kt)[ids.astype(np.int64)]


def intended_d(meta: dict, step: int) -> np.ndarray:
    """D (64 x n, float64) if the tested operand is read as intended: its values through the one-hot partner."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.descriptors.mma_read import to_float
    kin, n = K_INSTR[meta["dtype"]], meta["n"]
    x = to_float(tested_matrix(meta), meta["dtype"])[:, step * kin:(step + 1) * kin]
    m_idx, n_idx = np.meshgrid(np.arange(64), np.arange(n), indexing="ij")
    if meta["test"] == "A":
        return x[m_idx, (n_idx + meta["shift"]) % kin]
    return x[n_idx, m_idx % kin].astype(np.float64)
