"""`lapis report`: the main job. Validate the models against the shipped captures,
print a short table, and write a markdown report with figures.

Each section is one function returning (markdown, numbers).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lapis.captures import attention as attention_capture
from lapis.captures.gemm import timed_captures
from lapis.captures.store import captures_root, load_capture, manifests, read_manifest
from lapis.errors import LapisError
from lapis.figures.mma_pair import plot_pair
from lapis.figures.tile import plot_tile_chunks
from lapis.figures.tma_box import chunk_map, plot_box_pair
from lapis.gpu.wgmma_campaign import tested_matrix
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.mma_read import read_operand
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
from lapis.layouts.tma.rules import rule_table
from lapis.report import yes_no
from lapis.report.calibration import calibration_section
from lapis.report.kernels import kernels_section
from lapis.report.progress import Progress
from lapis.report.schedules import schedules_section
from lapis.report.seeds import seeds_section
from lapis.report.third_party import third_party_section
from lapis.report.validation import validation_section
from lapis.validate.layouts import predict_region, validate_layouts
from lapis.validate.mma import validate_mma


def layouts_section(captures: str | None, out: Path) -> tuple[str, dict]:
    """TMA placement against H200 dumps, and the canonical-layout figure."""
    v = validate_layouts(captures)
    t, prov = v["tma"], v["provenance"]
    fig = _tile_figure(out)
    md = [
        "## Layouts: TMA placement against H200 dumps",
        "",
        f"Captured on {prov['gpu']} (driver {prov['driver']}, CUDA driver API {prov['cuda_driver_api']}):",
        "",
        *[f"- `{c['folder']}`: {c['date']}, commit `{c['commit'][:12]}`{' (dirty)' if c['dirty'] else ''}, "
          f"`{c['command']}`" for c in prov["captures"]],
        "",
        "| configs | bytes compared | mismatched bytes | faults observed | faults predicted | unmodelled |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {t['configs']} | {t['bytes_compared']} | {t['mismatched_bytes']} | {t['faults']['observed']} | "
        f"{t['faults']['predicted']} | {t['verdicts'].get('unmodelled', 0)} |",
        "",
        f"Ranks {t['ranks']}, element sizes {t['element_bytes']} B, swizzle codes {t['swizzles']}; "
        f"{t['unaligned_bases']} configurations with a destination off the swizzle repeat boundary, "
        f"{t['oob_configs']} partly out of bounds, {t['elem_strided_configs']} with element strides.",
        "",
        "Each dump covers the box footprint plus a 1 KiB sentinel guard band on each side; every byte is compared. "
        "Not compared: interleaved loads (lapis does not model interleaved placement and says so), and loads "
        "whose encode the driver rejected (the rule checker below predicts those).",
        "",
        "### Canonical layout: K-major, 128B swizzle, bf16, 128 x 64",
        "",
        f"![K-major SW128 bf16 128x64]({fig.name})",
        "",
        "Each cell is one 16-byte chunk at its shared-memory position, coloured by the logical chunk it holds; "
        "thick lines outline the 1024 B swizzle atoms.",
    ]
    return "\n".join(md), {"layouts": v}


def _tile_figure(out: Path) -> Path:
    path = out / "kmajor_sw128_bf16_128x64.png"
    plot_tile_chunks(CanonicalLayout("K", "128B", "bf16", 128, 64), base=0, path=str(path))
    return path


def summary_table(numbers: dict) -> str:
    t = numbers["layouts"]["tma"]
    rows = [("check", "configs", "bytes compared", "mismatches"),
            ("TMA placement (H200)", str(t["configs"]), str(t["bytes_compared"]), str(t["mismatched_bytes"])),
            ("TMA faults (H200)", str(t["faults"]["observed"]), "-",
             str(t["faults"]["missed"] + t["faults"]["false_alarms"])),
            ("cuTensorMapEncodeTiled decisions (H200)", str(numbers["layouts"]["encode"]["cases"]), "-",
             str(numbers["layouts"]["encode"]["disagreements"]))]
    if "mma" in numbers:
        w, p = numbers["mma"]["wgmma"], numbers["mma"]["mismatch_pairs"]
        o = numbers["mma"]["cutlass_oracle"]
        rows += [("wgmma reads through descriptors (H200)", str(w["cases"]), "-", str(w["mismatches"])),
                 ("mismatched descriptor pairs (H200)", str(p["cases"]), "-", str(p["prediction_failures"])),
                 ("CUTLASS descriptor oracle (sm90+sm100)", str(o["cases"]), "-", str(o["disagreements"])),
                 ("bank-conflict wavefronts (H200, ncu)", str(numbers["mma"]["bank_conflicts"]["patterns"]), "-",
                  str(numbers["mma"]["bank_conflicts"]["disagreements"]))]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)) for r in rows)


def build_report(out: str = "lapis-report", captures: str | None = None, resimulate: bool = False,
                 progress: bool = True) -> dict:
    """Write report.md, report.json and the figures into `out`; returns the numbers. resimulate: recompute
    every prediction instead of reading the committed cache. progress: a progress bar on stderr, shown only
    when stdout is a terminal."""
    out_dir = Path(out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # an existing file, a read-only or pseudo file system (/proc)
        raise LapisError("--out must be a folder lapis can write", out, "pass a new or existing folder") from exc
    captures_root(captures)  # fail early with a clear message
    t0 = time.time()
    with Progress(progress and sys.stdout.isatty()) as bar:
        md, numbers = _sections(out_dir, captures, resimulate, bar)
    numbers["wall_s"] = round(time.time() - t0, 2)
    (out_dir / "report.md").write_text("# lapis report\n\n```\n" + summary_table(numbers) + "\n```\n\n" + md + "\n")
    (out_dir / "report.json").write_text(json.dumps(numbers, indent=1))
    return numbers


def _sections(out_dir: Path, captures: str | None, resimulate: bool, bar: Progress) -> tuple[str, dict]:
    with bar.section("layouts"):
        md, numbers = layouts_section(captures, out_dir)
        md += "\n\n" + tma_section(captures, out_dir, numbers)
    root = captures_root(captures)
    if all(manifests(root, k) for k in ("wgmma", "cutlass_oracle", "bank")):
        with bar.section("MMA descriptors"):
            mma_md, mma_numbers = mma_section(captures, out_dir)
        md += "\n\n" + mma_md
        numbers.update(mma_numbers)
    else:
        md += "\n\n## MMA descriptors\n\nSkipped: this captures folder has no wgmma/, cutlass_oracle/ and bank/ captures."
    with bar.section("schedules"):
        sched_md, sched_numbers = schedules_section(out_dir, resimulate, captures)
    md += "\n\n" + sched_md
    numbers.update(sched_numbers)
    with bar.section("seeds"):
        seeds_md, seeds_numbers = seeds_section(out_dir)
    md += "\n\n" + seeds_md
    numbers.update(seeds_numbers)
    if timed_captures(root):
        with bar.section("calibration"):
            cal_md, cal_numbers = calibration_section(out_dir, captures, resimulate)
        md += "\n\n" + cal_md
        numbers.update(cal_numbers)
    else:
        md += "\n\n## Calibration\n\nSkipped: this captures folder has no timed gemm/ capture."
    if attention_capture.has_timed(root):
        with bar.section("kernels"):
            k_md, k_numbers = kernels_section(out_dir, captures, resimulate)
        md += "\n\n" + k_md
        numbers.update(k_numbers)
    else:
        md += "\n\n## Kernels\n\nSkipped: this captures folder has no timed attention/ capture."
    if attention_capture.has_timed(root) or timed_captures(root):
        with bar.section("predicted vs measured"):
            v_md, v_numbers = validation_section(out_dir, captures, resimulate,
                                                 progress=bar.cases if bar.enabled else False)
        md += "\n\n" + v_md
        numbers.update(v_numbers)
    else:
        md += "\n\n## Predicted vs measured (Hopper progression)\n\nSkipped: no timed attention/ or gemm/ capture."
    with bar.section("kernels no one here wrote"):
        tp_md, tp_numbers = third_party_section(captures, numbers.get("validation"))
    md += "\n\n" + tp_md
    numbers.update(tp_numbers)
    return md, numbers


def tma_section(captures: str | None, out: Path, numbers: dict) -> str:
    """The encode rule table and one off-boundary SW128 box, predicted beside measured."""
    e = numbers["layouts"]["encode"]
    md = ["## TMA: cuTensorMapEncodeTiled rules", "",
          f"{e['cases']} distinct parameter sets passed to the real driver, {e['rejected']} rejected; lapis "
          f"disagrees on {e['disagreements']}. {e['rules_covered']} of {e['rules']} rules fire in a rejected case "
          f"({e['rules_isolated']} as the only broken rule). Three more documented rules are listed as advisories: the "
          "H200 driver does not enforce them (lapis warns, the driver accepts).", "",
          "| rule | checks | source |", "|---|---|---|"]
    md += [f"| `{r['id']}` | {' '.join(r['checks'].split())} | {r['source']}{'' if r['enforced'] else ' (advisory)'} |"
           for r in rule_table()]
    fig = _off_boundary_figure(captures, out)
    md += ["", "## TMA: one SW128 box off the 1024 B boundary", ""]
    md += [fig[1], "", f"![{fig[1]}]({fig[0].name})"] if fig else ["(no such box in these captures)"]
    return "\n".join(md)


def _off_boundary_figure(captures: str | None, out: Path):
    root = captures_root(captures)
    for folder in manifests(root, "tma"):
        man, dumps = load_capture(folder)
        cfg = next((c for c in man["configs"] if c["result"]["status"] == "ok" and c["swizzle"] == 3
                    and c["dtype"] == 9 and len(c["coords"]) == 1 and c["dst_offsets"][0] % 1024 == 384
                    and c["rank"] == 2), None)
        if cfg:
            break
    else:
        return None
    run = cfg["result"]["runs"][0]
    measured = dumps[run["key"]]
    predicted = predict_region(cfg, run)
    x0, y0 = cfg["coords"][0]
    values = {(y0 + r) * cfg["strides"][0] // 2 + x0 + 8 * k + 1: (r, k)
              for r in range(cfg["box"][1]) for k in range(cfg["box"][0] // 8)}
    lo = cfg["dst_offsets"][0] - 256  # 256 B of the guard band on each side
    sl = slice(lo, lo + 256 + cfg["box"][1] * 128 + 256)
    maps = [chunk_map(a[sl].copy(), values, 2, run["sentinel"]) for a in (predicted, measured)]
    addr = cfg["result"]["dst_addrs"][0]
    title = (f"bf16 box {cfg['box'][0]}x{cfg['box'][1]}, SWIZZLE_128B, destination {hex(addr)} "
             f"(= {addr % 1024} B past a 1024 B boundary); {int((predicted != measured).sum())} bytes differ")
    path = out / "tma_sw128_off_boundary.png"
    plot_box_pair(*maps, title, str(path), first_addr=cfg["result"]["region_addr"] + lo)
    return path, title


def mma_section(captures: str | None, out: Path) -> tuple[str, dict]:
    """wgmma reads through descriptors, against the H200 captures, and one mismatched pair three ways."""
    v = validate_mma(captures)
    w, p, s = v["wgmma"], v["mismatch_pairs"], v["settled"]
    settled = lambda key: yes_no(s[key], none="not measured")  # noqa: E731
    md = ["## MMA descriptors: what wgmma reads, against H200 captures", "",
          "| wgmma cases | D mismatches | mismatch pairs | prediction failures |", "|---:|---:|---:|---:|",
          f"| {w['cases']} | {w['mismatches']} | {p['cases']} | {p['prediction_failures']} |", "",
          f"Types {', '.join(w['dtypes'])}; majors {', '.join(w['majors'])}; swizzles {', '.join(w['swizzles'])}; "
          f"N {w['n_values']}. Pairs corrupt one operand: {', '.join(p['kinds'])}. D is predicted from the "
          "captured shared-memory image and the descriptors alone, and compared exactly.", "",
          "Settled on the H200:",
          f"- LBO is ignored for swizzled K-major operands: {settled('lbo_ignored_swizzled_k_major')}.",
          "- The tensor core XORs the 16 B chunk index with ((address >> 7) - base_offset): a tile a TMA wrote "
          f"off its repeat boundary is read correctly with base offset 0: {settled('base_offset_zero_reads_tma_layout')}"
          f"; with PTX's (start >> 7) & 7: {settled('ptx_formula_base_offset_reads_tma_layout')} (that formula is "
          "for patterns anchored at the tile start).", ""]
    o = v["cutlass_oracle"]
    md += [f"Descriptor builders: CUTLASS's make_gmma_desc and make_umma_desc, run inside an sm_90a kernel on "
           f"{o['cases']} layouts ({o['k_steps']} K-steps), agree bit for bit with lapis's sm90 and sm100 builders "
           f"({o['disagreements']} disagreements). sm100 (tcgen05) is checked against CUTLASS and PTX, not hardware.",
           ""]
    b = v["bank_conflicts"]
    md += ["### Bank conflicts: wavefronts per warp-wide instruction, predicted against Nsight Compute", "",
           f"{b['patterns']} patterns, {b['conflicting_patterns']} of them conflicting; {b['disagreements']} "
           "disagreements. Counters: l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum (LDS, LDSM) and "
           "..._op_st.sum (STS, STSM), with `ncu --clock-control none`.", "",
           "| instruction | addresses | ideal | predicted | measured |", "|---|---|---:|---:|---:|"]
    rows = sorted(b["table"], key=lambda r: (r["kernel"], r["measured"], r["name"]))
    md += [f"| {r['kernel']} | {r['name']} | {r['ideal']} | {r['predicted']} | {r['measured']:g} |" for r in rows]
    md += ["", "### One mismatched pair: intended, predicted and measured", ""]
    fig = _mma_pair_figure(captures, out)
    if fig:
        md += [f"![{fig[1]}]({fig[0].name})", ""]
    md += ["Captures:", ""] + [f"- `{c['folder']}`: {c['date']}, commit `{c['commit'][:12]}`"
                               f"{' (dirty)' if c['dirty'] else ''}, `{c['command']}`" for c in v["provenance"]["captures"]]
    return "\n".join(md), {"mma": v}


def _mma_pair_figure(captures: str | None, out: Path):
    import numpy as np
    folder = manifests(captures_root(captures), "wgmma")[0]
    man = read_manifest(folder)  # through lapis.captures.safe: limits and capture.json's checksums
    case = next((c for c in man["cases"] if c["corrupt"] == ["desc-swizzle", "64B"] and c["major"] == "K"), None)
    if case is None:
        return None
    with np.load(folder / "inputs.npz") as imgs, np.load(folder / "d.npz") as ds:
        image, d = imgs[f"img{case['id']}"], ds[f"d{case['id']}"]
    reg, kin = case["result"]["region_addr"], 16
    tested = tested_matrix(case)
    index = {int(v): i for i, v in enumerate(tested.ravel())}
    ids = lambda bits: np.vectorize(lambda b: index.get(int(b), -1))(bits)  # noqa: E731
    intended = np.arange(64 * case["k_tile"]).reshape(64, -1)[:, :kin]
    predicted = ids(read_operand(image, reg, WgmmaDescriptor.decode(case["desc_a"][0] + (reg >> 4)), 64, 2, False))
    bits = (d[0].astype(np.float32).view(np.uint32) >> 16)  # D[m, n] = A[m, n % 16]: the bf16 read, exactly
    measured = ids(bits[:, :kin])
    path = out / "mma_mismatch_pair.png"
    moved = int((measured != intended).sum())
    title = (f"A tile written K-major with the 128B swizzle, descriptor says {case['corrupt'][1]} (bf16, K-step 0): "
             f"{moved} of {intended.size} elements read from elsewhere; predicted equals measured: "
             f"{yes_no(bool(np.array_equal(predicted, measured)))}")
    plot_pair([("intended", intended), ("predicted (lapis)", predicted), ("measured (H200, from D)", measured)],
              title, str(path), case["k_tile"])
    return path, title
