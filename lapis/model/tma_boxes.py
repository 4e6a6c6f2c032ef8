"""What a TMA tile costs by its box set, on the H200: campaign version 10 (kernels/micro_tma_v3.cu) and the
mechanism its capture (micro/h200-2026-12-04-tmatile) shows.

The mechanism. One SM's TMA unit spends box_cycles on every box and, on every row of a box, the larger of
row_cycles and the row's bytes at the SM's shared-memory fill rate (smem_bytes_per_clk_sm, 128 B a clock: CUDA C++
Programming Guide, shared memory): unit_cycles(set). It is the SM's own cost, the same on one SM and on every SM
(the no-swizzle set's 272 boxes take 6.81 us a tile pair either way), and a copy takes the larger of it and its
bytes over the SM's share of L2. derive() solves box_cycles and row_cycles from the two 16 B-row sets with the
boxes unrolled, one SM, two tiles in flight (no swizzle: 272 boxes; rows16: 32 boxes; both 4096 rows of 16 B);
the 128B swizzle's sets (34 and 4 boxes of 128 B rows) test it. The run-time-loop kernel's sets cost more (its
issuing thread's address arithmetic), so only the unrolled (.fixed) items are the mechanism's.

`predict_tile_ns(p, item)` is the copy cost lapis.pipeline_sim.tma.TmaEngine gives one K/V tile pair (64 KiB) of a
version-10 item on profile `p`: the SM's load path held for bytes / the SM's equal share of the L2 bandwidth
(l2_tb_s over the item's CTAs; the tensor is L2-resident, so HBM never limits it), then tma_latency_ns; with depth d
tiles in flight the path is the limit once it is busy longer than the latency. It has no term for the boxes or rows a tile is split into, so every set
of micro_campaign.TILE_SETS is predicted alike: `python -m lapis.model.tma_boxes` prints the predictions that were
committed before the capture (`python -m lapis.model.tma_boxes --blind`, lapis/data/blind/micro/tmatile.json); without
--blind it prints the constants and, per unrolled item, measured, blind and mechanism ns.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from lapis.data import CAPTURES
from lapis.errors import CaptureError, LapisError
from lapis.model import micro_campaign as mc
from lapis.model.profile import load_profile

__all__ = ["CAPTURE", "derive", "predict_tile_ns", "predictions", "unit_cycles"]

CAPTURE = ("micro", "h200-2026-12-04-tmatile", "micro", "results.json")  # under lapis/data/captures
SOLVE = ("tmatile.noswz.fixed.one.d2", "tmatile.rows16.fixed.one.d2")  # the two items derive() solves from


def predict_tile_ns(p, item: dict) -> float:
    """ns per tile pair of a tmatile item on profile p: max(hold, (hold + latency) / depth), hold = tile bytes
    over the SM's L2 share with params.ctas SMs loading."""
    q = item["params"]
    hold = q["tile_bytes"] / (p["l2_tb_s"] * 1e3 / q["ctas"])
    return max(hold, (hold + p["tma_latency_ns"]) / q["depth"])


def predictions(profile: str = "h200") -> dict:
    """{item name: predicted ns per tile pair} for every version-10 item at the profile's SM count."""
    p = load_profile(profile)
    items = mc.items_v10_tile(int(p["sm_count"]))
    return {m["name"]: predict_tile_ns(p, m) for m in items}


def _cycles_per_tile(m: dict) -> float:
    """Median clock64 cycles of one CTA per tile pair of a tmatile measurement."""
    return float(np.median(m["raw"]["cycles"])) / m["params"]["tiles"]


def read_capture(path: Path | None = None) -> dict:
    """{name: measurement} of the tmatile capture's ok measurements. CaptureError for a file that is missing, not
    JSON, or lacks SOLVE's items; for an item whose params are not its campaign item's (micro_campaign.items_v10_tile
    at the capture's SM count); for one whose raw cycles or cta_ns are not finite numbers above zero."""
    path = path or CAPTURES.joinpath(*CAPTURE)
    fix = f"restore it from git: git checkout -- {path} (captures are never edited by hand)"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        got = {m["name"]: m for m in data["measurements"] if m.get("status") == "ok"}
        campaign = {m["name"]: m for m in mc.items_v10_tile(int(data["device_attributes"]["multiProcessorCount"]))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
        raise CaptureError("the TMA tile capture is a readable results.json with measurements and device_attributes",
                           f"{path}: {type(e).__name__}: {e}"[:300], fix) from None
    missing = [n for n in SOLVE if n not in got]
    if missing:
        raise CaptureError("the TMA tile capture holds the two items the constants are solved from", str(missing), fix)
    for name, m in got.items():
        if name.startswith("tmatile."):
            _check_item(m, campaign.get(name), path, fix)
    return got


def _check_item(m: dict, item: dict | None, path, fix: str) -> None:
    """CaptureError unless m's params are its campaign item's and its raw cycles and cta_ns are positive numbers."""
    if item is None or m.get("params") != item["params"] or m.get("kernel") != item["kernel"]:
        raise CaptureError("a TMA tile measurement's kernel and params are its campaign item's "
                           "(micro_campaign.items_v10_tile)", f"{path}: {m.get('name')!r}", fix)
    raw = m.get("raw")
    for key in ("cycles", "cta_ns"):
        vals = raw.get(key) if isinstance(raw, dict) else None
        if not (isinstance(vals, list) and vals and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v < 1e15
                for v in vals)):
            raise CaptureError("a TMA tile measurement's raw cycles and cta_ns are lists of finite numbers above zero",
                               f"{path}: {m['name']} raw.{key} = {str(vals)[:80]}", fix)


