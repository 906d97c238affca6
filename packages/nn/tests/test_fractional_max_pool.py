"""Fractional max pooling (F.fractional_max_pool2d/3d, nn.FractionalMaxPool2d/3d) against PyTorch
with the same _random_samples: values, indices, gradients (overlapping windows), ratios,
unbatched input, NaN, and the argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

CASES = [
    (2, (2, 3, 9, 11), 2, {"output_size": (4, 5)}),
    (2, (1, 2, 10, 10), (3, 2), {"output_size": (5, 7)}),
    (2, (3, 9, 11), 3, {"output_size": 6}),
    (2, (2, 2, 12, 9), 2, {"output_ratio": (0.5, 0.7)}),
    (3, (1, 2, 7, 8, 9), 2, {"output_size": (3, 4, 5)}),
    (3, (2, 6, 6, 7), (2, 3, 2), {"output_ratio": 0.5}),
]


@pytest.mark.parametrize("nd, shape, kernel, kw", CASES)
def test_matches_torch(nd, shape, kernel, kw):
    rng = np.random.default_rng(len(shape) + nd)
    x = rng.standard_normal(shape)
    batched = len(shape) == nd + 2
    samples = rng.random((shape[0] if batched else 1, shape[-nd - 1], nd))
    res = []
    for lib in (torch, ember):
        fn = getattr(lib.nn.functional, f"fractional_max_pool{nd}d")
        leaf = lib.tensor(x, requires_grad=True)
        y, idx = fn(leaf, kernel, return_indices=True, _random_samples=lib.tensor(samples), **kw)
        (y * lib.arange(y.numel(), dtype=lib.float64).reshape(y.shape)).sum().backward()
        res.append((y.detach().numpy(), idx.numpy(), leaf.grad.numpy()))
    for e, t in zip(res[1], res[0]):
        np.testing.assert_array_equal(e, t)


def test_modules_nan_and_random_samples():
    x = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    x[0, 1, 3, 3] = np.nan
    s = np.random.default_rng(2).random((1, 2, 2)).astype(np.float32)
    outs = []
    for lib in (torch, ember):
        m = lib.nn.FractionalMaxPool2d(2, output_size=4, return_indices=True, _random_samples=lib.tensor(s))
        y, i = m(lib.tensor(x))
        outs.append((y.numpy(), i.numpy()))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    np.testing.assert_array_equal(outs[1][1], outs[0][1])
    y = ember.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, 0.5))(ember.randn(2, 3, 8, 8, 8))
    assert tuple(y.shape) == (2, 3, 4, 4, 4)


def test_errors():
    with pytest.raises(ValueError):
        ember.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError):
        ember.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError):
        ember.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError):
        ember.nn.functional.fractional_max_pool2d(ember.randn(1, 1, 8, 8), 2)
    with pytest.raises(RuntimeError):
        ember.nn.functional.fractional_max_pool2d(ember.randn(1, 1, 8, 8), 4, output_size=6)
    with pytest.raises(RuntimeError):
        ember.nn.functional.fractional_max_pool2d(ember.randn(8, 8), 2, output_size=4)
