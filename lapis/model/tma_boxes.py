"""What a TMA tile costs by its box set: the prediction for campaign version 10 (kernels/micro_tma_v3.cu).

`predict_tile_ns(p, item)` is the copy cost lapis.pipeline_sim.tma.TmaEngine gives one K/V tile pair (64 KiB) of a
version-10 item on profile `p`: the SM's load path held for bytes / the SM's equal share of the L2 bandwidth
(l2_tb_s over the item's CTAs; the tensor is L2-resident, so HBM never limits it), then tma_latency_ns; with depth d
tiles in flight the path is the limit once it is busy longer than the latency. It has no term for the boxes or rows a tile is split into, so every set
of micro_campaign.TILE_SETS is predicted alike: `python -m lapis.model.tma_boxes` prints the predictions that were
committed before the capture (lapis/data/blind/micro/tmatile.json).
"""

from __future__ import annotations

import json
import sys

from lapis.model import micro_campaign as mc
from lapis.model.profile import load_profile

__all__ = ["predict_tile_ns", "predictions"]


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


def main() -> int:
    json.dump(dict(model="lapis.pipeline_sim.tma.TmaEngine on the h200 profile (bytes over the SM's L2 share, then "
                         "tma_latency_ns; no per-box or per-row term)", profile="h200",
                   predicted_ns_per_tile=predictions()), sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
