"""The GEMM kernel's shared-memory plan, derived from lapis's layout model and compiled into the kernel.

kernels/gemm_ws.cu (a TMA + wgmma warp-specialized GEMM, bf16 A M x K and B N x K, both K-major) loads each
K block of A (block_m x 64) and B (block_n x 64) with one 128B-swizzled TMA box each and reads them with
wgmma m64nNk16 through sm90 matrix descriptors. Everything the kernel must agree on comes from lapis:
- the canonical K-major SW128 bf16 layouts (`CanonicalLayout`): slot bytes and the byte offset of row 64
  (where the second consumer warpgroup's A rows start);
- the descriptors (`descriptor_for`): the fixed fields (LBO, SBO, layout type, base offset) with start
  address 0, and the start-address advance per K-step of 16 elements;
- the tensor maps (`TensorMap`, every cuTensorMapEncodeTiled rule checked): box, swizzle, the tx bytes a box
  delivers, and the driver enum codes the host encodes with;
- the agreement checker (`lapis layout check`'s code path): every K-step of every consumer reads the tile
  the TMA boxes wrote.

`python -m lapis.gpu.gemm_plan` writes kernels/gemm_ws_plan.h (for nvcc) and kernels/gemm_ws_plan.json (for
the host, which must not need tensor_layouts); tests/test_gemm_plan.py checks both equal `plan()`.
Units: bytes unless a name says elements.
"""

from __future__ import annotations

import json
from pathlib import Path

from lapis.layouts.tma import INTERLEAVE_CODES, L2_CODES, OOB_CODES, SWIZZLE_CODES, TensorMap, tma_type

KERNELS = Path(__file__).parent / "kernels"
HEADER = KERNELS / "gemm_ws_plan.h"
PLAN_JSON = KERNELS / "gemm_ws_plan.json"

BLOCK_M, BLOCK_K, BLOCK_NS = 128, 64, (128, 256)
DTYPE, SWIZZLE, L2_PROMOTION = "bf16", "128B", "256B"
MMA_ROWS = 64  # wgmma m64: each consumer warpgroup reads A in 64-row slices
GROUP_M = 8  # tile raster: 8 M tiles share each N column before moving on (L2 reuse of B)

# The kernel's timeline vocabulary (harness.cuh records role/op codes; harness.py decodes them by name).
ROLES = ("producer", "consumer0", "consumer1")
OPS = ("start", "wait empty", "issue TMA", "wait full", "issue wgmma", "wait wgmma", "epilogue")


