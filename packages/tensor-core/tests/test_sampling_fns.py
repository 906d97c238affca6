"""poisson and binomial: moments, determinism under a Generator, dtypes and errors as torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember

from conftest import torch


@pytest.mark.parametrize("rate", [0.0, 0.3, 4.0, 9.9, 10.0, 60.0, 2500.0])
def test_poisson_moments(rate):
    g = ember.Generator().manual_seed(1)
    draws = ember.poisson(ember.full((20000,), rate, dtype=ember.float64), generator=g).numpy()
    assert np.all(draws == np.floor(draws)) and np.all(draws >= 0)
    scale = max(rate, 1.0) ** 0.5
    assert abs(draws.mean() - rate) < 0.05 * scale
    assert abs(draws.var() - rate) < 0.1 * max(rate, 0.1) + 0.02


@pytest.mark.parametrize("count, prob", [(0.0, 0.3), (1.0, 0.5), (7.0, 0.2), (40.0, 0.9), (1000.0, 0.35),
                                         (50.0, 0.0), (50.0, 1.0), (3e5, 1e-4)])
def test_binomial_moments(count, prob):
    g = ember.Generator().manual_seed(2)
    draws = ember.binomial(ember.full((20000,), count), ember.full((20000,), prob), generator=g).numpy()
    assert np.all(draws == np.floor(draws)) and np.all(draws >= 0) and np.all(draws <= count)
    mean, var = count * prob, count * prob * (1 - prob)
    assert abs(draws.mean() - mean) < 0.05 * max(var, 1.0) ** 0.5
    assert abs(draws.var() - var) < 0.1 * max(var, 0.1) + 0.02


def test_determinism_shapes_dtypes_and_broadcast():
    rates = ember.tensor([[1.0, 20.0], [3.0, 0.5]])
    a = ember.poisson(rates, generator=ember.Generator().manual_seed(5))
    b = ember.poisson(rates, generator=ember.Generator().manual_seed(5))
    assert a.tolist() == b.tolist() and a.dtype == ember.float32
    many = ember.full((200,), 20.0)
    assert (ember.poisson(many, generator=ember.Generator().manual_seed(5)).tolist()
            != ember.poisson(many, generator=ember.Generator().manual_seed(6)).tolist())
    assert ember.poisson(ember.ones(3, dtype=ember.float16)).dtype == ember.float16
    assert ember.poisson(ember.ones(0, 2)).shape == (0, 2)
    assert ember.poisson(ember.tensor(4.0)).shape == ()
    bino = ember.binomial(ember.full((3, 1), 10.0), ember.tensor([0.1, 0.5, 0.9]))
    assert bino.shape == (3, 3) and bino.dtype == ember.float32
    ember.manual_seed(0)
    first = ember.poisson(rates).tolist()
    ember.manual_seed(0)
    assert ember.poisson(rates).tolist() == first


def test_errors_like_torch():
    for m in (ember, torch):
        with pytest.raises(NotImplementedError):
            m.poisson(m.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="non-negative"):
            m.poisson(m.tensor([-1.0]))
        with pytest.raises(ValueError, match="floating-point"):
            m.binomial(m.tensor([1, 2]), m.tensor([0.5, 0.5]))
        with pytest.raises(RuntimeError, match="expected Float"):
            m.binomial(m.tensor([1.0]), m.tensor([0.5], dtype=m.float64))
        with pytest.raises(NotImplementedError):
            m.binomial(m.tensor([1.0], dtype=m.float16), m.tensor([0.5], dtype=m.float16))


def test_zero_gradient():
    for m in (ember, torch):
        x = m.tensor([1.0, 5.0], requires_grad=True)
        y = m.poisson(x)
        assert y.requires_grad
        y.sum().backward()
        assert x.grad.tolist() == [0.0, 0.0]


def test_binomial_of_a_nan_count_returns_instead_of_looping():
    """A NaN count sent the inversion sampler into an endless loop (PyTorch 2.13's CPU sampler too): it gives NaN,
    and the cases PyTorch decides before sampling (prob <= 0, count <= 0, prob >= 1) stay PyTorch's."""
    nan = float("nan")
    count = ember.tensor([nan, nan, nan, nan, 10.0, -1.0, 10.0], dtype=ember.float64)
    prob = ember.tensor([0.5, 0.9, 0.0, 1.0, nan, 0.5, 1.5], dtype=ember.float64)
    got = ember.binomial(count, prob).tolist()
    assert math.isnan(got[0]) and math.isnan(got[1]) and math.isnan(got[3]) and math.isnan(got[4])
    assert got[2] == 0.0 and got[5] == 0.0 and got[6] == 10.0


def test_poisson_of_a_nan_rate_raises_as_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            lib.poisson(lib.tensor([1.0, float("nan")]))
