"""An OpInfo-style sweep: every op with a CUDA kernel against the CPU kernel (itself tested
against PyTorch), over dtypes, layouts (contiguous, transposed, broadcast, scalar operands),
in-place forms and gradients (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

# ember-nn is a test-only companion of ember-cuda (installed alone, `nox -s cuda` has only the core).
F = pytest.importorskip("ember.nn.functional")

pytestmark = [pytest.mark.gpu, needs_gpu]

FLOATS = [ember.float32, ember.float16, ember.bfloat16, ember.float64]
ALL = FLOATS + [ember.int64, ember.int32, ember.bool]


def _layouts(dtype):
    a = rand((6, 7), dtype, seed=1)
    b = rand((6, 7), dtype, seed=2)
    yield "contiguous", a, b
    yield "transposed", rand((7, 6), dtype, seed=1).t(), rand((7, 6), dtype, seed=2).t()
    yield "broadcast", a, rand((7,), dtype, seed=3)
    yield "broadcast-col", rand((6, 1), dtype, seed=4), b
    yield "sliced", rand((6, 14), dtype, seed=5)[:, ::2], b
    yield "3d-permuted", rand((2, 3, 4), dtype, seed=6).permute(2, 0, 1), rand((4, 2, 3), dtype, seed=7)


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
          "logical_or", "pow", "atan2", "remainder", "fmod", "floor_divide", "bitwise_and"]


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name, dtype):
    fn = getattr(ember, name)
    for _layout, a, b in _layouts(dtype):
        if dtype in (ember.int64, ember.int32) and name in ("div", "remainder", "fmod", "floor_divide", "pow"):
            # integer division by zero raises on the CPU and is undefined on CUDA (as in PyTorch)
            b = ember.where(b == 0, ember.ones_like(b), b)
            if name == "pow":
                b = b.abs()
        try:
            want = fn(a, b)
        except (RuntimeError, NotImplementedError, TypeError) as e:
            with pytest.raises(type(e)):
                fn(a.cuda(), b.cuda())
            continue
        try:
            got = fn(a.cuda(), b.cuda())
        except NotImplementedError as e:
            assert "cuda" in str(e)
            continue
        tol = {"pow": 1e-4, "atan2": 1e-5}.get(name)
        assert_same(got, want, dtype, rtol=tol if dtype is ember.float32 else None)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.int64])
def test_binary_with_python_scalars_and_inplace(dtype):
    a = rand((5, 6), dtype)
    for fn in (lambda x: x + 2, lambda x: 3 * x, lambda x: x - 1.5, lambda x: x / 4, lambda x: x > 0,
               lambda x: ember.add(x, x, alpha=2)):
        assert_same(fn(a.cuda()), fn(a), dtype)
    g = a.cuda()
    c = a.clone()
    g.add_(1)
    c.add_(1)
    g.mul_(g)
    c.mul_(c)
    assert_same(g, c, dtype)


UNARY = ["abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "floor", "ceil",
         "round", "trunc", "sign", "square", "reciprocal", "log1p", "expm1", "erf", "isnan", "isfinite",
         "logical_not", "exp2", "log2", "atan"]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.float64, ember.int64],
                         ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    fn = getattr(ember, name)
    low = 0.1 if name in ("log", "sqrt", "rsqrt", "log1p", "log2") else -2.0
    x = rand((5, 9), dtype, low=low)
    for layout in (x, x.t(), x[:, 1::3]):
        try:
            want = fn(layout)
        except (RuntimeError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                fn(layout.cuda())
            continue
        try:
            got = fn(layout.cuda())
        except NotImplementedError as e:
            assert "cuda" in str(e)
            continue
        assert_same(got, want, dtype, rtol=1e-5 if dtype is ember.float32 else None)


@pytest.mark.parametrize("name,args", [("gelu", ()), ("silu", ()), ("leaky_relu", (0.2,)), ("hardtanh", (-0.5, 0.5)),
                                       ("softplus", (2.0, 10.0)), ("elu", (1.5,)), ("mish", ()), ("hardswish", ())])
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_activations(name, args, dtype):
    fn = getattr(F, name)
    x = rand((4, 33), dtype, low=-4, high=4)
    assert_same(fn(x.cuda(), *args), fn(x, *args), dtype, rtol=1e-5 if dtype is ember.float32 else None)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.float64, ember.int64, ember.bool])
@pytest.mark.parametrize("dims", [None, 0, 1, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(dtype, dims, keepdim):
    x = rand((5, 6, 37), dtype)
    for name in ("sum", "mean", "amax", "amin", "prod"):
        fn = getattr(ember, name)
        kwargs = {"keepdim": keepdim}
        try:
            want = fn(x, dims, **kwargs) if dims is not None else fn(x)
        except (RuntimeError, NotImplementedError, TypeError):
            continue
        got = fn(x.cuda(), dims, **kwargs) if dims is not None else fn(x.cuda())
        tol = 1e-5 if dtype is ember.float32 else None
        if dtype is ember.float16:
            tol = 5e-3
        assert_same(got, want, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_full_sums_of_many_elements(n):
    x = rand((n,), ember.float32, seed=n)
    assert_same(x.cuda().sum(), x.sum(), rtol=1e-4, atol=1e-3)
    assert_same(x.cuda().amax(), x.amax())


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64])
def test_arg_reductions(dtype):
    x = rand((7, 300), dtype)
    x[2, 5] = x[2].max()  # ties: the first index wins
    for dim in (0, 1, None):
        assert_same(ember.argmax(x.cuda(), dim), ember.argmax(x, dim))
        assert_same(ember.argmin(x.cuda(), dim), ember.argmin(x, dim))
    v, i = ember.max(x.cuda(), 1)
    v0, i0 = ember.max(x, 1)
    assert_same(v, v0, dtype)
    assert_same(i, i0)
    if dtype.is_floating_point:
        y = x.clone()
        y[3, 10] = float("nan")
        assert_same(ember.argmax(y.cuda(), 1), ember.argmax(y, 1))
        assert_same(y.cuda().amax(1), y.amax(1), dtype)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64])
@pytest.mark.parametrize("shape,dim", [((8, 100), -1), ((4, 5, 6), 1), ((3, 20000), 1), ((2, 3), 0)])
def test_softmax_and_log_softmax(dtype, shape, dim):
    x = rand(shape, dtype, low=-5, high=5)
    assert_same(ember.softmax(x.cuda(), dim), ember.softmax(x, dim), dtype, rtol=1e-5 if dtype is ember.float32
                else None, atol=1e-6 if dtype is ember.float32 else None)
    assert_same(ember.log_softmax(x.cuda(), dim), ember.log_softmax(x, dim), dtype,
                rtol=1e-5 if dtype is ember.float32 else None)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_layer_norm_forward_backward(dtype):
    x = rand((6, 4, 50), dtype)
    w, b = rand((50,), dtype, seed=3), rand((50,), dtype, seed=4)
    outs = []
    for dev in ("cpu", "cuda"):
        xx, ww, bb = (t.to(dev).detach().requires_grad_() for t in (x, w, b))
        y = F.layer_norm(xx, (50,), ww, bb)
        (y * y).sum().backward()
        outs.append((y, xx.grad, ww.grad, bb.grad))
    tol = 1e-4 if dtype is ember.float32 else 1e-9
    for g, c in zip(outs[1], outs[0]):
        assert_same(g, c, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("shape,normalized", [((3, 20000), (20000,)), ((2, 3, 160, 160), (160, 160))])
def test_layer_norm_rows_longer_than_one_block(dtype, shape, normalized):
    # rows over 16384 elements take the composed path (var_mean and elementwise kernels)
    x = rand(shape, dtype)
    w, b = rand(normalized, dtype, seed=3), rand(normalized, dtype, seed=4)
    outs = []
    for dev in ("cpu", "cuda"):
        xx, ww, bb = (t.to(dev).detach().requires_grad_() for t in (x, w, b))
        y = F.layer_norm(xx, normalized, ww, bb)
        (y * y).sum().backward()
        outs.append((y, xx.grad, ww.grad, bb.grad))
    tol = 1e-3 if dtype is ember.float32 else 5e-2
    for g, c in zip(outs[1], outs[0]):
        assert_same(g, c, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 2}, {"label_smoothing": 0.1}, {"reduction": "sum"}])
def test_cross_entropy_forward_backward(dtype, kwargs):
    logits = rand((16, 10), dtype, low=-3, high=3)
    target = ember.tensor([i % 10 for i in range(16)])
    results = []
    for dev in ("cpu", "cuda"):
        x = logits.to(dev).detach().requires_grad_()
        loss = F.cross_entropy(x, target.to(dev), **kwargs)
        loss.backward()
        results.append((loss, x.grad))
    tol = 1e-5 if dtype is ember.float32 else 1e-9
    for g, c in zip(results[1], results[0]):
        assert_same(g, c, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.float64])
def test_matmul_family(dtype):
    tol = {ember.float32: 1e-4, ember.float64: 1e-10, ember.float16: 5e-3, ember.bfloat16: 3e-2}[dtype]
    a, b = rand((33, 17), dtype, seed=1), rand((17, 9), dtype, seed=2)
    c = rand((9,), dtype, seed=3)
    assert_same(ember.mm(a.cuda(), b.cuda()), ember.mm(a, b), dtype, rtol=tol, atol=tol)
    assert_same(ember.mm(b.t().cuda().t(), b.t().cuda()), ember.mm(b, b.t()), dtype, rtol=tol, atol=tol)
    assert_same(ember.addmm(c.cuda(), a.cuda(), b.cuda(), beta=0.5, alpha=2), ember.addmm(c, a, b, beta=0.5,
                alpha=2), dtype, rtol=tol, atol=tol)
    x, y = rand((4, 6, 5), dtype), rand((4, 5, 3), dtype, seed=5)
    assert_same(ember.bmm(x.cuda(), y.cuda()), ember.bmm(x, y), dtype, rtol=tol, atol=tol)
    assert_same(ember.matmul(x.cuda(), b[:5, :3].cuda()), ember.matmul(x, b[:5, :3]), dtype, rtol=tol, atol=tol)
    assert_same(ember.matmul(x.cuda().transpose(1, 2), x.cuda()), ember.matmul(x.transpose(1, 2), x), dtype,
                rtol=tol, atol=tol)
    lin_w, lin_b = rand((7, 17), dtype, seed=8), rand((7,), dtype, seed=10)
    assert_same(F.linear(a.cuda(), lin_w.cuda(), lin_b.cuda()), F.linear(a, lin_w, lin_b), dtype, rtol=tol, atol=tol)
    v = rand((17,), dtype, seed=9)
    assert_same(ember.mv(a.cuda(), v.cuda()), ember.mv(a, v), dtype, rtol=tol, atol=tol)
    assert_same(ember.dot(v.cuda(), v.cuda()), ember.dot(v, v), dtype, rtol=tol, atol=tol)
    with pytest.raises(RuntimeError):
        ember.mm(a.cuda(), a.cuda())


def test_matmul_of_integers_is_refused():
    a = ember.ones(3, 3, dtype=ember.int64).cuda()
    with pytest.raises(NotImplementedError, match="Long"):
        ember.mm(a, a)


def test_where_fill_masked_fill_clamp_copy():
    x = rand((5, 8))
    m = x > 0
    assert_same(ember.where(m.cuda(), x.cuda(), 0.5), ember.where(m, x, 0.5))
    assert_same(ember.where(m.cuda(), x.cuda(), -x.cuda()), ember.where(m, x, -x))
    assert_same(x.cuda().masked_fill(m.cuda(), 3.0), x.masked_fill(m, 3.0))
    assert_same(ember.clamp(x.cuda(), -0.5, 0.7), ember.clamp(x, -0.5, 0.7))
    g = x.cuda()
    g.clamp_(min=0)
    assert_same(g, x.clamp(min=0))
    z = ember.zeros(5, 8, device="cuda")
    z[:, 2:5] = 1.0
    want = ember.zeros(5, 8)
    want[:, 2:5] = 1.0
    assert_same(z, want)
    h = ember.empty(8, 5, device="cuda")
    h.copy_(x.cuda().t())
    assert_same(h, x.t().contiguous())
    assert_same(ember.full((3, 2), 7, device="cuda"), ember.full((3, 2), 7))
    assert_same(ember.arange(10, device="cuda"), ember.arange(10))
    assert_same(ember.ones(4, dtype=ember.bool, device="cuda"), ember.ones(4, dtype=ember.bool))


def test_indexing_ops():
    w = rand((10, 6))
    idx = ember.tensor([3, 0, 9, 3, 1])
    assert_same(ember.index_select(w.cuda(), 0, idx.cuda()), ember.index_select(w, 0, idx))
    neg = ember.tensor([-1, 2])
    assert_same(w.cuda()[neg.cuda()], w[neg])  # advanced indexing wraps negatives, index_select does not
    assert_same(ember.index_select(w.cuda(), 1, idx[:2].cuda()), ember.index_select(w, 1, idx[:2]))
    ids = ember.tensor([[1, 2], [9, 0]])
    assert_same(F.embedding(ids.cuda(), w.cuda()), F.embedding(ids, w))
    assert_same(w.cuda()[idx.cuda()], w[idx])
    assert_same(w.cuda()[:, ember.tensor([5, 1]).cuda()], w[:, ember.tensor([5, 1])])
    assert_same(w.cuda()[ember.tensor([1, 2]).cuda(), ember.tensor([3, 4]).cuda()], w[ember.tensor([1, 2]),
                ember.tensor([3, 4])])
    gi = ember.tensor([[0, 5], [2, 2], [1, 0]])
    assert_same(ember.gather(w[:3].cuda(), 1, gi.cuda()), ember.gather(w[:3], 1, gi))
    # embedding backward accumulates repeated rows
    results = []
    for dev in ("cpu", "cuda"):
        ww = w.to(dev).detach().requires_grad_()
        (F.embedding(ember.tensor([1, 1, 4]).to(dev), ww) * 2).sum().backward()
        results.append(ww.grad)
    assert_same(results[1], results[0])


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"mask": "bool"}, {"mask": "float"}])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_scaled_dot_product_attention_forward_backward(kwargs, dtype):
    q, k, v = (rand((2, 3, 5, 8), dtype, seed=s) for s in (1, 2, 3))
    mask = None
    if kwargs.get("mask") == "bool":
        mask = rand((5, 5), ember.bool, seed=4)
        mask[:, 0] = True
    elif kwargs.get("mask") == "float":
        mask = rand((5, 5), dtype, seed=5)
    results = []
    for dev in ("cpu", "cuda"):
        qq, kk, vv = (t.to(dev).detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=None if mask is None else mask.to(dev),
                                             is_causal=kwargs.get("is_causal", False))
        (out * out).sum().backward()
        results.append((out, qq.grad, kk.grad, vv.grad))
    tol = 1e-5 if dtype is ember.float32 else 1e-10
    for g, c in zip(results[1], results[0]):
        assert_same(g, c, dtype, rtol=tol, atol=tol)
