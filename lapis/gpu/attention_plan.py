"""The Hopper attention kernels' shared-memory plan, derived from lapis's layout model and compiled in.

kernels/attention_h200.cu (every h200-s* variant) computes O = softmax(Q K^T / sqrt(D)) V for bf16
Q, K, V, O of shape B x H x L x D (D = 128, contiguous), as two wgmma per K/V tile:
- S = Q K^T: m64nBNk16, A = Q (64 x D, K-major) and B = K_j (BN x D, K-major), both from shared memory;
- O += P V: m64n128k16 with P (bf16, registers) as A and B = V_j read MN-major: the MMA's N is D, which is
  contiguous in V, and its K is the key index (imm-trans-b = 1).
Each tile is loaded as 64-column SW128 TMA boxes (a 128-byte row is the widest SW128 box), one box per
swizzle-atom column (`wide_tile_boxes`), so the smem tile is lapis's canonical layout:
- Q: K-major 64 x 128 (mn-first atoms); K_j: K-major BN x 128; V_j: MN-major 128 (D) x BN (keys) (k-first).
- Q128 (two consumer warpgroups, h200-s3 on: block_m 128): K-major 128 x 128, loaded as 128-row boxes;
  consumer warpgroup i reads rows 64 i .. 64 i + 63 as its m64 A operand, through a descriptor whose start is
  the tile plus Q128_HALF_START[i] (the layout's byte offset of row 64 i, column 0) plus the K-step's start.
Everything else the kernel uses comes from lapis too: the sm90 descriptors (`descriptor_for`: fixed fields with
start address 0, and each K-step's start offset), box and tx bytes (`TensorMap`), the driver enum codes, and the
agreement checker (`agreement()`), which proves every K-step of every read sees the tile the boxes wrote.

`python -m lapis.gpu.attention_plan` writes kernels/attention_plan.h (nvcc) and kernels/attention_plan.json (the
host, which must not need tensor_layouts); tests/test_attention_plan.py checks both equal `plan()`.
Units: bytes unless a name says elements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lapis.gpu.gemm_plan import parse_header as scalars
from lapis.layouts.tma import INTERLEAVE_CODES, L2_CODES, OOB_CODES, SWIZZLE_CODES, TensorMap, tma_type, wide_tile_boxes

KERNELS = Path(__file__).parent / "kernels"
HEADER = KERNELS / "attention_plan.h"
PLAN_JSON = KERNELS / "attention_plan.json"

HEAD_DIM, BLOCK_M, BLOCK_NS = 128, 64, (64, 128)
WIDE_BLOCK_M = 128  # the Q tile of two consumer warpgroups, BLOCK_M rows each
DTYPE, SWIZZLE, L2_PROMOTION = "bf16", "128B", "256B"
BOX_INNER = 64  # elements: 128 B of bf16, the SW128 span
MMA_K = 16  # bf16 elements of K per wgmma (32 B)
ANY_ROWS = 1 << 20  # tensor rows used to validate a map (B * H * L on the device)

# Timeline vocabulary (harness.cuh records role/op codes; harness.decode_timeline names them).
ROLES = ("producer", "consumer0", "consumer1")
OPS = ("start", "wait empty", "issue TMA", "wait Q", "wait K", "issue QK", "wait QK", "softmax", "wait V",
       "issue PV", "wait PV", "epilogue", "wait turn", "O rescale")


def _tmap(box_rows: int):
    return TensorMap(DTYPE, (HEAD_DIM, ANY_ROWS), (HEAD_DIM * 2,), (BOX_INNER, box_rows), swizzle=SWIZZLE,
                     l2=L2_PROMOTION)


def _operand(major: str, mn: int, k: int, box_rows: int) -> dict:
    """One smem tile read by wgmma: mn x k elements (MMA coordinates), loaded as 64-column boxes of box_rows."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.canonical import CanonicalLayout
    from lapis.layouts.descriptors.sm90 import descriptor_for
    layout = CanonicalLayout(major, SWIZZLE, DTYPE, mn, k)
    tmap = _tmap(box_rows)
    boxes = wide_tile_boxes(tmap, HEAD_DIM, (0, 0), 0)
    if len(boxes) * tmap.box_bytes != layout.footprint_bytes:
        raise AssertionError("the TMA boxes and the canonical tile differ in size")
    descs = [descriptor_for(layout, 0, s) for s in range(k // MMA_K)]
    fixed = descs[0].encode() & ~0x3FFF  # start address field (bits 0-13) cleared: the kernel ORs it in
    return dict(major=major, mn=mn, k=k, box=[BOX_INNER, box_rows], box_bytes=tmap.box_bytes, boxes=len(boxes),
                box_stride=boxes[1][1] - boxes[0][1], slot_bytes=layout.footprint_bytes, desc_fixed=fixed,
                kstep_starts=[d.start_address for d in descs], lbo=descs[0].lbo, sbo=descs[0].sbo)


def _half_starts() -> list:
    """Bytes from the Q128 tile to row 64 i (column 0), i = 0, 1: where consumer warpgroup i's A operand starts."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.canonical import CanonicalLayout
    layout = CanonicalLayout("K", SWIZZLE, DTYPE, WIDE_BLOCK_M, HEAD_DIM)
    return [int(layout.offset_bytes(BLOCK_M * i, 0)) for i in range(WIDE_BLOCK_M // BLOCK_M)]


def plan() -> dict:
    """The plan as plain data (ints, lists, strings); needs lapis.layouts (tensor_layouts)."""
    return dict(
        head_dim=HEAD_DIM, block_m=BLOCK_M, block_ns=list(BLOCK_NS), dtype=DTYPE, elem_bytes=2, mma_k=MMA_K,
        q=_operand("K", BLOCK_M, HEAD_DIM, BLOCK_M),
        q128=dict(_operand("K", WIDE_BLOCK_M, HEAD_DIM, WIDE_BLOCK_M), half_starts=_half_starts()),
        k={str(n): _operand("K", n, HEAD_DIM, n) for n in BLOCK_NS},
        v={str(n): _operand("MN", HEAD_DIM, n, n) for n in BLOCK_NS},
        tensor_map=dict(dtype_code=tma_type(DTYPE).code, swizzle_code=SWIZZLE_CODES[SWIZZLE],
                        interleave_code=INTERLEAVE_CODES["none"], l2_code=L2_CODES[L2_PROMOTION],
                        oob_code=OOB_CODES["zero"], dims="(D, B * H * L) elements, innermost first",
                        strides="(D * elem_bytes,) bytes", coords="(64 * box, bh * L + tile row)"),
        roles=list(ROLES), ops=list(OPS),
        barrier_ids="q = 0, full_k[s] = 1 + s, full_v[s] = 1 + stages + s, empty[s] = 1 + 2 * stages + s")


def constants(p: dict) -> dict:
    """NAME -> int or list of ints, every constant the header defines."""
    c = dict(HEAD_DIM=p["head_dim"], BLOCK_M=p["block_m"], BOX_INNER=BOX_INNER, MMA_K=p["mma_k"])

    def put(prefix, op):
        c.update({f"{prefix}_SLOT_BYTES": op["slot_bytes"], f"{prefix}_BOX_BYTES": op["box_bytes"],
                  f"{prefix}_BOX_ROWS": op["box"][1], f"{prefix}_BOXES": op["boxes"],
                  f"{prefix}_BOX_STRIDE": op["box_stride"], f"{prefix}_DESC": op["desc_fixed"],
                  f"{prefix}_KSTEPS": len(op["kstep_starts"]), f"{prefix}_KSTEP_START": op["kstep_starts"]})
    put("Q", p["q"])
    put("Q128", p["q128"])
    c["Q128_HALF_START"] = p["q128"]["half_starts"]
    for n in p["k"]:
        put(f"K{n}", p["k"][n])
        put(f"V{n}", p["v"][n])
    c.update({f"ROLE_{r.upper()}": i for i, r in enumerate(p["roles"])})
    c.update({f"OP_{o.upper().replace(' ', '_')}": i for i, o in enumerate(p["ops"])})
    return c


def header(p: dict) -> str:
    lines = ["// Generated by lapis/gpu/attention_plan.py from lapis's layout model; do not edit.",
             "// Tiles: Q K-major 64 x 128 (Q128: 128 x 128, consumer WG i from Q128_HALF_START[i]), K<BN> K-major",
             "// BN x 128, V<BN> MN-major 128 (D) x BN (keys), canonical",
             "// SW128 bf16, each loaded as *_BOXES TMA boxes {64, *_BOX_ROWS} placed *_BOX_STRIDE bytes apart.",
             "// *_DESC: sm90 wgmma descriptor, start address 0 (OR in smem_addr >> 4); *_KSTEP_START[s]: bytes",
             "// from the tile to K-step s (16 elements of the MMA's K; a __device__ array, indexed by unrolled constants).",
             "#pragma once", "#include <stdint.h>", "", "namespace attention_plan {"]
    for name, v in constants(p).items():
        if isinstance(v, list):
            lines.append(f"__device__ constexpr uint32_t {name}[{len(v)}] = {{{', '.join(map(str, v))}}};")
            continue
        t = "uint64_t" if name.endswith("_DESC") else ("uint8_t" if name.startswith(("ROLE_", "OP_")) else "uint32_t")
        lines.append(f"constexpr {t} {name} = {hex(v) + 'ull' if t == 'uint64_t' else v};")
    return "\n".join(lines + ["}  // namespace attention_plan", ""])


def parse_header(text: str) -> dict:
    """NAME -> int (or list) of every `constexpr T NAME = V;` / `constexpr T NAME[n] = {...};` (what nvcc sees)."""
    out = scalars(text)
    out.update({m[1]: [int(x) for x in m[2].split(",")]
                for m in re.finditer(r"constexpr \w+ (\w+)\[\d+\] = \{([^}]*)\};", text)})
    return out


def reads(p: dict) -> list:
    """(name, operand dict, wgmma rows, transpose) of every wgmma operand read the kernels make."""
    out = [("Q as A", p["q"], BLOCK_M, False)]
    for n in p["k"]:
        out += [(f"K{n} as K-major B", p["k"][n], int(n), False), (f"V{n} as MN-major B", p["v"][n], HEAD_DIM, True)]
    return out


def half_reads(p: dict) -> list:
    """(name, operand, first row, start offset) of each consumer warpgroup's m64 read of the Q128 tile."""
    q = p["q128"]
    return [(f"Q128 rows {BLOCK_M * i}.. as A", q, BLOCK_M * i, off) for i, off in enumerate(q["half_starts"])]


def agreement(p: dict, base: int = 5 * 1024) -> list:
    """(name, Agreement) of every read, through lapis's checker, with the tile at a 1024 B-aligned `base`."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.descriptors.agreement import check_agreement
    from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
    out = []
    for name, op, rows, transpose in reads(p):
        tmap = _tmap(op["box"][1])
        boxes = wide_tile_boxes(tmap, HEAD_DIM, (0, 0), base)
        if [d - base for _, d in boxes] != [i * op["box_stride"] for i in range(op["boxes"])]:
            raise AssertionError(f"{name}: box placement differs from the plan's box stride")
        descs = [WgmmaDescriptor.decode(op["desc_fixed"] | ((base + s) >> 4)) for s in op["kstep_starts"]]
        out.append((name, check_agreement(tmap, boxes, (0, 0), op["major"], rows, descs, transpose)))
    for name, op, row0, off in half_reads(p):  # origin row0: the read's row r must be tensor row row0 + r
        tmap = _tmap(op["box"][1])
        boxes = wide_tile_boxes(tmap, HEAD_DIM, (0, 0), base)
        descs = [WgmmaDescriptor.decode(op["desc_fixed"] | ((base + off + s) >> 4)) for s in op["kstep_starts"]]
        out.append((name, check_agreement(tmap, boxes, (0, row0), op["major"], BLOCK_M, descs, False)))
    return out


def write() -> None:
    p = plan()
    bad = [n for n, v in agreement(p) if not v.ok]
    if bad:
        raise SystemExit(f"TMA boxes and descriptors disagree for {bad}")
    HEADER.write_text(header(p))
    PLAN_JSON.write_text(json.dumps(p, indent=1) + "\n")


def load() -> dict:
    """The committed plan (JSON; no tensor_layouts needed): what the host encodes tensor maps with."""
    return json.loads(PLAN_JSON.read_text())


if __name__ == "__main__":
    write()
    print(f"wrote {HEADER} and {PLAN_JSON}")
