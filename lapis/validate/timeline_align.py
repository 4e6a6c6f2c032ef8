"""Predicted and measured timelines aligned by logical ids, and the first point where they diverge.

The simulator and the real kernels name their ops differently (the simulator costs "softmax ex2" and "softmax
FMA + O rescale"; the kernel records one "softmax" span). `canonical` renames both into one vocabulary (CANONICAL
below, per kernel family) and drops what has no counterpart: the simulator's "tma" role is a hardware unit, not
a warp, and its waits on a unit are modelling artefacts. A role "ctaN/consumer0" (the simulator's name when it
runs N co-resident CTAs) becomes "consumer0"; the CTA stays in the event's cta and work_item fields. A simulator
wait for a busy unit right before an op joins that op (`canonical`).

A milestone is "role R begins op X of K/V (or K-block) index k of its n-th work item": the earliest start of a
non-wait event of that canonical op, keyed by (n, k, role, op). n is the work item's ordinal on the SM (work items
ordered by their first event), because the hardware numbers CTAs by launch order and the simulator by its own
work list: the n-th item the SM ran is the logical id both sides share. Buffer positions (ring slots) never
enter a key. Times in ns.
"""

from __future__ import annotations

import re

from lapis.pipeline_sim.recorder import Event

__all__ = ["CANONICAL", "canonical", "milestones", "first_divergence", "steady_divergence"]

# kernel family -> raw op name (simulator or kernel record) -> canonical op. Ops not listed have no counterpart on
# the other side and are dropped (pure waits keep their name: they draw the grey lane background).
CANONICAL = {
    "attention": {
        # lapis/gpu/kernels/attention_plan.json "ops" (the kernel's records)
        "issue TMA": "TMA K/V", "issue QK": "QK", "wait QK": "QK", "softmax": "softmax", "issue PV": "PV",
        "wait PV": "PV", "epilogue": "epilogue",
        # lapis/pipeline_sim/schedules/attention_h200.py (the simulator's events)
        "TMA K+V (waited)": "TMA K/V", "TMA K (waited)": "TMA K/V", "wgmma QK": "QK", "softmax ex2": "softmax",
        "softmax FMA + O rescale": "softmax", "wgmma PV": "PV", "store O": "epilogue",
    },
    "gemm": {
        # lapis/gpu/kernels/gemm_ws_plan.json ops, then lapis/pipeline_sim/schedules/gemm_ws.py's
        "issue TMA": "TMA A+B", "issue wgmma": "MMA", "wait wgmma": "MMA", "epilogue": "epilogue",
        "wgmma": "MMA",
    },
}
UNIT_ROLES = ("tma",)  # simulator roles that model a hardware unit, not a warp
UNIT_WAITS = ("wait tensor", "wait mufu", "wait fma")  # simulator waits for a unit busy with another warp's work
_CTA_PREFIX = re.compile(r"^cta\d+/")


def canonical(events, family: str) -> list:
    """Events renamed to the family's canonical ops and warp roles (module docstring); waits kept as they are,
    except a simulator wait for a busy unit (UNIT_WAITS) that ends where its role's next op starts: that is
    part of the op, as on hardware, where the warp issues at once and the unit queues the work (the kernel's
    "issue QK" span includes the stall). Raises KeyError for an unknown family."""
    names, out = CANONICAL[family], []
    starts = {(e.role, e.start_ns): e for e in events if e.kind != "wait" and e.op in names}
    for e in events:
        role = _CTA_PREFIX.sub("", e.role)
        if role in UNIT_ROLES:
            continue
        nxt = starts.get((e.role, e.end_ns)) if e.kind == "wait" and e.op in UNIT_WAITS else None
        if nxt is not None:
            out.append(Event(role, names[nxt.op], e.start_ns, e.end_ns, e.sm, e.cta, nxt.work_item, nxt.k_index,
                             nxt.kind, e.flow_from, e.id))
        elif e.op in names or e.kind == "wait":  # positional: dataclasses.replace is 10x slower on 30k events
            out.append(Event(role, names.get(e.op, e.op), e.start_ns, e.end_ns, e.sm, e.cta, e.work_item, e.k_index,
                             e.kind, e.flow_from, e.id))
    return out


