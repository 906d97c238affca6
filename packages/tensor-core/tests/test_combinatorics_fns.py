"""isin, combinations, vander, tril_indices/triu_indices vs torch."""

from __future__ import annotations

import numpy as np
import pytest
from mathfns_helpers import LAYOUTS, grads_match, pair

import ember

from conftest import assert_same, torch


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "uint8", "float16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_isin_dtypes_layouts(dtype, layout):
    e, t = pair((4, 5), dtype, layout)
    te, tt = pair((6,), dtype, seed=3)
    for invert in (False, True):
        for unique in (False, True):
            assert_same(ember.isin(e, te, assume_unique=unique, invert=invert),
                        torch.isin(t, tt, assume_unique=unique, invert=invert))


def test_isin_scalars_mixed_dtypes_and_special_values():
    e, t = pair((3, 4), "int64")
    assert_same(ember.isin(e, 2), torch.isin(t, 2))
    assert_same(ember.isin(2, e), torch.isin(2, t))
    assert_same(ember.isin(e, ember.tensor([1.5, 2.0])), torch.isin(t, torch.tensor([1.5, 2.0])))
    vals = [float("nan"), 1.0, float("inf"), -0.0]
    assert_same(ember.isin(ember.tensor(vals), ember.tensor([0.0, float("nan"), float("inf")])),
                torch.isin(torch.tensor(vals), torch.tensor([0.0, float("nan"), float("inf")])))
    assert_same(ember.isin(ember.ones(2, 0), ember.ones(3)), torch.isin(torch.ones(2, 0), torch.ones(3)))
    assert_same(ember.isin(ember.ones(2), ember.ones(0)), torch.isin(torch.ones(2), torch.ones(0)))
    assert_same(ember.isin(ember.tensor(3), ember.tensor([[3]])), torch.isin(torch.tensor(3), torch.tensor([[3]])))


def test_isin_errors():
    with pytest.raises(TypeError):
        ember.isin(1, 2)
    with pytest.raises(RuntimeError, match="Unsupported input type"):
        ember.isin(ember.ones(2, dtype=ember.complex64), ember.ones(2, dtype=ember.complex64))
    with pytest.raises(RuntimeError, match="Bool"):  # as torch
        ember.isin(ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bool))


@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_combinations(r, with_replacement, n):
    e, t = pair((n,), "int64")
    assert_same(ember.combinations(e, r, with_replacement), torch.combinations(t, r, with_replacement))


def test_combinations_errors_and_grad():
    with pytest.raises(RuntimeError, match="1D vector"):
        ember.combinations(ember.ones(2, 2))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.combinations(ember.ones(2), -1)
    grads_match(lambda m, x: m.combinations(x, 2), [np.random.default_rng(0).random(4)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "bool"])
@pytest.mark.parametrize("N", [None, 0, 1, 4])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander(dtype, N, increasing):
    e, t = pair((4,), dtype, "sliced", low=-2, high=3)
    assert_same(ember.vander(e, N, increasing), torch.vander(t, N, increasing))


def test_vander_errors_empty_and_grad():
    assert_same(ember.vander(ember.ones(0)), torch.vander(torch.ones(0)))
    with pytest.raises(RuntimeError, match="one-dimensional"):
        ember.vander(ember.ones(2, 2))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.vander(ember.ones(2), N=-1)
    # torch.vander's own backward fails (in-place cumprod on a slice): compare with x ** powers.
    grads_match(lambda m, x: m.vander(x, 4) if m is ember else x.unsqueeze(1) ** torch.arange(3, -1, -1),
                [np.random.default_rng(1).random(3)])


@pytest.mark.parametrize("row, col", [(0, 0), (1, 1), (3, 4), (5, 2)])
@pytest.mark.parametrize("offset", [-2, 0, 1, 5])
def test_triangle_indices(row, col, offset):
    assert_same(ember.tril_indices(row, col, offset), torch.tril_indices(row, col, offset))
    assert_same(ember.triu_indices(row, col, offset), torch.triu_indices(row, col, offset))
    assert_same(ember.triu_indices(row, col, offset, dtype=ember.int32),
                torch.triu_indices(row, col, offset, dtype=torch.int32))


def test_triangle_indices_errors():
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.tril_indices(-1, 2)
    with pytest.raises(RuntimeError):
        ember.triu_indices(2, 2, dtype=ember.float32)
