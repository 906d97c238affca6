"""The torch.special names added for API parity (issue 17), against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.special


def _pair(values, dtype=np.float64):
    arr = np.asarray(values, dtype=dtype)
    return ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())


X = np.linspace(-3, 3, 25)
P = np.array([0.0, 1e-6, 0.1, 0.5, 0.9, 1 - 1e-6, 1.0, -0.1, 1.5])


@pytest.mark.parametrize("name, values", [
    ("entr", np.array([-1.0, 0.0, 1e-3, 0.5, 1.0, 3.0, np.nan])), ("ndtr", X), ("ndtri", P),
    ("logit", np.array([0.1, 0.5, 0.9])), ("round", X * 1.3)])
def test_unary(name, values):
    e, t = _pair(values)
    torch.testing.assert_close(torch.from_numpy(getattr(ember.special, name)(e).numpy()),
                               getattr(torch.special, name)(t), equal_nan=True, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_binary(name):
    x = np.array([0.0, 0.0, 1.0, 2.0, -1.0, 3.0])
    y = np.array([0.0, np.nan, 0.5, 3.0, 2.0, -0.5])
    (ex, tx), (ey, ty) = _pair(x), _pair(y)
    torch.testing.assert_close(torch.from_numpy(getattr(ember.special, name)(ex, ey).numpy()),
                               getattr(torch.special, name)(tx, ty), equal_nan=True)


def test_reductions():
    e, t = _pair(np.random.default_rng(0).normal(size=(3, 4)))
    for name in ("softmax", "log_softmax"):
        torch.testing.assert_close(torch.from_numpy(getattr(ember.special, name)(e, 1).numpy()),
                                   getattr(torch.special, name)(t, 1))
    torch.testing.assert_close(torch.from_numpy(ember.special.logsumexp(e, 1).numpy()), torch.special.logsumexp(t, 1))


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYS)
def test_polynomials(name):
    x = np.linspace(-0.9, 0.9, 7) if "shifted" not in name else np.linspace(0.05, 0.95, 7)
    ex, tx = _pair(x)
    for n in (0, 1, 2, 5):
        torch.testing.assert_close(torch.from_numpy(getattr(ember.special, name)(ex, n).numpy()),
                                   getattr(torch.special, name)(tx, n), rtol=1e-9, atol=1e-9)
    # n as a tensor, broadcast against x: each element takes its own degree.
    en, tn = _pair(np.array([[0], [1], [3], [4]]), dtype=np.int64)
    torch.testing.assert_close(torch.from_numpy(getattr(ember.special, name)(ex, en).numpy()),
                               getattr(torch.special, name)(tx, tn), rtol=1e-9, atol=1e-9)