def derive(got: dict) -> dict:
    """box_cycles and row_cycles (cycles) from SOLVE's two items: equal rows (4096 of 16 B), 272 against 32 boxes.
    CaptureError for a solution that is not finite and above zero."""
    a, b = (got[n] for n in SOLVE)
    ca, cb = _cycles_per_tile(a), _cycles_per_tile(b)
    box = (ca - cb) / (a["params"]["boxes"] - b["params"]["boxes"])
    row = (cb - b["params"]["boxes"] * box) / b["params"]["box_rows"]
    if not (math.isfinite(box) and math.isfinite(row) and box > 0 and row > 0):
        raise CaptureError("the per-box and per-row TMA cycles are finite and above zero", f"box {box}, row {row}",
                           "restore the capture from git (captures are never edited by hand)")
    return dict(box_cycles=box, row_cycles=row)


def unit_cycles(item: dict, constants: dict, smem_bytes_per_clk: float) -> float:
    """The TMA unit's cycles for one tile pair of a tmatile item: boxes x box_cycles + per part, its rows x the
    larger of row_cycles and row bytes / smem_bytes_per_clk."""
    q = item["params"]
    rows_per_part = q["box_rows"] // 2
    rows = sum(rows_per_part * max(constants["row_cycles"], nbytes / smem_bytes_per_clk) for nbytes in q["row_bytes"])
    return q["boxes"] * constants["box_cycles"] + rows


def mechanism_ns(p, item: dict, constants: dict, clock_ghz: float) -> float:
    """ns per tile pair by the mechanism: the larger of the unit's cycles at clock_ghz and predict_tile_ns's
    bandwidth-and-latency time."""
    return max(unit_cycles(item, constants, p["smem_bytes_per_clk_sm"]) / clock_ghz, predict_tile_ns(p, item))


def table(profile: str = "h200") -> list[dict]:
    """Per unrolled (.fixed) item: measured ns, the blind prediction (no box term) and the mechanism's, at the
    capture's own clock (cycles / ns of the item)."""
    p, got = load_profile(profile), read_capture()
    if "smem_bytes_per_clk_sm" not in p.values or "l2_tb_s" not in p.values or "tma_latency_ns" not in p.values:
        raise CaptureError("the TMA box table needs a profile with smem_bytes_per_clk_sm, l2_tb_s and tma_latency_ns",
                           profile, "use the h200 profile (the capture is the H200's)")
    constants = derive(got)
    rows = []
    for m in mc.items_v10_tile(int(p["sm_count"])):
        if ".fixed." not in m["name"] or m["name"] not in got:
            continue
        g = got[m["name"]]
        measured = float(np.median(g["raw"]["cta_ns"])) / m["params"]["tiles"]
        clock = _cycles_per_tile(g) / measured
        rows.append(dict(name=m["name"], measured_ns=measured, blind_ns=predict_tile_ns(p, m),
                         mechanism_ns=mechanism_ns(p, m, constants, clock), solved=m["name"] in SOLVE))
    return rows


def main(argv: list[str] | None = None) -> int:
    """--blind: the blind predictions' JSON (as committed); no argument: the constants and the table. Exit 2 with
    the named error for bad input (an unknown argument, a broken capture or profile)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv not in ([], ["--blind"]):
            raise CaptureError("python -m lapis.model.tma_boxes takes no argument or --blind", " ".join(argv),
                               "run it bare for the table, or with --blind for the blind predictions")
        if argv:
            json.dump(dict(model="lapis.pipeline_sim.tma.TmaEngine on the h200 profile (bytes over the SM's L2 "
                                 "share, then tma_latency_ns; no per-box or per-row term)", profile="h200",
                           predicted_ns_per_tile=predictions()), sys.stdout, indent=1, sort_keys=True)
            print()
            return 0
        c = derive(read_capture())
        rows = table()
        print(f"box_cycles {c['box_cycles']:.1f}  row_cycles {c['row_cycles']:.3f}  (solved from {', '.join(SOLVE)})")
        print(f"{'item':30s} {'measured':>9s} {'blind':>9s} {'mechanism':>9s}  ns per tile pair")
        for r in rows:
            tag = "  (solved)" if r["solved"] else f"  {100 * (r['mechanism_ns'] / r['measured_ns'] - 1):+.1f}%"
            print(f"{r['name']:30s} {r['measured_ns']:9.1f} {r['blind_ns']:9.1f} {r['mechanism_ns']:9.1f}{tag}")
    except LapisError as e:
        print(f"lapis: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (| head): nothing more to say
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
