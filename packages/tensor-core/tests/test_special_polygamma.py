"""polygamma / special.polygamma / Tensor.polygamma(_) and mvlgamma against torch."""

from __future__ import annotations

import pytest
import torch

import ember

from conftest import FLOAT_NAMES, INT_NAMES, assert_same, make_pair


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("name", FLOAT_NAMES + ["int64", "uint8"])
def test_polygamma_dtypes(n, name):
    e, t = make_pair((3, 4), name, low=0.1 if name not in INT_NAMES else 1, high=6)
    rtol = 1e-4 if name == "float32" else None  # the Euler-Maclaurin sums round differently
    assert_same(ember.polygamma(n, e), torch.polygamma(n, t), rtol=rtol, atol=1e-5 if rtol else None)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
@pytest.mark.parametrize("shape", [(2, 3), (0, 3)])
def test_polygamma_layouts(layout, shape):
    if shape[0] == 0 and layout != "transposed":
        pytest.skip("an empty tensor has one layout")
    e, t = make_pair(shape, "float64", low=-3, high=3, layout=layout)
    assert_same(ember.polygamma(2, e), torch.polygamma(2, t))


def test_polygamma_0d_poles_and_negative_inputs():
    values = [-3.0, -2.5, -1.0, -0.5, 0.0, -0.0, 1e-8, 0.5, 1.0, 40.0, float("inf"), float("nan")]
    for n in range(5):
        e = ember.tensor(values, dtype=ember.float64)
        assert_same(ember.polygamma(n, e), torch.polygamma(n, torch.tensor(values, dtype=torch.float64)))
    assert_same(ember.polygamma(1, ember.tensor(2.0)), torch.polygamma(1, torch.tensor(2.0)))


def test_polygamma_methods_special_and_out():
    e, t = make_pair((2, 3), "float32", low=0.5, high=3)
    assert_same(e.polygamma(3), t.polygamma(3))
    assert_same(ember.special.polygamma(1, e), torch.special.polygamma(1, t))
    assert_same(ember.special.psi(e), torch.special.psi(t))
    out_e, out_t = ember.empty((2, 3)), torch.empty((2, 3))
    ember.polygamma(2, e, out=out_e)
    torch.polygamma(2, t, out=out_t)
    assert_same(out_e, out_t)
    e2, t2 = e.clone(), t.clone()
    assert e2.polygamma_(1) is e2
    t2.polygamma_(1)
    assert_same(e2, t2)


def test_polygamma_errors():
    e, t = make_pair((2,), "float32")
    for lib, x in ((ember, e), (torch, t)):
        with pytest.raises(RuntimeError, match="negative n"):
            lib.polygamma(-1, x)
        with pytest.raises(TypeError):
            lib.polygamma(1.0, x)
        with pytest.raises(TypeError):
            lib.polygamma(1, [1.0])


@pytest.mark.parametrize("p", [1, 2, 4])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_mvlgamma(p, name):
    e, t = make_pair((3, 2), name, low=2, high=5)
    assert_same(ember.mvlgamma(e, p), torch.mvlgamma(t, p))
    assert_same(e.mvlgamma(p), t.mvlgamma(p))
    assert_same(ember.special.multigammaln(e, p), torch.special.multigammaln(t, p))


def test_mvlgamma_errors():
    e, t = make_pair((2,), "float32", low=2, high=3)
    for lib, x in ((ember, e), (torch, t)):
        with pytest.raises(RuntimeError):
            lib.mvlgamma(x, 0)
