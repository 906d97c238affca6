"""Regression tests for the autograd mismatches issue 17 lists, each against PyTorch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _grads(lib, fn, *arrays):
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *leaves)
    weights = lib.tensor(np.linspace(-1.0, 2.0, int(np.prod(out.shape))).reshape(tuple(out.shape)))
    grads = lib.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
    return [None if g is None else g.detach().numpy() for g in grads]


def _check(fn, *arrays):
    for e, t in zip(_grads(ember, fn, *arrays), _grads(torch, fn, *arrays)):
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("index", [
    lambda L: (Ellipsis, L.tensor([0, 2, 0])),
    lambda L: (slice(None), L.tensor([0, 2]), slice(1, None)),
    lambda L: (Ellipsis, L.tensor([[1], [0]]), slice(None)),
    lambda L: (L.tensor([1, 0]), Ellipsis),
])
def test_indexing_backward_with_ellipsis_and_slices(index):
    _check(lambda L, x: x[index(L)], np.arange(24.0).reshape(2, 3, 4))


def test_atan2_gradient_at_the_origin_is_zero():
    a = np.array([0.0, 0.0, 1e-200, 0.0, 1.0, -2.0])
    b = np.array([0.0, -0.0, 0.0, 1e-200, 2.0, 0.5])
    _check(lambda L, x, y: L.atan2(x, y), a, b)


@pytest.mark.parametrize("call", [
    lambda L, x: x.sum(dtype=L.int64), lambda L, x: x.prod(dtype=L.int64), lambda L, x: x.sum(0, dtype=L.int32),
    lambda L, x: x.cumsum(0, dtype=L.int64), lambda L, x: x.cumprod(0, dtype=L.int32),
    lambda L, x: L.nansum(x, dtype=L.int64),
])
def test_integer_results_of_differentiable_reductions_raise(call):
    for lib in (ember, torch):
        x = lib.tensor([[1.5, -2.0], [0.5, 3.0]], requires_grad=True)
        with pytest.raises(RuntimeError, match="Autograd not support dtype"):
            call(lib, x)
        with lib.no_grad():
            call(lib, x)  # without grad recording it is an ordinary integer result


def test_integer_results_of_nondifferentiable_ops_are_fine():
    x = ember.tensor([1.5, -2.0], requires_grad=True)
    assert x.long().tolist() == [1, -2] and x.argmax().item() == 0
    assert (x > 0).tolist() == [True, False]


def test_where_method_gradient():
    cond = np.array([True, False, True])
    _check(lambda L, x, y: x.where(L.tensor(cond), y), np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]))


def test_embedding_backward_with_zero_width_weight():
    grads = []
    for lib in (ember, torch):
        w = lib.zeros(5, 0, requires_grad=True)
        lib.embedding(w, lib.tensor([1, 2])).sum().backward()
        grads.append(tuple(w.grad.shape))
    assert grads[0] == grads[1] == (5, 0)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_bce_with_logits_gradient_at_zero_logits_of_a_strided_input(reduction):
    # The fuzzer's case: a strided, offset view whose logits include exact zeros.
    target = np.random.default_rng(1).random((4, 3))

    def fn(L, x):
        return L.binary_cross_entropy_with_logits(x[1:], L.tensor(target)[1:], None, L.tensor([1.0, 2.0, 0.5]),
                                                  reduction).reshape(-1)

    _check(fn, np.arange(12.0).reshape(4, 3) / 5 - 1)
    _check(lambda L, x: L.binary_cross_entropy_with_logits(x, L.tensor(target), None, None, reduction).reshape(-1),
           np.array([[0.0, -0.0, 800.0], [-800.0, 30.0, -30.0], [1e-8, 0.0, 2.0], [0.0, -3.0, 0.5]]))
