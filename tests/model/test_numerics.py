"""Attention numerics: bf16 rounding, the cubic exp2, and the online softmax against float64."""

import numpy as np
import pytest

from lapis.model.numerics import flash_forward, reference, relative_error, software_exp2, to_bf16


def test_bf16_rounds_to_nearest_even():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5], np.float32)
    assert list(to_bf16(x)) == [1.0, 1.0, 1 + 2 ** -6, -2.5]


def test_reference_with_one_key_returns_its_value():
    v = np.array([[3.0, -1.0]])
    assert np.allclose(reference(np.ones((2, 2)), np.ones((1, 2)), v), [[3.0, -1.0]] * 2)


def test_software_exp2_is_exact_at_integers_and_close_elsewhere():
    assert list(software_exp2(np.array([0.0, 3.0, -5.0], np.float32))) == [1.0, 8.0, 2.0 ** -5]
    x = np.linspace(-20, 20, 20001, dtype=np.float32)
    err = np.abs(software_exp2(x) / np.exp2(x.astype(np.float64)) - 1)
    assert err.max() < 1e-3  # the write-up's cubic: about 5e-4 at worst


def inputs(seed, heavy=False):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 128)) for n in (128, 1024, 1024))
    if heavy:  # scores whose row maxima move a lot from tile to tile
        q, k = q * 4, rng.standard_t(2, size=(1024, 128))
    return q, k, v


def test_without_approximations_it_is_the_reference():
    q, k, v = inputs(1)
    out, _ = flash_forward(q, k, v, ftz=False, p_bf16=False)
    ref = reference(*(to_bf16(np.float32(a)) for a in (q, k, v)))
    assert relative_error(out, ref) < 1e-5


@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("kw", [{}, {"threshold": 8.0}, {"emulate_frac": 0.25}])
def test_kernel_faithful_variants_stay_within_1e_2(heavy, kw):
    q, k, v = inputs(2, heavy)
    ref = reference(*(to_bf16(np.float32(a)) for a in (q, k, v)))
    out, stats = flash_forward(q, k, v, **kw)
    assert relative_error(out, ref) < 1e-2 and stats["tiles"] == 8


def test_skipping_small_rescales_rescales_less_and_changes_little():
    q, k, v = inputs(3, heavy=True)
    always, a = flash_forward(q, k, v)
    skipping, s = flash_forward(q, k, v, threshold=8.0)
    assert s["rescales"] < a["rescales"] and 0 < a["rescale_frequency"] < 1
    assert relative_error(skipping, always) < 1e-3
