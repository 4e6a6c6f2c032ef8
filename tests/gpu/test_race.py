"""The race bench's CPU side: its arguments, FLOP count and table (the GPU run is a capture)."""

import pytest

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
             clock=dict(mhz_median=1512.0))
    text = race.table([dict(shape="8x16x4096x128", causal=False, kernels={"attn_s9": s},
                            skipped={"fa4": "not importable"})])
    assert "attn_s9" in text and "1000.0" in text and "550" in text and "0.950" in text and "1512" in text
    assert "skipped: not importable" in text


def test_without_a_gpu_it_says_what_it_needs(capsys):
    assert race.main(["--out", "/tmp/lapis-race-none"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err
