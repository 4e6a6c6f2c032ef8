"""The timing protocol with fake launches: rotation, counts, medians, spreads, per-round ratios, clocks."""

import pytest

from lapis.errors import LapisError
from lapis.gpu import protocol


def fake_batch(times: dict, log: list):
    """time_batch whose kernel `name` takes times[name][round] µs (every launch of a batch alike)."""
    seen: dict = {}

    def time_batch(launch, n_sets, launches):
        name = launch(0)
        r = seen.get(name, 0)
        seen[name] = r + 1
        log.append(name)
        return [times[name][r]] * launches
    return time_batch


def kernel(name, probe=None):
    return protocol.Timed(name, lambda i, n=name: n, probe=probe)


def test_rounds_rotate_and_every_kernel_leads():
    log = []
    times = {"a": [10.0] * 5, "b": [20.0] * 5, "c": [5.0] * 5}
    r = protocol.run([kernel("a"), kernel("b"), kernel("c")], fake_batch(times, log))
    assert r["order"][:3] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert log[:6] == ["a", "b", "c", "b", "c", "a"]
    assert r["kernels"]["a"]["launches"] == 5 * 30


def test_ratios_are_taken_per_round_then_summarised():
    """The reference slows down in round 3 (a clock dip) and so does the kernel: the per-round ratio stays 2."""
    times = {"ref": [20.0, 20.0, 30.0, 20.0, 20.0], "fast": [10.0, 10.0, 15.0, 10.0, 10.0]}
    r = protocol.run([kernel("ref"), kernel("fast")], fake_batch(times, []))
    s = r["kernels"]["fast"]["speedup_to_reference"]
    assert s["per_round"] == [2.0, 2.0, 2.0, 2.0, 2.0] and s["median"] == 2.0 and s["iqr"] == 0.0
    assert r["kernels"]["fast"]["median_us"] == 10.0
    # the pooled medians alone would not tell the dip apart; the spread shows it
    assert r["kernels"]["ref"]["spread_pct"] == 0.0 and r["kernels"]["ref"]["round_median_us"][2] == 30.0


def test_the_spread_is_the_iqr_over_the_median():
    times = {"k": [8.0, 9.0, 10.0, 11.0, 12.0]}
    r = protocol.run([kernel("k")], fake_batch(times, []))
    assert r["kernels"]["k"]["spread_pct"] == pytest.approx(100 * (11.0 - 9.0) / 10.0)


def test_a_probing_kernel_reports_its_probe_and_the_samples_the_others_the_sampled_clock():
    times = {"lapis": [10.0] * 5, "cudnn": [10.0] * 5}
    r = protocol.run([kernel("lapis", probe=lambda: 1500.0), kernel("cudnn")], fake_batch(times, []),
                     sample_clock=lambda t0, t1: 1600.0)
    assert r["kernels"]["lapis"]["clock"] == dict(mhz_median=1500.0, mhz_min=1500.0, mhz_max=1500.0, source="probe",
                                                  sampled_mhz_median=1600.0)
    assert r["kernels"]["cudnn"]["clock"]["source"] == "sampled" and r["kernels"]["cudnn"]["clock"]["mhz_median"] == 1600.0


@pytest.mark.parametrize("rounds, launches", [(4, 30), (5, 29)])
def test_fewer_rounds_or_launches_than_the_protocol_asks_are_refused(rounds, launches):
    with pytest.raises(LapisError, match="at least 5 rounds of 30 launches"):
        protocol.run([kernel("k")], fake_batch({"k": [1.0] * 5}, []), rounds=rounds, launches=launches)


def test_two_kernels_of_one_name_are_refused():
    with pytest.raises(LapisError, match="distinct names"):
        protocol.run([kernel("k"), kernel("k")], fake_batch({"k": [1.0] * 10}, []))


def test_every_kernel_gets_the_post_batch_probe_per_round_beside_its_own_clock():
    times = {"lapis": [10.0] * 5, "cudnn": [10.0] * 5}
    post = iter([1400.0, 1410.0, 1420.0, 1430.0, 1440.0, 1450.0, 1460.0, 1470.0, 1480.0, 1490.0])
    r = protocol.run([kernel("lapis", probe=lambda: 1500.0), kernel("cudnn")], fake_batch(times, []),
                     sample_clock=lambda t0, t1: 1600.0, post_clock=lambda: next(post))
    # one probe after each batch, in the rounds' order: lapis first in rounds 0, 2, 4, cudnn in 1 and 3
    lapis, cudnn = r["kernels"]["lapis"]["clock"], r["kernels"]["cudnn"]["clock"]
    assert lapis["post_mhz"] == [1400.0, 1430.0, 1440.0, 1470.0, 1480.0] and lapis["post_mhz_median"] == 1440.0
    assert cudnn["post_mhz"] == [1410.0, 1420.0, 1450.0, 1460.0, 1490.0] and cudnn["post_mhz_median"] == 1450.0
    assert lapis["mhz_median"] == 1500.0 and lapis["source"] == "probe" and lapis["sampled_mhz_median"] == 1600.0
    assert cudnn["mhz_median"] == 1600.0 and cudnn["source"] == "sampled"


