"""s7's conditional rescale: the numerics model's frequency against the count the H200 kernel made."""

import json
from pathlib import Path

import pytest

from lapis.errors import ScheduleError
from lapis.model.numerics import attention_inputs, rescale_frequency_of

CAP = Path(__file__).resolve().parents[2] / "lapis" / "data" / "captures" / "attention" / "h200-2026-11-30-s6s7-check"
MAN = json.loads((CAP / "manifest.json").read_text())


def counted(shape: str, kind: str) -> dict:
    return next(e["rescales"][f"s7/{kind}"] for e in MAN["results"] if e["shape"] == shape)


@pytest.mark.parametrize("shape", ["32x16x1024x128", "16x16x2048x128"])
def test_heavy_tailed_rescale_frequency_matches_the_kernels_count(shape):
    seq = int(shape.split("x")[2])
    got = counted(shape, "heavy")
    b, h = (int(x) for x in shape.split("x")[:2])
    assert got["row_tiles"] == b * h * seq * (seq // 128 - 1)  # every row, every tile past the first
    assert 0.1 < got["frequency"] < 0.25  # heavy tails: the max moves by > 2^8 often at these lengths
    assert rescale_frequency_of("heavy", seq, rows=128, seeds=2) == pytest.approx(got["frequency"], rel=0.15)


def test_normal_scores_never_move_the_max_past_the_threshold():
    assert counted("8x16x4096x128", "normal")["rescales"] == 0
    assert rescale_frequency_of("normal", 1024, rows=64, seeds=1) == 0.0


def test_inputs_are_named():
    q, k, v = attention_inputs("heavy", 4, 8, d=16)
    assert q.shape == (4, 16) and k.shape == v.shape == (8, 16)
    with pytest.raises(ScheduleError, match="'normal' or 'heavy'"):
        attention_inputs("cauchy", 4, 8)


@pytest.mark.parametrize("kwargs, rule", [
    (dict(seq=200), "whole K/V tiles"), (dict(seq=100), "whole K/V tiles"), (dict(block_n=0), "whole K/V tiles"),
    (dict(threshold=-1.0), "threshold"), (dict(threshold=float("nan")), "threshold"), (dict(threshold=200.0), "threshold"),
    (dict(seeds=0), "seeds"), (dict(rows=0), "at least 1")])
def test_bad_numerics_arguments_are_refused_by_rule(kwargs, rule):
    args = dict(kind="heavy", seq=256, rows=8, seeds=1) | kwargs
    with pytest.raises(ScheduleError, match=rule):
        rescale_frequency_of(args.pop("kind"), args.pop("seq"), **args)


def test_emulate_frac_is_zero_or_one_over_n():
    from lapis.model.numerics import flash_forward
    q, k, v = attention_inputs("normal", 8, 256, d=16)
    assert flash_forward(q, k, v, emulate_frac=0.25)[1]["tiles"] == 2
    with pytest.raises(ScheduleError, match="emulate_frac is 0 or 1/n"):
        flash_forward(q, k, v, emulate_frac=0.3)
