"""Ops that run on CUDA tensors through their CPU kernel (``_ops_host.py``: linalg, unique, mode,
gcd/lcm, frexp, rare special functions): results on the device, equal to the CPU's, in-place forms
write into the CUDA tensor, mixed devices raise (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]


def _same(got, want):
    if isinstance(want, ember.Tensor):
        assert_same(got, want, rtol=0, atol=0)  # the same CPU kernel on the same values
    else:
        for g, w in zip(got, want):
            _same(g, w)


def test_linalg_through_the_host():
    a = rand((3, 4, 4), ember.float64, seed=1) + 4 * ember.eye(4, dtype=ember.float64)
    spd = a @ a.mT
    b = rand((3, 4, 2), ember.float64, seed=2)
    L = ember.linalg
    for fn in (L.inv, L.det, L.slogdet, L.cholesky, lambda m: L.qr(m), lambda m: L.svd(m), lambda m: L.eigh(m),
               lambda m: L.lu_factor(m), lambda m: L.inv_ex(m), lambda m: L.solve(m, b.to(m.device)),
               lambda m: L.lstsq(m, b.to(m.device)).solution, lambda m: ember.geqrf(m)):
        x = spd if fn is L.cholesky else a
        _same(fn(x.cuda()), fn(x))
    with pytest.raises(RuntimeError, match="same device"):
        L.solve(a.cuda(), b)


def test_unique_mode_integer_and_special_functions():
    x = rand((50,), ember.int64, seed=3)
    for kw in ({}, {"return_inverse": True, "return_counts": True}, {"sorted": False}):
        _same(ember.unique(x.cuda(), **kw), ember.unique(x, **kw))
    _same(ember.mode(x.reshape(5, 10).cuda(), 1), ember.mode(x.reshape(5, 10), 1))
    y = rand((50,), ember.int64, seed=4)
    _same(ember.gcd(x.cuda(), y.cuda()), ember.gcd(x, y))
    _same(ember.lcm(x.cuda(), y.cuda()), ember.lcm(x, y))
    g = x.cuda()
    assert g.gcd_(y.cuda()) is g
    _same(g, ember.gcd(x, y))
    f = rand((40,), ember.float32, low=0.1, high=5.0, seed=5)
    _same(ember.frexp(f.cuda()), ember.frexp(f))
    _same(ember.igamma(f.cuda(), f.flip(0).cuda()), ember.igamma(f, f.flip(0)))
    _same(ember.polygamma(2, f.cuda()), ember.polygamma(2, f))
    _same(ember.special.zeta(f.cuda() + 1, f.cuda()), ember.special.zeta(f + 1, f))
    _same(ember.special.i0e(f.cuda()), ember.special.i0e(f))
