"""`lapis validate layouts|mma|timelines|units|seeds`: the models against the captures and the seeds' tables.

layouts and mma exit 1 when a capture disagrees with the model; timelines, units and seeds exit 0 (their numbers
are a measurement, not a pass/fail check).
"""

from __future__ import annotations

import json

from lapis.cli.output import check_out_dir
from lapis.validate.layouts import format_provenance, format_validation, passed, validate_layouts
from lapis.validate.mma import not_compared_lines, validate_mma
from lapis.validate.mma import passed as mma_passed
from lapis.validate.seeds import render as render_seeds
from lapis.validate.seeds import validate_seeds
from lapis.validate.timelines import render, validate_timelines
from lapis.validate.units import render as render_units
from lapis.validate.units import validate_units


def cli_validate_layouts(args) -> int:
    out = validate_layouts(args.captures)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(format_validation(out))
    return 0 if passed(out) else 1


def cli_validate_mma(args) -> int:
    out = validate_mma(args.captures)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        w, p, s = out["wgmma"], out["mismatch_pairs"], out["settled"]
        print(f"wgmma: {w['cases']} cases ({', '.join(w['dtypes'])}; majors {w['majors']}; swizzles "
              f"{w['swizzles']}; N {w['n_values']}), {w['mismatches']} with D not predicted exactly")
        print(f"mismatched descriptor/layout pairs: {p['cases']} ({', '.join(p['kinds'])}), "
              f"{p['prediction_failures']} prediction failures; {p['harmless']} corruption(s) predicted harmless")
        print(f"settled on the H200: LBO ignored for swizzled K-major: {s['lbo_ignored_swizzled_k_major']}; "
              f"base offset 0 reads a TMA-written tile off its repeat boundary: "
              f"{s['base_offset_zero_reads_tma_layout']}; PTX's formula does: "
              f"{s['ptx_formula_base_offset_reads_tma_layout']}")
        b = out["bank_conflicts"]
        print(f"bank conflicts (Nsight Compute on the H200): {b['patterns']} patterns, {b['conflicting_patterns']} "
              f"conflicting (x{', x'.join(f'{d:g}' for d in b['degrees'])}), {b['disagreements']} disagreements")
        o = out["cutlass_oracle"]
        print(f"CUTLASS oracle (make_gmma_desc / make_umma_desc run on the H200): {o['cases']} layouts, "
              f"{o['k_steps']} K-steps, {o['disagreements']} disagreements with lapis's sm90 and sm100 builders")
        print("\n".join([*not_compared_lines(out), format_provenance(out["provenance"])]))
    return 0 if mma_passed(out) else 1


def cli_validate_timelines(args) -> int:
    """`lapis validate timelines`: exit 0 (the numbers are a measurement, not a pass/fail check)."""
    check_out_dir("--figures", args.figures, "figures")
    r = validate_timelines(args.captures, args.figures, progress=True)
    print(json.dumps(r, indent=1) if args.json else render(r))
    return 0


def cli_validate_units(args) -> int:
    """`lapis validate units`: exit 0 (the numbers are a measurement, not a pass/fail check)."""
    r = validate_units(args.captures)
    print(json.dumps(r, indent=1) if args.json else render_units(r))
    return 0


def cli_validate_seeds(args) -> int:
    """`lapis validate seeds`: exit 0 (the numbers are a measurement, not a pass/fail check)."""
    r = validate_seeds()
    print(json.dumps(r, indent=1, ensure_ascii=False) if args.json else render_seeds(r))
    return 0