def _ordinals(events) -> dict:
    """(sm, cta, work_item) -> its ordinal on the timeline, by first event start (ties: by id)."""
    first: dict = {}
    for e in events:
        key = (e.sm, e.cta, e.work_item)
        first[key] = min(first.get(key, e.start_ns), e.start_ns)
    return {key: n for n, key in enumerate(sorted(first, key=lambda k: (first[k], k)))}


def milestones(events) -> dict:
    """{(item ordinal, k_index, role, op): start ns} over the non-wait events of canonical events."""
    order, out = _ordinals(events), {}
    for e in events:
        if e.kind == "wait":
            continue
        key = (order[(e.sm, e.cta, e.work_item)], e.k_index, e.role, e.op)
        out[key] = min(out.get(key, e.start_ns), e.start_ns)
    return out


def first_divergence(predicted, measured, iteration_ns: float, tolerance_pct: float = 10.0) -> dict | None:
    """The first matched milestone, in measured time order, whose offset exceeds the tolerance; None when no
    milestone matches.

    predicted, measured: canonical events (`canonical`). Each side is anchored at its own earliest matched
    milestone; offset = (measured - its anchor) - (predicted - its anchor), ns (positive: the hardware got there
    later than the model). tolerance = tolerance_pct of `iteration_ns` (the measured steady-state iteration).
    Returns {role, op, work_item (ordinal), k_index, offset_ns, offset_pct (of iteration_ns), predicted_ns,
    measured_ns (from the anchors), tolerance_ns, matched, diverged, span: the same role's time from its previous
    matched milestone to this one, predicted and measured (where the offset built up), or None}. diverged is
    False (and the fields describe the largest offset) when every offset stays within the tolerance."""
    return _divergence(milestones(predicted), milestones(measured), iteration_ns, tolerance_pct)


def _divergence(p: dict, m: dict, iteration_ns: float, tolerance_pct: float, item: int | None = None,
                first_k: int = -1) -> dict | None:
    """first_divergence on milestone dicts, over the milestones of work item ordinal `item` (all if None) and
    K indices >= first_k."""
    keys = sorted((k for k in set(p) & set(m) if k[1] >= first_k and item in (None, k[0])), key=lambda k: (m[k], k))
    if not keys:
        return None
    p0, m0 = min(p[k] for k in keys), min(m[k] for k in keys)
    tol = tolerance_pct / 100.0 * iteration_ns
    offset = {k: (m[k] - m0) - (p[k] - p0) for k in keys}
    hit = next((k for k in keys if abs(offset[k]) > tol), None)
    diverged = hit is not None
    if hit is None:
        hit = max(keys, key=lambda k: abs(offset[k]))
    prev = max((k for k in keys if k[2] == hit[2] and m[k] < m[hit]), key=lambda k: m[k], default=None)
    span = None if prev is None else dict(
        from_op=prev[3], from_k_index=prev[1], predicted_ns=p[hit] - p[prev], measured_ns=m[hit] - m[prev])
    return dict(role=hit[2], op=hit[3], work_item=hit[0], k_index=hit[1], offset_ns=offset[hit],
                offset_pct=100.0 * offset[hit] / iteration_ns, predicted_ns=p[hit] - p0, measured_ns=m[hit] - m0,
                tolerance_ns=tol, matched=len(keys), diverged=diverged, span=span)


def steady_divergence(predicted, measured, iteration_ns: float, tolerance_pct: float = 10.0,
                      first_k: int = 2) -> dict | None:
    """`first_divergence` inside the steady state: the middle work item both timelines ran (by ordinal), from K
    index first_k on (past the ring's fill), anchored at its first matched milestone there. Where the launch
    and the first tiles dominate `first_divergence`, this names the op of the loop body that drifts."""
    p, m = milestones(predicted), milestones(measured)
    common = sorted({k[0] for k in p} & {k[0] for k in m})
    if not common:
        return None
    return _divergence(p, m, iteration_ns, tolerance_pct, item=common[len(common) // 2], first_k=first_k)