def test_a_kernel_with_only_the_post_batch_probe_has_a_clock_of_that_alone():
    r = protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), sample_clock=lambda t0, t1: None,
                     post_clock=lambda: 1475.0)
    assert r["kernels"]["fa4"]["clock"] == dict(post_mhz_median=1475.0, post_mhz=[1475.0] * 5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -5.0, "1650", True, [1650.0]])
def test_a_post_batch_reading_that_is_no_clock_is_refused_at_once(bad):
    # NaN was written to the manifest as NaN (which the race reader then refuses), "1650" and True taken as numbers
    with pytest.raises(LapisError, match="post_clock returns the post-batch probe's SM clock in MHz") as e:
        protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), post_clock=lambda: bad)
    assert f"{bad!r} after fa4's batch of round 0" in str(e.value)


def test_a_numpy_post_batch_reading_is_a_float():
    import numpy as np
    r = protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), post_clock=lambda: np.float64(1475.0))
    assert r["kernels"]["fa4"]["clock"]["post_mhz"] == [1475.0] * 5
    assert type(r["kernels"]["fa4"]["clock"]["post_mhz"][0]) is float


def test_every_kernel_gets_the_bracket_clock_and_its_busy_fraction_per_round():
    """30 launches of 10 µs in a bracket of 400 µs: busy 0.75 (the GPU idled a quarter of the span)."""
    times = {"lapis": [10.0] * 5, "fa4": [10.0] * 5}
    readings = iter([(1500.0 + i, 400_000.0) for i in range(10)])
    r = protocol.run([kernel("lapis", probe=lambda: 1500.0), kernel("fa4")], fake_batch(times, []),
                     bracket_clock=lambda: next(readings))
    lapis, fa4 = (r["kernels"][n]["clock"] for n in ("lapis", "fa4"))
    assert lapis["bracket_mhz"] == [1500.0, 1503.0, 1504.0, 1507.0, 1508.0] and lapis["bracket_mhz_median"] == 1504.0
    assert fa4["bracket_mhz"] == [1501.0, 1502.0, 1505.0, 1506.0, 1509.0] and fa4["bracket_mhz_median"] == 1505.0
    assert fa4["busy"] == [0.75] * 5 and "mhz_median" not in fa4
    assert lapis["mhz_median"] == 1500.0  # the kernel's own probe stays its clock


@pytest.mark.parametrize("bad", [(0.0, 1e5), (1500.0, -1.0), (float("nan"), 1e5), (True, 1e5), ("1500", 1e5),
                                 1500.0, (1500.0,)])
def test_a_bracket_reading_that_is_no_clock_and_span_is_refused_at_once(bad):
    with pytest.raises(LapisError, match=r"bracket_clock returns \(SM MHz, span ns\)") as e:
        protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), bracket_clock=lambda: bad)
    assert "after fa4's batch of round 0" in str(e.value)


def test_the_event_timer_brackets_the_launches_and_leaves_the_wait_after_the_second_probe():
    from types import SimpleNamespace
    log = []

    class Event:
        def record(self):
            log.append("event")

        def synchronize(self):
            log.append("wait")

    cuda = SimpleNamespace(Event=Event, Device=lambda: SimpleNamespace(synchronize=lambda: log.append("sync")),
                           get_elapsed_time=lambda e0, e1: 0.01)
    bracket = SimpleNamespace(before=lambda: log.append("before"), after=lambda: log.append("after"))
    us = protocol.event_batch(SimpleNamespace(cuda=cuda), None, bracket)(lambda i: log.append(f"launch{i}"), 2, 30)
    assert us == [10.0] * 30
    timed = log[log.index("sync") + 1:]
    assert timed[0] == "before" and timed[1:4] == ["event", "launch0", "event"]
    assert timed[-3:] == ["event", "after", "wait"] and timed.count("launch1") == 15


@pytest.mark.parametrize("bad", [(10**400, 1e6), (1500.0, 10**400), (1e9, 1e6), (50.0, 1e6), {1500.0, 1e6},
                                 {1500.0: 1e6}])
def test_a_bracket_reading_out_of_range_or_not_a_pair_is_refused(bad):
    with pytest.raises(LapisError, match=r"bracket_clock returns \(SM MHz, span ns\)"):
        protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), bracket_clock=lambda: bad)


def test_a_batch_longer_than_its_bracket_is_refused():
    """30 launches of 10 µs cannot fit in a bracket of 1 µs: the probes did not bracket the batch."""
    with pytest.raises(LapisError, match=r"fit inside its bracket \(busy <= 1.01\)") as e:
        protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), bracket_clock=lambda: (1500.0, 1000.0))
    assert "busy 300.0" in str(e.value)


def test_a_huge_integer_post_batch_reading_is_refused_by_name():
    with pytest.raises(LapisError, match="post_clock returns the post-batch probe's SM clock"):
        protocol.run([kernel("fa4")], fake_batch({"fa4": [10.0] * 5}, []), post_clock=lambda: 10**400)
