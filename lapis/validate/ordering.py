"""Rank agreement: do the model's predictions order measured variants the way the hardware does?"""

from __future__ import annotations


def ordering(rows: list[dict], spread_pct: float | None = None, group=lambda r: r["shape"]) -> dict:
    """Pairs of variants in one group (default: one shape) whose measured gap, 100 |a - b| / min(a, b), exceeds
    twice the spread (spread_pct when given, else the larger of the pair's own spread_pct), and how many of
    them the current model orders the same way (a predicted tie counts as wrong: it names no faster variant)."""
    pairs, right = [], 0
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if group(a) != group(b):
                continue
            gap = abs(a["measured_us"] - b["measured_us"]) / min(a["measured_us"], b["measured_us"]) * 100
            if gap <= 2 * (spread_pct if spread_pct is not None else max(a["spread_pct"], b["spread_pct"])):
                continue
            faster = a if a["measured_us"] < b["measured_us"] else b
            slower = b if faster is a else a
            ok = faster["predicted_us"] < slower["predicted_us"]
            right += ok
            pairs.append(dict(shape=a["shape"], faster=faster["variant"], slower=slower["variant"],
                              gap_pct=gap, predicted_right=ok))
    return dict(pairs=pairs, resolved=len(pairs), predicted_right=right)
