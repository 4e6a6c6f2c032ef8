"""`lapis layout show|desc|decode|check`: canonical layouts, matrix descriptors and TMA/descriptor agreement.

Thin wrappers over lapis.layouts.show, lapis.layouts.descriptors and lapis.layouts.cute_input: they read the
parsed flags, call those functions and print text or JSON. Errors are lapis.errors.LapisError (exit 2).
"""

from __future__ import annotations

import json
import sys

from lapis.cli.output import FIGURE_SUFFIXES, check_out_file, write_output
from lapis.cli.tma import ints, print_warnings, tensor_map_from_args
from lapis.errors import LayoutError
from lapis.figures.tile import plot_tile_chunks
from lapis.layouts.canonical import CanonicalLayout, canonical_layout
from lapis.layouts.consumers import check_consumer
from lapis.layouts.cute_input import canonical_match, placement
from lapis.layouts.descriptors.agreement import check_agreement, check_reads, tile_map
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.descriptors.sm100 import UmmaDescriptor, umma_descriptor_for
from lapis.layouts.show import describe, describe_descriptor, format_text, layout_title, lbo_role, sbo_role
from lapis.layouts.tma import boundary_warnings, wide_tile_boxes


# The CLI's one spelling (the driver's CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B, PTX's "128B with 32B atomicity",
# as `lapis tma` spells it) -> lapis.layouts' name of the same mode.
SWIZZLE_NAMES = {"128B_atom32B": "128B_base32B"}


def _layout(args) -> CanonicalLayout:
    """The layout the flags describe: --cute LAYOUT, or --major --swizzle --dtype --rows --cols."""
    if getattr(args, "cute", None):
        m = canonical_match(args.cute, args.dtype)
        if m["canonical"] and m["layout"] is None:
            raise LayoutError("the CuTe layout is canonical but its atoms are not densely stacked", m["reason"],
                              "`lapis layout check --cute` checks descriptors against it; show draws dense tiles")
        if not m["canonical"]:
            raise LayoutError("the CuTe layout is not a canonical wgmma/tcgen05 layout", m["reason"],
                              "build it from the GMMA atoms: tile_to_shape(Layout_K_SW128_Atom<T>{}, shape)",
                              "PTX ISA 9.7.15.5.1.2")
        return m["layout"]
    missing = [f"--{n}" for n in ("major", "swizzle", "dtype", "rows", "cols") if getattr(args, n) is None]
    if missing:
        raise LayoutError("a layout needs --cute or all of --major --swizzle --dtype --rows --cols",
                          "missing " + " ".join(missing), "give the missing flags or --cute 'Sw<3,4,3> o ...'")
    return canonical_layout(args.major, SWIZZLE_NAMES.get(args.swizzle, args.swizzle), args.dtype, args.rows, args.cols,
                            args.order)


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2))


def cli_show(args) -> int:
    check_out_file("--figure", args.figure, FIGURE_SUFFIXES)
    lay = _layout(args)
    if args.json:
        _print_json(describe(lay, args.smem_base))
    else:
        lines = None if args.lines == "all" else int(args.lines)
        print(format_text(lay, args.smem_base, lines))
    if args.figure:
        write_output("--figure", args.figure, lambda: plot_tile_chunks(lay, args.smem_base, path=args.figure))
        print(f"wrote {args.figure}", file=sys.stderr)  # stderr keeps --json output parseable
    return 0


def _descriptor(lay, args):
    if args.arch == "sm100":  # tcgen05: spec-checked against PTX and CUTLASS, not hardware
        return umma_descriptor_for(lay, args.smem_base, args.step)
    return descriptor_for(lay, args.smem_base, args.step)


def cli_desc(args) -> int:
    lay = _layout(args)
    d = _descriptor(lay, args)
    if args.json:
        _print_json({**describe_descriptor(d), "layout": describe(lay, args.smem_base), "step": args.step,
                     "lbo_role": lbo_role(lay), "sbo_role": sbo_role(lay)})
        return 0
    print(f"{d.encode():#018x}")
    print(f"{layout_title(lay, args.smem_base)}, K-step {args.step}")
    print(d)
    print(f"  LBO role: {lbo_role(lay)}")
    print(f"  SBO role: {sbo_role(lay)}")
    return 0


def cli_decode(args) -> int:
    if args.arch == "sm100":
        d = UmmaDescriptor.decode(args.value)
    else:
        d = WgmmaDescriptor.decode(args.value)
    if args.json:
        _print_json(describe_descriptor(d))
        return 0
    print(d)
    print("  LBO/SBO roles depend on the operand's major-ness (PTX ISA 9.7.15.5.1.2.1); see `lapis layout show`")
    return 0