def _operand(rows: int, tmap_rows: int, steps: int) -> dict:
    """Layout, descriptors and tensor map of one operand slot: `rows` read per wgmma, `tmap_rows` per box."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.canonical import CanonicalLayout
    from lapis.layouts.descriptors.sm90 import descriptor_for
    read = CanonicalLayout("K", SWIZZLE, DTYPE, rows, BLOCK_K)
    slot = CanonicalLayout("K", SWIZZLE, DTYPE, tmap_rows, BLOCK_K)
    descs = [descriptor_for(read, 0, s) for s in range(steps)]
    tmap = TensorMap(DTYPE, (4096, 4096), (4096 * 2,), (BLOCK_K, tmap_rows), swizzle=SWIZZLE, l2=L2_PROMOTION)
    if tmap.smem_footprint != slot.footprint_bytes or tmap.box_bytes != slot.footprint_bytes:
        raise AssertionError("the TMA box and the canonical slot differ in size")
    return dict(box=[BLOCK_K, tmap_rows], box_bytes=tmap.box_bytes, slot_bytes=slot.footprint_bytes,
                desc_fixed=descs[0].encode(), kstep_bytes=descs[1].start_address - descs[0].start_address,
                kstep_count=steps, rows64_offset=int(slot.address(MMA_ROWS, 0, 0)) if tmap_rows > MMA_ROWS else 0)


def plan() -> dict:
    """The plan as plain data (ints, lists, strings); needs lapis.layouts (tensor_layouts)."""
    steps = BLOCK_K * 2 // 32  # wgmma K-step: 32 B of K = 16 bf16 elements
    return dict(
        block_m=BLOCK_M, block_k=BLOCK_K, block_ns=list(BLOCK_NS), dtype=DTYPE, elem_bytes=2, group_m=GROUP_M,
        a=_operand(MMA_ROWS, BLOCK_M, steps),
        b={str(n): _operand(n, n, steps) for n in BLOCK_NS},
        tensor_map=dict(dtype_code=tma_type(DTYPE).code, swizzle_code=SWIZZLE_CODES[SWIZZLE],
                        interleave_code=INTERLEAVE_CODES["none"], l2_code=L2_CODES[L2_PROMOTION],
                        oob_code=OOB_CODES["zero"], dims="(K, rows) elements, innermost first",
                        strides="(K * elem_bytes,) bytes", coords="(k_block * block_k, tile_row * box rows)"),
        roles=list(ROLES), ops=list(OPS),
        barrier_ids="full[s] = s, empty[s] = stages + s (the watchdog's Status.barrier)")


def constants(p: dict) -> dict:
    """NAME -> int of every constant the header defines."""
    c = dict(BLOCK_M=p["block_m"], BLOCK_K=p["block_k"], GROUP_M=p["group_m"], MMA_ROWS=MMA_ROWS,
             A_SLOT_BYTES=p["a"]["slot_bytes"], A_BOX_BYTES=p["a"]["box_bytes"], A_BOX_K=p["a"]["box"][0],
             A_BOX_ROWS=p["a"]["box"][1], A_ROWS64_OFFSET=p["a"]["rows64_offset"], A_DESC=p["a"]["desc_fixed"],
             KSTEP_BYTES=p["a"]["kstep_bytes"], KSTEPS=p["a"]["kstep_count"])
    for n, b in p["b"].items():
        c.update({f"B{n}_SLOT_BYTES": b["slot_bytes"], f"B{n}_BOX_BYTES": b["box_bytes"], f"B{n}_BOX_K": b["box"][0],
                  f"B{n}_BOX_ROWS": b["box"][1], f"B{n}_DESC": b["desc_fixed"], f"B{n}_KSTEP_BYTES": b["kstep_bytes"]})
    c.update({f"ROLE_{r.upper()}": i for i, r in enumerate(p["roles"])})
    c.update({f"OP_{o.upper().replace(' ', '_')}": i for i, o in enumerate(p["ops"])})
    return c


def header(p: dict) -> str:
    lines = ["// Generated by lapis/gpu/gemm_plan.py from lapis's layout model; do not edit.",
             "// Smem slots: canonical K-major SW128 bf16 (CanonicalLayout); *_DESC: sm90 wgmma descriptor with",
             "// start address 0 (OR in smem_addr >> 4); *_KSTEP_BYTES: start advance per 16-element K-step;",
             "// A_ROWS64_OFFSET: bytes from the slot to A row 64; *_BOX_*: TMA box {K, rows}, SW128.",
             "#pragma once", "#include <stdint.h>", "", "namespace gemm_plan {"]
    for name, v in constants(p).items():
        t = "uint64_t" if name.endswith("_DESC") else ("uint8_t" if name.startswith(("ROLE_", "OP_")) else "uint32_t")
        lines.append(f"constexpr {t} {name} = {hex(v) + 'ull' if t == 'uint64_t' else v};")
    return "\n".join(lines + ["}  // namespace gemm_plan", ""])


def parse_header(text: str) -> dict:
    """NAME -> int of every `constexpr T NAME = V;` line (what nvcc compiles in)."""
    import re
    return {m[1]: int(m[2].removesuffix("ull"), 0) for m in re.finditer(r"constexpr \w+ (\w+) = (\w+);", text)}


def agreement(p: dict) -> list:
    """(operand, consumer rows, Agreement) of every wgmma read the kernel makes, through lapis's checker."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.layouts.descriptors.agreement import check_agreement
    from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
    out = []
    base = 3 * 1024  # any 1024 B-aligned slot address: the kernel's slots are
    reads = [("A", p["a"], MMA_ROWS, r0) for r0 in range(0, p["block_m"], MMA_ROWS)]
    reads += [(f"B{n}", b, int(n), 0) for n, b in p["b"].items()]
    for name, op, rows, r0 in reads:
        tmap = TensorMap(DTYPE, (4096, 4096), (8192,), tuple(op["box"]), swizzle=SWIZZLE, l2=L2_PROMOTION)
        start = base + (op["rows64_offset"] * r0 // MMA_ROWS)
        descs = [WgmmaDescriptor.decode(op["desc_fixed"] | ((start + s * op["kstep_bytes"]) >> 4))
                 for s in range(op["kstep_count"])]
        out.append((name, r0, check_agreement(tmap, [((0, 0), base)], (0, r0), "K", rows, descs, False)))
    return out


def write() -> None:
    p = plan()
    bad = [(n, r0) for n, r0, v in agreement(p) if not v.ok]
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
