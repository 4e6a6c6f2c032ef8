"""Per-role busy and wait fractions: unions of spans, so a role is never more than 100% accounted for."""

import pytest

from lapis.pipeline_sim.recorder import Event
from lapis.pipeline_sim.simulate import SCHEDULES, default_gpu, role_summary, simulate


def test_overlapping_ops_count_once_and_waits_under_ops_are_not_waiting():
    events = [Event("mma", "QK", 0, 40), Event("mma", "PV", 20, 60),  # overlapped: busy 0-60
              Event("mma", "wait K", 50, 80, kind="wait"),  # 50-60 hidden under PV; 20 ns waiting
              Event("tma", "load", 0, 100, kind="completion")]  # the TMA engine is not a role
    s = role_summary(events, 100.0)
    assert set(s) == {"mma"}
    assert s["mma"]["busy"] == pytest.approx(0.6) and s["mma"]["wait"] == pytest.approx(0.2)
    assert s["mma"]["waits_on"] == {"wait K": 30}


def _small(name):
    return "1024x1024x512" if "gemm" in name else "1x8x4096x64" if name.startswith("sm120") else "2x16x2048x128"


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_no_role_is_over_accounted(name):
    r = simulate(name, default_gpu(name), _small(name))
    for role, v in r["roles"].items():
        assert 0 <= v["busy"] and 0 <= v["wait"] and v["busy"] + v["wait"] <= 1 + 1e-9, role


def test_a_queued_wgmma_is_a_wait_not_mma_time():
    # two consumer warpgroups share one tensor pipe: the second one's queueing shows as "wait tensor"
    events = simulate("h200-gemm-ws", "h200", "1024x1024x512")["_events"]
    mma = [e for e in events if e.op == "wgmma"]
    assert len({round(e.end_ns - e.start_ns, 6) for e in mma}) == 1  # every wgmma lasts the same
    waits = [e for e in events if e.op == "wait tensor"]
    assert waits and all(any(abs(w.end_ns - m.start_ns) < 1e-9 for m in mma if m.role == w.role) for w in waits)
