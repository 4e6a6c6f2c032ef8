"""Predicted-vs-measured metrics on hand-built timelines (values worked out by hand)."""

import pytest

from lapis.pipeline_sim.recorder import Event
from lapis.validate.timeline_compare import busy_fractions, compare, iteration_ns


def gemm_like(period: float, n_k: int = 8, items: int = 2, mma: float = 60.0) -> list:
    """A producer issuing at each K start and a consumer wgmma of `mma` ns every `period` ns."""
    out = []
    for item in range(items):
        base = item * n_k * period
        for k in range(n_k):
            t = base + k * period
            out.append(Event("producer", "issue TMA", t, t, work_item=item, k_index=k))
            out.append(Event("consumer0", "wait full", t, t + 10, work_item=item, k_index=k, kind="wait"))
            out.append(Event("consumer0", "wgmma", t + 10, t + 10 + mma, work_item=item, k_index=k))
    return out


def test_iteration_time_is_the_period_of_the_consumer_k_loop():
    assert iteration_ns(gemm_like(100.0)) == pytest.approx(100.0)
    assert iteration_ns(gemm_like(37.5, n_k=16)) == pytest.approx(37.5)


def test_iteration_time_ignores_waits_and_producer_roles():
    ev = gemm_like(100.0)
    ev.append(Event("producer", "issue TMA", 5.0, 6.0, work_item=0, k_index=3))  # off-period producer event
    assert iteration_ns(ev) == pytest.approx(100.0)
    assert iteration_ns([e for e in ev if e.role == "producer"]) is None


def test_busy_fraction_is_the_union_of_spans_over_the_span():
    # consumer busy 60 of every 100 ns; the timeline spans 2 items x 8 K x 100 ns minus the idle tail 30 ns
    ev = gemm_like(100.0)
    span = 1600 - 100 + 10 + 60
    assert busy_fractions(ev)["consumer0"] == pytest.approx(16 * 60 / span)
    assert busy_fractions(ev)["producer"] == 0.0


def test_compare_states_the_signed_errors():
    r = compare(gemm_like(110.0), gemm_like(100.0), predicted_ns=1900.0, measured_ns=2000.0)
    assert r["total_err_pct"] == pytest.approx(-5.0)
    assert r["iteration_ns"]["err_pct"] == pytest.approx(10.0)
    assert set(r["busy"]) == {"consumer0", "producer"}