def cli_check(a) -> int:
    """`lapis layout check`: exit 0 when every K-step (or the --consumer's lanes) reads the intended tile, 1 when
    not, 2 on bad input."""
    if a.consumer:
        return cli_consumer(a)
    if a.rows is None:
        raise LayoutError("a descriptor check needs the operand rows", "no --rows", "give --rows 64 for A or N for B")
    if not a.desc:
        raise LayoutError("give one --desc per MMA K-step", "none", "e.g. --desc 0x4000004000010040 --desc ...")
    if a.arch == "sm100":
        descs = [UmmaDescriptor.decode(v) for v in a.desc]
    else:
        descs = [WgmmaDescriptor.decode(v) for v in a.desc]
    if a.cute:
        m = canonical_match(a.cute, a.dtype)
        if not m["canonical"]:
            raise LayoutError("the CuTe layout is not canonical, so no descriptor reads it as intended", m["reason"],
                              "build it from the GMMA atoms")
        p = m["parsed"]
        where, plan = placement(p, m["offsets"], a.smem_base), "the CuTe layout"
        v = check_reads(where, p["swizzle"], m["major"], a.rows, descs, bool(a.trans), p["elem_bits"] // 8, plan,
                        a.arch)
        warnings = print_warnings(boundary_warnings(p["swizzle"], [a.smem_base]))
    else:
        missing = [f for f in ("dtype", "dims", "box", "coords", "major") if getattr(a, f) is None]
        if missing:
            raise LayoutError("a TMA plan needs --dtype --dims --box --coords --major (or give --cute)",
                              "missing " + ", ".join(missing), "give them, or the smem layout with --cute")
        tmap = tensor_map_from_args(a)
        if any(s != 1 for s in tmap.elem_strides[1:]):
            raise LayoutError("the agreement checker takes element strides of 1", tmap.elem_strides,
                              "drop --elem-strides (a strided load is not an MMA tile)")
        if a.tile_cols is not None and a.tile_cols <= 0:
            raise LayoutError("--tile-cols must be positive", a.tile_cols, "give the tile width in elements")
        coords = tuple(ints(a.coords))
        width = a.tile_cols or tmap.box[0]
        boxes = wide_tile_boxes(tmap, width, coords, a.smem_base) if width != tmap.box[0] else [(coords, a.smem_base)]
        plan = f"{len(boxes)} TMA box(es)"
        v = check_agreement(tmap, boxes, coords, a.major, a.rows, descs, bool(a.trans), a.arch)
        warnings = print_warnings(boundary_warnings(tmap.swizzle, [dst for _, dst in boxes]))
    if a.json:
        print(json.dumps(dict(ok=v.ok, units="(r, k): operand row and K index, elements", steps=[
            dict(step=s.step, ok=s.ok, first_wrong=s.first_wrong, read=s.read, causes=[m for _, m in s.causes],
                 harmless=[m for _, m in s.harmless]) for s in v.steps], warnings=warnings), indent=1))
    else:
        print(("agree: " if v.ok else "DISAGREE: ") + f"{len(descs)} K-step(s) against {plan}")
        print(v.summary())
    return 0 if v.ok else 1


def cli_consumer(a) -> int:
    """`lapis layout check --consumer`: one warp's ldmatrix/LDS.128 read of the TMA box at --smem-base, with the
    XOR computed as --consumer-xor says; exit 0 when every lane reads what it wants, 1 when not."""
    if a.desc or a.cute:
        raise LayoutError("--consumer checks a register read of a TMA box, not descriptors or a CuTe layout",
                          "--desc" if a.desc else "--cute", "drop it, or check the descriptors without --consumer")
    missing = [f"--{f.replace('_', '-')}" for f in ("dtype", "dims", "box", "coords") if getattr(a, f) is None]
    if missing:
        raise LayoutError("a consumer check needs the TMA plan: --dtype --dims --box --coords",
                          "missing " + ", ".join(missing), "give them")
    tmap = tensor_map_from_args(a)
    if tmap.rank != 2:
        raise LayoutError("the consumer check takes 2-D tiles", f"rank {tmap.rank}", "use a rank-2 tensor map")
    coords = tuple(ints(a.coords))
    where = tile_map(tmap, [(coords, a.smem_base)], coords, "K")  # (box dim 1, box dim 0) as stored
    v = check_consumer(where, a.consumer, a.consumer_xor, tmap.swizzle, a.smem_base, tmap.row_pitch,
                       tmap.dtype.bytes)
    warnings = print_warnings(boundary_warnings(tmap.swizzle, [a.smem_base]))
    if a.json:
        print(json.dumps(dict(ok=v.ok, consumer=v.consumer, xor=v.xor, units="(row, col): box dimension 1 and 0, "
                              "elements", lane=v.lane, register=v.register, element=v.half, wanted=v.wanted,
                              read=v.read, warnings=warnings), indent=1))
    else:
        print(("agree: " if v.ok else "DISAGREE: ") + v.summary())
    return 0 if v.ok else 1
