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


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64])
@pytest.mark.parametrize("kind", ["sum", "amax"])
def test_grid_stride_reduction(kind, dtype):
    from ember._cuda import _reduce

    x = rand((3, (1 << 17) + 37), dtype, seed=5)
    saved = dict(_reduce.STRIDE_CONFIG)
    try:
        for ppsm in (None, 2, 8):
            _reduce.STRIDE_CONFIG["ppsm"] = ppsm
            got, want = getattr(ember, kind)(x.cuda(), 1), getattr(ember, kind)(x, 1)
            tol = {ember.float32: (1e-4, 1e-2), ember.bfloat16: (2e-2, 2.0)}.get(dtype, (None, None))
            assert_same(got, want, rtol=tol[0], atol=tol[1])
            assert_same(getattr(ember, kind)(x[0].cuda()), getattr(ember, kind)(x[0]), rtol=tol[0], atol=tol[1])
    finally:
        _reduce.STRIDE_CONFIG.update(saved)


@pytest.mark.parametrize("dtype", [ember.bool, ember.float32])
def test_bool_triu_tril(dtype):
    x = rand((5, 7), dtype, seed=6)
    for fn in (ember.triu, ember.tril):
        for k in (0, 2, -1):
            assert_same(fn(x.cuda(), k), fn(x, k))


def test_binary_cross_entropy_checks_without_a_sync():
    F = pytest.importorskip("ember.nn.functional")
    p, t = rand((6,), low=0.05, high=0.95), rand((6,), low=0.0, high=1.0, seed=1)
    assert_same(F.binary_cross_entropy(p.cuda(), t.cuda()), F.binary_cross_entropy(p, t))
    bad = p.clone()
    bad[2] = 1.5
    F.binary_cross_entropy(bad.cuda(), t.cuda())  # queued: reported at the next synchronization
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        ember.cuda.synchronize()


def test_device_context_manager():
    with ember.device("cuda"):
        x = ember.ones(3)
        y = ember.arange(4)
        with ember.device("cpu"):
            z = ember.zeros(2)
    assert x.device.type == "cuda" and y.device.type == "cuda" and z.device.type == "cpu"
    assert ember.ones(1).device.type == "cpu"


def test_split_chunk_unbind_backward():
    # One backward node for all the pieces (a cat/stack of their gradients), on CUDA as on the CPU.
    grads = []
    for dev in ("cpu", "cuda"):
        x = rand((6, 8), seed=3).to(dev).requires_grad_()
        q, k, v = (x * 2).split(2)
        a, b = x.chunk(2, dim=1)
        rows = x.unbind(1)
        loss = (q * k).sum() + (a ** 2).sum() + rows[3].sum() * 5  # v and b get no gradient
        loss.backward()
        assert q.grad_fn is v.grad_fn and q.grad_fn.name() == "SplitBackward0"
        grads.append(x.grad)
    assert_same(grads[1], grads[0])


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64], ids=str)
def test_logcumsumexp(dtype):
    x = rand((6, 5000), dtype, low=-30, high=30, seed=4)  # rows longer than one block: carried across
    x[1, 3], x[2, 5], x[4, 7] = float("-inf"), float("inf"), float("nan")
    x[3, :4] = -1000.0
    for dim in (1, 0, -1):
        assert_same(ember.logcumsumexp(x.cuda(), dim), ember.logcumsumexp(x, dim), rtol=1e-4, atol=1e-4)
    assert_same(ember.logcumsumexp(x[0, 0].cuda(), 0), ember.logcumsumexp(x[0, 0], 0))
    with pytest.raises(NotImplementedError, match="Long"):
        ember.logcumsumexp(ember.ones(3, dtype=ember.int64, device="cuda"), 0)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64], ids=str)
def test_digamma_round_decimals_channel_shuffle(dtype):
    x = rand((300,), dtype, low=-8, high=8, seed=6)
    x[:6] = ember.tensor([0.0, -0.0, -1.0, -3.0, 1e-6, 40.0], dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype is not ember.bfloat16 else {}
    assert_same(ember.digamma(x.cuda()), ember.digamma(x), **tol)
    g = x.cuda()
    assert g.digamma_() is g
    assert_same(g, ember.digamma(x), **tol)
    leaf = x.cuda().requires_grad_()  # lgamma's gradient is digamma
    ember.lgamma(leaf).sum().backward()
    assert_same(leaf.grad, ember.digamma(x), **tol)
    for decimals in (0, 2, -1):
        assert_same(ember.round(x.cuda() * 7.3, decimals=decimals), ember.round(x * 7.3, decimals=decimals))
    y = rand((2, 6, 3, 2), dtype, seed=7)
    assert_same(ember.native_channel_shuffle(y.cuda(), 3), ember.native_channel_shuffle(y, 3))
