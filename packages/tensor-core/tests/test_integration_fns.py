"""trapezoid/trapz, cumulative_trapezoid and gradient vs torch."""

from __future__ import annotations

import numpy as np
import pytest
from mathfns_helpers import LAYOUTS, grads_match, pair

import ember

from conftest import assert_same, torch


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, -1])
def test_trapezoid_spacings(dtype, layout, dim):
    e, t = pair((4, 5), dtype, layout)
    for m_e, m_t in ((ember.trapezoid, torch.trapezoid), (ember.trapz, torch.trapz)):
        assert_same(m_e(e, dim=dim), m_t(t, dim=dim))
        assert_same(m_e(e, dx=0.5, dim=dim), m_t(t, dx=0.5, dim=dim))
    n = e.shape[dim]
    xs = np.cumsum(np.linspace(0.5, 2.0, n))
    assert_same(ember.trapezoid(e, ember.tensor(xs), dim=dim), torch.trapezoid(t, torch.tensor(xs), dim=dim))
    x_e, x_t = pair((4, 5), "float64", seed=3)
    assert_same(ember.trapezoid(e, x_e, dim=dim), torch.trapezoid(t, x_t, dim=dim))
    assert_same(ember.cumulative_trapezoid(e, dim=dim), torch.cumulative_trapezoid(t, dim=dim))
    assert_same(ember.cumulative_trapezoid(e, dx=2, dim=dim), torch.cumulative_trapezoid(t, dx=2, dim=dim))
    assert_same(ember.cumulative_trapezoid(e, ember.tensor(xs), dim=dim),
                torch.cumulative_trapezoid(t, torch.tensor(xs), dim=dim))


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 0), (0, 4)])
def test_trapezoid_degenerate_shapes(shape):
    e, t = pair(shape)
    assert_same(ember.trapezoid(e), torch.trapezoid(t))
    assert_same(ember.cumulative_trapezoid(e), torch.cumulative_trapezoid(t))


def test_trapezoid_errors_and_grad():
    with pytest.raises(RuntimeError, match="one `x` value"):
        ember.trapezoid(ember.ones(3), ember.ones(4))
    with pytest.raises(IndexError):
        ember.trapezoid(ember.ones(3), dim=2)
    rng = np.random.default_rng(0)
    grads_match(lambda m, y, x: m.trapezoid(y, x), [rng.random((2, 5)), np.sort(rng.random(5))])
    grads_match(lambda m, y, x: m.cumulative_trapezoid(y, x, dim=0), [rng.random((4, 3)), rng.random((4, 3))])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("edge_order", [1, 2])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradient_uniform(dtype, edge_order, layout):
    e, t = pair((4, 5), dtype, layout)
    assert_same(ember.gradient(e, edge_order=edge_order), torch.gradient(t, edge_order=edge_order))
    assert_same(ember.gradient(e, spacing=2.5, dim=1, edge_order=edge_order),
                torch.gradient(t, spacing=2.5, dim=1, edge_order=edge_order))
    assert_same(ember.gradient(e, spacing=[0.5, 3], edge_order=edge_order),
                torch.gradient(t, spacing=[0.5, 3], edge_order=edge_order))
    assert_same(ember.gradient(e, spacing=[2.0], dim=[-2], edge_order=edge_order),
                torch.gradient(t, spacing=[2.0], dim=[-2], edge_order=edge_order))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_coordinates(edge_order):
    e, t = pair((3, 6), "float64")
    c0, c1 = [0.0, 0.5, 2.0], [0.0, 1.0, 1.5, 3.0, 3.25, 5.0]
    assert_same(ember.gradient(e, spacing=(ember.tensor(c0), ember.tensor(c1)), edge_order=edge_order),
                torch.gradient(t, spacing=(torch.tensor(c0), torch.tensor(c1)), edge_order=edge_order))
    assert_same(ember.gradient(e, spacing=[ember.tensor(c1)], dim=1, edge_order=edge_order),
                torch.gradient(t, spacing=[torch.tensor(c1)], dim=1, edge_order=edge_order))


def test_gradient_errors_and_grad():
    with pytest.raises(RuntimeError, match="edge_order"):
        ember.gradient(ember.ones(4), edge_order=3)
    with pytest.raises(RuntimeError, match="at least edge_order"):
        ember.gradient(ember.ones(2), edge_order=2)
    with pytest.raises(RuntimeError, match="list of length"):
        ember.gradient(ember.ones(3, 3), spacing=[1.0])
    with pytest.raises(IndexError):
        ember.gradient(ember.ones(3), dim=1)
    rng = np.random.default_rng(1)
    grads_match(lambda m, y: m.gradient(y, spacing=0.5, edge_order=2), [rng.random((3, 4))])
    grads_match(lambda m, y, c: m.gradient(y, spacing=(c,), dim=0), [rng.random((4, 2)), np.array([0.0, 1, 3, 4])])
