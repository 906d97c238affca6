"""The AOT backward of split/narrow: the pieces' gradients of one tensor become one cat."""

from __future__ import annotations

import numpy as np
import pytest
from inductor_test_helpers import spy_on_builds

import ember


@pytest.fixture
def built(monkeypatch):
    return spy_on_builds(monkeypatch)


def _program(x, w):
    q, k, v = (x @ w).split(4, dim=1)
    return (q * k.sigmoid() + v.tanh()).sum()


@pytest.mark.parametrize("use_parts", ["all", "gap"])
def test_split_gradients_are_one_cat(built, use_parts):
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((5, 6)), rng.standard_normal((6, 12))

    def fn(x, w):
        if use_parts == "gap":  # the middle piece unused: its gap is zeros
            q, _, v = (x @ w).split(4, dim=1)
            return (q * v).sum()
        return _program(x, w)

    results = []
    for compiled in (False, True):
        x, w = ember.tensor(x0, requires_grad=True), ember.tensor(w0, requires_grad=True)
        f = ember.compile(fn) if compiled else fn
        f(x, w).backward()
        results.append((x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    backward = built[-1].wrapper_source
    assert backward.count("# cat") <= 1, backward
