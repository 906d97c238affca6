"""Eager cross-entropy's label-smoothing term on huge scores (|x| ~ 1e5, 1e30) against PyTorch.

The term sum_c w[c] (lse - x[c]) was formed as -(sum(w x) - sum(w) lse), which cancels to its
rounding once |lse| is large (2e-4 relative at 1e5 in float32, the whole term at 1e30, even in
float64 for rows of equal scores). It is now summed relative to a score of the row (the exp sum's
shift, or the position's first finite score on the strided-classes path)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember

C = 10


def _scores(scale, n, seed=0):
    rng = np.random.default_rng(seed)
    if scale == 1.0:
        return rng.standard_normal(n * C).astype(np.float32)
    spread = 1e-5 if abs(scale) < 1e10 else 1e-7  # a few units apart: several classes share the softmax
    x = (scale * (1 + rng.random(n * C) * spread)).astype(np.float32)
    x[:C] = scale  # a row (and, strided, several positions) of equal scores: loss log(C)
    return x


def _loss_and_grad(mod, x, t, dtype, w, reduction, ignore_index, shape):
    dt = getattr(mod, dtype)
    xs = mod.tensor(x).to(dt).reshape(shape).detach().requires_grad_(True)
    ws = None if w is None else mod.tensor(w).to(dt)
    loss = mod.nn.functional.cross_entropy(xs, mod.tensor(t), weight=ws, reduction=reduction,
                                           ignore_index=ignore_index, label_smoothing=0.1)
    (grad,) = mod.autograd.grad(loss.sum() if reduction == "none" else loss, xs)
    return loss.detach().double().numpy(), grad.double().numpy()


def _case(scale, weighted, ignore_index, layout):
    rng = np.random.default_rng(1)
    if layout == "rows":
        shape, t = (24, C), rng.integers(0, C, 24)
        t[5] = ignore_index
    else:  # (N, C, H, W): classes strided, positions contiguous (the column kernels)
        shape, t = (4, C, 3, 2), rng.integers(0, C, (4, 3, 2))
        t[0, 0, 1] = ignore_index
    w = (rng.random(C) + 0.5).astype(np.float32) if weighted else None
    return _scores(scale, int(np.prod(shape)) // C), t, w, shape


def _close(got, want, tol):
    loss_g, grad_g = got
    loss_w, grad_w = want
    np.testing.assert_allclose(loss_g, loss_w, rtol=tol, atol=0)
    np.testing.assert_allclose(grad_g, grad_w, rtol=tol, atol=tol * np.abs(grad_w).max())


@pytest.mark.parametrize("scale", [1e5, -1e5, 1e30, 1.0])
@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_smoothing_term_matches_torch(scale, dtype, tol, layout):
    for weighted, reduction, ignore_index in itertools.product([False, True], ["mean", "sum", "none"], [-100, 2]):
        x, t, w, shape = _case(scale, weighted, ignore_index, layout)
        want = _loss_and_grad(torch, x, t, dtype, w, reduction, ignore_index, shape)
        got = _loss_and_grad(ember, x, t, dtype, w, reduction, ignore_index, shape)
        _close(got, want, tol)


@pytest.mark.parametrize("scale", [1e5, -1e5, 1e30])
@pytest.mark.parametrize("weighted", [False, True])
def test_smoothing_term_bfloat16(scale, weighted):
    # bfloat16 rows: against float64 on the bfloat16-rounded scores and weights (within the output's
    # rounding, 2^-8), and against PyTorch's bfloat16 (which rounds the weighted terms in bfloat16 too).
    for reduction, ignore_index in itertools.product(["mean", "sum", "none"], [-100, 2]):
        x, t, w, shape = _case(scale, weighted, ignore_index, "rows")
        xr = torch.tensor(x).bfloat16().double().numpy()
        wr = None if w is None else torch.tensor(w).bfloat16().double().numpy()
        exact = _loss_and_grad(torch, xr, t, "float64", wr, reduction, ignore_index, shape)
        got = _loss_and_grad(ember, x, t, "bfloat16", w, reduction, ignore_index, shape)
        _close(got, exact, 2 ** -8)
        _close(got, _loss_and_grad(torch, x, t, "bfloat16", w, reduction, ignore_index, shape), 2e-2)


def test_equal_huge_scores_give_log_c():
    # Every score 1e30: each row's smoothed loss is log(C) exactly (to rounding), in float32 and float64.
    for dt in (ember.float32, ember.float64):
        x = ember.full((3, C), 1e30, dtype=dt)
        loss = ember.nn.functional.cross_entropy(x, ember.tensor([0, 4, 9]), label_smoothing=0.3, reduction="none")
        np.testing.assert_allclose(loss.double().numpy(), np.full(3, np.log(C)), rtol=1e-6, atol=1e-6)
