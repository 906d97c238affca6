"""cat, any/all and the cumsum/cumprod scans on CUDA against the CPU kernels (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim):
    a, b = rand((3, 4, 5)), rand((3, 4, 5), ember.float16, seed=1)
    parts = [a, b.transpose(0, 1).transpose(0, 1), a[:, :, :5]]
    assert_same(ember.cat([t.cuda() for t in parts], dim), ember.cat(parts, dim))
    assert_same(ember.cat([ember.empty(0).cuda(), a.cuda()], 0), ember.cat([ember.empty(0), a], 0))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        ember.cat([a.cuda(), rand((2, 2, 2)).cuda()], 1)


@pytest.mark.parametrize("fn", ["any", "all"])
def test_any_all(fn):
    x = (rand((4, 6), ember.int64) > 0)
    for args in ((), (1,), (0, True)):
        assert_same(getattr(ember, fn)(x.cuda(), *args), getattr(ember, fn)(x, *args))
    empty = ember.empty(0, 3)
    assert_same(getattr(ember, fn)(empty.cuda()), getattr(ember, fn)(empty))
    f = rand((5,))
    assert_same(getattr(ember, fn)(f.cuda()), getattr(ember, fn)(f))


@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.int64, ember.bfloat16])
def test_scans(fn, dtype):
    x = rand((3, 5000), dtype, low=0.9, high=1.1) if fn == "cumprod" else rand((3, 5000), dtype)
    for dim in (1, 0):
        got, want = getattr(ember, fn)(x.cuda(), dim), getattr(ember, fn)(x, dim)
        # Sums of thousands of terms in another order: tolerances of the accumulated rounding.
        tol = {ember.float32: (1e-3, 1e-3), ember.bfloat16: (2e-2, 0.5)}.get(dtype, (None, None))
        assert_same(got, want, rtol=tol[0], atol=tol[1])
    assert getattr(ember, fn)(x.cuda(), 1, dtype=ember.float64).dtype is ember.float64
