"""The race bench's CPU side: its arguments, FLOP count and table (the GPU run is a capture)."""

import numpy as np
import pytest

from lapis.errors import LapisError
from lapis.gpu import race


def test_flops_halve_for_causal():
    assert race.flops("8x16x4096x128", False) == 4.0 * 8 * 16 * 4096 ** 2 * 128
    assert race.flops("8x16x4096x128", True) == race.flops("8x16x4096x128", False) / 2


def test_arguments_default_to_the_five_shapes_causal_and_not_and_refuse_unknown_kernels(capsys):
    a = race.parse_args(["--out", "x"])
    assert a.kernels == ["s9", "cudnn", "flash", "fa4"] and len(a.shapes) == 5 and a.causal == "both"
    with pytest.raises(SystemExit):
        race.parse_args(["--out", "x", "--kernels", "s9,fa3"])
    assert "unknown kernels ['fa3']" in capsys.readouterr().err


def test_the_table_gives_each_kernels_time_tflops_ratio_and_clock():
    s = dict(median_us=1000.0, spread_pct=1.5, tflops=550.0, speedup_to_reference=dict(median=0.95),
             clock=dict(mhz_median=1512.0, post_mhz_median=1488.0))
    text = race.table([dict(shape="8x16x4096x128", causal=False, kernels={"attn_s9": s},
                            skipped={"fa4": "not importable"})])
    assert "attn_s9" in text and "1000.0" in text and "550" in text and "0.950" in text and "1512" in text
    assert "1488" in text
    assert "skipped: not importable" in text


def test_the_post_batch_probe_is_the_median_over_ctas_of_cycles_per_ns():
    # micro::Record per CTA: clk0, clk1, ns0, ns1, sm. 33000 cycles in 20000 ns = 1650 MHz, 34000 in 20000 =
    # 1700 MHz, 30048 in 20032 ns (one %globaltimer tick of 32 ns over 20 us) = 1500 MHz; median 1650
    rec = [[1000, 34000, 5000, 25000, 0], [0, 34000, 100, 20100, 1], [7, 30055, 64, 20096, 2]]
    assert race.post_probe_mhz(rec) == 1650.0
    assert race.post_probe_mhz(rec + [[0, 0, 0, 0, 0]]) == 1650.0  # a CTA that wrote no record is left out
    assert race.post_probe_mhz([[0, 0, 0, 0, 0]] * 3) is None


@pytest.mark.parametrize("records, words", [
    ([1000, 34000, 5000, 25000, 0, 1], "writes 5 words per CTA (micro::Record): got 6 words"),
    ([[1000, 34000, 5000, 25000]], "writes 5 words per CTA (micro::Record): got 4 words"),
    ([["a"] * 5], "records are integers"),
    (None, "records are integers"),
    ([[0, 34000, 100, float("nan"), 0]], "records are integers"),
])
def test_post_batch_records_that_are_not_the_probes_are_refused_by_name(records, words):
    with pytest.raises(LapisError, match=r"post-batch probe") as e:
        race.post_probe_mhz(records)
    assert words in str(e.value)


def test_the_manifest_names_the_post_batch_probe_and_its_units():
    from types import SimpleNamespace
    fake = SimpleNamespace(ptxas={}, fa4_error=None, sms=132)
    man = race.manifest({"gpu": "NVIDIA H200"}, fake, [], 1.0)
    assert man["post_probe"] == dict(kernel="lapis/gpu/kernels/micro_launch_v1.cu", function="micro_cta_turnover",
                                     ctas=132, threads=384, spin_ns=20_000)
    assert "post_mhz" in man["units"] and "post_mhz_median" in man["units"]
    assert man["units"]["clock"].startswith("SM MHz: the kernel's own probe")  # the existing fields stay


def test_without_a_gpu_it_says_what_it_needs(capsys):
    assert race.main(["--out", "/tmp/lapis-race-none"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_the_bracket_clock_is_the_median_over_sms_from_the_first_probes_end_to_the_seconds_start():
    # micro::Record per CTA: clk0, clk1, ns0, ns1, sm. SM 0: 1,500,000 cycles in 1,000,000 ns (1500 MHz); SM 1:
    # 1,600,000 in 1,000,000 (1600); SM 2: 1,700,000 in 1,000,000 (1700); SM 3 ran only the first probe, SM 4 only
    # the second: left out. Spans 1e6 ns each: median 1e6
    first = [[0, 1000, 0, 500, 0], [10, 2000, 0, 600, 2], [5, 3000, 0, 700, 1], [0, 9, 0, 9, 3]]
    second = [[1_501_000, 1_502_000, 1_000_500, 1_001_000, 0], [1_603_000, 1_604_000, 1_000_700, 1_001_000, 1],
              [1_702_000, 1_703_000, 1_000_600, 1_001_000, 2], [7, 8, 9, 10, 4]]
    assert race.bracket_mhz(first, second) == (1600.0, 1_000_000.0)
    assert race.bracket_mhz(first, [[0, 0, 0, 0, 0]] * 4) is None  # a probe that wrote no record


@pytest.mark.parametrize("first, second, words", [
    ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5], "the first bracket probe writes 5 words per CTA"),
    ([1, 2, 3, 4, 5], [["a"] * 5], "the second bracket probe's records are integers"),
])
def test_bracket_records_that_are_not_the_probes_are_refused_by_name(first, second, words):
    with pytest.raises(LapisError) as e:
        race.bracket_mhz(first, second)
    assert words in str(e.value)


@pytest.mark.parametrize("records, words", [
    ([[0, 30000.5, 0, 20000, 0]], "dtype float64"),
    ([["0", "30000", "0", "20000", "0"]], "dtype <U5"),
    ([[True] * 5], "dtype bool"),
    ([[0, -5, 0, 20000, 0]], "from -5 to 20000"),
    (np.array([[0, 2**64 - 1, 0, 20000, 0]], dtype=np.uint64), "to 18446744073709551615"),
])
def test_probe_records_that_are_no_counters_are_refused_not_wrapped_or_truncated(records, words):
    for fn in (race.post_probe_mhz, lambda r: race.bracket_mhz(r, r)):
        with pytest.raises(LapisError, match="integers from 0 to 2\\*\\*63 - 1") as e:
            fn(records)
        assert words in str(e.value)


def test_a_bracket_probe_with_two_ctas_on_one_sm_is_refused():
    first = [[0, 30000, 0, 20000, 0], [750000, 780000, 500000, 520000, 0]]
    second = [[1530000, 1560000, 1020000, 1040000, 0]]
    with pytest.raises(LapisError, match="one CTA per SM") as e:
        race.bracket_mhz(first, second)
    assert "SMs [0] ran more than one" in str(e.value)
